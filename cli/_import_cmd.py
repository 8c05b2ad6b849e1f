"""``agentlog import inspect LOG... --out DIR``: Inspect AI eval logs as agentlog traces;
``agentlog import otlp FILE... --out DIR``: OpenTelemetry spans (OTLP JSON) as traces.

``inspect``: one trace per log (``<log stem>.zst`` in ``--out``), one run per sample and
epoch, the model and tool calls and the scores of each (``agentlog.adapters.inspect_ai``
documents the mapping). ``otlp``: one trace per file, one run per trace id, its model
and tool calls and evaluation scores (``agentlog.adapters.otlp``). Exit 0 imported, 2 bad
input: a missing file, a file that is no Inspect log or no OTLP JSON, a folder without
any, a trace already in ``--out`` (``--overwrite`` replaces it), inspect_ai not
installed. Imported runs can be estimated on, not replayed.

Example::

    $ inspect eval arc.py --model openai/gpt-4o-mini --log-dir logs/
    $ agentlog import inspect logs/ --out traces/
    $ agentlog estimate reliability traces/ --score choice --by model
    $ agentlog import otlp collector/traces.json --out traces/   # the Collector's file exporter
    $ agentlog estimate reliability traces/ --score relevance --by model
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
    choices: Annotated[str | None, typer.Option(
        "--choices", help="A multiple-choice eval's option labels, e.g. A,B,C,D: each "
        "sample's answer is also recorded as a selection over them, observed at the label "
        "the model sampled (its logprobs give the vector), for agentlog counterfactual.",
        show_default=False)] = None,
    choice_stream: Annotated[str, typer.Option(
        "--choice-stream", help="The stream name of those selections.")] = "answer",
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
                progress=lambda done, total: bar.update(task, completed=done, total=total),
                choices=None if choices is None else choices.split(","),
                choice_stream=choice_stream)
    except (ValueError, OSError, al.AgentlogError) as exc:
        fail(str(exc))
    console = stdout()
    console.print(f"[green]{len(result.files)} trace(s) written to {escape(short_path(out))}[/]: "
                  f"{result.runs} runs ({result.samples} samples, each epoch a run), "
                  f"{result.llm_calls} model calls, {result.tool_calls} tool calls, "
                  f"{result.scores} scores"
                  + (f", {result.choices} observed choices" if choices is not None else ""))
    for path in result.files:
        console.print(f"  {escape(short_path(path))}")
    if result.skipped:
        console.print(f"[yellow]! {result.skipped} score value(s) skipped: not finite "
                      "numbers[/]")
    for note in result.notes:
        console.print(f"[yellow]! {escape(note)}[/]")
    console.print("  (imported runs can be estimated on, e.g. agentlog estimate reliability "
                  f"{escape(short_path(out))} --by model, not replayed)")
    if choices is not None and result.choices:
        console.print(f"  next: agentlog counterfactual {escape(short_path(out))} --select "
                      f"{escape(choice_stream)} --steer temperature:0.5 --target target")
    raise typer.Exit(EXIT_OK)


def import_otlp_command(
    files: Annotated[list[Path], typer.Argument(
        help="OTLP JSON files (an ExportTraceServiceRequest, or JSON Lines of them as the "
             "OpenTelemetry Collector's file exporter writes), or folders of them (*.json, "
             "*.jsonl).", show_default=False)],
    out: Annotated[Path, out_option("Folder for the traces, one .zst per file (created when "
                                    "missing).", show_default=False)],
    system: Annotated[str | None, typer.Option(
        "--system", help="The runs' system (default: each trace's service.name).",
        show_default=False)] = None,
    overwrite: Annotated[bool, typer.Option(
        "--overwrite", help="Replace traces of the same name already in --out.")] = False,
) -> None:
    """Import OpenTelemetry spans (OTLP JSON) as agentlog traces: one trace per file, one run
    per trace id with its model calls, tool calls and evaluation scores. Exit 0 ok, 2 bad
    input.

    Spans of the OpenTelemetry GenAI semantic conventions and of OpenInference are read
    (``agentlog.adapters.otlp`` documents the mapping). The runs can be estimated on
    (``agentlog estimate reliability``), not replayed: they were not recorded by
    agentlog's windows.
    """
    from agentlog.adapters.otlp import NO_REPLAY, import_spans

    try:
        with Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(),
                      console=stderr(), transient=True) as bar:
            task = bar.add_task("traces", total=None)
            result = import_spans(
                files, out, system=system, overwrite=overwrite,
                progress=lambda done, total: bar.update(task, completed=done, total=total))
    except (ValueError, OSError, al.AgentlogError) as exc:
        fail(str(exc))
    console = stdout()
    console.print(f"[green]{len(result.files)} trace(s) written to {escape(short_path(out))}[/]: "
                  f"{result.runs} runs (one per trace id, {result.spans} spans), "
                  f"{result.llm_calls} model calls, {result.tool_calls} tool calls, "
                  f"{result.scores} scores")
    for path in result.files:
        console.print(f"  {escape(short_path(path))}")
    if result.skipped:
        console.print(f"[yellow]! {result.skipped} span(s), line(s) or evaluation(s) left "
                      "out (below)[/]")
    for note in result.notes:
        if note != NO_REPLAY:
            console.print(f"[yellow]! {escape(note)}[/]")
    console.print("  (imported runs can be estimated on, e.g. agentlog estimate reliability "
                  f"{escape(short_path(out))}, not replayed)")
    raise typer.Exit(EXIT_OK)
