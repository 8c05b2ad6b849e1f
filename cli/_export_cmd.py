"""``agentlog export TRACES... --otlp URL``: stored traces as spans for a tracing backend;
``--format parquet --out DIR``: as a Parquet dataset (``agentlog.dataset``; ``DIR`` may be
a URI such as ``s3://bucket/prefix``).

Spans keep the records' original timestamps and get deterministic ids, so exporting the
same trace twice sends the same spans (backends keep one copy). ``--format otlp-json
--out FILE`` writes the OTLP JSON encoding instead. Exit 0 all sent, 1 a batch failed
after its retries, 2 bad input.

The traces stream, one run at a time, in memory that does not grow with their number of
runs: for ``--otlp`` a first pass counts the spans (the progress bar's total) and checks
that every file is a trace before anything is sent; a file found unreadable during the
export itself (changed since) stops it with exit 2.
"""

from __future__ import annotations

import contextlib
import enum
import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

import agentlog as al
from agentlog.dataset import is_uri, to_parquet
from agentlog.export import ExportResult, endpoint_problem, to_otlp, to_otlp_json
from agentlog.records import LLMCall, RunStart, ToolCall, WindowEnter
from agentlog.scrubbing import scrub_text

from ._options import out_option, traces_argument
from ._output import EXIT_OK, EXIT_PROBLEM, BadInput, fail, stderr, stdout, trace_errors
from ._verify_cmd import trace_files

_SPAN_RECORDS = (RunStart, WindowEnter, ToolCall, LLMCall)


class Format(enum.StrEnum):
    otlp = "otlp"
    otlp_json = "otlp-json"
    parquet = "parquet"


class Protocol(enum.StrEnum):
    http_protobuf = "http/protobuf"


def _headers(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"--header {pair!r}: expected KEY=VALUE (e.g. --header "
                           "'Authorization=Bearer …')")
        out[key.strip()] = value.strip()
    return out


def _check_url(url: str) -> None:
    problem = endpoint_problem(url)  # before the traces are read or anything connects
    if problem is not None:
        raise BadInput(f"--otlp {problem}")


@contextlib.contextmanager
def _streaming(files: Sequence[Path], out: Path | str | None = None) -> Iterator[None]:
    """Errors while the traces stream: a file that is no trace or cannot be read is
    ``BadInput`` (``trace_errors``), as is an ``out`` that cannot be written (a URI's
    error says what to check)."""
    names = {os.fspath(f) for f in files}
    with trace_errors():
        try:
            yield
        except OSError as exc:
            if out is None or (exc.filename is not None and os.fspath(exc.filename) in names):
                raise  # a trace's: trace_errors says which and what to do
            if is_uri(out):
                raise BadInput(str(exc)) from exc
            raise BadInput(f"{out}: cannot be written ({exc.strerror or exc}); check that "
                           "its folder exists and is writable") from exc


def _count_spans(files: Sequence[Path]) -> int:
    """One span per run, window, tool call and model call: counted from the records (a
    pass that decodes, builds nothing), for the progress bar."""
    return sum(isinstance(r, _SPAN_RECORDS) for f in files for r in al.iter_records(f))


def _to_parquet(traces: list[Path], given: str | None, partition_by: str | None) -> int:
    if given is None:
        raise BadInput("--format parquet needs --out DIR (the dataset folder)")
    out: Path | str = given if is_uri(given) else Path(given)
    if isinstance(out, Path) and out.exists() and not out.is_dir():
        raise BadInput(f"--out {out}: is a file; pass a folder (the dataset), e.g. "
                       f"{out.with_suffix('')}-parquet")
    layout = None
    if partition_by is not None:
        layout = {"system,task": ("system", "task"), "system": ("system",), "none": ()}.get(
            partition_by.replace(" ", ""))
        if layout is None:
            raise BadInput(f"--partition-by must be system,task, system or none; found "
                           f"{partition_by!r}")
    files = trace_files(traces)
    with Progress(TextColumn("exporting"), BarColumn(), MofNCompleteColumn(),
                  console=stderr(), transient=True) as bar, _streaming(files, out):
        task = bar.add_task("files", total=len(files))
        try:
            result = to_parquet(files, out, partition_by=layout,
                                progress=lambda n: bar.advance(task, n))
        except al.TracePathError as exc:  # another export is writing it; no such bucket
            raise BadInput(str(exc)) from None
        except ValueError as exc:
            if "partitioned by" not in str(exc):
                raise
            raise BadInput(str(exc).replace("`partition_by`", "--partition-by")) from None
    rows = ", ".join(f"{n} {kind}" for kind, n in result.rows.items() if n)
    stdout().print(f"[green]{result.runs_added} runs added to {escape(str(out))}[/] "
                   f"({rows or 'no rows'}); {result.runs_present} already there")
    if result.runs_unreadable:
        stdout().print(f"[yellow]! {result.runs_unreadable} runs had no start record (cut "
                       "from the front of their file) and were left out[/]")
    return EXIT_OK


def _report(result: ExportResult, where: str) -> int:
    console = stdout()
    for line in result.incomplete:
        console.print(f"[yellow]! {escape(line)}: exported up to its last record[/]")
    for line in result.errors:
        console.print(f"[red]✗ {escape(line)}[/]")
    failed = bool(result.spans_failed or result.errors)
    colour = "red" if failed else "green"
    console.print(f"[{colour}]{result.spans_sent} spans sent to {escape(scrub_text(where))}, "
                  f"{result.spans_failed} failed ({result.batches} "
                  f"batch{'es' * (result.batches != 1)})[/]")
    if failed:
        console.print("  → check that the backend is running and reachable at that URL "
                      "(and --header for its credentials), then export again: the span ids "
                      "are deterministic, so spans already sent are not duplicated")
        return EXIT_PROBLEM
    if result.spans_sent:
        console.print("  (span ids are deterministic: a backend that already holds these spans, "
                      "from an earlier export with the same options or, for a plain export, "
                      "from the run traced live, keeps one copy; --capture-content, "
                      "--project or --service-name give the spans ids of their own)")
    return EXIT_OK


def export_command(
    traces: Annotated[list[Path], traces_argument("Trace files (*.zst) or folders of them.")],
    otlp: Annotated[
        str | None,
        typer.Option("--otlp", help="OTLP/HTTP traces endpoint, e.g. "
                     "http://127.0.0.1:4318/v1/traces.", show_default=False),
    ] = None,
    fmt: Annotated[
        Format, typer.Option("--format", help="otlp: send to --otlp; otlp-json: write "
                             "--out FILE; parquet: the runs as a Parquet dataset in --out "
                             "DIR (only runs not already there are added).")
    ] = Format.otlp,
    out: Annotated[
        str | None, out_option("File for --format otlp-json; folder (or a URI such as "
                               "s3://bucket/prefix) for --format parquet.",
                               show_default=False)
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option("--header", help="HTTP header KEY=VALUE (repeatable).",
                     show_default=False),
    ] = None,
    service_name: Annotated[
        str | None,
        typer.Option("--service-name", help="service.name (default: each run's system).",
                     show_default=False),
    ] = None,
    project: Annotated[
        str | None,
        typer.Option("--project", help="openinference.project.name (Phoenix's project).",
                     show_default=False),
    ] = None,
    protocol: Annotated[
        Protocol, typer.Option("--protocol", help="OTLP transport.")
    ] = Protocol.http_protobuf,
    batch: Annotated[int, typer.Option("--batch", help="Spans per request.", min=1)] = 512,
    retries: Annotated[  # deprecated: the OTLP exporter retries itself (one policy)
        int | None, typer.Option("--retries", hidden=True, min=0)
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds one attempt may take (the exporter "
                            "retries a refused connection within it).", min=0.1)
    ] = 10.0,
    partition_by: Annotated[
        str | None, typer.Option(
            "--partition-by", help="--format parquet: the Hive partitions, system,task "
            "(default for a new dataset), system (for many tasks: a file per task and "
            "table is slow) or none.", show_default=False)
    ] = None,
    capture_content: Annotated[
        bool, typer.Option("--capture-content", help="Put each model call's stored "
                           "(scrubbed) messages and each tool call's arguments and result "
                           "on its span (gen_ai.input/output.messages, gen_ai.tool.call."
                           "arguments/.result). Default: off, as live spans.")
    ] = False,
) -> None:
    """Export traces as OpenTelemetry spans. Exit 0 ok, 1 a batch failed, 2 bad input."""
    resource: dict[str, Any] = {}
    if project is not None:
        resource["openinference.project.name"] = project
    try:
        if fmt is Format.parquet:
            raise typer.Exit(_to_parquet(traces, out, partition_by))
        if fmt is Format.otlp_json:
            if out is None:
                raise BadInput("--format otlp-json needs --out FILE (where to write the spans)")
            spans = Path(out)
            if spans.is_dir():
                raise BadInput(f"--out {spans}: is a folder; pass a file name such as "
                               f"{spans / 'spans.json'}")
            files = trace_files(traces)
            with _streaming(files, spans):
                result = to_otlp_json(files, spans, service_name=service_name,
                                      resource_attributes=resource,
                                      capture_content=capture_content)
            raise typer.Exit(_report(result, str(spans)))
        if otlp is None:
            raise BadInput("pass --otlp URL (an OTLP/HTTP traces endpoint), or --format "
                           "otlp-json --out FILE")
        _check_url(otlp)
        if retries is not None:
            warnings.warn("--retries is deprecated and does nothing: the OTLP exporter "
                          "retries transient failures itself, within --timeout; drop it",
                          FutureWarning, stacklevel=1)
        headers = _headers(header or [])
        files = trace_files(traces)
        with _streaming(files):
            total = _count_spans(files)  # every file read once before anything is sent
        with Progress(TextColumn("exporting"), BarColumn(), MofNCompleteColumn(),
                      console=stderr(), transient=True) as bar, _streaming(files):
            task = bar.add_task("spans", total=total)
            result = to_otlp(files, endpoint=otlp, headers=headers,
                             service_name=service_name, resource_attributes=resource,
                             batch=batch, timeout_s=timeout,
                             progress=lambda n: bar.advance(task, n),
                             capture_content=capture_content)
        raise typer.Exit(_report(result, otlp))
    except BadInput as exc:
        fail(str(exc))
    except al.MissingDependencyError as exc:
        fail(str(exc))
