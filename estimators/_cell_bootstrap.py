"""Seeded bootstrap of the mean per cell, and the intervals read from it ([DMC] §4.4).

One draw matrix per cell size, seeded by ``(seed, n)`` and shared by every cell of that
size: a cell's bootstrap means depend only on its own scores, its size and the seed. The
interval is the percentile one ([DMC]'s, numpy's linear quantiles), or basic or BCa through
``bootstrap_interval``, with the BCa acceleration of a mean in closed form.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._bootstrap import IntervalMethod, bootstrap_interval
from ._interval import check_confidence_level
from ._scores import FloatArray, _Cells

_CHUNK = 1 << 22  # elements per block of a resampling matrix: bounds memory, not results


def _percentile_interval(samples: FloatArray, confidence_level: float) -> tuple[Any, Any]:
    tail = (1 - check_confidence_level(confidence_level)) / 2
    low, high = np.quantile(samples, [tail, 1 - tail], axis=-1)
    return low, high


def _interval(samples: FloatArray, estimate: ArrayLike, confidence_level: float,
              method: IntervalMethod, acceleration: ArrayLike) -> tuple[Any, Any]:
    if method == "percentile":  # the historical path, bit for bit
        return _percentile_interval(samples, confidence_level)
    return bootstrap_interval(samples, estimate, method=method,
                              confidence_level=check_confidence_level(confidence_level),
                              acceleration=acceleration)


def _mean_acceleration(c: _Cells) -> FloatArray:
    """BCa acceleration of each cell's mean, in closed form.

    The jackknife means are ``θ̂_(i) = x̄ − (x_i − x̄)/(n − 1)``, so ``U_i = x_i − x̄`` and
    ``â = Σ d³ / (6 (Σ d²)^{3/2})`` with ``d = x − x̄`` (0 for a constant cell).
    """
    counts = c.counts.astype(np.float64)
    cell_of = np.repeat(np.arange(c.counts.shape[0]), c.counts)
    mean = np.add.reduceat(c.values, c.starts) / counts
    d = c.values - mean[cell_of]
    m2 = np.add.reduceat(d * d, c.starts)
    m3 = np.add.reduceat(d * d * d, c.starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        a: FloatArray = np.where(m2 > 0, m3 / (6.0 * m2 ** 1.5), 0.0)
    return a


def _bootstrap_means(c: _Cells, n_resamples: int, seed: int) -> FloatArray:
    """Bootstrap means, shape ``(n_cells, n_resamples)``: one index matrix per cell size.

    The ``(n_resamples, n)`` matrix of draws comes from ``default_rng((seed, n))`` (in row
    blocks whose height depends only on ``n``) and is applied to every cell of size ``n``,
    so a cell's distribution does not depend on which other cells are present.
    """
    out = np.empty((c.counts.shape[0], n_resamples))
    for size in np.unique(c.counts).tolist():
        cells = np.flatnonzero(c.counts == size)
        rng = np.random.default_rng([seed, size])
        block = c.values[c.starts[cells][:, None] + np.arange(size)]
        rows = max(1, _CHUNK // size)
        for lo in range(0, n_resamples, rows):
            hi = min(n_resamples, lo + rows)
            idx = rng.integers(0, size, size=(hi - lo, size))
            # Every sum adds its draws left to right, whatever the array's shape (numpy's
            # sum picks an order by shape): a cell's means are bit-identical with or
            # without other cells beside it. Small cells add one draw column at a time
            # across all cells; large ones take a cumulative sum (the same additions).
            if size <= 128:
                acc = np.zeros((cells.shape[0], hi - lo))
                for j in range(size):
                    acc += block[:, idx[:, j]]
                out[cells, lo:hi] = acc / size
                continue
            step = max(1, _CHUNK // ((hi - lo) * size))
            for g in range(0, cells.shape[0], step):
                sums = np.cumsum(block[g:g + step][:, idx], axis=-1)[..., -1]
                out[cells[g:g + step], lo:hi] = sums / size
    return out
