"""The open and close of one window instance: its spec, entry, exit and span.

The one window path: ``agentlog._window`` builds all four decorators (sync functions,
coroutines, generators, async generators) on ``_open`` and ``_close``, and the first
two on ``WindowCall``, which brackets a call with them. The receipt of an exit is not
computed here: the exit is put with ``receipt=b""`` and the writer thread chains it
(``agentlog._writer.seal``), in file order.
"""

from __future__ import annotations

import hashlib
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from agentlog._encoding import ArgumentBinder, encode_arguments, seal_clean, warn_unsealable
from agentlog._errors import ArtifactEncodingError, InstrumentationWarning
from agentlog._llm import known_secrets as _model_secrets
from agentlog._recorder import INLINE_MAX, _redacted, store_artifact
from agentlog._records import EXIT_FAILED, EXIT_OK, WindowEnter, WindowExit
from agentlog._scrub import scrub_error
from agentlog._spans import builder as _span_builder
from agentlog._spans import tracer as _otel
from agentlog._state import Run, WindowState, current_window_var, window_in
from agentlog._window.registry import function_id

_sha256 = hashlib.sha256
_perf = time.perf_counter_ns
_get_ident = threading.get_ident

_warned: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, InstrumentationWarning, stacklevel=4)


class _Spec:
    __slots__ = (
        "after",
        "binder",
        "entry",
        "exit",
        "fn",
        "forbid",
        "function_id",
        "link_param",
        "method",
        "name",
        "secret_args",
        "span_name",
    )

    def __init__(
        self,
        name: str,
        fn: Callable[..., Any],
        entry: Callable[..., Any] | None,
        exit: Callable[[Any], Any] | None,
        after: str | None,
        forbid: frozenset[str],
        secret: Iterable[str],
    ) -> None:
        self.name = name
        self.fn = fn
        self.entry = entry
        self.exit = exit
        self.after = after
        self.forbid = forbid
        self.binder = ArgumentBinder(fn, secret=secret)
        self.link_param = _link_parameter(name, fn, self.binder, entry, after)
        self.span_name = f"agentlog.window.{name}"
        # Recorded with every entry so that a replay can find the function (the app
        # module is named by the user; the trace only says which function it expects)
        # and knows what to supply again: secrets, and the instance of a method.
        self.function_id = function_id(fn)
        self.secret_args = sorted(self.binder.secrets) or None
        self.method = self.binder.skips_first


def _signature_mismatch(exc: TypeError) -> bool:
    """The TypeError is the projection refusing its arguments: raised by the call itself,
    before any frame of the projection ran (one raised inside its body is the user's)."""
    tb = exc.__traceback__
    return tb is not None and tb.tb_next is None


def _link_parameter(name: str, fn: Callable[..., Any], binder: ArgumentBinder,
                    entry: Callable[..., Any] | None, after: str | None) -> str | None:
    """The parameter whose argument an ``after=`` link compares, refusing impossible links.

    A link that can never hold would report a bypass on every run; it is refused here,
    when the fix is one keyword away, rather than discovered by ``verify`` later.
    """
    if after is None or entry is not None:
        return None
    if not binder.parameters:
        raise TypeError(
            f"@window({name!r}, after={after!r}) decorates {fn.__qualname__}(), which takes "
            f"no argument, so nothing can carry {after!r}'s exit into it and every run would "
            f"be a bypass. Pass the predecessor's exit as an argument, or give "
            f"entry=lambda: ... to name the value that must equal it."
        )
    first = binder.parameters[0].name
    if first in binder.secrets:
        raise TypeError(
            f"@window({name!r}, after={after!r}): the link compares the first parameter, "
            f"{first!r}, which is secret and never written, so the link could never hold. "
            f"Give entry=lambda {', '.join(p.name for p in binder.parameters)}: <the value "
            f"that must equal {after!r}'s exit>."
        )
    return first


def _link_hash(run: Run, value: Any, what: str) -> bytes | None:
    """The hash a link compares: ``value`` sealed as an artifact of ``run`` would be."""
    # Sealed exactly as an exit is (redact hook, then credential scrubbing), so a link to
    # a predecessor's exit compares equal bytes.
    if run.redact is not None:
        value = _redacted(run.redact, value)
    try:
        data, _ = seal_clean(value, run.secrets, what=what, strict=False)
    except ArtifactEncodingError:  # recorded as an unlinkable entry: verify says bypass
        return None
    return _sha256(data).digest()


def _failure_payload(exc: BaseException) -> dict[str, str]:
    # The declared failure exit ⊥: its hash depends on the exception type only, so two
    # runs failing the same way seal the same exit; the message is kept beside it.
    return {"⊥": type(exc).__qualname__}


def _known(run: Run) -> set[str]:
    """The run's known secret values plus the API keys model calls reported (a provider
    error raised through a window may echo the client's key)."""
    model = _model_secrets()
    return {*run.secrets, *model} if model else run.secrets


def _error_text(run: Run, exc: BaseException) -> str:
    """The exception's message as it may be written: scrubbed, then through ``redact=``."""
    return scrub_error(exc, _known(run), run.redact)


def _clean_bytes(run: Run, value: Any, what: str, window: str | None = None) -> bytes:
    """Canonical bytes of an entry, exit or link value without a redact hook: scrubbed of
    credentials, an unsealable value sealed as a marker (raised when ``run.strict``).
    ``window``: ``value`` is that window's argument map (a strict error names the argument).
    """
    try:
        data, bad = seal_clean(value, run.secrets, what=what, strict=run.strict)
    except ArtifactEncodingError:
        if window is not None:
            encode_arguments(value, window=window)  # raises, naming the argument
        raise
    if bad:
        warn_unsealable(what, bad)
    return data


def _open(spec: _Spec, run: Run, args: tuple[Any, ...], kwargs: dict[str, Any]) -> WindowState:
    parent = window_in(run)
    forbid = spec.forbid if parent is None else spec.forbid | parent.forbid
    st = WindowState(run, next(run._window_ids), spec.name, parent, forbid)
    bound = spec.binder.bind(args, kwargs, run.secrets)  # the effective-argument map
    args_hash: bytes | None = None
    arguments = bound
    if spec.entry is None:
        if run.redact is None:
            data = _clean_bytes(run, bound, f"window {spec.name!r} entry", spec.name)
            entry_hash = _sha256(data).digest()
            entry_inline: bytes | None = data
            if len(data) > INLINE_MAX:
                run.writer.put_blob(entry_hash, data, "artifact")
                entry_inline = None
        else:
            bound = _redacted(run.redact, bound)
            entry_hash, entry_inline = store_artifact(
                run, bound, what=f"window {spec.name!r} entry"
            )
    else:
        try:
            projected = spec.entry(*args, **kwargs)
        except TypeError as exc:
            if not _signature_mismatch(exc):
                raise
            raise TypeError(
                f"window {spec.name!r}: its entry= projection cannot take the call's "
                f"arguments ({exc}). It is called with the arguments as the caller passes "
                "them, and a replay passes required parameters by position and optional "
                "ones by name; write it to accept the function's parameters by name, e.g. "
                f"entry=lambda {', '.join(p.name for p in spec.binder.parameters[:1])}"
                f"{', ' if spec.binder.parameters else ''}**_: ...") from exc
        entry_hash, entry_inline = store_artifact(
            run, projected, what=f"window {spec.name!r} entry projection", strict=run.strict
        )
        try:  # keep the bound arguments too, so that replay can re-invoke the function
            # strict: arguments that need a projection are simply not kept (no marker)
            args_hash, inline = store_artifact(run, bound, what="arguments", strict=True)
            if inline is not None:
                run.writer.put_blob(args_hash, inline, "artifact")
        except ArtifactEncodingError:
            args_hash = None
    link_hash = expected = None
    if spec.after is not None:
        if spec.link_param is None:  # the entry= projection is the link
            link_hash = entry_hash
        else:
            param = spec.link_param
            link_hash = None if param not in arguments else _link_hash(
                run, arguments[param], f"window {spec.name!r} argument {param!r}")
        predecessor = run.last_exit.get(spec.after)
        if predecessor is not None:
            expected = predecessor[2]
            yielded = run.link_exit.get(spec.after)
            if yielded is not None and yielded[0] == predecessor[0]:
                expected = yielded[1]  # a generator predecessor links by its yields
    st.entry_hash = entry_hash
    run.writer.put(
        WindowEnter(
            run=run.index,
            window=st.id,
            name=spec.name,
            parent=-1 if parent is None else parent.id,
            t_ns=run.t0_ns + (_perf() - run.t0_perf),
            entry_hash=entry_hash,
            entry=entry_inline,
            args_hash=args_hash,
            after=spec.after,
            link_hash=link_hash,
            expected_hash=expected,
            thread=_get_ident(),
            steps=run.stream_steps(),
            function=spec.function_id,
            secret_args=spec.secret_args,
            method=spec.method,
        )
    )
    if run.tracer is not None:
        # Every attribute is set at the end in one call: the SDK cleans and locks per call,
        # and one call of five costs 2 µs less than three at the start and two at the end.
        st.span = _otel.start_window_span(
            run.tracer, spec.span_name, None if parent is None else parent.span,
            (0, _span_builder.span_id(run.run_id, f"w{st.id}")),  # its run's trace
        )
    st.t0_perf = _perf()
    return st


def _close(st: WindowState, status: int, payload: Any, exc: BaseException | None) -> None:
    st.closed = True
    wall = _perf() - st.t0_perf
    run = st.run
    name = st.name
    if status == EXIT_OK and run.redact is None:
        # Never strict here: the call has run, its result goes back untouched.
        data, bad = seal_clean(payload, run.secrets, strict=False)
        if bad:
            warn_unsealable(f"window {name!r} exit", bad)
        exit_hash = _sha256(data).digest()
        exit_inline: bytes | None = data
        if len(data) > INLINE_MAX:
            run.writer.put_blob(exit_hash, data, "artifact")
            exit_inline = None
    else:
        try:
            exit_hash, exit_inline = store_artifact(run, payload, what=f"window {name!r} exit")
        except ArtifactEncodingError as err:
            _warn_once(f"exit:{name}", f"{err} The exit was sealed as an 'unsealable' marker.")
            exit_hash, exit_inline = store_artifact(
                run, {"unsealable": type(payload).__qualname__}, what="exit"
            )
    if status == EXIT_OK:
        run.last_exit[name] = (st.id, st.entry_hash, exit_hash)
    # receipt=b"": the writer thread chains it (agentlog._writer.seal), the one place the
    # receipt is computed; a span therefore carries no receipt (its record in the file does).
    rec = WindowExit(
        run=run.index,
        window=st.id,
        name=name,
        t_ns=run.t0_ns + (_perf() - run.t0_perf),
        status=status,
        exit_hash=exit_hash,
        exit=exit_inline,
        receipt=b"",
        wall_ns=wall,
        error_type=None if exc is None else type(exc).__qualname__,
        error_message=None if exc is None else _error_text(run, exc),
        tool_calls=st.tool_calls,
        llm_calls=st.llm_calls,
        input_tokens=st.input_tokens,
        output_tokens=st.output_tokens,
        cost=st.cost,
        selections=st.selections,
    )
    run.writer.put(rec)
    if st.parent is not None:
        _add_to_parent(st.parent, st)
    if run.durability == "window":
        run.writer.cut_frame()
    if st.span is not None:
        _end_span(st.span, st, rec, exc)


def _end_span(span: Any, st: WindowState, rec: WindowExit, exc: BaseException | None) -> None:
    """Set the window's attributes in one call (the SDK cleans and locks per call) and end."""
    span.set_attributes(_span_builder.window_attributes(st.run.run_id, st.entry_hash, rec))
    if exc is not None:
        _otel.record_exception(span, exc, _error_text(st.run, exc), _known(st.run))
        span.set_status(trace.Status(trace.StatusCode.ERROR, type(exc).__qualname__))
    span.end()


def _add_to_parent(parent: WindowState, st: WindowState) -> None:
    """Resources are inclusive: a window counts its children's."""
    if st.tool_calls or st.llm_calls or st.selections or st.cost is not None:
        parent.add_usage(
            llm_calls=st.llm_calls,
            input_tokens=st.input_tokens,
            output_tokens=st.output_tokens,
            cost=st.cost,
            tool_calls=st.tool_calls,
            selections=st.selections,
        )


def _safe_close(st: WindowState, status: int, payload: Any, exc: BaseException | None) -> None:
    try:
        _close(st, status, payload, exc)
    except Exception as err:  # an internal fault must never replace the host's outcome
        _warn_once(
            f"close:{type(err).__name__}",
            f"agentlog could not record the exit of window {st.name!r}: "
            f"{type(err).__name__}: {err}",
        )


def _leave(st: WindowState, token: Any, status: int, payload: Any) -> None:
    """Restore the caller's window, then record the exit."""
    current_window_var.reset(token)
    _safe_close(st, status, payload, None)


def _leave_failed(st: WindowState, token: Any, exc: BaseException) -> None:
    """Restore the caller's window, then record the failure exit ⊥."""
    current_window_var.reset(token)
    _safe_close(st, EXIT_FAILED, _failure_payload(exc), exc)


def _exit_payload(spec: _Spec, result: Any) -> Any:
    """ψ_out(result); a projection that raises is recorded, never raised at the host."""
    if spec.exit is None:
        return result
    try:
        return spec.exit(result)
    except Exception as err:
        _warn_once(f"exit-projection:{spec.name}", f"the exit= projection of window "
                   f"{spec.name!r} raised {type(err).__name__}: {err}; the exit was sealed "
                   "as a marker and the result returned unchanged")
        return {"exit_projection_failed": type(err).__qualname__}


class WindowCall:
    """A sync function's or a coroutine's call bracketed by its window, the one way both
    are: ``with WindowCall(spec, run, args, kwargs) as call: call.result = fn(...)``.

    Opening seals the entry; inside, the window is the current one (and its span the
    current span); leaving restores the caller's and seals the exit, or the failure exit
    ⊥ of an exception, which goes on to the caller untouched.
    """

    __slots__ = ("otel_token", "result", "spec", "state", "token")

    def __init__(self, spec: _Spec, run: Run, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:
        self.spec = spec
        self.state = _open(spec, run, args, kwargs)
        self.result: Any = None

    def __enter__(self) -> WindowCall:
        st = self.state
        self.token = current_window_var.set(st)
        self.otel_token = None if st.span is None else otel_context.attach(
            trace.set_span_in_context(st.span))
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.otel_token is not None:
            otel_context.detach(self.otel_token)
        if exc is None:
            _leave(self.state, self.token, EXIT_OK, _exit_payload(self.spec, self.result))
        else:
            _leave_failed(self.state, self.token, exc)
