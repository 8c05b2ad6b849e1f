"""Windows in the one registry (``agentlog.registry.Registry``), keyed by ``module:qualname``.

Two windows may share a name (a test module and an app, two classes), so the window
registry shares names: both stay reachable because each entry records the function that
opened it (``WindowEnter.function``) and a replay looks the window up by that id. Without
an id (traces recorded before it existed) the name must be unambiguous. This module adds
only what is particular to windows: finding the function of a script run as
``python script.py`` in the app module that a replay imports.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

from agentlog._errors import InstrumentationWarning, NotRegisteredError
from agentlog._registry import Registry

WINDOWS = Registry("window", shared_names=True)  # entries: the decorated callables
_said_lock = threading.Lock()


def function_id(fn: Callable[..., Any]) -> str:
    """``"module:qualname"`` of a function (how registries and traces name it)."""
    module = getattr(fn, "__module__", None) or "?"
    return f"{module}:{getattr(fn, '__qualname__', None) or getattr(fn, '__name__', '?')}"


def _window(name_or_id: str) -> Callable[..., Any]:
    fn: Callable[..., Any] = WINDOWS.get(name_or_id).obj
    return fn


def registered_window(name: str, function: str | None = None, *,
                      app: str | None = None) -> Callable[..., Any]:
    """The decorated window function registered as ``function`` ("module:qualname"), or
    the one window called ``name`` when no function id is given (older traces).

    A window recorded from a script run as ``python script.py`` (``"__main__:qualname"``)
    is found by its qualified name in the module ``app`` (or a module under it) — the app
    the replay was told to import — with an ``InstrumentationWarning`` saying so once.

    Raises:
        NotRegisteredError: (a KeyError) nothing is registered under that id or name (the
            message lists the registered windows and says to import the app that defines
            them), or ``name`` is ambiguous without an id.
    """
    if function is not None and function in WINDOWS:
        return _window(function)
    ids = WINDOWS.ids(name)
    known = WINDOWS.names()
    if function is not None and function.startswith("__main__:"):
        return _from_script(name, function, ids, known, app)
    if function is not None:
        raise NotRegisteredError(
            f"window {name!r} was recorded from {function}, which is not registered in this "
            f"process (registered windows: {known or 'none'}); import the module that "
            f"defines it (pass --app {function.split(':', 1)[0]})")
    if not ids:
        raise NotRegisteredError(f"no window {name!r} is registered (registered windows: "
                       f"{known or 'none'}); import the app module that defines it (--app)")
    if len(ids) > 1:
        raise NotRegisteredError(
            f"window name {name!r} is registered by {len(ids)} functions ({', '.join(ids)}) "
            "and the trace does not say which one recorded it; pass the function id")
    return _window(ids[0])


_said_script: set[tuple[str, str]] = set()


def _from_script(name: str, function: str, ids: list[str], known: list[str],
                 app: str | None) -> Callable[..., Any]:
    """A window recorded from a script run as ``python script.py`` (module ``__main__``),
    found by its qualified name in the app module the replay imported."""
    qualname = function.partition(":")[2]

    def in_app(module: str) -> bool:
        return module != "__main__" and (app is None or module == app
                                         or module.startswith(app + "."))

    same = [i for i in ids if i.partition(":")[2] == qualname and in_app(i.partition(":")[0])]
    how = ("pass --app with the script's module name (for `python agent.py`: --app agent, "
           "run from the folder that holds it), with the agent's own run under "
           "`if __name__ == \"__main__\":` so that importing it does not run the agent")
    if not same:
        raise NotRegisteredError(
            f"window {name!r} was recorded from {function}, a script run as `python "
            f"script.py`; {'no module imported here' if app is None else f'the app {app}'} "
            f"registers no {qualname!r} as window {name!r} (registered windows: "
            f"{known or 'none'}): {how}")
    if len(same) > 1:
        raise NotRegisteredError(
            f"window {name!r} was recorded from {function}, a script run as `python "
            f"script.py`, and {len(same)} imported modules register {qualname!r} as that "
            f"window ({', '.join(same)}); import only the script's module: {how}")
    fn = _window(same[0])
    with _said_lock:
        first = (function, same[0]) not in _said_script
        _said_script.add((function, same[0]))
    if first:
        warnings.warn(
            f"window {name!r} was recorded from {function} (a script run as `python "
            f"script.py`); replaying it as {same[0]}, the same qualified name in the app "
            "module. Record from an importable module (`python -m pkg.agent`) to name the "
            "window's function exactly", InstrumentationWarning, stacklevel=3)
    return fn


def register(name: str, fid: str, wrapped: Callable[..., Any]) -> None:
    """Register ``wrapped``; the same id again (a module reload) silently replaces it."""
    WINDOWS.register(name, wrapped, id=fid)
