"""The ``--design/--seeds/--mode`` path of ``agentlog replay``: paired interventions.

``agentlog replay TRACES --window retrieval --design selection=agent,uniform --design
stopping=adaptive,fixed:4 --seeds 3 --mode rerun --app my_agent --score my_agent:outcome
--out DIR`` re-enters every sealed instance of the window under each arm of the design
and each replicate seed (``agentlog.replay.intervene``), writes ``DIR/units.zst`` and
``DIR/arms/``, and resumes: a re-run does only the units not sealed yet. ``--score``
names a function of the app (``module:qualname``) that turns the window's return value
into ``{name: value}`` (e.g. the Opened Mean); the window's own ``al.score`` readouts are
kept too. ``agentlog estimate effects DIR`` then gives the policy effects.

Exit codes: 0 every unit ran, 1 some units failed (recorded; a re-run retries them), 2 bad
input (a malformed design, an unknown level, no app, a mode that cannot be served, a
window not in the traces).

Example::

    $ agentlog replay agentlog-demo/ --window retrieval --app agentlog.examples.deep_research \\
        --design selection=agent,uniform --design stopping=adaptive,fixed:4 --seeds 2 \\
        --mode rerun --score my_agent:opened_mean --out arms/
    $ agentlog estimate effects arms/ --outcome opened_mean
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.markup import escape

import agentlog as al
from agentlog.registry import resolve
from agentlog.replay import ExecutionOptions

from ._executor import ray_output_to_stderr
from ._output import (
    EXIT_OK,
    EXIT_PROBLEM,
    BadInput,
    fail,
    open_cache,
    print_json,
    short_path,
    stdout,
)
from ._verify_cmd import trace_files

SHOWN_FAILURES = 10


def _function(name: str) -> Any:
    try:
        obj: Any = resolve(name, what="--score function")
    except ValueError as exc:
        raise BadInput(f"--score {name!r}: expected module:function, e.g. "
                       "my_agent:opened_mean") from exc
    except (ImportError, AttributeError) as exc:
        raise BadInput(f"--score {name!r}: {exc}") from None
    if not callable(obj):
        raise BadInput(f"--score {name!r} is not a function")
    return obj


def parse_shapley(text: str | None) -> str | int | None:
    """``--shapley``: none, auto, exact or a number of permutations."""
    if text is None or text == "none":
        return None
    if text in ("auto", "exact"):
        return text
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise BadInput(f"--shapley {text!r}: expected exact, auto, none or a number of "
                   "permutations (e.g. 64)")


def _arms(design: list[str], alter: list[str], shapley: str | None, seeds: int) -> Any:
    """The arms of ``--design`` (a 2×2 ``Design``) or of ``--alter`` (attribution arms)."""
    from agentlog.estimators import attribution
    from agentlog.replay import parse_design

    if design and (alter or shapley is not None):
        raise BadInput("--design and --alter/--shapley are two kinds of study: a paired "
                       "2×2 (--design) or a per-step attribution (--alter); run them into "
                       "two --out folders")
    try:
        if design:
            return parse_design(design, seeds=seeds)
        if not alter:
            raise BadInput("--shapley needs the decisions to attribute: --alter STREAM@K "
                           "(repeatable)")
        return attribution.arms(alter, shapley=parse_shapley(shapley))  # type: ignore[arg-type]
    except (ValueError, TypeError) as exc:
        raise BadInput(str(exc)) from exc


def run_design_replay(
    traces: list[Path], *, design: list[str], seeds: int, mode: str, window: str | None,
    app: str | None, score: str | None, out: Path, concurrency: int, executor: str,
    as_json: bool, cache: Path | None = None, frozen: bool = False,
    ray_address: str | None = None, alter: list[str] | None = None,
    shapley: str | None = None,
) -> int:
    """Run ``intervene`` for the command line (a ``--design`` or the ``--alter`` arms);
    print its summary; return the exit code."""
    from agentlog.replay import (
        AppImportError,
        AppNotGivenError,
        NotRegisteredError,
        intervene,
        resolve_app,
    )

    store = None
    try:
        if frozen:
            raise BadInput("--frozen is for channel replays; with --design say --mode frozen "
                           "(the default: every model call served from the recording, and "
                           "from --cache when given)")
        if cache is not None:
            if executor == "ray":
                raise BadInput("--cache with --executor ray: the cache is a file of this "
                               "machine and does not reach Ray's workers; use --executor "
                               "local, or leave --cache out")
            store = open_cache(cache, read_only=mode == "frozen", missing=(
                f"--cache {cache}: no such file; with --mode frozen the cache is only read "
                "(build it with a live replay, or ModelCache.from_traces)"))
        flag = "--design" if design else "--alter"
        parsed = _arms(design, alter or [], shapley, seeds)
        if window is None:
            raise BadInput(f"{flag} needs --window NAME: the window to re-enter under each "
                           "arm (agentlog inspect TRACE lists the windows)")
        if out.suffix == ".zst" or (out.exists() and not out.is_dir()):
            raise BadInput(f"--out {out}: with {flag}, --out names a folder (it receives "
                           "units.zst and arms/), e.g. --out arms/")
        paths = trace_files(traces)
        module = resolve_app(app, traces=paths)
        scores = _function(score) if score else None
        try:
            with ray_output_to_stderr(executor):
                run = intervene(paths, window=window, arms=parsed, out=out,
                                seeds=range(seeds), app=module.__name__, scores=scores,
                                cache=store,
                                mode=mode,  # type: ignore[arg-type]
                                execution=ExecutionOptions(
                                    concurrency=concurrency, progress=not as_json,
                                    executor=executor,  # type: ignore[arg-type]
                                    ray_address=ray_address))
        except ValueError as exc:
            raise BadInput(str(exc)) from exc
    except (BadInput, AppNotGivenError, AppImportError, NotRegisteredError,
            al.MissingDependencyError) as exc:
        fail(f"agentlog replay: {exc}")
    finally:
        if store is not None:
            store.close()
    s = run.summary.to_dict()
    result: dict[str, Any] = {
        **s, "out": str(run.out), "window": window, "mode": run.mode,
        "instances": run.instances, "units": run.units,
        "arms": [{"name": a.name, "hash": a.hash, "factors": dict(a.factors)}
                 for a in run.arms],
        "seeds": seeds,
    }
    if as_json:
        print_json(result)
    else:
        _render(result)
    return EXIT_PROBLEM if result["failed"] else EXIT_OK


def _render(result: dict[str, Any]) -> None:
    console = stdout()
    console.print(f"Re-entered {result['instances']} instances of window "
                  f"[bold]{escape(str(result['window']))}[/] under {len(result['arms'])} arms "
                  f"x {result['seeds']} seeds (mode {escape(result['mode'])}): "
                  f"{result['units']} units → [bold]{escape(short_path(result['out']))}[/]")
    for a in result["arms"]:
        console.print(f"  {escape(a['name'])}  [dim]{a['hash'][:12]}…[/]")
    colour = "red" if result["failed"] else "green"
    console.print(f"  [{colour}]{result['done']} done, {result['skipped']} already sealed "
                  f"(skipped), {result['failed']} failed[/] in {result['wall_s']:.2f} s")
    for f in result["failures"][:SHOWN_FAILURES]:
        console.print(f"  [red]✗ unit {escape(f['key'][:12])}…: {escape(f['error_type'])}: "
                      f"{escape(f['message'])}[/]")
    if result["failed"]:
        console.print("  → the failed units are recorded; fix their cause and run the same "
                      "command again: only the units not sealed yet run")
    if not (result["done"] or result["skipped"]):
        return  # every unit failed: nothing to estimate yet
    estimator = ("attribution" if any("alter" in a["factors"] for a in result["arms"])
                 else "effects")
    console.print(f"  next: agentlog estimate {estimator} {escape(short_path(result['out']))} "
                  "--outcome NAME")
