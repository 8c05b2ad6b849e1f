"""Scores, group labels and the cell layout shared by the reliability estimators ([DMC] §4.4).

Each run is one (level, seed) → terminal score. The checks here turn user input into a finite
1-D score vector and validated settings (every message names the parameter), group labels
into integer codes (keys in sorted order), and the scores of every group ("cell") into one
array sorted by (cell, score), so that the statistics of all cells are computed without a loop
over cells.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._labels import codes

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]
GroupLabels = ArrayLike | Sequence[Any] | tuple[ArrayLike, ...] | Mapping[str, ArrayLike]


# ----------------------------------------------------------------------------- validation


def _as_scores(name: str, x: ArrayLike) -> FloatArray:
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`{name}` must be numbers; {exc}") from None
    if arr.ndim != 1:
        raise ValueError(f"`{name}` must be 1-D, one score per run; found shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"`{name}` is empty; pass at least one run")
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"`{name}` must be finite; found {arr[i]} at run {i} "
                         "(drop failed runs or score them, e.g. as 0, before summarising)")
    return arr


def _check_alpha(alpha: float) -> float:
    if not isinstance(alpha, int | float | np.floating) or isinstance(alpha, bool) \
            or not 0 < alpha <= 1:
        raise ValueError(f"`alpha` must be in (0, 1] (the tail fraction of CVaR@α); "
                         f"found {alpha!r}")
    return float(alpha)


def _check_tau(tau: float) -> float:
    if not isinstance(tau, int | float | np.floating) or isinstance(tau, bool) \
            or not math.isfinite(tau):
        raise ValueError(f"`tau` must be a finite number (the Reliability@τ threshold); "
                         f"found {tau!r}")
    return float(tau)


def _check_count(name: str, value: int, minimum: int) -> int:
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"`{name}` must be an int >= {minimum}; found {value!r}")
    return int(value)


def _check_seed(seed: int) -> int:
    return _check_count("seed", seed, 0)


def _hash_sorted(values: FloatArray) -> str:
    return hashlib.sha256(np.ascontiguousarray(values, dtype="<f8").tobytes()).hexdigest()


def _label_column(name: str, col: Any, n: int) -> tuple[list[Any], IntArray]:
    arr = np.asarray(col)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"`groups` must hold one label per score ({n} scores); "
                         f"{name} has shape {arr.shape}")
    uniques, code = codes(arr, name="groups")
    return uniques.tolist(), code


def _group_codes(groups: GroupLabels, n: int) -> tuple[tuple[str, ...], tuple[Any, ...],
                                                        IntArray]:
    """``(column names, group keys in sorted order, group code of each run)``."""
    if isinstance(groups, Mapping):
        names = tuple(str(k) for k in groups)
        columns: list[Any] = [groups[k] for k in groups]
    elif isinstance(groups, tuple) and groups and all(np.ndim(c) == 1 for c in groups):
        columns = list(groups)
        names = tuple(f"group_{i}" for i in range(len(columns)))
    else:
        columns, names = [groups], ("group",)
    if not columns:
        raise ValueError("`groups` holds no label columns; pass labels or leave it None")
    labelled = [_label_column(name, col, n) for name, col in zip(names, columns, strict=True)]
    if len(labelled) == 1:  # one column: keys are its labels, not 1-tuples
        uniques, code = labelled[0]
        return names, tuple(uniques), code
    stacked = np.stack([c for _, c in labelled], axis=1)
    rows, inverse = np.unique(stacked, axis=0, return_inverse=True)
    keys = tuple(tuple(labelled[j][0][r] for j, r in enumerate(row)) for row in rows.tolist())
    return names, keys, inverse.reshape(-1).astype(np.intp)


@dataclass(frozen=True)
class _Cells:
    """Scores sorted by (cell, score): each cell's runs are contiguous and ascending."""

    values: FloatArray
    starts: IntArray
    counts: IntArray

    @classmethod
    def build(cls, scores: FloatArray, code: IntArray, n_cells: int) -> _Cells:
        order = np.lexsort((scores, code))
        counts = np.bincount(code, minlength=n_cells).astype(np.intp)
        starts = np.zeros(n_cells, dtype=np.intp)
        np.cumsum(counts[:-1], out=starts[1:])
        return cls(scores[order], starts, counts)

    def block(self, cell: int) -> FloatArray:
        s = int(self.starts[cell])
        return self.values[s:s + int(self.counts[cell])]


def _readonly(a: NDArray[Any]) -> NDArray[Any]:
    a.setflags(write=False)
    return a
