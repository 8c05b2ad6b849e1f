"""CESS against cje-eval's IPS and DR on one simulated off-policy problem with known truth.

The problem (shared by both tools; every seed draws new pools and new trajectories):
``--tasks`` questions, each with a pool of ``--pool`` candidates whose evidence scores are
``Y_i = μ_q + 0.4·U(−1, 1)``, ``μ_q ~ U(−0.1, 0.3)`` (so ``Y ∈ [−0.5, 0.7]`` and the task
population's mean is ``E θ* = 0.1``). An outcome model predicts ``m_i = clip(0.6 Y_i − 0.1 +
N(0, 0.15²))`` for every candidate before the search (biased, correlated with Y). One
trajectory per question opens ``--budget`` documents with replacement; round t draws from
``p = 0.8·softmax(λ_t r) + 0.2/N`` over a noisy ranking ``r = Y + N(0, 0.5²)``, with a
lean ``λ_t`` that adapts to what was opened (2 while the opened mean is below 0.3, 0.5
after), so the agent over-opens high-Y documents and the Opened Mean is biased upward.

* ``fixed`` design: every trajectory runs all K rounds (``s_t = 1``).
* ``stopping`` design: before round t ≥ 2 the agent stops with probability
  ``c_t = clip(0.1 + 0.5 · opened mean, 0.05, 0.6)`` (informative: it stops sooner on
  tasks whose evidence leans positive), ``s_t = Π_{k≤t}(1 − c_k)``.

The target is the pool conclusion ``θ̄* = mean over questions of θ*_q = (1/N) Σ_i Y_i``
([SSC] eq. 1), known exactly per seed; the coverage of the task population's mean 0.1 is
reported beside it (both tools' intervals are over questions, so they cover it too).

agentlog: ``cess.estimate`` per trajectory (Opened Mean, sequential IPW, raw DR eq. 6,
CESS eq. 13 with λ = 0.5), averaged over questions, 95 % percentile intervals from
``cess.cluster_bootstrap`` over questions; ESS = the median over trajectories of
``(ΣW)²/ΣW²`` over its K potential rounds, as a share of K.

cje-eval 0.3.0 (the last line with off-policy estimators; 0.4.0 removed IPS/DR): each
reached round is one ``Sample`` (``prompt_id`` = the question, ``reward = (Y + 1)/2``,
``judge_score = (m + 1)/2``, ``base_policy_logprob = log(p_t s_t)``, target policy
``uniform`` with ``log(1/N)``): the weight ``1/(N p_t s_t)`` is CESS's. Fresh draws for DR
are the pool's N candidates with their judge scores (the exact expectation under the
uniform target). Methods: raw IPS (Hájek), calibrated IPS (SIMCal weights, the default),
DR with raw weights and the prediction m itself as the outcome model (agentlog's raw DR
inputs; they differ only by Hájek's normalisation), and DR-CPO as cje configures it
(SIMCal weights, cross-fitted isotonic outcome model of reward on judge score). Estimates
and intervals are mapped back with ``θ = 2v − 1``; ESS is cje's ``weight_ess`` (its
pooled ESS share over the rows).

Install cje-eval into its own environment (it pins numpy/pandas differently):
``python3 -m venv /tmp/cjevenv && /tmp/cjevenv/bin/pip install 'cje-eval==0.3.*'``.
This script then re-runs itself there with ``--cje-only`` (data on stdin, results on
stdout as JSON; no files are written).

Run: ``python tests/benchmarks/bench_cess_vs_cje.py [--seeds 200] [--cje-python
/tmp/cjevenv/bin/python] [--design fixed|stopping|both]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

MU_LOW, MU_HIGH, SPREAD = -0.1, 0.3, 0.4
POPULATION_MEAN = (MU_LOW + MU_HIGH) / 2  # E θ* over the task population
FLOOR = 0.2  # share of every selection spread uniformly: overlap (p ≥ FLOOR / N)
LAM = 0.5  # CESS eq. 13
AGENTLOG = ("Opened Mean", "sequential IPW", "raw DR (eq. 6)", "CESS eq. 13 (λ = 0.5)")
CJE = ("raw IPS (Hájek)", "calibrated IPS (SIMCal)", "DR, raw weights, g = m",
       "DR-CPO (SIMCal, isotonic g)")


# ---------------------------------------------------------------- the shared problem

def simulate(rng: np.random.Generator, tasks: int, pool: int, budget: int,
             stopping: bool) -> dict[str, np.ndarray]:
    """One dataset: pools, predictions and one trajectory per question (NaN = not reached)."""
    mu = rng.uniform(MU_LOW, MU_HIGH, tasks)
    y = mu[:, None] + SPREAD * rng.uniform(-1.0, 1.0, (tasks, pool))
    m = np.clip(0.6 * y - 0.1 + 0.15 * rng.normal(size=(tasks, pool)), -1.0, 1.0)
    rank = y + 0.5 * rng.normal(size=(tasks, pool))
    pick = np.full((tasks, budget), -1)
    p = np.full((tasks, budget), np.nan)
    s = np.full((tasks, budget), np.nan)
    for q in range(tasks):
        seen: list[float] = []
        survive = 1.0
        for t in range(budget):
            if stopping and t > 0:
                c = min(max(0.1 + 0.5 * float(np.mean(seen)), 0.05), 0.6)
                if rng.random() < c:
                    break
                survive *= 1.0 - c
            lean = 2.0 if not seen or np.mean(seen) < 0.3 else 0.5
            z = lean * rank[q]
            w = np.exp(z - z.max())
            probs = (1.0 - FLOOR) * w / w.sum() + FLOOR / pool
            j = int(rng.choice(pool, p=probs))
            pick[q, t], p[q, t], s[q, t] = j, probs[j], survive
            seen.append(float(y[q, j]))
    return {"y": y, "m": m, "pick": pick, "p": p, "s": s}


def datasets(seeds: int, tasks: int, pool: int, budget: int, stopping: bool
             ) -> list[dict[str, np.ndarray]]:
    return [simulate(np.random.default_rng([seed, int(stopping)]), tasks, pool, budget,
                     stopping) for seed in range(seeds)]


# ---------------------------------------------------------------- agentlog

def run_agentlog(data: list[dict[str, np.ndarray]], budget: int, n_resamples: int
                 ) -> dict[str, np.ndarray]:
    """Per seed and method: estimate, 95 % interval (questions resampled), median ESS share."""
    from agentlog.estimators import cess

    out = {k: np.zeros((len(data), len(AGENTLOG))) for k in ("est", "lo", "hi")}
    out["ess"] = np.zeros(len(data))
    for i, d in enumerate(data):
        reached = d["pick"] >= 0
        rows = np.arange(d["y"].shape[0])[:, None]
        chosen = np.where(reached, d["pick"], 0)
        y = np.where(reached, d["y"][rows, chosen], np.nan)
        m = np.where(reached, d["m"][rows, chosen], np.nan)
        res = cess.estimate(y, d["p"], d["s"], m, d["m"].mean(axis=1), d["y"].shape[1],
                            budget=budget, lam=LAM, order="clip-then-shrink")
        cols = np.column_stack([res.opened_mean, res.ipw, res.dr_raw, res.estimate])
        boot = cess.cluster_bootstrap(cols, np.arange(len(cols)), n_resamples=n_resamples,
                                      seed=i)
        lo, hi = boot.confidence_interval(0.95)
        out["est"][i], out["lo"][i], out["hi"][i] = boot.estimate, lo, hi
        out["ess"][i] = float(np.median(res.ess)) / budget
    return out


# ---------------------------------------------------------------- cje-eval (its own venv)

def run_cje(payload: dict[str, Any]) -> dict[str, Any]:
    """Runs inside cje-eval's interpreter (``--cje-only``): the four cje estimators per seed."""
    logging.disable(logging.CRITICAL)  # cje logs a warning per low-ESS fit
    warnings.filterwarnings("ignore")
    from cje import __version__
    from cje.data.fresh_draws import FreshDrawDataset, FreshDrawSample
    from cje.data.models import Dataset, Sample
    from cje.data.precomputed_sampler import PrecomputedSampler
    from cje.estimators import CalibratedIPS
    from cje.estimators.dr_base import DRCPOEstimator
    from cje.estimators.outcome_models import BaseOutcomeModel

    class JudgeIsPrediction(BaseOutcomeModel):
        """g(s) = s: the outcome model is the given prediction m (on cje's [0, 1] scale)."""

        def _fit_single_model(self, prompts: Any, responses: Any, rewards: Any,
                              judge_scores: Any, covariates: Any = None) -> None:
            return None

        def _predict_single_model(self, model: Any, prompts: Any, responses: Any,
                                  judge_scores: Any, covariates: Any = None) -> Any:
            return np.asarray(judge_scores, dtype=float)

    results: list[dict[str, list[float]]] = []
    started = time.process_time()
    for d in payload["data"]:
        y, m = np.asarray(d["y"]), np.asarray(d["m"])
        n_pool = y.shape[1]
        samples = [
            Sample(prompt_id=f"q{q}", prompt=f"question {q}", response=f"q{q} round {t} doc {j}",
                   reward=(y[q, j] + 1) / 2, judge_score=(m[q, j] + 1) / 2,
                   base_policy_logprob=math.log(p * s),
                   target_policy_logprobs={"uniform": -math.log(n_pool)})
            for q, t, j, p, s in d["rows"]]
        dataset = Dataset(samples=samples, target_policies=["uniform"])
        fresh = FreshDrawDataset(target_policy="uniform", draws_per_prompt=n_pool, samples=[
            FreshDrawSample(prompt_id=f"q{q}", target_policy="uniform",
                            judge_score=(m[q, i] + 1) / 2, draw_idx=i)
            for q in sorted({r[0] for r in d["rows"]}) for i in range(n_pool)])
        row: dict[str, list[float]] = {"est": [], "lo": [], "hi": [], "ess": [],
                                        "flagged": []}
        fits: list[Any] = [
            CalibratedIPS(PrecomputedSampler(dataset), calibrate_weights=False),
            CalibratedIPS(PrecomputedSampler(dataset)),
            DRCPOEstimator(PrecomputedSampler(dataset), use_calibrated_weights=False,
                           outcome_model=JudgeIsPrediction(n_folds=5)),
            DRCPOEstimator(PrecomputedSampler(dataset)),
        ]
        for fit in fits:
            if isinstance(fit, DRCPOEstimator):
                fit.add_fresh_draws("uniform", fresh)
            res = fit.fit_and_estimate()
            (lo, hi), = res.ci()
            ips = fit if isinstance(fit, CalibratedIPS) else fit.ips_estimator
            gates = (ips._results.metadata or {}).get("reliability_gates", {})
            row["est"].append(2 * float(res.estimates[0]) - 1)
            row["lo"].append(2 * lo - 1)
            row["hi"].append(2 * hi - 1)
            row["ess"].append(float(ips._results.diagnostics.weight_ess))
            row["flagged"].append(float(bool(gates.get("uniform", {}).get("flagged"))))
        results.append(row)
    return {"version": __version__, "cpu_s": time.process_time() - started,
            "results": results}


def cje_payload(data: list[dict[str, np.ndarray]]) -> dict[str, Any]:
    """What cje-eval is given: the pools (Y for rewards, m for judge scores) and the rows."""
    out = []
    for d in data:
        rows = [(q, t, int(d["pick"][q, t]), float(d["p"][q, t]), float(d["s"][q, t]))
                for q in range(d["pick"].shape[0]) for t in range(d["pick"].shape[1])
                if d["pick"][q, t] >= 0]
        out.append({"y": d["y"].tolist(), "m": d["m"].tolist(), "rows": rows})
    return {"data": out}


def cje_results(payload: dict[str, Any], python: str) -> dict[str, Any]:
    done = subprocess.run([python, str(Path(__file__).resolve()), "--cje-only"],
                          input=json.dumps(payload), capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        sys.exit(f"cje-eval run failed ({python}):\n{done.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(done.stdout)
    return out


# ---------------------------------------------------------------- the table

def hajek_check(data: list[dict[str, np.ndarray]], cje: dict[str, Any]) -> float:
    """Largest |cje's DR with raw weights and g = m − the same formula in numpy|: the inputs
    were mapped as intended (Hájek weights over the rows, m̄ of each row's question)."""
    worst = 0.0
    for d, r in zip(data, cje["results"], strict=True):
        q, t = np.nonzero(d["pick"] >= 0)
        j = d["pick"][q, t]
        w = 1.0 / (d["y"].shape[1] * d["p"][q, t] * d["s"][q, t])
        w = w / w.mean()
        # on cje's [0, 1] scale, then back: θ = 2v − 1
        v = np.mean((d["m"][q].mean(axis=1) + 1) / 2) + np.mean(
            w * ((d["y"][q, j] + 1) / 2 - (d["m"][q, j] + 1) / 2))
        worst = max(worst, abs((2 * v - 1) - r["est"][2]))
    return worst


def summary(name: str, est: np.ndarray, lo: np.ndarray, hi: np.ndarray,
            truth: np.ndarray, ess: str, flagged: str = "") -> str:
    err = est - truth
    cover = np.mean((lo <= truth) & (truth <= hi))
    cover_pop = np.mean((lo <= POPULATION_MEAN) & (hi >= POPULATION_MEAN))
    n = len(err)
    return (f"| {name} | {err.mean():+.4f} ± {err.std(ddof=1) / math.sqrt(n):.4f} | "
            f"{err.std(ddof=1):.4f} | {math.sqrt(np.mean(err ** 2)):.4f} | {cover:.3f} | "
            f"{cover_pop:.3f} | {np.mean(hi - lo):.3f} | {ess} | {flagged} |")


def table(design: str, data: list[dict[str, np.ndarray]], ours: dict[str, np.ndarray],
          cje: dict[str, Any]) -> list[str]:
    truth = np.array([d["y"].mean() for d in data])
    lines = [f"**{design}**: {len(data)} seeds; bias ± its Monte Carlo s.e., SD and RMSE "
             "against θ̄* (the seed's pools); coverage of θ̄* and of E θ* = "
             f"{POPULATION_MEAN:g} by the 95 % interval; mean interval width; ESS share "
             "(median over seeds); share of seeds cje's reliability gates flag.", "",
             "| method | bias | SD | RMSE | covers θ̄* | covers E θ* | width | ESS | "
             "cje flags |", "|---|---|---|---|---|---|---|---|---|"]
    ess = f"{np.median(ours['ess']):.2f} (per trajectory)"
    for k, name in enumerate(AGENTLOG):
        lines.append(summary(f"agentlog {name}", ours["est"][:, k], ours["lo"][:, k],
                             ours["hi"][:, k], truth,
                             ess if k in (1, 2, 3) else "", ""))
    res = cje["results"]
    for k, name in enumerate(CJE):
        col = {f: np.array([r[f][k] for r in res]) for f in ("est", "lo", "hi", "ess",
                                                             "flagged")}
        lines.append(summary(f"cje {name}", col["est"], col["lo"], col["hi"], truth,
                             f"{np.median(col['ess']):.2f} (pooled rows)",
                             f"{col['flagged'].mean():.2f}"))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--tasks", type=int, default=40, help="questions per dataset")
    parser.add_argument("--pool", type=int, default=20, help="candidates per question")
    parser.add_argument("--budget", type=int, default=4, help="K, rounds per trajectory")
    parser.add_argument("--resamples", type=int, default=1000,
                        help="agentlog's cluster bootstrap draws")
    parser.add_argument("--design", choices=("fixed", "stopping", "both"), default="both")
    parser.add_argument("--cje-python", default=os.environ.get("CJE_PYTHON",
                                                               "/tmp/cjevenv/bin/python"),
                        help="an interpreter with cje-eval 0.3.x (default $CJE_PYTHON or "
                             "/tmp/cjevenv/bin/python)")
    parser.add_argument("--cje-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cje_only:
        print(json.dumps(run_cje(json.load(sys.stdin))))
        return
    if __package__ in (None, ""):  # run as a script from a source checkout
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    if not Path(args.cje_python).exists():
        sys.exit(f"no interpreter at {args.cje_python}; install cje-eval 0.3.x there "
                 "(see the module docstring) or pass --cje-python")
    designs = ("fixed", "stopping") if args.design == "both" else (args.design,)
    print(f"{args.tasks} questions × pool N = {args.pool} × K = {args.budget} rounds per "
          f"dataset, one trajectory per question; agentlog intervals: {args.resamples} "
          "question resamples\n")
    for design in designs:
        data = datasets(args.seeds, args.tasks, args.pool, args.budget, design == "stopping")
        t0 = time.process_time()
        ours = run_agentlog(data, args.budget, args.resamples)
        ours_cpu = time.process_time() - t0
        cje = cje_results(cje_payload(data), args.cje_python)
        rows = sum(int((d["pick"] >= 0).sum()) for d in data) / len(data)
        print("\n".join(table(design, data, ours, cje)))
        print(f"\n{rows:.0f} logged rounds per dataset; CPU: agentlog {ours_cpu:.1f} s, "
              f"cje-eval {cje['version']} {cje['cpu_s']:.1f} s; |cje DR (raw weights, "
              f"g = m) − the Hájek formula in numpy| ≤ {hajek_check(data, cje):.1e}\n")


if __name__ == "__main__":
    main()
