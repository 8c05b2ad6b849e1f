"""Attribution bounds, certificates and sensitivity fitting ([LBC] §3.3, A.2–A.4, F.1).

``nuisance_radius`` is Theorem 1 (eq. 3); ``upper_certificate`` Proposition 1 (eq. 9);
``composition_bound``, ``propagated_bound`` and ``utility_bound`` Theorem 2 (eq. 12),
Corollary 3 (eq. 14) and Theorem 3 (eq. 15); ``fit_sensitivity`` fits ``L_M`` from paired
entries with a leave-one-group-out check (F.1, Tables 11–12).

Examples:
    >>> from agentlog.estimators import bounds
    >>> # [LBC] F.3: AutoSurvey against LiRA, whose own entry is the common entry μ
    >>> r = bounds.nuisance_radius(L_s=0.833, L_M=0.890, eps_in=(0.975, 0.002))
    >>> round(r.value, 3), r.within_tolerance(0.208)
    (0.724, False)
    >>> # both entries equal μ (equal entry hashes): only the protocol term is left
    >>> bounds.nuisance_radius(L_M=(float("inf"), 0.9), eps_in=(0.5, 0.5), xi=(0.1, 0.1),
    ...                        eps_protocol=0.01, entry_matched=(True, True)).value
    0.01
    >>> fit = bounds.fit_sensitivity([1.0, 2.0, 4.0, 0.5], [0.5, 1.0, 1.0, 0.45],
    ...                              method="ratio-sup")
    >>> fit.constant, fit.n_expansive
    (0.9, 0)
    >>> c = bounds.composition_bound([0.05, 0.02], L=[2.0, 0.5], xi=[0.0, 0.01], eps0=0.1)
    >>> [round(float(b), 6) for b in c.per_stage]
    [0.25, 0.155]
    >>> round(bounds.utility_bound(c, L_U=2.0).value, 6)
    0.31
"""

from ._composition import (
    CompositionBound,
    PropagatedBound,
    UtilityBound,
    composition_bound,
    propagated_bound,
    utility_bound,
)
from ._nuisance import NuisanceRadius, nuisance_radius
from ._sensitivity import GroupCoverage, SensitivityFit, fit_sensitivity
from ._upper_certificate import UpperCertificate, upper_certificate

__all__ = [
    "CompositionBound",
    "GroupCoverage",
    "NuisanceRadius",
    "PropagatedBound",
    "SensitivityFit",
    "UpperCertificate",
    "UtilityBound",
    "composition_bound",
    "fit_sensitivity",
    "nuisance_radius",
    "propagated_bound",
    "upper_certificate",
    "utility_bound",
]
