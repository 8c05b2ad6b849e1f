"""``agentlog demo``: record the bundled deep-research agent, inspect and verify it,
compare its Opened Mean with CESS against the known pool target θ*, summarise the ASV
face of its retrieval step under the direct and quote channels, profile the reliability
of its conclusions beyond the mean (worst case, CVaR, Reliability@τ), and certify a
leaderboard of its search-policy variants ([LBC]).

No network, no API key, a second or two. ``run_demo`` returns a JSON-ready summary dict
(``summarize_study`` builds it from the trace files alone, never from in-memory results;
``summarize_cess_demo`` adds the ``"cess"`` key from the traces and the generated pools,
``replay_asv_demo`` replays the retrieval transitions under the example's registered
``direct`` and ``quote`` channels and ``summarize_asv_demo`` adds the ``"asv"`` key from
the replayed scores,
``summarize_reliability_demo`` the ``"reliability"`` key from each run's error,
``summarize_certify_demo`` the ``"certify"`` key from the variants' traces and the
bundled plan); ``render_demo`` draws it section by section, so that new sections
(estimators) slot in as a key and a renderer.
"""

from __future__ import annotations

import csv
import importlib.util
import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape

import agentlog as al
from agentlog.replay import ExecutionOptions

from ._certify_cmd import (
    DECISIONS,
    backbones_of,
    certify_traces,
    fmt_rank,
    refused_everywhere,
)
from ._demo_paired import render_paired, summarize_paired_demo
from ._demo_pools import (
    DEMO_BUDGET,
    DEMO_CANDIDATES,
    DEMO_LAM,
    DEMO_ORDER,
    DEMO_POOL_SEED,
    pool_tables,
)
from ._estimate_reliability import collect_scores, group_name, summarize_reliability
from ._inspect import summarize_trace, table
from ._options import JsonOutput, out_option, seeds_option
from ._output import (
    EXIT_OK,
    EXIT_PROBLEM,
    BadInput,
    fail,
    fmt_num,
    fmt_signed,
    print_json,
    read_trace,
    short_path,
    stdout,
)
from ._verify_cmd import verify_file

DEFAULT_OUT = Path("agentlog-demo")
# 20 questions: the certified leaderboard needs at least the plan's 10 common tasks per pair,
# and leaving one question out (its stability check) must leave at least 10.
DEFAULT_TASKS = 20
DEFAULT_RANKINGS = ("agent", "reversed")
CESS_METHODS = (("opened_mean", "Opened Mean"), ("dr_raw", "raw DR"), ("cess", "CESS"))
# The demo's ASV face: the retrieval transitions recorded without any evaluator, then
# replayed from their sealed states under the example's registered channels, direct (ρ0)
# vs quote (ρ1), four cyclic layouts each, into out/replay/asv.zst ([ASV]).
# 2,000 bootstrap draws instead of the estimator's 10,000 keep the demo fast.
ASV_CHANNELS = ("direct", "quote")
ASV_WINDOW = "retrieval"
ASV_SCORE = "margin"
ASV_APP = "agentlog.examples.deep_research"  # the module that registers the channels
ASV_REPLAY = ("replay", "asv.zst")  # below --out: not picked up by a glob of out/*.zst
ASV_RESAMPLES = 2_000
ASV_STATISTICS = ("mean_interaction", "mean_gain0", "mean_gain1", "mean_sign_disagreement")
# The demo's reliability profile ([DMC] §4.4): each run's error |Opened Mean − θ*| per
# ranking, lower is better. τ = 0.25 counts a run as reliable when its conclusion lands
# within a quarter of the evidence scale's half-width of θ*; α = 0.2 as in the paper.
RELIABILITY_SCORE = "abs_error"
RELIABILITY_BY = ("ranking",)
RELIABILITY_ALPHA = 0.2
RELIABILITY_TAU = 0.25
RELIABILITY_RESAMPLES = 2_000
# The demo's certified leaderboard ([LBC] §3.4, §6.1): search-policy variants of the
# agent, recorded under the plan's entry condition (ranking = agent) into out/variants and
# certified under the bundled plan (agentlog.examples: plans/deep_research.toml), which the
# demo copies to out/plan.toml. Two variants are unfair on purpose: one enters retrieval with
# a privileged pool, one runs on another backbone; the plan must refuse every pair with them.
CERTIFY_PLAN = ("plans", "deep_research.toml")
CERTIFY_DIR = "variants"
CERTIFY_RANKING = "agent"
VARIANTS: tuple[tuple[str, dict[str, Any], str], ...] = (  # (system, Policy(**kw), what)
    ("deep-research", {}, "the reference policy (temperature 3, floor 0.1)"),
    ("greedy", {"temperature": 1.0, "floor": 0.02},
     "follows the ranking closely (temperature 1, floor 0.02)"),
    ("explorer", {"temperature": 30.0, "floor": 0.5},
     "spreads its openings over the pool (temperature 30, floor 0.5)"),
    ("patient", {"stop_base": 0.0, "stop_lean": 0.0}, "never stops early: opens all K"),
    ("oracle-hint", {"oracle_hint": True},
     "privileged entry: its pool carries an oracle ranking hint"),
    ("olmo", {"temperature": 2.0, "backbone": "olmo-2-7b"},
     "temperature 2 on another backbone (olmo-2-7b)"),
)


def _ranking_rows(trajectories: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_ranking: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in trajectories:
        by_ranking[t["ranking"]].append(t)
    rows = []
    for ranking, ts in by_ranking.items():
        opened = np.array([t["opened_mean"] for t in ts])
        theta = np.array([t["theta_star"] for t in ts])
        rows.append({
            "ranking": ranking,
            "trajectories": len(ts),
            "mean_rounds": float(np.mean([t["rounds"] for t in ts])),
            "opened_mean": float(opened.mean()),
            "theta_star": float(theta.mean()),
            "bias": float((opened - theta).mean()),
            "mae": float(np.abs(opened - theta).mean()),
        })
    return rows


def _trajectories(trace: al.Trace) -> list[dict[str, Any]]:
    """One row per run that graded its conclusion: Opened Mean, θ*, rounds."""
    opened = {s.run: s.value for s in trace.scores("opened_mean")}
    rounds: dict[int, int] = defaultdict(int)
    for s in trace.selections("doc"):
        rounds[s.run] += 1
    rows = []
    for run in trace.runs:
        start = run.start
        if start is None or run.run not in opened or "theta_star" not in start.meta:
            continue
        rows.append({
            "path": trace.path, "system": start.system, "task": start.task,
            "seed": start.seed, "ranking": start.meta.get("ranking"),
            "opened_mean": opened[run.run], "theta_star": float(start.meta["theta_star"]),
            "rounds": rounds[run.run],
        })
    return rows


def summarize_study(paths: Sequence[Path]) -> dict[str, Any]:
    """What inspect and verify say about a set of recorded demo traces."""
    files: list[dict[str, Any]] = []
    trajectories: list[dict[str, Any]] = []
    for path in paths:
        trace = read_trace(path)
        summary = summarize_trace(trace)
        report = verify_file(path)
        files.append({
            "path": str(path), "runs": len(summary["runs"]),
            "windows": sum(w["count"] for w in summary["windows"]),
            "selections": sum(s["count"] for s in summary["selections"]),
            "continuations": sum(c["count"] for c in summary["continuations"]),
            "ok": report["ok"], "problems": report.get("problems", []),
        })
        trajectories.extend(_trajectories(trace))
    return {
        "files": files,
        "totals": {
            "files": len(files),
            "runs": sum(f["runs"] for f in files),
            "windows": sum(f["windows"] for f in files),
            "selections": sum(f["selections"] for f in files),
            "continuations": sum(f["continuations"] for f in files),
            "verified_ok": sum(f["ok"] for f in files),
            "with_problems": sum(not f["ok"] for f in files),
        },
        "trajectories": trajectories,
        "rankings": _ranking_rows(trajectories),
    }


def write_pool_tables(out: Path, tasks: Sequence[str]) -> dict[str, str]:
    """Write ``out/outcomes.csv`` (task, candidate_id, y) and ``out/predictions.csv``
    (task, candidate_id, m): the tables ``agentlog estimate cess --outcomes/--predictions``
    and ``cess.from_traces(outcomes=..., predictions=...)`` read."""
    outcomes, predictions = pool_tables(tasks)
    paths = {}
    for name, column, values in (("outcomes", "y", outcomes), ("predictions", "m", predictions)):
        path = out / f"{name}.csv"
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["task", "candidate_id", column])
            writer.writerows([task, cid, repr(v)] for (task, cid), v in values.items())
        paths[name] = str(path)
    return paths


def prepare_out(out: Path) -> None:
    """Make sure the demo can write into ``out`` before recording anything.

    An unwritable folder would otherwise surface as one instrumentation warning per trace
    and then a misleading "no such file" from reading them back.
    """
    if out.exists() and not out.is_dir():
        raise BadInput(f"{out}: exists and is not a folder; pass --out with a folder to "
                       "write the demo traces into")
    probe = out / ".agentlog-demo-probe"
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise BadInput(f"{out}: cannot write the demo traces there ({reason}); pass --out "
                       "with a folder you can create and write to") from None


def can_plot() -> bool:
    """Whether matplotlib is installed (``pip install 'agentlog[plot]'``): the demo
    suggests ``--plot`` only then."""
    return importlib.util.find_spec("matplotlib") is not None


def summarize_cess_demo(
    paths: Sequence[Path],
    tasks: Sequence[str],
    *,
    pool_seed: int = DEMO_POOL_SEED,
    n_candidates: int = DEMO_CANDIDATES,
    budget: int = DEMO_BUDGET,
) -> dict[str, Any]:
    """Opened Mean, raw DR and CESS (eq. 13, λ = 0.5) of the demo traces against θ*.

    The outcomes and predictions come from the generated pools (``make_pool``), keyed by
    (task, candidate id), so each run's pool is its task's whole pool and θ* is known.
    MAE is averaged within each question, then over questions; the ranking sensitivity S
    ([SSC] eq. 16) averages each (question, ranking)'s runs first, then takes
    |first ranking − second ranking| per question and averages over questions.
    """
    # Imported here: the estimators are not needed to start the CLI.
    from agentlog.estimators import cess

    outcomes, predictions = pool_tables(tasks, pool_seed=pool_seed,
                                        n_candidates=n_candidates)
    data = cess.from_traces(list(paths), outcomes=outcomes, predictions=predictions,
                            budget=budget)
    res = data.estimate(lam=DEMO_LAM, order=DEMO_ORDER)
    values = {"opened_mean": res.opened_mean, "dr_raw": res.dr_raw, "cess": res.estimate}
    condition = np.array([str(c) for c in data.condition])
    question = np.array([str(c) for c in data.cluster])
    rankings = list(dict.fromkeys(condition.tolist()))
    mae: dict[str, dict[str, float]] = {}
    for ranking in rankings:
        rows = condition == ranking
        mae[ranking] = {key: float(cess.mae(v[rows], data.theta_star[rows],
                                            question=question[rows]))
                        for key, v in values.items()}
    sensitivity: dict[str, float] | None = None
    if len(rankings) == 2:
        sensitivity = {key: float(cess.ranking_sensitivity(
            v, question=question, ranking=condition, pro=rankings[0], anti=rankings[1]))
            for key, v in values.items()}
    return {
        "lam": DEMO_LAM, "order": DEMO_ORDER, "budget": budget,
        "formula": "Π[m̄ + λ(Π[raw DR] − m̄)] ([SSC] eq. 13)",
        "runs": len(data), "rankings": rankings, "mae": mae, "sensitivity": sensitivity,
        "median_ess": float(np.median(res.ess)), "note": cess.THEOREM_2_NOTE,
    }


def replay_asv_demo(paths: Sequence[Path], out: Path) -> tuple[Path, dict[str, Any]]:
    """Replay the demo's retrieval transitions under ``ASV_CHANNELS`` into ``out/replay``.

    What ``agentlog replay out/*.zst --channel direct --channel quote --window retrieval
    --app agentlog.examples.deep_research`` does: x⁻ and x⁺ of every transition scored from
    the sealed states alone, in each channel's four cyclic layouts. Returns the output path
    and the run summary (as a dict).
    """
    from agentlog.replay import replay_channels

    target = out.joinpath(*ASV_REPLAY)
    target.parent.mkdir(parents=True, exist_ok=True)
    summary = replay_channels(list(paths), list(ASV_CHANNELS), window=ASV_WINDOW, out=target,
                              app=ASV_APP, execution=ExecutionOptions(progress=False))
    return target, summary.to_dict()


def summarize_asv_demo(paths: Sequence[Path]) -> dict[str, Any]:
    """The ASV face of the demo's retrieval transitions, direct vs quote ([ASV]).

    ``paths`` are the channel scores: the demo's replay output (or traces recorded with
    the record-time evaluator). Trajectory = the source run, empirical weighting,
    ``ASV_RESAMPLES`` trajectory-block draws (seed 0). The calibration verdict is Remark 2
    applied to the mean gains.
    """
    from agentlog.estimators import asv

    data = asv.from_traces(list(paths), channels=ASV_CHANNELS, window=ASV_WINDOW,
                           score=ASV_SCORE)
    face = data.face()
    with warnings.catch_warnings(record=True) as caught:  # e.g. a one-run demo
        warnings.simplefilter("always")
        res = asv.summarize(face, trajectory=data.trajectory[face.kept],
                            n_resamples=ASV_RESAMPLES, seed=0)
    return {
        "channels": list(ASV_CHANNELS), "window": ASV_WINDOW, "score": ASV_SCORE,
        "n_transitions": res.n_transitions, "n_trajectories": res.n_trajectories,
        "n_resamples": res.n_resamples, "confidence_level": res.confidence_level,
        "layouts": {c: len(v) for c, v in data.layouts.items()},
        "statistics": {k: {"value": res.values[k], "interval": list(res.confidence_interval(k))}
                       for k in ASV_STATISTICS},
        "sign_disagreements": int(face.sign_disagree.sum()),
        "calibration": res.calibration.to_dict(),
        "warnings": list(dict.fromkeys(str(w.message) for w in caught)),
    }


def summarize_reliability_demo(paths: Sequence[Path]) -> dict[str, Any]:
    """Reliability beyond the mean of the demo's conclusions, per ranking ([DMC] §4.4).

    The score is each run's ``abs_error`` = |Opened Mean − θ*| (lower is better): mean with
    a seeded bootstrap CI, worst case (the largest error), CVaR@0.2 (the mean of the worst
    20% of runs) and the share of runs within ``RELIABILITY_TAU`` of θ*, read from the traces
    as ``agentlog estimate reliability`` reads them.
    """
    out = summarize_reliability(
        collect_scores([read_trace(p) for p in paths], RELIABILITY_SCORE), RELIABILITY_BY,
        score=RELIABILITY_SCORE, alpha=RELIABILITY_ALPHA, tau=RELIABILITY_TAU,
        n_resamples=RELIABILITY_RESAMPLES, seed=0, lower_is_better=True,
        per_run=False)  # the per-run errors are already under "trajectories"
    return out


def bundled_plan() -> bytes:
    """The bytes of the example plan shipped in the wheel (``agentlog.examples``)."""
    return resources.files("agentlog.examples").joinpath(*CERTIFY_PLAN).read_bytes()


def summarize_certify_demo(out: Path, tasks: Sequence[str], *, seeds: int) -> dict[str, Any]:
    """Record ``VARIANTS`` into ``out/variants`` and certify them under the bundled plan.

    Every variant runs the same questions and seeds under the plan's entry condition
    (ranking = agent); the board is computed from the trace files as ``agentlog certify
    out/variants --plan out/plan.toml`` computes it: admissibility from the plan and the
    sealed retrieval entries before any score is read, then eq. 4 per pair.
    """
    from agentlog.estimators import certify
    from agentlog.examples.deep_research import (
        Policy,
        run_study,
    )

    text = bundled_plan()
    plan = certify.Plan.from_toml(text)
    plan_path = out / "plan.toml"
    out.mkdir(parents=True, exist_ok=True)
    plan_path.write_bytes(text)
    folder = out / CERTIFY_DIR
    paths = run_study(
        folder, tasks=tasks, rankings=(CERTIFY_RANKING,), seeds=range(seeds),
        systems={name: Policy(**kw) for name, kw, _ in VARIANTS}, budget=DEMO_BUDGET,
        n_candidates=DEMO_CANDIDATES, pool_seed=DEMO_POOL_SEED, evaluate=False)
    board, data = certify_traces([read_trace(p) for p in paths], plan)
    return {
        "plan": {"name": plan.name, "hash": plan.hash(), "path": str(plan_path),
                 "resource": "agentlog.examples/" + "/".join(CERTIFY_PLAN)},
        "traces": str(folder), "n_traces": len(paths),
        "design": {"tasks": len(tasks), "seeds": seeds, "ranking": CERTIFY_RANKING},
        "variants": {name: what for name, _, what in VARIANTS},
        "backbones": backbones_of(data),
        "board": board.to_dict(),
    }


def run_demo(
    out: Path = DEFAULT_OUT,
    *,
    tasks: int = DEFAULT_TASKS,
    seeds: int = 3,
    rankings: Sequence[str] = DEFAULT_RANKINGS,
) -> dict[str, Any]:
    """Record ``tasks x rankings x seeds`` runs of the bundled agent into ``out``; summarise.

    Besides the traces, ``out`` receives ``outcomes.csv`` and ``predictions.csv`` (the pool
    tables CESS reads), ``plan.toml`` and ``variants/`` (the certified leaderboard).
    """
    prepare_out(out)
    # Imported here, not at module level: the example registers its windows ("retrieval",
    # ...) by name, and other commands must not register them in the user's process.
    from agentlog.examples.deep_research import (
        run_study,
        task_ids,
    )

    task_list: list[str] = task_ids(tasks)
    # Recorded without the record-time evaluator: the channel scores come from replay.
    paths: list[Path] = run_study(
        out, tasks=task_list, rankings=rankings, seeds=range(seeds), budget=DEMO_BUDGET,
        n_candidates=DEMO_CANDIDATES, pool_seed=DEMO_POOL_SEED, evaluate=False,
    )
    summary = summarize_study(paths)
    summary["cess"] = summarize_cess_demo(paths, task_list)
    replayed, replay_summary = replay_asv_demo(paths, out)
    summary["asv"] = summarize_asv_demo([replayed])
    summary["asv"]["replay"] = {"out": str(replayed), "app": ASV_APP,
                                **{k: replay_summary[k] for k in ("total", "done", "skipped",
                                                                  "failed", "wall_s")}}
    summary["reliability"] = summarize_reliability_demo(paths)
    summary["certify"] = summarize_certify_demo(out, task_list, seeds=seeds)
    summary["paired"] = summarize_paired_demo(out, paths, task_list)
    summary["tables"] = write_pool_tables(out, task_list)
    first = short_path(paths[0])
    # The study's own traces lie at the top of `out`; the variants below it, in `variants/`.
    study = f"{short_path(out)}/*.zst"
    summary["out"] = str(out)
    summary["design"] = {"tasks": tasks, "seeds": seeds, "rankings": list(rankings)}
    tables = summary["tables"]
    # --plot needs matplotlib, an extra: suggest only what runs in this environment.
    plot = " --plot ranks.png" if can_plot() else ""
    summary["next"] = [f"agentlog inspect {first}", f"agentlog verify {short_path(out)}",
                       f"agentlog estimate cess {study} --outcomes "
                       f"{short_path(tables['outcomes'])} --predictions "
                       f"{short_path(tables['predictions'])} --order {DEMO_ORDER}",
                       f"agentlog replay {study} "
                       + " ".join(f"--channel {c}" for c in ASV_CHANNELS)
                       + f" --window {ASV_WINDOW} --app {ASV_APP} --out asv.zst",
                       f"agentlog estimate asv asv.zst --channels {','.join(ASV_CHANNELS)}",
                       f"agentlog estimate reliability {study} --by "
                       f"{','.join(RELIABILITY_BY)} --score {RELIABILITY_SCORE} "
                       f"--lower-is-better --tau {RELIABILITY_TAU:g}",
                       f"agentlog certify {short_path(summary['certify']['traces'])} --plan "
                       f"{short_path(summary['certify']['plan']['path'])}{plot}"]
    return summary


def _render_totals(summary: dict[str, Any], console: Console) -> None:
    d, tot = summary["design"], summary["totals"]
    console.print(f"Recorded the bundled deep-research agent: {d['tasks']} questions x "
                  f"{len(d['rankings'])} rankings ({', '.join(d['rankings'])}) x {d['seeds']} "
                  f"seeds into [bold]{escape(short_path(summary['out']))}[/]")
    names = ["files", "runs", "windows", "selections", "continuations"]
    t = table("Traces", [*names, "verify"], right=names)
    verify = (f"[green]{tot['verified_ok']} ok[/]" if not tot["with_problems"]
              else f"[red]{tot['with_problems']} with problems[/]")
    t.add_row(str(tot["files"]), str(tot["runs"]), str(tot["windows"]), str(tot["selections"]),
              str(tot["continuations"]), verify)
    console.print(t)
    for f in summary["files"]:
        for p in f["problems"]:
            console.print(f"[red]✗ {escape(f['path'])}[/]: {escape(p['message'])}")


def _render_rankings(summary: dict[str, Any], console: Console) -> None:
    names = ["runs", "mean rounds", "Opened Mean", "θ*", "bias", "MAE"]
    t = table("Opened Mean vs the pool target θ* ([SSC])", ["ranking", *names],
              right=names)
    for r in summary["rankings"]:
        t.add_row(escape(str(r["ranking"])), str(r["trajectories"]), fmt_num(r["mean_rounds"], 3),
                  fmt_num(r["opened_mean"], 3), fmt_num(r["theta_star"], 3),
                  f"{r['bias']:+.3f}", fmt_num(r["mae"], 3))
    console.print(t)
    console.print("[dim]Opened Mean: the mean evidence score of the documents a run opened. "
                  "θ* (the pool target): the mean evidence score over the question's whole "
                  "candidate pool, the same under every ranking; the gap between the rows is "
                  "selection bias: the agent's ranking sorts by relevance, which correlates "
                  "with the evidence score.[/]")


def _render_cess(summary: dict[str, Any], console: Console) -> None:
    c = summary.get("cess")
    if not c:
        return
    cols = [title for _, title in CESS_METHODS]
    t = table(f"Opened Mean vs CESS against θ* ([SSC], K = {c['budget']})", ["", *cols],
              right=cols)
    for ranking in c["rankings"]:
        t.add_row(f"MAE · {escape(ranking)}",
                  *(f"{c['mae'][ranking][key]:.3f}" for key, _ in CESS_METHODS))
    if c["sensitivity"] is not None:
        a, b = c["rankings"]
        t.add_row(f"ranking sensitivity S ({escape(a)} vs {escape(b)})",
                  *(f"{c['sensitivity'][key]:.3f}" for key, _ in CESS_METHODS))
    console.print(t)
    console.print("[dim]raw DR: the doubly robust estimate of θ* from the logged probability "
                  "of every selection and of reaching every round (eq. 6). CESS (Causal "
                  f"Evidence Selection Correction) = {escape(c['formula'])}: clip (Π) the raw "
                  "correction to the score scale, then shrink it toward the pool prediction "
                  f"m̄ with λ = {c['lam']:g}, fixed before any outcome is seen. S (eq. 16) "
                  "averages each question's runs per ranking, then |difference| per "
                  "question, then over questions.[/]")
    console.print(f"[dim]{escape(c['note'])}[/]")


def _render_asv(summary: dict[str, Any], console: Console) -> None:
    a = summary.get("asv")
    if not a:
        return
    c0, c1 = a["channels"]
    st = a["statistics"]

    def ci(key: str, fmt: Callable[[float], str] = fmt_signed) -> str:
        low, high = st[key]["interval"]
        return f"{fmt(st[key]['value'])} [{fmt(low)}, {fmt(high)}]"

    def pct(x: float) -> str:
        return f"{x:.1%}"

    cal = a["calibration"]
    console.print(f"[bold]ASV (Agent Step Value) of the {escape(a['window'])} step, "
                  f"{escape(c0)} vs {escape(c1)} ([ASV])[/]: {a['n_transitions']} transitions, "
                  f"{a['n_trajectories']} trajectories, {a['layouts'][c0]} cyclic layouts "
                  "reduced within each channel")
    console.print(f"  mean Ω = G^{escape(c1)} − G^{escape(c0)} (the interaction: how much the "
                  f"step's gain G changes between the two evaluation channels): "
                  f"{ci('mean_interaction')}")
    console.print(f"  mean gains: {escape(c0)} {ci('mean_gain0')}, {escape(c1)} "
                  f"{ci('mean_gain1')}")
    console.print(f"  sign disagreement: {ci('mean_sign_disagreement', pct)} of transitions "
                  f"({a['sign_disagreements']} of {a['n_transitions']})")
    if cal["mean_interaction_sign"] == "invariant":
        verdict = "so does the sign of the mean Ω (the mean gains have opposite signs)"
    else:
        verdict = ("the sign of the mean Ω does not (both mean gains have the same sign; "
                   f"rescaling {escape(c1)} by α1/α0 = {cal['witness'][1]:.3g} reverses it)"
                   if cal["witness"] else "the sign of the mean Ω does not")
    console.print("  calibration ([ASV] Remark 2, calibration invariance): gain signs and sign "
                  "disagreement survive any positive-affine recalibration of either channel; "
                  f"{verdict}")
    console.print(f"[dim]Intervals: {a['confidence_level']:.0%} trajectory-block bootstrap, "
                  f"{a['n_resamples']:,} draws in the demo (agentlog estimate asv uses "
                  "10,000).[/]")
    rep = a.get("replay")
    if rep:
        console.print(f"[dim]Scored by channel replay from the sealed states alone: "
                      f"{rep['total']} units (transition x channel x layout) in "
                      f"{rep['wall_s']:.2f} s into {escape(short_path(rep['out']))} "
                      f"(channels registered by {escape(rep['app'])}).[/]")
    for w in a["warnings"]:
        console.print(f"[yellow]warning:[/] {escape(w)}")


def _render_reliability(summary: dict[str, Any], console: Console) -> None:
    r = summary.get("reliability")
    if not r:
        return
    console.print(f"[bold]Reliability beyond the mean ([DMC])[/]: each run's error "
                  f"|Opened Mean − θ*| per {escape(', '.join(r['by']))}, lower is better; "
                  f"worst = the largest error over the runs, CVaR@{r['alpha']:g} (conditional "
                  f"value at risk) = the mean of the worst {r['alpha']:.0%} of runs")
    names = [escape(group_name(g["labels"])) for g in r["groups"]]
    width = max(len(n) for n in names)
    for name, g in zip(names, r["groups"], strict=True):
        console.print(f"  {name:<{width}}  {g['n']} runs: mean {g['mean']:.3f} "
                      f"[{g['ci_low']:.3f}, {g['ci_high']:.3f}], worst {g['worst']:.3f}, "
                      f"CVaR@{r['alpha']:g} {g['cvar']:.3f}, within {r['tau']:g} of θ*: "
                      f"{g['reliability']:.0%}", highlight=False)
    if len(names) > 1:
        by_mean = min(range(len(names)), key=lambda i: r["groups"][i]["mean"])
        by_tail = min(range(len(names)), key=lambda i: r["groups"][i]["cvar"])
        if by_mean != by_tail:
            console.print(f"  The mean and the tail disagree: {names[by_mean]} has the lower "
                          f"mean error, {names[by_tail]} the lower CVaR@{r['alpha']:g}; a "
                          "mean-only report would hide it.")
    console.print(f"[dim]{r['confidence_level']:.0%} bootstrap CI of the mean, "
                  f"{r['n_resamples']:,} draws (seed {r['seed']}).[/]")
    for w in [*r["notes"], *r["warnings"]]:
        console.print(f"[yellow]warning:[/] {escape(w)}")


def _render_certify(summary: dict[str, Any], console: Console) -> None:
    c = summary.get("certify")
    if not c:
        return
    b = c["board"]
    target = b["target"]
    better = b["plan"]["readouts"][target]["better"] if target != "composite" else "higher"
    pairs = b["pairs"]
    d = c["design"]
    console.print(
        f"[bold]Certified leaderboard of {len(b['systems'])} search-policy variants "
        f"([LBC])[/]: plan {escape(repr(c['plan']['name']))} (sha256 "
        f"{c['plan']['hash'][:12]}…), {escape(target)}, {better} is better; {d['tasks']} "
        f"questions x {d['seeds']} seeds, ranking {escape(d['ranking'])}, {c['n_traces']} "
        f"traces in {escape(short_path(c['traces']))}")
    rows = b["systems"]
    width = max(len(r["system"]) for r in rows)
    ranks = [fmt_rank(r) for r in rows]
    rank_width = max(len(x) for x in ranks)
    for rank, r in zip(ranks, rows, strict=True):
        score = r["scores"].get(target, r["composite"])
        what = c["variants"].get(r["system"], "")
        console.print(f"  {rank:<{rank_width}}  {escape(r['system']):<{width}}  "
                      f"{'-' if score is None else f'{score:.3f}'}  "
                      f"[dim]{escape(what)}[/]", highlight=False)
    decided = [p for p in pairs if p["decision"] in
               ("certified", "undecided-sampling", "undecided-attribution")]
    if decided:
        console.print("  admissible pairs (the plan allows comparing them), certified when the "
                      "score gap |Δ̂| exceeds q (sampling radius) + ε̂_out (estimated "
                      "difference of the conditions outside the window) + r (attribution "
                      "radius) (eq. 4):")
        names = [f"{p['better']} ≻ {p['worse']}" if p["better"] is not None
                 else f"{p['a']} vs {p['b']}" for p in decided]
        name_width = max(len(n) for n in names)
        for name, p in zip(names, decided, strict=True):
            label, colour = DECISIONS[p["decision"]]
            sign = ">" if p["decision"] == "certified" else "≤"
            console.print(f"    [{colour}]{label:<23}[/] {escape(name):<{name_width}}  "
                          f"|Δ̂| {abs(p['delta']):.3f} {sign} {p['q']:.3f} + "
                          f"{p['eps_out']:.3g} + {p['r']:.3g}", highlight=False)
    refused = [p for p in pairs if p["decision"] == "refused"]
    if refused:
        console.print(f"  [red]refused[/] before any score was read: {len(refused)} of "
                      f"{len(pairs)} pairs")
        everywhere = refused_everywhere(pairs)
        for s in everywhere:
            mine = [p for p in refused if s in (p["a"], p["b"])]
            # The reason of a pair with a system that is not itself refused everywhere.
            shown = next((p for p in mine if ({p["a"], p["b"]} - {s}).isdisjoint(everywhere)),
                         mine[0])
            console.print(f"    every pair with {escape(s)}: {escape(shown['reason'] or '')}")
        for p in refused:
            if p["a"] not in everywhere and p["b"] not in everywhere:
                console.print(f"    {escape(p['a'])} vs {escape(p['b'])}: "
                              f"{escape(p['reason'] or '')}")
    short = [p for p in pairs if p["decision"] == "not-enough-common-tasks"]
    if short:
        console.print(f"  [magenta]not decided[/]: {len(short)} pair(s) with fewer than "
                      f"{b['plan']['min_common_tasks']} common questions; run the demo with "
                      f"--tasks {max(b['plan']['min_common_tasks'], DEFAULT_TASKS)}")
    console.print("  conventional ladder ([LBC] Table 2): " + " → ".join(
        f"{r['rule']} {r['decided']}/{r['out_of']}" for r in b["ladder"])
        + " pairs ordered (R0 a sorted table, R1 a paired t-test, R2 cluster-robust, "
        "R3 + Bonferroni, R4 + admissibility, R5 the certificate)")
    top = rows[0]["system"]
    if top in refused_everywhere(pairs):
        lo, hi = rows[0]["rank"]
        console.print(f"  A sorted table would put {escape(top)} first; the certificate refuses "
                      f"every comparison with it and leaves it anywhere in {lo}–{hi}.")
    exact = bool(decided) and all(p["eps_out"] == 0 and p["r"] == 0 for p in decided)
    console.print("[dim]" + ("Every admissible pair is an exact cell (equal `pool` entries, "
                             "one backbone): ε̂_out = 0 and r = 0, so certification rests on "
                             "the sampling radius q alone" if exact else
                             "q: the sampling radius; ε̂_out + r: the nuisance radius (eq. 3)")
                  + " (" + ("CR1 cluster-robust standard errors" if b.get("sampling") == "cr1"
                          else "CR2 (bias-reduced) cluster-robust standard errors with "
                               "Bell–McCaffrey degrees of freedom")
                  + " over questions, Bonferroni over "
                  f"{b['family_size']} pairs). Rank: the certified interval"
                  + (" (● pinned)" if any(row["pinned"] for row in rows) else "") + ".[/]")


def _render_next(summary: dict[str, Any], console: Console) -> None:
    console.print("Next: " + "  ·  ".join(f"[bold]{escape(c)}[/]" for c in summary["next"]))


SECTIONS = (_render_totals, _render_rankings, _render_cess, _render_asv, _render_reliability,
            _render_certify, render_paired, _render_next)


def render_demo(summary: dict[str, Any], console: Console) -> None:
    """Draw a ``run_demo`` summary, one section after another."""
    for section in SECTIONS:
        section(summary, console)


def demo_command(
    out: Annotated[Path, out_option("Folder to write the demo traces into.")] = DEFAULT_OUT,
    tasks: Annotated[int, typer.Option(
        "--tasks", min=1, help="Number of questions (the certified leaderboard needs 10 or "
        "more).")] = DEFAULT_TASKS,
    seeds: Annotated[int, seeds_option("Seeds per question.")] = 3,
    json_output: JsonOutput = False,
) -> None:
    """Record the bundled deep-research agent (offline), inspect and verify it, run the
    estimators on it and certify a leaderboard of its variants."""
    try:
        summary = run_demo(out, tasks=tasks, seeds=seeds)
    except BadInput as exc:
        fail(f"agentlog demo: {exc}")
    if json_output:
        print_json(summary)
    else:
        render_demo(summary, stdout())
    raise typer.Exit(EXIT_OK if not summary["totals"]["with_problems"] else EXIT_PROBLEM)
