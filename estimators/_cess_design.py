"""The sampling design of a CESS run, read off its logged probability vectors ([SSC] §3).

* ``support_from_vectors``: the reachable candidates D+ and the inaccessible mass ρ of
  eq. 10 — a candidate is reachable if it had positive probability in some logged vector.
* ``sampling_design``: whether a run sampled with replacement (opened candidates keep
  positive probability: eq. 6) or without (each opened candidate gets probability 0 at
  every later round: Des Raj's ordered form), and which candidates left the support while
  unopened (Assumption 1's overlap fails for them; they leave D+ and the eq. 10
  identification region is reported).

Both check every logged vector as ``al.select`` checks what it logs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._cess import SUM_TOLERANCE

FloatArray = NDArray[np.float64]



def _logged_vector(k: int, ids: Sequence[Any], probs: ArrayLike) -> FloatArray:
    """Validate logged vector ``k`` as ``al.select`` validates what it logs."""
    try:
        arr = np.asarray(probs, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`vectors` item {k}: the probabilities must be numbers; {exc}"
                         ) from None
    if arr.shape != (len(ids),):
        raise ValueError(
            f"`vectors` item {k}: each logged vector must have one probability per id; found "
            f"shape {arr.shape} for {len(ids)} ids"
        )
    if not np.isfinite(arr).all():
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(
            f"`vectors` item {k}: probabilities must be finite; found {arr[bad]} for id "
            f"{ids[bad]!r}. A NaN is not an unreachable candidate: log 0 for those"
        )
    if (arr < 0).any():
        bad = int(np.flatnonzero(arr < 0)[0])
        raise ValueError(f"`vectors` item {k}: probabilities must be non-negative; found "
                         f"{arr[bad]} for id {ids[bad]!r}")
    total = float(arr.sum())
    if abs(total - 1.0) > SUM_TOLERANCE:
        raise ValueError(
            f"`vectors` item {k}: a logged probability vector must sum to 1 within "
            f"{SUM_TOLERANCE}; found sum {total!r}. Pass the full vector the controller drew "
            "from (al.select logs it), not scores"
        )
    return arr


@dataclass(frozen=True)
class Support:
    """Reachable candidates D+ of a logged design and the inaccessible mass ρ (eq. 10)."""

    reachable: frozenset[Any]
    n_pool: int
    rho: float


def support_from_vectors(
    vectors: Sequence[tuple[Sequence[Any], ArrayLike]], *, pool: Sequence[Any] | None = None
) -> Support:
    """D+ and ρ from logged full probability vectors: ``[(candidate_ids, probs), ...]``.

    A candidate is reachable if it had positive probability in some logged vector. The pool
    is ``pool`` when given (e.g. every candidate of the task), else the union of logged ids.
    This is D+ of a design whose support does not change between rounds; for one run's
    sequence of vectors, ``sampling_design`` also asks that every round cover each
    candidate (or, without replacement, have opened it), as eq. 6 and Des Raj's form need.
    """
    reachable: set[Any] = set()
    seen: set[Any] = set()
    for k, (ids, probs) in enumerate(vectors):
        arr = _logged_vector(k, ids, probs)
        seen.update(ids)
        reachable.update(i for i, q in zip(ids, arr, strict=True) if q > 0)
    universe = set(pool) if pool is not None else seen
    if not universe:
        raise ValueError("`vectors` describe an empty pool; pass the logged vectors or `pool`")
    unknown = reachable - universe
    if unknown:
        raise ValueError(f"logged candidates {sorted(map(str, unknown))[:3]} are not in `pool`")
    return Support(frozenset(reachable), len(universe), 1.0 - len(reachable) / len(universe))


@dataclass(frozen=True)
class SamplingDesign:
    """How one run drew its documents, read from its logged vectors (``sampling_design``).

    Attributes:
        replacement: the form to estimate with, ``"with"`` or ``"without"``.
        evidence: what the vectors show: ``"with"`` (an opened candidate kept a positive
            probability later), ``"without"`` (every opened candidate had probability 0
            later), ``"mixed"`` (both) or ``"none"`` (one round: the forms coincide).
        reachable: D+, the candidates every round covers under ``replacement``: positive at
            each round, or (without replacement) positive until opened and 0 after.
        n_pool: the size of the whole pool.
        rho: ``1 − |D+|/n_pool`` (eq. 10).
        p: per round, the chosen candidate's probability under ``replacement`` (the logged
            one, renormalised over the unopened candidates when ``replacement="without"``
            was forced on vectors that keep opened candidates positive).
        in_support: per round, whether the chosen candidate is in D+.
        dropped: ``(round, candidate, positive_round)`` for each candidate with probability
            0 at ``round`` although positive at ``positive_round`` and not opened before
            ``round``: the support changed (first instance per candidate).
        conflicts: ``(round, candidate)`` for opened candidates whose later probability
            contradicts ``replacement`` (a mixed run): left out of D+.
        renormalised: the largest probability mass a logged vector put on candidates already
            opened, removed by a forced ``"without"`` (0 otherwise).
    """

    replacement: str
    evidence: str
    reachable: frozenset[Any]
    n_pool: int
    rho: float
    p: tuple[float, ...]
    in_support: tuple[bool, ...]
    dropped: tuple[tuple[int, Any, int], ...]
    conflicts: tuple[tuple[int, Any], ...]
    renormalised: float


def sampling_design(
    vectors: Sequence[tuple[Sequence[Any], ArrayLike]],
    chosen: Sequence[Any],
    *,
    pool: Sequence[Any] | None = None,
    replacement: str = "auto",
) -> SamplingDesign:
    """Read with or without replacement, and the reachable pool D+, off one run's vectors.

    ``vectors[t]`` is round ``t + 1``'s logged full vector ``(candidate_ids, probs)`` and
    ``chosen[t]`` the id it opened. A candidate missing from a round's ids has probability 0
    there. Per round ``t`` and candidate ``c`` with probability 0 at ``t`` but positive at
    some round of the run:

    * ``c`` was opened before ``t``: evidence of sampling *without* replacement (an agent
      that never reopens a document), which Des Raj's form estimates ([Raj56]);
    * ``c`` was opened before ``t`` and another opened candidate stays positive later (or
      is reopened): *mixed*; a run whose opened candidates all stay positive samples
      *with* replacement ([SSC] eq. 6);
    * ``c`` was not opened before ``t``: the support changed, so Assumption 1's overlap
      fails at ``t`` and no estimate of θ* is design-unbiased. ``c`` is left out of D+
      (ρ > 0): the estimate targets the mean θ+ over D+ and eq. 10 brackets θ*.

    ``replacement="auto"`` takes the form the evidence shows; a mixed run takes the form
    that keeps more of the pool in D+ (ties: with), and the opened candidates that
    contradict it leave D+ like a dropped candidate (``conflicts``). ``"with"`` on a run
    whose every opened candidate drops to 0 later raises (eq. 6 is biased there: each
    round's identity needs them positive). ``"without"`` on vectors that keep opened
    candidates positive renormalises each round over the unopened candidates
    (``renormalised``), the propensity of a controller that redraws when it picks an
    opened document; a reopened document raises.

    What θ+ means: each round's correction is unbiased for the residual total over D+ when
    D+ is the same for every trajectory the design can produce (candidates it never
    reaches, or drops whatever the run opened). When what is dropped depends on the run's
    own draws, D+ is itself random and the point estimate only approximates θ+; the eq. 10
    interval around it is then approximate too.

    Raises:
        ValueError: a vector ``al.select`` would not log, ids outside ``pool``, a chosen id
            with probability 0, ``"with"`` on a run that samples without replacement,
            ``"without"`` on a run that reopens a document.
    """
    if replacement not in ("auto", "with", "without"):
        raise ValueError(f"`replacement` must be 'auto', 'with' or 'without'; found "
                         f"{replacement!r}")
    if len(chosen) != len(vectors):
        raise ValueError(f"`chosen` must name one candidate per logged vector; found "
                         f"{len(chosen)} for {len(vectors)} vectors")
    arrays = [_logged_vector(k, ids, probs) for k, (ids, probs) in enumerate(vectors)]
    index: dict[Any, int] = {}
    for c in (pool if pool is not None else (c for ids, _ in vectors for c in ids)):
        index.setdefault(c, len(index))
    if not index:
        raise ValueError("`vectors` describe an empty pool; pass the logged vectors or `pool`")
    T, n = len(vectors), len(index)
    V = np.zeros((T, n))
    for t, ((ids, _), arr) in enumerate(zip(vectors, arrays, strict=True)):
        unknown = [c for c in ids if c not in index]
        if unknown:
            raise ValueError(f"logged candidates {sorted(map(str, unknown))[:3]} are not in "
                             "`pool`")
        np.add.at(V[t], [index[c] for c in ids], arr)  # an id listed twice sums
    J = np.array([index.get(c, -1) for c in chosen], dtype=np.intp)
    for t, (c, j) in enumerate(zip(chosen, J, strict=True)):
        if j < 0 or not V[t, j] > 0:
            raise ValueError(f"round {t + 1}: the chosen candidate {c!r} has probability 0 "
                             "in its round's vector; a chosen probability must be > 0 "
                             "([SSC] Assumption 1)")
    opened = np.zeros((T, n), dtype=bool)  # opened before round t
    for t in range(1, T):
        opened[t] = opened[t - 1]
        opened[t, J[t - 1]] = True
    positive = V > 0
    kept = opened & positive  # evidence of sampling with replacement (a reopen included)
    zeroed = opened & ~positive  # ... and without
    evidence = ("mixed" if kept.any() and zeroed.any() else "with" if kept.any() else
                "without" if zeroed.any() else "none")
    ids = list(index)

    def first(mask: NDArray[np.bool_]) -> tuple[int, Any]:
        t, j = np.argwhere(mask)[0]
        return int(t) + 1, ids[j]

    renormalised = 0.0
    if replacement == "with" and evidence == "without":
        t, c = first(zeroed)
        raise ValueError(
            f"replacement='with', but round {t} gives probability 0 to {c!r}, opened "
            "earlier, and no opened candidate keeps a positive probability: the run samples "
            "without replacement, where eq. 6's per-round identity fails (biased). Pass "
            "replacement='auto' or 'without'"
        )
    if replacement == "without":
        reopened = opened[np.arange(T), J]
        if reopened.any():
            t = int(np.flatnonzero(reopened)[0])
            raise ValueError(
                f"replacement='without', but round {t + 1} reopens {chosen[t]!r}: a run that "
                "reopens documents samples with replacement. Pass replacement='auto' or "
                "'with'"
            )
        mass = (V * opened).sum(axis=1)
        renormalised = float(mass.max())
        if renormalised > 0:
            V = np.where(opened, 0.0, V) / (1.0 - mass)[:, None]
            positive = V > 0
        form = "without"
    elif replacement == "with":
        form = "with"
    else:
        form = evidence if evidence in ("with", "without") else "with"
    unopened_zero = ~opened & ~positive
    # After a forced renormalisation no opened candidate is positive any more.
    against = {"with": opened & ~positive, "without": opened & positive}

    def covered(f: str) -> NDArray[np.bool_]:
        hit: NDArray[np.bool_] = np.any(unopened_zero | against[f], axis=0)
        return ~hit

    if replacement == "auto" and evidence == "mixed":
        form = "without" if covered("without").sum() > covered("with").sum() else "with"
    reach = covered(form)
    conflicts = tuple((int(t) + 1, ids[j]) for t, j in np.argwhere(against[form]))
    ever: NDArray[np.bool_] = np.any(positive, axis=0)
    dropped: list[tuple[int, Any, int]] = []
    for j in np.flatnonzero((unopened_zero & ever[None, :]).any(axis=0)):
        t = int(np.flatnonzero(unopened_zero[:, j])[0])
        dropped.append((t + 1, ids[j], int(np.flatnonzero(positive[:, j])[0]) + 1))
    dropped.sort(key=lambda d: d[0])  # the earliest round first (stable: pool order after)
    return SamplingDesign(
        replacement=form, evidence=evidence,
        reachable=frozenset(c for c, r in zip(ids, reach, strict=True) if r),
        n_pool=n, rho=1.0 - float(reach.sum()) / n,
        p=tuple(float(V[t, J[t]]) for t in range(T)),
        in_support=tuple(bool(reach[j]) for j in J),
        dropped=tuple(dropped), conflicts=conflicts, renormalised=renormalised,
    )
