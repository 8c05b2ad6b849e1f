"""Certified leaderboards ([LBC] §3.4, §6, Appendix A.3 and F.5).

A plan declares readouts, tolerances and constants; admissibility is decided from the plan
and the sealed entries before any score is read; a pair is certified when its gap exceeds
the sampling and nuisance radii (eq. 4); certified relations give rank intervals; the
conventional ladder R0–R5 (Table 2) and the sign-flip calibration (F.5) sit beside them.
End to end: ``data = certify.from_traces(paths, plan=plan)`` →
``adm = certify.admissibility(data.entries, plan=plan)`` →
``board = certify.certify(data, plan=plan, admissibility=adm)``.

Examples:
    >>> from agentlog.estimators import certify
    >>> r = certify.rank_intervals(["a", "b", "c", "d"], [("a", "b"), ("b", "c")])
    >>> r.intervals
    {'a': (1, 2), 'b': (2, 3), 'c': (3, 4), 'd': (1, 4)}
    >>> r.added
    (('a', 'c'),)
"""

from agentlog import deprecation as _deprecation

from ._admissibility import (
    Admissibility,
    Entry,
    EntryTable,
    PairAdmissibility,
    TargetRadius,
    admissibility,
)
from ._board import BoardResult, CalibrationResult, LadderRung, LeaveOneOut, PairDecision
from ._certify import certify
from ._inputs import CertifyData, from_dataset, from_traces
from ._plan import (
    Calibration,
    Conditions,
    Constants,
    FailurePolicy,
    Plan,
    Readout,
    SystemConstants,
    WindowConstants,
)
from ._radius import SamplingRadiusResult, sampling_radius
from ._ranks import RankIntervalsResult, draw_rank_intervals, rank_intervals

__all__ = [
    "Admissibility",
    "BoardResult",
    "Calibration",
    "CalibrationResult",
    "CertifyData",
    "Conditions",
    "Constants",
    "Entry",
    "EntryTable",
    "FailurePolicy",
    "LadderRung",
    "LeaveOneOut",
    "PairAdmissibility",
    "PairDecision",
    "Plan",
    "RankIntervalsResult",
    "Readout",
    "SamplingRadiusResult",
    "SystemConstants",
    "TargetRadius",
    "WindowConstants",
    "admissibility",
    "certify",
    "draw_rank_intervals",
    "from_dataset",
    "from_traces",
    "rank_intervals",
    "sampling_radius",
]

# Old names, for one release: reading one warns.
__getattr__ = _deprecation.renamed_attributes(__name__, classes={
    "Board": BoardResult,
    "RankIntervals": RankIntervalsResult,
    "SamplingRadius": SamplingRadiusResult,
})
