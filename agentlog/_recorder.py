"""``record()``: open a run, write its records, close it.

Example:
    >>> import agentlog as al
    >>> with al.record("/tmp/doc-run.zst", system="demo", seed=7, task="q-1") as run:
    ...     go = al.proceed(0.5, name="stop")
"""

from __future__ import annotations

import itertools
import os
import threading
import uuid
import warnings
import weakref
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Literal

from . import _live, _state
from ._encoding import REDACTED, encode, scrub, seal
from ._errors import ArtifactEncodingError, InstrumentationWarning
from ._noise import GENERATOR_ID
from ._otel import tracer as _tracer
from ._records import LLMCall, RunEnd, RunStart, Score
from ._state import Run, current_run_var, current_window_var, window_in
from ._version import __version__
from ._writer import TraceWriter, release_writer, shared_writer

INLINE_MAX = 2048  # artifacts larger than this are stored once as content-addressed Blobs

_run_counters: weakref.WeakKeyDictionary[TraceWriter, itertools.count[int]] = (
    weakref.WeakKeyDictionary()
)
_counter_lock = threading.Lock()
_active_lock = threading.Lock()


def _next_run_index(writer: TraceWriter) -> int:
    with _counter_lock:
        counter = _run_counters.get(writer)
        if counter is None:
            counter = _run_counters[writer] = itertools.count()
    return next(counter)


def _check_meta(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    if meta is None:
        return {}
    if not isinstance(meta, Mapping) or not all(isinstance(k, str) for k in meta):
        raise TypeError(f"`meta` must be a mapping with str keys; found {type(meta).__name__}")
    out = dict(meta)
    encode(out, what="record(meta=...)")  # fail now, with the field named, not in the writer
    return out


class record:
    """Record one run into the trace file at ``path``.

    Use as ``with al.record(...) as run:`` or ``async with``. Runs nest (the inner run
    records its parent's id); several runs may share one file (one writer per path per
    process). Run and window state live in context variables, so concurrent asyncio tasks
    and threads started with ``agentlog.context.copy_context_executor`` are attributed to
    the run they were started in. Another *process* does not inherit the run: open a
    ``record()`` in the child (with its own file).

    Args:
        path: trace file to create (an existing file is replaced).
        system: name of the system under test (a leaderboard row).
        seed: run seed; keys every ``select``/``proceed`` draw.
        task: task id.
        meta: JSON-like metadata (str keys), e.g. ``{"backbone": "qwen3-8b", "cluster": "q7"}``.
        redact: ``redact(payload) -> payload``, applied to every artifact, score payload and
            model request before it is encoded.
        durability: ``"frame"`` (default; a frame at least every ``frame_interval`` seconds)
            or ``"window"`` (also a frame at every window exit: safer, larger files).
        frame_interval: seconds between frame cuts at most.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        system: str = "agent",
        seed: int = 0,
        task: str | None = None,
        meta: Mapping[str, Any] | None = None,
        redact: Callable[[Any], Any] | None = None,
        durability: Literal["frame", "window"] = "frame",
        frame_interval: float = 1.0,
    ) -> None:
        if durability not in ("frame", "window"):
            raise ValueError(f"`durability` must be 'frame' or 'window'; found {durability!r}")
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise TypeError(f"`seed` must be an int; found {type(seed).__name__}")
        if not 0 <= seed < 2**64:
            raise ValueError(f"`seed` must be in [0, 2**64); found {seed}")
        if not isinstance(system, str):
            raise TypeError(f"`system` must be a str; found {type(system).__name__}")
        self.path = os.fspath(path)
        self.system = system
        self.seed = seed
        self.task = task
        self.meta = _check_meta(meta)
        self.redact = redact
        self.durability = durability
        self.frame_interval = frame_interval
        self.run: Run | None = None
        self._tokens: tuple[Any, Any] | None = None
        self._span_token: Any = None  # the run span's context token (_live)

    # -- sync -------------------------------------------------------------------------
    def __enter__(self) -> Run:
        if self.run is not None:
            raise RuntimeError("this record() is already open; create a new one per run")
        parent = current_run_var.get()
        writer = shared_writer(
            self.path, frame_interval=self.frame_interval, durability=self.durability
        )
        run = Run(
            run_id=uuid.uuid4().hex,
            index=_next_run_index(writer),
            path=self.path,
            system=self.system,
            seed=self.seed,
            task=self.task,
            meta=self.meta,
            writer=writer,
            redact=self.redact,
            durability=self.durability,
            tracer=_tracer(),
            parent_run=parent.run_id if parent is not None else None,
        )
        meta = self.meta if self.redact is None else _redacted(self.redact, self.meta)
        start = RunStart(
                run=run.index,
                run_id=run.run_id,
                system=run.system,
                seed=run.seed,
                task=run.task,
                meta=meta,
                t_ns=run.t0_ns,
                generator=GENERATOR_ID,
                agentlog_version=__version__,
                parent_run=run.parent_run,
                pid=os.getpid(),
            )
        writer.put(start)
        self._span_token = None if run.tracer is None else _live.start_run(run, start)
        self.run = run
        self._tokens = (current_run_var.set(run), current_window_var.set(None))
        with _active_lock:
            _state.active_runs += 1
        return run

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        run = self.run
        if run is None or self._tokens is None:
            return
        run_token, window_token = self._tokens
        self._tokens = None
        try:
            current_window_var.reset(window_token)
            current_run_var.reset(run_token)
        except ValueError:
            # Exited in another context (e.g. a generator finalised elsewhere): restore by set.
            current_window_var.set(None)
            current_run_var.set(None)
        with _active_lock:
            _state.active_runs -= 1
        run.closed = True
        # receipt=b"": the writer thread fills in the head of the receipt chain and the
        # run's counts, in file order (TraceWriter._seal).
        end = RunEnd(
                run=run.index,
                t_ns=run.now_ns(),
                status=0 if exc_type is None else 1,
                receipt=b"",
                n_windows=0,
                n_selections=0,
                n_continuations=0,
                dropped=run.writer.dropped,
                error_type=None if exc_type is None else exc_type.__qualname__,
            )
        run.writer.put(end)
        if run.tracer is not None:
            _live.end_run(run, end, self._span_token)
        release_writer(run.writer)

    # -- async ------------------------------------------------------------------------
    async def __aenter__(self) -> Run:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)


def _redacted(redact: Callable[[Any], Any], payload: Any) -> Any:
    try:
        return redact(payload)
    except Exception as exc:  # the user's hook failed: never write the unredacted payload
        warnings.warn(
            f"record(redact=...) raised {type(exc).__name__}: {exc}; the payload was replaced "
            f"by {REDACTED!r} rather than written unredacted",
            InstrumentationWarning,
            stacklevel=3,
        )
        return REDACTED


def store_artifact(run: Run, payload: Any, *, what: str) -> tuple[bytes, bytes | None]:
    """Seal a payload for ``run``: ``(hash, inline bytes or None when stored as a Blob)``."""
    if run.redact is not None:
        payload = _redacted(run.redact, payload)
    data, h = seal(payload, what=what)
    if len(data) > INLINE_MAX:
        run.writer.put_blob(h, data, "artifact")
        return h, None
    return h, data


def flush(timeout: float | None = None) -> bool:
    """Write every record enqueued so far (the current run's file, or every open file).

    Blocks until the records are handed to the operating system (no fsync). Returns False
    on timeout.
    """
    run = current_run_var.get()
    if run is not None:
        return run.writer.flush(timeout)
    from ._writer import flush_all

    return flush_all(timeout)


def score(
    name: str,
    value: float,
    *,
    channel: str | None = None,
    layout: int | None = None,
    wave: int | None = None,
    state_hash: bytes | None = None,
    transition: int | None = None,
) -> None:
    """Record a readout of the current window (or of the run outside any window).

    No-op without an active recorder.
    """
    run = current_run_var.get()
    if run is None:
        return
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(
            f"`value` of score {name!r} must be a real number; found {type(value).__name__}"
        ) from None
    window = window_in(run)
    rec = Score(
            run=run.index,
            window=-1 if window is None else window.id,
            name=name,
            value=v,
            channel=channel,
            layout=layout,
            wave=wave,
            state_hash=state_hash,
            transition=transition,
            t_ns=run.now_ns(),
        )
    run.writer.put(rec)
    if run.tracer is not None:
        _live.score(run, window, rec)


def log_llm_call(
    *,
    provider: str,
    model: str,
    request: Mapping[str, Any],
    response: Any,
    headers: Mapping[str, Any] | None = None,
    input_tokens: int = 0,
    output_tokens: int = 0,
    latency_ns: int = 0,
    cost: float | None = None,
    cache_key: bytes | None = None,
    error: BaseException | None = None,
    fingerprint: str | None = None,
) -> None:
    """The one place every model call passes: record it in the current window.

    Credentials are removed before anything is encoded: header and field names that carry
    them (Authorization, x-api-key, api_key, ...) are replaced by ``"<redacted>"`` and the
    user's ``redact`` hook runs after that. Usage is counted into the current window (and,
    at its exit, into its enclosing windows). No-op without an active recorder.
    """
    run = current_run_var.get()
    if run is None:
        return
    window = window_in(run)
    payload: dict[str, Any] = dict(scrub(request))
    if headers is not None:
        payload["headers"] = scrub(dict(headers))
    try:
        if run.redact is not None:
            payload = _redacted(run.redact, payload)
            response = _redacted(run.redact, response)
        request_bytes = encode(payload, what=f"{provider} request")
        response_bytes = encode(scrub(response), what=f"{provider} response")
    except ArtifactEncodingError as exc:
        warnings.warn(str(exc), InstrumentationWarning, stacklevel=2)
        return
    if window is not None:
        window.add_usage(
            llm_calls=1, input_tokens=input_tokens, output_tokens=output_tokens, cost=cost
        )
    rec = LLMCall(
            run=run.index,
            window=-1 if window is None else window.id,
            t_ns=run.now_ns(),
            provider=provider,
            model=model,
            request=request_bytes,
            response=response_bytes,
            cache_key=cache_key,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            latency_ns=latency_ns,
            cost=cost,
            status=0 if error is None else 1,
            error_type=None if error is None else type(error).__qualname__,
            error_message=None if error is None else str(error),
            fingerprint=fingerprint,
        )
    run.writer.put(rec)
    if run.tracer is not None:
        _live.model(run, window, rec)
