"""The demo's candidate pools and the constants its estimators and interventions share.

Every question of the bundled agent draws its pool from ``make_pool(task, DEMO_CANDIDATES,
seed=DEMO_POOL_SEED)``, so the outcome Y and the prediction m of every candidate are known
and θ* is exact; the demo's CESS and its paired interventions read them from here.
"""

from __future__ import annotations

from collections.abc import Sequence

DEMO_BUDGET = 4  # K: documents opened at most
DEMO_POOL_SEED = 0
DEMO_CANDIDATES = 30
# The demo's CESS: clip the raw correction, then shrink it halfway toward the pool prediction
# ([SSC] eq. 13, the public-agent configuration), fixed before any outcome is seen.
DEMO_LAM = 0.5
DEMO_ORDER = "clip-then-shrink"


def pool_tables(
    tasks: Sequence[str], *, pool_seed: int = DEMO_POOL_SEED, n_candidates: int = DEMO_CANDIDATES,
) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], float]]:
    """``(outcomes Y, predictions m)`` of every candidate of every question's pool.

    Keyed by ``(task, candidate id)``, from the generated pools (``make_pool``), so each
    run's pool is its question's whole pool and θ* is known.
    """
    # Imported here: the example registers its windows by name (see run_demo).
    from agentlog.examples.deep_research import make_pool

    outcomes: dict[tuple[str, str], float] = {}
    predictions: dict[tuple[str, str], float] = {}
    for task in tasks:
        pool = make_pool(task, n_candidates, seed=pool_seed)
        for cid, y, m in zip(pool.ids, pool.y, pool.prediction, strict=True):
            outcomes[(task, cid)] = float(y)
            predictions[(task, cid)] = float(m)
    return outcomes, predictions
