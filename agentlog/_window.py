"""``@al.window`` and ``@al.tool``: comparison windows with sealed entries and exits.

A window's *entry* is the map of its effective arguments (or the ``entry=`` projection
ψ_in of them); its *exit* is its return value (or ``exit=`` ψ_out of it). Both are encoded
canonically and hashed with SHA-256 when the window opens and closes; the run's receipt
chain advances at every exit ([LBC] §3.2 and Appendix B, "SCRIBE"):

    receipt_k = sha256(receipt_{k-1} ‖ window ‖ entry_hash ‖ exit_hash)

The chain is a function of the sealed hashes and their order in the file, so the writer
thread computes it (``TraceWriter._seal``) and the caller pays for neither the hash nor a
lock. When spans are on, each span carries its window's receipt: the caller then computes
it under the run's lock, which keeps the chain in queue order, and the writer continues
from it.

``after="retrieval"`` declares that this window's entry must equal the latest exit of
the ``retrieval`` window in the same run ("the exit hash is the next entry hash"). The
link rule, on each side:

* this window's side: the ``entry=`` projection when one is given, else the argument of
  its **first parameter** (after ``self``/``cls``): ``retrieve(queries, budget=4)`` with
  ``after="plan"`` links ``queries`` to plan's exit, whatever ``budget`` is. A window
  with no parameter, or whose first parameter is secret, cannot carry the link and is
  refused at decoration time (pass ``entry=``);
* the predecessor's side: its exit (the ``exit=`` projection when one is given). For a
  generator predecessor without ``exit=`` it is the **list of its yields**, what a
  consumer writing ``list(gen(...))`` passes on.

A mismatch, or a missing predecessor, is recorded and reported by ``agentlog verify``
as a bypass.

Sync functions, coroutines, generators and async generators are supported. A generator
window stays open across its yields without leaking into the caller's context, and
closes on exhaustion (exit = ``{"return": value, "yields": [...]}``), on ``close()`` or
garbage collection (status closed, exit = ``{"closed": True, "yields": [...]}``: the
items yielded so far), or on an exception (the failure exit ⊥). An ``exit=`` projection
of a generator window receives that map.

``@al.window`` and ``@al.tool`` also work bare: the name is then the function's name.

Example:
    >>> import agentlog as al
    >>> @al.window("retrieval")
    ... def retrieve(question: str, budget: int = 3) -> list[str]:
    ...     return [question] * budget
    >>> retrieve("q")  # no recorder active: just the call
    ['q', 'q', 'q']
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, cast, overload

from opentelemetry import context as otel_context
from opentelemetry import trace

from . import _otel, _span_builder, _state
from ._encoding import ArgumentBinder, encode_arguments, seal_clean, warn_unsealable
from ._encoding import _encoder as _canonical_encoder
from ._errors import ArtifactEncodingError, InstrumentationWarning
from ._llm import known_secrets as _model_secrets
from ._recorder import INLINE_MAX, _redacted, store_artifact
from ._records import EXIT_CLOSED, EXIT_FAILED, EXIT_OK, WindowEnter, WindowExit
from ._scrub import has_stem, may_hold_secret, scrub_error
from ._state import (
    Run,
    WindowState,
    current_run_var,
    current_window_var,
    receipt_key,
    window_in,
)
from ._window_registry import function_id, register

F = TypeVar("F", bound=Callable[..., Any])

_sha256 = hashlib.sha256
_perf = time.perf_counter_ns
_get_ident = threading.get_ident
_fast_encode = _canonical_encoder.encode

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
        "entry_struct",
        "exit",
        "fn",
        "forbid",
        "function_id",
        "link_param",
        "method",
        "n_positional",
        "name",
        "name_key",
        "positional",
        "secret_args",
        "span_name",
        "tails",
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
        self.name_key = receipt_key(name)
        # Parameter names when every argument is passed positionally, there are no
        # secrets and no self/cls: then the bound map is just zip(names, args).
        self.positional = self.binder.simple_names()
        self.n_positional = -1 if self.positional is None else len(self.positional)
        self.tails = self.binder.default_tails()
        self.entry_struct = self.binder.entry_struct()
        self.span_name = f"agentlog.window.{name}"
        # Recorded with every entry so that a replay can find the function (the app
        # module is named by the user; the trace only says which function it expects)
        # and knows what to supply again: secrets, and the instance of a method.
        self.function_id = function_id(fn)
        self.secret_args = sorted(self.binder.secrets) or None
        self.method = self.binder.skips_first


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
    st = WindowState(run, next(run._window_ids), spec.name, parent, forbid, spec.name_key)
    n_args = len(args)
    names = spec.positional
    tail = spec.tails[n_args] if names is not None and n_args < len(spec.tails) else None
    if names is not None and not kwargs and n_args == spec.n_positional:  # skip the binder
        bound = dict(zip(names, args, strict=True))
    elif names is not None and not kwargs and n_args < spec.n_positional and tail is not None:
        bound = dict(zip(names, args, strict=False))
        bound.update(tail)
    else:
        bound = spec.binder.bind(args, kwargs, run.secrets)
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
        projected = spec.entry(*args, **kwargs)
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
    # Positional construction: keyword construction of a Struct costs ~5x more here.
    run.writer.put(
        WindowEnter(
            run.index, st.id, spec.name, -1 if parent is None else parent.id,
            run.t0_ns + (_perf() - run.t0_perf), entry_hash, entry_inline, args_hash,
            spec.after, link_hash, expected, _get_ident(), run.stream_steps(),
            spec.function_id, spec.secret_args, spec.method,
        )
    )
    if run.tracer is not None:
        # Every attribute is set at the end in one call: the SDK cleans and locks per call,
        # and one call of five costs 2 µs less than three at the start and two at the end.
        st.span = _otel.start_window_span(
            run.tracer, spec.span_name, None if parent is None else parent.span
        )
    st.t0_perf = _perf()
    return st


def _close(st: WindowState, status: int, payload: Any, exc: BaseException | None) -> None:
    wall = _perf() - st.t0_perf
    run = st.run
    name = st.name
    if status == EXIT_OK and run.redact is None:
        data: bytes | None
        try:
            data = _fast_encode(payload)
        except (TypeError, NotImplementedError, OverflowError, ValueError):
            data = None
        if data is None or may_hold_secret(data, run.secrets):
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
    span = st.span
    receipt = b""  # the writer thread advances the receipt chain (TraceWriter._seal) ...
    if span is None:
        rec = _put_exit(run, st, status, exit_hash, exit_inline, receipt, wall, exc)
    else:
        # ... unless the span carries it: then it is computed here, under the lock that
        # keeps the chain in queue order, and the writer continues from it.
        with run.lock:
            receipt = run.receipt = _sha256(
                run.receipt + st.name_key + st.entry_hash + exit_hash
            ).digest()
            rec = _put_exit(run, st, status, exit_hash, exit_inline, receipt, wall, exc)
    if st.parent is not None:
        _add_to_parent(st.parent, st)
    if run.durability == "window":
        run.writer.cut_frame()
    if span is not None:
        _end_span(span, st, rec, exc)


def _end_span(span: Any, st: WindowState, rec: WindowExit, exc: BaseException | None) -> None:
    """Set the window's attributes in one call (the SDK cleans and locks per call) and end."""
    span.set_attributes(_span_builder.window_attributes(st.run.run_id, st.entry_hash, rec))
    if exc is not None:
        _otel.record_exception(span, exc, _error_text(st.run, exc), _known(st.run))
        span.set_status(trace.Status(trace.StatusCode.ERROR, type(exc).__qualname__))
    span.end()


def _put_exit(run: Run, st: WindowState, status: int, exit_hash: bytes,
              exit_inline: bytes | None, receipt: bytes, wall: int,
              exc: BaseException | None) -> WindowExit:
    # Positional, in field order (see _records.WindowExit): 5x cheaper than keywords.
    rec = WindowExit(
            run.index, st.id, st.name, run.t0_ns + (_perf() - run.t0_perf), status, exit_hash,
            exit_inline, receipt, wall,
            None if exc is None else type(exc).__qualname__,
            None if exc is None else _error_text(run, exc),
            st.tool_calls, st.llm_calls, st.input_tokens, st.output_tokens, st.cost,
            st.selections,
        )
    run.writer.put(rec)
    return rec


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


def _attach(st: WindowState) -> Any:
    return None if st.span is None else otel_context.attach(trace.set_span_in_context(st.span))


def _detach(token: Any) -> None:
    if token is not None:
        otel_context.detach(token)


def _inline_steps(spec: _Spec) -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    """``(enter, leave)`` of the inlined window path, or None when ``spec`` cannot take it.

    The inlined path covers the common window: no projections, no declared predecessor,
    arguments bound by name without the binder (positional or keyword). It writes exactly
    what _open/_close write (tests compare both paths); it exists because this runs on
    every call. ``enter(run, args, kwargs)`` returns ``(state, token, span_token)``, or
    None when this call must take the general path; ``leave(entered, result)`` records
    the exit; a failure goes to ``_inline_failed``.
    """
    entry_struct = spec.entry_struct
    if not (spec.entry is None and spec.after is None and spec.exit is None and (
            spec.positional is not None and entry_struct is not None)):
        return None
    from msgspec.structs import asdict as _asdict
    from msgspec.structs import astuple as _astuple

    name = spec.name
    name_key = spec.name_key
    forbid = spec.forbid
    positional = spec.positional or ()
    n_positional = spec.n_positional
    tails = spec.tails
    span_name = spec.span_name
    function_id = spec.function_id
    # Keywords naming a positional-only parameter make the real call raise: such calls
    # take the general path, which records what the binder makes of them.
    positional_only = frozenset(
        p.name for p in spec.binder.parameters if p.kind is inspect.Parameter.POSITIONAL_ONLY)
    # A parameter named like `max_tokens` puts a scrubber stem ("token") in every entry's
    # bytes; for those windows a hit is confirmed on the argument values alone.
    names_have_stem = any(has_stem(n) for n in positional)
    get_window = current_window_var.get
    set_window = current_window_var.set
    reset_window = current_window_var.reset
    sha256 = _sha256
    fast_encode = _fast_encode
    perf = _perf
    attach = otel_context.attach
    detach = otel_context.detach
    in_context = trace.set_span_in_context

    def enter(run: Run, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        n_args = len(args)
        if n_args > n_positional:
            return None
        if not kwargs:
            if tails[n_args] is None:
                return None
            entry = entry_struct(*args)
        else:
            if positional_only and not positional_only.isdisjoint(kwargs):
                return None
            try:  # an unknown, repeated or missing argument: the general path's business
                entry = entry_struct(*args, **kwargs)
            except TypeError:
                return None
        parent = get_window()
        if parent is not None and parent.run is not run:
            parent = None
        st = WindowState(run, next(run._window_ids), name, parent,
                         forbid if parent is None else forbid | parent.forbid, name_key)
        data: bytes | None
        try:
            data = fast_encode(entry)
        except (TypeError, NotImplementedError, OverflowError, ValueError):
            data = None
        if data is None or (may_hold_secret(data, run.secrets) and (
            not names_have_stem or may_hold_secret(fast_encode(_astuple(entry)), run.secrets)
        )):
            data = _clean_bytes(run, _asdict(entry), f"window {name!r} entry", name)
        entry_hash = st.entry_hash = sha256(data).digest()
        writer = run.writer
        if len(data) > INLINE_MAX:
            writer.put_blob(entry_hash, data, "artifact")
            data = None
        t0 = st.t0_perf = perf()
        writer.put(WindowEnter(run.index, st.id, name, -1 if parent is None else parent.id,
                               run.t0_ns + (t0 - run.t0_perf), entry_hash, data, None,
                               None, None, None, _get_ident(), run.stream_steps(),
                               function_id))
        token = set_window(st)
        tracer = run.tracer
        if tracer is None:
            return st, token, None
        st.span = _otel.start_window_span(tracer, span_name,
                                          None if parent is None else parent.span)
        return st, token, attach(in_context(st.span))

    def leave(entered: tuple[WindowState, Any, Any], result: Any) -> None:
        st, token, span_token = entered
        if span_token is not None:
            detach(span_token)
        reset_window(token)
        t1 = perf()
        run = st.run
        out: bytes | None
        try:
            out = fast_encode(result)
        except (TypeError, NotImplementedError, OverflowError, ValueError):
            out = None
        if out is None or may_hold_secret(out, run.secrets):
            _safe_close(st, EXIT_OK, result, None)  # the general path scrubs, or marks
            return
        exit_hash = sha256(out).digest()
        writer = run.writer
        if len(out) > INLINE_MAX:
            writer.put_blob(exit_hash, out, "artifact")
            out = None
        entry_hash = st.entry_hash
        run.last_exit[name] = (st.id, entry_hash, exit_hash)
        span = st.span
        parent = st.parent
        if span is None:
            # receipt=b"": the writer thread advances the receipt chain (_writer._seal).
            writer.put(WindowExit(run.index, st.id, name, run.t0_ns + (t1 - run.t0_perf),
                                  EXIT_OK, exit_hash, out, b"", t1 - st.t0_perf, None, None,
                                  st.tool_calls, st.llm_calls, st.input_tokens,
                                  st.output_tokens, st.cost, st.selections))
            if parent is not None:
                _add_to_parent(parent, st)
            return
        with run.lock:  # the span carries the receipt: see _close
            receipt = run.receipt = sha256(run.receipt + name_key + entry_hash +
                                           exit_hash).digest()
            rec = WindowExit(run.index, st.id, name, run.t0_ns + (t1 - run.t0_perf),
                             EXIT_OK, exit_hash, out, receipt, t1 - st.t0_perf, None, None,
                             st.tool_calls, st.llm_calls, st.input_tokens,
                             st.output_tokens, st.cost, st.selections)
            writer.put(rec)
        if parent is not None:
            _add_to_parent(parent, st)
        _end_span(span, st, rec, None)

    return enter, leave


def _inline_failed(entered: tuple[WindowState, Any, Any], exc: BaseException) -> None:
    """Record the failure exit ⊥ of a window entered on the inlined path."""
    st, token, span_token = entered
    if span_token is not None:
        otel_context.detach(span_token)
    _leave_failed(st, token, exc)


def _wrap_function(spec: _Spec) -> Callable[..., Any]:
    fn = spec.fn
    name = spec.name
    name_key = spec.name_key
    forbid = spec.forbid
    exit_projection = spec.exit
    positional = spec.positional or ()
    n_positional = spec.n_positional
    tails = spec.tails
    entry_struct = spec.entry_struct
    span_name = spec.span_name
    # A parameter named like `max_tokens` puts a scrubber stem ("token") in every entry's
    # bytes; for those windows a hit is confirmed on the argument values alone.
    names_have_stem = any(has_stem(n) for n in positional)
    # The inlined path below covers the common window: no projections, no declared
    # predecessor, arguments passed positionally. It writes exactly what _open/_close
    # write (tests compare both paths); it exists because this runs on every call. It is
    # _inline_steps written out by hand: calling enter/leave costs a positional call
    # ~0.5 µs (measured), so only keyword calls and coroutines go through them.
    inline_ok = spec.entry is None and spec.after is None and exit_projection is None and (
        spec.positional is not None and entry_struct is not None
    )
    get_run = current_run_var.get
    get_window = current_window_var.get
    set_window = current_window_var.set
    reset_window = current_window_var.reset
    sha256 = _sha256
    fast_encode = _fast_encode
    perf = _perf
    attach = otel_context.attach
    detach = otel_context.detach
    in_context = trace.set_span_in_context
    steps = _inline_steps(spec)
    enter, leave = steps if steps is not None else (None, None)

    def bound_map(args: tuple[Any, ...]) -> dict[str, Any]:
        bound = dict(zip(positional, args, strict=False))
        if len(args) < n_positional:
            bound.update(tails[len(args)])  # type: ignore[arg-type]
        return bound

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not _state.active_runs:
            return fn(*args, **kwargs)
        run = get_run()
        if run is None:
            return fn(*args, **kwargs)
        n_args = len(args)
        if inline_ok and run.plain and not kwargs and n_args <= n_positional and (
            tails[n_args] is not None
        ):
            parent = get_window()
            if parent is not None and parent.run is not run:
                parent = None
            st = WindowState(run, next(run._window_ids), name, parent,
                             forbid if parent is None else forbid | parent.forbid, name_key)
            data: bytes | None
            try:
                data = fast_encode(entry_struct(*args))  # type: ignore[misc]
            except (TypeError, NotImplementedError, OverflowError, ValueError):
                data = None
            if data is None or (may_hold_secret(data, run.secrets) and (
                not names_have_stem or may_hold_secret(
                    fast_encode([args, list(tails[n_args].values())]),  # type: ignore[union-attr]
                    run.secrets)
            )):
                data = _clean_bytes(run, bound_map(args), f"window {name!r} entry", name)
            entry_hash = st.entry_hash = sha256(data).digest()
            writer = run.writer
            if len(data) > INLINE_MAX:
                writer.put_blob(entry_hash, data, "artifact")
                data = None
            t0 = st.t0_perf = perf()
            writer.put(WindowEnter(run.index, st.id, name, -1 if parent is None else parent.id,
                                   run.t0_ns + (t0 - run.t0_perf), entry_hash, data, None,
                                   None, None, None, _get_ident(), run.stream_steps(),
                                   spec.function_id))
            token = set_window(st)
            tracer = run.tracer
            if tracer is None:
                span = None
                try:
                    result = fn(*args)
                except BaseException as exc:
                    _leave_failed(st, token, exc)
                    raise
            else:
                span = st.span = _otel.start_window_span(
                    tracer, span_name, None if parent is None else parent.span)
                span_token = attach(in_context(span))
                try:
                    result = fn(*args)
                except BaseException as exc:
                    detach(span_token)
                    _leave_failed(st, token, exc)
                    raise
                detach(span_token)
            reset_window(token)
            t1 = perf()
            out: bytes | None
            try:
                out = fast_encode(result)
            except (TypeError, NotImplementedError, OverflowError, ValueError):
                out = None
            if out is None or may_hold_secret(out, run.secrets):
                _safe_close(st, EXIT_OK, result, None)  # the general path scrubs, or marks
                return result
            exit_hash = sha256(out).digest()
            if len(out) > INLINE_MAX:
                writer.put_blob(exit_hash, out, "artifact")
                out = None
            run.last_exit[name] = (st.id, entry_hash, exit_hash)
            if span is None:
                # receipt=b"": the writer thread advances the receipt chain (_writer._seal).
                writer.put(WindowExit(run.index, st.id, name, run.t0_ns + (t1 - run.t0_perf),
                                      EXIT_OK, exit_hash, out, b"", t1 - t0, None, None,
                                      st.tool_calls, st.llm_calls, st.input_tokens,
                                      st.output_tokens, st.cost, st.selections))
                if parent is not None:
                    _add_to_parent(parent, st)
                return result
            with run.lock:  # the span carries the receipt: see _close
                receipt = run.receipt = sha256(run.receipt + name_key + entry_hash +
                                               exit_hash).digest()
                rec = WindowExit(run.index, st.id, name, run.t0_ns + (t1 - run.t0_perf),
                                 EXIT_OK, exit_hash, out, receipt, t1 - t0, None, None,
                                 st.tool_calls, st.llm_calls, st.input_tokens,
                                 st.output_tokens, st.cost, st.selections)
                writer.put(rec)
            if parent is not None:
                _add_to_parent(parent, st)
            _end_span(span, st, rec, None)
            return result
        entered = enter(run, args, kwargs) if enter is not None and run.plain else None
        if entered is not None:  # a keyword call (or one the block above left out)
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                _inline_failed(entered, exc)
                raise
            leave(entered, result)  # type: ignore[misc]
            return result
        st = _open(spec, run, args, kwargs)
        token = set_window(st)
        otoken = None if st.span is None else _attach(st)
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            _detach(otoken)
            _leave_failed(st, token, exc)
            raise
        _detach(otoken)
        _leave(st, token, EXIT_OK, _exit_payload(spec, result))
        return result

    return wrapper


def _wrap_coroutine(spec: _Spec) -> Callable[..., Any]:
    fn = spec.fn
    steps = _inline_steps(spec)
    enter, leave = steps if steps is not None else (None, None)

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        run = current_run_var.get() if _state.active_runs else None
        if run is None:
            return await fn(*args, **kwargs)
        # The window's context variables are set in the task that awaits the coroutine,
        # so entering before the first await and leaving after the last is the same
        # bracket as the general path's.
        entered = enter(run, args, kwargs) if enter is not None and run.plain else None
        if entered is not None:
            try:
                result = await fn(*args, **kwargs)
            except BaseException as exc:
                _inline_failed(entered, exc)
                raise
            leave(entered, result)  # type: ignore[misc]
            return result
        st = _open(spec, run, args, kwargs)
        token = current_window_var.set(st)
        otoken = _attach(st)
        try:
            result = await fn(*args, **kwargs)
        except BaseException as exc:
            _detach(otoken)
            _leave_failed(st, token, exc)
            raise
        _detach(otoken)
        _leave(st, token, EXIT_OK, _exit_payload(spec, result))
        return result

    return wrapper


def _note_yields(spec: _Spec, st: WindowState, yields: list[Any]) -> None:
    """Keep the hash of a finished generator window's yields for its ``after=`` successors.

    Without an ``exit=`` projection the successor's link compares the list of yields (what
    ``list(gen(...))`` hands on); with one, the projection is the exit and the link.
    """
    if spec.exit is not None:
        return
    link = _link_hash(st.run, yields, f"window {spec.name!r} yields")
    if link is not None:
        st.run.link_exit[spec.name] = (st.id, link)


def _wrap_generator(spec: _Spec) -> Callable[..., Any]:
    fn = spec.fn

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        run = current_run_var.get() if _state.active_runs else None
        if run is None:
            return (yield from fn(*args, **kwargs))
        gen = fn(*args, **kwargs)
        st = _open(spec, run, args, kwargs)
        yields: list[Any] = []
        method: Callable[[Any], Any] = gen.send
        arg: Any = None
        while True:
            token = current_window_var.set(st)
            try:
                item = method(arg)
            except StopIteration as stop:
                _leave(st, token, EXIT_OK, _exit_payload(spec, {"yields": yields,
                                                                 "return": stop.value}))
                _note_yields(spec, st, yields)
                return stop.value
            except BaseException as exc:
                _leave_failed(st, token, exc)
                raise
            current_window_var.reset(token)
            yields.append(item)
            try:
                arg = yield item
                method = gen.send
            except GeneratorExit:
                token = current_window_var.set(st)
                try:
                    gen.close()
                except BaseException as exc:
                    _leave_failed(st, token, exc)
                    raise
                _leave(st, token, EXIT_CLOSED, {"yields": yields, "closed": True})
                raise
            except BaseException as exc:
                method, arg = gen.throw, exc

    return wrapper


def _wrap_async_generator(spec: _Spec) -> Callable[..., Any]:
    fn = spec.fn

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        run = current_run_var.get() if _state.active_runs else None
        agen = fn(*args, **kwargs)
        if run is None:
            async for item in agen:
                yield item
            return
        st = _open(spec, run, args, kwargs)
        yields: list[Any] = []
        method: Callable[[Any], Any] = agen.asend
        arg: Any = None
        while True:
            token = current_window_var.set(st)
            try:
                item = await method(arg)
            except StopAsyncIteration:
                _leave(st, token, EXIT_OK, _exit_payload(spec, {"yields": yields, "return": None}))
                _note_yields(spec, st, yields)
                return
            except BaseException as exc:
                _leave_failed(st, token, exc)
                raise
            current_window_var.reset(token)
            yields.append(item)
            try:
                arg = yield item
                method = agen.asend
            except GeneratorExit:
                token = current_window_var.set(st)
                try:
                    await agen.aclose()
                except BaseException as exc:
                    _leave_failed(st, token, exc)
                    raise
                _leave(st, token, EXIT_CLOSED, {"yields": yields, "closed": True})
                raise
            except BaseException as exc:
                method, arg = agen.athrow, exc

    return wrapper


@overload
def window(name: F, /) -> F: ...


@overload
def window(
    name: str,
    *,
    entry: Callable[..., Any] | None = None,
    exit: Callable[[Any], Any] | None = None,
    after: str | None = None,
    forbid: Iterable[str] = (),
    secret: Iterable[str] = (),
) -> Callable[[F], F]: ...


def window(
    name: str | F,
    *,
    entry: Callable[..., Any] | None = None,
    exit: Callable[[Any], Any] | None = None,
    after: str | None = None,
    forbid: Iterable[str] = (),
    secret: Iterable[str] = (),
) -> Callable[[F], F] | F:
    """Declare a comparison window.

    Args:
        name: the window's name (the unit compared across systems). Bare ``@al.window``
            names the window after the function.
        entry: projection ψ_in, called with the function's arguments; its value is the
            sealed entry. Without it the entry is the map of effective arguments.
        exit: projection ψ_out of the return value; its value is the sealed exit. A
            generator window's return value is ``{"return": value, "yields": [...]}``
            (``{"closed": True, "yields": [...]}`` when closed early).
        after: name of the declared predecessor window whose exit must equal this
            window's *link value*: the ``entry=`` projection when given, else the
            argument of the first parameter (``retrieve(queries, budget=4)`` links
            ``queries``). A generator predecessor's exit is, for the link, the list of
            its yields (unless it has an ``exit=`` projection). A window with no
            parameter or a secret first parameter is refused (``TypeError``): give
            ``entry=``. A mismatch is reported by ``agentlog verify`` as a bypass.
        forbid: tool names that may not be called inside this window (and its children);
            a call raises ``SealedWindowError`` and is recorded as refused.
        secret: parameter names never written (also ``Annotated[str, al.Secret]``).

    With no active recorder the decorated function is just called.

    Raises:
        ValueError: ``name`` is not a non-empty string.
        TypeError: the decorated object is not callable, or the ``after=`` link could
            never hold (the message says which ``entry=`` to give).
    """
    if callable(name):  # bare @al.window
        return window(getattr(name, "__name__", ""))(name)
    if not isinstance(name, str) or not name:
        raise ValueError(f"`name` must be a non-empty str; found {name!r}")
    if isinstance(forbid, str):
        forbid = (forbid,)
    if isinstance(secret, str):
        secret = (secret,)
    forbidden = frozenset(forbid)
    secrets = tuple(secret)
    window_name = name

    def decorate(fn: F) -> F:
        if not callable(fn):
            raise TypeError(
                f"@window({window_name!r}) decorates a function; found {type(fn).__name__}"
            )
        spec = _Spec(window_name, fn, entry, exit, after, forbidden, secrets)
        if inspect.isasyncgenfunction(fn):
            wrapped = _wrap_async_generator(spec)
        elif inspect.iscoroutinefunction(fn):
            wrapped = _wrap_coroutine(spec)
        elif inspect.isgeneratorfunction(fn):
            wrapped = _wrap_generator(spec)
        else:
            wrapped = _wrap_function(spec)
        wrapped.__agentlog_window__ = spec  # type: ignore[attr-defined]
        register(window_name, spec.function_id, wrapped)
        return cast(F, wrapped)

    return decorate
