"""``agentlog estimate reliability``: reliability beyond the mean per group of runs ([DMC]).

Each run contributes one terminal score: the last Score record of the chosen name that is
not tied to a transition (run-level or window-level readouts; the channel readouts of a
transition's states belong to ``estimate asv``). Runs are grouped by ``--by`` keys read from
the run itself, and every group gets ``reliability.summary``'s statistics: mean with a seeded
bootstrap CI (BCa by default, ``--ci-method``), worst case, CVaR@α and Reliability@τ ([DMC] §4.4).

Grouping keys (``--by``, comma-separated):

* ``system``, ``task``, ``seed``: the run's own fields (``al.record(system=, task=, seed=)``);
* ``model``: per run, its ``meta["model"]``, else its ``meta["backbone"]``, else its
  ``system`` (agentlog records the backbone in meta; a system name stands in for it when a
  run records neither). The source used is reported (``settings.by_sources`` in ``--json``);
* any other name: that key of the run's ``meta`` (``"-"`` for runs that lack it).

``--lower-is-better`` is for error-like scores (``abs_error``): the statistics are computed
on the negated score and reported in the score's own units, so "worst" is the largest value,
CVaR@α the mean of the largest α-fraction and Reliability@τ the share of runs ``≤ τ``.

TRACES may also be one Parquet dataset folder (``agentlog export --format parquet``): its
``runs`` and ``scores`` tables give the same runs in the same order, and the same numbers.

``collect_scores`` reads the runs, ``summarize_reliability`` builds the JSON-ready dict (the
``--json`` output; ``agentlog demo`` reuses it), ``render_reliability`` draws it and
``plot_reliability`` draws [DMC] Figure 2's box plot with worst-case and CVaR ticks.

Example::

    $ agentlog demo --out runs/
    $ agentlog estimate reliability runs/ --by ranking --score abs_error --lower-is-better \\
        --tau 0.25 --plot box.png
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape

import agentlog as al
from agentlog.records import Score, iter_runs

from ._dataset_input import Dataset, TracesOrDataset, single_dataset, trace_paths
from ._executor import Executor, RayAddress, executing, executor_option
from ._inspect import table
from ._options import (
    BootstrapSeed,
    JsonOutput,
    ci_method_option,
    plot_option,
    resamples_option,
    score_option,
)
from ._output import (
    EXIT_OK,
    BadInput,
    dataset_errors,
    fail,
    print_json,
    pyplot,
    stdout,
    trace_errors,
    write_plot,
)
from ._verify_cmd import trace_files

RUN_FIELDS = ("system", "task", "seed")
MODEL_KEY = "model"
MODEL_META_KEYS = ("model", "backbone")  # in this order; then the run's system
MISSING_LABEL = "-"
CONFIDENCE_LEVEL = 0.95


def reliability_module() -> Any:
    """``agentlog.estimators.reliability``, imported on first use (not needed to start the CLI)."""
    from agentlog.estimators import reliability

    return reliability


# ----------------------------------------------------------------------------- reading


@dataclass(frozen=True, slots=True)
class RunScore:
    """One run and its terminal score (``None`` when it records none of that name)."""

    path: str
    run: int
    run_id: str | None
    system: str
    task: str | None
    seed: int | None
    meta: dict[str, Any] = field(repr=False)
    value: float | None
    n_records: int  # Score records of the name in this run (the last one is the score)


def terminal_score_names(traces: Sequence[al.Trace | Path]) -> dict[str, int]:
    """``{score name: runs recording it}`` over the Score records not tied to a transition.

    The files stream one run at a time (``agentlog.records.iter_runs``).
    """
    runs: dict[str, set[int]] = {}
    for i, (_, run) in enumerate(iter_runs(list(traces), name="traces")):
        for s in run.records:
            if type(s) is Score and s.transition is None:
                runs.setdefault(s.name, set()).add(i)
    return {name: len(r) for name, r in sorted(runs.items())}


def choose_score(names: dict[str, int], score: str | None, n_files: int | str
                 ) -> tuple[str, str]:
    """The score name to use and where the choice came from.

    Without ``score`` the one name recorded is used; several names, or an unknown one, are
    ``BadInput`` listing the names present. ``n_files``: how many trace files were read, or
    what was read instead (``"the dataset DIR"``).
    """
    where = f"{n_files} trace file(s)" if isinstance(n_files, int) else n_files
    present = ", ".join(names) or "none"
    if score is None:
        if len(names) != 1:
            if not names:
                raise BadInput(f"no run-level or window-level Score records in {where}; "
                               "record each run's outcome with al.score(name, value)")
            raise BadInput(f"the runs record several scores ({present}); pass --score to pick "
                           "one")
        (only,) = names
        return only, "the one score the runs record"
    if score not in names:
        raise BadInput(f"no run records a score named {score!r} in {where}; scores "
                       f"present: {present}")
    return score, "--score"


def collect_scores(traces: Sequence[al.Trace | Path], score: str) -> list[RunScore]:
    """Every run of ``traces`` with its last non-transition Score named ``score``; the files
    stream one run at a time.

    Raises:
        BadInput: a run's score is not finite (NaN, inf); the message names the file.
    """
    out = []
    for trace, run in iter_runs(list(traces), name="traces"):
        value: float | None = None
        count = 0
        for s in run.records:
            if type(s) is Score and s.name == score and s.transition is None:
                value = s.value
                count += 1
        if value is not None and not math.isfinite(value):
            raise BadInput(f"{trace.path}: run {run.run} records {score} = {value}; "
                           "scores must be finite (score a failed run, e.g. as 0, or "
                           "leave the score out and pass --missing-as)")
        start = run.start
        out.append(RunScore(
            path=trace.path, run=run.run, run_id=run.run_id,
            system=start.system if start is not None else MISSING_LABEL,
            task=start.task if start is not None else None,
            seed=start.seed if start is not None else None,
            meta=dict(start.meta) if start is not None else {},
            value=value, n_records=count))
    return out


def dataset_scores(dataset: Dataset, executor: str = "local"
                   ) -> tuple[dict[str, int], Callable[[str], list[RunScore]]]:
    """``terminal_score_names`` and ``collect_scores`` over a Parquet dataset's ``runs`` and
    ``scores`` tables (``reliability.terminal_table``: columns read, no trace opened, its
    per-run stage on Ray Data with ``executor="ray"``): the same runs in the same order.

    A dataset may hold 10⁷ runs: each run's strings and meta come from one Python object
    per distinct value (Arrow's dictionary encoding), so a run costs its ``RunScore``."""
    table = reliability_module().terminal_table(dataset, executor=executor)

    def collect(score: str) -> list[RunScore]:
        value, count = table.values(score)
        bad = np.flatnonzero((count > 0) & ~np.isfinite(value))
        if bad.size:
            i = int(bad[0])
            raise BadInput(f"{table.runs.column('source')[i]}: run "
                           f"{table.runs.column('run')[i]} records {score} = {value[i]}; "
                           "scores must be finite (score a failed run, e.g. as 0, or leave "
                           "the score out and pass --missing-as)")
        (sources, source), (systems, system), (tasks, task), (metas, meta) = (
            table.coded(c) for c in ("source", "system", "task", "meta"))
        parsed = [json.loads(m or "{}") for m in metas]
        return [RunScore(path=sources[p], run=r, run_id=run_id, system=systems[s],
                         task=tasks[t], seed=sd, meta=parsed[m],
                         value=None if n == 0 else v, n_records=n)
                for p, r, run_id, s, t, sd, m, v, n in zip(
                    source.tolist(), table.runs.column("run").to_pylist(),
                    table.runs.column("run_id").to_pylist(), system.tolist(), task.tolist(),
                    table.runs.column("seed").to_pylist(), meta.tolist(), value.tolist(),
                    count.tolist(), strict=True)]

    return table.names(), collect


def parse_by(text: str) -> list[str]:
    """``"model,task"`` → ``["model", "task"]``: non-empty, distinct names."""
    keys = [k.strip() for k in text.split(",")]
    if not all(keys) or len(set(keys)) != len(keys):
        raise BadInput(f"--by must name distinct grouping keys separated by commas (e.g. "
                       f"model,task); found {text!r}")
    return keys


def _label(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return MISSING_LABEL
    if isinstance(value, bool | int | float):
        return str(value)
    # Lists and mappings get a canonical JSON label, so equal values group together.
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def label_of(run: RunScore, key: str) -> tuple[str, str]:
    """The run's label for grouping key ``key`` and its source (``"system"``, ``"meta['x']"``)."""
    if key in RUN_FIELDS:
        return _label(getattr(run, key)), key
    if key == MODEL_KEY:
        for meta_key in MODEL_META_KEYS:
            if meta_key in run.meta:
                return _label(run.meta[meta_key]), f"meta[{meta_key!r}]"
        return _label(run.system), "system"
    if key in run.meta:
        return _label(run.meta[key]), f"meta[{key!r}]"
    return MISSING_LABEL, "missing"


def group_labels(runs: Sequence[RunScore], keys: Sequence[str]
                 ) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """One label column per key, and the sources each key was read from.

    Raises:
        BadInput: a key that is neither a run field, ``model``, nor a meta key of any run.
    """
    known = set(RUN_FIELDS) | {MODEL_KEY}
    meta_keys = sorted({k for r in runs for k in r.meta})
    unknown = [k for k in keys if k not in known and k not in meta_keys]
    if unknown:
        raise BadInput(f"--by {','.join(unknown)}: no run records such a key; use system, "
                       f"task, seed, model or a meta key of the runs: "
                       f"{', '.join(meta_keys) or 'none'}")
    columns: dict[str, list[str]] = {k: [] for k in keys}
    sources: dict[str, set[str]] = {k: set() for k in keys}
    for run in runs:
        for k in keys:
            label, source = label_of(run, k)
            columns[k].append(label)
            sources[k].add(source)
    return columns, {k: sorted(v) for k, v in sources.items()}


# ----------------------------------------------------------------------------- summary


def _check_alpha_tau(alpha: float, tau: float) -> None:
    if not (math.isfinite(alpha) and 0 < alpha <= 1):
        raise BadInput(f"--alpha must be in (0, 1] (the tail fraction of CVaR@α, e.g. 0.2); "
                       f"found {alpha:g}")
    if not math.isfinite(tau):
        raise BadInput(f"--tau must be a finite number (the Reliability@τ threshold); found "
                       f"{tau:g}")


def summarize_reliability(
    runs: Sequence[RunScore],
    keys: Sequence[str],
    *,
    score: str,
    alpha: float = 0.2,
    tau: float = 0.9,
    n_resamples: int = 2000,
    seed: int = 0,
    lower_is_better: bool = False,
    missing_as: float | None = None,
    ci_method: str = "BCa",
    executor: str = "local",
    per_run: bool = True,
) -> dict[str, Any]:
    """Reliability per group of ``runs`` (JSON-ready): ``groups``, ``runs``, ``counts``, ...

    ``runs`` (each run's labels and value) only with ``per_run``: the table and the notes
    need only the groups, and a dataset of 10⁷ runs would hold a dict per run.
    Runs without the score are left out (counted) unless ``missing_as`` scores them. The
    bootstrap draws run on ``executor`` (``"ray"``: as Ray tasks, the same draws). Warnings
    of the estimator (a single-run group) are collected under ``"warnings"``.

    Raises:
        BadInput: no run has the score, an unknown ``--by`` key, or a bad α/τ.
    """
    _check_alpha_tau(alpha, tau)
    scored = [r for r in runs if r.value is not None or missing_as is not None]
    if not scored:
        raise BadInput(f"none of the {len(runs)} run(s) records the score {score!r}; pass "
                       "--missing-as to score runs without it")
    values = np.array([r.value if r.value is not None else missing_as for r in scored],
                      dtype=np.float64)
    columns, sources = group_labels(scored, keys)
    sign = -1.0 if lower_is_better else 1.0
    rel = reliability_module()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            res = rel.summary(sign * values, groups={k: columns[k] for k in keys},
                              alpha=alpha, tau=sign * tau, n_resamples=n_resamples,
                              seed=seed, method=ci_method, executor=executor)
        except ValueError as exc:
            raise BadInput(str(exc)) from exc
    groups = []
    for row in res.table(confidence_level=CONFIDENCE_LEVEL):
        stats = {k: sign * row[k] for k in ("mean", "worst", "cvar")}
        low, high = sorted((sign * row["ci_low"], sign * row["ci_high"]))
        groups.append({"labels": {k: row[k] for k in keys}, "n": row["n"], **stats,
                       "ci_low": low, "ci_high": high, "reliability": row["reliability"]})
    missing = [r for r in runs if r.value is None]
    notes = []
    if missing and missing_as is None:
        notes.append(f"{len(missing)} of {len(runs)} run(s) record no {score!r} score and are "
                     "left out (a failed run is often the worst case: pass --missing-as 0 to "
                     "score them)")
    elif missing:
        notes.append(f"{len(missing)} run(s) without a {score!r} score scored as "
                     f"{missing_as:g} (--missing-as)")
    repeated = sum(r.n_records > 1 for r in scored)
    if repeated:
        notes.append(f"{repeated} run(s) record {score!r} more than once; each run's last "
                     "record is its score")
    for k in keys:
        n_missing = sum(label == MISSING_LABEL for label in columns[k])
        if n_missing and k not in RUN_FIELDS:
            notes.append(f"{n_missing} run(s) have no {k!r} in their meta; grouped under "
                         f"{MISSING_LABEL!r}")
    out = {
        "score": score,
        "by": list(keys),
        "by_sources": {k: [s for s in v if s != "missing"] for k, v in sources.items()},
        "direction": "lower is better" if lower_is_better else "higher is better",
        "alpha": alpha, "tau": tau, "confidence_level": CONFIDENCE_LEVEL,
        "ci_method": ci_method, "n_resamples": n_resamples, "seed": seed, "missing_as": missing_as,
        "groups": groups,
        "counts": {"runs": len(runs), "scored": len(scored),
                   "without_score": len(missing), "groups": len(groups)},
        "notes": notes,
        "warnings": list(dict.fromkeys(str(w.message) for w in caught)),
    }
    if per_run:
        out["runs"] = [{"path": r.path, "run": r.run, "run_id": r.run_id,
                        "labels": {k: columns[k][i] for k in keys},
                        "value": float(values[i]), "scored": r.value is not None}
                       for i, r in enumerate(scored)]
    return out


# ----------------------------------------------------------------------------- output


def group_name(labels: dict[str, str]) -> str:
    """``"gpt-4o · T3"``: a group's labels joined for a plot or a line of text."""
    return " · ".join(labels.values())


def column_titles(out: dict[str, Any]) -> dict[str, str]:
    """Column titles of the statistics, in the score's direction."""
    lower = out["direction"] == "lower is better"
    level = f"{out['confidence_level']:.0%}"
    return {
        "mean": f"mean [{level} CI]",
        "worst": "worst (max)" if lower else "worst",
        "cvar": f"CVaR@{out['alpha']:g}",
        "reliability": f"share ≤ {out['tau']:g}" if lower else f"Reliability@{out['tau']:g}",
    }


def render_reliability(out: dict[str, Any], console: Console) -> None:
    """Draw an ``estimate reliability`` summary: one row per group, then the definitions."""
    s, c = out["settings"], out["counts"]
    sources = "; ".join(f"{k} from {' / '.join(v)}" for k, v in out["by_sources"].items()
                        if v and (k == MODEL_KEY or v not in ([k], [f"meta[{k!r}]"])))
    console.print(
        f"Reliability of {escape(repr(out['score']))} on {c['scored']} runs from "
        f"{len(s['traces'])} trace file(s), by {escape(', '.join(out['by']))}"
        + (f" ({escape(sources)})" if sources else "") + f"; {out['direction']}")
    titles = column_titles(out)
    stats = ["n", *titles.values()]
    t = table(f"Reliability beyond the mean ([DMC] §4.4), {c['groups']} group(s)",
              [*out["by"], *stats], right=stats)
    for g in out["groups"]:
        t.add_row(*(escape(v) for v in g["labels"].values()), str(g["n"]),
                  f"{g['mean']:.3f} [{g['ci_low']:.3f}, {g['ci_high']:.3f}]",
                  f"{g['worst']:.3f}", f"{g['cvar']:.3f}", f"{g['reliability']:.1%}")
    console.print(t)
    lower = out["direction"] == "lower is better"
    worst = ("the largest score over a group's runs (the worst over the tested seeds)" if lower
             else "the smallest score over a group's runs (the floor over the tested seeds)")
    tail = "largest" if lower else "smallest"
    clears = f"≤ {out['tau']:g}" if lower else f"≥ {out['tau']:g}"
    console.print(
        f"[dim]worst = {worst}; "
        f"CVaR@{out['alpha']:g} = the mean of the {tail} {out['alpha']:g}·n scores, with "
        f"fractional weight on the boundary run; Reliability@τ = the share of runs scoring "
        f"{clears}. Intervals: {out['ci_method']} bootstrap of the mean, "
        f"{out['n_resamples']:,} draws "
        f"(seed {out['seed']}), bit-reproducible.[/]")
    for note in out["notes"]:
        console.print(f"[yellow]note:[/] {escape(note)}")
    for w in out["warnings"]:
        console.print(f"[yellow]warning:[/] {escape(w)}")
    if out.get("plot"):
        console.print(f"Wrote {escape(out['plot'])} (box per group: IQR, whiskers min–max, "
                      f"mean, worst case and CVaR@{out['alpha']:g} ticks)")


def plot_reliability(out: dict[str, Any], path: Path) -> None:
    """Box plot per group ([DMC] Figure 2): box = IQR, whiskers = min–max, dot = mean,
    diamond = worst case, tick = CVaR@α; rows sorted by mean, best at the top."""
    plt = pyplot()
    from matplotlib.patches import Rectangle

    lower = out["direction"] == "lower is better"
    values: dict[str, list[float]] = {}
    for r in out["runs"]:
        values.setdefault(group_name(r["labels"]), []).append(r["value"])
    # Best row at the top: barh-style axes count rows from the bottom.
    groups = sorted(out["groups"], key=lambda g: g["mean"], reverse=lower)
    height = 1.9 + 0.42 * len(groups)
    fig, ax = plt.subplots(figsize=(7.0, height), dpi=120)
    try:
        box, dark, tail = "#c6dbef", "#1f6fb4", "#d9541e"
        for y, g in enumerate(groups):
            x = np.asarray(values[group_name(g["labels"])])
            q1, med, q3 = np.percentile(x, [25, 50, 75])
            ax.hlines(y, x.min(), x.max(), color="#555555", lw=1.0, zorder=1)
            ax.vlines([x.min(), x.max()], y - 0.15, y + 0.15, color="#555555", lw=1.0,
                      zorder=1)
            ax.add_patch(Rectangle((q1, y - 0.3), q3 - q1, 0.6, facecolor=box,
                                   edgecolor=dark, lw=1.0, zorder=2))
            ax.vlines(med, y - 0.3, y + 0.3, color=dark, lw=1.5, zorder=3)
            ax.plot(g["mean"], y, "o", color="black", ms=5, zorder=4,
                    label="mean" if y == 0 else None)
            ax.plot(g["worst"], y, "D", color=tail, ms=5, zorder=4,
                    label="worst case" if y == 0 else None)
            ax.plot(g["cvar"], y, "|", color=tail, ms=16, mew=2.5, zorder=4,
                    label=f"CVaR@{out['alpha']:g}" if y == 0 else None)
            ax.text(1.01, y, f"{g['mean']:.3f}", transform=ax.get_yaxis_transform(),
                    va="center", fontsize=8)
        ax.set_yticks(range(len(groups)),
                      [f"{group_name(g['labels'])} (n={g['n']})" for g in groups])
        ax.set_ylim(-0.7, len(groups) - 0.3)
        ax.set_xlabel(f"{out['score']} ({out['direction']})")
        ax.set_title(f"{out['score']} by {', '.join(out['by'])}: box = IQR, whiskers = "
                     "min–max", fontsize=10)
        ax.grid(alpha=0.3, axis="x")
        fig.legend(frameon=False, fontsize=8, loc="lower center", ncol=3)
        fig.tight_layout(rect=(0.0, 0.35 / height, 1.0, 1.0))  # room for the legend
        fig.savefig(path)
    finally:
        plt.close(fig)


# ----------------------------------------------------------------------------- command


def reliability_command(
    traces: TracesOrDataset,
    by: Annotated[str, typer.Option(
        "--by", help="Grouping keys, comma-separated: system, task, seed, model (the run's "
        "meta 'model', else meta 'backbone', else its system) or any meta key of the runs.")
    ] = "system",
    score: Annotated[str | None, score_option(
        "The run-level or window-level Score name (default: the one name the runs "
        "record).")] = None,
    alpha: Annotated[float, typer.Option(
        "--alpha", help="CVaR tail fraction α in (0, 1].")] = 0.2,
    tau: Annotated[float, typer.Option(
        "--tau", help="Reliability@τ threshold: share of runs scoring ≥ τ (≤ τ with "
        "--lower-is-better).")] = 0.9,
    lower_is_better: Annotated[bool, typer.Option(
        "--lower-is-better", help="The score is an error or a cost: worst = largest, CVaR "
        "over the largest scores, Reliability@τ = share ≤ τ.")] = False,
    missing_as: Annotated[float | None, typer.Option(
        "--missing-as", help="Score runs that record no such score (e.g. failed runs) as this "
        "value (default: leave them out).", show_default=False)] = None,
    resamples: Annotated[int, resamples_option("Bootstrap draws of each group's mean.")] = 2000,
    seed: BootstrapSeed = 0,
    ci_method: Annotated[str, ci_method_option(
        "Bootstrap interval of the mean: BCa (best coverage in the study of "
        "docs/how-to/estimators.md), "
        "percentile ([DMC]'s) or basic.")] = "BCa",
    executor: Annotated[Executor, executor_option(
        "the bootstrap draws and a Parquet dataset's per-run stage")] = Executor.local,
    ray_address: RayAddress = None,
    json_output: JsonOutput = False,
    plot: Annotated[Path | None, plot_option(
        "a box plot per group with worst-case and CVaR ticks ([DMC] Figure 2)")] = None,
) -> None:
    """Reliability beyond the mean per group of runs: worst case, CVaR@α, Reliability@τ and a
    bootstrap CI of the mean ([DMC] §4.4)."""
    if missing_as is not None and not math.isfinite(missing_as):
        fail(f"agentlog estimate reliability: --missing-as must be a finite number; found "
             f"{missing_as:g}")
    try:
        _check_alpha_tau(alpha, tau)
        keys = parse_by(by)
        dataset = single_dataset(traces)  # agentlog export --format parquet
        paths = trace_files(trace_paths(traces)) if dataset is None else []
        files: list[Dataset] = [dataset] if dataset is not None else list(paths)
        with executing(executor, ray_address) as how:
            if dataset is not None:
                with dataset_errors(dataset):
                    names, runs_of = dataset_scores(dataset, how)
                    name, source = choose_score(names, score, f"the dataset {dataset}")
                    runs = runs_of(name)
            else:
                with trace_errors():  # the files stream: a bad one is found while reading it
                    name, source = choose_score(terminal_score_names(paths), score,
                                                len(paths))
                    runs = collect_scores(paths, name)
            out = summarize_reliability(runs, keys, score=name, alpha=alpha, tau=tau,
                                        n_resamples=resamples, seed=seed,
                                        lower_is_better=lower_is_better,
                                        missing_as=missing_as, ci_method=ci_method,
                                        executor=how,
                                        per_run=json_output or plot is not None)
    except BadInput as exc:
        fail(f"agentlog estimate reliability: {exc}")
    out["settings"] = {"traces": [str(p) for p in files], "score_source": source,
                       "executor": how}
    out["plot"] = str(plot) if plot is not None else None
    if plot is not None:
        write_plot("estimate reliability", plot, lambda: plot_reliability(out, plot))
    if json_output:
        print_json(out)
    else:
        render_reliability(out, stdout())
    raise typer.Exit(EXIT_OK)
