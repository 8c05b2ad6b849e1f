"""``agentlog inspect TRACE``: what a trace holds, as tables or JSON.

``summarize_trace`` builds a plain dict (the ``--json`` output and what ``demo`` reuses);
``render_inspect`` draws it with rich.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Annotated, Any

import msgspec
import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import agentlog as al
from agentlog.records import (
    EXIT_CLOSED,
    EXIT_FAILED,
    EXIT_OK,
    Continuation,
    LLMCall,
    RunEnd,
    RunStart,
    Score,
    Selection,
    ToolCall,
    WindowEnter,
    WindowExit,
)

from ._options import JsonOutput, traces_argument
from ._output import (
    EXIT_BAD_INPUT,
    BadInput,
    check_trace_path,
    expand,
    fail,
    fmt_ms,
    fmt_num,
    jsonable,
    print_json,
    stdout,
    trace_errors,
)

_STATUS = {EXIT_OK: "ok", EXIT_FAILED: "failed", EXIT_CLOSED: "closed"}
MAX_ROWS = 50  # rows of a per-run or per-failure table before "... N more"
MAX_FAILURES = 1000  # failures kept for --json; the rest are counted
MAX_META_DEPTH = 32  # deeper metadata is shown as a marker, never recursed into


def safe_value(v: Any, depth: int = 0) -> Any:
    """A JSON-ready copy of a decoded metadata value, bounded in depth.

    A trace is input: its ``meta`` may nest thousands deep or hold msgpack ext values
    that no JSON encoder knows. Both become short markers instead of a traceback.
    """
    if isinstance(v, msgspec.msgpack.Ext):
        return f"<msgpack ext type {v.code}, {len(memoryview(v.data))} bytes>"
    if isinstance(v, dict | list):
        if depth >= MAX_META_DEPTH:
            return f"<nested deeper than {MAX_META_DEPTH} levels>"
        if isinstance(v, dict):
            return {str(k): safe_value(x, depth + 1) for k, x in v.items()}
        return [safe_value(x, depth + 1) for x in v]
    return jsonable(v)


class TraceSummary:
    """What ``inspect`` shows, gathered from records one at a time (bounded memory).

    Memory: per run, per window name, per stream, per score name and model, plus the
    first ``MAX_FAILURES`` failures; never per record.
    """

    def __init__(self) -> None:
        self.starts: dict[int, RunStart] = {}
        self.ends: dict[int, RunEnd] = {}
        self.groups: dict[str, dict[str, Any]] = {}
        self.failures: list[dict[str, Any]] = []
        self.failures_total = 0
        self.selections: dict[str, dict[str, Any]] = {}
        self.continuations: dict[str, dict[str, Any]] = {}
        self.scores: dict[tuple[str, str | None], list[float]] = {}
        self.models: dict[tuple[str, str], int] = defaultdict(int)
        self.llm: dict[str, Any] = {"count": 0, "failed": 0, "input_tokens": 0,
                                    "output_tokens": 0, "cost": None, "_latency": 0}
        self.tools: dict[str, dict[str, Any]] = {}
        self.records = 0

    def add(self, records: list[Any]) -> None:
        self.records += len(records)
        for r in records:
            t = type(r)
            if t is WindowEnter:
                self._enter(r)
            elif t is WindowExit:
                self._exit(r)
            elif t is Selection:
                self._selection(r)
            elif t is Continuation:
                self._continuation(r)
            elif t is Score:
                v = self.scores.get((r.name, r.channel))
                if v is None:
                    self.scores[(r.name, r.channel)] = [1, r.value, r.value, r.value]
                else:
                    v[0] += 1
                    v[1] += r.value
                    v[2] = min(v[2], r.value)
                    v[3] = max(v[3], r.value)
            elif t is LLMCall:
                self._llm(r)
            elif t is ToolCall:
                g = self.tools.setdefault(r.name, {"name": r.name, "count": 0, "failed": 0,
                                                   "refused": 0, "_wall": 0})
                g["count"] += 1
                g["failed"] += r.status == 1
                g["refused"] += r.status == 2
                g["_wall"] += r.wall_ns
            elif t is RunStart:
                self.starts.setdefault(r.run, r)
            elif t is RunEnd:
                self.ends.setdefault(r.run, r)

    def _enter(self, r: WindowEnter) -> None:
        g = self.groups.get(r.name)
        if g is None:
            g = self.groups[r.name] = {
                "name": r.name, "after": r.after, "count": 0, "ok": 0, "failed": 0,
                "closed": 0, "open": 0, "bypasses": 0, "tool_calls": 0, "llm_calls": 0,
                "input_tokens": 0, "output_tokens": 0, "cost": None, "selections": 0,
                "_wall": 0, "_exits": 0,
            }
        g["count"] += 1
        g["open"] += 1
        if r.after is not None and (r.expected_hash is None or r.link_hash != r.expected_hash):
            g["bypasses"] += 1

    def _exit(self, r: WindowExit) -> None:
        g = self.groups.get(r.name)
        if g is None:
            return
        g["open"] -= 1
        g[_STATUS.get(r.status, "ok")] += 1
        g["_wall"] += r.wall_ns
        g["_exits"] += 1
        for k in ("tool_calls", "llm_calls", "input_tokens", "output_tokens", "selections"):
            g[k] += getattr(r, k)
        if r.cost is not None:
            g["cost"] = (g["cost"] or 0.0) + r.cost
        if r.status == EXIT_FAILED:
            self.failures_total += 1
            if len(self.failures) < MAX_FAILURES:
                self.failures.append({"run": r.run, "window": r.window, "name": r.name,
                                      "error_type": r.error_type,
                                      "error_message": r.error_message})

    def _selection(self, s: Selection) -> None:
        g = self.selections.get(s.name)
        if g is None:
            g = self.selections[s.name] = {
                "stream": s.name, "owners": [], "count": 0, "_n": 0, "min_candidates": s.n,
                "max_candidates": s.n, "zeros": 0, "with_zeros": 0, "steered": 0,
                "forced": 0, "_p": 0.0}
        if s.owner not in g["owners"]:
            g["owners"].append(s.owner)
        g["count"] += 1
        g["_n"] += s.n
        g["min_candidates"] = min(g["min_candidates"], s.n)
        g["max_candidates"] = max(g["max_candidates"], s.n)
        g["zeros"] += s.n_zero
        g["with_zeros"] += s.n_zero > 0
        g["steered"] += s.steer is not None
        g["forced"] += s.forced
        if len(s.probs) == 8 * s.n and 0 <= s.choice < s.n:
            g["_p"] += float(np.frombuffer(s.probs, "<f8")[s.choice])

    def _continuation(self, c: Continuation) -> None:
        g = self.continuations.get(c.name)
        if g is None:
            g = self.continuations[c.name] = {"stream": c.name, "count": 0, "continued": 0,
                                              "stopped": 0, "steered": 0, "_p": 0.0}
        g["count"] += 1
        g["continued" if c.decision else "stopped"] += 1
        g["steered"] += c.steer is not None
        g["_p"] += c.p

    def _llm(self, c: LLMCall) -> None:
        llm = self.llm
        llm["count"] += 1
        llm["failed"] += c.status != 0
        llm["input_tokens"] += c.input_tokens
        llm["output_tokens"] += c.output_tokens
        llm["_latency"] += c.latency_ns
        if c.cost is not None:
            llm["cost"] = (llm["cost"] or 0.0) + c.cost
        self.models[(c.provider, c.model)] += 1

    # -- the JSON-ready result

    def runs(self) -> list[dict[str, Any]]:
        rows = []
        for run, start in self.starts.items():
            end = self.ends.get(run)
            status = "not ended" if end is None else "ok" if end.status == 0 else "failed"
            rows.append({
                "run": run, "run_id": start.run_id, "system": start.system, "task": start.task,
                "seed": start.seed, "meta": safe_value(start.meta),
                "parent_run": start.parent_run, "ended": end is not None, "status": status,
                "error_type": None if end is None else end.error_type,
                "duration_ms": None if end is None else (end.t_ns - start.t_ns) / 1e6,
            })
        return rows

    def result(self) -> dict[str, Any]:
        windows = []
        for g in self.groups.values():
            g = dict(g)
            wall, exits = g.pop("_wall"), g.pop("_exits")
            g["total_wall_ms"] = wall / 1e6
            g["mean_wall_ms"] = wall / exits / 1e6 if exits else None
            windows.append(g)
        selections = []
        for g in self.selections.values():
            g = dict(g)
            g["mean_candidates"] = g.pop("_n") / g["count"]
            g["mean_chosen_p"] = g.pop("_p") / g["count"]
            selections.append(g)
        continuations = []
        for g in self.continuations.values():
            g = dict(g)
            g["mean_p"] = g.pop("_p") / g["count"]
            continuations.append(g)
        tools = []
        for g in self.tools.values():
            g = dict(g)
            g["mean_wall_ms"] = g.pop("_wall") / g["count"] / 1e6
            tools.append(g)
        llm = dict(self.llm)
        latency = llm.pop("_latency")
        llm["mean_latency_ms"] = latency / llm["count"] / 1e6 if llm["count"] else None
        llm["models"] = [{"provider": p, "model": m, "count": n}
                         for (p, m), n in self.models.items()]
        return {
            "runs": self.runs(),
            "windows": windows,
            "failures": self.failures,
            "failures_total": self.failures_total,
            "selections": selections,
            "continuations": continuations,
            "scores": [{"name": name, "channel": channel, "count": n, "mean": total / n,
                        "min": lo, "max": hi}
                       for (name, channel), (n, total, lo, hi) in self.scores.items()],
            "llm_calls": llm,
            "tool_calls": tools,
        }


def summarize_trace(trace: al.Trace) -> dict[str, Any]:
    """Everything ``inspect`` shows about a trace read into memory, as a JSON-ready dict."""
    summary = TraceSummary()
    summary.add(trace.records)
    return {
        "path": trace.path,
        "format_version": trace.format_version,
        "frames": trace.frames,
        "records": len(trace.records),
        "truncated": bool(trace.truncated),
        "bytes_dropped": int(trace.bytes_dropped),
        "records_recovered": int(trace.records_recovered),
        **summary.result(),
    }


def summarize_path(path: Path) -> dict[str, Any]:
    """As ``summarize_trace``, streaming the file: memory is one frame (at most
    ``ReadLimits.max_held_bytes`` of decompressed data) plus the tallies.

    Raises:
        BadInput: the file is missing, a folder, unreadable or not a trace.
    """
    check_trace_path(path)
    summary = TraceSummary()
    with trace_errors(path), al.iter_frames(path) as frames:
        for frame in frames:
            if frame.records:
                summary.add(frame.records)
            del frame  # let it go before the next frame is decoded (one frame held)
    return {
        "path": str(path),
        "format_version": frames.format_version,
        "frames": frames.frames,
        "records": frames.records,
        "truncated": bool(frames.truncated),
        "bytes_dropped": int(frames.bytes_dropped),
        "records_recovered": frames.records,
        **summary.result(),
    }


def _meta(meta: dict[str, Any]) -> str:
    def value(v: Any) -> str:
        if isinstance(v, float):
            return fmt_num(v)
        if isinstance(v, str):
            return v
        return json.dumps(jsonable(v), separators=(",", ":"))

    return " ".join(f"{k}={value(v)}" for k, v in meta.items())


def table(title: str, columns: list[str], *, right: Collection[str] = ()) -> Table:
    """A titled table; the columns named in ``right`` (numbers) are right-aligned."""
    t = Table(title=title, title_justify="left", title_style="bold")
    for c in columns:
        t.add_column(c, justify="right" if c in right else "left", overflow="fold")
    return t


def _more(console: Console, rows: list[Any], total: int | None = None) -> None:
    n = len(rows) if total is None else total
    if n > MAX_ROWS:
        console.print(f"[dim]… {n - MAX_ROWS} more (see --json)[/]")


def render_inspect(summary: dict[str, Any], console: Console) -> None:
    """Draw a ``summarize_trace`` dict as rich tables."""
    version = summary["format_version"]
    # A file that ends inside its header (an empty file, a writer killed at once) has none.
    fmt = "no format header" if version is None else f"format v{version}"
    console.print(f"[bold]{escape(summary['path'])}[/]  {summary['records']} records in "
                  f"{summary['frames']} frames ({fmt})")
    if summary["truncated"]:
        console.print(f"[yellow]truncated:[/] {summary['bytes_dropped']} bytes dropped after "
                      f"the last complete frame; {summary['records_recovered']} records "
                      "recovered (the writer stopped mid-frame: a crash or a partial copy)")
    runs = summary["runs"]
    t = table("Runs", ["run", "system", "task", "seed", "status", "meta"])
    for r in runs[:MAX_ROWS]:
        status = {"ok": "[green]ok[/]", "failed": f"[red]failed ({r['error_type']})[/]"}.get(
            r["status"], "[yellow]not ended[/]")
        t.add_row(str(r["run"]), escape(r["system"]), escape(str(r["task"])), str(r["seed"]),
                  status, escape(_meta(r["meta"])))
    console.print(t)
    _more(console, runs)

    windows = summary["windows"]
    # Columns that would be all zeros stay out, so the table fits a terminal.
    optional: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("open", lambda w: f"[yellow]{w['open']}[/]" if w["open"] else "0"),
        ("bypasses", lambda w: f"[red]{w['bypasses']}[/]" if w["bypasses"] else "0"),
        ("LLM calls", lambda w: str(w["llm_calls"])),
        ("tokens in/out", lambda w: f"{w['input_tokens']}/{w['output_tokens']}"),
    ]
    keys = {"open": "open", "bypasses": "bypasses", "LLM calls": "llm_calls",
            "tokens in/out": "llm_calls"}
    shown = [(name, cell) for name, cell in optional if any(w[keys[name]] for w in windows)]
    names = ["count", "failed", *(n for n, _ in shown), "mean wall", "total wall", "tools"]
    t = table("Windows", ["window", *names], right=names)
    for w in windows:
        t.add_row(escape(w["name"]), str(w["count"]),
                  f"[red]{w['failed']}[/]" if w["failed"] else "0",
                  *(cell(w) for _, cell in shown),
                  fmt_ms(w["mean_wall_ms"]), fmt_ms(w["total_wall_ms"]), str(w["tool_calls"]))
    console.print(t if summary["windows"] else "[dim]no windows[/]")

    failures = summary["failures"]
    if failures:
        t = table("Failures", ["window", "run", "error"])
        for f in failures[:MAX_ROWS]:
            t.add_row(escape(f["name"]), str(f["run"]),
                      escape(f"{f['error_type']}: {f['error_message']}"))
        console.print(t)
        _more(console, failures, summary.get("failures_total"))

    if summary["selections"]:
        names = ["count", "mean n", "zeros", "steered", "mean chosen p"]
        t = table("Selections", ["stream", "owner", *names], right=names)
        for s in summary["selections"]:
            t.add_row(escape(s["stream"]), ",".join(s["owners"]), str(s["count"]),
                      fmt_num(s["mean_candidates"], 3),
                      f"[yellow]{s['zeros']}[/]" if s["zeros"] else "0", str(s["steered"]),
                      fmt_num(s["mean_chosen_p"], 3))
        console.print(t)
    if summary["continuations"]:
        names = ["count", "continued", "stopped", "mean p"]
        t = table("Continuations", ["stream", *names], right=names)
        for c in summary["continuations"]:
            t.add_row(escape(c["stream"]), str(c["count"]), str(c["continued"]),
                      str(c["stopped"]), fmt_num(c["mean_p"], 3))
        console.print(t)
    if summary["scores"]:
        names = ["count", "mean", "min", "max"]
        t = table("Scores", ["score", "channel", *names], right=names)
        for s in summary["scores"]:
            t.add_row(escape(s["name"]), escape(str(s["channel"] or "-")), str(s["count"]),
                      fmt_num(s["mean"]), fmt_num(s["min"]), fmt_num(s["max"]))
        console.print(t)
    llm = summary["llm_calls"]
    if llm["count"]:
        models = ", ".join(f"{m['provider']}/{m['model']} x{m['count']}" for m in llm["models"])
        cost = "" if llm["cost"] is None else f", cost {llm['cost']:.4g}"
        console.print(f"[bold]LLM calls[/] {llm['count']} ({llm['failed']} failed), tokens "
                      f"{llm['input_tokens']} in / {llm['output_tokens']} out{cost}: "
                      f"{escape(models)}")
    else:
        console.print("[dim]no LLM calls[/]")
    if summary["tool_calls"]:
        names = ["count", "failed", "refused", "mean wall"]
        t = table("Tool calls", ["tool", *names], right=names)
        for c in summary["tool_calls"]:
            t.add_row(escape(c["name"]), str(c["count"]), str(c["failed"]),
                      str(c["refused"]), fmt_ms(c["mean_wall_ms"]))
        console.print(t)


def _file_row(path: Path) -> dict[str, Any]:
    """One row of the several-files table: the totals of ``summarize_path``."""
    try:
        summary = summarize_path(path)
    except BadInput as exc:
        return {"path": str(path), "readable": False, "error": str(exc)}
    runs = summary["runs"]
    return {
        "path": str(path), "readable": True, "records": summary["records"],
        "truncated": summary["truncated"], "runs": len(runs),
        "runs_ended": sum(r["ended"] for r in runs),
        "windows": sum(w["count"] for w in summary["windows"]),
        "failed_windows": sum(w["failed"] for w in summary["windows"]),
        "selections": sum(x["count"] for x in summary["selections"]),
        "continuations": sum(c["count"] for c in summary["continuations"]),
        "scores": sum(x["count"] for x in summary["scores"]),
        "llm_calls": summary["llm_calls"]["count"],
        "tool_calls": sum(x["count"] for x in summary["tool_calls"]),
    }


def summarize_files(paths: list[Path]) -> dict[str, Any]:
    """One row per trace file (folders stand for the ``*.zst`` files below them)."""
    files = [_file_row(p) for p in paths]
    unreadable = sum(not f["readable"] for f in files)
    total = {k: sum(f.get(k, 0) for f in files if f["readable"])
             for k in ("records", "runs", "runs_ended", "windows", "failed_windows",
                       "selections", "continuations", "scores", "llm_calls", "tool_calls")}
    return {"files": files, "counts": {"files": len(files), "unreadable": unreadable,
                                       "truncated": sum(bool(f.get("truncated")) for f in files),
                                       **total}}


_FILE_COLUMNS = ["records", "runs", "windows", "failed", "selections", "stops", "scores",
                 "LLM calls", "tools"]


def render_files(result: dict[str, Any], console: Console) -> None:
    """Draw a ``summarize_files`` dict: one row per file, then the totals."""
    t = table("Traces", ["file", "status", *_FILE_COLUMNS], right=_FILE_COLUMNS)
    for f in result["files"]:
        if not f["readable"]:
            t.add_row(escape(f["path"]), "[red]unreadable[/]", *["-"] * len(_FILE_COLUMNS))
            continue
        status = "[yellow]truncated[/]" if f["truncated"] else "[green]ok[/]"
        runs = str(f["runs"]) if f["runs"] == f["runs_ended"] else \
            f"{f['runs']} ([yellow]{f['runs'] - f['runs_ended']} not ended[/])"
        t.add_row(escape(f["path"]), status, str(f["records"]), runs, str(f["windows"]),
                  f"[red]{f['failed_windows']}[/]" if f["failed_windows"] else "0",
                  str(f["selections"]), str(f["continuations"]), str(f["scores"]),
                  str(f["llm_calls"]), str(f["tool_calls"]))
    console.print(t)
    for f in result["files"]:
        if not f["readable"]:
            console.print(f"[red]✗ {escape(f['error'])}[/]")
    c = result["counts"]
    console.print(f"{c['files']} file{'s' * (c['files'] != 1)}: {c['records']} records, "
                  f"{c['runs']} runs, {c['windows']} windows; {c['truncated']} truncated, "
                  f"{c['unreadable']} unreadable")


def inspect_command(
    traces: Annotated[list[Path], traces_argument(
        "A trace file (*.zst), or several, or folders of them.")],
    json_output: JsonOutput = False,
) -> None:
    """Show what a trace holds: runs, windows, selections, stops, scores, calls.

    Given several files or a folder, show one summary row per file instead. The files
    are streamed: memory does not grow with their size.
    """
    try:
        if len(traces) == 1 and not traces[0].is_dir():
            summary = summarize_path(traces[0])
            if json_output:
                print_json(summary)
            else:
                render_inspect(summary, stdout())
            return
        paths = expand(traces)
        if any(p.is_dir() for p in paths):
            empty = next(p for p in paths if p.is_dir())
            raise BadInput(f"{empty}: folder holds no *.zst trace files; pass trace files, or "
                           "the folder you recorded them into")
        result = summarize_files(paths)
    except BadInput as exc:
        fail(f"agentlog inspect: {exc}")
    except RecursionError:  # pragma: no cover - safe_value bounds every nesting we know of
        fail("agentlog inspect: a record nests too deeply to be shown")
    if json_output:
        print_json(result)
    else:
        render_files(result, stdout())
    if result["counts"]["unreadable"]:
        raise typer.Exit(EXIT_BAD_INPUT)
