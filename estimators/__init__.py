"""Estimators over recorded traces (see the README's References: [LBC], [DMC], [SSC], [ASV]).

``from agentlog.estimators import asv, bounds, certify, cess, distance, reliability``, or
``import agentlog.estimators`` and then ``agentlog.estimators.cess``. Importing this
package stays cheap: the submodules load on first use (module ``__getattr__``), and
scipy, POT and statsmodels only inside the functions that need them.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["asv", "bounds", "certify", "cess", "distance", "reliability"]


def __getattr__(name: str) -> ModuleType:
    """Load ``agentlog.estimators.<name>`` on first attribute access."""
    if name in __all__:
        module = importlib.import_module(f"{__name__}.{name}")
        globals()[name] = module  # later lookups skip this function
        return module
    raise AttributeError(
        f"module {__name__!r} has no attribute {name!r}; its estimators are {__all__}"
    )


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
