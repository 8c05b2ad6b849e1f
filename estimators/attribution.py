"""Per-step causal attribution: which decisions of a window caused its outcome.

Make the arms with ``arms(players, shapley=...)``, run them with
``agentlog.replay.intervene(..., arms=..., mode="branch", seeds=range(R))`` (every arm of a
replicate shares its random numbers), and read the output with ``from_traces``: per player
the contrastive (interventional) effect of changing it alone and its Shapley value, with
task-clustered intervals. ``estimate`` does the same from arrays of coalition outcomes.
See ``agentlog.estimators._attribution`` for the estimands and the intervals.

Examples:
    >>> from agentlog.estimators import attribution
    >>> y = {(): [1.0, 2.0, 1.5, 0.5], ("a",): [2.0, 3.2, 2.5, 1.9],
    ...      ("b",): [1.0, 2.5, 1.5, 1.2], ("a", "b"): [3.0, 4.5, 3.5, 3.0]}
    >>> fx = attribution.estimate(y, cluster=["t1", "t1", "t2", "t2"])
    >>> {p: round(v, 9) for p, v in fx.contrastive.items()}, fx.shapley_method
    ({'a': 1.15, 'b': 0.3}, 'exact')
    >>> round(fx.shapley["a"] + fx.shapley["b"], 12) == round(fx.total, 12)
    True
"""

from ._attribution import (
    KINDS,
    AttributionResult,
    arms,
    estimate,
    from_traces,
    shapley_permutations,
)

__all__ = ["KINDS", "AttributionResult", "arms", "estimate", "from_traces",
           "shapley_permutations"]
