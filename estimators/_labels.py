"""Labels to integer codes: the one place the estimators number tasks, clusters and groups.

``codes(labels)`` numbers the distinct labels in sorted order (numpy's order; labels of
mixed types are compared as strings); ``codes(labels, levels=...)`` numbers them by a given
order instead (first appearance, a declared difficulty order, ...).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

IntArray = NDArray[np.intp]


@overload
def codes(labels: ArrayLike | Sequence[Any], *, name: str = ...,
          levels: None = ...) -> tuple[NDArray[Any], IntArray]: ...
@overload
def codes(labels: Iterable[Hashable], *, name: str = ...,
          levels: Sequence[Hashable]) -> tuple[tuple[Hashable, ...], IntArray]: ...
def codes(labels: Any, *, name: str = "labels",
          levels: Sequence[Hashable] | None = None) -> tuple[Any, IntArray]:
    """``(levels, code of each label)``: ``levels[code[i]] == labels[i]``.

    Args:
        labels: one label per element (task, cluster, arm, trajectory key, ...).
        name: the parameter the labels came in as, for error messages.
        levels: the order to number by (every label must be one of them). Default: the
            distinct labels, sorted; object labels are compared as strings.

    Raises:
        ValueError: ``labels`` is not one-dimensional, or (with ``levels``) holds a label
            that is not a level, or ``levels`` repeats one.
    """
    if levels is None:
        arr = np.asarray(labels)
        if arr.ndim != 1:
            raise ValueError(f"`{name}` must be one label per run (1-D); found shape "
                             f"{arr.shape}")
        if arr.dtype == object:
            arr = arr.astype(str)
        uniques, inverse = np.unique(arr, return_inverse=True)
        return uniques, inverse.reshape(-1).astype(np.intp)
    order = tuple(levels)
    position = {level: i for i, level in enumerate(order)}
    if len(position) != len(order):
        raise ValueError(f"the levels of `{name}` repeat a level: {list(order)!r}")
    values = list(labels)
    unknown = [v for v in values if v not in position]
    if unknown:
        raise ValueError(f"`{name}` has label(s) {unknown[:3]!r} that are not among its "
                         f"levels {list(order)!r}")
    return order, np.fromiter((position[v] for v in values), dtype=np.intp,
                              count=len(values))
