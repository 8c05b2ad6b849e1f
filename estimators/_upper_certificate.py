"""The finite-sample upper certificate of [LBC] Proposition 1 (eq. 9).

* **Finite-sample upper certificate** (Proposition 1, eq. 9) —
  ``ℓ̄ ≤ ℓ̂_N + √(log(1/δ)/(2N)) + η_roll + η_align + η_ann`` with probability ``≥ 1 − δ``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._amplification import FloatArray, _hash, _nonnegative
from ._labels import codes


@dataclass(frozen=True)
class UpperCertificate:
    """Proposition 1 ([LBC] eq. 9): ``ℓ̄ ≤ value`` with probability ``≥ 1 − δ``.

    Attributes:
        value: ``ℓ̂_N + √(log(1/δ)/(2N)) + η_roll + η_align + η_ann`` (not clipped to 1).
        mean: ``ℓ̂_N``, the mean of the context-level losses.
        sampling: the Hoeffding term ``√(log(1/δ)/(2N))``.
        n: ``N``, the number of task contexts (clusters), not of rollouts.
        eta_roll, eta_align, eta_ann: the declared deterministic error bounds.
        confidence_level: ``1 − δ``.
        inputs_hash: SHA-256 of the losses, clusters and settings.
    """

    value: float
    mean: float
    sampling: float
    n: int
    eta_roll: float
    eta_align: float
    eta_ann: float
    confidence_level: float
    inputs_hash: str

    @property
    def delta(self) -> float:
        """``δ = 1 − confidence_level``."""
        return 1.0 - self.confidence_level

    @property
    def vacuous(self) -> bool:
        """The bound is at least 1, the largest loss: it certifies nothing."""
        return self.value >= 1.0


def _upper_certificate_iv(
    losses: ArrayLike, clusters: ArrayLike | None, confidence_level: float,
    etas: Mapping[str, float],
) -> tuple[FloatArray, NDArray[Any] | None]:
    try:
        x = np.asarray(losses, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`losses` must be numbers in [0, 1]; {exc}") from None
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"`losses` must be a non-empty 1-D array, one loss per context or "
                         f"rollout; found shape {x.shape}")
    if np.isnan(x).any() or (x < 0).any() or (x > 1).any():
        raise ValueError("`losses` must lie in [0, 1] (Hoeffding's inequality needs bounded "
                         "losses); found NaN or a value outside [0, 1]")
    g = None
    if clusters is not None:
        g = np.asarray(clusters)
        if g.shape != x.shape:
            raise ValueError(f"`clusters` must have the shape of `losses` {x.shape}, one "
                             f"context label per loss; found {g.shape}")
    if not (isinstance(confidence_level, int | float) and 0 < confidence_level < 1):
        raise ValueError(f"`confidence_level` must be in (0, 1); found {confidence_level!r}")
    for name, eta in etas.items():
        _nonnegative(name, eta)
        if np.ndim(eta) != 0:
            raise ValueError(f"`{name}` must be a scalar; found shape {np.shape(eta)}")
    return x, g


def upper_certificate(
    losses: ArrayLike,
    *,
    clusters: ArrayLike | None = None,
    confidence_level: float = 0.95,
    eta_roll: float = 0.0,
    eta_align: float = 0.0,
    eta_ann: float = 0.0,
) -> UpperCertificate:
    """Finite-sample upper certificate of a mean loss ([LBC] Proposition 1, eq. 9).

    ``ℓ̄ ≤ ℓ̂_N + √(log(1/δ)/(2N)) + η_roll + η_align + η_ann`` with probability at least
    ``1 − δ`` over ``N`` i.i.d. task contexts, where ``ℓ̂_N`` is the mean of the rollout-based
    context losses ``ℓ_i ∈ [0, 1]`` and the ``η`` bound finite-rollout, alignment and
    annotation error (assumed, not derived). The context is the statistical unit: repeated
    rollouts of one context tighten ``η_roll``, they do not increase ``N``.

    Args:
        losses: ``ℓ_i ∈ [0, 1]``, one per context, or one per rollout with ``clusters``.
        clusters: context label of each loss; losses are averaged within a context first
            and ``N`` is the number of contexts.
        confidence_level: ``1 − δ``.
        eta_roll, eta_align, eta_ann: ``η_roll``, ``η_align``, ``η_ann`` (≥ 0).

    Returns:
        An ``UpperCertificate``.
    """
    etas = {"eta_roll": eta_roll, "eta_align": eta_align, "eta_ann": eta_ann}
    x, g = _upper_certificate_iv(losses, clusters, confidence_level, etas)
    if g is None:
        per_context = x
        label_key = ""
    else:
        _, inverse = codes(g, name="clusters")
        per_context = np.bincount(inverse, weights=x) / np.bincount(inverse)
        label_key = repr([str(lab) for lab in g.tolist()])
    n = int(per_context.size)
    delta = 1.0 - float(confidence_level)
    sampling = math.sqrt(math.log(1.0 / delta) / (2.0 * n))
    mean = float(per_context.mean())
    value = mean + sampling + float(eta_roll) + float(eta_align) + float(eta_ann)
    return UpperCertificate(
        value=value, mean=mean, sampling=sampling, n=n, eta_roll=float(eta_roll),
        eta_align=float(eta_align), eta_ann=float(eta_ann),
        confidence_level=float(confidence_level),
        inputs_hash=_hash(x, config=f"{confidence_level!r}|{eta_roll!r}|{eta_align!r}|"
                                    f"{eta_ann!r}|{label_key}"),
    )
