"""``@al.tool``: tool calls recorded as ``ToolCall`` records of the current window.

A call's arguments (the bound map, secrets redacted) and its result are sealed like a
window's entry and exit: scrubbed of credentials, canonically encoded and hashed. Small
ones are kept inline in the record, larger ones as Blobs named by their hash, so a frozen
replay can serve a tool from the trace as it serves model calls
(``agentlog.replay.tool_result``).

A replay serves tool calls from a recording with ``serving_tools(lookup)``: while it is
in force in a context, a tool call is not made; its arguments hash is looked up and the
recorded result returned (or the recorded error raised), and the call is recorded with
``served=True``. A call the lookup does not know raises ``agentlog.CacheMiss`` naming the
tool and its arguments hash. ``ToolServing.live = True`` lets calls through again (a
``branch`` replay after its first changed decision).

A served result has the type the live tool returned. The canonical encoding keeps plain
values (maps, lists, str, numbers, arrays) as they are; anything else (a pydantic model, a
dataclass, a msgspec Struct, a tuple) is rebuilt from the tool's own return annotation
(pydantic's ``TypeAdapter``; ``msgspec.convert`` for Structs) and checked against the type
the recording names (``ToolCall.result_type``). The type comes from the code the user
decorated, never from a name stored in the trace. A result that cannot be rebuilt as its
recorded type fails the call (``agentlog.ReplayError`` naming the tool and the type) and
counts as a miss: a frozen replay never serves another type.

Examples:
    >>> import agentlog as al
    >>> @al.tool("search")
    ... def search(query: str) -> list[str]:
    ...     return [query]
    >>> search("q")  # no recorder active: just the call
    ['q']
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import hashlib
import inspect
import itertools
import time
import typing
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar, cast, overload

import msgspec
import numpy as np

from . import _state
from ._encoding import ArgumentBinder, seal_clean
from ._errors import ArtifactEncodingError, CacheMiss, ReplayError, SealedWindowError
from ._recorder import _redacted, store_artifact
from ._records import ToolCall
from ._spans import live as _live
from ._state import Run, WindowState, current_run_var, window_in
from ._window.call import _error_text

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

_perf = time.perf_counter_ns


@dataclass(frozen=True)
class RecordedTool:
    """What a recording says one tool call did: its result, or its error.

    Attributes:
        status: 0 returned ``result``; 1 raised (``error_type``: ``error_message``).
        result: the decoded recorded result (status 0).
        error_type, error_message: the recorded exception (status 1).
    """

    status: int
    result: Any = None
    error_type: str | None = None
    error_message: str | None = None
    result_type: str | None = None  # "module:qualname" of the live result (newer traces)


ToolLookup = Callable[[str, bytes], RecordedTool | None]
"""``(tool name, ToolCall.args_hash) -> RecordedTool``, or None when never recorded."""


class ToolServing:
    """The serving in force in a context (``serving_tools``); shared by copied contexts.

    Attributes:
        lookup: the recorded calls.
        live: when True, calls run live again (and are recorded as usual).
        served: calls answered from the recording so far (misses included).
        misses: calls the recording could not answer (each raised ``CacheMiss``), counted
            so that a replay can fail even when the agent caught the error.
    """

    __slots__ = ("live", "lookup", "misses", "served")

    def __init__(self, lookup: ToolLookup) -> None:
        self.lookup = lookup
        self.live = False
        self.served = 0
        self.misses = 0


_serving_var: ContextVar[ToolServing | None] = ContextVar("agentlog_tool_serving",
                                                          default=None)


@contextlib.contextmanager
def serving_tools(lookup: ToolLookup) -> Iterator[ToolServing]:
    """Serve every ``@al.tool`` call of this context from a recording; none runs live.

    A call inside a run is looked up by ``(name, args_hash)``: a recorded result is
    returned, a recorded error raised again (a built-in exception type as itself, any
    other as ``agentlog.ReplayError`` carrying its type and message: no code named by a
    trace is imported), an unknown call raises ``agentlog.CacheMiss`` naming the tool and
    its arguments hash. Each is recorded as a ``ToolCall`` with ``served=True``. Contexts
    copied from this one (``copy_context_executor``, asyncio tasks) share the serving.

    Raises:
        RuntimeError: no run is being recorded in this context (the served calls must be
            recorded: open ``al.record`` first).
    """
    if current_run_var.get() is None:
        raise RuntimeError("serving_tools needs a run: call it inside `with al.record(...)`, "
                           "so that the served tool calls are recorded")
    serving = ToolServing(lookup)
    token = _serving_var.set(serving)
    try:
        yield serving
    finally:
        _serving_var.reset(token)


def _served_error(name: str, rec: RecordedTool) -> BaseException:
    kind = getattr(builtins, rec.error_type or "", None)
    text = rec.error_message or ""
    # Only built-in exception types are rebuilt; nothing named by a trace is imported.
    if isinstance(kind, type) and issubclass(kind, Exception):
        try:
            return kind(text)
        except Exception:  # a built-in whose constructor wants other arguments
            pass
    return ReplayError(f"tool {name!r}: the recorded call raised {rec.error_type}: {text} "
                       "(served from the recording)")


def type_name(tp: type) -> str:
    """``"module:qualname"`` of a type; a numpy scalar as the Python scalar it encodes as."""
    if issubclass(tp, np.generic):
        for kind, plain in ((np.bool_, bool), (np.integer, int), (np.floating, float)):
            if issubclass(tp, kind):
                return f"builtins:{plain.__qualname__}"
    return f"{tp.__module__}:{tp.__qualname__}"


# What the canonical encoding gives back as itself: a container of only these (and of
# maps and lists of them) needs no rebuilding.
_KEPT: frozenset[type] = frozenset({str, int, float, bool, type(None), bytes, dict, list,
                                    np.ndarray})
_WALK_BUDGET = 10_000  # values looked at per result; past it the inner types are not named


def result_type(value: Any) -> str:
    """``ToolCall.result_type``: the result's type, and the types inside it that the
    canonical encoding does not give back as themselves.

    ``"builtins:list[pkg.mod:Hit]"`` for a list of dataclasses, ``"builtins:dict"`` for a
    map of plain values, ``"pkg.mod:Weather"`` for a pydantic model (its fields are its
    annotation's to rebuild). Containers (maps, lists, tuples, sets) are walked up to
    ``_WALK_BUDGET`` values; past it the inner types are given as ``[…]``, unknown.
    """
    inner: set[str] = set()
    stack, seen = [value], 0
    while stack:
        seen += 1
        if seen > _WALK_BUDGET:
            return f"{type_name(type(value))}[…]"
        v = stack.pop()
        if isinstance(v, dict):
            children: Iterable[Any] = itertools.chain(v.keys(), v.values())
        elif isinstance(v, list | tuple | set | frozenset):
            children = v
        else:
            continue
        for c in children:
            if type(c) not in _KEPT:
                inner.add(type_name(type(c)))
            stack.append(c)
    top = type_name(type(value))
    return f"{top}[{', '.join(sorted(inner))}]" if inner else top


def _same_type(got: str, want: str) -> bool:
    if got == want:
        return True
    # Past the walk's budget the inner types are unknown: the outer type decides.
    return (got.endswith("[…]") or want.endswith("[…]")) and (
        got.partition("[")[0] == want.partition("[")[0])


_NO_ANNOTATION = object()


class _Returns:
    """A tool's return annotation, resolved once, and the rebuild of a served result."""

    __slots__ = ("_adapter", "_annotation", "fn")

    def __init__(self, fn: Callable[..., Any] | None, annotation: Any = None) -> None:
        self.fn = fn
        # resolved on first use (a served call); given for a framework's tool (tool_call)
        self._annotation: Any = None if fn is not None or annotation is not None \
            else _NO_ANNOTATION
        if annotation is not None:
            self._annotation = _NO_ANNOTATION if annotation is Any else annotation
        self._adapter: Any = None

    def annotation(self) -> Any:
        if self._annotation is None:
            try:
                hints = typing.get_type_hints(self.fn)
            except Exception:  # an unresolvable forward reference: no usable annotation
                hints = {}
            found = hints.get("return", _NO_ANNOTATION)
            self._annotation = _NO_ANNOTATION if found is Any else found
        return self._annotation

    def rebuild(self, value: Any) -> Any:
        annotation = self.annotation()
        if isinstance(annotation, type) and isinstance(value, annotation):
            return value
        if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
            return msgspec.convert(value, annotation)
        if self._adapter is None:
            import pydantic

            self._adapter = pydantic.TypeAdapter(annotation)
        return self._adapter.validate_python(value)


def _typed(name: str, rec: RecordedTool, returns: _Returns) -> Any:
    """The recorded result as the type the live tool returned (see the module docs).

    Raises:
        ReplayError: the result cannot be rebuilt as its recorded type.
    """
    value, want = rec.result, rec.result_type
    if want is not None and _same_type(result_type(value), want):
        return value  # the encoding kept the type (plain values)
    annotation = returns.annotation()
    if annotation is _NO_ANNOTATION:
        if want is None:
            return value  # an older trace, and nothing to rebuild it from
        raise ReplayError(
            f"tool {name!r} returned a {want} when it was recorded; the recording holds it "
            f"as a {type(value).__name__}, and the tool declares no return type to rebuild "
            f"it from. Annotate the tool's return type (-> {want.rpartition(':')[2]}) so a "
            "replay serves the type the tool returns")
    shown = getattr(annotation, "__qualname__", None) or repr(annotation)
    try:
        out = returns.rebuild(value)
    except Exception as exc:
        raise ReplayError(
            f"tool {name!r}: its recorded result cannot be rebuilt as {shown}, its return "
            f"annotation ({type(exc).__name__}: {str(exc)[:300]}); a frozen replay will not "
            "serve another type. Make the annotation name the type the tool returns") from None
    got = result_type(out)
    if want is not None and not _same_type(got, want):
        raise ReplayError(
            f"tool {name!r} returned a {want} when it was recorded, but its return "
            f"annotation {shown} rebuilds a {got}; make the annotation name the type the "
            "tool returns")
    return out


def _serve(serving: ToolServing, run: Run, st: WindowState | None, name: str,
           sealed: tuple[bytes, bytes | None] | None, returns: _Returns,
           span: bool = True) -> Any:
    t0 = _perf()
    serving.served += 1
    if sealed is None:
        serving.misses += 1
        err: BaseException = CacheMiss(
            f"tool {name!r}: its arguments have no canonical encoding, so a frozen replay "
            "cannot look the call up; make them encodable or replay with mode='rerun'")
        _tool_record(run, st, name, t0, 1, sealed, None, err, served=True, span=span)
        raise err
    try:
        rec = serving.lookup(name, sealed[0])
    except ReplayError as exc:  # the lookup's own miss (a result hashed but not stored)
        serving.misses += 1
        _tool_record(run, st, name, t0, 1, sealed, None, exc, served=True, span=span)
        raise
    if rec is None:
        serving.misses += 1
        err = CacheMiss(
            f"tool {name!r} called with arguments {sealed[0].hex()[:16]}… was never recorded "
            "with these arguments, so a frozen replay cannot serve it (replay with "
            "mode='branch' or 'rerun' to call it live)", key=sealed[0].hex())
        _tool_record(run, st, name, t0, 1, sealed, None, err, served=True, span=span)
        raise err
    if rec.status != 0:
        err = _served_error(name, rec)
        _tool_record(run, st, name, t0, 1, sealed, None, err, served=True, span=span)
        raise err
    try:
        result = _typed(name, rec, returns)
    except ReplayError as exc:
        serving.misses += 1
        _tool_record(run, st, name, t0, 1, sealed, None, exc, served=True, span=span)
        raise
    _tool_record(run, st, name, t0, 0, sealed, result, None, served=True, span=span)
    return result


def _tool_record(
    run: Run, st: WindowState | None, name: str, t0: int, status: int,
    args: tuple[bytes, bytes | None] | None, result: Any, exc: BaseException | None,
    *, served: bool = False, span: bool = True,
) -> None:
    result_hash = result_inline = None
    if status == 0:
        try:
            result_hash, result_inline = store_artifact(run, result,
                                                        what=f"tool {name!r} result")
        except ArtifactEncodingError:
            result_hash = None
    rec = ToolCall(
            run=run.index,
            window=-1 if st is None else st.id,
            name=name,
            t_ns=run.now_ns(),
            wall_ns=_perf() - t0,
            status=status,
            args_hash=None if args is None else args[0],
            result_hash=result_hash,
            error_type=None if exc is None else type(exc).__qualname__,
            error_message=None if exc is None else _error_text(run, exc),
            args=None if args is None else args[1],
            result=result_inline,
            served=served,
            result_type=result_type(result) if status == 0 else None,
        )
    run.writer.put(rec)
    if span and run.tracer is not None:
        _live.tool(run, st, rec)


def _run_or_serve(run: Run, st: WindowState | None, name: str,
                  sealed: tuple[bytes, bytes | None] | None, returns: _Returns,
                  call: Callable[[], Any], span: bool = True) -> Any:
    """A tool call entered in ``run``: served under a frozen replay, else ``call()``,
    recorded with its result or its exception (which goes on to the caller)."""
    serving = _serving_var.get()
    if serving is not None and not serving.live:
        return _serve(serving, run, st, name, sealed, returns, span)
    t0 = _perf()
    try:
        result = call()
    except BaseException as exc:
        _tool_record(run, st, name, t0, 1, sealed, None, exc, span=span)
        raise
    _tool_record(run, st, name, t0, 0, sealed, result, None, span=span)
    return result


async def _arun_or_serve(run: Run, st: WindowState | None, name: str,
                         sealed: tuple[bytes, bytes | None] | None, returns: _Returns,
                         call: Callable[[], Awaitable[Any]], span: bool = True) -> Any:
    """The async twin of ``_run_or_serve``: ``call()`` returns an awaitable."""
    serving = _serving_var.get()
    if serving is not None and not serving.live:
        return _serve(serving, run, st, name, sealed, returns, span)
    t0 = _perf()
    try:
        result = await call()
    except BaseException as exc:
        _tool_record(run, st, name, t0, 1, sealed, None, exc, span=span)
        raise
    _tool_record(run, st, name, t0, 0, sealed, result, None, span=span)
    return result


def _tool_enter(
    name: str, binder: ArgumentBinder, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Run, WindowState | None, tuple[bytes, bytes | None] | None]:
    run = cast(Run, current_run_var.get())
    return _tool_enter_bound(run, name, binder.bind(args, kwargs, run.secrets))


def _tool_enter_bound(
    run: Run, name: str, bound: Any,
) -> tuple[Run, WindowState | None, tuple[bytes, bytes | None] | None]:
    st = window_in(run)
    sealed: tuple[bytes, bytes | None] | None
    try:
        sealed = store_artifact(run, bound, what=f"tool {name!r} arguments", strict=run.strict)
    except ArtifactEncodingError:
        if run.strict:
            raise
        sealed = None
    if st is not None and name in st.forbid:
        err = SealedWindowError(
            f"tool {name!r} was called inside window {st.name!r}, which is sealed against it "
            f"(forbid={sorted(st.forbid)}). The call was refused and recorded; remove the "
            f"call from this window or drop {name!r} from its forbid= list."
        )
        _tool_record(run, st, name, _perf(), 2, sealed, None, err)
        raise err
    if st is not None:
        st.add_usage(tool_calls=1)
    return run, st, sealed


def tool_args_hash(fn: Callable[..., Any], args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> bytes:
    """The ``ToolCall.args_hash`` a call ``fn(*args, **kwargs)`` of a tool records.

    Computed as the tool wrapper does (secret arguments redacted, credentials scrubbed,
    the run's ``redact=`` hook when called inside a run), so a frozen replay can look the
    recorded result up by it.

    Raises:
        TypeError: ``fn`` is not an ``@al.tool`` function.
        ArtifactEncodingError: an argument has no canonical encoding.
    """
    binder = getattr(fn, "__agentlog_tool__", None)
    if not isinstance(binder, ArgumentBinder):
        raise TypeError(f"{getattr(fn, '__qualname__', fn)!r} is not an @al.tool function; "
                        "pass the decorated tool")
    run = current_run_var.get()
    known = None if run is None else run.secrets
    bound: Any = binder.bind(args, kwargs, known)
    if run is not None and run.redact is not None:
        bound = _redacted(run.redact, bound)
    data, _ = seal_clean(bound, known, what="tool arguments", strict=True)
    return hashlib.sha256(data).digest()


@overload
def tool(name: F, /) -> F: ...


@overload
def tool(name: str, *, secret: Iterable[str] = ()) -> Callable[[F], F]: ...


def tool(name: str | F, *, secret: Iterable[str] = ()) -> Callable[[F], F] | F:
    """Declare a tool. Each call is recorded as a ToolCall in the current window.

    The call's arguments (secrets redacted) and result are stored scrubbed: inline when
    small, as Blobs otherwise, so a frozen replay can serve them.

    Inside a window that forbids ``name`` (``window(..., forbid=(name,))``) a call raises
    ``SealedWindowError``: absence by construction. No-op without an active recorder.
    Bare ``@al.tool`` names the tool after the function.

    A call from a thread that does not see the run (a plain ``ThreadPoolExecutor``) is
    not recorded; while a run is open the first such call warns
    (``InstrumentationWarning``): use ``agentlog.context.copy_context_executor()``.

    Raises:
        ValueError: ``name`` is not a non-empty string.
    """
    if callable(name):  # bare @al.tool
        return tool(getattr(name, "__name__", ""))(name)
    if not isinstance(name, str) or not name:
        raise ValueError(f"`name` of @tool must be a non-empty str; found {name!r}")
    if isinstance(secret, str):
        secret = (secret,)
    tool_name = name

    def decorate(fn: F) -> F:
        if not callable(fn):
            raise TypeError(f"@tool({tool_name!r}) decorates a function; found "
                            f"{type(fn).__name__}")
        binder = ArgumentBinder(fn, secret=secret)
        returns = _Returns(fn)
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def awrapper(*args: Any, **kwargs: Any) -> Any:
                if not _state.active_runs:
                    return await fn(*args, **kwargs)
                if current_run_var.get() is None:
                    _state.warn_runless_thread(f"tool {tool_name!r}")
                    return await fn(*args, **kwargs)
                run, st, sealed = _tool_enter(tool_name, binder, args, kwargs)
                return await _arun_or_serve(run, st, tool_name, sealed, returns,
                                            lambda: fn(*args, **kwargs))

            awrapper.__agentlog_tool__ = binder  # type: ignore[attr-defined]
            return cast(F, awrapper)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not _state.active_runs:
                return fn(*args, **kwargs)
            if current_run_var.get() is None:
                _state.warn_runless_thread(f"tool {tool_name!r}")
                return fn(*args, **kwargs)
            run, st, sealed = _tool_enter(tool_name, binder, args, kwargs)
            return _run_or_serve(run, st, tool_name, sealed, returns,
                                 lambda: fn(*args, **kwargs))

        wrapper.__agentlog_tool__ = binder  # type: ignore[attr-defined]
        return cast(F, wrapper)

    return decorate


def _framework_call(name: str, arguments: Any) -> tuple[Run, WindowState | None,
                                                         tuple[bytes, bytes | None] | None]:
    if not isinstance(name, str) or not name:
        raise ValueError(f"`name` of tool_call must be a non-empty str; found {name!r}")
    if not isinstance(arguments, Mapping):
        raise TypeError(f"tool_call({name!r}): `arguments` must be the tool's arguments as a "
                        f"mapping of name to value; found {type(arguments).__name__} (wrap "
                        "a single value: {'input': value})")
    run = cast(Run, current_run_var.get())
    # Sealed as @al.tool's arguments are: credentials scrubbed, the run's redact= hook.
    return _tool_enter_bound(run, name, dict(arguments))


def tool_call(name: str, arguments: Mapping[str, Any], call: Callable[[], T], *,
              returns: Any = None, span: bool = True) -> T:
    """Record a tool call that a framework makes, or serve it under a frozen replay.

    ``call()`` runs the tool (the framework's own invocation); its arguments ``arguments``
    and its result are recorded as a ``ToolCall`` in the current window, as ``@al.tool``
    records one. Under a frozen replay (and a branch replay before its branch point) the
    recorded result is returned instead and ``call`` is not run; it is rebuilt as the type
    the live tool returned (``returns``: the type to rebuild it as, e.g. a pydantic
    model; plain data comes back as it was). Outside a run it is ``call()``. ``span=False``
    records it without agentlog's ``execute_tool`` span, for a call the framework's own
    instrumentation already traces (one span per call in the backend).

    Raises:
        ValueError, TypeError: a bad ``name`` or ``arguments`` (not a mapping).
        agentlog.CacheMiss: a frozen replay holds no call with these arguments.
        agentlog.ReplayError: the recorded result cannot be rebuilt as its type.
        Exception: whatever ``call`` raises, unchanged (recorded as the call's error).
    """
    if not _state.active_runs or current_run_var.get() is None:
        return call()
    run, st, sealed = _framework_call(name, arguments)
    return cast(T, _run_or_serve(run, st, name, sealed, _Returns(None, returns), call, span))


async def atool_call(name: str, arguments: Mapping[str, Any],
                     call: Callable[[], Awaitable[T]], *, returns: Any = None,
                     span: bool = True) -> T:
    """The async twin of ``tool_call``: ``call()`` returns an awaitable."""
    if not _state.active_runs or current_run_var.get() is None:
        return await call()
    run, st, sealed = _framework_call(name, arguments)
    return cast(T, await _arun_or_serve(run, st, name, sealed, _Returns(None, returns), call,
                                        span))
