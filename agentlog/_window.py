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
import inspect
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, cast, overload

from opentelemetry import context as otel_context
from opentelemetry import trace

from . import _otel, _state
from ._recorder import INLINE_MAX
from ._records import EXIT_CLOSED, EXIT_OK, WindowEnter, WindowExit
from ._scrub import (
    LONG_PAYLOAD,
    has_stem,
    is_credential_name,
    may_change,
    may_change_payload,
    may_hold_secret,
)
from ._state import (
    Run,
    WindowState,
    current_run_var,
    current_window_var,
)
from ._window_open import (
    _add_to_parent,
    _attach,
    _clean_bytes,
    _detach,
    _end_span,
    _exit_payload,
    _fast_encode,
    _get_ident,
    _leave,
    _leave_failed,
    _link_hash,
    _open,
    _perf,
    _safe_close,
    _sha256,
    _Spec,
)
from ._window_registry import register

F = TypeVar("F", bound=Callable[..., Any])


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
    # Long entries are tested on the argument values (may_change): the parameter names'
    # own credential rule (a parameter called `api_key`) is decided here, once.
    names_are_credentials = any(is_credential_name(n) for n in positional)
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
        except Exception:  # the general path decides (and marks)
            data = None
        if data is None or ((may_hold_secret(data, run.secrets) and (
            not names_have_stem or may_hold_secret(fast_encode(_astuple(entry)), run.secrets)
        )) if len(data) < LONG_PAYLOAD else _long_entry_may_change(
            _astuple(entry), data, run.secrets, names_are_credentials, names_have_stem
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
        except Exception:  # the general path decides (and marks)
            out = None
        if out is None or (may_hold_secret(out, run.secrets) if len(out) < LONG_PAYLOAD
                           else may_change_payload(result, out, run.secrets)):
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


def _long_entry_may_change(values: Any, data: bytes, known: set[str],
                           names_are_credentials: bool, names_have_stem: bool) -> bool:
    """The prefilter of an entry of ``LONG_PAYLOAD`` bytes or more (``data``: its map form).

    ``values`` are the arguments without their names. Each test that says False is a
    guarantee that the scrubber changes nothing, so the entry takes the slow path only
    when every one says it may: first ``may_change`` (markers and the keys' names, cheap
    on a long prompt), then the stems' scan, which decides when ``may_change`` is unsure
    (a value it does not walk, such as a dataclass, or a marker such as ``=``).
    """
    if names_are_credentials:
        return True
    if not may_change(values, data, known):
        return False
    return may_hold_secret(data, known) and (
        not names_have_stem or may_hold_secret(_fast_encode(values), known))


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
    # Long entries are tested on the argument values (may_change): the parameter names'
    # own credential rule (a parameter called `api_key`) is decided here, once.
    names_are_credentials = any(is_credential_name(n) for n in positional)
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
            except Exception:  # the general path decides (and marks)
                data = None
            if data is None or ((may_hold_secret(data, run.secrets) and (
                not names_have_stem or may_hold_secret(
                    fast_encode([args, list(tails[n_args].values())]),  # type: ignore[union-attr]
                    run.secrets)
            )) if len(data) < LONG_PAYLOAD else _long_entry_may_change(
                [args, list(tails[n_args].values())],  # type: ignore[union-attr]
                data, run.secrets, names_are_credentials, names_have_stem
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
            except Exception:  # the general path decides (and marks)
                out = None
            if out is None or (may_hold_secret(out, run.secrets) if len(out) < LONG_PAYLOAD
                               else may_change_payload(result, out, run.secrets)):
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
