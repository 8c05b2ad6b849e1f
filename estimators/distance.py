"""Behavioural distances between agent systems ([LBC] A.1, A.5, A.6, F.6, F.7).

Wasserstein distances between empirical laws, the recursive controllability distance of
Definition 9 (the fixed point of the operator of Definition 8, with the checks of Theorem 4),
the whole-system controllability of Definition 10, the contextwise controllability radius
``C_M^ρ`` of Definition 11, and the fused Gromov–Wasserstein graph discrepancy of eq. 20.

Examples:
    >>> from agentlog.estimators import distance
    >>> distance.wasserstein([0.0, 1.0, 3.0], [5.0, 6.0, 8.0])
    5.0
    >>> # A: one step to a terminal history. B: the same step half the time, else it lingers.
    >>> a = distance.BranchKernel([0.0, 1.0], [[(0, 1, 1.0)], [(1, 1, 1.0)]])
    >>> b = distance.BranchKernel([0.0, 1.0], [[(0, 1, 0.5), (0, 0, 0.5)], [(1, 1, 1.0)]])
    >>> r = distance.controllability_distance(a, b, gamma=0.9, beta=0.5)
    >>> r.converged, r.iterations, r.sup_gap < 1e-6, r.contraction_ratio <= r.bound + 1e-9
    (True, (15, 27), True, True)
    >>> r.distance.round(4).tolist()    # d†(0, 0) = 0.45 · ½ · d†(1, 0) = 0.45 · ½ · 0.55/0.775
    [[0.1597, 0.55], [0.7097, 0.0]]
    >>> round(distance.contextwise_cm([0.2, 0.4], 0.0).value, 12)  # F.6: mean of ½ entry + ½ exit
    0.15
"""

from ._contextwise import ContextwiseCmResult, contextwise_cm
from ._controllability import (
    BranchKernel,
    ControllabilityResult,
    controllability_distance,
    controllability_operator,
)
from ._fgw import FgwResult, fgw_discrepancy
from ._wasserstein import wasserstein, wasserstein_many

__all__ = [
    "BranchKernel",
    "ContextwiseCmResult",
    "ControllabilityResult",
    "FgwResult",
    "contextwise_cm",
    "controllability_distance",
    "controllability_operator",
    "fgw_discrepancy",
    "wasserstein",
    "wasserstein_many",
]
