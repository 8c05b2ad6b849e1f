"""``@al.window`` and ``@al.tool``: comparison windows with sealed entries and exits.

A window's *entry* is the map of its effective arguments (or the ``entry=`` projection
ψ_in of them); its *exit* is its return value (or ``exit=`` ψ_out of it). Both are encoded
canonically and hashed with SHA-256 when the window opens and closes; the run's receipt
chain advances at every exit ([LBC] §3.2 and Appendix B, "SCRIBE"):

    receipt_k = sha256(receipt_{k-1} ‖ window ‖ entry_hash ‖ exit_hash)

The chain is a function of the sealed hashes and their order in the file, so the writer
thread computes it (``TraceWriter._seal``), the one place it is computed, and the caller
pays for neither the hash nor a lock. A window's span therefore carries its hashes but
not its receipt, which is known only once the writer has chained the exit: the trace file
holds it, and ``agentlog verify`` recomputes the chain.

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

Examples:
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

from agentlog import _state
from agentlog._records import EXIT_CLOSED, EXIT_OK
from agentlog._state import WindowState, current_run_var, current_window_var
from agentlog._window.call import (
    WindowCall,
    _exit_payload,
    _leave,
    _leave_failed,
    _link_hash,
    _open,
    _Spec,
)
from agentlog._window.registry import register

F = TypeVar("F", bound=Callable[..., Any])


def _wrap_function(spec: _Spec) -> Callable[..., Any]:
    fn = spec.fn

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        run = current_run_var.get() if _state.active_runs else None
        if run is None:
            return fn(*args, **kwargs)
        with WindowCall(spec, run, args, kwargs) as call:
            call.result = fn(*args, **kwargs)
        return call.result

    return wrapper


def _wrap_coroutine(spec: _Spec) -> Callable[..., Any]:
    fn = spec.fn

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        run = current_run_var.get() if _state.active_runs else None
        if run is None:
            return await fn(*args, **kwargs)
        # The window's context variables are set in the task that awaits the coroutine:
        # the bracket of a sync call, around the first and the last await.
        with WindowCall(spec, run, args, kwargs) as call:
            call.result = await fn(*args, **kwargs)
        return call.result

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
