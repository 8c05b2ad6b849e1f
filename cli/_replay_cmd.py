"""``agentlog replay TRACES... --channel NAME --window W``: channel replay of frozen states.

Scores the before and after states of every completed instance of window ``W`` under each
registered channel (``@al.channel``), in each cyclic layout and wave, and appends the raw
scores with their provenance to ``--out`` (``agentlog.replay.replay_channels``). The
channels come from the app module the user names (``--app``, ``[tool.agentlog] app`` in
``pyproject.toml``, or ``$AGENTLOG_APP``), never from the trace. Re-running the same
command does only the units not yet sealed in ``--out``.

Exit codes: 0 every unit scored, 1 some units failed (recorded; a re-run retries them) or
the replay was interrupted, 2 bad input (no app, an app that does not import, a channel
not registered, a window not in the traces, an unreadable trace).

Example::

    $ agentlog demo
    $ agentlog replay agentlog-demo/*.zst --channel direct --channel quote \\
        --window retrieval --app agentlog.examples.deep_research --out asv.zst
    $ agentlog estimate asv asv.zst --channels direct,quote
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

import agentlog as al
from agentlog.replay import ExecutionOptions

from ._executor import ray_output_to_stderr
from ._options import (
    app_option,
    cache_option,
    channel_option,
    json_option,
    out_option,
    score_option,
    seeds_option,
    traces_argument,
    window_option,
)
from ._output import (
    EXIT_OK,
    EXIT_PROBLEM,
    BadInput,
    fail,
    open_cache,
    print_json,
    short_path,
    stdout,
    trace_errors,
)
from ._verify_cmd import trace_files

if TYPE_CHECKING:
    from agentlog.replay import RunSummary

DEFAULT_OUT = Path("replay.zst")
EXIT_INTERRUPTED = 130  # as a shell reports Ctrl-C
SHOWN_FAILURES = 10


class Executor(enum.StrEnum):
    local = "local"
    ray = "ray"


def _inputs(traces: list[Path], out: Path) -> list[Path]:
    paths = trace_files(traces)
    target = out.resolve()
    # A glob such as runs/*.zst picks up an output written into runs/ on a re-run: it is
    # what is being written, not a source.
    kept = [p for p in paths if p.resolve() != target]
    if not kept:
        raise BadInput(f"--out {out} is the only trace given; pass the recorded traces "
                       "to replay and another file for --out")
    if out.is_dir():
        raise BadInput(f"--out {out}: is a folder; pass a file name such as "
                       f"{out / 'replay.zst'}")
    return kept


def interrupted(out: Path) -> None:
    """Say what a Ctrl-C left: the units sealed in ``out``, or that nothing was written."""
    where = escape(short_path(out))
    if out.exists():
        stdout().print(f"[yellow]interrupted: the units finished so far are sealed in "
                       f"{where}; run the same command again to finish[/]")
    else:
        stdout().print(f"[yellow]interrupted before any unit finished; nothing was written "
                       f"to {where}: run the same command again to start[/]")


def _channel_info(names: list[str]) -> list[dict[str, Any]]:
    from agentlog.replay import get_channel, get_scorer

    out = []
    for name in dict.fromkeys(names):
        ch = get_channel(name)
        sc = get_scorer(ch.scorer)
        out.append({"name": ch.name, "id": ch.id, "hash": ch.hash, "layouts": ch.layouts,
                    "model": ch.model, "scorer": sc.name, "scorer_id": sc.id,
                    "scorer_hash": sc.hash})
    return out


def summarize_replay(summary: RunSummary, *, out: Path, window: str,
                     channels: list[dict[str, Any]], layouts: int | None,
                     waves: int) -> dict[str, Any]:
    """The JSON-ready result of a channel replay: the run summary, channels and counts."""
    per_transition = waves * sum(c["layouts"] if layouts is None else layouts
                                 for c in channels)
    result = summary.to_dict()
    result.update({
        "out": str(out), "window": window, "waves": waves,
        "layouts": {c["name"]: c["layouts"] if layouts is None else layouts
                    for c in channels},
        "transitions": summary.total // per_transition if per_transition else 0,
        "channels": channels,
    })
    return result


def render_replay(result: dict[str, Any]) -> None:
    """Print a replay's summary: units, failures, model calls, what to run next."""
    console = stdout()
    chans = ", ".join(f"{escape(c['name'])} ({result['layouts'][c['name']]} layouts, "
                      f"{c['hash'][:12]}…)" for c in result["channels"])
    console.print(f"Replayed {result['transitions']} transitions of window "
                  f"[bold]{escape(result['window'])}[/] under {chans} x {result['waves']} "
                  f"wave{'s' * (result['waves'] != 1)}: {result['total']} units "
                  f"(transition x channel x layout x wave) → "
                  f"[bold]{escape(short_path(result['out']))}[/]")
    colour = "red" if result["failed"] else "green"
    console.print(f"  [{colour}]{result['done']} scored, {result['skipped']} already sealed "
                  f"(skipped), {result['failed']} failed[/]"
                  + (f", {result['pending']} not run (interrupted)" if result["pending"]
                     else "")
                  + f" in {result['wall_s']:.2f} s")
    console.print(f"  model calls: {result['cache_hits']} served from the cache, "
                  f"{result['cache_misses']} missed it, {result['live_calls']} live")
    for f in result["failures"][:SHOWN_FAILURES]:
        console.print(f"  [red]✗ unit {escape(f['key'][:12])}…: {escape(f['error_type'])}: "
                      f"{escape(f['message'])}[/]")
    if len(result["failures"]) > SHOWN_FAILURES:
        console.print(f"  … and {len(result['failures']) - SHOWN_FAILURES} more (--json "
                      "lists them all)")
    if result["failed"] or result["pending"]:
        console.print("  → the failed units are recorded in the output; fix their cause and "
                      "run the same command again: only the units not sealed yet run")
    names = [c["name"] for c in result["channels"]]
    if len(names) >= 2 and (result["done"] or result["skipped"]):  # something to estimate
        console.print(f"  next: agentlog estimate asv {escape(short_path(result['out']))} "
                      f"--channels {escape(','.join(names[:2]))}")


def run_channel_replay(
    traces: list[Path], *, channels: list[str], window: str | None, app: str | None,
    layouts: int | None, waves: int, out: Path, concurrency: int, executor: Executor,
    ray_address: str | None, cache: Path | None, frozen: bool, as_json: bool,
) -> int:
    """The ``--channel`` path of ``agentlog replay``; returns the exit code."""
    from agentlog.replay import (
        AppImportError,
        AppNotGivenError,
        NotRegisteredError,
        WindowNotFoundError,
        replay_channels,
        resolve_app,
    )

    store = None
    try:
        if window is None:
            raise BadInput("--channel needs --window NAME: the window whose transitions "
                           "are scored (agentlog inspect TRACE lists the windows)")
        if frozen and cache is None:
            raise BadInput("--frozen needs --cache PATH: the model cache every call must "
                           "be served from")
        paths = _inputs(traces, out)
        module = resolve_app(app, traces=paths)
        info = _channel_info(channels)
        if cache is not None:
            store = open_cache(cache, read_only=frozen, missing=(
                f"--frozen needs an existing cache file; {cache} does not exist. Build it "
                "first: the same replay without --frozen fills it (--cache "
                f"{cache}), or ModelCache.from_traces"))
        with trace_errors(), ray_output_to_stderr(executor.value):
            try:
                summary = replay_channels(
                    paths, channels, window=window, out=out, app=module.__name__,
                    layouts=layouts, waves=waves, cache=store, frozen=frozen,
                    execution=ExecutionOptions(concurrency=concurrency, executor=executor.value,
                                               ray_address=ray_address, progress=not as_json))
            except ValueError as exc:  # bad input the engine refused before running
                raise BadInput(str(exc)) from exc
    except (BadInput, AppNotGivenError, AppImportError, WindowNotFoundError) as exc:
        fail(f"agentlog replay: {exc}")
    except NotRegisteredError as exc:
        fail(f"agentlog replay: {exc}")
    except al.MissingDependencyError as exc:
        fail(f"agentlog replay: {exc}")
    except KeyboardInterrupt:
        interrupted(out)
        return EXIT_INTERRUPTED
    finally:
        if store is not None:
            store.close()
    result = summarize_replay(summary, out=out, window=window, channels=info,
                              layouts=layouts, waves=waves)
    if as_json:
        print_json(result)
    else:
        render_replay(result)
    return EXIT_PROBLEM if result["failed"] or result["pending"] else EXIT_OK


def replay_command(
    traces: Annotated[list[Path], traces_argument(
        "Recorded trace files (*.zst) or folders of them.")],
    channel: Annotated[list[str] | None, channel_option(
        "A registered channel to score the states under (repeatable).")] = None,
    window: Annotated[str | None, window_option(
        "The window whose transitions (entry x⁻, exit x⁺) are scored.")] = None,
    app: Annotated[str | None, app_option(
        "The module that registers the channels and scorers (default: \\[tool.agentlog] app "
        "in pyproject.toml, else $AGENTLOG_APP).")] = None,
    layouts: Annotated[
        int | None,
        typer.Option("--layouts", min=1, help="Score cyclic layouts 0..N-1 (default: each "
                     "channel's declared layouts).", show_default=False),
    ] = None,
    waves: Annotated[
        int, typer.Option("--waves", min=1, help="Acquisition waves (repeat scoring passes).")
    ] = 1,
    out: Annotated[Path, out_option(
        "Output trace, appended to (units already sealed there are skipped).")] = DEFAULT_OUT,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="Units in flight at once.")
    ] = 8,
    executor: Annotated[
        Executor, typer.Option("--executor", help="local (threads/asyncio) or ray.")
    ] = Executor.local,
    ray_address: Annotated[
        str | None,
        typer.Option("--ray-address", help="An existing Ray cluster (default: start a local "
                     "one).", show_default=False),
    ] = None,
    cache: Annotated[Path | None, cache_option(
        "Exact-input model cache (SQLite) the scorers' model calls go through (with --design: "
        "the re-entered windows' calls; read only under --mode frozen).")] = None,
    frozen: Annotated[
        bool, typer.Option("--frozen", help="Every model call must come from --cache; a "
                           "miss fails its unit (agentlog.CacheMiss).")
    ] = False,
    as_json: Annotated[bool, json_option("Print the summary as JSON.")] = False,
    design: Annotated[
        list[str] | None,
        typer.Option("--design", help="Paired interventions: FACTOR=LEVEL,LEVEL (repeatable), "
                     "e.g. selection=agent,uniform and stopping=adaptive,fixed:4; --out "
                     "is then a folder.", show_default=False),
    ] = None,
    seeds: Annotated[int, seeds_option(
        "With --design: replicate seeds shared by every arm (common random numbers).")] = 1,
    mode: Annotated[
        str, typer.Option("--mode", help="With --design: frozen (every call served from the "
                          "recording), branch or rerun (everything live).")
    ] = "frozen",
    score: Annotated[str | None, score_option(
        "With --design: module:function turning the window's return value into {name: value} "
        "scores.")] = None,
    alter: Annotated[
        list[str] | None,
        typer.Option("--alter", help="Per-step attribution: a decision to change, STREAM@K"
                     "[=ALTERNATIVE] (repeatable), e.g. doc@0, stop@1=flip; runs the agent's "
                     "own arm, each decision alone and all together (agentlog estimate "
                     "attribution reads them); --out is then a folder.", show_default=False),
    ] = None,
    shapley: Annotated[
        str | None,
        typer.Option("--shapley", help="With --alter: also the coalitions Shapley values "
                     "need: exact, auto (exact up to 6 decisions) or a number of "
                     "permutations.", show_default=False),
    ] = None,
) -> None:
    """Replay recorded states under evaluation channels. Exit 0 ok, 1 units failed, 2 bad
    input."""
    # The interventions path (--design or --alter, --seeds, --mode) dispatches here, before
    # this check.
    if design or alter or shapley is not None:
        from ._replay_design import run_design_replay

        raise typer.Exit(run_design_replay(
            traces, design=design or [], seeds=seeds, mode=mode, window=window, app=app,
            score=score, out=out, concurrency=concurrency, executor=executor.value,
            ray_address=ray_address, as_json=as_json, cache=cache, frozen=frozen,
            alter=alter or [], shapley=shapley))
    if not channel:
        fail("agentlog replay: pass --channel NAME (repeatable): the registered channels to "
             "score the window's states under")
    raise typer.Exit(run_channel_replay(
        traces, channels=channel, window=window, app=app, layouts=layouts, waves=waves,
        out=out, concurrency=concurrency, executor=executor, ray_address=ray_address,
        cache=cache, frozen=frozen, as_json=as_json))
