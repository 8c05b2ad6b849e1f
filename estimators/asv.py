"""Agent Step Value: channel-indexed gains, the four-corner interaction and its audit.

Examples:
    >>> from agentlog.estimators import asv
    >>> f = asv.face([0.0, 0.1], [0.5, 0.2], [0.3, 0.0], [0.1, 0.4])
    >>> f.interaction.round(12).tolist()
    [-0.7, 0.3]
"""

from agentlog import deprecation as _deprecation

from ._asv import (
    CALIBRATION_NOTE,
    CORNERS,
    MIN_TRAJECTORIES_FOR_COVERAGE,
    AsvFace,
    AsvSummaryResult,
    CalibrationCheck,
    calibration_check,
    cyclic_layouts,
    face,
    reduce_layouts,
    summarize,
)
from ._asv_baselines import (
    AucDifferenceResult,
    RetryDisagreementResult,
    auc_difference,
    retry_disagreement,
)
from ._asv_trace import AsvData, channel_scores, from_dataset, from_traces
from ._asv_trace import from_trace as _from_trace

__all__ = [
    "CALIBRATION_NOTE",
    "CORNERS",
    "MIN_TRAJECTORIES_FOR_COVERAGE",
    "AsvData",
    "AsvFace",
    "AsvSummaryResult",
    "AucDifferenceResult",
    "CalibrationCheck",
    "RetryDisagreementResult",
    "auc_difference",
    "calibration_check",
    "channel_scores",
    "cyclic_layouts",
    "face",
    "from_dataset",
    "from_traces",
    "reduce_layouts",
    "retry_disagreement",
    "summarize",
]

# Old names, for one release: reading a class's old name warns, calling `from_trace` warns.
__getattr__ = _deprecation.renamed_attributes(__name__, classes={
    "AsvSummary": AsvSummaryResult,
    "AucDifference": AucDifferenceResult,
    "RetryDisagreement": RetryDisagreementResult,
}, functions={"from_trace": _from_trace})
