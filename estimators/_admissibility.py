"""Sealed entries and admissibility, decided before any score is read ([LBC] Def. 1, Def. 7)."""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from agentlog import Trace, settle
from agentlog.records import ABSENT, RunView, iter_runs, trace_files, trace_sha256
from agentlog.records import artifact_differences as differences
from agentlog.records import decode_artifact as decode
from agentlog.records import encode_artifact as encode

from ._plan import COMPOSITE, Plan

__all__ = [
    "Admissibility",
    "Entry",
    "EntryTable",
    "PairAdmissibility",
    "TargetRadius",
    "admissibility",
]

FloatArray = NDArray[np.float64]
TraceInput = Trace | str | os.PathLike[str]
EntryStatus = Literal["exact", "measured", "declared", "refused", "insufficient"]
FeatureFn = Callable[[Any], ArrayLike]

_OK_STATUS = ("exact", "measured", "declared")


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
        records only: scores are never read), with the SHA-256 of every trace file. The
        files stream one run at a time (``agentlog.records.iter_runs``)."""
        files = _trace_files(traces)
        entries = [e for trace, run in iter_runs([f for _, f in files], name="traces")
                   if (e := _run_entry(str(trace.path), run, window, select)) is not None]
        return cls(window=window, entries=tuple(entries),
                   input_hashes={p: _file_sha256(p) for p, _ in files})


def _run_entry(path: str, run: RunView, window: str, select: Mapping[str, Any] | None
               ) -> Entry | None:
    """The run's first entry into ``window``; None when the run is not selected or never
    enters it."""
    start = run.start
    if start is None or not _selected(start.meta, select):
        return None
    task = _task_of(start.task, path, start.run_id)
    for w in run.windows:
        if w.name == window:
            return Entry(system=start.system, task=task, entry_hash=w.entry_hash.hex(),
                         entry_bytes=w.entry_bytes, backbone=_backbone(start.meta),
                         cluster=str(start.meta.get("cluster", task)), run_id=start.run_id,
                         path=path)
    return None


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


def _trace_files(traces: TraceInput | Iterable[TraceInput]) -> list[tuple[str, Trace | Path]]:
    """``(path, file or Trace)`` of every trace named (``agentlog.records.trace_files``),
    unread."""
    return [(str(f.path) if isinstance(f, Trace) else str(f), f)
            for f in trace_files(traces, name="traces")]


def _file_sha256(path: str) -> str:
    settle(path)  # a run this process just left may still be in its writer's queue
    return trace_sha256(path)  # a pipe, a device or a non-trace is refused before hashing


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


def _argument_maps(x: Entry, y: Entry, key: str | None) -> tuple[dict[Any, Any], ...]:
    """Two entries' sealed argument maps, or () when they are not both available maps."""
    if key is not None or x.entry_bytes is None or y.entry_bytes is None:
        return ()
    try:
        a, b = decode(x.entry_bytes), decode(y.entry_bytes)
    except Exception:  # a damaged artifact: the hashes still said what differs
        return ()
    return (a, b) if isinstance(a, dict) and isinstance(b, dict) else ()


def _entry_difference(maps: tuple[dict[Any, Any], ...]) -> str:
    """``"; `temperature`: 1.0 vs 0.3"``: the fields (nested paths) two argument maps
    (``_argument_maps``) differ in (up to three), or "" when there are none."""
    if not maps:
        return ""
    fields = differences(*maps)
    shown = "; ".join(f"`{path}`: {_short(a)} vs {_short(b)}"
                      for path, (a, b) in list(fields.items())[:3])
    return f"; {shown}{' …' if len(fields) > 3 else ''}" if fields else ""


def _short(value: Any) -> str:
    text = "absent" if value is ABSENT else repr(value)
    return text if len(text) <= 40 else text[:37] + "…"


def _shared_entry_hint(maps: tuple[dict[Any, Any], ...]) -> str:
    """An ``entry=`` projection keeping only the arguments two argument maps
    (``_argument_maps``) share (up to three, by their own names, in the sealed map's order),
    e.g. ``entry=lambda task, **_: task``."""
    shared = [k for k in maps[0] if k in maps[1] and maps[0][k] == maps[1][k]
              and isinstance(k, str) and k.isidentifier()][:3] if maps else []
    if not shared:
        return "entry=lambda <shared arguments>, **_: <them>"
    names = ", ".join(shared)
    return f"entry=lambda {names}, **_: {names if len(shared) == 1 else f'({names})'}"


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
        maps = _argument_maps(ta[differ[0]][0], tb[differ[0]][0], key)
        return refuse(f"the plan declares one shared entry, but the {what} differ on "
                      f"{len(differ)} of {n} common tasks (first: {differ[0]!r}"
                      f"{_entry_difference(maps)}). Seal only what every system must share: "
                      f"@al.window(..., {_shared_entry_hint(maps)}) keeps a system's own "
                      "settings out of the entry", n)
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



def _j(x: float | None) -> float | None:
    if x is None:
        return None
    return float(x) if math.isfinite(x) else None

