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

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import agentlog as al
from agentlog._records import (
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

from ._output import BadInput, fail, fmt_ms, fmt_num, jsonable, print_json, read_trace, stdout

_STATUS = {EXIT_OK: "ok", EXIT_FAILED: "failed", EXIT_CLOSED: "closed"}
MAX_ROWS = 50  # rows of a per-run or per-failure table before "... N more"


def _runs(trace: al.Trace) -> list[dict[str, Any]]:
    starts: dict[int, RunStart] = {}
    ends: dict[int, RunEnd] = {}
    for r in trace.records:
        if isinstance(r, RunStart):
            starts.setdefault(r.run, r)
        elif isinstance(r, RunEnd):
            ends.setdefault(r.run, r)
    rows = []
    for run, start in starts.items():
        end = ends.get(run)
        status = "not ended" if end is None else "ok" if end.status == 0 else "failed"
        rows.append({
            "run": run, "run_id": start.run_id, "system": start.system, "task": start.task,
            "seed": start.seed, "meta": start.meta, "parent_run": start.parent_run,
            "ended": end is not None, "status": status,
            "error_type": None if end is None else end.error_type,
            "duration_ms": None if end is None else (end.t_ns - start.t_ns) / 1e6,
        })
    return rows


def _windows(trace: al.Trace) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    groups: dict[str, dict[str, Any]] = {}
    failures: list[dict[str, Any]] = []
    walls: dict[str, list[int]] = defaultdict(list)
    for r in trace.records:
        if isinstance(r, WindowEnter):
            g = groups.setdefault(r.name, {
                "name": r.name, "after": r.after, "count": 0, "ok": 0, "failed": 0,
                "closed": 0, "open": 0, "bypasses": 0, "tool_calls": 0, "llm_calls": 0,
                "input_tokens": 0, "output_tokens": 0, "cost": None, "selections": 0,
            })
            g["count"] += 1
            g["open"] += 1
            if r.after is not None and (r.expected_hash is None or r.link_hash != r.expected_hash):
                g["bypasses"] += 1
        elif isinstance(r, WindowExit) and r.name in groups:
            g = groups[r.name]
            g["open"] -= 1
            g[_STATUS.get(r.status, "ok")] += 1
            walls[r.name].append(r.wall_ns)
            for k in ("tool_calls", "llm_calls", "input_tokens", "output_tokens", "selections"):
                g[k] += getattr(r, k)
            if r.cost is not None:
                g["cost"] = (g["cost"] or 0.0) + r.cost
            if r.status == EXIT_FAILED:
                failures.append({"run": r.run, "window": r.window, "name": r.name,
                                 "error_type": r.error_type, "error_message": r.error_message})
    for name, g in groups.items():
        w = walls.get(name, [])
        g["total_wall_ms"] = sum(w) / 1e6
        g["mean_wall_ms"] = sum(w) / len(w) / 1e6 if w else None
    return list(groups.values()), failures


def _selections(trace: al.Trace) -> list[dict[str, Any]]:
    groups: dict[str, dict[str, Any]] = {}
    for s in trace.records:
        if not isinstance(s, Selection):
            continue
        g = groups.setdefault(s.name, {"stream": s.name, "owners": [], "count": 0, "_n": 0,
                                       "min_candidates": s.n, "max_candidates": s.n,
                                       "zeros": 0, "with_zeros": 0, "steered": 0,
                                       "forced": 0, "_p": 0.0})
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
    for g in groups.values():
        g["mean_candidates"] = g.pop("_n") / g["count"]
        g["mean_chosen_p"] = g.pop("_p") / g["count"]
    return list(groups.values())


def _continuations(trace: al.Trace) -> list[dict[str, Any]]:
    groups: dict[str, dict[str, Any]] = {}
    for c in trace.records:
        if not isinstance(c, Continuation):
            continue
        g = groups.setdefault(c.name, {"stream": c.name, "count": 0, "continued": 0,
                                       "stopped": 0, "steered": 0, "_p": 0.0})
        g["count"] += 1
        g["continued" if c.decision else "stopped"] += 1
        g["steered"] += c.steer is not None
        g["_p"] += c.p
    for g in groups.values():
        g["mean_p"] = g.pop("_p") / g["count"]
    return list(groups.values())


def _scores(trace: al.Trace) -> list[dict[str, Any]]:
    values: dict[tuple[str, str | None], list[float]] = defaultdict(list)
    for s in trace.records:
        if isinstance(s, Score):
            values[(s.name, s.channel)].append(s.value)
    return [{"name": name, "channel": channel, "count": len(v), "mean": float(np.mean(v)),
             "min": min(v), "max": max(v)} for (name, channel), v in values.items()]


def _llm_calls(trace: al.Trace) -> dict[str, Any]:
    calls = [r for r in trace.records if isinstance(r, LLMCall)]
    models: dict[tuple[str, str], int] = defaultdict(int)
    for c in calls:
        models[(c.provider, c.model)] += 1
    costs = [c.cost for c in calls if c.cost is not None]
    return {
        "count": len(calls),
        "failed": sum(c.status != 0 for c in calls),
        "input_tokens": sum(c.input_tokens for c in calls),
        "output_tokens": sum(c.output_tokens for c in calls),
        "cost": sum(costs) if costs else None,
        "mean_latency_ms": (sum(c.latency_ns for c in calls) / len(calls) / 1e6) if calls
        else None,
        "models": [{"provider": p, "model": m, "count": n} for (p, m), n in models.items()],
    }


def _tool_calls(trace: al.Trace) -> list[dict[str, Any]]:
    groups: dict[str, dict[str, Any]] = {}
    for t in trace.records:
        if isinstance(t, ToolCall):
            g = groups.setdefault(t.name, {"name": t.name, "count": 0, "failed": 0,
                                           "refused": 0, "_wall": 0})
            g["count"] += 1
            g["failed"] += t.status == 1
            g["refused"] += t.status == 2
            g["_wall"] += t.wall_ns
    for g in groups.values():
        g["mean_wall_ms"] = g.pop("_wall") / g["count"] / 1e6
    return list(groups.values())


def summarize_trace(trace: al.Trace) -> dict[str, Any]:
    """Everything ``inspect`` shows, as a JSON-ready dict."""
    windows, failures = _windows(trace)
    return {
        "path": trace.path,
        "format_version": trace.format_version,
        "frames": trace.frames,
        "records": len(trace.records),
        "truncated": bool(trace.truncated),
        "bytes_dropped": int(trace.bytes_dropped),
        "records_recovered": int(trace.records_recovered),
        "runs": _runs(trace),
        "windows": windows,
        "failures": failures,
        "selections": _selections(trace),
        "continuations": _continuations(trace),
        "scores": _scores(trace),
        "llm_calls": _llm_calls(trace),
        "tool_calls": _tool_calls(trace),
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


def _more(console: Console, rows: list[Any]) -> None:
    if len(rows) > MAX_ROWS:
        console.print(f"[dim]… {len(rows) - MAX_ROWS} more (see --json)[/]")


def render_inspect(summary: dict[str, Any], console: Console) -> None:
    """Draw a ``summarize_trace`` dict as rich tables."""
    console.print(f"[bold]{escape(summary['path'])}[/]  {summary['records']} records in "
                  f"{summary['frames']} frames (format v{summary['format_version']})")
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
        _more(console, failures)

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


def inspect_command(
    trace: Annotated[Path, typer.Argument(help="A trace file (*.zst).", show_default=False)],
    json_output: Annotated[
        bool, typer.Option("--json", help="Print JSON instead of tables.")
    ] = False,
) -> None:
    """Show what a trace holds: runs, windows, selections, stops, scores, calls."""
    try:
        loaded = read_trace(trace)
    except BadInput as exc:
        fail(f"agentlog inspect: {exc}")
    summary = summarize_trace(loaded)
    if json_output:
        print_json(summary)
    else:
        render_inspect(summary, stdout())
