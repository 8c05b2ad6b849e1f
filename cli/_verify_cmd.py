"""``agentlog verify TRACE...``: recompute what traces claim; exit 1 on a problem, 2 on bad input.

``verify_paths`` returns a JSON-ready dict (the ``--json`` output, reused by ``demo``);
``render_verify`` draws it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

import agentlog as al
from agentlog.records import parse_chain_head

from ._inspect import table
from ._options import JsonOutput, traces_argument
from ._output import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_PROBLEM,
    BadInput,
    check_trace_path,
    expand,
    fail,
    print_json,
    read_trace,
    stdout,
)

MAX_PROBLEMS = 20  # problems listed per file before "... N more"


def _unreadable(path: Path, message: str, hint: str) -> dict[str, Any]:
    return {"path": str(path), "ok": False, "readable": False, "error": message, "hint": hint}


def verify_file(path: Path, key: bytes | None = None,
                expect_head: str | None = None) -> dict[str, Any]:
    """``al.verify`` one file; an unusable input becomes an entry with ``readable: False``."""
    if path.is_dir():
        return _unreadable(path, f"{path}: folder holds no *.zst trace files",
                           "pass trace files, or the folder you recorded them into")
    if not path.exists():
        return _unreadable(path, f"{path}: no such file",
                           "check the path (agentlog traces end in .zst)")
    try:
        report = al.verify(path, key=key, expect_head=expect_head)
    except al.TraceFormatError as exc:
        return _unreadable(path, str(exc), "this is not a readable agentlog trace: pass a file "
                           "written by al.record(), or re-record the run")
    except OSError as exc:
        return _unreadable(path, f"{path}: cannot be read ({exc.strerror or exc})",
                           "check the file's permissions")
    out = report.to_dict()
    out["readable"] = True
    return out


def verify_paths(paths: list[Path], key: bytes | None = None,
                 expect_head: str | None = None) -> dict[str, Any]:
    """Verify every file; ``exit_code`` is 2 if one is unreadable, else 1 on a problem.

    Raises:
        BadInput: ``expect_head`` with other than one file, without ``key``, or malformed.
    """
    files_in = expand(paths)
    if expect_head is not None:
        if len(files_in) != 1 or files_in[0].is_dir():
            raise BadInput(f"--expect-head names the head of one file's chain of keyed runs; "
                           f"found {len(files_in)} paths: pass the one trace it was "
                           "reported for")
        try:  # the library's own check: a head verify reported, and a key
            parse_chain_head(expect_head, keyed=key is not None)
        except ValueError as exc:
            raise BadInput(str(exc).replace("`expect_head`", "--expect-head")
                           + (f" (--key-file or ${KEY_ENV})" if key is None else "")) from exc
    files = [verify_file(p, key, expect_head) for p in files_in]
    unreadable = sum(not f["readable"] for f in files)
    with_problems = sum(f["readable"] and not f["ok"] for f in files)
    code = EXIT_BAD_INPUT if unreadable else EXIT_PROBLEM if with_problems else EXIT_OK
    return {
        "ok": code == EXIT_OK,
        "exit_code": code,
        "files": files,
        "counts": {"files": len(files), "ok": len(files) - unreadable - with_problems,
                   "problems": with_problems, "unreadable": unreadable},
    }


def _checked(checked: dict[str, int]) -> str:
    return ", ".join(f"{n} {k}" for k, n in checked.items()) or "nothing"


def render_verify(result: dict[str, Any], console: Console, *, all_rows: bool = False) -> None:
    """Draw a ``verify_paths`` dict: each file's problems and a summary line.

    One file, or ``all_rows``: a table with one row per file comes first.
    """
    if all_rows or len(result["files"]) == 1:
        t = table("Verify", ["file", "status", "records", "runs", "checked"],
                  right=("records", "runs"))
        for f in result["files"]:
            if not f["readable"]:
                status = "[red]unreadable[/]"
                t.add_row(escape(f["path"]), status, "-", "-", "-")
                continue
            n = len(f["problems"])
            status = "[green]ok[/]" if f["ok"] else f"[red]{n} problem{'s' * (n != 1)}[/]"
            t.add_row(escape(f["path"]), status, str(f["records"]), str(f["runs"]),
                      _checked(f["checked"]))
        console.print(t)
        for f in result["files"]:
            if f.get("chain_head"):
                console.print(f"keyed chain: {escape(f['path'])}: {f['keyed_runs']} keyed "
                              f"run(s), head {f['chain_head']}")
            for note in f.get("notes", []):
                console.print(f"[dim]note: {escape(f['path'])}: {escape(note)}[/]")
    for f in result["files"]:
        if not f["readable"]:
            console.print(f"[red]✗ {escape(f['error'])}[/]\n  → {escape(f['hint'])}")
        elif not f["ok"]:
            console.print(f"[red]✗ {escape(f['path'])}[/]:")
            for p in f["problems"][:MAX_PROBLEMS]:
                where = ", ".join(f"{k} {p[k]}" for k in ("run", "record") if p[k] is not None)
                console.print(f"  [bold]{escape(p['kind'])}[/]"
                              f"{f' ({where})' if where else ''}: {escape(p['message'])}")
            if len(f["problems"]) > MAX_PROBLEMS:
                console.print(f"  [dim]… {len(f['problems']) - MAX_PROBLEMS} more "
                              "(see --json)[/]")
            console.print("  → the trace does not hold what it claims: do not use it for "
                          f"estimates; look at it with `agentlog inspect {escape(f['path'])}` "
                          "and re-record the run")
    c = result["counts"]
    colour = "green" if result["ok"] else "red"
    more = "" if all_rows or c["files"] == 1 else " (--all for one row per file)"
    console.print(f"[{colour}]{c['files']} file{'s' * (c['files'] != 1)}: {c['ok']} ok, "
                  f"{c['problems']} with problems, {c['unreadable']} unreadable[/]{more}")


KEY_ENV = "AGENTLOG_TRACE_KEY"


def read_key(key: str | None, key_file: Path | None) -> bytes | None:
    """The HMAC key from ``--key``, ``--key-file`` or ``$AGENTLOG_TRACE_KEY`` (in that order).

    Raises:
        BadInput: the key file cannot be read, or the key is empty.
    """
    if key is None and key_file is not None:
        try:
            data = key_file.read_bytes()
        except OSError as exc:
            raise BadInput(f"--key-file {key_file}: cannot be read ({exc.strerror or exc}); "
                           "pass a file holding the key the runs were recorded with") from exc
        raw = data.rstrip(b"\r\n")
        if not raw:
            raise BadInput(f"--key-file {key_file}: the file is empty; it must hold the key")
        return raw
    if key is None:
        key = os.environ.get(KEY_ENV)
        if key is None:
            return None
    if not key:
        raise BadInput("the key is empty; pass the key the runs were recorded with")
    return key.encode()


def verify_command(
    traces: Annotated[list[Path], traces_argument("Trace files (*.zst) or folders of them.")],
    json_output: JsonOutput = False,
    all_rows: Annotated[
        bool, typer.Option("--all", help="One row per file, also for files that are ok.")
    ] = False,
    key: Annotated[
        str | None,
        typer.Option("--key", help="The key the runs were recorded with (record(key=...)); "
                     f"prefer --key-file or ${KEY_ENV}, which stay out of shell history.",
                     show_default=False),
    ] = None,
    key_file: Annotated[
        Path | None,
        typer.Option("--key-file", help="A file holding the key.", show_default=False),
    ] = None,
    expect_head: Annotated[
        str | None,
        typer.Option("--expect-head", help="The chain head an earlier verify reported for "
                     "this file ('<position>:<hex>'): proves no keyed run up to it was "
                     "removed, also from the end. Needs the key.", show_default=False),
    ] = None,
) -> None:
    """Recompute hashes, receipts, digests, draws and continuity.

    Exit 0 ok, 1 problems, 2 bad input. Files are streamed: memory does not grow with
    their size.
    """
    try:
        secret = read_key(key, key_file)
        result = verify_paths(traces, secret, expect_head)
    except BadInput as exc:
        fail(f"agentlog verify: {exc}")
    if json_output:
        print_json(result)
    else:
        render_verify(result, stdout(), all_rows=all_rows)
    raise typer.Exit(result["exit_code"])


def load_traces(paths: Sequence[Path]) -> list[al.Trace]:
    """Trace files, or the ``*.zst`` files below folders; unusable input is ``BadInput``."""
    return [read_trace(path) for path in trace_files(paths)]


def trace_files(paths: Sequence[Path]) -> list[Path]:
    """The trace files named (folders stand for the ``*.zst`` below them), unread, for a
    command that streams them; a missing file or an empty folder is ``BadInput``. A file
    that is no trace is found while streaming (wrap the reading in ``trace_errors()``)."""
    if not paths:
        raise BadInput("no traces given; pass trace files or the folder you recorded into")
    out = []
    for path in expand(list(paths)):
        if path.is_dir():
            raise BadInput(f"{path}: folder holds no *.zst trace files; pass trace files, or "
                           "the folder you recorded them into")
        check_trace_path(path)
        out.append(path)
    return out
