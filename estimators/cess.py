"""CESS pool estimates, audit metrics and paired-intervention effects ([SSC]).

Examples:
    >>> from agentlog.estimators import cess
    >>> res = cess.estimate([[0.5, float("nan")]], [[0.1, float("nan")]], [[1.0, float("nan")]],
    ...                     [[0.1, float("nan")]], 0.0, 10, budget=2)
    >>> float(res.dr_raw[0])
    0.2
"""

from agentlog import deprecation as _deprecation

from ._audit import (
    AuditResult,
    audit,
    direction,
    direction_error,
    mae,
    ranking_sensitivity,
    worst_ranking_mae,
)
from ._bootstrap import BootstrapResult, cluster_bootstrap
from ._cess import THEOREM_2_NOTE, CessResult, estimate, support_interval
from ._cess_design import SamplingDesign, Support, sampling_design, support_from_vectors
from ._cess_trace import CessData, from_dataset, from_traces, load_table
from ._cess_trace import from_trace as _from_trace
from ._effects import PolicyEffectsResult, icc_1k, policy_effects
from ._effects_trace import TraceEffectsResult, effects_from_traces
from ._tuning import TuneResult, fit_taskwise_prior, taskwise_lambda, tune_lambda

__all__ = [
    "THEOREM_2_NOTE",
    "AuditResult",
    "BootstrapResult",
    "CessData",
    "CessResult",
    "PolicyEffectsResult",
    "SamplingDesign",
    "Support",
    "TraceEffectsResult",
    "TuneResult",
    "audit",
    "cluster_bootstrap",
    "direction",
    "direction_error",
    "effects_from_traces",
    "estimate",
    "fit_taskwise_prior",
    "from_dataset",
    "from_traces",
    "icc_1k",
    "load_table",
    "mae",
    "policy_effects",
    "ranking_sensitivity",
    "sampling_design",
    "support_from_vectors",
    "support_interval",
    "taskwise_lambda",
    "tune_lambda",
    "worst_ranking_mae",
]

# Old names, for one release: reading a class's old name warns, calling `from_trace` warns.
__getattr__ = _deprecation.renamed_attributes(__name__, classes={
    "PolicyEffects": PolicyEffectsResult,
    "TraceEffects": TraceEffectsResult,
}, functions={"from_trace": _from_trace})
