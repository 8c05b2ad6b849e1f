"""``agentlog counterfactual TRACES --select STREAM --steer LEVEL``: each recorded choice of a
stream under a selection intervention, on the noise it was drawn with.

A choice recorded by agentlog keeps its Gumbel draws; one made elsewhere and recorded with
``observed=`` (``agentlog import inspect --choices A,B,C,D``, an API model's answer) keeps
the posterior noise given what was observed. ``argmax(log q + g)`` on that noise is the
choice the intervention's vector ``q`` would have made, paired with the factual one
(``agentlog.replay.counterfactual_choices``). With ``--target KEY`` (a key of the window's
entry, ``target`` for imported Inspect samples) the command also gives the accuracy of the
factual and the counterfactual choices and their paired difference with a task-clustered
interval.

Example::

    $ agentlog import inspect logs/ --out traces/ --choices A,B,C,D
    $ agentlog counterfactual traces/ --select answer --steer temperature:0.5 --target target
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from ._inspect import table
from ._options import JsonOutput, traces_argument
from ._output import BadInput, fail, fmt_signed, print_estimate, trace_errors
from ._verify_cmd import trace_files

STEERS = "uniform, reverse, temperature:T"
SHOWN = 20  # candidates in the table; --json has every one


def _steer(token: str) -> Any:
    from agentlog.replay import parse_design

    try:
        (level,) = parse_design([f"selection={token}"]).selection
    except ValueError as exc:
        raise BadInput(f"--steer {token!r}: {exc}") from None
    if isinstance(level, str):  # "agent": the agent's own policy changes nothing
        raise BadInput(f"--steer {token!r} is the agent's own policy: every choice would stay "
                       f"as it was; give an intervention ({STEERS})")
    return level


def _correct(choice: Any, entry: Any, key: str, where: str) -> float:
    if not isinstance(entry, Mapping) or key not in entry:
        found = sorted(entry) if isinstance(entry, Mapping) else type(entry).__name__
        raise BadInput(f"--target {key!r}: the window entry of {where} has no key {key!r} "
                       f"(found {found}); name the entry key that holds the right answer")
    target = entry[key]
    targets = [str(t).strip() for t in target] if isinstance(target, Sequence) \
        and not isinstance(target, str) else [str(target).strip()]
    return float(str(choice).strip() in targets)


def summarize(rows: Sequence[Any], *, steer: str, target: str | None) -> dict[str, Any]:
    """The counts, the changed share and, with a target, the paired accuracy effect."""
    n = len(rows)
    out: dict[str, Any] = {
        "steer": steer, "selections": n,
        "drawn": dict(Counter(r.drawn for r in rows)),
        "changed": sum(r.changed for r in rows),
        "factual": dict(Counter(str(r.factual) for r in rows)),
        "counterfactual": dict(Counter(str(r.counterfactual) for r in rows)),
        "accuracy": None,
    }
    if target is not None:
        from agentlog.estimators import attribution

        where = [f"{r.trace} run {r.run_id} (step {r.step})" for r in rows]
        factual = [_correct(r.factual, r.entry, target, w) for r, w in zip(rows, where,
                                                                           strict=True)]
        counter = [_correct(r.counterfactual, r.entry, target, w)
                   for r, w in zip(rows, where, strict=True)]
        fx = attribution.estimate({(): factual, (steer,): counter},
                                  cluster=[str(r.task) for r in rows], shapley=None)
        est, se, (low, high) = fx.joint_effect([steer])
        out["accuracy"] = {
            "factual": sum(factual) / n, "counterfactual": sum(counter) / n,
            "effect": {"estimate": est, "low": low, "high": high, "standard_error": se},
            "tasks": fx.n_clusters,
        }
    return out


def render(out: Mapping[str, Any], console: Console) -> None:
    n = out["selections"]
    drawn = ", ".join(f"{v} {k}" for k, v in sorted(out["drawn"].items()))
    console.print(f"{n} choices ({escape(drawn)}) under [bold]{escape(out['steer'])}[/] on "
                  f"their recorded noise: {out['changed']} changed "
                  f"({out['changed'] / n:.1%})")
    labels = sorted(set(out["factual"]) | set(out["counterfactual"]),
                    key=lambda c: (-out["factual"].get(c, 0), -out["counterfactual"].get(c, 0),
                                   c))
    t = table("choices", ["candidate", "factual", "counterfactual"],
              right=["factual", "counterfactual"])
    for label in labels[:SHOWN]:
        t.add_row(escape(label), str(out["factual"].get(label, 0)),
                  str(out["counterfactual"].get(label, 0)))
    console.print(t)
    if len(labels) > SHOWN:
        console.print(f"… and {len(labels) - SHOWN} more candidates (--json lists all)")
    acc = out["accuracy"]
    if acc is not None:
        e = acc["effect"]
        console.print(f"accuracy: factual {acc['factual']:.3f}, counterfactual "
                      f"{acc['counterfactual']:.3f}; paired difference "
                      f"{fmt_signed(e['estimate'])} [{fmt_signed(e['low'])}, "
                      f"{fmt_signed(e['high'])}] (cluster t over {acc['tasks']} tasks)")
    console.print("Each counterfactual is the choice the steered vector makes on the noise "
                  "the factual choice was drawn with (for an observed choice, the posterior "
                  "noise given it): paired with it, not a fresh draw. What the rest of a run "
                  "would have done after it needs a re-entry (agentlog replay --design).")


def counterfactual_command(
    traces: Annotated[list[Path], traces_argument(
        "Traces (files or folders) holding the choices, e.g. agentlog import inspect "
        "--choices output.")],
    select: Annotated[str, typer.Option(
        "--select", help="The selection stream (al.select(name=...); --choice-stream of an "
        "import).", show_default=False)],
    steer: Annotated[str, typer.Option(
        "--steer", help=f"The selection intervention: {STEERS}.", show_default=False)],
    target: Annotated[str | None, typer.Option(
        "--target", help="A key of the window's entry holding the right answer (target for "
        "imported Inspect samples): adds the factual and counterfactual accuracy.",
        show_default=False)] = None,
    json_output: JsonOutput = False,
) -> None:
    """Recorded choices under a selection intervention, on the noise each was drawn with
    (posterior noise for choices observed elsewhere). Exit 0 ok, 2 bad input."""
    from agentlog.replay import counterfactual_choices

    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        try:
            level = _steer(steer)
            files = trace_files(traces)
            with trace_errors():
                rows = list(counterfactual_choices(files, stream=select, steer=level))
            if not rows:
                raise BadInput(f"no selection of stream {select!r} in {len(files)} trace(s); "
                               "agentlog inspect lists the streams (an Inspect import "
                               "records them with --choices)")
            out = summarize(rows, steer=steer, target=target)
        except (BadInput, ValueError) as exc:
            fail(f"agentlog counterfactual: {exc}")
    out["settings"] = {"traces": [str(p) for p in files], "select": select, "steer": steer,
                       "target": target}
    print_estimate(out, records, render, as_json=json_output)
