"""Re-entering a sealed window instance: its arguments, its function and its streams.

A re-entry calls the window's decorated function again, in a fresh run recorded with the
source run's seed and noise generator (``RunStart.seed``, ``RunStart.generator``)::

    fn = window_function(view)                       # registered by the user's app
    args, kwargs = reenter_arguments(view, secrets={"api_key": key}, instance=factory)
    with al.record(out, seed=start.seed, task=start.task, generator=start.generator), \
            resume_streams(view):
        call_window(fn, args, kwargs)

``resume_streams(view)`` also checks that the run draws with the source run's generator
and, under a generator that folds the task into the noise, for the source run's task.
``call_window`` runs the window to its end whatever its kind (``async def``, generators).

* **Arguments.** The sealed entry is the map of effective arguments; for a window with an
  ``entry=`` projection the full argument map was stored beside it (``args_hash``) and is
  used instead. Secret arguments (``window(secret=...)``, ``Annotated[..., al.Secret]``,
  credential-named parameters) were sealed as ``"<redacted>"``: each must be supplied
  again, in ``secrets=`` or the environment variable ``AGENTLOG_SECRET_<NAME>``; a missing
  one is refused with a message naming it.
* **Methods.** ``self`` is not part of an entry (it is the object, not an input). Pass
  ``instance=`` the object to bind, or a factory: a function (or bound method, or
  ``functools.partial``) called with the ``WindowView`` that returns the object. An app
  typically defines such a factory next to its windows.
* **Streams.** Every ``al.select``/``al.proceed`` stream restarts at the step it had
  reached when the window opened (``WindowEnter.steps``), so the re-entered window gets
  the recorded Gumbel draws and stop uniforms: common random numbers ([SSC] Appendix D).
* **Tools.** Recorded tool results are served by ``tool_result`` (frozen mode).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import agentlog as al
from agentlog import CacheMiss, ReplayError, Trace
from agentlog.records import Continuation, Selection, ToolCall, WindowView, decode_artifact
from agentlog.reentry import noise_seed, registered_window, start_streams

__all__ = [
    "call_window",
    "reenter_arguments",
    "resume_streams",
    "stream_offsets",
    "tool_result",
    "window_function",
]


def window_function(view: WindowView, *, app: str | None = None) -> Callable[..., Any]:
    """The decorated function that recorded ``view``, as registered in this process.

    Looked up by the ``module:qualname`` the entry recorded (older traces: by the window
    name, which must then be unique). The app module that defines it must be imported
    first (``--app``): a trace never decides what code runs. A window recorded from a
    script run as ``python script.py`` (``__main__:qualname``) is found by its qualified
    name in ``app``, the module the replay imported (``registered_window``).

    Raises:
        KeyError: the function is not registered (the message names it and the module to
            import).
    """
    return registered_window(view.name, view.enter.function, app=app)


def call_window(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any],
                *, where: str = "the window") -> Any:
    """Call a re-entered window's function and run it to its end, whatever its kind.

    A coroutine function is awaited, an async generator and a generator are drained (their
    result is the list of what they yielded, as ``list(gen(...))`` hands on), a plain
    function is called. The coroutine runs on an event loop of its own in this thread
    (``asyncio.run``, in a copy of this context, so the run being recorded, the serving
    and the steer are seen inside), or in a helper thread when this thread already runs
    a loop. A window is never left unrun: a re-entry that only created a coroutine would
    record an empty arm.

    Raises:
        Whatever the window raises, unchanged.
    """
    result = fn(*args, **kwargs)
    if inspect.isgenerator(result):
        return list(result)
    if inspect.isasyncgen(result):
        return _run_async(_drain(result), where)
    if inspect.isawaitable(result):
        return _run_async(_awaited(result), where)
    return result


async def _drain(agen: Any) -> list[Any]:
    return [item async for item in agen]


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _run_async(coro: Any, where: str) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no loop in this thread: the usual case (engine worker threads)
        return asyncio.run(coro)
    # This thread runs a loop already (a sync re-entry called from async code): run the
    # window on a loop of its own in a helper thread, in a copy of this context.
    ctx = contextvars.copy_context()
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["value"] = ctx.run(asyncio.run, coro)
        except BaseException as exc:  # handed to the caller below
            out["error"] = exc

    worker = threading.Thread(target=target, name=f"agentlog re-entry of {where}")
    worker.start()
    worker.join()
    if "error" in out:
        raise out["error"]
    return out.get("value")


def stream_offsets(view: WindowView, trace: Trace | None = None) -> dict[str, int]:
    """``{stream: step}`` of every random stream when the window instance opened.

    Streams not named had not been drawn (they were at step 0). Traces recorded before
    agentlog stored the offsets (``WindowEnter.function`` is None) need ``trace``: the
    offsets are then counted from the run's draws before the window in file order, which
    is the order of the draws when one thread drew at a time.

    Raises:
        ValueError: an older trace and no ``trace`` given.
    """
    enter = view.enter
    if enter.function is not None:
        return dict(enter.steps or {})
    if trace is None:
        raise ValueError(
            f"window {view.name!r} (run {view.run}, id {view.window}) was recorded before "
            "agentlog stored stream offsets; pass trace= (the Trace it comes from) to count "
            "them from the run's draws")
    counts: dict[str, int] = {}
    runs = [r for r in trace.runs if r.run == view.run]
    for rec in runs[0].records if runs else ():
        if rec is enter:
            return counts
        if type(rec) is Selection or type(rec) is Continuation:
            counts[rec.name] = max(counts.get(rec.name, 0), rec.step + 1)
    raise ValueError(f"window {view.name!r} (id {view.window}) is not in run {view.run} of "
                     f"{trace.path}; pass the trace the view was read from")


def recorded_generator(view: WindowView) -> str:
    """The noise generator the run of ``view`` drew with (its ``RunStart.generator``).

    Raises:
        ValueError: the view's run has no ``RunStart`` in its trace (a cut file).
    """
    for run in view.trace.runs:
        if run.run == view.run and run.start is not None:
            return run.start.generator
    raise ValueError(f"window {view.name!r} (run {view.run}) has no RunStart in "
                     f"{view.trace.path}: its noise generator is unknown; pass "
                     "resume_streams(stream_offsets(view), generator=...) yourself")


@contextmanager
def resume_streams(offsets: Mapping[str, int] | WindowView, *,
                   generator: str | None = None) -> Iterator[dict[str, int]]:
    """Start the current run's streams where the re-entered window found them.

    Use it inside ``al.record(..., seed=<source seed>, task=<source task>,
    generator=<source generator>)`` and before any draw of that run: each re-entry needs a
    run of its own (steps never repeat within a run).

    Args:
        offsets: the window instance itself (its offsets, ``stream_offsets(view,
            view.trace)``, and its run's generator, which the current run must use), or
            ``{stream: step}``.
        generator: the generator the current run must draw with (default: the view's, when
            a view is given; no check for a plain mapping).

    Raises:
        RuntimeError: no run is recorded in this context.
        ValueError: the run already drew a stream past its offset, or it draws with another
            noise generator than the recorded run, or (a generator that folds the task into
            the noise) for another task (the message says what to pass).
    """
    if isinstance(offsets, WindowView):
        view = offsets
        if generator is None:
            generator = recorded_generator(view)
        run = al.current_run()
        start = next((r.start for r in view.trace.runs if r.run == view.run), None)
        if (run is not None and start is not None and run.task != start.task
                and noise_seed(run.seed, run.task, generator)
                != noise_seed(run.seed, start.task, generator)):
            raise ValueError(
                f"the current run records task {run.task!r}, but the window was recorded "
                f"for task {start.task!r}, and its noise generator {generator!r} folds the "
                "task into every draw: the same seed and steps would give other draws. "
                f"Record the re-entry with al.record(..., task={start.task!r})")
        offsets = stream_offsets(view, view.trace)
    steps = dict(offsets)
    start_streams(steps, generator=generator)
    yield steps


def _is_factory(obj: Any) -> bool:
    return inspect.isfunction(obj) or inspect.ismethod(obj) or isinstance(
        obj, functools.partial)


def reenter_arguments(
    view: WindowView,
    *,
    secrets: Mapping[str, Any] | None = None,
    instance: Any = None,
    function: Callable[..., Any] | None = None,
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` that call the window's decorated function as it was called.

    Args:
        view: the window instance (``trace.windows(name)``).
        secrets: values of the secret arguments (else ``$AGENTLOG_SECRET_<NAME>``).
        instance: for a window on a method: the object to bind as ``self``, or a factory
            (function, bound method or ``functools.partial``) called with ``view``.
        function: the decorated function; default ``window_function(view)``.

    Returns:
        The arguments, with the instance first for a method.

    Raises:
        ValueError: a secret is not supplied; a method without ``instance``; a window
            whose ``entry=`` projection left no stored arguments. Each message says what
            to supply.
        KeyError: the function is not registered (import the app).
    """
    fn = window_function(view) if function is None else function
    spec = getattr(fn, "__agentlog_window__", None)
    where = f"window {view.name!r} (run {view.run}, id {view.window})"
    projected = view.enter.args_hash is not None or getattr(spec, "entry", None) is not None
    if projected:
        data = view.arguments_bytes
        if data is None:
            raise ValueError(
                f"{where} has an entry= projection and its arguments had no canonical "
                "encoding, so they were not stored: it cannot be re-entered. Make the "
                "arguments encodable (or re-record with entry= returning everything the "
                "call needs and call the function yourself)")
    else:
        data = view.entry_bytes
    args, kwargs = al.decode_arguments(fn, data, secrets=secrets,
                                       secret_names=view.enter.secret_args or ())
    if spec is not None and spec.entry is not None:
        args, kwargs = _optional_by_name(spec.binder.parameters, args, kwargs)
    method = view.enter.method or bool(getattr(getattr(spec, "binder", None), "skips_first",
                                               False))
    if not method:
        if instance is not None:
            raise ValueError(f"{where} is not a method; drop instance=")
        return args, kwargs
    if instance is None:
        raise ValueError(
            f"{where} is a method ({view.enter.function or getattr(fn, '__qualname__', fn)})"
            ": its `self` is not recorded. Pass instance=<the object>, or instance=<a "
            "factory(view) returning it> (e.g. a function of your app)")
    obj = instance(view) if _is_factory(instance) else instance
    return (obj, *args), kwargs


def _optional_by_name(parameters: Sequence[inspect.Parameter], args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Required parameters by position, optional ones by name, as an idiomatic call passes
    them (``answer(question, temperature=0.3)``), so that an ``entry=`` projection written
    against the recorded call (``lambda question, **_: question``) takes the replayed one
    too. With a ``*args`` that holds values every parameter before it stays positional."""
    positional = [p for p in parameters
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(args) != len(positional):
        return args, kwargs  # a *args with values, or a parameter left at its default
    keep: list[Any] = []
    named: dict[str, Any] = {}
    for param, value in zip(positional, args, strict=True):
        if param.kind is param.POSITIONAL_OR_KEYWORD and (
                named or param.default is not param.empty):
            named[param.name] = value  # after one by name, the rest by name too
        else:
            keep.append(value)
    return tuple(keep), {**named, **kwargs}


def tool_result(trace: Trace, *, run: int, window: int, name: str, args_hash: bytes) -> Any:
    """The recorded result of tool ``name`` called with these arguments in this window.

    ``args_hash`` is the call's ``ToolCall.args_hash`` (``agentlog.reentry.tool_args_hash``
    computes it for a live call). When the window called the tool with these arguments
    several times, the first call's result is returned.

    Raises:
        CacheMiss: no such call was recorded, or its result was not stored (traces recorded
            before tool results were kept).
        ReplayError: the recorded call failed or was refused; the message carries its error.
    """
    where = f"tool {name!r} in run {run}, window {window} of {trace.path}"
    for rec in trace.tool_calls(name):
        if rec.run != run or rec.window != window or rec.args_hash != args_hash:
            continue
        return _served(trace, rec, where)
    raise CacheMiss(f"{where}: no call with arguments {args_hash.hex()[:16]}… was recorded; "
                    "a frozen replay cannot serve it (use mode='branch' or 'rerun' to call "
                    "it live)", key=args_hash.hex())


def _served(trace: Trace, rec: ToolCall, where: str) -> Any:
    if rec.status != 0:
        what = "was refused" if rec.status == 2 else "failed"
        raise ReplayError(f"{where}: the recorded call {what} ({rec.error_type}: "
                          f"{rec.error_message}); a frozen replay cannot serve a result")
    if rec.result is not None:
        return decode_artifact(rec.result)
    if rec.result_hash is not None and trace.has_blob(rec.result_hash):
        return decode_artifact(trace.blob(rec.result_hash))
    raise CacheMiss(f"{where}: the result was hashed but not stored (a trace recorded before "
                    "agentlog kept tool results); re-record to replay it frozen",
                    key=None if rec.args_hash is None else rec.args_hash.hex())
