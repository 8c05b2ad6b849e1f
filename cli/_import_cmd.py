"""``agentlog import inspect LOG... --out DIR``: Inspect AI eval logs as agentlog traces.

One trace per log (``<log stem>.zst`` in ``--out``), one run per sample and epoch, the
model and tool calls and the scores of each (``agentlog.adapters.inspect_ai`` documents
the mapping). Exit 0 imported, 2 bad input: a missing file, a file that is no Inspect
log, a folder without logs, a trace already in ``--out`` (``--overwrite`` replaces it),
inspect_ai not installed.

Example::

    $ inspect eval arc.py --model openai/gpt-4o-mini --log-dir logs/
    $ agentlog import inspect logs/ --out traces/
    $ agentlog estimate reliability traces/ --score choice --by model
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

import agentlog as al

from ._options import out_option
from ._output import EXIT_OK, fail, short_path, stderr, stdout


def import_inspect_command(
    logs: Annotated[list[Path], typer.Argument(
        help="Inspect eval logs (.eval, .json), or folders of them.", show_default=False)],
    out: Annotated[Path, out_option("Folder for the traces, one .zst per log (created when "
                                    "missing).", show_default=False)],
    overwrite: Annotated[bool, typer.Option(
        "--overwrite", help="Replace traces of the same name already in --out.")] = False,
) -> None:
    """Import Inspect AI eval logs as agentlog traces: one trace per log, one run per sample
    and epoch with its model calls, tool calls and scores. Exit 0 ok, 2 bad input.

    The runs can be estimated on (``agentlog estimate reliability``, ``agentlog
    certify``), not replayed: they were not recorded by agentlog's windows.
    """
    try:
        from agentlog.adapters.inspect_ai import import_logs
    except al.MissingDependencyError as exc:
        fail(str(exc))
    try:
        with Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(),
                      console=stderr(), transient=True) as bar:
            task = bar.add_task("samples", total=None)
            result = import_logs(
                logs, out, overwrite=overwrite,
                progress=lambda done, total: bar.update(task, completed=done, total=total))
    except (ValueError, OSError, al.AgentlogError) as exc:
        fail(str(exc))
    console = stdout()
    console.print(f"[green]{len(result.files)} trace(s) written to {escape(short_path(out))}[/]: "
                  f"{result.runs} runs ({result.samples} samples, each epoch a run), "
                  f"{result.llm_calls} model calls, {result.tool_calls} tool calls, "
                  f"{result.scores} scores")
    for path in result.files:
        console.print(f"  {escape(short_path(path))}")
    if result.skipped:
        console.print(f"[yellow]! {result.skipped} score value(s) skipped: not finite "
                      "numbers[/]")
    for note in result.notes:
        console.print(f"[yellow]! {escape(note)}[/]")
    console.print("  (imported runs can be estimated on, e.g. agentlog estimate reliability "
                  f"{escape(short_path(out))} --by model, not replayed)")
    raise typer.Exit(EXIT_OK)
