"""Estimators over recorded traces (the docs' References page: [LBC], [DMC], [SSC], [ASV]).

``from agentlog.estimators import asv, attribution, bounds, certify, cess, distance,
reliability, rewards``, or
``import agentlog.estimators`` and then ``agentlog.estimators.cess``. Importing this
package stays cheap: the submodules load on first use (module ``__getattr__``), and
scipy, POT and statsmodels only inside the functions that need them.

Every result's ``confidence_interval(...)`` returns a ``ConfidenceInterval`` ``(low, high)``,
also importable from here: ``from agentlog.estimators import ConfidenceInterval``.

``executor="ray"`` (``certify.from_dataset``, ``certify.certify``, ``reliability.from_dataset``,
``reliability.summary``, ``cess.from_dataset``, ``asv.from_dataset``, ``asv.channel_scores``)
runs a dataset's per-run stage on Ray Data and bootstrap or calibration draws as Ray tasks,
with the same results as the local executor;
``with use_ray(address): ...`` runs several such calls on one Ray runtime.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ConfidenceInterval", "asv", "attribution", "bounds", "certify", "cess", "distance",
           "reliability", "rewards", "use_ray"]

# name -> the private module that defines it (loaded on first use, like the submodules)
_NAMES = {"ConfidenceInterval": "_interval", "use_ray": "_ray_executor"}


def __getattr__(name: str) -> Any:
    """Load ``agentlog.estimators.<name>`` (or the module defining ``name``) on first use."""
    if name in __all__:
        module = importlib.import_module(f"{__name__}.{_NAMES.get(name, name)}")
        value = getattr(module, name) if name in _NAMES else module
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(
        f"module {__name__!r} has no attribute {name!r}; its estimators are "
        f"{[n for n in __all__ if n not in _NAMES]}"
    )


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
