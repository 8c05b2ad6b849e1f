"""Old names kept for one release after a rename: they warn ``DeprecationWarning``, then work.

A renamed function or method keeps a thin wrapper under its old name that calls
``warn_renamed`` and forwards to the new one; a renamed class is served under its old name
by the public module's ``__getattr__`` (``renamed_attributes``), which warns on access. Old
names are never listed in ``__all__``.
"""

from __future__ import annotations

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


def renamed_attributes(module: str, *, classes: Mapping[str, type] | None = None,
                       functions: Mapping[str, Callable[..., Any]] | None = None
                       ) -> Callable[[str], Any]:
    """A module ``__getattr__`` that serves old names.

    Args:
        module: the public module's ``__name__`` (``agentlog.estimators.cess``).
        classes: ``{old name: class}``; reading the old name warns.
        functions: ``{old name: deprecated wrapper}``; the wrapper warns when called.
    """
    short = module.rsplit(".", 1)[-1]
    old_classes = dict(classes or {})
    old_functions = dict(functions or {})

    def __getattr__(name: str) -> Any:
        if name in old_classes:
            new = old_classes[name]
            warn_renamed(f"{short}.{name}", f"{short}.{new.__name__}", same="the same class")
            return new
        if name in old_functions:
            return old_functions[name]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
