"""One error tree: every exception and warning of agentlog is defined in ``agentlog._errors``,
sits under ``AgentlogError`` or ``AgentlogWarning``, is drawn in that module's docstring,
and names a public module that exports it as its ``__module__``."""

from __future__ import annotations

import builtins
import importlib
import pkgutil
import re
import sys
from types import ModuleType

import pytest

import agentlog
from agentlog import _errors

# Signals that never leave the package that raises them, beside the ``_private`` classes.
_INTERNAL = {
    "agentlog.cli._output.BadInput": "the CLI's signal for exit status 2, caught by every "
                                     "command: no caller of a public function sees it",
    "agentlog.adapters._transport.CacheMiss": "agentlog.CacheMiss made also an SDK's own error "
                                              "class at run time, so that the SDK passes a "
                                              "frozen miss through unwrapped",
    "agentlog.adapters.inspect_ai.InspectLoggedError": "the stand-in an import records for an "
                                                       "error Inspect logged (its type name "
                                                       "in the trace): never raised to a caller",
    "agentlog.adapters.otlp.OtlpSpanError": "the stand-in an import records for a span's "
                                            "error status (its type name in the trace): "
                                            "never raised to a caller",
}


def _tree_classes() -> dict[str, type[BaseException]]:
    return {name: value for name, value in vars(_errors).items()
            if isinstance(value, type) and issubclass(value, BaseException)}


def _module_names() -> list[str]:
    return [m.name for m in pkgutil.walk_packages(agentlog.__path__, "agentlog.")
            if not m.name.endswith(".__main__")]  # importing __main__ runs the CLI


def _is_public(module_name: str) -> bool:
    return not any(part.startswith("_") for part in module_name.split("."))


def _is_library(module_name: str) -> bool:
    # The examples are apps written against agentlog: their own errors are theirs.
    top = module_name.split(".")[:2]
    return top[0] == "agentlog" and top[1:] != ["examples"]


def _public_modules() -> list[ModuleType]:
    return [agentlog] + [importlib.import_module(name) for name in _module_names()
                         if _is_public(name)]


def _exported_errors(module: ModuleType) -> dict[str, type[BaseException]]:
    found = {}
    for name in getattr(module, "__all__", ()):
        value = getattr(module, name)
        if isinstance(value, type) and issubclass(value, BaseException):
            found[name] = value
    return found


def _strays() -> list[str]:
    """Exception classes the packages define outside the tree, internal signals aside."""
    for name in _module_names():
        importlib.import_module(name)
    tree = set(_tree_classes().values())
    seen: set[type] = set()
    stack: list[type] = [BaseException]
    strays = []
    while stack:
        cls = stack.pop()
        for sub in type.__subclasses__(cls):
            if sub in seen:
                continue
            seen.add(sub)
            stack.append(sub)
            if not _is_library(sub.__module__) or sub in tree:
                continue
            own = [c for c in sub.__mro__ if _is_library(c.__module__)]
            full = f"{sub.__module__}.{sub.__qualname__}"
            if any(c.__name__.startswith("_") for c in own) or full in _INTERNAL:
                continue
            strays.append(full)
    return sorted(strays)


def _drawn_tree() -> list[tuple[str, str | None, str]]:
    """(class, the class drawn as its parent, its description) for each class drawn."""
    drawn: list[tuple[str, str | None, str]] = []
    parents: list[str] = []
    for line in (_errors.__doc__ or "").split("The tree::", 1)[1].splitlines():
        if line and not line.startswith("    "):
            break  # the prose after the tree
        root = re.fullmatch(r" {4}(\w+)", line)
        branch = re.match(r" {4}((?:[│ ] {3})*)[├└]── (\w+)(.*)", line)
        if root:
            parents = [root[1]]
            drawn.append((root[1], None, ""))
        elif branch:
            depth = len(branch[1]) // 4 + 1
            parents = [*parents[:depth], branch[2]]
            drawn.append((branch[2], parents[depth - 1], branch[3].strip()))
        elif line.strip(" │"):
            name, parent, text = drawn[-1]
            drawn[-1] = (name, parent, f"{text} {line.strip(' │')}")
    return drawn


def test_every_class_of_the_errors_module_is_an_agentlog_error_or_warning() -> None:
    for name, cls in _tree_classes().items():
        assert issubclass(cls, agentlog.AgentlogError | agentlog.AgentlogWarning), name


def test_every_exception_class_of_the_packages_is_one_of_the_tree() -> None:
    assert _strays() == []


def test_the_docstring_draws_every_class_under_its_base() -> None:
    drawn = _drawn_tree()
    assert sorted(name for name, _, _ in drawn) == sorted(_tree_classes())
    for name, parent, _ in drawn:
        cls = _tree_classes()[name]
        if parent is None:
            assert cls.__bases__ in ((Exception,), (UserWarning,)), name
        else:
            assert _tree_classes()[parent] in cls.__bases__, (name, parent)


def test_the_docstring_names_each_builtin_an_error_also_is() -> None:
    """``except KeyError`` still catches ``NotRegisteredError``: the drawn mixins are real."""
    for name, _, text in _drawn_tree():
        cls = _tree_classes()[name]
        mixins = {b.__name__ for b in cls.__bases__
                  if b.__module__ == "builtins" and b not in (Exception, UserWarning)}
        said = set(re.findall(r"\(also an? (\w+)\)", text))
        assert said == mixins, name
        for mixin in said:
            assert issubclass(cls, getattr(builtins, mixin))


def test_the_mixins_the_errors_always_had_are_kept() -> None:
    with pytest.raises(KeyError):
        raise agentlog.BlobNotFoundError("no Blob with hash 00")
    with pytest.raises(KeyError):
        raise agentlog.NotRegisteredError("no channel 'x'")
    with pytest.raises(ImportError):
        raise agentlog.AppImportError("no module 'app'", module="app", source="--app")
    for cls in (agentlog.AppNotGivenError, agentlog.StateDecodeError):
        with pytest.raises(ValueError):
            raise cls("bad input")
    assert issubclass(agentlog.NoLogprobsError, agentlog.AdapterError)


def test_an_error_keyed_by_a_message_prints_the_message_unquoted() -> None:
    assert str(agentlog.BlobNotFoundError("no Blob with hash 00")) == "no Blob with hash 00"


def test_the_old_import_paths_give_the_tree_classes() -> None:
    from agentlog import adapters, records, replay
    from agentlog._registry import RegistryCollisionWarning
    from agentlog._trace import BlobNotFoundError
    from agentlog.adapters._choice import NoLogprobsError
    from agentlog.replay._app import AppImportError, AppNotGivenError
    from agentlog.replay._channel_replay import ChannelVersionError
    from agentlog.replay._states import StateDecodeError, WindowNotFoundError

    assert (BlobNotFoundError, records.BlobNotFoundError) == (_errors.BlobNotFoundError,) * 2
    assert (NoLogprobsError, adapters.NoLogprobsError) == (_errors.NoLogprobsError,) * 2
    assert adapters.StreamClosedError is _errors.StreamClosedError
    assert (AppImportError, AppNotGivenError, ChannelVersionError, RegistryCollisionWarning,
            StateDecodeError, WindowNotFoundError) == (
        _errors.AppImportError, _errors.AppNotGivenError, _errors.ChannelVersionError,
        _errors.RegistryCollisionWarning, _errors.StateDecodeError,
        _errors.WindowNotFoundError)
    assert replay.NotRegisteredError is _errors.NotRegisteredError


def test_every_public_error_reports_the_topmost_public_module_that_exports_it() -> None:
    exporters: dict[type, list[str]] = {}
    for module in _public_modules():
        for cls in _exported_errors(module).values():
            exporters.setdefault(cls, []).append(module.__name__)
    assert set(_tree_classes().values()) <= set(exporters)
    for cls, modules in exporters.items():
        home = sys.modules[cls.__module__]
        assert _is_public(cls.__module__), cls
        assert _exported_errors(home).get(cls.__name__) is cls, cls
        assert cls.__module__ == min(modules, key=lambda m: m.count(".")), cls
