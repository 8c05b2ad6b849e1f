"""Certified rank intervals against csranks' rank confidence sets, on the same inputs.

csranks (Mogstad, Romano, Shaikh and Wilhelm 2024, "Inference for Ranks with Applications
to Mobility across Neighbourhoods and Academic Achievement across Countries"; the R package
by Wilhelm and Morgen) takes estimates ``x`` and their covariance ``Σ`` and returns, per
population, a *marginal* rank confidence set (each covers its own rank with probability
0.95) and a *simultaneous* one (all cover together), from a parametric bootstrap of
``N(0, Σ)`` with the max-|t| over pairwise differences and a step-down. agentlog certifies
pairs with eq. 4 of [LBC] (a Bonferroni t radius over every pair of the plan's family,
single step) after an admissibility decision taken before any score is read, and reads rank
intervals off the transitive closure of the certified pairs; their family-wise guarantee
corresponds to csranks' simultaneous sets.

Two data sets, each given to both tools:

(a) csranks' bundled PISA 2018 mathematics scores (``csranks::pisa2018``: 38 jurisdictions,
    mean and standard error), exported from R as CSV by Rscript. csranks gets ``x`` and
    ``Σ = diag(se²)``. agentlog has no entry point that takes estimates and standard errors:
    its lowest level is ``certify.certify`` on per-task scores of every system over common
    tasks (``sampling_radius`` takes paired differences per task). So each jurisdiction gets
    synthetic per-task scores over ``T = 1024`` singleton-cluster tasks,
    ``x_j + se_j·sqrt(T − 1)·h_j``, with ``h_j`` distinct non-constant columns of a Sylvester
    Hadamard matrix: every pair's paired mean is exactly ``x_a − x_b`` and its CR2 standard
    error exactly ``sqrt(se_a² + se_b²)`` (the columns are orthogonal, so independence is
    reproduced), its skewness exactly 0, and its t quantile has 1023 degrees of freedom
    (within 2 % of the normal quantile csranks uses). The script asserts both equalities
    for every pair. Plan: shared entries (exact cells, no nuisance radius), δ′ = 0.05,
    ``sampling = "cr2-bm"``, every pair.
(b) the leaderboard of ``agentlog demo`` (6 search-policy variants × 20 questions × 3 seeds,
    the bundled plan ``deep_research.toml``): agentlog certifies it from the traces
    (``certify.from_traces`` → ``admissibility`` → ``certify``). csranks gets the same
    per-question scores (the mean over seeds, the board's inputs): ``x = −mean abs_error``
    (csranks ranks larger values first) and ``Σ = cov(scores)/20``, the covariance of the
    six means over paired questions, whose pairwise variances ``Σ_aa + Σ_bb − 2Σ_ab`` are
    exactly the board's CR2 standard errors squared (asserted). A third column certifies
    the same scores with admissibility left out (every pair an exact cell), to separate
    what the plan refuses from what the statistics decide.

Requires R and csranks: ``apt-get install -y r-base-core r-cran-ggplot2 r-cran-scales
r-cran-mass r-cran-cli r-cran-lifecycle``, then csranks from its CRAN source (github
cran/csranks): ``R CMD INSTALL --library=/tmp/rlib csranks/``. ``--r-lib`` (default
``$R_LIBS`` or ``/tmp/rlib``) names that library.

Run: ``python tests/benchmarks/bench_ranks_vs_csranks.py [--r-lib /tmp/rlib]
[--replications 10000] [--seed 1]``. The demo's traces go to a ``bench_dir`` folder that is
removed at the end.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from _tempdir import bench_dir

from agentlog.estimators import certify

TASKS = 1024  # synthetic tasks per jurisdiction for (a): a power of two (Sylvester)

EXPORT = 'suppressMessages(library(csranks)); data(pisa2018); ' \
         'write.csv(pisa2018, stdout(), row.names = FALSE)'

# stdin: line 1 the estimates, then the rows of Σ; args: replications, seed.
CSRANKS = r"""
suppressMessages(library(csranks))
a <- commandArgs(trailingOnly = TRUE)
R <- as.integer(a[1]); seed <- as.integer(a[2])
lines <- readLines(file("stdin"))
x <- as.numeric(strsplit(lines[1], ",")[[1]])
p <- length(x)
S <- matrix(as.numeric(unlist(strsplit(lines[2:(p + 1)], ","))), p, p, byrow = TRUE)
m <- csranks(x, S, simul = FALSE, R = R, seed = seed)
s <- csranks(x, S, simul = TRUE, R = R, seed = seed)
s1 <- csranks(x, S, simul = TRUE, stepdown = FALSE, R = R, seed = seed)
cat(as.character(packageVersion("csranks")), "\n")
write.csv(data.frame(rank = m$rank, mL = m$L, mU = m$U, sL = s$L, sU = s$U,
                     s1L = s1$L, s1U = s1$U), stdout(), row.names = FALSE)
"""

PLAN = """
name = "{name}"
estimand = "{estimand}"
target = "{readout}"
delta_prime = 0.05
sampling = "cr2-bm"
family = "all"
min_common_tasks = 10
[readouts.{readout}]
tolerance = {tolerance}
better = "{better}"
[conditions]
shared_entry = true
[calibration]
n_resamples = 0
"""


def rscript(args: argparse.Namespace, code: str, stdin: str = "", *extra: str) -> str:
    env = dict(os.environ, R_LIBS=args.r_lib)
    done = subprocess.run([args.rscript, "-e", code, *extra], input=stdin,
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        sys.exit(f"Rscript failed:\n{done.stderr[-3000:]}")
    return done.stdout


def csranks_sets(args: argparse.Namespace, x: np.ndarray, sigma: np.ndarray
                 ) -> tuple[str, list[dict[str, int]]]:
    text = ",".join(repr(float(v)) for v in x) + "\n" + "\n".join(
        ",".join(repr(float(v)) for v in row) for row in sigma) + "\n"
    out = rscript(args, CSRANKS, text, str(args.replications), str(args.seed))
    version, _, table = out.partition("\n")
    rows = [{k: int(v) for k, v in r.items()} for r in csv.DictReader(io.StringIO(table))]
    return version.strip(), rows


def plan(name: str, readout: str, better: str, tolerance: float) -> certify.Plan:
    return certify.Plan.from_toml(PLAN.format(
        name=name, estimand=f"{name}: one system per population", readout=readout,
        better=better, tolerance=tolerance))


def critical(board: certify.BoardResult, sigma: np.ndarray, draws: int) -> str:
    """agentlog's critical value q/se beside the normal quantile at its level and the
    0.95 quantile of max |Z_a − Z_b| / sd_ab, Z ~ N(0, Σ): the single-step critical value
    of csranks' simultaneous sets (recomputed in numpy; csranks does not return it)."""
    from scipy.stats import norm

    d = next(d for d in board.decisions[board.target] if np.isfinite(d.q) and d.se > 0)
    level = board.plan.delta_prime / (2 * board.family_size)
    a, b = np.triu_indices(len(sigma), 1)
    sd = np.sqrt(sigma[a, a] + sigma[b, b] - 2 * sigma[a, b])
    z = np.random.default_rng(0).multivariate_normal(np.zeros(len(sigma)), sigma, draws)
    top = np.quantile((np.abs(z[:, a] - z[:, b]) / sd).max(axis=1), 0.95)
    return (f"agentlog's critical value q/se = t_{{1−δ′/(2m)}}(df = {d.df:.0f}) = "
            f"{d.q / d.se:.3f}; the normal quantile at the same level {norm.isf(level):.3f}; "
            f"the max-|t| quantile csranks' single step uses ≈ {top:.3f}")


def span(lo: int, hi: int) -> str:
    return f"{lo}" if lo == hi else f"{lo}–{hi}"


def check_pairs(board: certify.BoardResult, names: list[str], x: np.ndarray,
                sigma: np.ndarray, what: str) -> None:
    """Every decided pair saw the estimates and the standard errors csranks was given."""
    index = {n: i for i, n in enumerate(names)}
    for d in board.decisions[board.target]:
        if d.decision in ("refused", "not-enough-common-tasks"):
            continue
        a, b = index[d.a], index[d.b]
        se = np.sqrt(sigma[a, a] + sigma[b, b] - 2 * sigma[a, b])
        assert np.isclose(abs(d.delta), abs(x[a] - x[b]), rtol=1e-9, atol=1e-9), (what, d)
        assert np.isclose(d.se, se, rtol=1e-9), (what, d.a, d.b, d.se, se)


# ---------------------------------------------------------------- (a) PISA

def pisa(args: argparse.Namespace) -> None:
    from scipy.linalg import hadamard

    rows = list(csv.DictReader(io.StringIO(rscript(args, EXPORT))))
    names = [r["jurisdiction"] for r in rows]
    x = np.array([float(r["math_score"]) for r in rows])
    se = np.array([float(r["math_se"]) for r in rows])
    sigma = np.diag(se ** 2)
    version, sets = csranks_sets(args, x, sigma)
    h = hadamard(TASKS).astype(np.float64)[:, 1:len(names) + 1]  # zero-mean, orthogonal
    scores = {n: x[j] + se[j] * np.sqrt(TASKS - 1) * h[:, j] for j, n in enumerate(names)}
    board = certify.certify(scores, clusters=np.arange(TASKS),
                            plan=plan("PISA 2018 math", "math", "higher", 1.0),
                            calibrate=False)
    check_pairs(board, names, x, sigma, "pisa")
    print(f"### (a) PISA 2018 mathematics (csranks::pisa2018, {len(names)} jurisdictions)\n")
    print(f"csranks {version}: coverage 0.95, {args.replications} bootstrap draws, seed "
          f"{args.seed}. agentlog: δ′ = 0.05 over {board.family_size} pairs, "
          f"{len(board.certified())} certified; {critical(board, sigma, args.replications)}.\n")
    print("| jurisdiction | score | se | rank | csranks marginal | csranks simultaneous "
          "| csranks simultaneous, single step | agentlog certified |")
    print("|---|---|---|---|---|---|---|---|")
    order = np.argsort(-x)
    width = np.zeros(4)
    for j in order:
        s = sets[j]
        ours = board.rank(names[j])
        width += [s["mU"] - s["mL"], s["sU"] - s["sL"], s["s1U"] - s["s1L"],
                  ours[1] - ours[0]]
        print(f"| {names[j]} | {x[j]:.1f} | {se[j]:.2f} | {s['rank']} | "
              f"{span(s['mL'], s['mU'])} | {span(s['sL'], s['sU'])} | "
              f"{span(s['s1L'], s['s1U'])} | {span(*ours)} |")
    w = width / len(names) + 1
    print(f"| mean size of the set | | | | {w[0]:.2f} | {w[1]:.2f} | {w[2]:.2f} | "
          f"{w[3]:.2f} |\n")


# ---------------------------------------------------------------- (b) the demo

def demo(args: argparse.Namespace) -> None:
    with bench_dir("agentlog-bench-csranks-") as tmp:
        out = Path(tmp) / "agentlog-demo"
        done = subprocess.run([sys.executable, "-c", "from agentlog.cli import main; main()",
                               "demo", "--out", str(out), "--json"],
                              capture_output=True, text=True, check=False)
        if done.returncode not in (0, 1):  # 1: a trace with problems (reported, not fatal)
            sys.exit(f"agentlog demo failed:\n{done.stderr[-3000:]}")
        summary: dict[str, Any] = json.loads(done.stdout)["certify"]
        p = certify.Plan.from_toml(out / "plan.toml")
        data = certify.from_traces(out / "variants", plan=p)
        adm = certify.admissibility(data.entries, plan=p)
        board = certify.certify(data, plan=p, admissibility=adm, calibrate=False)
    names = list(data.systems)
    y = np.column_stack([data.scores[s][:, 0] for s in names])  # (questions, systems)
    ok = np.all([data.present[s] & ~data.failed[s] for s in names], axis=0)
    assert ok.all() and np.isfinite(y).all(), "a question is missing or failed"
    n = y.shape[0]
    x = -y.mean(axis=0)  # lower abs_error is better; csranks ranks larger values first
    sigma = np.cov(y, rowvar=False) / n  # = the CR2 variances of singleton clusters
    version, sets = csranks_sets(args, x, sigma)
    bare = certify.certify({s: data.scores[s][:, 0] for s in names},
                           clusters=np.arange(n),
                           plan=plan("demo, admissibility left out", "abs_error", "lower",
                                     0.05), calibrate=False)
    check_pairs(board, names, x, sigma, "demo")
    check_pairs(bare, names, x, sigma, "demo, admissibility left out")
    demo_ranks = {r["system"]: tuple(r["rank"]) for r in summary["board"]["systems"]}
    assert demo_ranks == {s: board.rank(s) for s in names}, \
        "the board recomputed from the traces differs from the demo's"
    decisions = board.decisions[board.target]
    refused = {n for n in names  # every pair with it refused before any score was read
               if all(d.decision == "refused" for d in decisions if n in (d.a, d.b))}
    print(f"### (b) `agentlog demo`'s leaderboard ({len(names)} variants × {n} questions, "
          "abs_error, lower is better)\n")
    print(f"csranks {version}: x = −mean, Σ = cov/{n}; agentlog: plan "
          f"'{p.name}' ({p.sampling}, δ′ = {p.delta_prime}, {board.family_size} pairs); "
          f"certified {len(board.certified())} pairs, {len(bare.certified())} with "
          f"admissibility left out; {critical(bare, sigma, args.replications)}.\n")
    print("| variant | mean abs_error | se | rank | csranks marginal | csranks simultaneous "
          "| agentlog certified | agentlog, admissibility left out |")
    print("|---|---|---|---|---|---|---|---|")
    for j in np.argsort(-x):
        s, name = sets[j], names[j]
        note = " (every pair refused)" if name in refused else ""
        print(f"| {name} | {-x[j]:.3f} | {np.sqrt(sigma[j, j]):.3f} | {s['rank']} | "
              f"{span(s['mL'], s['mU'])} | {span(s['sL'], s['sU'])} | "
              f"{span(*board.rank(name))}{note} | {span(*bare.rank(name))} |")
    print()
    for name in sorted(refused):
        why = next(d.reason for d in decisions if d.decision == "refused"
                   and name in (d.a, d.b) and not {d.a, d.b} <= refused)
        print(f"* {name}: {why}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rscript", default=shutil.which("Rscript") or "Rscript")
    parser.add_argument("--r-lib", default=os.environ.get("R_LIBS", "/tmp/rlib"),
                        help="the R library that holds csranks")
    parser.add_argument("--replications", type=int, default=10_000,
                        help="csranks' bootstrap draws R (its own default is 1000)")
    parser.add_argument("--seed", type=int, default=1, help="csranks' seed")
    parser.add_argument("--only", choices=("pisa", "demo"), default=None)
    args = parser.parse_args()
    if shutil.which(args.rscript) is None:
        sys.exit("Rscript not found: apt-get install -y r-base-core (see the docstring)")
    if args.only in (None, "pisa"):
        pisa(args)
    if args.only in (None, "demo"):
        demo(args)


if __name__ == "__main__":
    main()
