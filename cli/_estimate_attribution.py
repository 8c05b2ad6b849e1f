"""``agentlog estimate attribution``: which decisions of a window caused its outcome.

The folder holds the output of ``agentlog replay --alter … --out DIR``: one run per source
window instance, alteration arm and replicate seed. ``attribution.from_traces`` pairs the
arms of each block and prints per player the contrastive effect (the decision changed
alone) and the Shapley value, with task-clustered intervals, and the total.

Example::

    $ agentlog replay runs/ --window retrieval --app my_agent --mode branch \\
        --alter doc@0 --alter doc@1 --alter stop@0 --shapley exact --seeds 4 \\
        --score my_agent:opened_mean --out attribution/
    $ agentlog estimate attribution attribution/ --outcome opened_mean
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
from ._options import BootstrapSeed, JsonOutput, channel_option, traces_argument
from ._output import BadInput, fail, fmt_signed, print_estimate, trace_errors
from ._replay_design import parse_shapley
from ._verify_cmd import trace_files


def _with_interval(row: Mapping[str, Any]) -> str:
    return escape(f"{fmt_signed(row['estimate'])} [{fmt_signed(row['low'])}, "
                  f"{fmt_signed(row['high'])}]")


def render_attribution(out: Mapping[str, Any], console: Console) -> None:
    """One row per player: contrastive effect and Shapley value with their intervals."""
    level = round(100 * out["confidence_level"])
    shapley = out["shapley_method"] is not None
    columns = ["player", f"contrastive [{level}% CI]", "SE (unpaired)"]
    if shapley:
        columns.append(f"Shapley [{level}% CI]")
    t = table(f"attribution of {escape(str(out['outcome']))} · {out['n_blocks']} paired "
              f"blocks, {out['n_clusters']} tasks · cluster t intervals over tasks",
              columns, right=columns[1:])
    for name, row in out["players"].items():
        c = row["contrastive"]
        cells = [escape(name), _with_interval(c),
                 f"{c['standard_error']:.3f} ({c['independent_standard_error']:.3f})"]
        if shapley:
            cells.append(_with_interval(row["shapley"]))
        t.add_row(*cells)
    console.print(t)
    if out["total"] is not None:
        console.print(f"total (every player changed): {_with_interval(out['total'])}")
    console.print(f"Shapley: {escape(out['shapley_method'] or out['shapley_note'])}")
    console.print("SE (unpaired): the standard error the same blocks would give with the "
                  "arms drawn independently of the agent's own (what common random numbers "
                  "save).")
    console.print(escape(out["note"]))


def _players(texts: list[str]) -> dict[str, list[str]] | None:
    groups: dict[str, list[str]] = {}
    for text in texts:
        name, sep, rest = text.partition("=")
        decisions = [d.strip() for d in rest.split(",")]
        if not sep or not name.strip() or not all(decisions):
            raise BadInput(f"--player {text!r}: expected NAME=DECISION,DECISION, e.g. "
                           "round1=doc@0,stop@0")
        groups[name.strip()] = decisions
    return groups or None


def attribution_command(
    traces: Annotated[list[Path], traces_argument(
        "The arm traces: the --out folder of agentlog replay --alter, or its files.")],
    outcome: Annotated[str, typer.Option(
        "--outcome", help="The Score each arm run records once.")] = "opened_mean",
    channel: Annotated[str | None, channel_option("Only scores of this channel count.")] = None,
    player: Annotated[list[str] | None, typer.Option(
        "--player", help="NAME=DECISION,DECISION: attribute to a group of decisions "
        "(repeatable; default: each decision its own player).", show_default=False)] = None,
    shapley: Annotated[str, typer.Option(
        "--shapley", help="auto (exact when every coalition ran), exact, none, or the number "
        "of permutations the arms were made with.")] = "auto",
    seed: BootstrapSeed = 0,
    drop_incomplete: Annotated[bool, typer.Option(
        "--drop-incomplete", help="Leave out blocks that lack an arm (default: an error).")
    ] = False,
    json_output: JsonOutput = False,
) -> None:
    """Per-step attribution: each decision's contrastive effect and Shapley value on the
    outcome, with task-clustered intervals."""
    from agentlog.estimators import attribution

    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        try:
            groups = _players(player or [])
            how = parse_shapley(shapley)
            files = trace_files(traces)
            with trace_errors():
                res = attribution.from_traces(
                    files, outcome=outcome, channel=channel, players=groups,
                    shapley=how,  # type: ignore[arg-type]
                    seed=seed, incomplete="drop" if drop_incomplete else "error")
        except (BadInput, ValueError, TypeError) as exc:
            fail(f"agentlog estimate attribution: {exc}")
    out = res.to_dict()
    out["settings"] = {"traces": [str(p) for p in files], "outcome": outcome,
                       "channel": channel, "shapley": shapley, "seed": seed,
                       "players": groups}
    print_estimate(out, records, render_attribution, as_json=json_output)
