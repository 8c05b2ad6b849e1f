"""Recorded Gumbel draws against regenerated ones, on any CPU.

A draw is ``g = -log(-log u)``. The uniform ``u`` is exact everywhere (integer mixing and
one exact scaling), but numpy's ``log`` dispatches by CPU, to AVX-512, AVX2 or scalar
code, and those round differently in the last bits. Regenerating 60,000 draws of this
generator with AVX-512 turned off (``NPY_DISABLE_CPU_FEATURES``, numpy 2.4) changed 259 of
them, by at most ``2 * 2**-53 * (1 + |g|)``. A trace recorded on one machine must verify
and replay on another, so draws are compared within ``DRAW_TOLERANCE * (1 + |g|)``: 32
times the largest difference measured, and still a bound on the last few bits (an edited
draw, or a draw of another seed, stream, step or id, is off by many orders more).
Choices are compared the same way: the recorded choice must be an argmax of
``log p + g`` up to the rounding those two logs may carry.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

DRAW_TOLERANCE = 64 * 2.0**-53


def first_draw_disagreement(recorded: NDArray[np.float64],
                            regenerated: NDArray[np.float64]) -> int | None:
    """The index of the first draw outside the cross-CPU tolerance, or None if all agree.

    Both arrays have one draw per candidate (equal lengths). A NaN never agrees.
    """
    if np.array_equal(recorded, regenerated):
        return None  # the common case: the same CPU family, bit for bit
    bound = DRAW_TOLERANCE * (1.0 + np.abs(recorded))
    with np.errstate(invalid="ignore"):  # inf - inf: a NaN difference, which disagrees
        bad = ~(np.abs(recorded - regenerated) <= bound)
    if not bad.any():
        return None
    return int(np.flatnonzero(bad)[0])


def first_posterior_disagreement(recorded: NDArray[np.float64],
                                 regenerated: NDArray[np.float64],
                                 probs: NDArray[np.float64]) -> int | None:
    """``first_draw_disagreement`` for posterior draws (``select(..., observed=)``): they
    also go through ``log p`` and a ``logaddexp`` with the maximum, whose rounding scales
    with ``|log p|``, so the bound does too (an edited draw is still far outside it)."""
    if np.array_equal(recorded, regenerated):
        return None
    with np.errstate(divide="ignore"):
        scale = np.abs(np.log(probs))
    scale[~np.isfinite(scale)] = 0.0
    bound = 4 * DRAW_TOLERANCE * (1.0 + np.abs(recorded) + scale)
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(recorded - regenerated) <= bound)
    if not bad.any():
        return None
    return int(np.flatnonzero(bad)[0])


def choice_agrees(log_p: NDArray[np.float64], draws: NDArray[np.float64], choice: int) -> bool:
    """Whether ``choice`` maximises ``log_p + draws`` up to the logs' cross-CPU rounding.

    ``log_p`` may hold ``-inf`` (a zero probability, never a valid choice).
    """
    scores = log_p + draws
    best = int(np.argmax(scores))
    if best == choice:
        return True
    if not np.isfinite(scores[choice]):
        return False
    # Each score carries the rounding of its two logs: a tie within it is a tie.
    slack = DRAW_TOLERANCE * (2.0 + abs(log_p[best]) + abs(draws[best])
                              + abs(log_p[choice]) + abs(draws[choice]))
    return bool(scores[best] - scores[choice] <= slack)
