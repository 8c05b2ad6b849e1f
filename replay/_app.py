"""Which code a replay runs: the app module the user names, never one a trace names.

A replay scores recorded states with channels and scorers that some module registers
(``@al.channel``, ``@al.scorer``). That module is named by the user, in this order: the
``app`` argument (``--app pkg.mod``), else ``[tool.agentlog] app = "pkg.mod"`` in the
nearest ``pyproject.toml`` upward from the working folder, else ``$AGENTLOG_APP``. A trace
stores the modules its windows were recorded from, but only as information: when no app
is given, the error names them and the exact flag to pass, and nothing is imported.

Examples:
    >>> from agentlog.replay import resolve_app
    >>> resolve_app("agentlog.examples.deep_research").__name__
    'agentlog.examples.deep_research'
"""

from __future__ import annotations

import importlib
import os
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from agentlog import AppImportError, AppNotGivenError
from agentlog.records import iter_runs

__all__ = [
    "APP_ENV",
    "AppImportError",
    "AppNotGivenError",
    "app_from_pyproject",
    "recorded_modules",
    "resolve_app",
]

APP_ENV = "AGENTLOG_APP"


def app_from_pyproject(start: Path | None = None) -> tuple[str, Path] | None:
    """``[tool.agentlog] app`` of the nearest ``pyproject.toml`` upward from ``start``.

    Only the nearest file counts (that is the project the user is in); None when it has
    no such key or there is no ``pyproject.toml`` at all.

    Raises:
        ValueError: the nearest ``pyproject.toml`` is not valid TOML, or its ``app`` is not
            a non-empty string.
    """
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if not candidate.is_file():
            continue
        try:
            data = tomllib.loads(candidate.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{candidate}: not valid TOML ({exc}); fix it or pass --app "
                             "MODULE") from None
        table = data.get("tool", {}).get("agentlog", {})
        if not isinstance(table, dict) or "app" not in table:
            return None
        app = table["app"]
        if not isinstance(app, str) or not app.strip():
            raise ValueError(f"{candidate}: [tool.agentlog] app must be a module name such "
                             f"as \"pkg.mod\"; found {app!r}")
        return app.strip(), candidate
    return None


def _module_of(record: Any) -> str | None:
    # Where the recording core stores a window's module (traces recorded before it did
    # not say; then only the window names can be reported).
    for field in ("function", "module"):
        value = getattr(record, field, None)
        if isinstance(value, str) and value:
            return value.split(":", 1)[0]
    return None


def recorded_modules(traces: Sequence[Path]) -> tuple[list[str], list[str]]:
    """``(modules, window names)`` the traces' windows were recorded from, sorted.

    Information only (for messages): nothing here is ever imported. ``modules`` is empty
    for traces recorded before the core stored the module of each window.
    """
    modules: set[str] = set()
    windows: set[str] = set()
    for _, run in iter_runs(list(traces), name="traces"):
        for w in run.windows:
            windows.add(w.name)
            module = _module_of(w.enter)
            if module:
                modules.add(module)
    return sorted(modules), sorted(windows)


def _not_given(traces: Sequence[Path]) -> AppNotGivenError:
    try:
        modules, windows = recorded_modules(traces) if traces else ([], [])
    except Exception:  # an unreadable trace is reported by the replay itself, later
        modules, windows = [], []
    how = (f" ([tool.agentlog] app = \"...\" in pyproject.toml or ${APP_ENV} also work)")
    if modules:
        flags = " or ".join(f"--app {m}" for m in modules)
        message = (f"no app module given: the windows of the trace were recorded from "
                   f"{', '.join(modules)}; a trace never decides what code runs, so name "
                   f"the module that registers the channels and scorers: {flags}{how}")
    elif windows:
        message = (f"no app module given: the trace does not store which module its windows "
                   f"({', '.join(windows)}) were recorded from; pass the module that "
                   f"registers the channels and scorers with --app pkg.mod{how}")
    else:
        message = ("no app module given: pass the module that registers the channels and "
                   f"scorers with --app pkg.mod{how}")
    return AppNotGivenError(message, recorded=modules)


def _import(name: str, source: str, start: Path) -> ModuleType:
    # As `python -m` and uvicorn's --app-dir do: a module of the project the user is in
    # imports without installing it. The folder goes last, so it never shadows a package.
    folder = str(start.resolve())
    if folder not in sys.path:
        sys.path.append(folder)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or name
        if name == missing or name.startswith(missing + "."):
            hint = (f"module {name!r} (from {source}) is not importable: {exc}. Check the "
                    "name, install the package that provides it, or run from the folder "
                    "that contains it")
        else:
            hint = (f"module {name!r} (from {source}) failed to import: it needs {missing!r}, "
                    f"which is not installed ({exc}); install it into this environment")
        raise AppImportError(hint, module=name, source=source) from exc
    except Exception as exc:
        raise AppImportError(
            f"module {name!r} (from {source}) raised {type(exc).__name__} while importing: "
            f"{exc}; fix the module or name another with --app",
            module=name, source=source,
        ) from exc


def app_name(app: str | ModuleType | None) -> str | None:
    """The module name ``app`` stands for: a name as given, a module by its ``__name__``.

    Where ``app=`` comes in (``resolve_app``, ``run_units``) an imported module is as good
    as its name; the name is what crosses to workers and into messages.

    Raises:
        TypeError: ``app`` is neither a module name, a module nor None.
    """
    if app is None or isinstance(app, str):
        return app
    if isinstance(app, ModuleType):
        return app.__name__
    raise TypeError(f"`app` must be a module name such as 'my_agent', an imported module, or "
                    f"None; found {type(app).__qualname__} {app!r:.80}")


def resolve_app(app: str | ModuleType | None, *, traces: Sequence[Path] = (),
                start: Path | None = None) -> ModuleType:
    """Import the app module the user named, which registers the replay's code.

    Args:
        app: the module name (``--app``) or the module itself; None to look further.
        traces: the traces being replayed, only to name their recorded modules in the
            error when no app is given.
        start: where the search for ``pyproject.toml`` begins (default: the working
            folder); also put on ``sys.path`` (last) so a project's own module imports.

    Returns:
        The imported module.

    Raises:
        AppNotGivenError: no app in the argument, ``pyproject.toml`` or ``$AGENTLOG_APP``.
        AppImportError: the named module cannot be imported.
        ValueError: the nearest ``pyproject.toml`` is invalid.
        TypeError: ``app`` is neither a module name, a module nor None.
    """
    app = app_name(app)
    where = start or Path.cwd()
    if app is not None and app.strip():
        return _import(app.strip(), "--app", where)
    found = app_from_pyproject(where)
    if found is not None:
        name, path = found
        return _import(name, str(path), where)
    env = os.environ.get(APP_ENV, "").strip()
    if env:
        return _import(env, f"${APP_ENV}", where)
    raise _not_given(traces)
