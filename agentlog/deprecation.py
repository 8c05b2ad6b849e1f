"""Old names kept for one release after a rename or a move: they warn
``DeprecationWarning``, then work. The one mechanism every package uses.

A renamed function or method keeps a thin wrapper under its old name that calls
``warn_renamed`` and forwards to the new one; a renamed class, and a name that moved to
another module, are served under the old name by the public module's ``__getattr__``
(``renamed_attributes``), which warns on access. Old names are never listed in
``__all__``.
"""

from __future__ import annotations

__all__ = ["renamed_argument", "renamed_attributes", "warn_renamed"]

import warnings
from collections.abc import Callable, Mapping
from typing import Any


def warn_renamed(old: str, new: str, *, same: str = "same arguments",
                 stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated in favour of ``new``.

    ``stacklevel=3`` points at the code that called the wrapper (or read the attribute)
    that calls this function.
    """
    warnings.warn(f"`{old}` is deprecated; use `{new}` ({same}); the old name goes in the "
                  "next release", DeprecationWarning, stacklevel=stacklevel)


def renamed_argument(function: str, value: Any, legacy: Mapping[str, Any], *, old: str,
                     new: str) -> Any:
    """The value of a renamed first parameter: ``value`` when given under its new name,
    else the old keyword's from ``legacy`` (the function's ``**legacy``) with a
    ``DeprecationWarning``. Any other keyword in ``legacy`` is a ``TypeError``, as Python
    would raise; so is the argument given under both names, or under neither."""
    unknown = sorted(set(legacy) - {old})
    if unknown:
        raise TypeError(f"{function}() got an unexpected keyword argument {unknown[0]!r}")
    if old in legacy:
        if value is not None:
            raise TypeError(f"{function}() got `{new}` and its old name `{old}`; pass `{new}`")
        warn_renamed(f"{function}({old}=...)", f"{function}({new}=...)",
                     same="the same value", stacklevel=4)
        return legacy[old]
    if value is None:
        raise TypeError(f"{function}() missing 1 required argument: {new!r}")
    return value


def renamed_attributes(module: str, *, classes: Mapping[str, type] | None = None,
                       functions: Mapping[str, Callable[..., Any]] | None = None,
                       moved: Mapping[str, str] | None = None) -> Callable[[str], Any]:
    """A module ``__getattr__`` that serves old names.

    Args:
        module: the public module's ``__name__`` (``agentlog.estimators.cess``).
        classes: ``{old name: class}``; reading the old name warns.
        functions: ``{old name: deprecated wrapper}``; the wrapper warns when called.
        moved: ``{name: the module it moved to}``; reading it here warns and imports it
            from there (``agentlog.replay.Registry`` → ``agentlog.registry``).
    """
    short = module.rsplit(".", 1)[-1]
    old_classes = dict(classes or {})
    old_functions = dict(functions or {})
    old_homes = dict(moved or {})

    def __getattr__(name: str) -> Any:
        home = old_homes.get(name)
        if home is not None:
            import importlib

            warnings.warn(f"{module}.{name} moved to {home}.{name}; import it from there "
                          "(the old name goes in the next release)", DeprecationWarning,
                          stacklevel=2)
            return getattr(importlib.import_module(home), name)
        if name in old_classes:
            new = old_classes[name]
            warn_renamed(f"{short}.{name}", f"{short}.{new.__name__}", same="the same class")
            return new
        if name in old_functions:
            return old_functions[name]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
