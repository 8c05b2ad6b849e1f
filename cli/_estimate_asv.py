"""``agentlog estimate asv``: the four-corner ASV face of recorded transitions ([ASV]).

Reads the channel Score records of a window's transitions (``asv.from_traces``: layouts
reduced within channel, waves kept apart), builds the face of the first wave (trajectory =
the run's recorded system/task/seed key or ``--trajectory-key``, target = task) and
summarises it with trajectory-block bootstrap intervals (BCa unless ``--ci-method``):
``summarize_asv`` builds the JSON-ready dict (the ``--json`` output), ``render_asv`` draws
it and ``plot_asv_face`` draws the per-transition gains and the mean Ω.

Example::

    $ agentlog demo --out runs/
    $ agentlog estimate asv runs/ --channels direct,quote --plot face.png
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape

import agentlog as al

from ._dataset_input import TracesOrDataset, single_dataset, trace_paths
from ._executor import Executor, RayAddress, executing, executor_option, needs_dataset
from ._inspect import table
from ._options import (
    BootstrapSeed,
    JsonOutput,
    ci_method_option,
    plot_option,
    resamples_option,
    score_option,
    window_option,
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

if TYPE_CHECKING:  # the estimators load on first use, not when the CLI starts
    from agentlog.estimators.asv import AsvData, AsvFace, AsvSummaryResult

WEIGHTINGS = ("empirical", "equal-target")
CI_METHODS = ("BCa", "percentile", "basic")  # scipy.stats.bootstrap's names; BCa the default
STATISTICS = (  # (key in AsvSummaryResult.values, label; {0}/{1} are the channel names)
    ("mean_interaction", "mean Ω"),
    ("median_interaction", "median Ω"),
    ("trimmed_mean_interaction", "10%-trimmed mean Ω"),
    ("share_negative_interaction", "share of negative Ω"),
    ("mean_gain0", "mean gain G^{0}"),
    ("mean_gain1", "mean gain G^{1}"),
    ("mean_sign_disagreement", "sign disagreement (G^{0} vs G^{1})"),
    ("mean_diagonal", "diagonal F_{1}(x+) − F_{0}(x−)"),
    ("mean_state_part", "  state part ½(G^{0} + G^{1})"),
    ("mean_view_part", "  view part ½(Δ_ρF(x−) + Δ_ρF(x+))"),
)
SHARES = {"share_negative_interaction", "mean_sign_disagreement"}
RETRY = (("cross_channel", "cross-channel (every wave pairing)"),
         ("same_channel", "same-channel retry (wave pairs)"),
         ("excess", "excess"))


def asv_module() -> Any:
    """``agentlog.estimators.asv``, imported on first use (not needed to start the CLI)."""
    from agentlog.estimators import asv

    return asv


def parse_channels(text: str) -> tuple[str, str]:
    """``"direct,quote"`` → ``("direct", "quote")``: two different, non-empty names."""
    names = [c.strip() for c in text.split(",")]
    if len(names) != 2 or not all(names) or names[0] == names[1]:
        raise BadInput(f"--channels must name two different channels as ρ0,ρ1 (e.g. "
                       f"direct,quote); found {text!r}")
    return names[0], names[1]


def scored_cells(traces: Sequence[al.Trace | Path | str], executor: str = "local"
                 ) -> dict[str, dict[str, set[str]]]:
    """``{channel: {window name: {score names}}}`` of the Score records tied to a transition
    (``asv.channel_scores``: recorded traces and channel replays' outputs alike; a dataset's
    on ``executor``)."""
    source = traces[0] if len(traces) == 1 else list(traces)  # a dataset folder alone
    return asv_module().channel_scores(  # type: ignore[no-any-return]
        source, executor=executor)


def parse_score(text: str | None) -> str | tuple[str, str] | None:
    """``--score``: one name both channels record, or ``NAME0,NAME1`` (ρ0's, then ρ1's)."""
    if text is None:
        return None
    names = [n.strip() for n in text.split(",")]
    if len(names) == 1 and names[0]:
        return names[0]
    if len(names) == 2 and all(names):
        return names[0], names[1]
    raise BadInput(f"--score must be a score name both channels record (e.g. margin) or one "
                   f"per channel as ρ0,ρ1 (e.g. f1,judge_f1); found {text!r}")


def _names(names: set[str]) -> str:
    return ", ".join(sorted(names)) or "none"


def choose_cells(
    cells: dict[str, dict[str, set[str]]],
    channels: tuple[str, str],
    window: str | None,
    score: str | tuple[str, str] | None,
    n_files: int,
) -> tuple[str, str, str | tuple[str, str], str]:
    """The window and score to analyse, and where each choice came from.

    Unknown channels list the channels present. Without ``--window`` (``--score``) the one
    window (score name) both channels scored is used; several are an error naming them.
    Channels whose scorers name their readouts differently compare their one score each
    (a pair ``(name under ρ0, name under ρ1)``); with more, the error lists each channel's
    names and the ``--score NAME0,NAME1`` to pass.
    """
    missing = [c for c in channels if c not in cells]
    if missing:
        present = ", ".join(sorted(cells)) or "none"
        raise BadInput(f"no transition scores on channel(s) {', '.join(missing)} in {n_files} "
                       f"trace file(s); channels present: {present}. Pass two of them to "
                       "--channels, or score the transitions' states first (al.score(..., "
                       "channel=, transition=, state_hash=))")
    both = set(cells[channels[0]]) & set(cells[channels[1]])
    if window is None:
        if len(both) != 1:
            found = ", ".join(sorted(both)) or "none"
            raise BadInput(f"channels {channels[0]} and {channels[1]} both score the "
                           f"transitions of windows: {found}; pass --window to pick one")
        (window,) = both
        window_source = "the window both channels score"
    else:
        if window not in both:
            found = ", ".join(sorted(both)) or "none"
            raise BadInput(f"no transitions of window {window!r} are scored on both "
                           f"channels {channels[0]} and {channels[1]}; windows scored on "
                           f"both: {found}")
        window_source = "--window"
    own = (cells[channels[0]][window], cells[channels[1]][window])
    names = own[0] & own[1]
    recorded = (f"{channels[0]} records {_names(own[0])}; {channels[1]} records "
                f"{_names(own[1])}")
    if isinstance(score, tuple):
        absent = [f"{n!r} on {c}" for n, c, held in zip(score, channels, own, strict=True)
                  if n not in held]
        if absent:
            raise BadInput(f"no {' and no '.join(absent)} for window {window!r}: {recorded}")
        return window, window_source, score, "--score"
    if score is not None:
        if score not in names:
            raise BadInput(f"no {score!r} scores on both channels for window {window!r}: "
                           f"{recorded}. Pass --score with a name both record, or one per "
                           "channel as --score NAME0,NAME1")
        return window, window_source, score, "--score"
    if len(names) == 1:
        (score,) = names
        return window, window_source, score, "the score both channels record"
    if len(names) > 1:
        raise BadInput(f"window {window!r} has several scores on both channels "
                       f"({', '.join(sorted(names))}); pass --score to pick one")
    if len(own[0]) == 1 and len(own[1]) == 1:
        pair = (next(iter(own[0])), next(iter(own[1])))
        return window, window_source, pair, "the one score each channel records"
    raise BadInput(f"channels {channels[0]} and {channels[1]} record no score of the same "
                   f"name for window {window!r}: {recorded}. Pass one per channel as "
                   "--score NAME0,NAME1 (ρ0's, then ρ1's)")


def retry_baseline(
    data: AsvData, *, n_resamples: int, seed: int
) -> tuple[dict[str, Any] | None, str | None]:
    """Cross-channel vs same-channel retry sign disagreement when each channel has ≥ 2 waves.

    The cohort is the transitions complete in every wave of both channels. Returns the
    JSON-ready result (or None) and a note saying why there is none.
    """
    gains = [data.wave_gains(c) for c in data.channels]
    # A channel's waves are those in which it scored something.
    cols = [np.flatnonzero(np.isfinite(g).any(axis=0)) for g in gains]
    if min(len(c) for c in cols) < 2:
        return None, None
    a, b = gains[0][:, cols[0]], gains[1][:, cols[1]]
    rows = np.flatnonzero(np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1))
    if rows.size == 0:
        return None, ("no transition is complete in every wave of both channels: no retry "
                      "baseline")
    asv = asv_module()
    res = asv.retry_disagreement(a[rows], b[rows], trajectory=data.trajectory[rows],
                                 n_resamples=n_resamples, seed=seed)
    waves = [int(w) for w in data.waves]
    return {
        "n_transitions": int(rows.size),
        "n_trajectories": len(set(data.trajectory[rows].tolist())),
        "waves": {data.channels[0]: [waves[i] for i in cols[0]],
                  data.channels[1]: [waves[i] for i in cols[1]]},
        **{key: {"value": getattr(res, key), "interval": list(res.confidence_interval(key))}
           for key, _ in RETRY},
    }, None


def summarize_asv(data: AsvData, face: AsvFace, summary: AsvSummaryResult) -> dict[str, Any]:
    """``summary.to_dict()`` plus the counts of the face (JSON-ready)."""
    out: dict[str, Any] = summary.to_dict()
    kept = face.kept
    out["channels"] = list(data.channels)
    out["counts"] = {
        "transitions": len(data.transitions),
        "complete": len(face),
        "dropped_incomplete": len(face.dropped),
        "trajectories": len(set(data.trajectory.tolist())),
        "trajectories_complete": len(set(data.trajectory[kept].tolist())),
        "targets": len(set(data.target[kept].tolist())),
        "sign_disagreements": int(face.sign_disagree.sum()),
        "negative_interactions": int((face.interaction < 0).sum()),
        "waves": [int(w) for w in data.waves],
        "layouts": {c: list(v) for c, v in data.layouts.items()},
    }
    return out


def _label(template: str, channels: Sequence[str]) -> str:
    return template.format(channels[0], channels[1])


def _value(key: str, x: float) -> str:
    return f"{x:.1%}" if key in SHARES else f"{x:+.3f}"


def _ci(key: str, interval: Sequence[float]) -> str:
    return f"[{_value(key, interval[0])}, {_value(key, interval[1])}]"


def calibration_lines(out: dict[str, Any]) -> list[str]:
    """Remark 2 in words: what survives independent positive-affine recalibration."""
    c0, c1 = out["channels"]
    cal = out["calibration"]
    stats = out["statistics"]
    disagree = stats["mean_sign_disagreement"]["value"]
    g0, g1 = stats["mean_gain0"]["value"], stats["mean_gain1"]["value"]
    lines = [
        f"Survives any recalibration F̃ = αF + β (α > 0) of either channel: the sign of every "
        f"gain, the mean gains' signs ({c0} {g0:+.3f}, {c1} {g1:+.3f}), and the cross-channel "
        f"sign disagreement ({disagree:.1%} of transitions).",
    ]
    if cal["mean_interaction_sign"] == "invariant":
        lines.append(f"The sign of the mean Ω survives too: {cal['explanation']}.")
    else:
        lines.append(f"The sign of the mean Ω does not: {cal['explanation']}.")
    share = cal["transition_interaction_signs_invariant"]
    lines.append(f"Per transition, Ω's sign survives on {share:.1%} of transitions (those "
                 "whose gains have opposite signs or one is zero); elsewhere it depends on "
                 "the channels' relative scales.")
    return lines


def _score_label(settings: dict[str, Any]) -> str:
    if settings.get("score") is not None:
        return f"score {settings['score']!r}"
    return "scores " + " / ".join(f"{n!r} ({c})" for c, n in settings["scores"].items())


def render_asv(out: dict[str, Any], console: Console) -> None:
    """Draw an ``estimate asv`` summary: the face's statistics, retry baseline, calibration."""
    s, n = out["settings"], out["counts"]
    c0, c1 = out["channels"]
    console.print(
        f"ASV on {n['complete']} transitions of window {escape(repr(s['window']))} from "
        f"{n['trajectories_complete']} trajectories in {len(s['traces'])} trace file(s): "
        f"ρ0 = {escape(c0)}, ρ1 = {escape(c1)}, {escape(_score_label(s))}, wave "
        f"{s['wave']}, layouts {escape(c0)} {len(n['layouts'][c0])} / {escape(c1)} "
        f"{len(n['layouts'][c1])} (reduced within channel)")
    if n["dropped_incomplete"]:
        console.print(f"[yellow]{n['dropped_incomplete']} of {n['transitions']} transitions "
                      "dropped as incomplete (--complete-only): the cohort is the "
                      "joint-complete transitions.[/]")
    level = f"{out['confidence_level']:.0%} interval"
    t = table(f"Channel interaction Ω = G^{c1} − G^{c0} ([ASV], {out['weighting']} "
              "weighting)", ["statistic", "value", level], right=["value", level])
    for key, template in STATISTICS:
        st = out["statistics"][key]
        t.add_row(escape(_label(template, (c0, c1))), _value(key, st["value"]),
                  _ci(key, st["interval"]))
    console.print(t)
    console.print(f"[dim]Trajectory-block {out['interval_method']} bootstrap: "
                  f"{out['n_resamples']:,} shared draws "
                  f"over {out['n_trajectories']} trajectories (seed {out['seed']}). "
                  f"{n['sign_disagreements']} of {n['complete']} transitions have gains of "
                  f"opposite sign; {n['negative_interactions']} have Ω < 0.[/]")
    retry = out.get("retry")
    if retry is not None:
        r = table(f"Sign disagreement vs same-channel retries ({retry['n_transitions']} "
                  "transitions complete in every wave)", ["", "rate", level],
                  right=["rate", level])
        for key, label in RETRY:
            r.add_row(label, f"{retry[key]['value']:.1%}",
                      f"[{retry[key]['interval'][0]:.1%}, {retry[key]['interval'][1]:.1%}]")
        console.print(r)
    elif out.get("retry_note"):
        console.print(f"[dim]{escape(out['retry_note'])}[/]")
    console.print("[bold]Calibration (Remark 2)[/]")
    for line in calibration_lines(out):
        console.print(f"  {escape(line)}")
    for w in out["warnings"]:
        console.print(f"[yellow]warning:[/] {escape(w)}")
    if out.get("plot"):
        console.print(f"Wrote {escape(out['plot'])} (per-transition gains and the mean Ω)")


def plot_asv_face(out: dict[str, Any], face: AsvFace, path: Path) -> None:
    """Per-transition gains G^ρ0 vs G^ρ1 (sign disagreements highlighted) and the means."""
    plt = pyplot()

    c0, c1 = out["channels"]
    g0, g1, dis = face.gain0, face.gain1, face.sign_disagree
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9.0, 4.0), dpi=120,
                                 gridspec_kw={"width_ratios": [3, 2]})
    try:
        lim = float(max(np.abs(g0).max(), np.abs(g1).max(), 1e-9)) * 1.08
        ax.axhline(0, color="#bbbbbb", lw=0.8)
        ax.axvline(0, color="#bbbbbb", lw=0.8)
        ax.plot([-lim, lim], [-lim, lim], color="#888888", lw=0.8, ls="--",
                label="equal gains (Ω = 0)")
        ax.scatter(g0[~dis], g1[~dis], s=14, color="#1f6fb4", alpha=0.7,
                   label=f"same sign ({int((~dis).sum())})")
        ax.scatter(g0[dis], g1[dis], s=14, color="#d9541e", alpha=0.8,
                   label=f"opposite signs ({int(dis.sum())})")
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-lim, lim)
        ax.set_aspect("equal")
        ax.set_xlabel(f"gain G under {c0} (ρ0)")
        ax.set_ylabel(f"gain G under {c1} (ρ1)")
        ax.set_title(f"per-transition gains ({len(face)} transitions)", fontsize=10)
        ax.legend(frameon=False, fontsize=8, loc="upper left")
        stats = out["statistics"]
        keys = (("mean_gain0", f"G ({c0})"), ("mean_gain1", f"G ({c1})"),
                ("mean_interaction", "Ω"))
        for i, (key, _) in enumerate(keys):
            v = stats[key]["value"]
            low, high = stats[key]["interval"]
            color = "#d9541e" if key == "mean_interaction" else "#1f6fb4"
            bx.errorbar([i], [v], yerr=[[v - low], [high - v]], fmt="o", color=color,
                        capsize=4)
        bx.axhline(0, color="#bbbbbb", lw=0.8)
        bx.set_xticks(range(len(keys)), [label for _, label in keys])
        bx.set_xlim(-0.6, len(keys) - 0.4)
        bx.set_title(f"means, {out['confidence_level']:.0%} intervals ({out['weighting']})",
                     fontsize=10)
        bx.grid(alpha=0.3, axis="y")
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)


def asv_command(
    traces: TracesOrDataset,
    channels: Annotated[str, typer.Option(
        "--channels", help="The two channels ρ0,ρ1 to compare, e.g. direct,quote "
        "(Ω = G^ρ1 − G^ρ0).", show_default=False)],
    window: Annotated[str | None, window_option(
        "Transitions of this window (default: the one window both channels score).")] = None,
    score: Annotated[str | None, score_option(
        "Score records of this name, or NAME0,NAME1: one per channel (default: the one name "
        "both channels record on the window, else each channel's one score).")] = None,
    weighting: Annotated[str, typer.Option(
        "--weighting", help="empirical (each transition weighs 1) or equal-target (each "
        "target identity weighs 1: the run meta key --target-key, else the task).")
    ] = "empirical",
    target_key: Annotated[str, typer.Option(
        "--target-key", help="Run meta key naming each transition's target identity.")
    ] = "target",
    trajectory_key: Annotated[str | None, typer.Option(
        "--trajectory-key", help="Run meta key naming each run's trajectory, the bootstrap "
        "block (default: system, task and seed, and the meta entries in which runs sharing "
        "them differ).", show_default=False)] = None,
    ci_method: Annotated[str, ci_method_option(
        "Bootstrap interval: BCa (best coverage in the study of docs/how-to/estimators.md), "
        "percentile or "
        "basic.")] = "BCa",
    resamples: Annotated[int, resamples_option("Trajectory-block bootstrap draws.")] = 10_000,
    seed: BootstrapSeed = 0,
    complete_only: Annotated[bool, typer.Option(
        "--complete-only", help="Drop transitions that lack a corner and analyse the "
        "joint-complete cohort (default: an incomplete face is an error).")] = False,
    executor: Annotated[Executor, executor_option(
        "a Parquet dataset's per-run stage")] = Executor.local,
    ray_address: RayAddress = None,
    json_output: JsonOutput = False,
    plot: Annotated[Path | None, plot_option(
        "the per-transition gains under both channels and the mean Ω with its interval")] = None,
) -> None:
    """ASV: the four-corner face of a window's transitions under two channels ([ASV])."""
    if weighting not in WEIGHTINGS:
        fail(f"agentlog estimate asv: --weighting must be one of {', '.join(WEIGHTINGS)}; "
             f"found {weighting!r}")
    if ci_method not in CI_METHODS:
        fail(f"agentlog estimate asv: --ci-method must be one of {', '.join(CI_METHODS)}; "
             f"found {ci_method!r}")
    asv = asv_module()
    # Under --executor ray both passes over the dataset (the cells, the collection) run on
    # one Ray runtime, shut down before the output is printed.
    with contextlib.ExitStack() as ray:
        try:
            pair = parse_channels(channels)
            dataset = single_dataset(traces)  # agentlog export --format parquet
            # Streamed, one run at a time, by each pass below (a dataset: a chunk of runs at
            # a time, or on Ray Data).
            loaded = [dataset] if dataset is not None else trace_files(trace_paths(traces))
            needs_dataset(executor, dataset)
            how = ray.enter_context(executing(executor, ray_address))
            with trace_errors(), dataset_errors(dataset):
                cells = scored_cells(loaded, how)
            win, win_source, name, name_source = choose_cells(
                cells, pair, window, parse_score(score), len(loaded))
        except BadInput as exc:
            fail(f"agentlog estimate asv: {exc}")
        with warnings.catch_warnings(record=True) as records:
            warnings.simplefilter("always")
            try:
                read = (asv.from_traces if dataset is None else
                        lambda _, **kw: asv.from_dataset(dataset, executor=how, **kw))
                data = read(loaded, channels=pair, window=win, score=name,
                            target_key=target_key, trajectory_key=trajectory_key)
                face = data.face(complete_only=complete_only)
            except al.IncompleteFaceError as exc:
                fail(f"agentlog estimate asv: {exc} (on the command line: --complete-only)")
            except ValueError as exc:
                fail(f"agentlog estimate asv: {exc}")
            # The bootstrap is a function of the face (local: see asv.from_dataset).
            summary = asv.summarize(face, trajectory=data.trajectory[face.kept],
                                    target=data.target[face.kept], weighting=weighting,
                                    n_resamples=resamples, seed=seed, method=ci_method)
            retry, retry_note = retry_baseline(data, n_resamples=resamples, seed=seed)
    out = summarize_asv(data, face, summary)
    out["settings"] = {
        "traces": [str(p) for p in loaded], "channels": list(pair), "window": win,
        "window_source": win_source,
        # One name both channels record, else None and each channel's name in "scores".
        "score": name if isinstance(name, str) else None,
        "scores": dict(zip(pair, (name, name) if isinstance(name, str) else name,
                           strict=True)),
        "score_source": name_source,
        "wave": int(data.waves[0]), "weighting": weighting, "resamples": resamples,
        "seed": seed, "complete_only": complete_only, "ci_method": ci_method,
        "trajectory_key": trajectory_key, "executor": how,
    }
    out["retry"] = retry
    out["retry_note"] = retry_note
    out["warnings"] = list(dict.fromkeys(str(w.message) for w in records))
    out["plot"] = str(plot) if plot is not None else None
    if plot is not None:
        write_plot("estimate asv", plot, lambda: plot_asv_face(out, face, plot))
    if json_output:
        print_json(out)
    else:
        render_asv(out, stdout())
    raise typer.Exit(EXIT_OK)
