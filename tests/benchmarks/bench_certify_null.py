"""Null and power study of the sampling radius: CR1 (as published) against CR2 + BM df.

Run: ``python tests/benchmarks/bench_certify_null.py [--boards N] [--power-boards N]
[--seed S] [--markdown]``. Not collected by pytest; writes no file. It prints one row per
cell and exits non-zero when the shipped radius (``"cr2-bm"``) exceeds ``δ′`` by more than
3 Monte Carlo standard errors in any cell (``--no-check`` to only print).

Leaderboards of 10 systems (45 pairs, Bonferroni at ``δ′ = 0.05``), scores
``task + u[system, cluster] + e`` with a shared entry, so ``ε̂_out = r = 0`` and a pair is
certified iff ``|Δ̂| > q`` ([LBC] eq. 4). Cells: cluster-size design × ``G`` × noise × cluster
effect.

* designs: ``balanced`` (4 tasks per cluster); ``mild`` (1 + min(5, Poisson(1.2)) per
  cluster: about the paper's 50 tasks in 23 clusters); ``lognormal``
  (round(exp(N(1, 1))), at least 1); ``dominant`` (one cluster holds two thirds of the
  tasks, the others 2 each). Random designs are drawn again every ``CHUNK`` boards.
* ``G`` ∈ {8, 15, 23, 40}; noise ``e``: normal, or Student t(3) scaled to unit variance;
  cluster effect ``u[system, cluster]``: sd 0 or 0.5 (per-task noise sd 1).
* ``fwer``: the share of null boards (all systems equal) with any certified pair, with its
  Monte Carlo standard error. ``power@g``: system 0 is better by ``g`` (in per-task noise
  sd), the others equal; the share of its 9 true pairs certified in the right direction.
* ``df``: the median Bell–McCaffrey effective degrees of freedom of the design (CR1 uses
  ``G − 1``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Literal

import numpy as np
from numpy.typing import NDArray

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agentlog.estimators import certify

F = NDArray[np.float64]
Ints = NDArray[np.intp]
S = 10
DELTA_PRIME = 0.05
DESIGNS = ("balanced", "mild", "lognormal", "dominant")
GS = (8, 15, 23, 40)
GAPS = (0.5, 1.0)
CHUNK = 25  # boards per drawn design
METHODS: tuple[Literal["cr1", "cr2-bm"], ...] = ("cr1", "cr2-bm")


def sizes(design: str, G: int, rng: np.random.Generator) -> Ints:
    if design == "balanced":
        return np.full(G, 4, dtype=np.intp)
    if design == "mild":
        return (1 + np.minimum(5, rng.poisson(1.2, G))).astype(np.intp)
    if design == "lognormal":
        return np.maximum(1, np.round(np.exp(rng.normal(1.0, 1.0, G)))).astype(np.intp)
    out = np.full(G, 2, dtype=np.intp)
    out[0] = 4 * (G - 1)  # two thirds of the tasks
    return out


def boards(codes: Ints, n: int, rng: np.random.Generator, *, heavy: bool, cluster_sd: float,
           gap: float) -> F:
    """``(n, S, N)`` scores of ``n`` boards on one design."""
    G, N = int(codes.max()) + 1, len(codes)
    e = (rng.standard_t(3, (n, S, N)) / math.sqrt(3.0) if heavy
         else rng.normal(0.0, 1.0, (n, S, N)))
    y = rng.normal(0.0, 1.0, (n, 1, N)) + e
    if cluster_sd > 0:
        y = y + rng.normal(0.0, cluster_sd, (n, S, G))[:, :, codes]
    y[:, 0] += gap
    return y


def cell(design: str, G: int, *, heavy: bool, cluster_sd: float, n_null: int, n_power: int,
         rng: np.random.Generator) -> dict[str, float]:
    ia, ib = np.triu_indices(S, 1)
    m = len(ia)
    true = ia == 0  # pairs (s0, sj): s0 is better by the gap
    false_any = {k: 0 for k in METHODS}
    hits = {(k, g): 0 for k in METHODS for g in GAPS}
    dfs: list[float] = []
    for gap, total in ((0.0, n_null), *((g, n_power) for g in GAPS)):
        done = 0
        while done < total:
            n = min(CHUNK, total - done)
            codes = np.repeat(np.arange(G), sizes(design, G, rng))
            y = boards(codes, n, rng, heavy=heavy, cluster_sd=cluster_sd, gap=gap)
            d = (y[:, ia] - y[:, ib]).reshape(-1, len(codes))
            for method in METHODS:
                r = certify.sampling_radius(d, codes, delta_prime=DELTA_PRIME, family_size=m,
                                            sampling=method)
                cert = (np.abs(r.estimate) > r.q).reshape(n, m)
                if gap == 0.0:
                    false_any[method] += int(cert.any(axis=1).sum())
                    if method == "cr2-bm":
                        dfs.append(float(r.df[0]))
                else:
                    right = cert & (r.estimate.reshape(n, m) > 0)
                    hits[(method, gap)] += int(right[:, true].sum())
            done += n
    out = {f"fwer_{k}": false_any[k] / n_null for k in METHODS}
    out.update({f"power_{k}_{g:g}": hits[(k, g)] / (n_power * int(true.sum()))
                for k in METHODS for g in GAPS})
    out["df"] = float(np.median(dfs))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--boards", type=int, default=2000, help="null boards per cell")
    parser.add_argument("--power-boards", type=int, default=400, help="boards per gap")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--markdown", action="store_true", help="a Markdown table")
    parser.add_argument("--no-check", action="store_true", help="print only; never fail")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    mc = math.sqrt(DELTA_PRIME * (1 - DELTA_PRIME) / args.boards)
    limit = DELTA_PRIME + 3 * mc
    power_cols = [f"power@{g:g} {k}" for g in GAPS for k in ("CR1", "CR2")]
    head = ["noise", "u sd", "design", "G", "df (BM)", "fwer CR1", "fwer CR2", *power_cols]
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
    else:
        print("  ".join(f"{h:>12}" for h in head))
    worst = {k: 0.0 for k in METHODS}
    failures = 0
    t0 = time.perf_counter()
    for heavy in (False, True):
        for cluster_sd in (0.0, 0.5):
            for design in DESIGNS:
                for G in GS:
                    r = cell(design, G, heavy=heavy, cluster_sd=cluster_sd,
                             n_null=args.boards, n_power=args.power_boards, rng=rng)
                    for k in METHODS:
                        worst[k] = max(worst[k], r[f"fwer_{k}"])
                    failures += r["fwer_cr2-bm"] > limit
                    row = ["t(3)" if heavy else "normal", f"{cluster_sd:g}", design, str(G),
                           f"{r['df']:.1f}", f"{r['fwer_cr1']:.3f}", f"{r['fwer_cr2-bm']:.3f}",
                           *(f"{r[f'power_{k}_{g:g}']:.2f}" for g in GAPS for k in METHODS)]
                    if args.markdown:
                        print("| " + " | ".join(row) + " |", flush=True)
                    else:
                        print("  ".join(f"{c:>12}" for c in row), flush=True)
    print(f"\n{args.boards} null boards per cell (Monte Carlo se {mc:.4f} at δ′ = "
          f"{DELTA_PRIME}; limit δ′ + 3 se = {limit:.4f}), {args.power_boards} boards per gap; "
          f"worst family-wise rate: CR1 {worst['cr1']:.3f}, CR2 + BM {worst['cr2-bm']:.3f}; "
          f"cells where CR2 + BM exceeds the limit: {failures}; "
          f"{time.perf_counter() - t0:.0f} s")
    return 0 if failures == 0 or args.no_check else 1


if __name__ == "__main__":
    raise SystemExit(main())
