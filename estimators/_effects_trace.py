"""Policy effects from the arm traces of a paired 2×2 intervention ([SSC] eq. 3–4).

``agentlog.replay.intervene`` (or any recorder that writes the same provenance) writes one
output run per (source window instance, arm, seed). Each such run carries its arm in
``RunStart.meta["agentlog.replay"]``::

    {"arm": "selection=uniform,stopping=fixed:4", "arm_hash": "…",
     "factors": {"selection": "uniform", "stopping": "fixed:4"},
     "replicate": 0, "source_run": "…", "window": 3, "mode": "frozen", ...}

``effects_from_traces`` reads the outcome of every arm run (a ``Score`` by name, or a
function of the run), groups the four arms of each paired block — the same source window
instance (or task) and the same replicate seed, hence the same random numbers — into
θ_ab, and returns Δsel, Δstop, Δint and the total with task-clustered intervals
(``cess.policy_effects``) and ICC(1,k) across replicates.

These are policy effects: what the opened-evidence conclusion does when the search policy
is replaced. A difference of CESS estimates is not one ([SSC] Theorem 2): CESS corrects
every supported policy toward the same pool target θ*, so its contrast is zero in
expectation whatever the policies do.

Examples:
    >>> import agentlog as al
    >>> from agentlog.estimators import cess
    >>> for task, base in (("q0", 0.1), ("q1", 0.3)):
    ...     for sel, a in (("agent", 0.2), ("uniform", 0.0)):
    ...         for stop, b in (("adaptive", 0.1), ("fixed:2", 0.0)):
    ...             meta = {"agentlog.replay": {"factors": {"selection": sel, "stopping": stop},
    ...                                         "replicate": 0}}
    ...             with al.record("agentlog-effects-doc.zst", mode="a", seed=7, task=task,
    ...                            meta=meta):
    ...                 al.score("opened_mean", base + a + b)
    >>> fx = cess.effects_from_traces("agentlog-effects-doc.zst", outcome="opened_mean",
    ...                               n_resamples=200)
    >>> round(fx.selection, 9), round(fx.stopping, 9), round(fx.total, 9)
    (0.2, 0.1, 0.3)
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agentlog import DegenerateDataWarning, Trace, TraceFormatError, TracePathError, iter_records
from agentlog.deprecation import renamed_argument
from agentlog.display import html_repr, render_fields, render_notes
from agentlog.records import RunStart, Score, WindowExit, iter_runs

from ._cess import THEOREM_2_NOTE
from ._effects import EFFECTS, EffectInterval, PolicyEffectsResult, icc_1k, policy_effects
from ._interval import ConfidenceInterval, check_confidence_level
from ._labels import codes
from ._shared_noise import SharedNoise

__all__ = ["PROVENANCE_KEY", "TraceEffectsResult", "effects_from_traces"]

FloatArray = NDArray[np.float64]
TraceInput = Trace | str | os.PathLike[str]

PROVENANCE_KEY = "agentlog.replay"  # the RunStart.meta entry replay outputs carry
FACTORS = ("selection", "stopping")
# The agent's own policy is level 1 of each factor ([SSC] eq. 3: π1, σ1).
OWN_LEVELS = {"selection": "agent", "stopping": "adaptive"}
ARM_CODES = ("00", "10", "01", "11")  # (selection, stopping) levels, the order of eq. 4

POLICY_NOTE = (
    "Δsel, Δstop and Δint are policy effects: how the outcome changes when the agent's own "
    "selection or stopping policy (level 1) replaces the intervention (level 0), on the "
    "same entries and the same random numbers ([SSC] eq. 3–4); a positive Δsel means the "
    "agent's own selection raises the outcome. " + THEOREM_2_NOTE
)


@dataclass(frozen=True, eq=False)
class TraceEffectsResult:
    """Policy effects of a paired 2×2 read from arm traces.

    Attributes:
        effects: the ``cess.policy_effects`` result (estimates, task-clustered bootstrap).
        theta: ``{"00", "10", "01", "11"}`` → θ_ab per paired block (``a`` the selection
            level, ``b`` the stopping level; 1 is the agent's own policy).
        block, task, replicate: the identity of each block (one row per block).
        levels: ``{factor: (level 0, level 1)}``, the arm names the codes stand for.
        outcome: what θ measures (the score name, or the function's name).
        icc: ICC(1,k) of each effect across replicates (per-task means of the blocks of each
            replicate), or None with ``icc_note`` saying why.
        icc_note: why ``icc`` is None ("" when it is not).
        n_runs: arm runs read; ``n_skipped``: runs without arm provenance (e.g. the
            source runs) and unfinished or failed runs, left out.
        note: these are policy effects; CESS contrasts are not ([SSC] Theorem 2).
    """

    effects: PolicyEffectsResult
    theta: dict[str, FloatArray]
    block: tuple[str, ...]
    task: tuple[str, ...]
    replicate: tuple[Any, ...]
    levels: dict[str, tuple[str, str]]
    outcome: str
    icc: dict[str, float] | None
    icc_note: str
    n_runs: int
    n_skipped: int
    note: str = POLICY_NOTE

    @property
    def selection(self) -> float:
        """Δsel = θ10 − θ00."""
        return self.effects.selection

    @property
    def stopping(self) -> float:
        """Δstop = θ01 − θ00."""
        return self.effects.stopping

    @property
    def interaction(self) -> float:
        """Δint = θ11 − θ10 − θ01 + θ00."""
        return self.effects.interaction

    @property
    def total(self) -> float:
        """θ11 − θ00 (= Δsel + Δstop + Δint)."""
        return self.effects.total

    @property
    def n_blocks(self) -> int:
        return self.effects.n_blocks

    @property
    def n_clusters(self) -> int:
        return self.effects.n_clusters

    def confidence_interval(self, effect: str, method: EffectInterval | None = None, *,
                            confidence_level: float | None = None) -> ConfidenceInterval[float]:
        """The task-clustered interval of ``effect`` (one of ``EFFECTS``): the cluster t
        interval by default, ``method="percentile"`` for the bootstrap's; at the level the
        effects were estimated with unless ``confidence_level`` is given."""
        return self.effects.confidence_interval(effect, method,
                                                confidence_level=confidence_level)

    def standard_error(self, effect: str) -> float:
        """The standard error of ``effect`` behind its interval (``effects.interval``)."""
        return self.effects.standard_error(effect)

    def arm_means(self) -> dict[str, float]:
        """θ_ab averaged within each task, tasks weighing equally (as the effects are)."""
        _, t = codes(list(self.task), name="task")
        out = {}
        for code, values in self.theta.items():
            sums = np.bincount(t, weights=values)
            out[code] = float(np.mean(sums / np.bincount(t)))
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON: estimates, intervals, standard errors, ICC, counts, note."""
        rows = {}
        for e in EFFECTS:
            low, high = self.confidence_interval(e)
            rows[e] = {"estimate": float(getattr(self.effects, e)), "low": low, "high": high,
                       "standard_error": self.standard_error(e),
                       "icc": None if self.icc is None or math.isnan(self.icc[e])
                       else self.icc[e]}
        return {
            "outcome": self.outcome,
            "levels": {f: list(v) for f, v in self.levels.items()},
            "effects": rows,
            "arm_means": self.arm_means(),
            "confidence_level": self.effects.confidence_level,
            "interval": self.effects.interval,
            "n_blocks": self.n_blocks, "n_clusters": self.n_clusters,
            "n_runs": self.n_runs, "n_skipped": self.n_skipped,
            "icc_note": self.icc_note, "inputs_hash": self.effects.inputs_hash,
            "note": self.note,
        }

    @html_repr
    def _repr_html_(self) -> str:
        head = render_fields([
            ("outcome", self.outcome),
            *((f"{factor} levels (0, 1)", " / ".join(v)) for factor, v in self.levels.items()),
            ("arm runs read", self.n_runs), ("runs left out", self.n_skipped),
            *((f"θ{code} (mean over tasks)", v) for code, v in self.arm_means().items()),
        ], caption="Policy effects from arm traces ([SSC] eq. 3–4)")
        icc = render_fields(self.icc.items(), caption="ICC(1,k) across replicates") \
            if self.icc else ""
        return (head + self.effects._repr_html_() + icc
                + render_notes([self.icc_note, self.note]))


def _outcome_of(run: Any, outcome: str | Callable[[Any], float], channel: str | None,
                where: str) -> float:
    if callable(outcome):
        value = outcome(run)
        if isinstance(value, bool) or not isinstance(value, int | float | np.number):
            raise ValueError(f"{where}: `outcome` returned {value!r}; it must return a number")
        return float(value)
    found = [r.value for r in run.records
             if type(r) is Score and r.name == outcome
             and (channel is None or r.channel == channel)]
    if not found:
        names = sorted({r.name for r in run.records if type(r) is Score})
        raise ValueError(
            f"{where}: no score {outcome!r}" + (f" on channel {channel!r}" if channel else "")
            + f"; the run holds scores {names or 'none'}: pass one of them as outcome= "
            "(--outcome)"
        )
    if len(found) > 1:
        raise ValueError(
            f"{where}: {len(found)} scores {outcome!r}" + (f" on channel {channel!r}"
                                                           if channel else "")
            + "; θ needs one outcome per arm run: pass channel= (--channel) to pick one, or "
            "a function of the run as outcome="
        )
    return float(found[0])


def _levels(seen: Mapping[str, set[str]],
            given: Mapping[str, Sequence[str]] | None) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for factor in FACTORS:
        have = sorted(seen.get(factor, set()))
        if given is not None and factor in given:
            pair = tuple(given[factor])
            if len(pair) != 2 or any(not isinstance(v, str) for v in pair):
                raise ValueError(f"`levels[{factor!r}]` must be (level 0, level 1), two arm "
                                 f"names; found {given[factor]!r}")
            missing = [v for v in pair if v not in have]
            if missing:
                raise ValueError(f"`levels[{factor!r}]` names {missing}, which no arm run has; "
                                 f"the traces hold {factor} levels {have}")
            out[factor] = (pair[0], pair[1])
            continue
        if len(have) != 2:
            raise ValueError(
                f"a 2×2 needs exactly two {factor} levels; the arm runs hold {len(have)}: "
                f"{have}. Pass levels={{{factor!r}: (level_0, level_1)}} to choose two "
                "(--levels)" if len(have) > 2 else
                f"a 2×2 needs exactly two {factor} levels; the arm runs hold {have or 'none'}: "
                "record arms of both levels (a Design with two values per factor)"
            )
        own = OWN_LEVELS[factor]
        if own not in have:
            raise ValueError(
                f"the {factor} levels {have} do not include the agent's own policy {own!r}, "
                f"so which is level 1 is not known: pass levels={{{factor!r}: "
                f"({have[0]!r}, {have[1]!r})}} (level 0, level 1)"
            )
        other = have[0] if have[1] == own else have[1]
        out[factor] = (other, own)
    return out


@dataclass
class ArmRuns:
    """The arm runs of a paired study, by block: what ``read_arm_runs`` found.

    Attributes:
        blocks: ``(task, unit, replicate)`` → ``{arm: (outcome, where)}``; a unit is one
            source window instance (``"<source run>#<window>"``), or the task when the
            provenance names no source run.
        n_runs: arm runs read; ``n_skipped``: runs without arm provenance, unfinished or
            failed runs, and units the engine recorded as failed.
        shared: the runs' noise keys (``SharedNoise``), to warn when tasks drew alike.
        n_failed, first_failure: arm units the engine recorded as failed, and the first
            one's error (``"Type: message"``).
    """

    blocks: dict[tuple[str, str, str], dict[Any, tuple[float, str]]]
    n_runs: int
    n_skipped: int
    shared: SharedNoise
    n_failed: int = 0
    first_failure: str | None = None


def read_arm_runs(source: TraceInput | Iterable[TraceInput], *,
                  outcome: str | Callable[[Any], float], channel: str | None,
                  arm_of: Callable[[Mapping[str, Any], str], Any],
                  describe: Callable[[Any], str], hint: str) -> ArmRuns:
    """Every finished arm run's outcome, grouped into paired blocks (one reader for the
    2×2 effects and the per-step attribution).

    A paired block is one source window instance (``source_run``, ``window``; the task when
    the provenance has no source) under one replicate seed: its arms ran with the same
    random numbers. ``arm_of(factors, where)`` names a run's arm from its provenance's
    ``factors`` (raising ``ValueError`` for factors it cannot read); ``describe(arm)`` words
    it in messages; ``hint`` names what writes such runs.

    Raises:
        ValueError: no arm runs; an arm run without the outcome, with it twice or with a
            non-finite one; two runs of one arm in a block. Each names the run.
    """
    outcome_name = outcome if isinstance(outcome, str) else getattr(outcome, "__name__",
                                                                     repr(outcome))
    blocks: dict[tuple[str, str, str], dict[Any, tuple[float, str]]] = {}
    n_runs = n_skipped = n_failed = 0
    first_failure: str | None = None
    systems: set[str] = set()
    paths: list[str] = []
    shared = SharedNoise()
    arm_generators: dict[object, str | None] = {}  # source run -> its noise generator
    for trace, run in iter_runs(source, name="source"):
        if not paths or paths[-1] != trace.path:
            paths.append(trace.path)
        start = run.start
        prov = start.meta.get(PROVENANCE_KEY) if start is not None else None
        factors = prov.get("factors") if isinstance(prov, Mapping) else None
        failed_unit = isinstance(prov, Mapping) and prov.get("status", "ok") != "ok"
        if (start is None or not isinstance(factors, Mapping) or not run.complete or run.failed
                or failed_unit):  # a unit the engine recorded as failed is left out
            n_skipped += 1
            if failed_unit and isinstance(factors, Mapping):
                n_failed += 1
                error = next((r for r in run.records
                              if type(r) is WindowExit and r.status != 0), None)
                if first_failure is None and error is not None:
                    first_failure = f"{error.error_type}: {error.error_message}"
            continue
        assert isinstance(prov, Mapping)
        where = f"{trace.path}: run {start.run_id}"
        arm = arm_of(factors, where)
        # The task: the provenance's (replay outputs are runs of their own), else the run's.
        task_of = prov.get("task", start.task)
        task = str(start.meta.get("cluster", task_of if task_of is not None else ""))
        source_run = prov.get("source_run")
        unit = (f"{source_run}#{prov.get('window')}" if source_run is not None
                else f"task {start.task}")
        key = (task, unit, str(prov.get("replicate", start.seed)))
        value = _outcome_of(run, outcome, channel, where)
        if not math.isfinite(value):
            raise ValueError(f"{where}: the outcome {outcome_name!r} is {value}; the "
                             "estimate needs finite outcomes")
        cell = blocks.setdefault(key, {})
        if arm in cell:
            raise ValueError(
                f"{where}: a second run of arm {describe(arm)} for {unit}, replicate "
                f"{key[2]} (the first: {cell[arm][1]}); keep one output per (source window, "
                "arm, seed)"
            )
        cell[arm] = (value, where)
        systems.add(str(prov.get("system", start.system)))  # the source run's system
        arm_seed = prov.get("seed")
        if isinstance(arm_seed, int) and not isinstance(arm_seed, bool):
            # An engine's output run: its arm drew in a run of its own (prov["arm_trace"])
            # with this seed and the source's task and generator.
            shared.add_unresolved(arm_seed, prov.get("task"), functools.partial(
                _arm_generator, trace.path, prov, arm_generators), task)
        else:  # a run that drew the arm itself
            shared.add(start, task)
        n_runs += 1
    if not blocks:
        files = ", ".join(paths[:3]) or "the traces given"
        if n_failed:
            raise ValueError(
                f"every arm unit in {files} failed ({n_failed}; first: {first_failure}): "
                "nothing to estimate. Fix the cause and run the intervention again (it "
                "retries only the units not sealed)")
        raise ValueError(
            f"no arm runs in {files}: no run carries meta[{PROVENANCE_KEY!r}]['factors'] "
            f"({n_skipped} other run(s)); pass the output folder of {hint}"
        )
    if len(systems) > 1:
        warnings.warn(
            f"the arm runs come from {len(systems)} systems ({', '.join(sorted(systems)[:4])}"
            f"{' …' if len(systems) > 4 else ''}), and the estimate pools them: each task "
            "weighs every system's blocks together. Intervene on one system's runs at a "
            "time (one output folder each) to estimate each system's own effects",
            DegenerateDataWarning, stacklevel=3)
    return ArmRuns(blocks, n_runs, n_skipped, shared, n_failed, first_failure)


def complete_blocks(blocks: Mapping[tuple[str, str, str], Any],
                    missing_of: Callable[[Any], list[str]], incomplete: str, *,
                    needs: str) -> list[tuple[str, str, str]]:
    """The keys of the blocks that hold every arm an estimate reads, in block order.

    ``missing_of(cell)`` names the arms a block lacks. An incomplete block is an error
    (``incomplete="error"``) or is left out with a ``DegenerateDataWarning``
    (``"drop"``); with none left, nothing can be estimated (``ValueError``).
    """
    kept: list[tuple[str, str, str]] = []
    dropped: list[str] = []
    for key, cell in blocks.items():
        missing = missing_of(cell)
        if not missing:
            kept.append(key)
        elif incomplete == "error":
            shown = f"{missing[:3]}{f' and {len(missing) - 3} more' if len(missing) > 3 else ''}"
            raise ValueError(
                f"block {key[1]} (task {key[0]!r}, replicate {key[2]}) lacks arm(s) {shown}: "
                f"every block needs {needs} on the same random numbers. Re-run the "
                "intervention (it resumes the missing units) or pass incomplete='drop' "
                "(--drop-incomplete)")
        else:
            dropped.append(key[1])
    if dropped:
        warnings.warn(f"{len(dropped)} block(s) lack some of {needs} and were left out "
                      f"(first: {dropped[0]})", DegenerateDataWarning, stacklevel=3)
    if not kept:
        raise ValueError(f"no block has {needs}; nothing to estimate")
    return kept


def effects_from_traces(
    source: TraceInput | Iterable[TraceInput] | None = None,
    *,
    outcome: str | Callable[[Any], float],
    channel: str | None = None,
    levels: Mapping[str, Sequence[str]] | None = None,
    incomplete: str = "error",
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence_level: float = 0.95,
    interval: EffectInterval = "t",
    **legacy: Any,
) -> TraceEffectsResult:
    """Δsel, Δstop, Δint and the total of a paired 2×2 from its arm traces ([SSC] eq. 3–4).

    A paired block is one source window instance (``source_run``, ``window``; the task when
    the provenance has no source) under one replicate seed: its four arms ran on the same
    pool with the same random numbers. θ_ab of a block is the outcome of its arm with
    selection level ``a`` and stopping level ``b`` (level 1 is the agent's own policy,
    ``"agent"`` / ``"adaptive"``, unless ``levels`` says otherwise). Effects are averaged
    within each task, tasks weigh equally, and the intervals are task-clustered: the cluster
    t interval over per-task effects by default, or the percentile bootstrap over tasks
    (``cess.policy_effects``, whose docs give their measured coverage). ICC(1,k) ([SSC]
    Appendix C) measures how repeatable each effect is across the replicate seeds.

    These are policy effects. A contrast of two CESS estimates is not one ([SSC]
    Theorem 2): CESS targets the pool conclusion θ*, the same under every supported policy.

    Args:
        source: an ``al.Trace``, a trace file, a folder (every ``*.zst`` below it) or a
            list of those (``trace_or_paths=``, its old name, works for one release with a
            ``DeprecationWarning``). Runs without ``meta["agentlog.replay"]["factors"]`` (the source
            runs, for instance) are skipped and counted in ``n_skipped``.
        outcome: the name of the ``Score`` each arm run holds once (e.g. ``"opened_mean"``),
            or a function of the run (an ``al.RunView``) returning a number.
        channel: with a score name, only scores of this channel count.
        levels: ``{"selection": (level_0, level_1), "stopping": (...)}`` when a factor's
            levels are not the agent's own policy and one intervention, or there are more
            than two.
        incomplete: a block without all four arms: ``"error"`` (default) or ``"drop"``
            (with a ``DegenerateDataWarning``).
        n_resamples, seed, confidence_level: the task-clustered bootstrap.
        interval: ``"t"`` (default) or ``"percentile"`` (``cess.policy_effects``).

    Returns:
        A ``TraceEffectsResult``.

    Warns:
        DegenerateDataWarning: as ``cess.policy_effects``: an effect with the same value in
            every task, per-task effects too skewed for the number of tasks.
        SharedNoiseWarning: runs of different tasks drew the same noise (recorded with
            generator /1 or /2 under one seed), so the tasks are not independent.

    Raises:
        ValueError: no arm runs; a factor without exactly two levels; an arm run without the
            outcome, or with it twice; two runs of the same arm in one block; an incomplete
            block (unless ``incomplete="drop"``). Each message names the run and what to do.
    """
    source = renamed_argument("cess.effects_from_traces", source, legacy,
                              old="trace_or_paths", new="source")
    if incomplete not in ("error", "drop"):
        raise ValueError(f"`incomplete` must be 'error' or 'drop'; found {incomplete!r}")
    confidence_level = check_confidence_level(confidence_level)  # before reading any file
    outcome_name = outcome if isinstance(outcome, str) else getattr(outcome, "__name__",
                                                                     repr(outcome))
    seen: dict[str, set[str]] = {f: set() for f in FACTORS}

    def arm_of(factors: Mapping[str, Any], where: str) -> tuple[str, str]:
        arm: list[str] = []
        for factor in FACTORS:
            level = factors.get(factor)
            if not isinstance(level, str):
                raise ValueError(
                    f"{where}: the arm provenance has no {factor} level (factors "
                    f"{dict(factors)}); a 2×2 arm names both its selection and its stopping "
                    "level"
                )
            seen[factor].add(level)
            arm.append(level)
        return arm[0], arm[1]

    runs = read_arm_runs(source, outcome=outcome, channel=channel, arm_of=arm_of,
                         describe=lambda arm: f"selection={arm[0]}, stopping={arm[1]}",
                         hint="agentlog.replay.intervene (agentlog replay --design … --out "
                              "DIR)")
    blocks, n_runs, n_skipped, shared = runs.blocks, runs.n_runs, runs.n_skipped, runs.shared
    lv = _levels(seen, levels)
    wanted = {code: (lv["selection"][int(code[0])], lv["stopping"][int(code[1])])
              for code in ARM_CODES}
    labels = complete_blocks(
        blocks, lambda cell: [f"selection={s}, stopping={b}" for s, b in wanted.values()
                              if (s, b) not in cell],
        incomplete, needs="the four arms")
    theta = {code: [blocks[key][arm_key][0] for key in labels]
             for code, arm_key in wanted.items()}
    shared.warn(stacklevel=2)
    tasks = [k[0] for k in labels]
    reps = [k[2] for k in labels]
    arrays = {c: np.asarray(v, dtype=np.float64) for c, v in theta.items()}
    fx = policy_effects(arrays["00"], arrays["10"], arrays["01"], arrays["11"], cluster=tasks,
                        n_resamples=n_resamples, seed=seed, confidence_level=confidence_level,
                        interval=interval)
    icc, icc_note = _icc(fx, tasks, reps)
    fx = dataclasses.replace(fx, icc=icc, note=POLICY_NOTE)
    return TraceEffectsResult(
        effects=fx, theta=arrays, block=tuple(k[1] for k in labels), task=tuple(tasks),
        replicate=tuple(reps), levels=lv, outcome=outcome_name, icc=icc, icc_note=icc_note,
        n_runs=n_runs, n_skipped=n_skipped,
    )


def _arm_generator(path: str, prov: Mapping[str, Any], known: dict[object, str | None]
                   ) -> str | None:
    """The noise generator an engine output's arm run drew with: its arm trace's (beside
    the output, ``prov["arm_trace"]``), read once per source run; None when unreadable."""
    source = prov.get("source_run")
    if source in known:
        return known[source]
    generator = None
    arm_trace = prov.get("arm_trace")
    if isinstance(arm_trace, str):
        try:  # the arm run's RunStart is its trace's first record
            for rec in iter_records(Path(path).parent / arm_trace):
                generator = rec.generator if type(rec) is RunStart else None
                break
        except (OSError, TraceFormatError, TracePathError):
            generator = None  # moved or damaged: nothing to compare, no warning
    known[source] = generator
    return generator


def _icc(fx: PolicyEffectsResult, tasks: list[str], reps: list[str]
         ) -> tuple[dict[str, float] | None, str]:
    """ICC(1,k) per effect over the (task, replicate) means of the blocks."""
    t_uniq, t = codes(tasks, name="task")
    r_uniq, r = codes(reps, name="replicate")
    n, k = len(t_uniq), len(r_uniq)
    if n < 2 or k < 2:
        return None, (f"ICC(1,k) needs >= 2 tasks and >= 2 replicate seeds; found {n} and {k}")
    cell = t * k + r
    counts = np.bincount(cell, minlength=n * k)
    if (counts == 0).any():
        return None, ("ICC(1,k) needs every task under every replicate seed; some (task, "
                      "seed) pairs have no complete block")
    out: dict[str, float] = {}
    for e in EFFECTS:
        means = np.bincount(cell, weights=fx.per_block[e], minlength=n * k) / counts
        out[e] = icc_1k(means, target=np.repeat(np.arange(n), k),
                        repeat=np.tile(np.arange(k), n))
    return out, ""
