"""``agentlog certify TRACES... --plan plan.toml``: a certified leaderboard ([LBC] §3.4, §6.1).

The plan (TOML, ``certify.Plan``) declares the readouts, their tolerances and every constant
before any score is read. The command reads the runs of the traces (``certify.from_traces``),
decides which pairs may be compared from the plan and the sealed entries of the comparison
window alone (``certify.admissibility``), then certifies each admissible pair by eq. 4 and
draws the board: per system its scores and certified rank interval (pinned when it holds one
position), per pair its decision with ``Δ̂``, ``q`` and its degrees of freedom, ``ε̂_out``
and ``r`` (a pair whose variance one cluster dominates is labelled so), the sampling variance
used (``plan.sampling``), the conventional ladder R0–R5 beside it (Table 2), and the hashes
of the plan and of every input.

``load_plan`` turns a plan file into a ``Plan`` (or ``BadInput`` naming the file and the
field), ``certify_traces`` builds the ``BoardResult``, ``render_board`` draws
``BoardResult.to_dict()`` (the ``--json`` output; ``agentlog demo`` reuses it) and
``plot_rank_intervals`` draws [LBC] Figure 1.

Exit codes: 0 the board was computed (a refused or undecided pair is a result, not an
error), 2 bad input (a missing plan or tolerance, unreadable traces, inconsistent clusters, a
window no run enters, fewer than two systems, ...).

Example::

    $ agentlog demo --out runs/
    $ agentlog certify runs/variants --plan runs/plan.toml --plot ranks.png
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

import agentlog as al
from agentlog.dataset import read_table
from agentlog.records import iter_runs, trace_sha256

from ._dataset_input import Dataset, TracesOrDataset, single_dataset, trace_paths
from ._executor import Executor, RayAddress, executing, executor_option
from ._inspect import table
from ._options import json_option, plot_option, window_option
from ._output import (
    EXIT_OK,
    BadInput,
    dataset_errors,
    fail,
    print_json,
    pyplot,
    short_path,
    stdout,
    trace_errors,
    write_plot,
)
from ._verify_cmd import trace_files

if TYPE_CHECKING:  # the estimators load on first use, not when the CLI starts
    from agentlog.estimators.certify import BoardResult, CertifyData, Plan

PLAN_HINT = "see examples/plans/deep_research.toml for a complete plan"
# What `input_hashes` holds, read as "sha256 of ..." (the --json `inputs.hashed`).
TRACES_HASHED = "each trace file as this command read it"
DATASET_HASHED = "each trace file as the export recorded it in runs.source_sha256"
DATASET_ENTRIES = ("; the comparison window's entries were read from those files, each "
                   "checked against it first")
DECISIONS = {  # decision -> (label, colour)
    "certified": ("certified", "green"),
    "undecided-sampling": ("undecided (sampling)", "yellow"),
    "undecided-attribution": ("undecided (attribution)", "yellow"),
    "refused": ("refused", "red"),
    "not-enough-common-tasks": ("not enough common tasks", "magenta"),
}
SHOWN_HASHES = 4  # input files listed with their hash before "… N more (see --json)"
SHOWN_LIMITED = 3  # sampling-limited pairs explained before "… and N more"
SAMPLING = {  # plan.sampling -> how the header and the footnote name the sampling radius
    "cr2-bm-cf": "CR2 variance, Bell–McCaffrey df, Cornish–Fisher skewness terms",
    "cr2-bm": "CR2 variance, Bell–McCaffrey df",
    "cr1": "CR1 variance, t(G−1) as in [LBC] §6.1",
}


def certify_module() -> Any:
    """``agentlog.estimators.certify``, imported on first use (not needed to start the CLI)."""
    from agentlog.estimators import certify

    return certify


# ----------------------------------------------------------------------------- inputs


def _validation_message(exc: Exception) -> str:
    """pydantic's errors as ``field: message`` parts (``exc.errors()``), else ``str(exc)``."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc)
    parts = []
    for err in errors():
        loc = ".".join(str(x) for x in err.get("loc", ()))
        msg = str(err.get("msg", "")).removeprefix("Value error, ")
        if msg == "Field required":
            msg = "required, but the plan does not set it"
        parts.append(f"`{loc}`: {msg}" if loc else msg)
    return "; ".join(parts) or str(exc)


def load_plan(path: Path | None) -> Plan:
    """The plan of a TOML file, or ``BadInput`` naming the file, the field and what to do."""
    if path is None:
        raise BadInput("--plan is required: a certification plan (TOML) declares the readouts, "
                       "their tolerances and the constants before any score is read; "
                       f"{PLAN_HINT}")
    if path.is_dir():
        raise BadInput(f"{path}: is a folder; --plan takes one TOML file ({PLAN_HINT})")
    if not path.exists():
        raise BadInput(f"{path}: no such plan file; pass a TOML certification plan ({PLAN_HINT})")
    certify = certify_module()
    try:
        plan: Plan = certify.Plan.from_toml(path)
        return plan
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path}: is not a text (UTF-8 TOML) file ({exc.reason}); pass a TOML "
                       f"certification plan ({PLAN_HINT})") from exc
    except ValueError as exc:  # invalid TOML, or pydantic's ValidationError
        msg = _validation_message(exc)
        if msg.startswith(f"{path}: "):
            msg = msg[len(f"{path}: "):]
        raise BadInput(f"{path}: not a usable certification plan: {msg}") from exc
    except OSError as exc:
        raise BadInput(f"{path}: cannot be read ({exc.strerror or exc}); check its "
                       "permissions") from exc


def _windows_present(traces: Sequence[al.Trace | Path]) -> list[str]:
    return sorted({w.name for _, r in iter_runs(list(traces), name="traces")
                   for w in r.windows})


def certify_traces(traces: Sequence[al.Trace | Path], plan: Plan, *,
                   window: str | None = None, calibrate: bool = True,
                   executor: str = "local") -> tuple[BoardResult, CertifyData]:
    """``from_traces`` → ``admissibility`` (before any score is read) → ``certify``.

    Files stream one run at a time; wrap the call in ``trace_errors()`` to turn an
    unreadable one into ``BadInput``. The calibration's draws run on ``executor``.

    Raises:
        BadInput: the library refused the input (its message names the file and what to
            do), no run enters the comparison window, or fewer than two systems ran.
    """
    certify = certify_module()
    win = window if window is not None else plan.window
    try:
        data = certify.from_traces(traces, plan=plan, window=win)
    except ValueError as exc:
        raise BadInput(str(exc)) from exc
    where = f"the {len(traces)} trace file(s)"
    if data.entries is not None and not data.entries.entries:
        present = ", ".join(_windows_present(traces)) or "none"
        raise BadInput(_no_entries(win, window, f"{len(traces)} trace file(s)", present))
    return certify_data(data, plan, where, window=win, calibrate=calibrate,
                        executor=executor), data


def certify_dataset(dataset: Dataset, plan: Plan, *, window: str | None = None,
                    calibrate: bool = True, executor: str = "local"
                    ) -> tuple[BoardResult, CertifyData]:
    """``certify.from_dataset`` → ``admissibility`` → ``certify`` over a Parquet dataset.

    With a comparison window, admissibility reads the runs' sealed entries, which the
    dataset does not hold: they are read from the trace files it was exported from (its
    ``runs`` table's ``source``), which must still exist with the SHA-256 the export
    recorded (``source_sha256``). Wrap the call in ``dataset_errors()``.

    Raises:
        BadInput: as ``certify_traces``; or a window whose source traces are gone or
            changed since the export.
    """
    certify = certify_module()
    win = window if window is not None else plan.window
    entries = None
    if win is not None:
        entries = dataset_entries(dataset, plan, win, flag=window is not None)
        if not entries.entries:
            present = sorted({w for w in read_table(dataset, "windows", ["name"])
                              .column("name").to_pylist()})
            raise BadInput(_no_entries(win, window, f"the dataset {dataset}",
                                       ", ".join(present) or "none"))
    try:
        data = certify.from_dataset(dataset, plan=plan, window=win, entries=entries,
                                    executor=executor)
    except ValueError as exc:
        raise BadInput(str(exc)) from exc
    return certify_data(data, plan, f"the dataset {dataset}", window=win,
                        calibrate=calibrate, executor=executor), data


def dataset_entries(dataset: Dataset, plan: Plan, window: str, *, flag: bool) -> Any:
    """The sealed entries of ``window`` from the traces ``dataset`` was exported from
    (``certify.EntryTable.from_traces``), after checking each still has the SHA-256 its
    export recorded; ``BadInput`` naming the fix otherwise."""
    runs = read_table(dataset, "runs", ["source", "source_sha256"])
    recorded = dict(zip(runs.column("source").to_pylist(),
                        runs.column("source_sha256").to_pylist(), strict=True))
    where = "--window" if flag else "the plan's `window`"
    need = (f"the comparison window `{window}` ({where}) decides admissibility from each "
            f"run's sealed entry, which the dataset {dataset} does not hold; they are read "
            f"from the {len(recorded)} trace file(s) it was exported from")
    fix = ("pass those traces instead of the dataset (agentlog certify TRACES --plan ...), "
           "or a plan without a comparison window")
    gone = [p for p in recorded if not Path(p).is_file()]
    if gone:
        raise BadInput(f"{need}, but {len(gone)} of them are gone (e.g. {gone[0]}, named as "
                       f"the export was given it, relative to where it ran); {fix}")
    changed = []
    with trace_errors():
        for path, digest in recorded.items():
            if trace_sha256(path) != digest:
                changed.append(path)
    if changed:
        raise BadInput(f"{need}, but {len(changed)} of them changed since the export (their "
                       f"SHA-256 differs from the one it recorded, e.g. {changed[0]}); export "
                       f"them again into a fresh folder, or {fix}")
    with trace_errors():
        return certify_module().EntryTable.from_traces(list(recorded), window=window,
                                                       select=plan.select)


def _no_entries(win: str | None, window: str | None, where: str, present: str) -> str:
    flag = "--window" if window is not None else "the plan's `window`"
    return (f"no run enters window `{win}` ({flag}) in {where}; windows present: {present}. "
            "Pass --window with the comparison window whose sealed entries decide "
            "admissibility")


def certify_data(data: CertifyData, plan: Plan, where: str, *, window: str | None,
                 calibrate: bool, executor: str) -> BoardResult:
    """``admissibility`` (from the plan and the entries, before any score is read) →
    ``certify``, on ``from_traces``'s or ``from_dataset``'s data.

    Raises:
        BadInput: fewer than two systems ran, or the library refused the input.
    """
    certify = certify_module()
    if len(data.systems) < 2:
        raise BadInput(f"{where} hold runs of one system "
                       f"({', '.join(map(repr, data.systems))})"
                       + (f" matching the plan's select = {dict(plan.select)}" if plan.select
                          else "")
                       + "; a leaderboard compares at least two: record each system's runs "
                       "with al.record(..., system=NAME)")
    try:
        # Decided from the plan and the sealed entries only: the scores are not passed.
        adm = certify.admissibility(data.entries, plan=plan, window=window,
                                    systems=data.systems)
        board: BoardResult = certify.certify(data, plan=plan, admissibility=adm,
                                             calibrate=calibrate, executor=executor)
    except ValueError as exc:
        raise BadInput(str(exc)) from exc
    return board


def backbones_of(data: CertifyData) -> dict[str, list[str]]:
    """``system -> backbones`` its runs record in ``meta["backbone"]`` (empty without entries)."""
    out: dict[str, set[str]] = {}
    if data.entries is None:
        return {}
    for e in data.entries.entries:
        if e.backbone is not None:
            out.setdefault(e.system, set()).add(e.backbone)
    return {s: sorted(v) for s, v in sorted(out.items())}


# ----------------------------------------------------------------------------- output


def fmt_rank(row: Mapping[str, Any]) -> str:
    """``"2–5"``, or ``"1 ●"`` for a pinned position."""
    lo, hi = row["rank"]
    return f"{lo} ●" if row["pinned"] else f"{lo}–{hi}"


def _num(x: float | None, fmt: str = ".3f") -> str:
    return "-" if x is None else format(x, fmt)


def _flagged(pair: Mapping[str, Any]) -> bool:
    """An undecided-sampling pair whose reason is worth a line: a dominant cluster, or zero
    variance (its q is infinite, so ``to_dict`` gives None)."""
    return pair.get("dominant_cluster") is not None or pair["q"] is None


def fmt_q(pair: Mapping[str, Any]) -> str:
    """``q``: ``∞`` for a zero-variance pair, which is never certified."""
    if pair["q"] is None and pair["decision"] == "undecided-sampling":
        return "∞"
    return _num(pair["q"])


def fmt_eps(pair: Mapping[str, Any]) -> str:
    """``ε̂_out``: ``∞`` for a refused pair with no finite radius (``to_dict`` gives None)."""
    if pair["eps_out"] is None:
        return "∞" if pair["decision"] == "refused" else "-"
    return f"{pair['eps_out']:.3g}"


def decision_text(pair: Mapping[str, Any], *, markup: bool = True) -> str:
    label, colour = DECISIONS[pair["decision"]]
    if pair.get("dominant_cluster") is not None and pair["decision"] == "undecided-sampling":
        label = "undecided (sampling; one cluster dominates)"
    if pair["decision"] == "certified":
        label = f"{pair['better']} ≻ {pair['worse']}"
        label = f"certified: {escape(label) if markup else label}"
    return f"[{colour}]{label}[/]" if markup else label


def direction(board: Mapping[str, Any], readout: str) -> str:
    if readout == "composite":
        return "higher is better"
    return f"{board['plan']['readouts'][readout]['better']} is better"


def _arrow(board: Mapping[str, Any], readout: str) -> str:
    return "↑" if direction(board, readout).startswith("higher") else "↓"


def render_board(board: Mapping[str, Any], console: Console, *,
                 backbones: Mapping[str, Sequence[str]] | None = None) -> None:
    """Draw ``BoardResult.to_dict()``: systems with rank intervals, pairs, ladder, hashes."""
    plan = board["plan"]
    target = board["target"]
    name = f" {plan['name']!r}" if plan.get("name") else ""
    n = len(board["systems"])
    adm = board["admissibility"]
    console.print(
        f"[bold]Certified leaderboard{escape(name)}[/] ([LBC] §3.4): {n} systems ranked "
        f"on [bold]{escape(target)}[/] ({direction(board, target)}), {board['n_clusters']} "
        f"task clusters, Bonferroni over {board['family_size']} "
        f"pair{'s' * (board['family_size'] != 1)} at δ′ = "
        f"{plan['delta_prime']:g} ({SAMPLING[board['sampling']]}); admissibility from "
        + (f"the sealed entries of window `{escape(str(adm['window']))}`"
           if adm["source"] == "entries" else "the plan's declarations (no entries)"))
    readouts = board["readouts"]
    score_cols = [f"composite {_arrow(board, 'composite')}"] + [
        f"{r} {_arrow(board, r)}" for r in readouts]
    target_col = score_cols[0] if target == "composite" else score_cols[1 + readouts.index(target)]
    score_cols = [f"{c} (target)" if c == target_col else c for c in score_cols]
    show_bb = bool(backbones)
    cols = ["rank", "system", *(["backbone"] if show_bb else []), "tasks", *score_cols]
    pinned = "; ● pinned" if any(row["pinned"] for row in board["systems"]) else ""
    t = table(f"Systems, best first on the target (rank: certified interval{pinned})", cols,
              right=["tasks", *score_cols])
    for row in board["systems"]:
        cells = [fmt_rank(row), escape(row["system"])]
        if show_bb:
            assert backbones is not None
            cells.append(escape(", ".join(backbones.get(row["system"], [])) or "-"))
        cells += [str(row["n_tasks"]), _num(row["composite"]),
                  *(_num(row["scores"][r]) for r in readouts)]
        t.add_row(*cells)
    console.print(t)
    pairs = board["pairs"]
    nums = ["Δ̂", "q", "df", "ε̂_out", "r", "tasks"]
    t = table(f"Pairs on {target} (certified iff |Δ̂| > q + ε̂_out + r, eq. 4)",
              ["pair", "decision", *nums], right=nums)
    for p in pairs:
        t.add_row(f"{escape(p['a'])} vs {escape(p['b'])}", decision_text(p),
                  _num(p["delta"], "+.3f"), fmt_q(p), _num(p.get("df"), ".3g"), fmt_eps(p),
                  "-" if p["r"] is None else f"{p['r']:.3g}", str(p["n_tasks"]))
    console.print(t)
    counts = board["counts"]
    console.print("  " + ", ".join(f"{counts[k]} {DECISIONS[k][0]}" for k in DECISIONS
                                   if counts[k])
                  + f" of {len(pairs)} pair{'s' * (len(pairs) != 1)}")
    limited = [p for p in pairs if p["decision"] == "undecided-sampling" and _flagged(p)]
    for p in pairs:
        if (p["decision"] in ("refused", "not-enough-common-tasks", "undecided-attribution")
                or p in limited[:SHOWN_LIMITED]):
            colour = DECISIONS[p["decision"]][1]
            console.print(f"  [{colour}]{escape(decision_text(p, markup=False))}[/] "
                          f"{escape(p['a'])} vs {escape(p['b'])}: {escape(p['reason'] or '')}")
    if len(limited) > SHOWN_LIMITED:
        console.print(f"  … and {len(limited) - SHOWN_LIMITED} more sampling-limited pair(s) "
                      "with a dominant cluster or zero variance (reasons in --json)")
    console.print(f"[dim]Δ̂ = mean over common tasks of a − b on {escape(target)}, oriented "
                  "so that a positive value favours a; q = Bonferroni t(df) half-width of the "
                  f"cluster-robust error ({SAMPLING[board['sampling']]}; df = its degrees of "
                  "freedom, below 3 when one cluster dominates); ε̂_out + r = the nuisance "
                  "radius (eq. 3, Def. 7), decided from the entries before any score was "
                  "read; a refused pair has no admissible comparison under this plan (its Δ̂ "
                  "is shown, never used).[/]")
    for cycle in board["cycles"]:
        console.print(f"[yellow]warning:[/] certified relations form a cycle among "
                      f"{escape(', '.join(cycle))}; their intervals are never pinned")
    _render_ladder(board, console)
    _render_calibration(board, console)
    _render_hashes(board, console)


def _render_ladder(board: Mapping[str, Any], console: Console) -> None:
    t = table("Conventional ladder beside the certificate ([LBC] Table 2)",
              ["rule", "analysis", "adds", "pairs ordered"], right=["pairs ordered"])
    for r in board["ladder"]:
        t.add_row(r["rule"], escape(r["label"]), escape(r["adds"]),
                  f"{r['decided']} of {r['out_of']}")
    console.print(t)


def _render_calibration(board: Mapping[str, Any], console: Console) -> None:
    c = board["calibration"]
    if not c:
        return
    rate = "-" if c["family_rate"] is None else f"{c['family_rate']:.1%}"
    c_star = "-" if c["c_star"] is None else f"{c['c_star']:.3g}"
    jac = ("" if c["jaccard_mean"] is None else
           f"; leave one cluster out: Jaccard mean {c['jaccard_mean']:.2f} (min "
           f"{c['jaccard_min']:.2f}), {c['flips']} relation(s) reversed")
    mct = board["plan"]["min_common_tasks"]
    if c["leave_one_out"] and all(p["n_tasks"] - 1 < mct for p in board["pairs"]):
        jac += (f" (with a cluster left out fewer than min_common_tasks = {mct} common tasks "
                "remain, so nothing can be certified there: record more tasks)")
    console.print(f"Calibration (Appendix F.5, {c['n_resamples']:,} sign-flip draws, seed "
                  f"{c['seed']}): family-wise false-certification rate {rate} (nominal "
                  f"{c['nominal']:.0%}), radius scale c* = {c_star}{jac}")
    if c.get("warning"):
        console.print(f"  [yellow]warning:[/] {escape(c['warning'])}")


def _render_hashes(board: Mapping[str, Any], console: Console) -> None:
    inputs = board["input_hashes"]
    console.print(f"plan sha256 {board['plan_hash']}  ·  scores sha256 {board['scores_hash']}")
    read = board.get("inputs", {})
    if "dataset" in read:  # the hashes are the export's, not of files read now
        console.print(f"inputs: {len(inputs)} trace file(s) exported into the Parquet dataset "
                      f"{escape(str(read['dataset']))} (sha256 of {escape(read['hashed'])}"
                      + ("):" if len(inputs) <= SHOWN_HASHES else "; each in --json)"))
    else:
        console.print(f"inputs: {len(inputs)} trace file(s)"
                      + (":" if len(inputs) <= SHOWN_HASHES else " (sha256 of each in --json)"))
    if len(inputs) <= SHOWN_HASHES:
        for path, digest in inputs.items():
            console.print(f"  {digest}  {escape(short_path(path))}")


def plot_rank_intervals(board: Mapping[str, Any], path: Path) -> None:
    """Certified rank intervals ([LBC] Figure 1): one row per system, sorted by score
    (best at the top); a bar over the interval, a single marker when the rank is pinned, the
    score on the right. Systems refused against every other one are drawn grey."""
    plt = pyplot()

    rows = board["systems"]
    target = board["target"]
    n = len(rows)

    def score(row: Mapping[str, Any]) -> str:
        value = row["composite"] if target == "composite" else row["scores"][target]
        return "-" if value is None else f"{value:.3f}"

    fig, ax = plt.subplots(figsize=(6.4, 1.4 + 0.38 * n), dpi=120)
    try:
        certify_module().draw_rank_intervals(
            ax, [row["system"] for row in rows],
            {row["system"]: tuple(row["rank"]) for row in rows},
            labels={row["system"]: score(row) for row in rows},
            refused=refused_everywhere(board["pairs"]))
        ax.text(1.01, -0.5, target, transform=ax.get_yaxis_transform(), va="bottom",
                fontsize=8, style="italic")
        pinned = "; ● pinned" if any(row["pinned"] for row in rows) else ""
        ax.set_title(f"Certified rank intervals on {target} ({direction(board, target)})"
                     f"{pinned}", fontsize=9)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)


def refused_everywhere(pairs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Systems every pair of which was refused (``BoardResult.to_dict()["pairs"]``), in pair
    order."""
    seen: dict[str, list[bool]] = {}
    for p in pairs:
        for s in (p["a"], p["b"]):
            seen.setdefault(s, []).append(p["decision"] == "refused")
    return [s for s, v in seen.items() if all(v)]


# ----------------------------------------------------------------------------- command


def certify_command(
    traces: TracesOrDataset,
    plan_path: Annotated[Path | None, typer.Option(
        "--plan", help="The certification plan (TOML): readouts with their tolerances, δ, δ′, "
        "the comparison window, conditions and constants ([LBC] Def. 1, Def. 7).",
        show_default=False)] = None,
    window: Annotated[str | None, window_option(
        "The comparison window whose sealed entries decide admissibility (default: the "
        "plan's `window`).")] = None,
    executor: Annotated[Executor, executor_option(
        "the calibration's sign-flip draws and a Parquet dataset's per-run stage")
    ] = Executor.local,
    ray_address: RayAddress = None,
    json_output: Annotated[bool, json_option(
        "Print the board as JSON (BoardResult.to_dict(), and `inputs`: what was read and "
        "hashed).")] = False,
    plot: Annotated[Path | None, plot_option(
        "the certified rank intervals ([LBC] Figure 1)")] = None,
) -> None:
    """Certify a leaderboard: admissibility from the sealed entries before any score, eq. 4 per
    pair, rank intervals, the R0–R5 ladder ([LBC]). TRACES may be one Parquet dataset folder
    (agentlog export --format parquet). Exit 0 board computed, 2 bad input."""
    try:
        plan = load_plan(plan_path)
        dataset = single_dataset(traces)
        with executing(executor, ray_address) as how:
            if dataset is not None:
                with dataset_errors(dataset):
                    board, data = certify_dataset(dataset, plan, window=window,
                                                  executor=how)
                hashed = DATASET_HASHED + (DATASET_ENTRIES if data.entries is not None
                                           else "")
                inputs: dict[str, Any] = {"dataset": str(dataset), "hashed": hashed}
            else:
                files = trace_files(trace_paths(traces))
                with trace_errors():  # the files stream: a bad one is found while reading it
                    board, data = certify_traces(files, plan, window=window, executor=how)
                inputs = {"traces": [str(p) for p in trace_paths(traces)],
                          "hashed": TRACES_HASHED}
    except BadInput as exc:
        fail(f"agentlog certify: {exc}")
    out = {**board.to_dict(), "inputs": {**inputs, "executor": how}}
    if plot is not None:
        write_plot("certify", plot, lambda: plot_rank_intervals(out, plot))
    if json_output:
        print_json(out)
    else:
        console = stdout()
        render_board(out, console, backbones=backbones_of(data))
        if plot is not None:
            console.print(f"Wrote {escape(str(plot))} (certified rank intervals, [LBC] "
                          "Figure 1)")
    raise typer.Exit(EXIT_OK)
