"""An agent recorded in a child process whose numpy runs without its CPU dispatch targets.

``record(OUT)`` records one run of ``rank`` into ``OUT``; ``test_draw_portability`` calls it
in a child process (from the repository root) and sets ``NPY_DISABLE_CPU_FEATURES`` for it,
as if the trace came from a machine without AVX-512 (or AVX2).
"""

from __future__ import annotations

import numpy as np

import agentlog as al

POOL = [f"doc-{i:03d}" for i in range(400)]
STEPS = 40
SEED = 11


@al.window("rank")
def rank(steps: int) -> list[int]:
    probs = np.random.default_rng(5).dirichlet(np.ones(len(POOL)))
    return [al.select(probs, candidates=POOL, name="doc") for _ in range(steps)]


def record(path: str) -> None:
    with al.record(path, seed=SEED, mode="w"):
        rank(STEPS)

