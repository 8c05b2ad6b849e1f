"""The demo's paired 2×2 ([SSC] eq. 3–4): policy effects beside CESS per arm.

The agent-ranking runs of replicate 0 of the first ``PAIRED_TASKS`` questions have their
retrieval windows re-entered (``agentlog.replay.intervene``, mode "rerun": the bundled
agent has no model and its one tool is a pure function) under agent vs uniform selection
× adaptive vs fixed-K stopping, ``PAIRED_SEEDS`` replicate seeds shared by the four arms
(common random numbers).
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape

from ._demo_pools import DEMO_BUDGET, DEMO_LAM, DEMO_ORDER, pool_tables
from ._inspect import table
from ._output import fmt_num, fmt_signed, read_trace, short_path

PAIRED_DIR = "paired"
PAIRED_TASKS = 6
PAIRED_SEEDS = 2
PAIRED_RESAMPLES = 2_000
PAIRED_APP = "agentlog.examples.deep_research"
PAIRED_OUTCOME = "opened_mean"
PAIRED_ARMS = (("11", "agent", "adaptive"), ("10", "agent", f"fixed:{DEMO_BUDGET}"),
               ("01", "uniform", "adaptive"), ("00", "uniform", f"fixed:{DEMO_BUDGET}"))


def _paired_opened_mean(found: Any) -> dict[str, float]:
    """The Opened Mean of a re-entered retrieval (its return value): each arm's θ."""
    return {PAIRED_OUTCOME: float(np.mean(found.y))}


def summarize_paired_demo(out: Path, paths: Sequence[Path], tasks: Sequence[str]
                          ) -> dict[str, Any]:
    """The paired 2×2 of the demo: policy effects beside CESS per arm.

    The policy effects Δsel, Δstop, Δint and total ([SSC] eq. 3–4) come from
    ``cess.effects_from_traces`` over the arm outputs; beside them, each arm's CESS
    (``cess.from_traces`` on its arm traces, the demo's λ and order) and the same contrasts
    of CESS, which stay near zero ([SSC] Theorem 2).
    """
    from agentlog.estimators import cess
    from agentlog.replay import Design, intervene
    from agentlog.replay.interventions import FixedHorizon, Uniform

    chosen = set(tasks[:PAIRED_TASKS])
    sources = []
    for path in paths:
        start = read_trace(path).runs[0].start
        if (start is not None and start.task in chosen
                and start.meta.get("ranking") == "agent" and start.meta.get("replicate") == 0):
            sources.append(path)
    design = Design(selection=["agent", Uniform()],
                    stopping=["adaptive", FixedHorizon(DEMO_BUDGET)], seeds=range(PAIRED_SEEDS))
    where = out / PAIRED_DIR
    run = intervene(sources, window="retrieval", arms=design, out=where, app=PAIRED_APP,
                    mode="rerun", scores=_paired_opened_mean)
    with warnings.catch_warnings(record=True) as caught:  # e.g. one question: one cluster
        warnings.simplefilter("always")
        fx = cess.effects_from_traces(where, outcome=PAIRED_OUTCOME,
                                      n_resamples=PAIRED_RESAMPLES)
    by_arm: dict[str, list[Path]] = defaultdict(list)
    for path in sorted((where / "arms").glob("*.zst")):
        start = read_trace(path).runs[0].start
        assert start is not None
        by_arm[start.meta["agentlog.replay.arm"]["arm"]].append(path)
    outcomes, predictions = pool_tables(sorted(chosen))
    arms: dict[str, dict[str, Any]] = {}
    for code, sel, stop in PAIRED_ARMS:
        name = f"selection={sel},stopping={stop}"
        with warnings.catch_warnings(record=True) as more:
            warnings.simplefilter("always")
            data = cess.from_traces(by_arm[name], outcomes=outcomes, predictions=predictions,
                                    budget=DEMO_BUDGET)
            res = data.estimate(lam=DEMO_LAM, order=DEMO_ORDER)
        caught.extend(more)
        question = np.array([str(c) for c in data.cluster])

        def per_question(v: Any, question: Any = question) -> float:
            return float(np.mean([np.mean(v[question == q]) for q in np.unique(question)]))

        arms[code] = {"arm": name, "selection": sel, "stopping": stop, "runs": len(data),
                      "opened_mean": per_question(res.opened_mean),
                      "cess": per_question(res.estimate),
                      "theta_star": per_question(data.theta_star)}

    def contrasts(key: str) -> dict[str, float]:
        t = {c: arms[c][key] for c in arms}
        return {"selection": t["10"] - t["00"], "stopping": t["01"] - t["00"],
                "interaction": t["11"] - t["10"] - t["01"] + t["00"],
                "total": t["11"] - t["00"]}

    effects = fx.to_dict()
    return {
        "out": str(where), "tasks": len(chosen), "seeds": PAIRED_SEEDS, "mode": run.mode,
        "units": run.units, "arms": arms, "effects": effects["effects"],
        "confidence_level": effects["confidence_level"], "n_blocks": fx.n_blocks,
        "cess_contrasts": contrasts("cess"), "note": fx.note,
        "warnings": list(dict.fromkeys(str(w.message) for w in caught)),
        "command": f"agentlog estimate effects {short_path(where)} --outcome {PAIRED_OUTCOME}",
    }


def render_paired(summary: dict[str, Any], console: Console) -> None:
    c = summary.get("paired")
    if not c:
        return
    cols = ["runs", "Opened Mean", "CESS", "θ*"]
    t = table(f"Paired 2×2 on {c['tasks']} questions × {c['seeds']} seeds (same pool, same "
              f"random numbers; mode {c['mode']})", ["selection × stopping", *cols],
              right=cols)
    for code in ("11", "10", "01", "00"):
        a = c["arms"][code]
        t.add_row(f"{escape(a['selection'])} × {escape(a['stopping'])}", str(a["runs"]),
                  fmt_num(a["opened_mean"], 3), fmt_num(a["cess"], 3),
                  fmt_num(a["theta_star"], 3))
    console.print(t)
    level = round(100 * c["confidence_level"])
    cols = ["policy effect", f"{level}% CI (questions)", "CESS contrast"]
    t = table("Policy effects on the Opened Mean ([SSC] eq. 3–4) beside CESS contrasts",
              ["", *cols], right=cols)
    for key, label in (("selection", "Δsel"), ("stopping", "Δstop"),
                       ("interaction", "Δint"), ("total", "total")):
        e = c["effects"][key]
        t.add_row(label, fmt_signed(e["estimate"]), escape(f"[{e['low']:+.3f}, {e['high']:+.3f}]"),
                  fmt_signed(c["cess_contrasts"][key]))
    console.print(t)
    console.print("[dim]CESS corrects every arm toward the same pool target θ*, so its "
                  "contrasts stay near zero by construction ([SSC] Theorem 2); the policy "
                  "effects measure how the conclusion the agent draws from what it opens "
                  f"moves when its search policy is replaced. Next: {escape(c['command'])}[/]")
    for message in c["warnings"]:
        console.print(f"[yellow]warning:[/] {escape(message)}")
