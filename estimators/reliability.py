"""Reliability beyond the mean and the validity card ([DMC]).

Worst case, CVaR@α (lower tail, Rockafellar–Uryasev, fractional weight on the boundary
value), Reliability@τ and a seeded bootstrap CI of the mean (BCa by default), per group of a long
table; Cliff's δ with a bootstrap CI and a sign-flip p-value; pass^k; the ground-truth record
F1; the degradation curve and reliability gap across difficulty levels; and the validity
card (scorer probe battery, decision-ownership map, non-degeneracy, licensed claim).
``from_dataset`` reads each run's terminal scores from a Parquet dataset (its per-run stage
on Ray Data with ``executor="ray"``; ``summary(..., executor="ray")`` draws the bootstrap as
Ray tasks).

Examples:
    >>> import warnings
    >>> from agentlog.estimators import reliability
    >>> gpt4o_t3 = [0, 0, 1, 0, 0, 0, 0, 1, 1, 1]      # [DMC] §5.1, per-seed F1
    >>> with warnings.catch_warnings(record=True) as caught:  # under 20 runs: a warning
    ...     warnings.simplefilter("always")
    ...     r = reliability.summary(gpt4o_t3, alpha=0.2, tau=0.9)
    ...     g = reliability.summary([0.9, 1.0, 0.2, 0.8, 0.8, 0.9],
    ...                             groups=(["a", "a", "a", "b", "b", "b"], ["T3"] * 6))
    >>> caught[0].category.__name__
    'DegenerateDataWarning'
    >>> r.mean, r.worst, r.cvar, r.reliability, r.n
    (0.4, 0.0, 0.0, 0.4, 10)
    >>> low, high = r.confidence_interval(confidence_level=0.95)
    >>> bool(low <= r.mean <= high)
    True
    >>> g["b", "T3"].worst
    0.8
    >>> reliability.record_f1(["T3-000001", "T3-000001", "made-up"],
    ...                       ["T3-000001", "T3-000002"]).f1
    0.4
"""

from agentlog import deprecation as _deprecation

from ._cliffs_delta import EXACT_LIMIT, CliffsDeltaResult, cliffs_delta
from ._degradation import (
    DegradationCurveResult,
    ReliabilityGapResult,
    degradation_curve,
    reliability_gap,
)
from ._interval import ConfidenceInterval
from ._non_degeneracy import (
    DecisionOutcomes,
    NonDegeneracyResult,
    decision_outcomes,
    non_degeneracy,
)
from ._ownership import DecisionOwnership, OwnershipMap, ownership_map
from ._pass_hat_k import PassHatKResult, pass_hat_k
from ._probe_battery import ProbeReport, ProbeTask, Submission, probe_scorer, probe_variants
from ._record_f1 import RecordF1Result, record_f1
from ._reliability import (
    MIN_RUNS_FOR_COVERAGE,
    GroupedReliabilityResult,
    ReliabilitySummaryResult,
    summary,
)
from ._terminal_scores import TerminalScores, TerminalTable, from_dataset, terminal_table
from ._validity import (
    ValidityCard,
    licensed_claim,
    replay_cell,
    replay_check,
    validity_card,
)
from ._validity_cells import CLAIMS, VARIANTS, Cell

__all__ = [
    "CLAIMS",
    "EXACT_LIMIT",
    "MIN_RUNS_FOR_COVERAGE",
    "VARIANTS",
    "Cell",
    "CliffsDeltaResult",
    "ConfidenceInterval",
    "DecisionOutcomes",
    "DecisionOwnership",
    "DegradationCurveResult",
    "GroupedReliabilityResult",
    "NonDegeneracyResult",
    "OwnershipMap",
    "PassHatKResult",
    "ProbeReport",
    "ProbeTask",
    "RecordF1Result",
    "ReliabilityGapResult",
    "ReliabilitySummaryResult",
    "Submission",
    "TerminalScores",
    "TerminalTable",
    "ValidityCard",
    "cliffs_delta",
    "decision_outcomes",
    "degradation_curve",
    "from_dataset",
    "licensed_claim",
    "non_degeneracy",
    "ownership_map",
    "pass_hat_k",
    "probe_scorer",
    "probe_variants",
    "record_f1",
    "reliability_gap",
    "replay_cell",
    "replay_check",
    "summary",
    "terminal_table",
    "validity_card",
]

# Old names, for one release: reading one warns.
__getattr__ = _deprecation.renamed_attributes(__name__, classes={
    "DegradationCurve": DegradationCurveResult,
    "GroupedReliability": GroupedReliabilityResult,
    "NonDegeneracy": NonDegeneracyResult,
    "PassHatK": PassHatKResult,
    "RecordF1": RecordF1Result,
    "ReliabilityGap": ReliabilityGapResult,
    "ReliabilitySummary": ReliabilitySummaryResult,
})
