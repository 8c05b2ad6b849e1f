"""``record()``: open a run, write its records, close it.

Examples:
    >>> import agentlog as al
    >>> with al.record("doc-run.zst", system="demo", seed=7, task="q-1") as run:
    ...     go = al.proceed(0.5, name="stop")
"""

from __future__ import annotations

import hashlib
import math
import numbers
import os
import threading
import warnings
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Literal

from . import _state
from ._digest import key_bytes
from ._encoding import encode, seal_clean, warn_unsealable
from ._errors import InstrumentationWarning
from ._noise import GENERATOR_ID, GENERATORS
from ._records import RunEnd, RunStart, Score
from ._scrub import REDACTED, scrub_value
from ._spans import live as _live
from ._spans.builder import operation_of, response_meta
from ._spans.events import event_logger as _event_logger
from ._spans.events import span_events as _span_events
from ._spans.tracer import tracer as _tracer
from ._state import Run, current_run_var, current_window_var, window_in
from ._version import __version__
from ._writer import CLOSE_TIMEOUT, FLUSH_TIMEOUT, MAX_QUEUE_BYTES
from ._writer.shared import flush_all, release_writer, shared_writer

INLINE_MAX = 2048  # artifacts larger than this are stored once as content-addressed Blobs

_active_lock = threading.Lock()


def new_run_id() -> str:
    """A random (version 4) UUID as 32 hex digits, as ``uuid.uuid4().hex`` makes it in a
    third of its time (0.8 against 2.7 µs: every run opens with one)."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 4122 variant
    return raw.hex()


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

    Which file: runs of one process that name the same file (one after another or at
    once) all go into it. A trace that existed before is never replaced or extended
    silently: by default (``mode="x"``) a non-empty file this process did not record to
    is refused with ``TracePathError``; ``mode="a"`` appends runs to it (after checking
    its header and that it ends on a frame boundary; a frame torn by a crash is cut off
    with a warning), ``mode="w"`` replaces it. FIFOs, devices and directories are
    refused, and so is a file another process is recording to (an exclusive lock).

    Durability: ``"frame"`` (default) writes a frame at least every ``frame_interval``
    seconds, so a crash of the process loses at most the last second of records.
    ``"window"`` makes each window's exit wait until its frame is handed to the OS, so
    a window that has returned survives a crash of the process; ``"fsync"`` also syncs
    the file, so it survives a power loss. Every wait is bounded (``close_timeout``;
    5 s per window; ``al.flush(timeout=)``) and a full queue (``max_queue_bytes``) makes
    records wait up to 1 s for room, then drops and counts them (``on_full="drop"``:
    at once): recording never hangs the program or grows its memory without bound.

    What a returned ``record()`` block guarantees:

    * ``"frame"``: the run's records are enqueued, not yet written: leaving the block
      costs the caller no write. A pool thread writes the last frame within about a
      second; the file's writer stays open for the next run of the file in this process
      (closed after 1 s unused, and at exit). Readers of agentlog in this process
      (``read``, ``iter_runs``, ``iter_frames``, ``verify``, the estimators, the CLI) wait
      for it first (``al.settle``), and so does interpreter exit and SIGTERM: a process
      that exits normally has every run in its file. A SIGKILL or ``os._exit`` right
      after the block may lose the run's last second. Call ``al.flush()`` before
      handing the file to another process (it also closes the file, releasing its lock).
    * ``"window"`` and ``"fsync"``: the block returns once every record of the run is
      handed to the OS (and synced) and the file is closed, at most ``close_timeout``
      seconds later (a timeout warns): a crash after that loses nothing of the run.

    Args:
        path: trace file to write (see "Which file").
        system: name of the system under test (a leaderboard row).
        seed: run seed; with ``task``, keys every ``select``/``proceed`` draw. One seed
            may serve every task: the task is folded into the noise (see ``generator``).
        task: task id. Runs of one task and seed are paired by their common noise (two
            systems, a replay); runs of different tasks draw independent noise.
        meta: JSON-like metadata (str keys), e.g. ``{"backbone": "qwen3-8b", "cluster": "q7"}``.
        redact: ``redact(payload) -> payload``, applied to every artifact, score payload and
            model request before it is encoded.
        durability: ``"frame"`` (default), ``"window"`` or ``"fsync"`` (see above).
        frame_interval: seconds between frame cuts at most.
        mode: ``"x"`` (default), ``"a"`` or ``"w"`` (see "Which file").
        close_timeout: with ``durability="window"``/``"fsync"``, leaving the ``with``
            block waits at most this many seconds for the last frames to be written
            (warns and goes on after it); with ``"frame"``, how long the barriers above
            wait for a file's writer to close.
        max_queue_bytes: about how many bytes of records may wait to be written.
        on_full: ``"block"`` (default: wait up to 1 s for room) or ``"drop"``.
        strict: raise ``ArtifactEncodingError`` when a window's or tool's arguments have
            no canonical encoding. By default such a value is sealed as an
            ``{"unsealable": "<type>"}`` marker, warned about once per window, and the
            call proceeds (exits and results always do: the call has already run).
        key: a secret (str or bytes) to sign the run with: its digest over every record
            becomes an HMAC-SHA256 under ``key``, which ``verify(path, key=...)`` checks and
            nobody without the key can forge. The key itself is never written.
        generator: the noise generator that keys ``select``'s and ``proceed``'s draws. The
            default, ``"fmix64-gumbel/3"``, folds ``task`` into the seed (tasks recorded
            under one seed draw independent noise; the same seed and task draw the same
            noise in every system and replay) and keys a new candidate pool in bulk; pass
            ``"fmix64-gumbel/2"`` or ``"fmix64-gumbel/1"`` (what runs recorded before use,
            see their ``RunStart.generator``) to reproduce an old run's draws in a replay.

    Credentials are scrubbed from everything written (``agentlog._scrub``): arguments,
    exits, ``meta``, model requests and exception messages.

    Raises:
        TracePathError: on entering, when ``path`` must not be recorded to (see above).
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
        durability: Literal["frame", "window", "fsync"] = "frame",
        frame_interval: float = 1.0,
        mode: Literal["x", "a", "w"] = "x",
        close_timeout: float = CLOSE_TIMEOUT,
        max_queue_bytes: int = MAX_QUEUE_BYTES,
        on_full: Literal["block", "drop"] = "block",
        strict: bool = False,
        key: str | bytes | None = None,
        generator: str = GENERATOR_ID,
    ) -> None:
        self._key = key_bytes(key)
        if generator not in GENERATORS:
            raise ValueError(
                f"`generator` must be one of {', '.join(map(repr, GENERATORS))}; found "
                f"{generator!r}"
            )
        # The module's own string: select tells the generators apart by identity.
        self.generator = GENERATORS[GENERATORS.index(generator)]
        if durability not in ("frame", "window", "fsync"):
            raise ValueError(
                f"`durability` must be 'frame', 'window' or 'fsync'; found {durability!r}"
            )
        if mode not in ("x", "a", "w"):
            raise ValueError(
                f"`mode` must be 'x' (new trace), 'a' (append runs) or 'w' (replace); "
                f"found {mode!r}"
            )
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise TypeError(f"`seed` must be an int; found {type(seed).__name__}")
        if not 0 <= seed < 2**64:
            raise ValueError(f"`seed` must be in [0, 2**64); found {seed}")
        if not isinstance(system, str):
            raise TypeError(f"`system` must be a str; found {type(system).__name__}")
        if task is not None and not isinstance(task, str):
            raise TypeError(f"`task` must be a str or None; found {type(task).__name__}")
        self.path = os.fspath(path)
        self.system = system
        self.seed = seed
        self.task = task
        self.meta = _check_meta(meta)
        self.redact = redact
        self.durability = durability
        self.frame_interval = frame_interval
        self.mode = mode
        self.close_timeout = close_timeout
        self.max_queue_bytes = max_queue_bytes
        self.on_full = on_full
        self.strict = strict
        self.run: Run | None = None
        self._tokens: tuple[Any, Any] | None = None
        self._span_token: Any = None  # the run span's context token (_live)
        self._dropped_before = 0  # the writer's drop count when the run opened

    # -- sync -------------------------------------------------------------------------
    def __enter__(self) -> Run:
        if self.run is not None:
            raise RuntimeError("this record() is already open; create a new one per run")
        parent = current_run_var.get()
        writer = shared_writer(
            self.path, frame_interval=self.frame_interval, durability=self.durability,
            mode=self.mode, close_timeout=self.close_timeout,
            max_queue_bytes=self.max_queue_bytes, on_full=self.on_full,
        )
        run = Run(
            run_id=new_run_id(),
            index=writer.new_run_index(),
            path=self.path,
            system=self.system,
            seed=self.seed,
            task=self.task,
            meta=self.meta,
            writer=writer,
            redact=self.redact,
            # A window cuts a frame at its exit unless "frame"; the writer decides whether
            # that cut waits (and syncs): see TraceWriter.cut_frame.
            durability="frame" if self.durability == "frame" else "window",
            tracer=_tracer(),
            event_logger=_event_logger(),
            span_events=_span_events(),
            parent_run=parent.run_id if parent is not None else None,
            strict=self.strict,
            generator=self.generator,
        )
        meta = self.meta if self.redact is None else _redacted(self.redact, self.meta)
        meta = scrub_value(meta, run.secrets)
        if self._key is not None:  # before the RunStart: the writer thread takes it there
            writer.run_keys[run.index] = self._key
        start = RunStart(
                run=run.index,
                run_id=run.run_id,
                system=run.system,
                seed=run.seed,
                task=run.task,
                meta=meta,
                t_ns=run.t0_ns,
                generator=run.generator,
                agentlog_version=__version__,
                parent_run=run.parent_run,
                pid=os.getpid(),
                **_nesting(parent, run.run_id),
            )
        # A writer kept open from an earlier run of the file counts that run's drops.
        self._dropped_before = writer.dropped
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
                dropped=run.writer.dropped - self._dropped_before,
                error_type=None if exc_type is None else exc_type.__qualname__,
            )
        run.writer.put(end)
        _roots.pop(run.run_id, None)
        if run.tracer is not None:
            _live.end_run(run, end, self._span_token)
        _warn_if_file_gone(run)
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


def _warn_if_file_gone(run: Run) -> None:
    """Warn, as the run closes, when its trace file is no longer at its path.

    A file whose folder was removed (or that was deleted or replaced) keeps taking writes
    that no one can read: under the default durability the run's last records are still
    queued when it closes, and they would go to a file no folder holds, in silence. One
    ``stat`` per run.
    """
    writer = run.writer
    key = getattr(writer, "_key", None)
    if key is None or getattr(writer, "_problem", None) is not None or getattr(
            writer, "_warned", False):
        return  # not opened, or the writer reported (or will report) a problem of its own
    try:
        st = os.stat(writer.path)
        gone = (st.st_dev, st.st_ino) != key
    except OSError:
        gone = True
    if gone:
        warnings.warn(
            f"{writer.path}: the trace file is no longer at this path (was it deleted, or "
            f"its folder removed, while run {run.run_id} was recorded?); the run's records "
            "went to a file no folder holds and cannot be read. Record into a folder that "
            "stays, or re-record the run", InstrumentationWarning, stacklevel=3)


# Open runs' outermost run ids (bounded by the number of open runs), for RunStart.root_run.
_roots: dict[str, str] = {}


def _nesting(parent: Run | None, run_id: str) -> dict[str, Any]:
    """``RunStart``'s ``parent_window`` and ``root_run`` for a run opened inside ``parent``."""
    if parent is None:
        _roots[run_id] = run_id
        return {}
    window = window_in(parent)
    root = _roots.get(parent.run_id, parent.run_id)
    _roots[run_id] = root
    return {"parent_window": -1 if window is None else window.id, "root_run": root}


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


def store_artifact(run: Run, payload: Any, *, what: str,
                   strict: bool = False) -> tuple[bytes, bytes | None]:
    """Seal a payload for ``run``: ``(hash, inline bytes or None when stored as a Blob)``.

    Credentials are scrubbed after the ``redact`` hook. A value without a canonical
    encoding is sealed as a marker (warned once per ``what``) unless ``strict``.
    """
    if run.redact is not None:
        payload = _redacted(run.redact, payload)
    data, bad = seal_clean(payload, run.secrets, what=what, strict=strict)
    if bad:
        warn_unsealable(what, bad)
    h = hashlib.sha256(data).digest()
    if len(data) > INLINE_MAX:
        run.writer.put_blob(h, data, "artifact")
        return h, None
    return h, data


def flush(timeout: float = FLUSH_TIMEOUT) -> bool:
    """Write every record enqueued so far (the current run's file, or every open file).

    Blocks until the records are handed to the operating system (no fsync), at most
    ``timeout`` seconds (default 10). Outside a run it also closes the files whose runs
    have all ended (a ``durability="frame"`` run leaves its file open for the next run):
    once it returns True, every run that has left its ``record()`` block is complete in
    its file and no file is locked by this process's finished runs. Returns False on
    timeout.
    """
    run = current_run_var.get()
    if run is not None:
        return run.writer.flush(timeout)
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

    While a run is recorded the value must be a finite real number: an ``int``, a
    ``float``, a ``bool`` (a pass/fail outcome, stored as 1.0/0.0) or a numpy real scalar.
    Anything else is refused with a ``TypeError``, a numeric string included (``"0.8"``
    may be a parsed number or a label: convert it where you know which). NaN and ±inf are
    refused with a ``ValueError`` (nothing is written), because one of them would
    silently turn every mean, interval and ranking computed from the trace into NaN.
    Score a failed evaluation as a number your estimator understands (e.g. 0.0) or not
    at all. No-op without an active recorder (nothing is checked either: no recorder, no
    cost).

    Raises:
        TypeError: ``value`` is not a real number (a str, bytes, None, a complex, ...).
        ValueError: ``value`` is NaN or infinite.
    """
    run = current_run_var.get()
    if run is None:
        return
    if not (type(value) is float or type(value) is int or _is_real(value)):
        raise TypeError(
            f"`value` of score {name!r} must be a real number; found {type(value).__name__} "
            f"{value!r:.60}. Record an int, float, bool or numpy real scalar: convert it "
            "where it is computed (e.g. float(text) for a number read as text)")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(
            f"`value` of score {name!r} must be finite; found {v}. A NaN or infinite score "
            "would make every estimate over it NaN: record a number (e.g. 0.0 for a failed "
            "evaluation) or skip the score."
        )
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


def _is_real(value: object) -> bool:
    """A real number: Python's numeric tower (bool and Fraction too), or a numpy scalar or
    0-d array of a bool, integer or floating dtype (numpy's own bool is not in the tower)."""
    if isinstance(value, numbers.Real):
        return True
    dtype = getattr(value, "dtype", None)
    return getattr(dtype, "kind", None) in ("b", "i", "u", "f") and getattr(
        value, "shape", None) == ()


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
    """Record one model call: a delegate of ``al.llm_call`` (the one recording path).

    ``headers``, when given, are stored with the request under ``"headers"`` (scrubbed
    like the rest of it). No-op without an active recorder.
    """
    from ._llm import llm_call  # _llm imports this module

    payload = dict(request) if headers is None else {**request, "headers": dict(headers)}
    response_model, response_id, reasons = response_meta(response)
    llm_call(provider, model, request=payload, response=response, input_tokens=input_tokens,
             output_tokens=output_tokens, latency_ns=latency_ns, cost=cost,
             cache_key=cache_key, error=error, fingerprint=fingerprint,
             operation=operation_of(payload), response_model=response_model,
             response_id=response_id, finish_reasons=reasons)

