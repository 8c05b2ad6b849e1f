"""The window registry: decorated window functions keyed by ``module:qualname``.

Two windows may share a name (a test module and an app, two classes); both stay reachable
because each entry records the function that opened it (``WindowEnter.function``) and a
replay looks the window up by that id. Without an id (traces recorded before it existed)
the name must be unambiguous.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

# The window registry. Keyed by "module:qualname" of the decorated function, so two
# windows that share a name (a test module and an app, two classes) both stay reachable;
# a replay looks a window up by the function its trace recorded (WindowEnter.function).
_registry: dict[str, Callable[..., Any]] = {}  # function id -> the decorated callable
_by_name: dict[str, list[str]] = {}  # window name -> function ids, in registration order
_registry_lock = threading.Lock()


def function_id(fn: Callable[..., Any]) -> str:
    """``"module:qualname"`` of a function (how registries and traces name it)."""
    module = getattr(fn, "__module__", None) or "?"
    return f"{module}:{getattr(fn, '__qualname__', None) or getattr(fn, '__name__', '?')}"


def window_registry() -> dict[str, Callable[..., Any]]:
    """Window name → the (undecorated) function last registered under it (used by replay)."""
    with _registry_lock:
        out: dict[str, Callable[..., Any]] = {}
        for name, ids in _by_name.items():
            out[name] = _registry[ids[-1]].__agentlog_window__.fn  # type: ignore[attr-defined]
        return out


def registered_window(name: str, function: str | None = None) -> Callable[..., Any]:
    """The decorated window function registered as ``function`` ("module:qualname"), or
    the one window called ``name`` when no function id is given (older traces).

    Raises:
        KeyError: nothing is registered under that id or name (the message lists the
            registered windows and says to import the app that defines them), or ``name``
            is ambiguous without an id.
    """
    with _registry_lock:
        if function is not None and function in _registry:
            return _registry[function]
        ids = list(_by_name.get(name, ()))
        known = sorted(_by_name)
    if function is not None:
        raise KeyError(
            f"window {name!r} was recorded from {function}, which is not registered in this "
            f"process (registered windows: {known or 'none'}); import the module that "
            f"defines it (pass --app {function.split(':', 1)[0]})")
    if not ids:
        raise KeyError(f"no window {name!r} is registered (registered windows: "
                       f"{known or 'none'}); import the app module that defines it (--app)")
    if len(ids) > 1:
        raise KeyError(
            f"window name {name!r} is registered by {len(ids)} functions ({', '.join(ids)}) "
            "and the trace does not say which one recorded it; pass the function id")
    return _registry[ids[0]]


def register(name: str, fid: str, wrapped: Callable[..., Any]) -> None:
    """Register ``wrapped``; the same id again (a module reload) silently replaces it."""
    with _registry_lock:
        _registry[fid] = wrapped
        ids = _by_name.setdefault(name, [])
        if fid in ids:
            ids.remove(fid)
        ids.append(fid)


