"""``agentlog validity-card``: what a benchmark score licenses ([DMC] §4.4, §5.5).

Builds ``reliability.validity_card`` from recorded traces: the decision-ownership map
(``select(..., owner=)``), the replay gate (a trace that does not verify fails it; traces
that verify leave it not probed until a replay has been run), the non-degeneracy of
model-owned decisions against a per-run score, and, when ``--scorer`` names a scorer, the
probe battery (correct, empty, fabricated, duplicate-laden, contradictory metadata) on the
probe tasks of ``--probes`` (default: the toy tasks of ``agentlog.examples.scorers``).
With ``--replay OUT.zst`` (the ``--out`` of an ``agentlog replay ... --channel``) the replay
gate is probed: every unit the traces need is looked up there and its scores are derived
again from the sealed states with the app module of ``--app``
(``agentlog.replay.rederive_channel_replay``); it passes only when every unit ran and every
score re-derived the same, and fails on a failed unit or a mismatch.

``--scorer`` and ``--probes`` are ``module:function`` given by the user on the command line,
imported with ``importlib.import_module``: never named by a trace or by data, never
``eval``-ed. Only dotted identifiers are accepted.

Exit codes: 0 every probed cell passes, 1 a cell fails, 2 bad input.

Example::

    $ agentlog demo --out runs/
    $ agentlog validity-card runs/ --scorer agentlog.examples.scorers:ground_truth_scorer \\
        --decision doc --score abs_error --markdown > card.md
    $ agentlog replay runs/*.zst --channel quote --window retrieval \\
        --app agentlog.examples.deep_research --out asv.zst
    $ agentlog validity-card runs/ --replay asv.zst --app agentlog.examples.deep_research
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape

import agentlog as al
from agentlog.records import Continuation, Selection, iter_runs

from ._estimate_reliability import choose_score, reliability_module, terminal_score_names
from ._options import (
    Traces,
    app_option,
    cache_option,
    json_option,
    score_option,
    seed_option,
    window_option,
)
from ._output import EXIT_OK, EXIT_PROBLEM, BadInput, fail, print_json, stdout, trace_errors
from ._verify_cmd import trace_files

DEFAULT_PROBES = "agentlog.examples.scorers:probe_tasks"
SCORER_BASES = ("outcome", "specification")


def load_callable(spec: str, option: str) -> Callable[..., Any]:
    """The function named by ``module:function`` (``function`` may be dotted: ``Cls.meth``).

    The module is imported with ``importlib.import_module``, as ``python -c 'import module'``
    would; nothing is evaluated. Anything that cannot be used is ``BadInput`` naming it.
    """
    module_name, sep, attr = spec.partition(":")
    parts = module_name.split(".") + attr.split(".")
    if not sep or not all(p.isidentifier() for p in parts):
        raise BadInput(f"{option} must be module:function, with an importable module, e.g. "
                       f"agentlog.examples.scorers:shape_scorer; found {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BadInput(f"{option} {spec}: cannot import {module_name!r} ({exc}); pass a module "
                       f"that `python -c 'import {module_name}'` imports (installed, or on "
                       "PYTHONPATH)") from exc
    except Exception as exc:  # the user's module failed at import: report, do not crash
        raise BadInput(f"{option} {spec}: importing {module_name!r} raised "
                       f"{type(exc).__name__}: {exc}") from exc
    obj: Any = module
    for i, name in enumerate(attr.split(".")):
        try:
            obj = getattr(obj, name)
        except AttributeError:
            where = module_name if i == 0 else f"{module_name}:{'.'.join(attr.split('.')[:i])}"
            raise BadInput(f"{option} {spec}: {where} has no attribute {name!r}") from None
    if not callable(obj):
        raise BadInput(f"{option} {spec}: {type(obj).__name__} is not callable; name a "
                       "function")
    fn: Callable[..., Any] = obj
    return fn


def decision_streams(traces: Sequence[al.Trace | Path]) -> dict[str, str]:
    """``{stream name: "select" | "proceed"}`` of every decision recorded in ``traces``;
    the files stream one run at a time."""
    out: dict[str, str] = {}
    for _, run in iter_runs(list(traces), name="traces"):
        for r in run.records:
            t = type(r)
            if t is Selection:
                out.setdefault(r.name, "select")
            elif t is Continuation:
                out.setdefault(r.name, "proceed")
    return dict(sorted(out.items()))


def _check_decisions(decisions: Sequence[str], streams: dict[str, str], n_files: int) -> None:
    unknown = [d for d in decisions if d not in streams]
    if unknown:
        found = ", ".join(f"{n} ({k})" for n, k in streams.items()) or "none"
        raise BadInput(f"--decision {', '.join(unknown)}: no such decision stream in {n_files} "
                       f"trace file(s); decisions recorded: {found}")


def rederived_replay(traces: Sequence[Path], replay: Path, *, app: str | None,
                     window: str | None, cache: Path | None) -> Any:
    """The replay gate's cell from re-deriving the channel replay ``replay`` of ``traces``
    (``agentlog.replay.rederive_channel_replay``), and its report; ``BadInput`` names
    what cannot be used."""
    from agentlog.replay import (
        AppImportError,
        AppNotGivenError,
        NotRegisteredError,
        rederive_channel_replay,
    )

    if not replay.is_file():
        raise BadInput(f"--replay {replay}: no such file; pass the --out trace of "
                       "`agentlog replay TRACES --channel NAME --window W --out OUT.zst`")
    if cache is not None and not cache.is_file():
        raise BadInput(f"--cache {cache}: no such file; pass the --cache the replay used")
    try:
        report = rederive_channel_replay(list(traces), replay, app=app, window=window,
                                         cache=cache)
    except (AppNotGivenError, AppImportError) as exc:
        raise BadInput(f"--replay {replay}: {exc}") from exc
    except NotRegisteredError as exc:
        raise BadInput(f"--replay {replay}: {exc.args[0] if exc.args else exc}") from exc
    except al.CacheMiss as exc:
        raise BadInput(f"--replay {replay}: re-deriving a score needs a model call that "
                       f"--cache {cache} does not hold ({exc}); pass the cache the replay "
                       "wrote") from exc
    except ValueError as exc:  # several windows in the output, or a window not recorded
        raise BadInput(f"--replay {replay}: {exc}".replace("pass window=", "pass --window"
                                                           )) from exc
    from agentlog.estimators.reliability import replay_cell

    return replay_cell(report), report


def failed_cells(card: Any) -> list[str]:
    """The items of the card's failing cells, in card order."""
    return [c.item for c in card.cells if c.status == "fail"]


def render_card(card: Any, out: dict[str, Any], console: Console) -> None:
    """The card's Markdown rendered by rich, then the verdict behind the exit code."""
    console.print(Markdown(card.to_markdown()))
    failed = out["failed_cells"]
    if failed:
        console.print(f"[red]{len(failed)} cell(s) fail[/]: {escape(', '.join(failed))} "
                      f"(exit {EXIT_PROBLEM})")
    else:
        console.print(f"[green]no cell fails[/] (exit {EXIT_OK}); licensed claim: "
                      f"{escape(card.licensed_claim)}")
    s = out["settings"]
    if s["scorer"] is None:
        console.print("[dim]The scorer was not probed: pass --scorer module:function to run "
                      "the probe battery.[/]")
    if s["score"] is None:
        console.print("[dim]Non-degeneracy was not tested: pass --decision NAME (and --score "
                      "NAME) to test a model-owned decision against a per-run outcome.[/]")
    replay = next((c for c in card.cells if c.item.startswith("replay:")), None)
    if replay is not None and replay.status == "not probed":
        if s.get("replay") is None:
            console.print("[dim]The replay gate is not probed: verifying the traces shows "
                          "the recorded draws regenerate, not that the runs re-execute; "
                          "model capability stays unlicensed until a replay has been run "
                          "(agentlog replay ... --out OUT.zst, then --replay OUT.zst "
                          "--app MODULE).[/]")
        else:
            console.print("[dim]The replay gate is not probed: the replay of --replay does "
                          "not cover these traces yet (see the cell); run it to the end, "
                          "then check again.[/]")


def validity_card_command(
    traces: Traces,
    scorer: Annotated[str | None, typer.Option(
        "--scorer", help="The scorer to probe, as module:function (scorer(submission, truth) "
        "-> float), e.g. agentlog.examples.scorers:shape_scorer. Default: not probed.",
        show_default=False)] = None,
    probes: Annotated[str, typer.Option(
        "--probes", help="module:function returning the probe tasks (a list of "
        "reliability.ProbeTask) for --scorer.")] = DEFAULT_PROBES,
    decision: Annotated[list[str] | None, typer.Option(
        "--decision", help="A model-owned decision stream the claim rests on (repeatable): "
        "its ownership is checked and its non-degeneracy tested against --score. Default: "
        "ownership of every recorded decision.", show_default=False)] = None,
    score: Annotated[str | None, score_option(
        "The per-run outcome Y for non-degeneracy (default with --decision: the one run-level "
        "score the runs record).")] = None,
    claim: Annotated[str | None, typer.Option(
        "--claim", help="A claim to check against the licensed one: model capability, system "
        "performance, specification compliance or self-report compliance.",
        show_default=False)] = None,
    scorer_basis: Annotated[str, typer.Option(
        "--scorer-basis", help="What the scorer grades: outcome, or specification (e.g. an "
        "AST match); the probes cannot tell these apart.")] = "outcome",
    seed: Annotated[int, seed_option("Seed of the permutation test.")] = 0,
    json_output: Annotated[bool, json_option("Print the card as JSON.")] = False,
    markdown_output: Annotated[bool, typer.Option(
        "--markdown", help="Print the card as raw Markdown.")] = False,
    replay: Annotated[Path | None, typer.Option(
        "--replay", help="The output trace of a channel replay of these traces (agentlog "
        "replay ... --out OUT.zst): its units are checked and their scores derived again, "
        "which probes the replay gate. Default: not probed.", show_default=False)] = None,
    app: Annotated[str | None, app_option(
        "With --replay: the module that registers the replay's channels and scorers "
        "(default: \\[tool.agentlog] app in pyproject.toml, else $AGENTLOG_APP).")] = None,
    window: Annotated[str | None, window_option(
        "With --replay: the window replayed (default: the one the replay's units "
        "name).")] = None,
    cache: Annotated[Path | None, cache_option(
        "With --replay: the model cache the replay used; re-derived model calls are served "
        "from it, read-only (a miss is an error).")] = None,
) -> None:
    """The validity card of recorded runs: scorer probes, decision ownership, non-degeneracy,
    replay and the licensed claim ([DMC] §5.5). Exit 1 when a cell fails."""
    rel = reliability_module()
    name = "agentlog validity-card"
    if json_output and markdown_output:
        fail(f"{name}: --json and --markdown both given; pass one")
    if claim is not None and claim not in rel.CLAIMS[:-1]:
        fail(f"{name}: --claim must be one of {', '.join(rel.CLAIMS[:-1])}; found {claim!r}")
    if scorer_basis not in SCORER_BASES:
        fail(f"{name}: --scorer-basis must be one of {', '.join(SCORER_BASES)}; found "
             f"{scorer_basis!r}")
    if replay is None and (app is not None or window is not None or cache is not None):
        given = [o for o, v in (("--app", app), ("--window", window), ("--cache", cache))
                 if v is not None]
        fail(f"{name}: {', '.join(given)} only apply with --replay OUT.zst (the output of "
             "`agentlog replay`); pass --replay too")
    decisions = list(decision) if decision else None
    replay_report: Any = None
    replayed: Any = None
    try:
        loaded = trace_files(traces)
        score_name: str | None = None
        with trace_errors():  # the files stream: a bad one is found while reading it
            if decisions is not None:
                _check_decisions(decisions, decision_streams(loaded), len(loaded))
            if decisions is not None or score is not None:
                score_name, _ = choose_score(terminal_score_names(loaded), score,
                                             len(loaded))
        scorer_fn = probe_list = None
        if scorer is not None:
            scorer_fn = load_callable(scorer, "--scorer")
            probes_fn = load_callable(probes, "--probes")
            try:
                probe_list = probes_fn()
            except Exception as exc:  # the user's probe builder failed: bad input, named
                raise BadInput(f"--probes {probes}: calling it raised {type(exc).__name__}: "
                               f"{exc}") from exc
        if replay is not None:
            with trace_errors():
                replayed, replay_report = rederived_replay(loaded, replay, app=app,
                                                           window=window, cache=cache)
    except BadInput as exc:
        fail(f"{name}: {exc}")
    try:
        with trace_errors():
            card = rel.validity_card(scorer=scorer_fn, probes=probe_list, traces=loaded,
                                     decision_scores=score_name, claimed_decisions=decisions,
                                     claim=claim, scorer_basis=scorer_basis, seed=seed,
                                     replay=replayed)
    except BadInput as exc:
        fail(f"{name}: {exc}")
    except ValueError as exc:
        where = f" (--probes {probes})" if "`probes`" in str(exc) else ""
        fail(f"{name}: {exc}{where}")
    failed = failed_cells(card)
    code = EXIT_PROBLEM if failed else EXIT_OK
    out: dict[str, Any] = card.to_dict()
    out["failed_cells"] = failed
    out["exit_code"] = code
    out["settings"] = {
        "traces": [str(p) for p in loaded], "scorer": scorer,
        "probes": probes if scorer is not None else None, "decisions": decisions,
        "score": score_name, "claim": claim, "scorer_basis": scorer_basis, "seed": seed,
        "replay": None if replay is None else str(replay), "app": app,
    }
    out["replay"] = None if replay_report is None else replay_report.to_dict()
    if json_output:
        print_json(out)
    elif markdown_output:
        typer.echo(card.to_markdown(), nl=False)
    else:
        render_card(card, out, stdout())
    raise typer.Exit(code)
