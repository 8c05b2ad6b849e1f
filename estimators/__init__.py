"""Estimators over recorded traces (see the README's References: [LBC], [DMC], [SSC], [ASV]).

``from agentlog.estimators import asv, bounds, certify, cess, distance, reliability``.
Importing this package stays cheap: the submodules load on first use, and scipy, POT and
statsmodels only inside the functions that need them.
"""

__all__ = ["asv", "bounds", "certify", "cess", "distance", "reliability"]
