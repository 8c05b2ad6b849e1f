"""Windows opened and closed by calls, not by a decorated function: ``al.open_window``.

A framework owns its loop and tells its hooks when a step begins and ends
(``RunHooks.on_llm_start``/``on_llm_end``, LangChain's ``on_chain_start``/``on_chain_end``,
DSPy's ``on_module_start``/``on_module_end``). ``open_window`` opens a window there and
returns a ``WindowHandle`` that the end hook closes (``close(exit=...)``) or fails
(``fail(exc)``); it is also a context manager (sync and async). It is the same window as
``@al.window`` records (``agentlog._window.call``'s ``_open``/``_close``): its entry is
the value given, its exit the value given to ``close``.

Threads and tasks: the window becomes the current window of the context that opened it
(model and tool calls made there are counted into it). Closing it from that context
restores the window that was current before; closing it from another one (a callback on
a worker thread) is allowed: from then on the opening context's records go to the
nearest open window around it. ``close`` and ``fail`` run once; later calls do nothing.
"""

from __future__ import annotations

import contextlib
import threading
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from agentlog import _state
from agentlog._records import EXIT_FAILED, EXIT_OK
from agentlog._state import WindowState, current_run_var, current_window_var
from agentlog._window.call import _failure_payload, _open, _safe_close, _Spec
from agentlog._window.registry import function_id

__all__ = ["WindowHandle", "open_window"]


def _entry(value: Any) -> Any:
    """The function a window opened by a call stands for: its one argument is the entry,
    and, as the spec's entry projection, the entry is that argument as it is."""
    return value


_specs: dict[tuple[str, str | None, str | None], _Spec] = {}
_specs_lock = threading.Lock()
_MAX_SPECS = 4096  # distinct (name, after, function): beyond it specs are made per call


def _spec(name: str, after: str | None, function: str | None) -> _Spec:
    key = (name, after, function)
    spec = _specs.get(key)
    if spec is None:
        spec = _Spec(name, _entry, _entry, None, after, frozenset(), ())
        # The function a replay re-enters: the framework's step, when the caller names it;
        # otherwise none (a window opened by a hook has no function of its own).
        spec.function_id = function  # type: ignore[assignment]
        with _specs_lock:
            if len(_specs) < _MAX_SPECS:
                _specs[key] = spec
    return spec


class WindowHandle:
    """An open window (``open_window``): ``close(exit=...)`` or ``fail(exc)`` ends it.

    Attributes:
        name: the window's name.
        state: its ``WindowState`` (``al.current_window()`` inside it); None when no run
            was recording where it was opened (then the handle does nothing).
    """

    __slots__ = ("_done", "_otel_token", "_token", "name", "state")

    def __init__(self, name: str, state: WindowState | None) -> None:
        self.name = name
        self.state = state
        self._done = threading.Lock()
        self._token: Any = None
        self._otel_token: Any = None
        if state is not None:
            self._token = current_window_var.set(state)
            if state.span is not None:
                self._otel_token = otel_context.attach(trace.set_span_in_context(state.span))

    @property
    def closed(self) -> bool:
        """Whether ``close`` or ``fail`` was called."""
        return self._done.locked()

    def close(self, exit: Any = None) -> None:
        """Record the window's exit: ``exit`` (plain data, sealed as a window's return
        value is). Runs once; the host's value is never changed or raised over."""
        self._end(EXIT_OK, exit, None)

    def fail(self, exc: BaseException) -> None:
        """Record the window's failure exit ⊥ of ``exc`` (which is not raised here)."""
        if not isinstance(exc, BaseException):
            raise TypeError(f"`exc` must be an exception; found {type(exc).__name__}")
        self._end(EXIT_FAILED, _failure_payload(exc), exc)

    def _end(self, status: int, payload: Any, exc: BaseException | None) -> None:
        if not self._done.acquire(blocking=False):
            return
        st = self.state
        if st is None:
            return
        self._restore(st)
        _safe_close(st, status, payload, exc)

    def _restore(self, st: WindowState) -> None:
        """Give the opening context its previous window back, when this is that context."""
        if current_window_var.get() is st:
            try:
                current_window_var.reset(self._token)
            except ValueError:  # the same window, current in a copy of the context
                current_window_var.set(st.parent)
        if self._otel_token is not None and trace.get_current_span() is st.span:
            # Another context's token: leave that context alone.
            with contextlib.suppress(Exception):
                otel_context.detach(self._otel_token)

    def __enter__(self) -> WindowHandle:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is not None:
            self.fail(exc)
        else:
            self.close()

    async def __aenter__(self) -> WindowHandle:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.__exit__(kind, exc, tb)

    def __repr__(self) -> str:
        state = "no run" if self.state is None else ("closed" if self.closed else "open")
        return f"<WindowHandle {self.name!r} {state}>"


def open_window(name: str, entry: Any = None, *, after: str | None = None,
                function: Any = None) -> WindowHandle:
    """Open a window here; the returned handle's ``close``/``fail`` ends it.

    For frameworks that own the loop and call hooks when a step starts and ends. The
    window is recorded exactly as ``@al.window`` records one: ``entry`` is sealed as its
    entry state (plain data: a model request, the step's input), ``close(exit=...)``'s
    value as its exit; model calls, tools and selections made in this context while it
    is open are counted into it, and it nests under the window open here.

    Args:
        name: the window's name.
        entry: the entry state (what the step starts from).
        after: the window whose exit this one's entry must equal (a link ``verify``
            checks), as in ``@al.window(after=...)``.
        function: the framework's step function (or its ``"module:qualname"``) the window
            stands for, recorded so that a replay can find it when the app registers it.

    Returns:
        A ``WindowHandle``; without a run recording in this context it does nothing.

    Raises:
        ValueError: ``name`` is not a non-empty string.
        agentlog.ArtifactEncodingError: ``entry`` has no canonical encoding and the run is
            ``strict``.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"`name` of open_window must be a non-empty str; found {name!r}")
    if function is not None and not isinstance(function, str):
        function = function_id(function)
    if not _state.active_runs:
        return WindowHandle(name, None)
    run = current_run_var.get()
    if run is None:
        _state.warn_runless_thread(f"window {name!r}")
        return WindowHandle(name, None)
    return WindowHandle(name, _open(_spec(name, after, function), run, (entry,), {}))
