"""Seeded bootstrap of the mean per cell, and the intervals read from it ([DMC] §4.4).

One draw matrix per cell size, seeded by ``(seed, n)`` (in blocks, each from its own child of
that seed, ``_executor.block_rng``) and shared by every cell of that size: a cell's
bootstrap means depend only on its own scores, its size and the seed. The
interval is the percentile one ([DMC]'s, numpy's linear quantiles), or basic or BCa through
``bootstrap_interval``, with the BCa acceleration of a mean in closed form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._bootstrap import IntervalMethod, bootstrap_interval
from ._executor import Executor, block_rng, map_blocks, rows_per_block
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


def _bootstrap_means(c: _Cells, n_resamples: int, seed: int,
                     executor: Executor = "local") -> FloatArray:
    """Bootstrap means, shape ``(n_cells, n_resamples)``: one index matrix per cell size.

    The ``(n_resamples, n)`` matrix of draws is drawn in blocks of ``rows_per_block(n)``
    rows, block ``j`` from ``block_rng((seed, n), j)``, and applied to every cell of size
    ``n``: a cell's distribution does not depend on which other cells are present, nor on
    the executor that computed its blocks (``executor="ray"``: ranges of blocks as Ray
    tasks).
    """
    sizes = np.unique(c.counts).tolist()
    work = []
    for size in sizes:
        cells = np.flatnonzero(c.counts == size)
        block = c.values[c.starts[cells][:, None] + np.arange(size)]
        work.append((_SizeDraws(block, seed, n_resamples),
                     -(-n_resamples // rows_per_block(size))))
    out = np.empty((c.counts.shape[0], n_resamples))
    for size, parts in zip(sizes, map_blocks(_size_means, work, executor), strict=True):
        out[np.flatnonzero(c.counts == size)] = np.concatenate(parts, axis=1)
    return out


@dataclass(frozen=True)
class _SizeDraws:
    """The cells of one size (rows of ``block``) whose bootstrap means a block computes."""

    block: FloatArray  # (cells, size): their scores
    seed: int
    n_resamples: int


def _size_means(job: _SizeDraws, lo: int, hi: int) -> FloatArray:
    """Bootstrap means of the cells of ``job`` over replicate blocks ``lo`` to ``hi``."""
    cells, size = job.block.shape
    rows = rows_per_block(size)
    parts = []
    for j in range(lo, hi):
        n = min(rows, job.n_resamples - j * rows)
        idx = block_rng((job.seed, size), j).integers(0, size, size=(n, size))
        # Every sum adds its draws left to right, whatever the array's shape (numpy's sum
        # picks an order by shape): a cell's means are bit-identical with or without other
        # cells beside it. Small cells add one draw column at a time across all cells;
        # large ones take a cumulative sum (the same additions).
        if size <= 128:
            acc = np.zeros((cells, n))
            for k in range(size):
                acc += job.block[:, idx[:, k]]
            parts.append(acc / size)
            continue
        means = np.empty((cells, n))
        step = max(1, _CHUNK // (n * size))
        for g in range(0, cells, step):
            sums = np.cumsum(job.block[g:g + step][:, idx], axis=-1)[..., -1]
            means[g:g + step] = sums / size
        parts.append(means)
    return np.concatenate(parts, axis=1) if parts else np.empty((cells, 0))
