"""The one interval type every estimator result returns, and the check of its level.

``confidence_interval(...)`` of every result gives a ``ConfidenceInterval``: a named
``(low, high)`` pair (floats, or arrays for grouped results) that still unpacks as a tuple.
This module imports no numpy, so ``agentlog.estimators.ConfidenceInterval`` stays cheap.
"""

from __future__ import annotations

import numbers
from typing import Any, Generic, NamedTuple, TypeVar

_T = TypeVar("_T")


class ConfidenceInterval(NamedTuple, Generic[_T]):
    """``(low, high)`` of a two-sided interval (floats, or arrays for grouped results)."""

    low: _T
    high: _T


def check_confidence_level(confidence_level: Any) -> float:
    """``confidence_level`` as a float in (0, 1), or a ValueError naming it."""
    # numbers.Real covers int, float and numpy's floating and integer scalars.
    if isinstance(confidence_level, bool) or not isinstance(confidence_level, numbers.Real) \
            or not 0 < float(confidence_level) < 1:
        raise ValueError(f"`confidence_level` must be a number in (0, 1), e.g. 0.95; found "
                         f"{confidence_level!r}")
    return float(confidence_level)
