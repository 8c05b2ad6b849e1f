"""Certified leaderboards: admissibility, eq. 4, rank intervals, the ladder, calibration.

[LBC] §3.4 and Appendix A.3. A pair of systems ``(A, B)`` is compared on a readout
``n`` (or on the composite) in three steps, in this order:

1. **Admissibility** (Def. 1, Def. 7), decided from the plan and the sealed entries before
   any score is read (``admissibility`` takes no scores): Assumption 1 must be declared; a
   backbone change inside a scaffold window has no finite radius (refused); equal entry
   hashes on every common task make an *exact cell* (``ε_in = 0``, ``r = 0``); otherwise
   the entry mismatch is the mean per-task 1-Wasserstein distance between the declared
   entry feature of the two systems (``distance.wasserstein``), with Hoeffding's one-sided
   radius. Eq. 3 (``bounds.nuisance_radius``) turns it into ``ε̂_out`` and ``r``; the pair
   is admissible on ``n`` iff ``ε̂_out + r ≤ ε_fair,n``.
2. **Sampling radius**: the paired differences ``d_i = y_A,i − y_B,i`` on the common tasks
   (a failed task dropped, or scored ⊥, as declared), ``Δ̂ = mean d_i``, the cluster-robust
   (CR1) standard error over task clusters
   ``se² = G/(G−1) · Σ_g (Σ_{i∈g} (d_i − Δ̂))² / N²`` (statsmodels' ``cov_cluster`` with
   ``use_correction``) and ``q = t_{1−δ′/(2m)}(G−1) · se``, Bonferroni over the ``m`` pairs
   of the family.
3. **Certification** (eq. 4): ``A ≻ B`` iff ``|Δ̂| > q + ε̂_out + r`` with ``Δ̂ > 0``.
   Otherwise undecided: *attribution-limited* when ``|Δ̂| ≤ ε̂_out + r`` (more tasks alone
   cannot decide it) and *sampling-limited* otherwise (Appendix A.3).

Rank intervals come from the transitive closure of the certified relation:
``rank(X) = [1 + #ancestors, n − #descendants]`` (cycles are reported, never hidden). The
conventional ladder R0–R5 (Table 2) is computed beside the certificate, and Appendix F.5's
calibration — a per-cluster sign-flip null with one sign vector per draw shared by every
pair, the family-wise false-certification rate, the radius scale ``c*`` and leave-one-
cluster-out stability — is attached to the board.

Example:
    >>> import numpy as np
    >>> from agentlog.estimators import certify
    >>> plan = certify.Plan.from_toml('''
    ... estimand = "whole-agent contrast under one shared task input"
    ... [readouts.f1]
    ... tolerance = 0.05
    ... [conditions]
    ... shared_entry = true
    ... [calibration]
    ... n_resamples = 200
    ... ''')
    >>> rng = np.random.default_rng(0)
    >>> task = rng.normal(0, 0.1, 40)
    >>> scores = {"a": 0.7 + task + rng.normal(0, 0.02, 40),
    ...           "b": 0.5 + task + rng.normal(0, 0.02, 40),
    ...           "c": 0.5 + task + rng.normal(0, 0.02, 40)}
    >>> board = certify.certify(scores, clusters=np.arange(40) // 2, plan=plan)
    >>> board.certified()
    [('a', 'b'), ('a', 'c')]
    >>> board.rank("a"), board.rank("b"), board.decision("b", "c").decision
    ((1, 1), (2, 3), 'undecided-sampling')
    >>> certify.rank_intervals(["x", "y", "z"], [("x", "y")]).intervals
    {'x': (1, 2), 'y': (2, 3), 'z': (1, 3)}
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from agentlog._encoding import decode, encode
from agentlog._reader import Trace, read_traces

from ._plan import COMPOSITE, Plan

__all__ = [
    "Admissibility",
    "Board",
    "CalibrationResult",
    "CertifyData",
    "Entry",
    "EntryTable",
    "LadderRung",
    "LeaveOneOut",
    "PairAdmissibility",
    "PairDecision",
    "RankIntervals",
    "SamplingRadius",
    "TargetRadius",
    "admissibility",
    "certify",
    "from_traces",
    "rank_intervals",
    "sampling_radius",
]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.intp]
TraceInput = Trace | str | os.PathLike[str]
Decision = Literal["certified", "undecided-sampling", "undecided-attribution", "refused",
                   "not-enough-common-tasks"]
EntryStatus = Literal["exact", "measured", "declared", "refused", "insufficient"]
FeatureFn = Callable[[Any], ArrayLike]

_OK_STATUS = ("exact", "measured", "declared")
_CHUNK = 1 << 21  # elements per block of a (draws × cells) matrix: bounds memory only


# ======================================================================= rank intervals


@dataclass(frozen=True)
class RankIntervals:
    """Rank intervals of a certified relation ([LBC] §3.4, Appendix A.3).

    Attributes:
        systems: the systems, in the order given.
        intervals: ``system -> (lowest rank, highest rank)``; 1 is best. For an acyclic
            relation, ``[1 + #ancestors, n − #descendants]`` of the transitive closure: the
            range of positions the system takes over all linear extensions.
        relation: the certified relation as given, ``(better, worse)`` pairs.
        closure: its transitive closure, ``(better, worse)`` pairs, sorted.
        cycles: groups of systems each above the others through certified relations (a
            cycle makes the relation no partial order; those systems' intervals count only
            the ancestors and descendants outside their group, and they are never pinned).
    """

    systems: tuple[str, ...]
    intervals: dict[str, tuple[int, int]]
    relation: tuple[tuple[str, str], ...]
    closure: tuple[tuple[str, str], ...]
    cycles: tuple[tuple[str, ...], ...]

    def pinned(self, system: str) -> bool:
        """True when the system's interval holds a single position."""
        lo, hi = self.intervals[system]
        return lo == hi

    @property
    def added(self) -> tuple[tuple[str, str], ...]:
        """Relations the closure adds to the certified ones."""
        given = set(self.relation)
        return tuple(p for p in self.closure if p not in given)

    def to_dict(self) -> dict[str, Any]:
        return {
            "intervals": {s: list(v) for s, v in self.intervals.items()},
            "pinned": [s for s in self.systems if self.pinned(s)],
            "closure": [list(p) for p in self.closure],
            "added_by_closure": [list(p) for p in self.added],
            "cycles": [list(c) for c in self.cycles],
        }


def _closure(adj: BoolArray) -> BoolArray:
    reach = adj.copy()
    for k in range(reach.shape[0]):  # Warshall, one vectorised row sweep per pivot
        reach |= reach[:, k : k + 1] & reach[k : k + 1, :]
    return reach


def _intervals(reach: BoolArray) -> tuple[IntArray, IntArray, BoolArray]:
    n = reach.shape[0]
    mutual = reach & reach.T
    same = mutual | np.eye(n, dtype=bool)
    above = reach.T & ~same  # above[i, j]: j is an ancestor of i outside i's cycle
    below = reach & ~same
    lo = (1 + above.sum(axis=1)).astype(np.intp)
    hi = (n - below.sum(axis=1)).astype(np.intp)
    return lo, hi, np.diag(reach).copy()


def rank_intervals(systems: Sequence[str], relations: Iterable[tuple[str, str]]
                   ) -> RankIntervals:
    """Rank intervals from certified ``(better, worse)`` relations.

    Args:
        systems: every system ranked (``n`` names, unique).
        relations: certified relations ``(better, worse)``; names must be in ``systems``.

    Returns:
        ``RankIntervals``: per system ``[1 + #ancestors, n − #descendants]`` of the
        transitive closure, which is exactly the range of positions over all linear
        extensions of the partial order; cycles are reported in ``cycles``.
    """
    names = tuple(str(s) for s in systems)
    if len(set(names)) != len(names):
        dup = next(s for s in names if names.count(s) > 1)
        raise ValueError(f"`systems` must be unique; {dup!r} appears more than once")
    index = {s: i for i, s in enumerate(names)}
    rel: list[tuple[str, str]] = []
    adj = np.zeros((len(names), len(names)), dtype=bool)
    for pair in relations:
        if len(pair) != 2:
            raise ValueError(f"`relations` holds (better, worse) pairs; found {pair!r}")
        a, b = str(pair[0]), str(pair[1])
        for s in (a, b):
            if s not in index:
                raise ValueError(f"`relations` names {s!r}, which is not in `systems`")
        if a == b:
            raise ValueError(f"`relations` relates {a!r} to itself")
        adj[index[a], index[b]] = True
        rel.append((a, b))
    reach = _closure(adj)
    lo, hi, cyclic = _intervals(reach)
    groups: list[tuple[str, ...]] = []
    seen: set[int] = set()
    for i in np.flatnonzero(cyclic):
        if int(i) in seen:
            continue
        members = [int(j) for j in np.flatnonzero(reach[i] & reach[:, i])]
        seen.update(members)
        groups.append(tuple(names[j] for j in members))
    closure = tuple(sorted((names[i], names[j]) for i, j in zip(*np.nonzero(reach), strict=True)
                           if i != j))
    return RankIntervals(
        systems=names,
        intervals={s: (int(lo[i]), int(hi[i])) for i, s in enumerate(names)},
        relation=tuple(dict.fromkeys(rel)),
        closure=closure,
        cycles=tuple(groups),
    )


# ======================================================================= sampling radius


@dataclass(frozen=True)
class SamplingRadius:
    """Cluster-robust paired statistics, one row per pair ([LBC] §6.1, eq. 4).

    Attributes:
        estimate: ``Δ̂``, the mean paired difference over the row's tasks.
        standard_error: the CR1 standard error of ``Δ̂`` over task clusters.
        q: the two-sided half-width ``t_{1−δ′/(2m)}(G−1) · se`` (NaN when ``G < 2``).
        n_tasks: tasks per row.
        n_clusters: clusters ``G`` per row.
        delta_prime: ``δ′``; family_size: ``m`` (Bonferroni).
    """

    estimate: FloatArray
    standard_error: FloatArray
    q: FloatArray
    n_tasks: NDArray[np.int64]
    n_clusters: NDArray[np.int64]
    delta_prime: float
    family_size: int


@dataclass(frozen=True)
class _Moments:
    """Per row: n, mean, CR1 se, G; and per (row, cluster) sums for resampling."""

    n: FloatArray
    mean: FloatArray
    se: FloatArray
    g: FloatArray
    sums: FloatArray  # (K, G) Σ_{i∈g} d_i
    counts: FloatArray  # (K, G) tasks of row k in cluster g


def _moments(d: FloatArray, mask: BoolArray, onehot: FloatArray) -> _Moments:
    m = mask.astype(np.float64)
    dm = np.where(mask, d, 0.0)
    n = m.sum(axis=1)
    counts = m @ onehot
    sums = dm @ onehot
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = sums.sum(axis=1) / n
        resid = sums - counts * mean[:, None]  # Σ_{i∈g} (d_i − Δ̂): the CR1 score per cluster
        g = (counts > 0).sum(axis=1).astype(np.float64)
        var = g / (g - 1.0) * (resid**2).sum(axis=1) / n**2
    var = np.where(g >= 2, var, np.nan)
    return _Moments(n, mean, np.sqrt(var), g, sums, counts)


def _t_quantiles(level: float, g: FloatArray) -> FloatArray:
    """``t_level(G − 1)`` per row, NaN where ``G < 2``; one ppf call per distinct G."""
    from scipy import stats  # lazy: `import agentlog` stays light

    out = np.full(g.shape, np.nan)
    for value in np.unique(g[np.isfinite(g) & (g >= 2)]):
        out[g == value] = float(stats.t.ppf(level, value - 1.0))
    return out


def _onehot(codes: IntArray, n_groups: int) -> FloatArray:
    out = np.zeros((codes.shape[0], n_groups))
    out[np.arange(codes.shape[0]), codes] = 1.0
    return out


def _codes(labels: Sequence[Any], name: str, n: int | None = None) -> tuple[list[str], IntArray]:
    arr = list(labels) if not isinstance(labels, np.ndarray) else labels.tolist()
    if n is not None and len(arr) != n:
        raise ValueError(f"`{name}` has {len(arr)} labels for {n} tasks; give one cluster "
                         "label per task (the clusters must cover every task)")
    keys: list[str] = []
    for i, v in enumerate(arr):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            raise ValueError(f"`{name}` has no label for task {i} (found {v!r}); every task "
                             "needs a cluster (use the task itself when it is its own cluster)")
        keys.append(str(v))
    uniq = sorted(set(keys))
    pos = {k: j for j, k in enumerate(uniq)}
    return uniq, np.array([pos[k] for k in keys], dtype=np.intp)


def sampling_radius(
    differences: ArrayLike,
    clusters: Sequence[Any] | ArrayLike,
    *,
    mask: ArrayLike | None = None,
    delta_prime: float = 0.05,
    family_size: int = 1,
) -> SamplingRadius:
    """Cluster-robust (CR1) paired statistics and the Bonferroni t(G−1) radius.

    Args:
        differences: paired differences, shape ``(n_tasks,)`` or ``(n_pairs, n_tasks)``.
        clusters: the cluster label of each task (length ``n_tasks``).
        mask: which tasks each row uses (same shape as ``differences``; default: all).
            Masked-out entries may hold NaN; used ones must be finite.
        delta_prime: family-wise ``δ′`` in (0, 1).
        family_size: ``m``, the number of pairs Bonferroni divides ``δ′`` by.

    Returns:
        ``SamplingRadius`` with one entry per row.
    """
    d = np.asarray(differences, dtype=np.float64)
    squeeze = d.ndim == 1
    d2 = d[None, :] if squeeze else d
    if d2.ndim != 2:
        raise ValueError(f"`differences` must be (n_tasks,) or (n_pairs, n_tasks); found "
                         f"shape {d.shape}")
    msk = (np.ones(d2.shape, dtype=bool) if mask is None
           else np.broadcast_to(np.asarray(mask, dtype=bool), d2.shape))
    if not np.isfinite(d2[msk]).all():
        raise ValueError("`differences` must be finite on the tasks `mask` keeps")
    if not 0.0 < delta_prime < 1.0:
        raise ValueError(f"`delta_prime` must be in (0, 1); found {delta_prime}")
    if not isinstance(family_size, int | np.integer) or family_size < 1:
        raise ValueError(f"`family_size` must be a positive int; found {family_size!r}")
    uniq, codes = _codes(clusters, "clusters", d2.shape[1])  # type: ignore[arg-type]
    mo = _moments(d2, msk, _onehot(codes, len(uniq)))
    q = _t_quantiles(1.0 - delta_prime / (2.0 * family_size), mo.g) * mo.se
    return SamplingRadius(
        estimate=mo.mean[0:1] if squeeze else mo.mean,
        standard_error=mo.se[0:1] if squeeze else mo.se,
        q=q[0:1] if squeeze else q,
        n_tasks=mo.n.astype(np.int64), n_clusters=mo.g.astype(np.int64),
        delta_prime=float(delta_prime), family_size=int(family_size),
    )


# ======================================================================= entries


@dataclass(frozen=True)
class Entry:
    """One run's sealed entry into the comparison window.

    Attributes:
        system, task: the run's ``system`` and ``task``.
        entry_hash: the entry hash (hex).
        entry_bytes: the canonical entry encoding (``None`` when only the hash is known).
        backbone: ``meta["backbone"]`` of the run, when recorded.
        cluster: ``meta["cluster"]`` (default: the task).
        run_id, path: where it comes from.
    """

    system: str
    task: str
    entry_hash: str
    entry_bytes: bytes | None = None
    backbone: str | None = None
    cluster: str | None = None
    run_id: str | None = None
    path: str | None = None


@dataclass(frozen=True)
class EntryTable:
    """The sealed entries of a comparison window, by system and task: admissibility's input.

    It holds no score, so the admissibility decision cannot depend on one.
    """

    window: str | None
    entries: tuple[Entry, ...]
    input_hashes: dict[str, str] = field(default_factory=dict)

    @property
    def systems(self) -> tuple[str, ...]:
        return tuple(sorted({e.system for e in self.entries}))

    def by_task(self, system: str) -> dict[str, list[Entry]]:
        out: dict[str, list[Entry]] = {}
        for e in self.entries:
            if e.system == system:
                out.setdefault(e.task, []).append(e)
        return out

    @classmethod
    def from_traces(cls, traces: TraceInput | Iterable[TraceInput], *, window: str,
                    select: Mapping[str, Any] | None = None) -> EntryTable:
        """The first entry into ``window`` of every run (``RunStart`` and ``WindowEnter``
        records only: scores are never read), with the SHA-256 of every trace file."""
        entries: list[Entry] = []
        loaded = _traces(traces)
        for path, trace in loaded:
            for run in trace.runs:
                start = run.start
                if start is None or not _selected(start.meta, select):
                    continue
                task = _task_of(start.task, path, start.run_id)
                for w in run.windows:
                    if w.name == window:
                        entries.append(Entry(
                            system=start.system, task=task, entry_hash=w.entry_hash.hex(),
                            entry_bytes=w.entry_bytes, backbone=_backbone(start.meta),
                            cluster=str(start.meta.get("cluster", task)),
                            run_id=start.run_id, path=path))
                        break
        return cls(window=window, entries=tuple(entries),
                   input_hashes={p: _file_sha256(p) for p, _ in loaded})


def _selected(meta: Mapping[str, Any], select: Mapping[str, Any] | None) -> bool:
    return not select or all(k in meta and meta[k] == v for k, v in select.items())


def _backbone(meta: Mapping[str, Any]) -> str | None:
    v = meta.get("backbone")
    return None if v is None else str(v)


def _task_of(task: str | None, path: str, run_id: str) -> str:
    if task is None:
        raise ValueError(f"{path}: run {run_id} has no task; record runs with "
                         "al.record(..., task=...) so systems can be paired by task")
    return str(task)


def _traces(traces: TraceInput | Iterable[TraceInput]) -> list[tuple[str, Trace]]:
    """``(path, trace)`` of every trace named (``agentlog._reader.read_traces``)."""
    return [(str(t.path), t) for t in read_traces(traces)]


def _file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ======================================================================= admissibility


@dataclass(frozen=True)
class TargetRadius:
    """The nuisance radius of one pair on one target (a readout or the composite).

    Attributes:
        eps_out: ``ε̂_out`` (eq. 3); ``inf`` when no finite radius exists.
        r: the one-sided radius ``r(δ)`` of Def. 7 (0 in an exact or declared cell).
        tolerance: ``ε_fair`` of the target.
        admissible: ``ε̂_out + r ≤ ε_fair`` and the pair's conditions hold.
        reason: why it is refused, when it is.
        explanation: eq. 3's arithmetic for ``ε̂_out`` (``bounds.nuisance_radius``), when
            it was computed.
    """

    eps_out: float
    r: float
    tolerance: float
    admissible: bool
    reason: str | None = None
    explanation: str | None = None


@dataclass(frozen=True)
class PairAdmissibility:
    """Admissibility of one pair, decided before any score is read.

    Attributes:
        a, b: the systems.
        status: ``"exact"`` (equal entry hashes on every common task), ``"measured"``
            (a declared entry distance), ``"declared"`` (no entries: the plan's
            declarations), ``"refused"`` (no finite radius or a failed condition) or
            ``"insufficient"`` (fewer common tasks than the plan's minimum).
        reason: why, in words.
        n_common: tasks where both systems have an entry (``None`` when declared).
        eps_in: ``(ε̂_in,A, ε̂_in,B)`` against the common entry law.
        r_in: the one-sided radius of the entry mismatch.
        common_entry: which entry law is ``μ``: ``"both"`` (exact), ``"a"``, ``"b"`` or
            ``"declared"``.
        targets: per target, its ``TargetRadius``.
    """

    a: str
    b: str
    status: EntryStatus
    reason: str
    n_common: int | None
    eps_in: tuple[float, float]
    r_in: float
    common_entry: str
    targets: dict[str, TargetRadius]

    def admissible(self, target: str) -> bool:
        return self.status in _OK_STATUS and self.targets[target].admissible

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a, "b": self.b, "status": self.status, "reason": self.reason,
            "n_common": self.n_common, "eps_in": [_j(x) for x in self.eps_in],
            "r_in": _j(self.r_in), "common_entry": self.common_entry,
            "targets": {t: {"eps_out": _j(v.eps_out), "r": _j(v.r),
                            "tolerance": _j(v.tolerance), "admissible": v.admissible,
                            "reason": v.reason, "explanation": v.explanation}
                        for t, v in self.targets.items()},
        }


@dataclass(frozen=True)
class Admissibility:
    """Admissibility of every pair of a family ([LBC] Def. 1, Def. 7).

    Attributes:
        plan_hash: the hash of the plan it was decided under.
        window: the comparison window of the entries (``None`` when declared).
        systems: the systems.
        pairs: one ``PairAdmissibility`` per pair of the family.
        source: ``"entries"`` (derived from sealed entries) or ``"declared"``.
        feature: the entry feature used for a measured mismatch, when any.
        input_hashes: ``path -> SHA-256`` of the trace files the entries come from.
    """

    plan_hash: str
    window: str | None
    systems: tuple[str, ...]
    pairs: tuple[PairAdmissibility, ...]
    source: Literal["entries", "declared"]
    feature: str | None = None
    input_hashes: dict[str, str] = field(default_factory=dict)
    _index: dict[frozenset[str], PairAdmissibility] = field(
        init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {frozenset((p.a, p.b)): p for p in self.pairs})

    def pair(self, a: str, b: str) -> PairAdmissibility:
        try:
            return self._index[frozenset((a, b))]
        except KeyError:
            raise KeyError(f"no admissibility decision for the pair ({a!r}, {b!r}); it was "
                           f"decided over {', '.join(self.systems)}") from None

    def refused(self, target: str = COMPOSITE) -> list[tuple[str, str, str]]:
        """``(a, b, reason)`` of every pair not admissible on ``target``."""
        out = []
        for p in self.pairs:
            if not p.admissible(target):
                out.append((p.a, p.b, p.targets[target].reason or p.reason))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"plan_hash": self.plan_hash, "window": self.window, "source": self.source,
                "feature": self.feature, "systems": list(self.systems),
                "input_hashes": dict(self.input_hashes),
                "pairs": [p.to_dict() for p in self.pairs]}


def _feature_values(obj: Any, path: str) -> Any:
    node: list[Any] = [obj]
    for key in path.split("."):
        nxt: list[Any] = []
        for item in node:
            if isinstance(item, Mapping):
                if key not in item:
                    raise KeyError(key)
                nxt.append(item[key])
            elif isinstance(item, list | tuple) and key.lstrip("-").isdigit():
                nxt.append(item[int(key)])
            elif isinstance(item, list | tuple):
                for sub in item:  # map the key over a list of records
                    if not isinstance(sub, Mapping) or key not in sub:
                        raise KeyError(key)
                    nxt.append(sub[key])
            else:
                raise KeyError(key)
        node = nxt
    return node[0] if len(node) == 1 else node


def _identity(e: Entry, key: str | None, cache: dict[Any, Any]) -> str:
    """The entry's identity: its recorded hash, or the hash of the ``entry_key`` part."""
    if key is None:
        return e.entry_hash
    memo = ("identity", e.entry_hash, key)
    if memo in cache:
        return str(cache[memo])
    if e.entry_bytes is None:
        raise LookupError(f"the entry artifact of run {e.run_id} is not available (only its "
                          "hash), so `entry_key` cannot be re-derived; pass entries with bytes")
    try:
        part = _feature_values(decode(e.entry_bytes), key)
    except (KeyError, IndexError):
        raise LookupError(f"the declared `entry_key` {key!r} does not resolve in the entry of "
                          f"run {e.run_id} ({e.path})") from None
    cache[memo] = hashlib.sha256(encode(part)).hexdigest()
    return str(cache[memo])


def _samples(entries: list[Entry], feature: FeatureFn | str, what: str,
             cache: dict[Any, Any]) -> FloatArray:
    parts: list[FloatArray] = []
    for e in entries:
        memo = ("feature", e.entry_hash, feature if isinstance(feature, str) else id(feature))
        if memo in cache:
            parts.append(cache[memo])
            continue
        if e.entry_bytes is None:
            raise LookupError(f"{what}: the entry artifact of run {e.run_id} is not available "
                              "(only its hash); pass entries with their bytes")
        obj = decode(e.entry_bytes)
        if callable(feature):
            raw = feature(obj)
        else:
            try:
                raw = _feature_values(obj, feature)
            except (KeyError, IndexError):
                raise ValueError(
                    f"{what}: the declared `entry_feature` {feature!r} does not resolve in the "
                    f"decoded entry of run {e.run_id} ({e.path}); top-level keys: "
                    f"{sorted(obj) if isinstance(obj, Mapping) else type(obj).__name__}"
                ) from None
        arr = np.asarray(raw, dtype=np.float64)
        arr = arr.reshape(1) if arr.ndim == 0 else arr
        if arr.size == 0 or not np.isfinite(arr).all():
            raise ValueError(f"{what}: the entry feature of run {e.run_id} must be a non-empty "
                             "finite array of numbers")
        cache[memo] = arr
        parts.append(arr)
    return np.concatenate(parts) if parts[0].ndim == 1 else np.vstack(parts)


def _radii(plan: Plan, window: str | None, a: str, b: str, eps_in: tuple[float, float],
           r_in: float, matched: tuple[bool, bool], cache: dict[Any, Any]
           ) -> dict[str, tuple[float, float, str | None]]:
    """``target -> (ε̂_out, r, explanation)`` by eq. 3 (Theorem 1), for one common entry."""
    from . import bounds

    ca, cb = plan.constants.for_system(a, window), plan.constants.for_system(b, window)
    L_C = plan.constants.channel_constant(window)
    upper_in = (eps_in[0] + (r_in if not matched[0] else 0.0),
                eps_in[1] + (r_in if not matched[1] else 0.0))
    out: dict[str, tuple[float, float, str | None]] = {}
    for name, ro in plan.readouts.items():
        key = (a, b, ro.L_s, ro.eps_protocol, eps_in, upper_in, matched)
        if key not in cache:
            def radius(e_in: tuple[float, float], ro: Any = ro) -> Any:
                return bounds.nuisance_radius(
                    L_s=ro.L_s, L_C=L_C, L_M=(ca["L_M"], cb["L_M"]), eps_in=e_in,
                    xi=(ca["xi"], cb["xi"]), eps_cont=(ca["eps_cont"], cb["eps_cont"]),
                    eps_protocol=ro.eps_protocol, entry_matched=matched)

            res = radius(eps_in)
            est = float(res.value)
            up = est if upper_in == eps_in else float(radius(upper_in).value)
            # eq. 3 is increasing in ε_in, so its value at the upper bound of ε_in bounds it
            r = max(up - est, 0.0) if math.isfinite(up) else math.inf
            cache[key] = (est, r, str(res.explanation))
        out[name] = cache[key]
    w = plan.composite_weights()
    out[COMPOSITE] = (math.fsum(w[n] * out[n][0] for n in w),
                      math.fsum(w[n] * out[n][1] for n in w),
                      "the composite-weighted sum of the readouts' radii (each eq. 3): the "
                      "composite contrast is their weighted mean")
    return out


def _target_radii(plan: Plan, radii: dict[str, tuple[float, float, str | None]],
                  status: EntryStatus, reason: str) -> dict[str, TargetRadius]:
    out: dict[str, TargetRadius] = {}
    for t in plan.targets:
        tol = plan.tolerance(t)
        if status not in _OK_STATUS:
            out[t] = TargetRadius(math.inf if status == "refused" else math.nan,
                                  math.nan, tol, False, reason)
            continue
        eps, r, how = radii[t]
        total = eps + r
        if not math.isfinite(total):
            out[t] = TargetRadius(eps, r, tol, False,
                                  f"no finite nuisance radius on `{t}` (eq. 3)", how)
        elif total > tol:
            out[t] = TargetRadius(eps, r, tol, False,
                                  f"ε̂_out + r = {total:.4g} > ε_fair = {tol:.4g} on `{t}` "
                                  "([LBC] Def. 7)", how)
        else:
            out[t] = TargetRadius(eps, r, tol, True, None, how)
    return out


def _decide_pair(plan: Plan, table: EntryTable | None, a: str, b: str, m: int,
                 feature: FeatureFn | str | None, cache: dict[Any, Any]) -> PairAdmissibility:
    window = table.window if table is not None else plan.window
    cond = plan.conditions

    def refuse(reason: str, n_common: int | None = None,
               status: EntryStatus = "refused") -> PairAdmissibility:
        return PairAdmissibility(a, b, status, reason, n_common, (math.nan, math.nan),
                                 math.nan, "none", _target_radii(plan, {}, status, reason))

    def admit(status: EntryStatus, reason: str, n_common: int | None,
              eps: tuple[float, float], r_in: float, mu: str) -> PairAdmissibility:
        if mu == "both" or mu == "declared":
            matched = ((eps[0] == 0.0, eps[1] == 0.0) if mu == "declared" else (True, True))
            fixed = _radii(plan, window, a, b, eps, r_in, matched, cache)
            return PairAdmissibility(a, b, status, reason, n_common, eps, r_in, mu,
                                     _target_radii(plan, fixed, status, reason))
        # A measured mismatch: μ = μ_B charges A, μ = μ_A charges B (Theorem 1 holds for
        # every μ, and the choice reads no score), or the system the plan names.
        w = eps[0]
        options = {"b": ((w, 0.0), (False, True)), "a": ((0.0, w), (True, False))}
        if cond.common_entry == a:
            options = {"a": options["a"]}
        elif cond.common_entry == b:
            options = {"b": options["b"]}
        per_choice = {k: _radii(plan, window, a, b, e, r_in, mt, cache)
                      for k, (e, mt) in options.items()}
        radii: dict[str, tuple[float, float, str | None]] = {}
        chosen: dict[str, str] = {}
        for t in plan.targets:
            k = min(per_choice, key=lambda c: per_choice[c][t][0] + per_choice[c][t][1])
            radii[t] = per_choice[k][t]
            chosen[t] = k
        mu_main = chosen[plan.target]
        return PairAdmissibility(a, b, status, reason, n_common, options[mu_main][0], r_in,
                                 mu_main, _target_radii(plan, radii, status, reason))

    if not cond.assumption_1:
        return refuse("the plan does not declare Assumption 1 (every effect of the entry "
                      "passes through the window; [LBC] Def. 1)")
    if table is None:
        if cond.shared_entry:
            return admit("declared", "the plan declares one shared entry (no entries given: "
                         "declared, not re-derived)", None, (0.0, 0.0), 0.0, "declared")
        ea = plan.constants.for_system(a, window)["eps_in"]
        eb = plan.constants.for_system(b, window)["eps_in"]
        if ea is None or eb is None:
            lacking = a if ea is None else b
            return refuse(f"no entries were given and the plan declares no `eps_in` for "
                          f"{lacking!r}; pass traces or an EntryTable, declare "
                          "`conditions.shared_entry`, or declare `constants.systems."
                          f"{lacking}.eps_in`")
        return admit("declared", "entry mismatch declared in the plan", None,
                     (float(ea), float(eb)), 0.0, "declared")

    ta, tb = table.by_task(a), table.by_task(b)
    common = sorted(set(ta) & set(tb))
    if cond.backbone == "fixed":
        bones = {e.backbone for t in common for e in ta[t] + tb[t]}
        if None in bones:
            who = a if any(e.backbone is None for t in common for e in ta[t]) else b
            return refuse(f"the plan declares the backbone fixed, but runs of {who!r} record "
                          "no meta['backbone']; record it, or declare backbone = "
                          "\"part-of-system\"", len(common))
        if len(bones) > 1:
            ba = sorted({str(e.backbone) for t in common for e in ta[t]})
            bb = sorted({str(e.backbone) for t in common for e in tb[t]})
            return refuse(
                f"backbone change: {a!r} runs {', '.join(ba)} and {b!r} runs "
                f"{', '.join(bb)} inside window `{window}`, while the plan declares the "
                "backbone fixed (a scaffold window); the backbone lies outside the window, "
                "so eq. 3 has no finite radius ([LBC] §6.2)", len(common))
    if len(common) < plan.min_common_tasks:
        return refuse(f"{len(common)} common tasks with entries into `{window}` < "
                      f"min_common_tasks = {plan.min_common_tasks}", len(common),
                      status="insufficient")
    key = cond.entry_key
    try:
        differ = [t for t in common
                  if len({_identity(e, key, cache) for e in ta[t]}
                         | {_identity(e, key, cache) for e in tb[t]}) > 1]
    except LookupError as exc:
        return refuse(str(exc), len(common))
    n = len(common)
    what = "entry hashes" if key is None else f"entries' `{key}` bytes"
    if not differ:
        return admit("exact", f"{what} equal on {n} of {n} common tasks: exact cell, "
                     "ε_in = 0 and r = 0 ([LBC] §6.1)", n, (0.0, 0.0), 0.0, "both")
    if cond.shared_entry:
        return refuse(f"the plan declares one shared entry, but the {what} differ on "
                      f"{len(differ)} of {n} common tasks (first: {differ[0]!r})", n)
    feat = feature if feature is not None else cond.entry_feature
    if feat is None:
        return refuse(f"entries differ on {len(differ)} of {n} common tasks (first: "
                      f"{differ[0]!r}) and the plan declares no `entry_feature` to measure "
                      "the mismatch ([LBC] Def. 7)", n)
    from . import distance

    bound = plan.constants.distance_bound
    dist = np.zeros(n)
    differing = set(differ)
    for i, t in enumerate(common):
        if t not in differing:
            continue
        try:
            xa = _samples(ta[t], feat, f"system {a!r}, task {t!r}", cache)
            xb = _samples(tb[t], feat, f"system {b!r}, task {t!r}", cache)
        except LookupError as exc:
            return refuse(str(exc), n)
        dist[i] = float(distance.wasserstein(xa, xb, p=1))
        if dist[i] > bound * (1 + 1e-12):
            return refuse(f"the entry distance on task {t!r} is {dist[i]:.4g}, above the "
                          f"declared `distance_bound` {bound:g}; the Hoeffding radius needs a "
                          "bounded distance", n)
    eps = float(dist.mean())
    r_in = bound * math.sqrt(math.log(m / plan.delta) / (2.0 * n))
    return admit("measured", f"entries differ on {len(differ)} of {n} common tasks; mean "
                 f"W1 of `{feat if isinstance(feat, str) else _name(feat)}` = {eps:.4g}, "
                 f"Hoeffding r_in = {r_in:.4g} at δ/m = {plan.delta / m:.3g}", n,
                 (eps, 0.0), r_in, "min")


def _name(fn: Any) -> str:
    return f"callable:{getattr(fn, '__qualname__', type(fn).__name__)}"


def admissibility(
    traces_or_entries: EntryTable | TraceInput | Iterable[TraceInput] | None,
    *,
    plan: Plan,
    window: str | None = None,
    feature: FeatureFn | None = None,
    systems: Sequence[str] | None = None,
) -> Admissibility:
    """Decide which pairs may be compared, before any score is read ([LBC] Def. 1/7).

    It takes no scores: the decision depends on the plan and on the sealed entries only.

    Args:
        traces_or_entries: an ``EntryTable`` (e.g. ``CertifyData.entries``), trace paths, a
            folder, ``Trace`` objects — or ``None`` to decide from the plan's declarations
            alone (``conditions.shared_entry`` or declared ``eps_in``).
        plan: the certification plan.
        window: the comparison window (default ``plan.window``).
        feature: a function of the decoded entry artifact returning the numbers whose
            empirical distribution is compared (overrides ``conditions.entry_feature``).
        systems: the systems to decide over (default: every system with entries; required
            with ``None`` entries).

    Returns:
        ``Admissibility`` with one ``PairAdmissibility`` per pair of the plan's family.
    """
    if not isinstance(plan, Plan):
        raise TypeError(f"`plan` must be a certify.Plan; found {type(plan).__name__}")
    table: EntryTable | None
    if traces_or_entries is None:
        table = None
        if systems is None:
            raise ValueError("`systems` is required when no entries are given")
    elif isinstance(traces_or_entries, EntryTable):
        table = traces_or_entries
        if window is not None and table.window is not None and window != table.window:
            raise ValueError(f"`window` is {window!r} but the entries are of window "
                             f"{table.window!r}")
    else:
        if hasattr(traces_or_entries, "scores") and hasattr(traces_or_entries, "entries"):
            raise TypeError("pass `data.entries` (an EntryTable), not the CertifyData that "
                            "also holds scores: admissibility never sees a score")
        win = window if window is not None else plan.window
        if win is None:
            raise ValueError("`window` is needed to read entries from traces: pass window= "
                             "or declare `window` in the plan")
        table = EntryTable.from_traces(traces_or_entries, window=win, select=plan.select)
    if systems is not None:
        names = tuple(str(s) for s in systems)
    else:
        assert table is not None  # `systems` is required without entries (checked above)
        names = table.systems
    if len(names) < 2:
        raise ValueError(f"admissibility needs at least two systems; found {list(names)}")
    pairs = plan.family_pairs(list(names))
    cache: dict[Any, Any] = {}
    decided = tuple(_decide_pair(plan, table, a, b, len(pairs), feature, cache)
                    for a, b in pairs)
    feat = (None if table is None else _name(feature) if feature is not None
            else plan.conditions.entry_feature)
    return Admissibility(plan_hash=plan.hash(), window=table.window if table else plan.window,
                         systems=names, pairs=decided,
                         source="declared" if table is None else "entries", feature=feat,
                         input_hashes=dict(table.input_hashes) if table is not None else {})


_admissibility = admissibility  # certify() takes a keyword of the same name


# ======================================================================= from traces


@dataclass(frozen=True, eq=False)
class CertifyData:
    """Scores and entries of a set of traces, arranged for ``certify`` and ``admissibility``.

    Attributes:
        systems: the systems (sorted).
        tasks: the tasks (sorted); every array's task axis follows it.
        clusters: the cluster of each task (``meta["cluster"]``, default the task).
        readouts: the plan's readouts (the column order of ``scores``).
        scores: ``system -> (n_tasks, n_readouts)`` mean score over the system's runs of
            the task (NaN where the system has no run, or failed every run under ``drop``).
        present: ``system -> bool (n_tasks,)``: the system ran the task.
        failed: ``system -> bool (n_tasks,)``: every run failed (declared failure exit).
        entries: the sealed entries of the plan's window (``None`` without a window).
        input_hashes: ``path -> SHA-256`` of every input trace file.
        n_runs: runs used; n_failed_runs: of which failed.
    """

    systems: tuple[str, ...]
    tasks: tuple[str, ...]
    clusters: tuple[str, ...]
    readouts: tuple[str, ...]
    scores: dict[str, FloatArray]
    present: dict[str, BoolArray]
    failed: dict[str, BoolArray]
    entries: EntryTable | None
    input_hashes: dict[str, str]
    n_runs: int
    n_failed_runs: int


def from_traces(paths: TraceInput | Iterable[TraceInput], *, plan: Plan,
                window: str | None = None) -> CertifyData:
    """Build ``certify``'s inputs from recorded traces.

    Runs are grouped by ``system`` (``al.record(system=)``), ``task`` and cluster
    (``meta["cluster"]``, default the task); only runs matching ``plan.select`` are used. A
    readout's value in a run is the mean of that run's ``Score`` records of that name (and
    channel, when the plan names one); a task's value is the mean over the system's runs.
    A run failed when it did not end, ended with an exception, or its comparison window
    failed (⊥): under ``failure.policy = "drop"`` failed runs are left out and a task fails
    when every run did; under ``"score"`` a failed run scores the declared ⊥ value. A run
    that ended normally but lacks a readout is an error.

    Args:
        paths: trace files, folders (every ``*.zst`` below) or ``Trace`` objects.
        plan: the plan (readouts, select, failure policy, window).
        window: the comparison window (default ``plan.window``); its entries are collected.

    Returns:
        ``CertifyData``; pass it to ``certify.certify`` and its ``entries`` to
        ``certify.admissibility``.
    """
    if not isinstance(plan, Plan):
        raise TypeError(f"`plan` must be a certify.Plan; found {type(plan).__name__}")
    win = window if window is not None else plan.window
    readouts = plan.readout_names
    loaded = _traces(paths)
    hashes = {p: _file_sha256(p) for p, _ in loaded}
    # (system, task) -> list of per-run readout vectors (None = failed run)
    cells: dict[tuple[str, str], list[FloatArray | None]] = {}
    cluster_of: dict[str, str] = {}
    n_runs = n_failed = 0
    for path, trace in loaded:
        by_run: dict[int, dict[str, list[float]]] = {}
        for rec in trace.scores():
            ro = plan.readouts.get(rec.name)
            if ro is None or (ro.channel is not None and rec.channel != ro.channel):
                continue
            by_run.setdefault(rec.run, {}).setdefault(rec.name, []).append(float(rec.value))
        for run in trace.runs:
            start = run.start
            if start is None or not plan.matches(start.meta):
                continue
            task = _task_of(start.task, path, start.run_id)
            cluster = str(start.meta.get("cluster", task))
            if cluster_of.setdefault(task, cluster) != cluster:
                raise ValueError(f"{path}: task {task!r} is in cluster {cluster!r} here but in "
                                 f"{cluster_of[task]!r} in another run; a task has one cluster")
            n_runs += 1
            failed = (not run.complete or run.failed
                      or (win is not None and any(w.failed for w in run.windows
                                                  if w.name == win)))
            got = by_run.get(run.run, {})
            if failed:
                n_failed += 1
                vec: FloatArray | None = None
            else:
                missing = [n for n in readouts if n not in got]
                if missing:
                    raise ValueError(
                        f"{path}: run {start.run_id} (system {start.system!r}, task {task!r}) "
                        f"ended normally but has no score for readout(s) {missing}; record "
                        "them with al.score(...) or remove them from the plan")
                vec = np.array([np.mean(got[n]) for n in readouts])
                if not np.isfinite(vec).all():
                    raise ValueError(f"{path}: run {start.run_id} scored a non-finite value "
                                     f"({dict(zip(readouts, vec.tolist(), strict=True))})")
            cells.setdefault((start.system, task), []).append(vec)
    if not cells:
        sel = f" matching select = {dict(plan.select)}" if plan.select else ""
        raise ValueError(f"no run{sel} in {len(loaded)} trace file(s)")
    systems = tuple(sorted({s for s, _ in cells}))
    tasks = tuple(sorted({t for _, t in cells}))
    tindex = {t: i for i, t in enumerate(tasks)}
    bottom = (np.array([plan.failure_value(n) for n in readouts])
              if plan.failure.policy == "score" else None)
    scores = {s: np.full((len(tasks), len(readouts)), np.nan) for s in systems}
    present = {s: np.zeros(len(tasks), dtype=bool) for s in systems}
    failed_mask = {s: np.zeros(len(tasks), dtype=bool) for s in systems}
    for (s, t), runs in cells.items():
        i = tindex[t]
        present[s][i] = True
        ok = [v for v in runs if v is not None]
        if bottom is not None:
            scores[s][i] = np.mean([v if v is not None else bottom for v in runs], axis=0)
        elif ok:
            scores[s][i] = np.mean(ok, axis=0)
        else:
            failed_mask[s][i] = True
    entries = (EntryTable.from_traces([tr for _, tr in loaded], window=win, select=plan.select)
               if win is not None else None)
    if entries is not None:  # a Trace's path may differ from how the caller named the file
        entries = EntryTable(window=entries.window, entries=entries.entries,
                             input_hashes=dict(hashes))
    return CertifyData(systems=systems, tasks=tasks,
                       clusters=tuple(cluster_of[t] for t in tasks), readouts=readouts,
                       scores=scores, present=present, failed=failed_mask, entries=entries,
                       input_hashes=hashes, n_runs=n_runs, n_failed_runs=n_failed)


# ======================================================================= the board


@dataclass(frozen=True)
class PairDecision:
    """The decision on one pair and target.

    Attributes:
        a, b: the pair, in family order.
        target: ``"composite"`` or a readout.
        decision: ``"certified"``, ``"undecided-sampling"``, ``"undecided-attribution"``,
            ``"refused"`` or ``"not-enough-common-tasks"``.
        better, worse: the certified order (``None`` unless certified).
        delta: ``Δ̂ = mean(y_A − y_B)`` over the common tasks, oriented so that a positive
            value favours ``a`` (a lower-is-better readout is negated).
        se: the CR1 standard error; q: the Bonferroni t(G−1) sampling radius.
        eps_out, r: the nuisance radius and its one-sided radius (Def. 7).
        tolerance: ``ε_fair``.
        n_tasks, n_clusters: the common tasks and their clusters.
        margin: ``|Δ̂| / (q + ε̂_out + r)``; certified iff > 1.
        reason: why the pair is refused, not decided or undecided.
    """

    a: str
    b: str
    target: str
    decision: Decision
    better: str | None
    worse: str | None
    delta: float
    se: float
    q: float
    eps_out: float
    r: float
    tolerance: float
    n_tasks: int
    n_clusters: int
    margin: float
    reason: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "target": self.target, "decision": self.decision,
                "better": self.better, "worse": self.worse, "delta": _j(self.delta),
                "se": _j(self.se), "q": _j(self.q), "eps_out": _j(self.eps_out),
                "r": _j(self.r), "tolerance": _j(self.tolerance), "n_tasks": self.n_tasks,
                "n_clusters": self.n_clusters, "margin": _j(self.margin),
                "reason": self.reason}


@dataclass(frozen=True)
class LadderRung:
    """One rule of the conventional ladder ([LBC] Table 2).

    Attributes:
        rule: ``"R0"`` … ``"R5"``; label: its name in Table 2; adds: what it adds.
        decided: pairs the rule orders; out_of: the pairs it is counted over (the family for
            R0–R3, the admissible pairs for R4–R5). R0 compares each system's mean over its
            own tasks; R1 is the paired t-test (t(n−1)), R2 the CR1 t (t(G−1)), both at
            ``δ′``; R3 divides ``δ′`` by the family size. R1–R3 ask only for two tasks
            (clusters): the minimum number of common tasks belongs to the certificate.
        pairs: the orders it concludes, ``(better, worse)``.
    """

    rule: str
    label: str
    adds: str
    decided: int
    out_of: int
    pairs: tuple[tuple[str, str], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "label": self.label, "adds": self.adds,
                "decided": self.decided, "out_of": self.out_of,
                "pairs": [list(p) for p in self.pairs]}


@dataclass(frozen=True)
class LeaveOneOut:
    """The board's target certified with one cluster left out (Appendix F.5)."""

    cluster: str
    certified: int
    jaccard: float
    flips: int
    winners: tuple[str, ...]
    winner_flip: bool


@dataclass(frozen=True)
class CalibrationResult:
    """Calibration and stability of the decision rule ([LBC] Appendix F.5).

    Attributes:
        n_resamples, seed: the sign-flip draws (one ±1 per cluster per draw, shared by every
            pair and target) and their seed.
        nominal: ``δ′``.
        family_rate: the board target's family-wise false-certification rate: the share of
            draws in which any pair of the family is certified on the centred, sign-flipped
            differences.
        mc_se: its Monte Carlo standard error.
        rates: the family-wise rate of every target.
        c_star: the radius scale at which the target's rate equals ``δ′`` (``c*`` > 1: the
            rule is anti-conservative and would need ``c*`` times its radius).
        c_star_by_target: ``c*`` of every target.
        drops: certified relations of the target whose margin is ≤ ``c*`` (those ``c*``
            would remove).
        jaccard_mean, jaccard_min: leave-one-cluster-out overlap of the certified set.
        flips: certified relations reversed when one cluster is left out (summed).
        winner_flips: left-out clusters after which no system that could be first on the
            full board can be first any more.
        leave_one_out: per left-out cluster.
    """

    n_resamples: int
    seed: int
    nominal: float
    family_rate: float
    mc_se: float
    rates: dict[str, float]
    c_star: float
    c_star_by_target: dict[str, float]
    drops: tuple[tuple[str, str], ...]
    jaccard_mean: float
    jaccard_min: float
    flips: int
    winner_flips: int
    leave_one_out: tuple[LeaveOneOut, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_resamples": self.n_resamples, "seed": self.seed, "nominal": self.nominal,
            "family_rate": _j(self.family_rate), "mc_se": _j(self.mc_se),
            "rates": {k: _j(v) for k, v in self.rates.items()},
            "c_star": _j(self.c_star),
            "c_star_by_target": {k: _j(v) for k, v in self.c_star_by_target.items()},
            "drops": [list(p) for p in self.drops],
            "jaccard_mean": _j(self.jaccard_mean), "jaccard_min": _j(self.jaccard_min),
            "flips": self.flips, "winner_flips": self.winner_flips,
            "leave_one_out": [{"cluster": lo.cluster, "certified": lo.certified,
                               "jaccard": _j(lo.jaccard), "flips": lo.flips,
                               "winners": list(lo.winners), "winner_flip": lo.winner_flip}
                              for lo in self.leave_one_out],
        }


@dataclass(frozen=True, eq=False)
class Board:
    """A certified leaderboard ([LBC] §6.1, Figure 1, Tables 1–2, Table 16).

    Attributes:
        systems: the systems, best first by their mean on the board's target.
        target: the target the board ranks (``"composite"`` or a readout).
        targets: every target decided (the composite, then each readout).
        scores: ``system -> target -> mean`` over the system's tasks (readouts in their own
            units; the composite is the equal-axis mean of oriented readouts).
        n_tasks: ``system -> tasks`` scored.
        decisions: ``target -> one PairDecision per pair of the family``.
        ranks: ``target -> RankIntervals`` of its certified relation.
        ladder: R0–R5 on the board's target (Table 2).
        calibration: Appendix F.5, when computed.
        admissibility: the decision it used.
        plan: the plan; plan_hash: its hash.
        input_hashes: ``path -> SHA-256`` of every input trace (empty for arrays).
        scores_hash: SHA-256 over the score arrays, masks and clusters used.
        family_size: ``m``; n_clusters: clusters over all tasks.
    """

    systems: tuple[str, ...]
    target: str
    targets: tuple[str, ...]
    scores: dict[str, dict[str, float]]
    n_tasks: dict[str, int]
    decisions: dict[str, tuple[PairDecision, ...]]
    ranks: dict[str, RankIntervals]
    ladder: tuple[LadderRung, ...]
    calibration: CalibrationResult | None
    admissibility: Admissibility
    plan: Plan
    plan_hash: str
    input_hashes: dict[str, str]
    scores_hash: str
    family_size: int
    n_clusters: int

    @property
    def pairs(self) -> tuple[PairDecision, ...]:
        """The decisions on the board's target."""
        return self.decisions[self.target]

    def decision(self, a: str, b: str, target: str | None = None) -> PairDecision:
        """The decision on the pair ``{a, b}`` (either order) for ``target``."""
        for p in self.decisions[target or self.target]:
            if {p.a, p.b} == {a, b}:
                return p
        raise KeyError(f"the pair ({a!r}, {b!r}) is not in the plan's family")

    def certified(self, target: str | None = None) -> list[tuple[str, str]]:
        """Certified ``(better, worse)`` relations, sorted."""
        return sorted((p.better, p.worse) for p in self.decisions[target or self.target]
                      if p.better is not None and p.worse is not None)

    def rank(self, system: str, target: str | None = None) -> tuple[int, int]:
        """The certified rank interval of ``system``."""
        return self.ranks[target or self.target].intervals[system]

    def counts(self, target: str | None = None) -> dict[str, int]:
        """How many pairs got each decision."""
        out = dict.fromkeys(("certified", "undecided-sampling", "undecided-attribution",
                             "refused", "not-enough-common-tasks"), 0)
        for p in self.decisions[target or self.target]:
            out[p.decision] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able summary (non-finite numbers become ``None``)."""
        rank = self.ranks[self.target]
        return {
            "version": 1,
            "target": self.target,
            "targets": list(self.targets),
            "readouts": list(self.plan.readout_names),
            "plan_hash": self.plan_hash,
            "plan": self.plan.model_dump(mode="json"),
            "input_hashes": dict(self.input_hashes),
            "scores_hash": self.scores_hash,
            "family_size": self.family_size,
            "n_clusters": self.n_clusters,
            "systems": [{"system": s, "rank": list(rank.intervals[s]),
                         "pinned": rank.pinned(s), "n_tasks": self.n_tasks[s],
                         "composite": _j(self.scores[s][COMPOSITE]),
                         "scores": {t: _j(v) for t, v in self.scores[s].items()
                                    if t != COMPOSITE}}
                        for s in self.systems],
            "counts": self.counts(),
            "pairs": [p.to_dict() for p in self.pairs],
            "cells": {t: [p.to_dict() for p in self.decisions[t]]
                      for t in self.targets if t != self.target},
            "ranks": {t: r.to_dict() for t, r in self.ranks.items()},
            "cycles": [list(c) for c in rank.cycles],
            "ladder": [r.to_dict() for r in self.ladder],
            "calibration": self.calibration.to_dict() if self.calibration else None,
            "admissibility": self.admissibility.to_dict(),
        }


def _j(x: float | None) -> float | None:
    if x is None:
        return None
    return float(x) if math.isfinite(x) else None


# ----------------------------------------------------------------------- validation


@dataclass(frozen=True)
class _Inputs:
    systems: tuple[str, ...]
    y: FloatArray  # (S, N, R) raw scores
    present: BoolArray  # (S, N)
    failed: BoolArray  # (S, N)
    clusters: tuple[str, ...]  # unique labels
    codes: IntArray  # (N,)
    tasks: tuple[str, ...]
    input_hashes: dict[str, str]
    entries: EntryTable | None


def _system_matrix(system: str, value: Any, readouts: tuple[str, ...]) -> FloatArray:
    if isinstance(value, Mapping):
        extra = [k for k in value if k not in readouts]
        missing = [k for k in readouts if k not in value]
        if missing or extra:
            raise ValueError(f"`scores[{system!r}]` must map exactly the plan's readouts "
                             f"{list(readouts)}; missing {missing}, unknown {extra}")
        cols = [np.asarray(value[k], dtype=np.float64) for k in readouts]
        if any(c.ndim != 1 for c in cols) or len({c.shape for c in cols}) != 1:
            raise ValueError(f"`scores[{system!r}]` must hold one 1-D array per readout, all "
                             "of the same length")
        return np.column_stack(cols)
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`scores[{system!r}]` must be an array of numbers; {exc}") from None
    if arr.ndim == 1 and len(readouts) == 1:
        return arr[:, None]
    if arr.ndim == 2 and arr.shape[1] == len(readouts):
        return arr
    raise ValueError(f"`scores[{system!r}]` must have shape (n_tasks, {len(readouts)}) — one "
                     f"column per readout {list(readouts)}"
                     + (" — or (n_tasks,)" if len(readouts) == 1 else "")
                     + f"; found shape {arr.shape}")


def _mask(name: str, value: Mapping[str, ArrayLike] | None, systems: tuple[str, ...], n: int,
          default: bool) -> BoolArray:
    out = np.full((len(systems), n), default)
    if value is None:
        return out
    if not isinstance(value, Mapping):
        raise ValueError(f"`{name}` must map system -> boolean array over tasks")
    for k in value:
        if k not in systems:
            raise ValueError(f"`{name}` names system {k!r}, which has no scores")
    for i, s in enumerate(systems):
        if s in value:
            arr = np.asarray(value[s])
            if arr.shape != (n,) or arr.dtype != np.bool_:
                raise ValueError(f"`{name}[{s!r}]` must be a boolean array of shape ({n},); "
                                 f"found {arr.dtype} {arr.shape}")
            out[i] = arr
    return out


def _certify_iv(scores: Any, clusters: Any, plan: Any, tasks: Any, present: Any, failed: Any,
                input_hashes: Any) -> _Inputs:
    if not isinstance(plan, Plan):
        raise TypeError(f"`plan` must be a certify.Plan (Plan.from_toml(...)); found "
                        f"{type(plan).__name__}")
    readouts = plan.readout_names
    entries: EntryTable | None = None
    if isinstance(scores, CertifyData):
        for name, v in (("clusters", clusters), ("tasks", tasks), ("present", present),
                        ("failed", failed), ("input_hashes", input_hashes)):
            if v is not None:
                raise ValueError(f"`{name}` comes from the CertifyData; do not pass it too")
        if scores.readouts != readouts:
            raise ValueError(f"the CertifyData holds readouts {list(scores.readouts)} but the "
                             f"plan names {list(readouts)}; rebuild it with this plan")
        data = scores
        scores, clusters, tasks = data.scores, list(data.clusters), list(data.tasks)
        present, failed, input_hashes = data.present, data.failed, data.input_hashes
        entries = data.entries
    if not isinstance(scores, Mapping) or len(scores) < 2:
        raise ValueError("`scores` must map at least two systems to their scores over tasks")
    systems = tuple(str(s) for s in scores)
    mats = [_system_matrix(s, scores[s], readouts) for s in systems]
    n = mats[0].shape[0]
    for s, m in zip(systems, mats, strict=True):
        if m.shape[0] != n:
            raise ValueError(f"`scores[{s!r}]` has {m.shape[0]} tasks but "
                             f"`scores[{systems[0]!r}]` has {n}; every system's array runs "
                             "over the same tasks (mark absent ones in `present`)")
    if n == 0:
        raise ValueError("`scores` holds no task")
    if clusters is None:
        raise ValueError("`clusters` is required: one cluster label per task (the task "
                         "itself when tasks are independent)")
    uniq, codes = _codes(clusters, "clusters", n)
    task_labels = tuple(str(t) for t in tasks) if tasks is not None else tuple(
        str(i) for i in range(n))
    if len(task_labels) != n or len(set(task_labels)) != n:
        raise ValueError(f"`tasks` must hold {n} unique labels; found {len(task_labels)} "
                         f"({len(set(task_labels))} unique)")
    pres = _mask("present", present, systems, n, True)
    fail = _mask("failed", failed, systems, n, False)
    y = np.stack(mats)
    used = pres & ~fail
    bad = used[:, :, None] & ~np.isfinite(y)
    if bad.any():
        si, ti, ri = (int(v) for v in np.argwhere(bad)[0])
        raise ValueError(
            f"`scores[{systems[si]!r}]` is {y[si, ti, ri]} at task {task_labels[ti]!r} (readout "
            f"`{readouts[ri]}`); a score must be finite. Mark a failed task in `failed` or an "
            "absent one in `present` — a NaN is never read as either")
    return _Inputs(systems, y, pres, fail, tuple(uniq), codes, task_labels,
                   dict(input_hashes or {}), entries)


def _scores_hash(inp: _Inputs, readouts: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for part in (inp.systems, inp.tasks, readouts, tuple(inp.clusters[c] for c in inp.codes)):
        h.update(repr(part).encode())
    for arr in (np.where(inp.present[:, :, None] & ~inp.failed[:, :, None], inp.y, 0.0),
                inp.present, inp.failed):
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()


# ----------------------------------------------------------------------- the rule


@dataclass(frozen=True)
class _Cells:
    """Everything per (pair, target) cell, flattened to ``K = P · T`` rows."""

    pairs: list[tuple[int, int]]
    targets: tuple[str, ...]
    d: FloatArray  # (K, N)
    mask: BoolArray  # (K, N)
    mo: _Moments
    tq: FloatArray  # (K,) t quantile
    q: FloatArray
    rad: FloatArray  # ε̂_out + r
    eps: FloatArray
    r: FloatArray
    tol: FloatArray
    admissible: BoolArray
    ok: BoolArray  # admissible, enough tasks, G ≥ 2


def _values(plan: Plan, inp: _Inputs) -> tuple[FloatArray, BoolArray]:
    """``(S, N, T)`` oriented target values and the ``(S, N)`` used-task mask."""
    orient = np.array([plan.orientation()[n] for n in plan.readout_names])
    y = inp.y.copy()
    if plan.failure.policy == "score":
        bottom = np.array([plan.failure_value(n) for n in plan.readout_names])
        y = np.where(inp.failed[:, :, None], bottom[None, None, :], y)
        used = inp.present.copy()
    else:
        used = inp.present & ~inp.failed
    y = np.where(used[:, :, None], y, 0.0) * orient
    w = plan.composite_weights()
    comp = y @ np.array([w[n] for n in plan.readout_names])
    return np.concatenate([comp[:, :, None], y], axis=2), used


def _cells(plan: Plan, inp: _Inputs, adm: Admissibility, pairs: list[tuple[int, int]],
           values: FloatArray, used: BoolArray) -> _Cells:
    targets = plan.targets
    T, N = len(targets), values.shape[1]
    ia = np.array([a for a, _ in pairs], dtype=np.intp)
    ib = np.array([b for _, b in pairs], dtype=np.intp)
    d = (values[ia] - values[ib]).transpose(0, 2, 1).reshape(-1, N)  # (P·T, N)
    mask = np.repeat(used[ia] & used[ib], T, axis=0)
    mo = _moments(d, mask, _onehot(inp.codes, len(inp.clusters)))
    m = len(pairs)
    tq = _t_quantiles(1.0 - plan.delta_prime / (2.0 * m), mo.g)
    eps = np.empty(len(pairs) * T)
    r = np.empty_like(eps)
    tol = np.empty_like(eps)
    adm_ok = np.empty(eps.shape, dtype=bool)
    for p, (a, b) in enumerate(pairs):
        pa = adm.pair(inp.systems[a], inp.systems[b])
        for t, name in enumerate(targets):
            tr = pa.targets[name]
            k = p * T + t
            eps[k], r[k], tol[k] = tr.eps_out, tr.r, tr.tolerance
            adm_ok[k] = pa.admissible(name)
    with np.errstate(invalid="ignore"):
        q = tq * mo.se
        rad = eps + r
    ok = adm_ok & (mo.n >= plan.min_common_tasks) & (mo.g >= 2)
    return _Cells(pairs, targets, d, mask, mo, tq, q, rad, eps, r, tol, adm_ok, ok)


def _decisions(plan: Plan, inp: _Inputs, adm: Admissibility, c: _Cells
               ) -> dict[str, tuple[PairDecision, ...]]:
    T = len(c.targets)
    out: dict[str, list[PairDecision]] = {t: [] for t in c.targets}
    for p, (ia, ib) in enumerate(c.pairs):
        a, b = inp.systems[ia], inp.systems[ib]
        pa = adm.pair(a, b)
        for t, name in enumerate(c.targets):
            k = p * T + t
            n, g = int(c.mo.n[k]), int(c.mo.g[k])
            delta, q, rad = float(c.mo.mean[k]), float(c.q[k]), float(c.rad[k])
            better = worse = None
            reason: str | None
            decision: Decision
            margin = math.nan
            if not pa.admissible(name):
                decision = "refused"
                reason = pa.targets[name].reason or pa.reason
                if pa.status == "insufficient":
                    decision = "not-enough-common-tasks"
            elif n < plan.min_common_tasks:
                decision = "not-enough-common-tasks"
                reason = (f"{n} common tasks < min_common_tasks = {plan.min_common_tasks}"
                          + (" (failed tasks dropped)" if plan.failure.policy == "drop"
                             else ""))
            elif g < 2:
                decision = "not-enough-common-tasks"
                reason = (f"the {n} common tasks fall in {g} cluster; the cluster-robust "
                          "radius needs at least 2")
            else:
                total = q + rad
                margin = abs(delta) / total if total > 0 else (math.inf if delta else 0.0)
                if abs(delta) > total:
                    decision = "certified"
                    better, worse = (a, b) if delta > 0 else (b, a)
                    reason = None
                elif rad > 0 and abs(delta) <= rad:
                    decision = "undecided-attribution"
                    reason = (f"|Δ̂| = {abs(delta):.4g} lies within the nuisance radius "
                              f"ε̂_out + r = {rad:.4g}: more tasks alone cannot certify it")
                else:
                    decision = "undecided-sampling"
                    reason = (f"|Δ̂| = {abs(delta):.4g} ≤ q + ε̂_out + r = {total:.4g}; the "
                              "sampling radius q prevents certification")
            out[name].append(PairDecision(
                a=a, b=b, target=name, decision=decision, better=better, worse=worse,
                delta=delta, se=float(c.mo.se[k]), q=q, eps_out=float(c.eps[k]),
                r=float(c.r[k]), tolerance=float(c.tol[k]), n_tasks=n, n_clusters=g,
                margin=margin, reason=reason))
    return {t: tuple(v) for t, v in out.items()}


def _ladder(plan: Plan, inp: _Inputs, c: _Cells, values: FloatArray, used: BoolArray,
            decisions: tuple[PairDecision, ...], adm: Admissibility) -> tuple[LadderRung, ...]:
    t = plan.targets.index(plan.target)
    T = len(plan.targets)
    rows = np.arange(len(c.pairs)) * T + t
    names = inp.systems
    with np.errstate(invalid="ignore", divide="ignore"):
        means = (values[:, :, t] * used).sum(axis=1) / used.sum(axis=1)
    d, mask = c.d[rows], c.mask[rows]
    n = mask.sum(axis=1).astype(np.float64)
    mean = c.mo.mean[rows]
    with np.errstate(invalid="ignore", divide="ignore"):
        var = (np.where(mask, d - mean[:, None], 0.0) ** 2).sum(axis=1) / (n - 1.0)
        se_iid = np.sqrt(var / n)
    t1 = _t_quantiles(1 - plan.delta_prime / 2, n)  # t(n − 1): the iid paired t-test
    t2 = _t_quantiles(1 - plan.delta_prime / 2, c.mo.g[rows])
    se = c.mo.se[rows]
    m = len(c.pairs)

    def order(i: int, sign: float) -> tuple[str, str]:
        a, b = names[c.pairs[i][0]], names[c.pairs[i][1]]
        return (a, b) if sign > 0 else (b, a)

    def rung(rule: str, label: str, adds: str, hits: Iterable[tuple[int, float]],
             out_of: int) -> LadderRung:
        pairs = tuple(sorted(order(i, s) for i, s in hits))
        return LadderRung(rule, label, adds, len(pairs), out_of, pairs)

    with np.errstate(invalid="ignore"):
        r0 = [(i, float(means[a] - means[b])) for i, (a, b) in enumerate(c.pairs)
              if np.isfinite(means[a] - means[b]) and means[a] != means[b]]
        r1 = [(i, float(mean[i])) for i in range(m) if abs(mean[i]) > t1[i] * se_iid[i]]
        r2 = [(i, float(mean[i])) for i in range(m) if abs(mean[i]) > t2[i] * se[i]]
        r3 = [(i, float(mean[i])) for i in range(m) if abs(mean[i]) > c.q[rows[i]]]
    admissible = [i for i, (a, b) in enumerate(c.pairs)
                  if adm.pair(names[a], names[b]).admissible(plan.target)]
    r4 = [(i, s) for i, s in r3 if i in set(admissible)]
    r5 = [(i, decisions[i].delta) for i in range(m) if decisions[i].decision == "certified"]
    return (
        rung("R0", "sorted table", "any difference counts", r0, m),
        rung("R1", "paired t-test", "sampling uncertainty", r1, m),
        rung("R2", "cluster-robust t", "task clustering", r2, m),
        rung("R3", "+ Bonferroni", "multiplicity; a careful conventional analysis", r3, m),
        rung("R4", "+ admissibility test",
             f"{m - len(admissible)} pairs refused before any score is read", r4,
             len(admissible)),
        rung("R5", "+ nuisance radius", "certified (eq. 4)", r5, len(admissible)),
    )


# ----------------------------------------------------------------------- calibration


def _calibrate(plan: Plan, inp: _Inputs, c: _Cells,
               decisions: dict[str, tuple[PairDecision, ...]], ranks: RankIntervals
               ) -> CalibrationResult:
    """Appendix F.5: the sign-flip null, ``c*`` and leave-one-cluster-out stability.

    Every decidable cell's differences are centred (the null: no system differs) and their
    signs flipped per cluster, with one ±1 vector per draw shared by every pair and target.
    The flipped CR1 statistics come from per-cluster sums, so a draw costs two matrix
    products: with ``E_g = Σ_{i∈g}(d_i − Δ̂)`` and ``n_g`` tasks in cluster ``g``,
    ``Δ* = Σ_g s_g E_g / N`` and ``Σ_g (s_g E_g − n_g Δ*)² = ΣE² − 2Δ* Σ s_g E_g n_g +
    Δ*² Σ n_g²``.
    """
    B = plan.calibration.n_resamples
    G = len(inp.clusters)
    T = len(c.targets)
    keep = np.flatnonzero(c.ok)
    counts = c.mo.counts[keep]
    E = c.mo.sums[keep] - counts * c.mo.mean[keep, None]
    n, g = c.mo.n[keep], c.mo.g[keep]
    A = (E**2).sum(axis=1)
    C = (counts**2).sum(axis=1)
    EN = E * counts
    factor = g / (g - 1.0) / n**2
    tq, rad = c.tq[keep], c.rad[keep]
    target_of = keep % T
    columns = [np.flatnonzero(target_of == t) for t in range(T)]
    rng = np.random.default_rng(plan.calibration.seed)
    ratio_max = np.zeros((B, T))
    chunk = max(1, _CHUNK // max(len(keep), 1))
    for lo in range(0, B, chunk):
        size = min(chunk, B - lo)
        S = rng.integers(0, 2, size=(size, G)).astype(np.float64) * 2.0 - 1.0
        if not len(keep):
            continue  # the draws are still taken, so a seed means the same signs
        mean = (S @ E.T) / n
        ss = A - 2.0 * mean * (S @ EN.T) + mean**2 * C
        denom = tq * np.sqrt(np.maximum(ss, 0.0) * factor) + rad
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(denom > 0, np.abs(mean) / denom,
                             np.where(np.abs(mean) > 0, np.inf, 0.0))
        for t, cols in enumerate(columns):
            if len(cols):
                ratio_max[lo : lo + size, t] = ratio[:, cols].max(axis=1)
    allowed = math.floor(plan.delta_prime * B)
    rates: dict[str, float] = {}
    stars: dict[str, float] = {}
    for t, name in enumerate(c.targets):
        rates[name] = float((ratio_max[:, t] > 1.0).mean()) if B else math.nan
        # c*: the smallest scale with P(max_pairs |Δ*| / radius > c*) ≤ δ′ over the draws.
        stars[name] = (float(np.sort(ratio_max[:, t])[B - allowed - 1])
                       if len(columns[t]) and allowed < B else math.nan)
    main = decisions[plan.target]
    cs = stars[plan.target]
    drops = tuple(sorted((p.better, p.worse) for p in main
                         if p.better is not None and p.worse is not None
                         and math.isfinite(cs) and p.margin <= cs))
    rate = rates[plan.target]
    loo = (_leave_one_out(plan, inp, c, main, ranks)
           if plan.calibration.leave_one_cluster_out else [])
    jac = [x.jaccard for x in loo]
    return CalibrationResult(
        n_resamples=B, seed=plan.calibration.seed, nominal=plan.delta_prime,
        family_rate=rate, mc_se=math.sqrt(rate * (1 - rate) / B) if B else math.nan,
        rates=rates, c_star=cs, c_star_by_target=stars, drops=drops,
        jaccard_mean=float(np.mean(jac)) if jac else math.nan,
        jaccard_min=float(np.min(jac)) if jac else math.nan,
        flips=sum(x.flips for x in loo),
        winner_flips=sum(1 for x in loo if x.winner_flip),
        leave_one_out=tuple(loo),
    )


def _winners(ranks: RankIntervals) -> set[str]:
    return {s for s, (lo, _) in ranks.intervals.items() if lo == 1}


def _leave_one_out(plan: Plan, inp: _Inputs, c: _Cells, main: tuple[PairDecision, ...],
                   ranks: RankIntervals) -> list[LeaveOneOut]:
    """Certify the board's target again with each cluster left out.

    Admissibility and the nuisance radii are held fixed (they were decided before any score
    and do not depend on which tasks are scored); ``Δ̂``, the CR1 error, ``G`` and the t
    quantile are recomputed from the per-cluster sums.
    """
    T = len(c.targets)
    m = len(c.pairs)
    rows = np.arange(m) * T + c.targets.index(plan.target)
    sums, counts = c.mo.sums[rows], c.mo.counts[rows]  # (P, G)
    total, n, g = sums.sum(axis=1), c.mo.n[rows], c.mo.g[rows]
    Q, PN, C = (sums**2).sum(axis=1), (sums * counts).sum(axis=1), (counts**2).sum(axis=1)
    admissible, rad = c.admissible[rows], c.rad[rows]
    full = {(p.better, p.worse) for p in main if p.better is not None and p.worse is not None}
    names = inp.systems
    winners = _winners(ranks)
    out: list[LeaveOneOut] = []
    for h, label in enumerate(inp.clusters):
        sh, nh = sums[:, h], counts[:, h]
        n2 = n - nh
        g2 = g - (nh > 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean2 = (total - sh) / n2
            ss2 = (Q - sh**2) - 2.0 * mean2 * (PN - sh * nh) + mean2**2 * (C - nh**2)
            se2 = np.sqrt(np.maximum(ss2, 0.0) * g2 / (g2 - 1.0) / n2**2)
            tq2 = _t_quantiles(1.0 - plan.delta_prime / (2.0 * m), g2)
            cert = (admissible & (n2 >= plan.min_common_tasks) & (g2 >= 2)
                    & (np.abs(mean2) > tq2 * se2 + rad))
        rel: set[tuple[str, str]] = set()
        for i in np.flatnonzero(cert):
            a, b = names[c.pairs[i][0]], names[c.pairs[i][1]]
            rel.add((a, b) if mean2[i] > 0 else (b, a))
        union = full | rel
        jaccard = len(full & rel) / len(union) if union else 1.0
        flips = sum(1 for a, b in full if (b, a) in rel)
        first = _winners(rank_intervals(names, rel))
        out.append(LeaveOneOut(label, len(rel), jaccard, flips, tuple(sorted(first)),
                               winner_flip=not first & winners))
    return out


# ----------------------------------------------------------------------- certify


def certify(
    scores: Mapping[str, Any] | CertifyData,
    *,
    clusters: Sequence[Any] | ArrayLike | None = None,
    plan: Plan,
    admissibility: Admissibility | None = None,
    tasks: Sequence[str] | None = None,
    present: Mapping[str, ArrayLike] | None = None,
    failed: Mapping[str, ArrayLike] | None = None,
    input_hashes: Mapping[str, str] | None = None,
    calibrate: bool = True,
) -> Board:
    """Certify a leaderboard ([LBC] eq. 4, Def. 7, §6.1; Table 2; Appendix F.5).

    Args:
        scores: ``system -> scores over tasks``: an array ``(n_tasks,)`` (one readout),
            ``(n_tasks, n_readouts)`` in the plan's readout order, or a mapping readout ->
            ``(n_tasks,)``; every system over the same tasks. Or the ``CertifyData`` of
            ``from_traces`` (which brings clusters, tasks, masks, entries and file hashes).
        clusters: the cluster of each task (required with arrays).
        plan: the certification plan.
        admissibility: the pre-score decision; by default it is decided here, before any
            score is read, from the CertifyData's entries or else from the plan alone.
        tasks: task labels (for messages and the report).
        present: ``system -> bool (n_tasks,)``: the system ran the task (default all).
        failed: ``system -> bool (n_tasks,)``: the task failed (⊥), handled per the plan's
            failure policy. Scores at absent or failed tasks are ignored (may be NaN); a
            NaN anywhere else is an error.
        input_hashes: ``path -> SHA-256`` of the inputs, stored on the board.
        calibrate: compute Appendix F.5 (``plan.calibration``); False skips it.

    Returns:
        ``Board``.
    """
    inp = _certify_iv(scores, clusters, plan, tasks, present, failed, input_hashes)
    if admissibility is None:
        # Decided from entries and declarations only; the scores are not passed.
        admissibility = _admissibility(
            inp.entries, plan=plan, systems=None if inp.entries is not None else inp.systems)
    elif not isinstance(admissibility, Admissibility):
        raise TypeError(f"`admissibility` must be a certify.Admissibility; found "
                        f"{type(admissibility).__name__}")
    adm = admissibility
    if adm.plan_hash != plan.hash():
        raise ValueError("`admissibility` was decided under another plan (hash "
                         f"{adm.plan_hash[:12]}…, this plan {plan.hash()[:12]}…); decide it "
                         "again with this plan")
    pair_names = plan.family_pairs(list(inp.systems))
    index = {s: i for i, s in enumerate(inp.systems)}
    for a, b in pair_names:
        adm.pair(a, b)  # raises with the pair's names when it was not decided
    pairs = [(index[a], index[b]) for a, b in pair_names]
    values, used = _values(plan, inp)
    cells = _cells(plan, inp, adm, pairs, values, used)
    decisions = _decisions(plan, inp, adm, cells)
    ranks = {t: rank_intervals(inp.systems, [(p.better, p.worse) for p in decisions[t]
                                             if p.better is not None and p.worse is not None])
             for t in plan.targets}
    ladder = _ladder(plan, inp, cells, values, used, decisions[plan.target], adm)
    calib = (_calibrate(plan, inp, cells, decisions, ranks[plan.target])
             if calibrate and plan.calibration.n_resamples > 0 else None)
    with np.errstate(invalid="ignore", divide="ignore"):
        n_used = used.sum(axis=1)
        means = (values * used[:, :, None]).sum(axis=1) / n_used[:, None]  # (S, T)
    orient = {COMPOSITE: 1.0, **plan.orientation()}
    table = {s: {t: float(means[i, j] * orient[t]) for j, t in enumerate(plan.targets)}
             for i, s in enumerate(inp.systems)}
    t_main = plan.targets.index(plan.target)
    order = sorted(range(len(inp.systems)),
                   key=lambda i: (-np.nan_to_num(means[i, t_main], nan=-np.inf),
                                  inp.systems[i]))
    return Board(
        systems=tuple(inp.systems[i] for i in order), target=plan.target,
        targets=plan.targets, scores=table,
        n_tasks={s: int(n_used[i]) for i, s in enumerate(inp.systems)},
        decisions=decisions, ranks=ranks, ladder=ladder, calibration=calib,
        admissibility=adm, plan=plan, plan_hash=plan.hash(),
        input_hashes=inp.input_hashes, scores_hash=_scores_hash(inp, plan.readout_names),
        family_size=len(pairs), n_clusters=len(inp.clusters),
    )
