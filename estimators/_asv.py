"""Agent Step Value: channel-indexed step gains and their four-corner interaction ([ASV]).

A frozen transition x⁻ → x⁺ is scored under two evaluation channels ρ0, ρ1 (a channel is the
whole readout configuration: view, prompt, model, reducer). ``F_ρ(x)`` is the scalar readout
after the within-channel reducer over cyclic layouts (``reduce_layouts``). Then

    G^ρ = F_ρ(x⁺) − F_ρ(x⁻)               the step value (ASV) under channel ρ
    Ω   = G^ρ1 − G^ρ0                      the interaction (transport discrepancy)
    diagonal   = F_ρ1(x⁺) − F_ρ0(x⁻)
    state_part = ½(G^ρ0 + G^ρ1),  view_part = ½(Δ_ρF(x⁻) + Δ_ρF(x⁺)),  their sum = diagonal

All four corners are needed: with one missing, replacing it by ``F + t`` leaves the other
three unchanged and moves Ω by ±t (Proposition 1), so a missing corner raises
``IncompleteFaceError``. Additive channel offsets cancel (``F_ρ = h + a_ρ`` gives Ω = 0).
Under independent positive-affine recalibrations of each channel the gain signs and the
cross-channel sign disagreement are invariant; the sign of Ω in general is not (Remark 2;
``calibration_check``).

Examples:
    >>> from agentlog.estimators import asv
    >>> f = asv.face([-0.2], [0.4], [0.5], [0.1])   # [ASV]'s four-corner example
    >>> [round(float(v[0]), 12) for v in (f.gain0, f.gain1, f.interaction, f.diagonal)]
    [0.6, -0.4, -1.0, 0.3]
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from agentlog import DegenerateDataWarning, IncompleteFaceError
from agentlog.deprecation import warn_renamed
from agentlog.display import (
    MAX_ROWS,
    html_repr,
    render_estimates,
    render_fields,
    render_notes,
    render_table,
)

from ._bootstrap import (
    IntervalMethod,
    bootstrap_interval,
    check_method,
    jackknife_acceleration,
)
from ._cess import inputs_hash
from ._interval import ConfidenceInterval, check_confidence_level
from ._labels import codes

FloatArray = NDArray[np.float64]
#: The interval of the trajectory-block bootstrap by default (the coverage study of
#: docs/how-to/estimators.md).
DEFAULT_METHOD: IntervalMethod = "BCa"
#: Per method, the fewest trajectories at which the seeded coverage study found the 95 %
#: interval of the mean Ω covering at least 92 % (tests/benchmarks/bench_coverage.py).
MIN_TRAJECTORIES_FOR_COVERAGE: dict[str, int] = {"BCa": 30, "percentile": 50, "basic": 100}
#: Above the floor, a summary warns while its trajectories number fewer than
#: ``TRAJECTORY_SKEWNESS_RULE · g₁²``, g₁ the sample skewness of the per-trajectory mean Ω
#: (Cochran's rule; the resampling unit is the trajectory, so its means are what the
#: bootstrap's normal approximation needs), and when every trajectory has the same mean Ω.
TRAJECTORY_SKEWNESS_RULE = 25.0
CORNERS = ("F_ρ0(x−)", "F_ρ0(x+)", "F_ρ1(x−)", "F_ρ1(x+)")
Weighting = Literal["empirical", "equal-target"]

CALIBRATION_NOTE = (
    "Remark 2 ([ASV]): under independent positive-affine recalibration of each channel, "
    "gain signs and cross-channel sign disagreement are invariant; the sign of Ω is invariant "
    "only where the two gains have opposite signs."
)
# Statistics that are shares, shown as percentages (the rest as signed differences), as
# `agentlog estimate asv` prints them.
_SHARES = {"share_negative_interaction", "mean_sign_disagreement", "cross_channel",
           "same_channel", "excess"}
_FACE = {"G0": "gain0", "G1": "gain1", "Ω": "interaction", "diagonal": "diagonal",
         "state part": "state_part", "view part": "view_part"}


def _spec(name: str) -> str:
    return ".1%" if name in _SHARES else ".3f" if name in ("auc0", "auc1") else "+.3f"


def _estimates(result: Any, values: dict[str, float]) -> str:
    """The table of ``values`` (name -> estimate) of a result, with the intervals its
    ``confidence_interval(name)`` gives."""
    return render_estimates(
        ((k, v, *result.confidence_interval(k)) for k, v in values.items()),
        confidence_level=result.confidence_level, spec=_spec,
        caption=f"{type(result).__name__} ({result.method} interval)")


@dataclass(frozen=True)
class AsvFace:
    """Per-transition gains and interaction of a complete face (arrays over transitions)."""

    before0: FloatArray
    after0: FloatArray
    before1: FloatArray
    after1: FloatArray
    gain0: FloatArray
    gain1: FloatArray
    interaction: FloatArray
    diagonal: FloatArray
    state_part: FloatArray
    view_part: FloatArray
    sign_disagree: NDArray[np.bool_]
    kept: NDArray[np.intp]  # indices of the input transitions in this face
    dropped: NDArray[np.intp]  # indices dropped as incomplete (complete_only=True)

    def __len__(self) -> int:
        return int(self.gain0.shape[0])

    @html_repr
    def _repr_html_(self) -> str:
        n = len(self)
        head = render_fields([
            ("transitions", n), ("dropped as incomplete", len(self.dropped)),
            ("sign disagreements", f"{int(self.sign_disagree.sum())} of {n}"),
            ("negative Ω", f"{int((self.interaction < 0).sum())} of {n}"),
        ], caption="ASV face ([ASV])")
        means = render_table(["", *_FACE], [["mean", *(
            f"{np.mean(getattr(self, a)) if n else math.nan:+.3f}" for a in _FACE.values())]])
        rows = ([self.kept[i], *(f"{c[i]:+.3f}" for c in (
            self.before0, self.after0, self.before1, self.after1, self.gain0, self.gain1,
            self.interaction)), "yes" if self.sign_disagree[i] else "no"]
            for i in range(min(n, MAX_ROWS)))
        return head + means + render_table(
            ["transition", *CORNERS, "G0", "G1", "Ω", "signs disagree"], rows,
            caption="Per transition", total=n)


def _corner(name: str, x: ArrayLike, n: int | None) -> FloatArray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 0:
        arr = arr[None]
    if arr.ndim != 1 or (n is not None and arr.shape[0] != n):
        raise ValueError(f"`{name}` must be 1-D with one value per transition"
                         + (f" ({n})" if n is not None else "") + f"; found shape {arr.shape}")
    if np.isinf(arr).any():
        raise ValueError(f"`{name}` must not hold inf (transition "
                         f"{int(np.flatnonzero(np.isinf(arr))[0])})")
    return arr


def face(
    before0: ArrayLike,
    after0: ArrayLike,
    before1: ArrayLike,
    after1: ArrayLike,
    *,
    complete_only: bool = False,
) -> AsvFace:
    """The four-corner face of each transition: F_ρ0(x−), F_ρ0(x+), F_ρ1(x−), F_ρ1(x+).

    A NaN corner raises ``IncompleteFaceError`` naming the transitions and corners
    (Proposition 1: three corners identify nothing). ``complete_only=True`` keeps the
    joint-complete cohort instead and lists the dropped transitions in ``dropped``.
    """
    b0 = _corner("before0", before0, None)
    n = b0.shape[0]
    a0 = _corner("after0", after0, n)
    b1 = _corner("before1", before1, n)
    a1 = _corner("after1", after1, n)
    corners = np.column_stack([b0, a0, b1, a1])
    missing = np.isnan(corners)
    incomplete = missing.any(axis=1)
    if incomplete.any() and not complete_only:
        rows = np.flatnonzero(incomplete)
        detail = "; ".join(
            f"transition {i}: {', '.join(c for c, m in zip(CORNERS, missing[i], strict=True) if m)}"
            for i in rows[:5]
        )
        more = f" (and {len(rows) - 5} more)" if len(rows) > 5 else ""
        raise IncompleteFaceError(
            f"{len(rows)} transition(s) lack a corner: {detail}{more}. Three corners identify "
            "nothing ([ASV] Proposition 1): re-score the missing corners, or pass "
            "complete_only=True to analyse the joint-complete cohort"
        )
    keep = np.flatnonzero(~incomplete)
    if keep.size == 0:
        raise IncompleteFaceError("no transition has all four corners")
    b0, a0, b1, a1 = b0[keep], a0[keep], b1[keep], a1[keep]
    g0 = a0 - b0
    g1 = a1 - b1
    diagonal = a1 - b0
    state = 0.5 * (g0 + g1)
    # view_part = ½(Δ_ρF(x−) + Δ_ρF(x+)) algebraically; taking it as diagonal − state_part
    # keeps the allocation additive in floating point too.
    return AsvFace(
        before0=b0, after0=a0, before1=b1, after1=a1, gain0=g0, gain1=g1,
        interaction=g1 - g0, diagonal=diagonal, state_part=state,
        view_part=diagonal - state, sign_disagree=(g0 * g1) < 0,
        kept=keep.astype(np.intp), dropped=np.flatnonzero(incomplete).astype(np.intp),
    )


def cyclic_layouts(n_options: int) -> NDArray[np.intp]:
    """Cyclic layouts: row ``l`` puts candidate ``i`` at position ``(i + l) mod n``.

    Each candidate appears in each position exactly once across the ``n`` layouts.
    """
    if not isinstance(n_options, int | np.integer) or n_options < 1:
        raise ValueError(f"`n_options` must be a positive int; found {n_options!r}")
    i = np.arange(n_options)
    return ((i[None, :] + i[:, None]) % n_options).astype(np.intp)


def reduce_layouts(scores: ArrayLike, *, layout_axis: int = -1) -> FloatArray:
    """The within-channel reducer: the mean over cyclic layouts, before any differencing.

    A missing layout (NaN) makes the reduced readout NaN: an incomplete layout set is
    another channel, so it is not silently averaged over the layouts that remain.
    """
    arr = np.asarray(scores, dtype=np.float64)
    if arr.ndim == 0:
        raise ValueError("`scores` needs a layout axis")
    out: FloatArray = arr.mean(axis=layout_axis)
    return out


# ---------------------------------------------------------------- trajectory-block bootstrap


def _warn_doubtful_trajectories(omega: FloatArray, traj: NDArray[np.intp], n_traj: int
                                ) -> None:
    """Warn, from the data, where the trajectory-block interval of the mean Ω is doubtful:
    every trajectory with the same mean Ω, or per-trajectory means so skewed that there
    are fewer than ``TRAJECTORY_SKEWNESS_RULE · g₁²`` trajectories."""
    finite = np.isfinite(omega)
    counts = np.bincount(traj[finite], minlength=n_traj).astype(np.float64)
    sums = np.bincount(traj[finite], weights=omega[finite], minlength=n_traj)
    means = sums[counts > 0] / counts[counts > 0]
    if means.shape[0] < 2:
        return
    if np.ptp(means) == 0.0:
        warnings.warn(
            f"all {means.shape[0]} trajectories have the same mean Ω ({float(means[0])!r}): "
            "the trajectory-block interval is that point and measures no sampling error "
            "(two channels that score identically? a readout that cannot vary?)",
            DegenerateDataWarning, stacklevel=3)
        return
    d = means - means.mean()
    m2 = float(np.mean(d * d))
    g1 = float(np.mean(d * d * d)) / m2 ** 1.5
    needed = math.ceil(TRAJECTORY_SKEWNESS_RULE * g1 * g1)
    if means.shape[0] < needed:
        warnings.warn(
            f"{means.shape[0]} trajectories whose mean Ω is skewed (sample skewness "
            f"{g1:+.2f}): the trajectory-block interval of a mean of skewed values needs "
            f"about 25·g₁² = {needed} trajectories to cover (skewed trajectory effects "
            "covered 0.90 at 30 trajectories in an outside study); read the intervals as "
            "optimistic, or record more trajectories", DegenerateDataWarning, stacklevel=3)


def _check_resamples(n_resamples: Any) -> None:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int | np.integer) \
            or n_resamples < 2:
        raise ValueError(f"`n_resamples` must be an int >= 2; found {n_resamples!r}")


def _block_count_rows(n_blocks: int, n_resamples: int, seed: int, rows: int
                      ) -> Iterator[FloatArray]:
    """How often each trajectory is drawn in each resample (rows sum to ``n_blocks``), a
    batch of ``rows`` resamples at a time: the numbers of one whole draw (the generator
    draws a batch's indices as it would draw them in one array), in memory of a batch (the
    whole array is resamples × trajectories: 16 GB at 10⁷ trajectories).

    Drawn as ``n_blocks`` uniform indices per resample and counted by bincount, which is
    faster than ``Generator.multinomial`` for many blocks.
    """
    rng = np.random.default_rng(seed)
    for start in range(0, n_resamples, rows):
        idx = rng.integers(0, n_blocks, size=(min(rows, n_resamples - start), n_blocks))
        counts: FloatArray = np.empty(idx.shape)
        for row, drawn in zip(counts, idx, strict=True):  # a row at a time: no second copy
            row[:] = np.bincount(drawn, minlength=n_blocks)
        yield counts


SERIES = ("interaction", "gain0", "gain1", "sign_disagreement", "diagonal", "state_part",
          "view_part")
_BLOCK = 64
# Numbers in each of the resampler's (units × blocks) prefix tables and in a batch of
# resample rows (resamples × units): larger inputs get longer blocks and shorter batches, so
# memory stays bounded (64-position blocks over 10⁵ trajectories took 1.25 GB a table).
_TABLE_NUMBERS = 1 << 24
_BATCH_NUMBERS = 1 << 22


def _batch_rows(n_units: int, most: int) -> int:
    """Resample rows per batch when each row holds ``n_units`` weights."""
    return max(1, min(most, _BATCH_NUMBERS // max(n_units, 1)))


class _Resampler:
    """Statistics of a face under trajectory-block resampling, without per-transition passes.

    The resampling weight of a transition is that of its *unit*: its trajectory (empirical
    weighting) or its (trajectory, target) pair divided by the target's total (equal-target
    weighting), so every statistic is linear in the units' weights ``v`` (resamples × units).
    Means are ``v @ (per-unit sums)``. Weighted quantiles need cumulative weights along Ω
    sorted: they are ``v @ P`` with ``P`` the per-unit prefix counts at every 64th sorted
    position, refined by an exact cumulative sum inside the one block that holds the
    quantile. This is exact (the same numbers as a full cumulative sum) and costs two small
    matrix products per batch of resamples instead of sums over every transition.
    """

    def __init__(self, f: AsvFace, unit: NDArray[np.intp], n_units: int) -> None:
        order = np.argsort(f.interaction, kind="stable")
        self.xs = f.interaction[order]
        n = self.xs.shape[0]
        self.n = n
        # 64 positions a block, or as many more (a multiple of 64) as keep the tables small
        size = max(_BLOCK, -(-n * (n_units + 1) // _TABLE_NUMBERS // _BLOCK) * _BLOCK)
        self.block = size
        n_blocks = -(-n // size)
        pad = n_blocks * size - n
        self.n_blocks = n_blocks
        # padded positions belong to a dummy unit whose weight is always 0
        self.unit_sorted = np.concatenate([unit[order], np.full(pad, n_units)]).astype(np.intp)
        self.xs_pad = np.concatenate([self.xs, np.zeros(pad)])
        block_of = np.arange(n_blocks * size) // size
        counts = np.zeros((n_units + 1, n_blocks + 1))
        sums = np.zeros((n_units + 1, n_blocks + 1))
        np.add.at(counts, (self.unit_sorted, block_of + 1), 1.0)
        np.add.at(sums, (self.unit_sorted, block_of + 1), self.xs_pad)
        self.prefix = np.cumsum(counts, axis=1)  # weight before each block start, per unit
        self.prefix_x = np.cumsum(sums, axis=1)
        X = np.column_stack([f.interaction, f.gain0, f.gain1, f.sign_disagree.astype(np.float64),
                             f.diagonal, f.state_part, f.view_part])
        self.unit_sums = np.zeros((n_units + 1, X.shape[1]))
        np.add.at(self.unit_sums, unit, X)
        self.n_negative = int(np.searchsorted(self.xs, 0.0, side="left"))
        before_zero = np.zeros(n_units + 1)
        np.add.at(before_zero, self.unit_sorted[: self.n_negative], 1.0)
        self.before_zero = before_zero

    def stats(self, v: FloatArray, trim: float) -> dict[str, FloatArray]:
        """Every statistic for each row of unit weights ``v`` (resamples × (units + 1))."""
        total = v @ self.prefix[:, -1]
        cum_b = v @ self.prefix  # (B, n_blocks + 1)
        cum_bx = v @ self.prefix_x
        rows = np.arange(v.shape[0])

        def locate(level: FloatArray) -> tuple[NDArray[np.intp], FloatArray, FloatArray]:
            """First sorted position whose cumulative weight reaches ``level``, with the
            cumulative weight and weighted Ω sum up to and including it."""
            reach = level - 1e-9 * total
            block = np.clip((cum_b[:, 1:] < reach[:, None]).sum(axis=1), 0, self.n_blocks - 1)
            pos = block[:, None] * self.block + np.arange(self.block)
            w = v[rows[:, None], self.unit_sorted[pos]]
            c = cum_b[rows, block][:, None] + np.cumsum(w, axis=1)
            k = np.argmax(c >= reach[:, None], axis=1)
            cx = cum_bx[rows, block] + np.cumsum(w * self.xs_pad[pos], axis=1)[rows, k]
            i = np.minimum(block * self.block + k, self.n - 1)
            return i, c[rows, k], cx

        lo, hi = trim * total, (1.0 - trim) * total
        i_med, _, _ = locate(0.5 * total)
        i_lo, c_lo, cx_lo = locate(lo)
        i_hi, c_hi, cx_hi = locate(hi)
        band = cx_hi - cx_lo - (c_hi - hi) * self.xs[i_hi] + (c_lo - lo) * self.xs[i_lo]
        means = (v @ self.unit_sums) / total[:, None]
        out = {
            "mean_interaction": means[:, 0],
            "median_interaction": self.xs[i_med],
            "trimmed_mean_interaction": band / (hi - lo),
            "share_negative_interaction": (v @ self.before_zero) / total,
        }
        for j, key in enumerate(SERIES[1:], start=1):
            out[f"mean_{key}"] = means[:, j]
        return out


def _unit_weights(counts: FloatArray, unit_traj: NDArray[np.intp],
                  unit_target: NDArray[np.intp] | None, per_target: FloatArray | None
                  ) -> FloatArray:
    """Weights of the units (plus a zero dummy column) for each row of trajectory counts."""
    v = counts[:, unit_traj]
    if unit_target is not None and per_target is not None:
        totals = counts @ per_target  # (B, targets): transitions of each target drawn
        v = np.divide(v, totals[:, unit_target], out=np.zeros_like(v), where=v > 0)
    return np.concatenate([v, np.zeros((v.shape[0], 1))], axis=1)


_JACKKNIFE_GROUPS = 2_000


def _jackknife(f: AsvFace, unit: NDArray[np.intp], resampler: _Resampler, n_traj: int,
               unit_traj: NDArray[np.intp], unit_target: NDArray[np.intp] | None,
               per_target: FloatArray | None, trim: float) -> dict[str, FloatArray]:
    """Leave-one-trajectory-out statistics (the BCa acceleration's input), in row batches.

    Beyond ``_JACKKNIFE_GROUPS`` trajectories a delete-a-group jackknife (trajectory code
    modulo the group count) keeps time and memory bounded; below it, it is the exact
    jackknife. A delete-a-group row weighs every unit of one group (and, with equal-target
    weighting, one target) alike, so its statistics come from a resampler over those
    classes instead of the units: the same sums, regrouped, with sorted blocks short enough
    for a row to scan (at 10⁷ trajectories the units' blocks held millions of positions).
    """
    n_groups = min(n_traj, _JACKKNIFE_GROUPS)
    if n_groups < n_traj:  # from here on a "trajectory" is a group, a "unit" a class
        group = unit_traj % n_groups
        if unit_target is None or per_target is None:
            unit_class, unit_traj = group, np.arange(n_groups, dtype=np.intp)
        else:
            n_targets = per_target.shape[1]
            classes, unit_class = np.unique(group * n_targets + unit_target,
                                            return_inverse=True)
            unit_traj, unit_target = classes // n_targets, classes % n_targets
            group_target = np.zeros((n_groups, n_targets))
            np.add.at(group_target, np.arange(n_traj) % n_groups, per_target)
            per_target = group_target
        resampler = _Resampler(f, unit_class.ravel()[unit], len(unit_traj))
    out: dict[str, list[FloatArray]] = {}
    for counts in _jackknife_rows(n_groups, len(unit_traj)):
        for key, arr in resampler.stats(_unit_weights(counts, unit_traj, unit_target,
                                                      per_target), trim).items():
            out.setdefault(key, []).append(arr)
    return {k: np.concatenate(v) for k, v in out.items()}


@dataclass(frozen=True)
class AsvSummaryResult:
    """Cohort statistics of a face with trajectory-block bootstrap intervals.

    ``values[name]`` is the point estimate; ``confidence_interval(name)`` its interval by
    ``method`` (``"BCa"``, ``"percentile"`` or ``"basic"``) from shared draws (the same
    resampled trajectories for every statistic). ``accelerations[name]`` is the BCa acceleration
    from the leave-one-trajectory-out estimates.
    """

    values: dict[str, float]
    samples: dict[str, FloatArray]
    n_transitions: int
    n_trajectories: int
    weighting: str
    n_resamples: int
    seed: int
    confidence_level: float
    calibration: CalibrationCheck
    inputs_hash: str = ""  # SHA-256 of the four corners, trajectory and target labels
    note: str = field(default=CALIBRATION_NOTE)
    method: IntervalMethod = DEFAULT_METHOD
    accelerations: dict[str, float] = field(default_factory=dict)

    def confidence_interval(self, name: str, *, confidence_level: float | None = None,
                            method: IntervalMethod | None = None) -> ConfidenceInterval[float]:
        """The interval of statistic ``name`` by ``method`` (default: the summary's), at the
        summary's ``confidence_level`` unless another is given."""
        if name not in self.values:
            raise KeyError(f"unknown statistic {name!r}; one of {sorted(self.values)}")
        how = self.method if method is None else check_method(method)
        level = self.confidence_level if confidence_level is None else confidence_level
        low, high = bootstrap_interval(self.samples[name], self.values[name],
                                       confidence_level=level, method=how,
                                       acceleration=self.accelerations.get(name, 0.0))
        return ConfidenceInterval(float(low), float(high))

    def interval(self, name: str, *, method: IntervalMethod | None = None
                 ) -> ConfidenceInterval[float]:
        """Deprecated: ``confidence_interval`` (same arguments)."""
        warn_renamed("AsvSummaryResult.interval", "AsvSummaryResult.confidence_interval")
        return self.confidence_interval(name, method=method)

    def to_dict(self) -> dict[str, Any]:
        return {
            "weighting": self.weighting,
            "n_transitions": self.n_transitions,
            "n_trajectories": self.n_trajectories,
            "n_resamples": self.n_resamples,
            "seed": self.seed,
            "confidence_level": self.confidence_level,
            "interval_method": self.method,
            "inputs_hash": self.inputs_hash,
            "statistics": {k: {"value": v, "interval": list(self.confidence_interval(k))}
                           for k, v in self.values.items()},
            "calibration": self.calibration.to_dict(),
            "note": self.note,
        }

    @html_repr
    def _repr_html_(self) -> str:
        head = render_fields([
            ("transitions", self.n_transitions), ("trajectories", self.n_trajectories),
            ("weighting", self.weighting), ("bootstrap", f"{self.n_resamples:,} trajectory-"
                                                         f"block draws, seed {self.seed}"),
            ("sign of the mean Ω under recalibration", self.calibration.mean_interaction_sign),
        ], caption="ASV summary ([ASV])")
        return (head + _estimates(self, self.values)
                + render_notes([self.calibration.explanation, self.note]))


def summarize(
    f: AsvFace,
    *,
    trajectory: ArrayLike | Sequence[Any],
    target: ArrayLike | Sequence[Any] | None = None,
    weighting: Weighting = "empirical",
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence_level: float = 0.95,
    trim: float = 0.1,
    method: IntervalMethod = DEFAULT_METHOD,
) -> AsvSummaryResult:
    """Mean/median/trimmed Ω, share of negative Ω, mean gains, sign disagreement ([ASV]).

    Args:
        f: a complete face (``face(...)``).
        trajectory: trajectory of each transition (of the face's kept transitions); the
            bootstrap resamples whole trajectories with all their transitions.
        target: target identity of each transition; needed for ``"equal-target"``, which
            gives every target equal total weight (re-normalised within each resample).
        weighting: ``"empirical"`` (each transition weighs 1) or ``"equal-target"``.
        n_resamples, seed, confidence_level: the bootstrap; draws from
            ``numpy.random.default_rng(seed)``, bit-reproducible.
        trim: the trimmed mean drops this share from each tail (weighted, fractional).
        method: the interval, scipy.stats.bootstrap's names: ``"BCa"`` (default; it covers
            best in the coverage study of docs/how-to/estimators.md), ``"percentile"``
            or ``"basic"``.

    Warns:
        DegenerateDataWarning: one trajectory only; fewer than
            ``MIN_TRAJECTORIES_FOR_COVERAGE[method]`` (where the coverage study found the
            95 % interval of the mean Ω covering less than 92 %); every trajectory with the
            same mean Ω; or per-trajectory mean Ω so skewed that there are fewer than
            ``TRAJECTORY_SKEWNESS_RULE · g₁²`` trajectories.
    """
    n = len(f)
    t_uniq, traj = codes(trajectory, name="trajectory")
    if traj.shape[0] != n:
        raise ValueError(f"`trajectory` has {traj.shape[0]} labels for {n} transitions in the "
                         "face (pass the labels of face.kept when complete_only dropped some)")
    if weighting not in ("empirical", "equal-target"):
        raise ValueError(f"`weighting` must be 'empirical' or 'equal-target'; found {weighting!r}")
    tgt: NDArray[np.intp] | None = None
    n_targets = 0
    if weighting == "equal-target":
        if target is None:
            raise ValueError("`target` is needed for weighting='equal-target'")
        g_uniq, tgt = codes(target, name="target")
        if tgt.shape[0] != n:
            raise ValueError(f"`target` has {tgt.shape[0]} labels for {n} transitions")
        n_targets = len(g_uniq)
    if not 0 <= trim < 0.5:
        raise ValueError(f"`trim` must be in [0, 0.5); found {trim}")
    _check_resamples(n_resamples)
    confidence_level = check_confidence_level(confidence_level)
    method = check_method(method)
    n_traj = len(t_uniq)
    limit = MIN_TRAJECTORIES_FOR_COVERAGE[method]
    if n_traj < 2:
        warnings.warn("one trajectory only: the trajectory-block bootstrap has no spread",
                      DegenerateDataWarning, stacklevel=2)
    elif n_traj < limit:
        warnings.warn(
            f"{n_traj} trajectories: below {limit} the 95% {method} trajectory-block interval of "
            "the mean Ω covered less than 92% in the seeded coverage study (docs: how-to/"
            "estimators.md, 'Interval coverage'); read the intervals as optimistic, or record more "
            "trajectories", DegenerateDataWarning, stacklevel=2)
    else:
        _warn_doubtful_trajectories(np.asarray(f.interaction, dtype=np.float64), traj, n_traj)
    if tgt is None:
        unit, n_units = traj, len(t_uniq)
        unit_traj = np.arange(n_units, dtype=np.intp)
        unit_target = per_target = None
    else:
        pairs, unit = np.unique(np.column_stack([traj, tgt]), axis=0, return_inverse=True)
        unit = unit.ravel().astype(np.intp)
        n_units = pairs.shape[0]
        unit_traj, unit_target = pairs[:, 0].astype(np.intp), pairs[:, 1].astype(np.intp)
        # transitions of each trajectory in each target: counts @ per_target = target totals
        per_target = np.zeros((len(t_uniq), n_targets))
        np.add.at(per_target, (traj, tgt), 1.0)
    resampler = _Resampler(f, unit, n_units)
    point = resampler.stats(_unit_weights(np.ones((1, len(t_uniq))), unit_traj, unit_target,
                                          per_target), trim)
    values = {k: float(v[0]) for k, v in point.items()}
    accelerations: dict[str, float] = {}
    if n_traj >= 2:
        jk = _jackknife(f, unit, resampler, n_traj, unit_traj, unit_target, per_target, trim)
        accelerations = {k: float(jackknife_acceleration(v)) for k, v in jk.items()}
    samples: dict[str, list[FloatArray]] = {}
    rows = _batch_rows(n_units, 1_000)
    for counts in _block_count_rows(len(t_uniq), int(n_resamples), seed, rows):
        v = _unit_weights(counts, unit_traj, unit_target, per_target)
        for key, arr in resampler.stats(v, trim).items():
            samples.setdefault(key, []).append(arr)
    return AsvSummaryResult(
        values=values,
        samples={k: np.concatenate(v) for k, v in samples.items()},
        n_transitions=n, n_trajectories=len(t_uniq), weighting=weighting,
        n_resamples=int(n_resamples), seed=seed, confidence_level=confidence_level,
        calibration=calibration_check(f, mean_gain0=values["mean_gain0"],
                                      mean_gain1=values["mean_gain1"]),
        inputs_hash=inputs_hash(f.before0, f.after0, f.before1, f.after1, traj,
                                np.zeros(0) if tgt is None else tgt,
                                config=f"{weighting}|{n_resamples}|{seed}|{trim}"),
        method=method, accelerations=accelerations,
    )


# ---------------------------------------------------------------------- calibration


@dataclass(frozen=True)
class CalibrationCheck:
    """Which conclusions survive independent positive-affine recalibration (Remark 2)."""

    gain_signs: str  # always "invariant"
    sign_disagreement: str  # always "invariant"
    transition_interaction_signs_invariant: float  # share of transitions with invariant sign
    mean_interaction_sign: str  # "invariant" or "not invariant"
    witness: tuple[float, float] | None  # (α0, α1) that flips the mean Ω's sign, if any
    explanation: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "gain_signs": self.gain_signs,
            "sign_disagreement": self.sign_disagreement,
            "transition_interaction_signs_invariant": self.transition_interaction_signs_invariant,
            "mean_interaction_sign": self.mean_interaction_sign,
            "witness": None if self.witness is None else list(self.witness),
            "explanation": self.explanation,
        }

    @html_repr
    def _repr_html_(self) -> str:
        return render_fields([
            ("gain signs", self.gain_signs), ("sign disagreement", self.sign_disagreement),
            ("transitions whose Ω sign is invariant",
             f"{self.transition_interaction_signs_invariant:.1%}"),
            ("mean Ω sign", self.mean_interaction_sign),
            ("witness (α0, α1)", None if self.witness is None else
             ", ".join(f"{a:.3g}" for a in self.witness)),
        ], caption="Calibration check ([ASV] Remark 2)") + render_notes([self.explanation])


def calibration_check(
    f: AsvFace, *, mean_gain0: float | None = None, mean_gain1: float | None = None
) -> CalibrationCheck:
    """Remark 2 applied to a face: what survives ``F̃_ρ = α_ρ F_ρ + β_ρ`` with ``α_ρ > 0``.

    Gains scale by α_ρ, so their signs and the cross-channel sign disagreement never change.
    Ω̃ = α1 G1 − α0 G0 keeps its sign for every (α0, α1) iff the gains have opposite signs
    (or one is zero and the other not); otherwise a witness pair (α0, α1) flips it. The mean
    Ω over a fixed cohort follows the same rule with the mean gains.
    """
    g0 = float(np.mean(f.gain0)) if mean_gain0 is None else mean_gain0
    g1 = float(np.mean(f.gain1)) if mean_gain1 is None else mean_gain1
    per_transition = float(np.mean((f.gain0 * f.gain1) <= 0) if len(f) else 0.0)
    witness: tuple[float, float] | None = None
    if g0 * g1 > 0:
        # Same sign: Ω̃ = α1 G1 − α0 G0 changes sign as α1/α0 crosses G0/G1.
        ratio = g0 / g1
        omega = g1 - g0
        witness = (1.0, 2.0 * ratio) if omega * (2 * ratio * g1 - g0) < 0 else (1.0, 0.5 * ratio)
        verdict, why = "not invariant", (
            f"both mean gains have the same sign ({g0:+.3g}, {g1:+.3g}); rescaling channel 1 "
            f"by α1/α0 = {witness[1]:.3g} reverses the sign of the mean Ω")
    elif g0 == 0 and g1 == 0:
        verdict, why = "not invariant", "both mean gains are zero: Ω is 0 at every calibration"
    else:
        verdict, why = "invariant", (
            f"the mean gains have opposite signs ({g0:+.3g}, {g1:+.3g}): α1 G1 − α0 G0 keeps "
            "its sign for every positive α0, α1")
    return CalibrationCheck("invariant", "invariant", per_transition, verdict, witness, why)


def _jackknife_rows(n_traj: int, width: int | None = None) -> Iterator[FloatArray]:
    """Trajectory counts of the leave-one-out (or, beyond ``_JACKKNIFE_GROUPS``
    trajectories, delete-a-group) jackknife, a batch of rows at a time: at most 500 rows
    and about four million numbers a batch when a row is used at ``width`` numbers (the
    units its weights expand to; default ``n_traj``), made as they are used (all 2,000
    rows of 10⁵ trajectories at once held 1.6 GB)."""
    n_groups = min(n_traj, _JACKKNIFE_GROUPS)
    group = np.arange(n_traj) % n_groups
    rows = _batch_rows(n_traj if width is None else width, 500)
    for lo in range(0, n_groups, rows):
        yield (group[None, :] != np.arange(lo, min(lo + rows, n_groups))[:, None]
               ).astype(np.float64)
