"""``agentlog estimate effects``: policy effects of a paired 2×2 from its arm traces ([SSC]).

The folder holds the output of ``agentlog replay --design … --out DIR`` (one run per
source window instance, arm and replicate seed, each with its arm in
``meta["agentlog.replay"]``). ``cess.effects_from_traces`` pairs the four arms of each
block and prints Δsel, Δstop, Δint and the total ([SSC] eq. 3–4) with task-clustered
intervals and ICC(1,k) across seeds. These are policy effects; a difference of CESS
estimates is not one ([SSC] Theorem 2).

Example::

    $ agentlog replay runs/ --window retrieval --design selection=agent,uniform \\
        --design stopping=adaptive,fixed:4 --seeds 3 --app my_agent --out arms/
    $ agentlog estimate effects arms/ --outcome opened_mean
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from ._inspect import table
from ._options import (
    BootstrapSeed,
    JsonOutput,
    channel_option,
    resamples_option,
    traces_argument,
)
from ._output import BadInput, fail, fmt_num, print_estimate, trace_errors
from ._verify_cmd import trace_files

EFFECT_LABELS = {"selection": "Δsel", "stopping": "Δstop", "interaction": "Δint",
                 "total": "total"}


def render_effects(out: Mapping[str, Any], console: Console) -> None:
    """The effects table: estimate, interval, standard error and ICC(1,k) per effect."""
    levels = out["levels"]
    level = round(100 * out["confidence_level"])
    how = {"t": "cluster t", "percentile": "bootstrap"}.get(out.get("interval", ""), "tasks")
    columns = ["effect", "estimate", f"{level}% CI ({how}, tasks)", "SE", "ICC(1,k)"]
    t = table(
        f"policy effects on {escape(str(out['outcome']))} · selection "
        f"{escape(levels['selection'][1])} vs {escape(levels['selection'][0])} × stopping "
        f"{escape(levels['stopping'][1])} vs {escape(levels['stopping'][0])} · "
        f"{out['n_blocks']} paired blocks, {out['n_clusters']} tasks",
        columns, right=columns[1:])
    for name, row in out["effects"].items():
        icc = row["icc"]
        t.add_row(EFFECT_LABELS[name], fmt_num(row["estimate"]),
                  escape(f"[{fmt_num(row['low'])}, {fmt_num(row['high'])}]"),
                  fmt_num(row["standard_error"]), "-" if icc is None else fmt_num(icc))
    console.print(t)
    if out.get("icc_note"):
        console.print(f"ICC(1,k): {escape(out['icc_note'])}")
    console.print(escape(out["note"]))


def effects_command(
    traces: Annotated[list[Path], traces_argument(
        "The arm traces: the --out folder of agentlog replay --design, or its files.")],
    outcome: Annotated[str, typer.Option(
        "--outcome", help="The Score each arm run records once (θ of the arm).")
    ] = "opened_mean",
    channel: Annotated[str | None, channel_option("Only scores of this channel count.")] = None,
    levels: Annotated[list[str] | None, typer.Option(
        "--levels", help="FACTOR=LEVEL0,LEVEL1 when a factor's levels are not the agent's own "
        "and one intervention (e.g. selection=uniform,reverse).", show_default=False)] = None,
    drop_incomplete: Annotated[bool, typer.Option(
        "--drop-incomplete", help="Leave out blocks that lack one of the four arms (default: "
        "an error).")] = False,
    resamples: Annotated[int, resamples_option("Task-clustered bootstrap draws.")] = 10_000,
    seed: BootstrapSeed = 0,
    json_output: JsonOutput = False,
) -> None:
    """Policy effects Δsel, Δstop, Δint and total of a paired 2×2 ([SSC] eq. 3–4), with
    task-clustered intervals and ICC(1,k) across seeds."""
    from agentlog.estimators import cess

    chosen: dict[str, tuple[str, str]] = {}
    for text in levels or []:
        factor, sep, rest = text.partition("=")
        pair = [v.strip() for v in rest.split(",")]
        if not sep or len(pair) != 2 or not all(pair):
            fail(f"agentlog estimate effects: --levels {text!r}: expected FACTOR=LEVEL0,LEVEL1, "
                 "e.g. selection=uniform,agent")
        chosen[factor.strip()] = (pair[0], pair[1])
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        try:
            files = trace_files(traces)
            with trace_errors():
                res = cess.effects_from_traces(
                    files, outcome=outcome, channel=channel, levels=chosen or None,
                    incomplete="drop" if drop_incomplete else "error",
                    n_resamples=resamples, seed=seed)
        except (BadInput, ValueError) as exc:
            fail(f"agentlog estimate effects: {exc}")
    out = res.to_dict()
    out["settings"] = {"traces": [str(p) for p in files], "outcome": outcome,
                       "channel": channel, "resamples": resamples, "seed": seed}
    print_estimate(out, records, render_effects, as_json=json_output)
