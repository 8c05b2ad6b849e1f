"""Per-step attribution: agentlog against ``causal-agent-replay`` on one simulated agent.

The agent takes three binary decisions; decision k picks ``a`` with probability
``P_A[k]``, independently of the others, and the run is *bad* when the first two both
pick ``a`` or the third picks ``b``. Both tools explain recorded *bad* runs (averaged over
factual runs that are bad; over all runs every attribution averages to zero, the factual
decisions being draws of the same policy) and answer the same two questions:

* **contrastive** (causal-agent-replay's headline): hold decisions ``[0, k)`` at their
  factual outcome, re-draw ``k`` onward from the agent's policy: ``P(bad) − 1{bad}``.
  agentlog: the arm altering ``{k, …, 2}`` with ``resample``, minus the agent's own
  re-entry (replicate 0 reproduces the factual run).
* **Shapley** over decisions with value ``v(S) = P(bad | S held factual, the rest
  re-drawn)``. agentlog's game alters coalitions instead of holding them, and
  ``v_hold(S) = v_alter(N ∖ S)``, whose Shapley values are those of ``v_alter`` with the
  sign flipped (the dual game has the same values), so agentlog's ``−φ`` is compared.

The truth of both is exact (enumeration over the 2³ factual and 2³ re-drawn outcomes).
causal-agent-replay 0.0.1 declares Python ≥ 3.12; its code runs on 3.11 and is driven
here through its public API (``MultiNoisyPolicy``, ``record_run``,
``contrastive_attribution``, ``shapley_attribution``). Install it beside agentlog with
``pip install structlog`` and ``pip install --no-deps --ignore-requires-python
causal-agent-replay==0.0.1``, or point ``--car-python`` at an interpreter that has it.

Run: ``python tests/benchmarks/bench_attribution_vs_car.py [--runs N] [--car-python PY]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

P_A = (0.6, 0.5, 0.7)
N_STEPS = len(P_A)


def bad(picks: tuple[str, ...]) -> bool:
    return (picks[0] == "a" and picks[1] == "a") or picks[2] == "b"


def truth() -> dict[str, list[float]]:
    """Exact values: E over bad factual runs of each per-run attribution."""
    outcomes = list(itertools.product("ab", repeat=N_STEPS))

    def prob(x: tuple[str, ...]) -> float:
        return math.prod(p if c == "a" else 1 - p for c, p in zip(x, P_A, strict=True))

    def v_hold(held: frozenset[int], f: tuple[str, ...]) -> float:  # P(bad | held factual)
        return sum(prob(r) * bad(tuple(f[i] if i in held else r[i] for i in range(N_STEPS)))
                   for r in outcomes)

    p_bad = sum(prob(f) for f in outcomes if bad(f))

    def weight(f: tuple[str, ...]) -> float:  # the law of a factual run given that it is bad
        return prob(f) * bad(f) / p_bad

    contrastive = [sum(weight(f) * (v_hold(frozenset(range(k)), f) - 1.0) for f in outcomes)
                   for k in range(N_STEPS)]
    shapley = []
    for k in range(N_STEPS):
        others = [i for i in range(N_STEPS) if i != k]
        total = 0.0
        for size in range(N_STEPS):
            w = math.factorial(size) * math.factorial(N_STEPS - size - 1) / math.factorial(
                N_STEPS)
            for s in itertools.combinations(others, size):
                total += w * sum(weight(f) * (v_hold(frozenset(s) | {k}, f)
                                            - v_hold(frozenset(s), f)) for f in outcomes)
        shapley.append(total)
    return {"contrastive": contrastive, "shapley": shapley}


# ---------------------------------------------------------------- causal-agent-replay

def run_car(runs: int, samples: int, permutations: int, seed: int) -> dict[str, Any]:
    """Per factual run, causal-agent-replay's contrastive and Shapley attributions."""
    import numpy as np
    from car.attribute.contrastive import contrastive_attribution
    from car.attribute.shapley import shapley_attribution
    from car.outcome.functions import RuleOutcome
    from car.record.recorder import SyntheticCodec, record_run
    from car.schemas.trajectory import Outcome
    from car.synthetic import DictEnvironment, MultiNoisyPolicy, tool_call

    def picks(traj: Any) -> tuple[str, ...]:
        return tuple(s.action.tool_name for s in traj.steps if s.action.kind == "tool_call")

    outcome = RuleOutcome(lambda t: Outcome(label="bad" if bad(picks(t)) else "ok",
                                            score=1.0 if bad(picks(t)) else 0.0))
    env = DictEnvironment({"a": "{}", "b": "{}"})
    codec = SyntheticCodec()

    async def one(i: int) -> tuple[list[float], list[float]]:
        attempt = 0
        while True:  # the i-th bad factual run
            policy = MultiNoisyPolicy([], {k: (tool_call("a", {}), tool_call("b", {}), p)
                                           for k, p in enumerate(P_A)},
                                      seed=seed + 1000 * i + attempt)
            factual = await record_run(trajectory_id=f"f{i}", policy=policy, environment=env,
                                       codec=codec, system_prompt="", tool_schemas=[],
                                       user_input="go")
            if bad(picks(factual)):
                break
            attempt += 1
        con = await contrastive_attribution(factual, policy=policy, environment=env,
                                            codec=codec, outcome_fn=outcome, bad_label="bad",
                                            k_samples=samples)
        sha = await shapley_attribution(factual, policy=policy, environment=env, codec=codec,
                                        outcome_fn=outcome, bad_label="bad",
                                        n_permutations=permutations, seed=seed + i)
        return ([s.effect.point for s in con.per_step][:N_STEPS],
                [s.value for s in sha.per_step][:N_STEPS])

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    started = time.process_time()
    rows = [asyncio.run(one(i)) for i in range(runs)]
    cpu = time.process_time() - started
    con = np.array([r[0] for r in rows])
    sha = np.array([r[1] for r in rows])
    return {
        "contrastive": con.mean(axis=0).tolist(),
        "contrastive_se": (con.std(axis=0, ddof=1) / math.sqrt(runs)).tolist(),
        "shapley": sha.mean(axis=0).tolist(),
        "shapley_se": (sha.std(axis=0, ddof=1) / math.sqrt(runs)).tolist(),
        # per run: each of the n + 1 steps (the final one too) re-drawn `samples` times,
        # and n + 2 coalitions per walk, two walks (antithetic) per permutation
        "rollouts": runs * ((N_STEPS + 1) * samples + 2 * permutations * (N_STEPS + 2)),
        "cpu_s": cpu,
    }


# ---------------------------------------------------------------- agentlog

def run_agentlog(runs: int, seed: int) -> dict[str, Any]:
    """The same attributions from branch-mode re-entries of recorded runs (replicate 0:
    every decision not re-drawn keeps its factual noise, so its factual outcome)."""
    import agentlog as al
    from agentlog.estimators import attribution
    from agentlog.replay import intervene

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _attribution_agent as agent
    from _tempdir import bench_dir

    players = [f"pick@{k}=resample" for k in range(N_STEPS)]
    started = time.process_time()
    with bench_dir("agentlog-bench-attribution-") as tmp:
        d = Path(tmp)
        kept, i = 0, 0
        while kept < runs:  # bad factual runs only
            path = d / "src" / f"f{kept}.zst"
            with al.record(path, seed=seed + i, task=f"f{kept}", mode="w"):
                picks = agent.decide(P_A)
            i += 1
            kept += bool(agent.outcome(picks)["bad"])
        run = intervene(d / "src", window="decide", app=agent.__name__, mode="branch",
                        arms=attribution.arms(players, shapley="exact"), seeds=[0],
                        scores=agent.outcome, out=d / "out")
        assert run.summary.failed == 0, run.summary.failures
        fx = attribution.from_traces(d / "out", outcome="bad", shapley="exact")
    cpu = time.process_time() - started
    contrastive, contrastive_se = [], []
    for k in range(N_STEPS):  # hold [0, k) factual, re-draw k onward
        value, se, _ = fx.joint_effect(players[k:])
        contrastive.append(value)
        contrastive_se.append(se)
    assert fx.shapley is not None
    return {
        "contrastive": contrastive, "contrastive_se": contrastive_se,
        "shapley": [-fx.shapley[p] for p in players],  # the holding game's values
        "shapley_se": [fx.standard_error(p, "shapley") for p in players],
        "units": run.units, "cpu_s": cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400, help="factual runs")
    parser.add_argument("--samples", type=int, default=16,
                        help="causal-agent-replay: rollouts per contrastive step")
    parser.add_argument("--permutations", type=int, default=8,
                        help="causal-agent-replay: Shapley permutations (antithetic pairs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--car-python", default=None,
                        help="an interpreter with causal-agent-replay (default: this one)")
    parser.add_argument("--car-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.car_only:
        print(json.dumps(run_car(args.runs, args.samples, args.permutations, args.seed)))
        return
    exact = truth()
    if args.car_python:
        done = subprocess.run([args.car_python, __file__, "--car-only", "--runs",
                               str(args.runs), "--samples", str(args.samples),
                               "--permutations", str(args.permutations), "--seed",
                               str(args.seed)], check=True, capture_output=True, text=True)
        car = json.loads(done.stdout)
    else:
        car = run_car(args.runs, args.samples, args.permutations, args.seed)
    ours = run_agentlog(args.runs, args.seed)
    print(f"{args.runs} factual runs; causal-agent-replay: {args.samples} rollouts per "
          f"contrastive step, {args.permutations} Shapley permutations "
          f"({car['rollouts']} rollouts, {car['cpu_s']:.1f} s CPU); agentlog: "
          f"{ours['units']} re-entries ({ours['cpu_s']:.1f} s CPU)\n")
    print("| attribution | step | exact | causal-agent-replay (SE) | agentlog (SE) |")
    print("|---|---|---|---|---|")
    for kind in ("contrastive", "shapley"):
        for k in range(N_STEPS):
            print(f"| {kind} | {k} | {exact[kind][k]:+.4f} | {car[kind][k]:+.4f} "
                  f"({car[kind + '_se'][k]:.4f}) | {ours[kind][k]:+.4f} "
                  f"({ours[kind + '_se'][k]:.4f}) |")


if __name__ == "__main__":
    main()
