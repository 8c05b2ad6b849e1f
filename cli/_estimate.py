"""``agentlog estimate ...``: estimators over recorded traces (``estimate cess`` so far).

``estimate`` is a group of commands, one per estimator (listed in ``_app.py``).
``summarize_cess`` builds the JSON-ready dict (the ``--json`` output), ``render_cess``
draws it and ``plot_cess_budgets`` draws MAE across budgets ([SSC] Figure 3).

Example::

    $ agentlog demo --out runs/
    $ agentlog estimate cess runs/ --outcomes y.csv --predictions m.csv --plot budgets.png
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape

import agentlog as al
from agentlog.dataset import iter_runs as dataset_runs
from agentlog.records import Selection, iter_runs

from ._dataset_input import TracesOrDataset, single_dataset, trace_paths
from ._executor import Executor, RayAddress, executing, executor_option, needs_dataset
from ._inspect import table
from ._options import JsonOutput, plot_option
from ._output import (
    EXIT_OK,
    BadInput,
    dataset_errors,
    fail,
    fmt_num,
    print_json,
    pyplot,
    stdout,
    trace_errors,
    write_plot,
)
from ._verify_cmd import trace_files

if TYPE_CHECKING:  # the estimators load on first use, not when the CLI starts
    from agentlog.estimators.cess import CessData, CessResult

ORDERS = ("shrink-then-clip", "clip-then-shrink")
ANCHORS = ("prediction", "opened")
REPLACEMENTS = ("auto", "with", "without")
FORMS = {"with": "with replacement ([SSC] eq. 6)",
         "without": "without replacement (Des Raj's ordered form [Raj56])"}
SUPPORT_NOTE = (
    "Some runs gave zero probability to part of the pool (ρ > 0): their point estimates "
    "target the reachable mean θ+. The support interval (eq. 10) is an identification "
    "region: the values θ* could take if the unreachable candidates scored anywhere in "
    "[L, U], placed around that noisy point estimate. It is not a confidence interval (it "
    "carries no sampling error) and one run's interval can miss θ*."
)
METHODS = (  # (JSON key, column title, CessResult attribute)
    ("opened_mean", "Opened Mean", "opened_mean"),
    ("outcome_regression", "OR", "outcome_regression"),
    ("ipw", "IPW", "ipw"),
    ("dr_raw", "DR (raw)", "dr_raw"),
    ("cess", "CESS", "estimate"),
)
NO_CONDITION = "-"


def formula(order: str, anchor: str) -> str:
    """The CESS variant in the paper's notation, with its equation number."""
    base = "m̄" if anchor == "prediction" else "ō"
    if order == "clip-then-shrink":
        eq = " (eq. 13)" if anchor == "prediction" else " (eq. 12)"
        return f"Π[{base} + λ(Π[DR] − {base})]{eq}"
    return f"Π[{base} + λ(DR − {base})]" + (" (eq. 9)" if anchor == "prediction" else "")


def fmt3(x: float | None) -> str:
    """A value on the [-1, 1] evidence scale, three decimals ("-" when unknown)."""
    return "-" if x is None else f"{x:.3f}"


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def cess_module() -> Any:
    """``agentlog.estimators.cess``, imported on first use (it is not needed to start the CLI)."""
    from agentlog.estimators import cess

    return cess


def _table(path: Path, what: str) -> dict[Any, float]:
    if not path.exists():
        raise BadInput(f"{path}: no such file; pass the {what} table (CSV, JSON lines or "
                       "Parquet with candidate_id[, task] and a value column)")
    try:
        values: dict[Any, float] = cess_module().load_table(path)
        return values
    except al.MissingDependencyError as exc:
        raise BadInput(str(exc)) from exc
    except ValueError as exc:
        raise BadInput(f"{exc} (the {what} table)") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot be read as the {what} table ({exc}); pass a CSV, "
                       "JSON lines or Parquet file") from exc


def default_budget(traces: Sequence[al.Trace | Path | str], stream: str) -> tuple[int, str]:
    """``K`` when none is given: the budget every run recorded in its meta, else the longest
    run. The files stream one run at a time (a dataset's runs, a partition at a time)."""
    recorded = set()
    longest = 0
    dataset = single_dataset(traces)
    runs = (dataset_runs(dataset, ("selections",)) if dataset is not None
            else iter_runs(list(traces), name="traces"))
    for _, run in runs:
        if run.start is not None:
            recorded.add(run.start.meta.get("budget"))
        longest = max(longest, sum(1 for r in run.records
                                   if type(r) is Selection and r.name == stream))
    if len(recorded) == 1:
        (k,) = recorded
        if isinstance(k, int) and not isinstance(k, bool) and k >= 1:
            return k, "recorded in the runs' meta"
    return max(longest, 1), "the longest run"


def _mae(estimates: Any, truth: Any, cluster: Sequence[Any]) -> float:
    # Errors averaged within each question (cluster), then questions weighted equally
    # ([SSC] Appendix F).
    return float(cess_module().mae(estimates, truth, question=[str(c) for c in cluster]))


def _group_summary(
    data: CessData, res: CessResult, rows: np.ndarray[Any, np.dtype[np.intp]], label: str
) -> dict[str, Any]:
    out: dict[str, Any] = {"condition": label, "runs": len(rows)}
    for key, _, attr in METHODS:
        out[key] = _finite(float(np.mean(getattr(res, attr)[rows])))
    out["median_ess"] = _finite(float(np.median(res.ess[rows])))
    theta = data.theta_star[rows]
    known = bool(np.isfinite(theta).all())
    out["theta_star"] = _finite(float(theta.mean())) if known else None
    cluster = [data.cluster[i] if data.cluster[i] is not None else data.run_id[i] for i in rows]
    out["mae"] = ({key: _mae(getattr(res, attr)[rows], theta, cluster)
                   for key, _, attr in METHODS} if known else None)
    rho = data.rho[rows]
    if (rho > 0).any():
        low, high = res.support_low[rows], res.support_high[rows]
        out["support"] = {
            "mean_rho": float(rho.mean()),
            "runs_with_rho": int((rho > 0).sum()),
            "low": float(low.mean()),
            "high": float(high.mean()),
            "covers_theta_star": (int(((low <= theta) & (theta <= high)).sum())
                                  if known else None),
        }
    else:
        out["support"] = None
    return out


def summarize_cess(data: CessData, res: CessResult) -> dict[str, Any]:
    """Per-run and per-condition numbers of one CESS estimate (JSON-ready)."""
    runs = []
    for i in range(len(data)):
        runs.append({
            "run_id": data.run_id[i], "path": data.path[i], "task": data.task[i],
            "system": data.system[i], "condition": data.condition[i], "seed": data.seed[i],
            "cluster": data.cluster[i], "replicate": data.replicate[i],
            "rounds": int(res.n_rounds[i]), "n_pool": int(data.n_pool[i]),
            "replacement": str(res.replacement[i]),
            "m_bar": float(data.m_bar[i]), "rho": float(data.rho[i]),
            "theta_star": _finite(float(data.theta_star[i])),
            **{key: _finite(float(getattr(res, attr)[i])) for key, _, attr in METHODS},
            "ess": _finite(float(res.ess[i])), "max_weight": _finite(float(res.max_weight[i])),
            "min_ps": _finite(float(res.min_ps[i])),
            "support_low": _finite(float(res.support_low[i])),
            "support_high": _finite(float(res.support_high[i])),
        })
    labels = [c if c is not None else NO_CONDITION for c in data.condition]
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(labels):
        groups.setdefault(c, []).append(i)
    conditions = [_group_summary(data, res, np.asarray(ix, dtype=np.intp), c)
                  for c, ix in groups.items()]
    if len(groups) > 1:
        conditions.append(_group_summary(data, res, np.arange(len(data), dtype=np.intp),
                                         "all"))
    forms = [str(f) for f in res.replacement]
    return {
        "conditions": conditions,
        "replacement_runs": {f: forms.count(f) for f in FORMS if f in forms},
        "runs": runs,
        "theta_star_known": data.has_theta_star,
        "runs_without_theta_star": int((~np.isfinite(data.theta_star)).sum()),
        "note": res.note,
    }


def render_cess(summary: dict[str, Any], console: Console) -> None:
    """Draw a ``cess`` summary: estimates per condition, MAE against θ*, notes."""
    s = summary["settings"]
    console.print(
        f"CESS on {len(summary['runs'])} runs from {len(s['traces'])} trace file(s): "
        f"K = {s['budget']} ({escape(s['budget_source'])}), λ = {s['lam']:g}, "
        f"{escape(formula(s['order'], s['anchor']))}, streams "
        f"{escape(s['stream'])!s}/{escape(str(s['stop_stream']))}"
    )
    counts = summary["replacement_runs"]
    console.print(
        f"Sampling (--replacement {s['replacement']}): "
        + "; ".join(f"{escape(FORMS[f])} in {counts[f]} run(s)" for f in FORMS if f in counts)
    )
    conds = summary["conditions"]
    any_support = any(c["support"] for c in conds)
    names = ["runs", *(title for _, title, _ in METHODS), "median ESS"]
    extra = ["mean ρ", "support interval"] if any_support else []
    t = table("CESS estimates by condition (mean over runs; [SSC])",
              ["condition", *names, *extra], right=[*names, "mean ρ"])
    for c in conds:
        row = [escape(c["condition"]), str(c["runs"]),
               *(fmt3(c[key]) for key, _, _ in METHODS), fmt_num(c["median_ess"], 3)]
        if any_support:
            sup = c["support"]
            row += (["0", "-"] if sup is None else
                    [fmt_num(sup["mean_rho"], 3),
                     f"[{sup['low']:.3f}, {sup['high']:.3f}]"])
        t.add_row(*row)
    console.print(t)
    if summary["theta_star_known"]:
        cols = ["θ*", *(title for _, title, _ in METHODS)]
        cover = ["θ* in interval"] if any_support else []
        m = table("MAE against the pool target θ* (within question, then over questions)",
                  ["condition", *cols, *cover], right=[*cols, *cover])
        for c in conds:
            row = [escape(c["condition"]), fmt3(c["theta_star"]),
                   *(fmt3(c["mae"][key]) for key, _, _ in METHODS)]
            if any_support:
                sup = c["support"]
                row.append("-" if sup is None else f"{sup['covers_theta_star']}/{c['runs']}")
            m.add_row(*row)
        console.print(m)
    else:
        console.print(f"[dim]θ* unknown for {summary['runs_without_theta_star']} run(s): the "
                      "outcomes do not cover their whole pool, so there is no MAE.[/]")
    if any_support:
        console.print(f"[yellow]{escape(SUPPORT_NOTE)}[/]")
    for w in summary["warnings"]:
        console.print(f"[yellow]warning:[/] {escape(w)}")
    if summary.get("plot"):
        console.print(f"Wrote {escape(summary['plot'])} (MAE across budgets 1..{s['budget']})")
    console.print(f"[dim]{escape(summary['note'])}[/]")


def budget_curve(
    build: Callable[[int], CessData], budget: int, estimate_kwargs: dict[str, Any]
) -> dict[str, list[float]]:
    """MAE of Opened Mean and CESS at budgets 1..K, each from its own prefix (Figure 3)."""
    curve: dict[str, list[float]] = {"budget": [], "opened_mean": [], "cess": []}
    for k in range(1, budget + 1):
        data = build(k)
        res = data.estimate(**estimate_kwargs)
        clusters = [c if c is not None else r for c, r in zip(data.cluster, data.run_id,
                                                               strict=True)]
        curve["budget"].append(k)
        curve["opened_mean"].append(_mae(res.opened_mean, data.theta_star, clusters))
        curve["cess"].append(_mae(res.estimate, data.theta_star, clusters))
    return curve


def plot_cess_budgets(curve: dict[str, list[float]], path: Path, *, title: str) -> None:
    """Draw MAE across budgets ([SSC] Figure 3 style) into ``path``."""
    plt = pyplot()

    ks, om, ce = curve["budget"], curve["opened_mean"], curve["cess"]
    fig, ax = plt.subplots(figsize=(6.0, 3.8), dpi=120)
    try:
        ax.plot(ks, om, marker="o", color="#888888", label="Opened Mean")
        ax.plot(ks, ce, marker="s", color="#1f6fb4", label="CESS")
        for k, a, b in zip(ks, om, ce, strict=True):
            if a > 0:
                ax.annotate(f"{(b - a) / a:+.0%}", (k, b), textcoords="offset points",
                            xytext=(0, -14), ha="center", fontsize=8, color="#1f6fb4")
        ax.set_xlabel("budget K (rounds)")
        ax.set_ylabel("MAE against θ*")
        ax.set_xticks(ks)
        ax.set_ylim(bottom=0)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(frameon=False)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)


def cess_command(
    traces: TracesOrDataset,
    outcomes: Annotated[Path, typer.Option(
        "--outcomes", help="Evidence scores Y: CSV, JSON lines or Parquet with candidate_id"
        "[, task] and a value column (y, value, outcome, prediction or m).",
        show_default=False)],
    predictions: Annotated[Path, typer.Option(
        "--predictions", help="Outcome-model predictions m for every candidate of the pool "
        "(same format).", show_default=False)],
    lam: Annotated[float, typer.Option("--lam", min=0.0, max=1.0,
                                       help="Shrinkage λ in [0, 1].")] = 0.5,
    order: Annotated[str, typer.Option(
        "--order", help="shrink-then-clip (eq. 9, as cess.estimate) or clip-then-shrink "
        "(eq. 13).")
    ] = "shrink-then-clip",
    anchor: Annotated[str, typer.Option(
        "--anchor", help="Shrink toward the pool prediction m̄ ('prediction') or the Opened "
        "Mean ('opened', eq. 12).")] = "prediction",
    budget: Annotated[int | None, typer.Option(
        "--budget", min=1, help="K, the maximum budget (default: the budget recorded in the "
        "runs' meta, else the longest run).", show_default=False)] = None,
    stream: Annotated[str, typer.Option("--stream", help="The al.select stream of document "
                                        "choices.")] = "doc",
    stop_stream: Annotated[str, typer.Option(
        "--stop-stream", help="The al.proceed stream of stop decisions ('' for fixed-length "
        "search).")] = "stop",
    replacement: Annotated[str, typer.Option(
        "--replacement", help="auto (read each run's form off its logged vectors), with "
        "(eq. 6: opened documents keep a positive probability) or without (Des Raj's "
        "ordered form: the agent never reopens a document).")] = "auto",
    executor: Annotated[Executor, executor_option(
        "a Parquet dataset's per-run stage")] = Executor.local,
    ray_address: RayAddress = None,
    json_output: JsonOutput = False,
    plot: Annotated[Path | None, plot_option(
        "MAE of Opened Mean and CESS across budgets 1..K",
        needs="matplotlib and outcomes for the whole pool")] = None,
) -> None:
    """CESS estimates of the candidate-pool conclusion θ* from recorded runs ([SSC])."""
    cess = cess_module()
    if order not in ORDERS:
        fail(f"--order must be one of {', '.join(ORDERS)}; found {order!r}")
    if anchor not in ANCHORS:
        fail(f"--anchor must be one of {', '.join(ANCHORS)}; found {anchor!r}")
    if replacement not in REPLACEMENTS:
        fail(f"--replacement must be one of {', '.join(REPLACEMENTS)}; found {replacement!r}")
    # The traces stream (one run at a time) through every pass below: memory does not grow
    # with the files' size.
    try:
        dataset = single_dataset(traces)  # agentlog export --format parquet
        loaded = [dataset] if dataset is not None else trace_files(trace_paths(traces))
        with trace_errors(), dataset_errors(dataset):
            k, source = ((budget, "--budget") if budget is not None
                         else default_budget(loaded, stream))
        y = _table(outcomes, "outcomes")
        m = _table(predictions, "predictions")
    except BadInput as exc:
        fail(f"agentlog estimate cess: {exc}")
    stop = stop_stream or None
    how = "local"

    def build(kk: int) -> CessData:
        read = (cess.from_traces if dataset is None else
                lambda _, **kw: cess.from_dataset(dataset, executor=how, **kw))
        data: CessData = read(loaded, outcomes=y, predictions=m, stream=stream,
                              stop_stream=stop, budget=kk, replacement=replacement)
        return data

    kwargs: dict[str, Any] = {"lam": lam, "order": order, "anchor": anchor}
    with warnings.catch_warnings(record=True) as records, contextlib.ExitStack() as ray:
        warnings.simplefilter("always")
        try:
            needs_dataset(executor, dataset)
            how = ray.enter_context(executing(executor, ray_address))
            with trace_errors():
                data = build(k)
        except (ValueError, BadInput) as exc:
            fail(f"agentlog estimate cess: {exc}")
        if plot is not None and not data.has_theta_star:
            missing = int((~np.isfinite(data.theta_star)).sum())
            fail(f"agentlog estimate cess: --plot {plot} needs θ*, i.e. outcomes for the "
                 f"whole pool of every run; {missing} of {len(data)} runs lack some (see "
                 f"{outcomes}). Add the missing outcomes, or drop --plot")
        res = data.estimate(**kwargs)
        curve = None
        if plot is not None:
            curve = budget_curve(build, k, kwargs)
    caught = list(dict.fromkeys(str(w.message) for w in records))
    if plot is not None and curve is not None:
        title = f"MAE across budgets · λ = {lam:g}, {formula(order, anchor)}"
        write_plot("estimate cess", plot, lambda: plot_cess_budgets(curve, plot, title=title))
    summary = summarize_cess(data, res)
    summary["settings"] = {
        "traces": [str(p) for p in loaded], "outcomes": str(outcomes),
        "predictions": str(predictions), "budget": k, "budget_source": source, "lam": lam,
        "order": order, "anchor": anchor, "formula": formula(order, anchor),
        "stream": stream, "stop_stream": stop, "replacement": replacement,
        "executor": how,
    }
    summary["warnings"] = caught
    summary["plot"] = str(plot) if plot is not None else None
    if curve is not None:
        summary["budget_curve"] = curve
    if json_output:
        print_json(summary)
    else:
        render_cess(summary, stdout())
    raise typer.Exit(EXIT_OK)
