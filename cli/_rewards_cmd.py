"""``agentlog rewards TRACES --window W --readout R --out FILE``: certified stage rewards.

Each exit of window W scored by readout R, grouped by the sealed entry it came from, with
its group-relative advantage (``agentlog.estimators.rewards``, [LBC] §5), written as the
dataset a trainer reads: JSON lines (``.jsonl``) or Parquet (``.parquet``) with
``prompt``, ``completion``, ``reward``, ``advantage``, ``group`` and the provenance
(trace, its SHA-256, run, window, hashes, receipt). Groups that are not exact cells are
refused and listed with the reason. Exit 0 written (refusals are a result), 2 bad input.

Example::

    $ agentlog rewards arms/ replay.zst --window retrieval --readout margin \\
        --channel direct --out rewards.jsonl
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ._options import Traces, channel_option, json_option, out_option, window_option
from ._output import EXIT_OK, BadInput, fail, print_json, short_path, stdout, trace_errors
from ._verify_cmd import trace_files


def rewards_command(
    traces: Traces,
    window: Annotated[str, window_option("The stage: the window whose exits are rewarded.")],
    readout: Annotated[str, typer.Option(
        "--readout", help="The score read at each exit (its name).", show_default=False)],
    out: Annotated[Path, out_option("Where to write the rows: FILE.jsonl or FILE.parquet.",
                                    show_default=False)],
    channel: Annotated[str | None, channel_option(
        "Only scores of this channel (default: any; a group scored on several is "
        "refused).")] = None,
    group_by: Annotated[str, typer.Option(
        "--group-by", help="entry (the sealed entry hash), task, or a run meta key.")
    ] = "entry",
    scale: Annotated[str, typer.Option(
        "--scale", help="Advantage: std ((r - mean) / sd in the group) or none "
        "(r - mean).")] = "std",
    min_group: Annotated[int, typer.Option(
        "--min-group", min=2, help="The fewest exits a group needs.")] = 2,
    json_output: Annotated[bool, json_option("Print the summary as JSON.")] = False,
) -> None:
    """Certified stage rewards: each exit of a window scored by one readout, with its
    group-relative advantage, for training. Exit 0 ok, 2 bad input."""
    from agentlog.estimators import rewards

    if out.suffix not in (".jsonl", ".parquet"):
        fail(f"agentlog rewards: --out must end in .jsonl or .parquet; found {out}")
    if scale not in ("std", "none"):
        fail(f"agentlog rewards: --scale must be std or none; found {scale!r}")
    try:
        files = trace_files(traces)
        with trace_errors():
            table = rewards.from_traces(files, window=window, readout=readout,
                                        channel=channel, group_by=group_by, scale=scale,
                                        min_group=min_group)
        written = table.to_jsonl(out) if out.suffix == ".jsonl" else table.to_parquet(out)
    except BadInput as exc:
        fail(f"agentlog rewards: {exc}")
    except (ValueError, OSError) as exc:
        fail(f"agentlog rewards: {exc}")
    reasons = Counter(r.reason for r in table.refused)
    summary = {
        "out": str(written), "window": window, "readout": readout, "channel": channel,
        "groups": table.groups, "certified_groups": table.groups - len(table.refused),
        "rows": len(table.rows), "refused": dict(reasons),
        "refusals": [{"group": r.group, "reason": r.reason, "detail": r.detail,
                      "instances": r.instances} for r in table.refused],
    }
    if json_output:
        print_json(summary)
        raise typer.Exit(EXIT_OK)
    console = stdout()
    console.print(f"[green]{len(table.rows)} rewarded exits[/] of window "
                  f"{escape(window)} from {summary['certified_groups']} of {table.groups} "
                  f"groups written to {escape(short_path(written))}")
    for reason, n in reasons.most_common():
        first = next(r for r in table.refused if r.reason == reason)
        console.print(f"[yellow]! {n} group(s) refused: {escape(reason)}[/] (first: "
                      f"{escape(first.detail)})")
    raise typer.Exit(EXIT_OK)
