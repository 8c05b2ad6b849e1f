"""``agentlog verify TRACE...``: recompute what traces claim; exit 1 on a problem, 2 on bad input.

``verify_paths`` returns a JSON-ready dict (the ``--json`` output, reused by ``demo``);
``render_verify`` draws it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

import agentlog as al

from ._inspect import table
from ._output import EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEM, BadInput, print_json, read_trace, stdout

MAX_PROBLEMS = 20  # problems listed per file before "... N more"


def expand(paths: list[Path]) -> list[Path]:
    """Files as given; a folder stands for the ``*.zst`` files below it (sorted)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(p.rglob("*.zst"))
            out.extend(found if found else [p])  # an empty folder is reported as bad input
        else:
            out.append(p)
    return out


def _unreadable(path: Path, message: str, hint: str) -> dict[str, Any]:
    return {"path": str(path), "ok": False, "readable": False, "error": message, "hint": hint}


def verify_file(path: Path) -> dict[str, Any]:
    """``al.verify`` one file; an unusable input becomes an entry with ``readable: False``."""
    if path.is_dir():
        return _unreadable(path, f"{path}: folder holds no *.zst trace files",
                           "pass trace files, or the folder you recorded them into")
    if not path.exists():
        return _unreadable(path, f"{path}: no such file",
                           "check the path (agentlog traces end in .zst)")
    try:
        report = al.verify(path)
    except al.TraceFormatError as exc:
        return _unreadable(path, str(exc), "this is not a readable agentlog trace: pass a file "
                           "written by al.record(), or re-record the run")
    except OSError as exc:
        return _unreadable(path, f"{path}: cannot be read ({exc.strerror or exc})",
                           "check the file's permissions")
    out = report.to_dict()
    out["readable"] = True
    return out


def verify_paths(paths: list[Path]) -> dict[str, Any]:
    """Verify every file; ``exit_code`` is 2 if one is unreadable, else 1 on a problem."""
    files = [verify_file(p) for p in expand(paths)]
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


def render_verify(result: dict[str, Any], console: Console) -> None:
    """Draw a ``verify_paths`` dict: one row per file, then each file's problems."""
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
    console.print(f"[{colour}]{c['files']} file{'s' * (c['files'] != 1)}: {c['ok']} ok, "
                  f"{c['problems']} with problems, {c['unreadable']} unreadable[/]")


def verify_command(
    traces: Annotated[
        list[Path],
        typer.Argument(help="Trace files (*.zst) or folders of them.", show_default=False),
    ],
    json_output: Annotated[
        bool, typer.Option("--json", help="Print JSON instead of tables.")
    ] = False,
) -> None:
    """Recompute hashes, receipts, draws and continuity. Exit 0 ok, 1 problems, 2 bad input."""
    result = verify_paths(traces)
    if json_output:
        print_json(result)
    else:
        render_verify(result, stdout())
    raise typer.Exit(result["exit_code"])


def load_traces(paths: Sequence[Path]) -> list[al.Trace]:
    """Trace files, or the ``*.zst`` files below folders; unusable input is ``BadInput``."""
    if not paths:
        raise BadInput("no traces given; pass trace files or the folder you recorded into")
    out = []
    for path in expand(list(paths)):
        if path.is_dir():
            raise BadInput(f"{path}: folder holds no *.zst trace files; pass trace files, or "
                           "the folder you recorded them into")
        out.append(read_trace(path))
    return out
