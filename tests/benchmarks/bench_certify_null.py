"""Null and power study of the sampling radius: CR1, CR2 + BM and the default CR2 + BM + CF.

Run: ``python tests/benchmarks/bench_certify_null.py [--family F ...] [--boards N]
[--power-boards N] [--seed S] [--markdown] [--no-check]``. Not collected by pytest; writes
no file. It prints one row per cell and exits non-zero when the shipped radius
(``"cr2-bm-cf"``) exceeds ``δ′`` by more than 3 Monte Carlo standard errors in any cell
(``--no-check`` to only print). Each family runs in a few minutes on two cores; run them
one at a time with ``--family``.

A cell is a leaderboard design: ``S`` systems (``m = S(S−1)/2`` pairs, Bonferroni at
``δ′ = 0.05``), a shared entry (``ε̂_out = r = 0``, so a pair is certified iff ``|Δ̂| > q``,
[LBC] eq. 4), and one of three families of scores:

* ``symmetric`` (10 systems): ``task + u[system, cluster] + e`` with ``e`` normal or
  Student t(3) scaled to unit variance and a cluster effect ``u`` of sd 0 or 0.5; cluster
  sizes ``balanced`` (4 per cluster), ``mild`` (1 + min(5, Poisson(1.2)): about the paper's
  50 tasks in 23 clusters), ``lognormal`` (round(exp(N(1, 1))), at least 1) or ``dominant``
  (one cluster holds two thirds of the tasks, the others 2 each). Random designs are drawn
  again every ``CHUNK`` boards. Power: system 0 better by 0.5 and by 1 per-task noise sd.
* ``rare-binary`` (the audit's design; 2 systems, and 10 = 5 + 5): per cluster a success
  probability ``p_g ~ Beta(0.3, 7)`` (mean 0.04); a binary system scores Bernoulli(``p_g``)
  per task, a calibrated continuous scorer ``p_g + N(0, 0.02²)`` (clipped to the declared
  range [−0.1, 1.1], which it leaves with probability below 1e-6 per task). Every pair's
  differences have mean 0 in every cluster, so any certificate is false. Sizes: the audit's
  unequal layout (1, 2, 2, 3, 4, 5, 6, 8), or balanced / lognormal over G clusters. Power:
  system 0 (binary) succeeds with ``p_g + 0.1`` and ``p_g + 0.2``. ``"betting"`` runs here
  on the two-system boards, with the declared range.
* ``lognormal`` (2 systems, and 10 = 5 + 5): a shared task effect N(0, 1); half the
  systems add a cluster effect ``exp(N(0, 1))`` standardised to mean 0 and sd 1 (skewness
  6.2) and N(0, 1) per task, the others N(0, 2) per task: equal means, skewed differences.
  Power: system 0 (skewed) better by 0.5 and 1.

Columns: ``fwer``: the share of null boards with any certified pair, ± its Monte Carlo
standard error; ``power@g``: the share of system 0's true pairs certified in the right
direction; ``df``: the median Bell–McCaffrey effective degrees of freedom (CR1 uses
``G − 1``); ``|G₁|``: the median absolute sample skewness of the null pairs' cluster totals.
For the rare-binary family the summary also gives the share of the default's false
certificates that the board's rare-outcome warning flags (a system with at most one task off
its most common score) and the share of CR2 + BM's that ``"cr2-bm-cf"`` removes.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agentlog import DegenerateDataWarning
from agentlog.estimators import certify

F = NDArray[np.float64]
Ints = NDArray[np.intp]
DELTA_PRIME = 0.05
GS = (8, 15, 23, 40)
CHUNK = 25  # boards per drawn design
METHODS = ("cr1", "cr2-bm", "cr2-bm-cf")
DEFAULT = "cr2-bm-cf"
SCORE_RANGE = (-0.1, 1.1)  # the rare-binary family's declared range
AUDIT = (1, 2, 2, 3, 4, 5, 6, 8)
GAPS = {"symmetric": (0.5, 1.0), "rare-binary": (0.1, 0.2), "lognormal": (0.5, 1.0)}


@dataclass(frozen=True)
class Cell:
    family: str
    systems: int
    design: str
    G: int
    heavy: bool = False
    cluster_sd: float = 0.0

    @property
    def label(self) -> str:
        noise = (("t(3)" if self.heavy else "normal") + f", u {self.cluster_sd:g}"
                 if self.family == "symmetric" else "")
        return f"{self.family} | {self.systems} | {noise} | {self.design} | {self.G}"

    @property
    def methods(self) -> tuple[str, ...]:
        bounded = self.family == "rare-binary" and self.systems == 2
        return (*METHODS, "betting") if bounded else METHODS


def cells(families: list[str]) -> Iterator[Cell]:
    for family in families:
        if family == "symmetric":
            for heavy in (False, True):
                for cluster_sd in (0.0, 0.5):
                    for design in ("balanced", "mild", "lognormal", "dominant"):
                        for G in GS:
                            yield Cell(family, 10, design, G, heavy, cluster_sd)
            continue
        for systems in (2, 10):
            if family == "rare-binary":
                yield Cell(family, systems, "audit", len(AUDIT))
            for design in ("balanced", "lognormal"):
                for G in GS:
                    yield Cell(family, systems, design, G)


def sizes(design: str, G: int, rng: np.random.Generator) -> Ints:
    if design == "audit":
        return np.array(AUDIT, dtype=np.intp)
    if design == "balanced":
        return np.full(G, 4, dtype=np.intp)
    if design == "mild":
        return (1 + np.minimum(5, rng.poisson(1.2, G))).astype(np.intp)
    if design == "lognormal":
        return np.maximum(1, np.round(np.exp(rng.normal(1.0, 1.0, G)))).astype(np.intp)
    out = np.full(G, 2, dtype=np.intp)
    out[0] = 4 * (G - 1)  # two thirds of the tasks
    return out


def scores(cell: Cell, codes: Ints, n: int, rng: np.random.Generator, gap: float) -> F:
    """``(n, S, N)`` scores of ``n`` boards on one design; system 0 leads by ``gap``."""
    S, G, N = cell.systems, int(codes.max()) + 1, len(codes)
    half = S // 2
    if cell.family == "symmetric":
        e = (rng.standard_t(3, (n, S, N)) / math.sqrt(3.0) if cell.heavy
             else rng.normal(0.0, 1.0, (n, S, N)))
        y = rng.normal(0.0, 1.0, (n, 1, N)) + e
        if cell.cluster_sd > 0:
            y = y + rng.normal(0.0, cell.cluster_sd, (n, S, G))[:, :, codes]
        y[:, 0] += gap
        return y
    if cell.family == "rare-binary":
        p = rng.beta(0.3, 7.0, (n, 1, G))[:, :, codes]
        lift = np.zeros((1, half, 1))
        lift[0, 0] = gap
        binary = (rng.random((n, half, N)) < p + lift).astype(np.float64)
        calibrated = np.clip(p + rng.normal(0.0, 0.02, (n, S - half, N)), *SCORE_RANGE)
        return np.concatenate([binary, calibrated], axis=1)
    s2 = math.exp(1.0)  # exp(N(0, 1)): mean e^½, variance (e − 1)e
    u = (np.exp(rng.normal(0.0, 1.0, (n, half, G))) - math.sqrt(s2)) / math.sqrt((s2 - 1) * s2)
    skewed = u[:, :, codes] + rng.normal(0.0, 1.0, (n, half, N))
    y = np.concatenate([skewed, rng.normal(0.0, math.sqrt(2.0), (n, S - half, N))], axis=1)
    y = y + rng.normal(0.0, 1.0, (n, 1, N))
    y[:, 0] += gap
    return y


def rare(y: F, ia: Ints, ib: Ints) -> NDArray[np.bool_]:
    """``(n, m)``: either system of the pair has at most one task off its modal score."""
    n, S, N = y.shape
    off = np.empty((n, S), dtype=np.intp)
    for b in range(n):
        for s in range(S):
            _, counts = np.unique(y[b, s], return_counts=True)
            off[b, s] = N - counts.max()
    return (off[:, ia] <= 1) | (off[:, ib] <= 1)


def run(cell: Cell, *, n_null: int, n_power: int, rng: np.random.Generator
        ) -> dict[str, float]:
    ia, ib = np.triu_indices(cell.systems, 1)
    m = len(ia)
    true = ia == 0  # pairs (s0, sj): s0 is better by the gap
    gaps = GAPS[cell.family]
    false_any = dict.fromkeys(cell.methods, 0)
    hits = {(k, g): 0 for k in cell.methods for g in gaps}
    dfs: list[float] = []
    skews: list[F] = []
    flagged = fcf = removed = fcr2 = 0
    for gap, total in ((0.0, n_null), *((g, n_power) for g in gaps)):
        done = 0
        while done < total:
            n = min(CHUNK, total - done)
            codes = np.repeat(np.arange(cell.G), sizes(cell.design, cell.G, rng))
            y = scores(cell, codes, n, rng, gap)
            d = (y[:, ia] - y[:, ib]).reshape(-1, len(codes))
            cert = {}
            for method in cell.methods:
                r = certify.sampling_radius(
                    d, codes, delta_prime=DELTA_PRIME, family_size=m, sampling=method,  # type: ignore[arg-type]
                    score_range=SCORE_RANGE if method == "betting" else None)
                cert[method] = (np.abs(r.estimate) > r.q).reshape(n, m)
                if gap == 0.0:
                    false_any[method] += int(cert[method].any(axis=1).sum())
                    if method == DEFAULT:
                        dfs.append(float(np.median(r.df)))
                        skews.append(np.abs(r.skewness))
                else:
                    right = cert[method] & (r.estimate.reshape(n, m) > 0)
                    hits[(method, gap)] += int(right[:, true].sum())
            if gap == 0.0 and cell.family == "rare-binary":
                fcf += int(cert[DEFAULT].sum())
                flagged += int((cert[DEFAULT] & rare(y, ia, ib)).sum())
                fcr2 += int(cert["cr2-bm"].sum())
                removed += int((cert["cr2-bm"] & ~cert[DEFAULT]).sum())
            done += n
    out = {f"fwer_{k}": false_any[k] / n_null for k in cell.methods}
    out.update({f"power_{k}_{g:g}": hits[(k, g)] / (n_power * int(true.sum()))
                for k in cell.methods for g in gaps})
    out["df"] = float(np.median(dfs))
    out["skew"] = float(np.median(np.concatenate(skews)))
    out.update(flagged=flagged, false_cf=fcf, removed=removed, false_cr2=fcr2)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--family", action="append", choices=list(GAPS),
                        help="families to run (repeatable; default: all)")
    parser.add_argument("--boards", type=int, default=2000, help="null boards per cell")
    parser.add_argument("--power-boards", type=int, default=200, help="boards per gap")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--markdown", action="store_true", help="a Markdown table")
    parser.add_argument("--no-check", action="store_true", help="print only; never fail")
    args = parser.parse_args(argv)
    # Two binary systems that both score 0 on every task differ by exactly 0: the rule never
    # certifies such a pair (q = inf), which is what the study counts; the warning is noise.
    warnings.simplefilter("ignore", DegenerateDataWarning)
    families = args.family or list(GAPS)
    rng = np.random.default_rng(args.seed)
    mc = math.sqrt(DELTA_PRIME * (1 - DELTA_PRIME) / args.boards)
    limit = DELTA_PRIME + 3 * mc
    names = {"cr1": "CR1", "cr2-bm": "CR2", "cr2-bm-cf": "CR2+CF", "betting": "bet"}
    head = ["family", "S", "noise", "design", "G", "df", "|G₁|",
            *(f"fwer {names[k]}" for k in (*METHODS, "betting")),
            *(f"power@{i} {names[k]}" for i in ("g1", "g2") for k in (*METHODS, "betting"))]
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
    else:
        print("  ".join(head))
    worst: dict[str, float] = {}
    failures = 0
    totals = dict.fromkeys(("flagged", "false_cf", "removed", "false_cr2"), 0)
    t0 = time.perf_counter()
    for cell in cells(families):
        r = run(cell, n_null=args.boards, n_power=args.power_boards, rng=rng)
        for k in cell.methods:
            worst[k] = max(worst.get(k, 0.0), r[f"fwer_{k}"])
        for key in totals:
            totals[key] += int(r[key])
        failures += r[f"fwer_{DEFAULT}"] > limit

        def fwer(k: str, r: dict[str, float] = r) -> str:
            f = r.get(f"fwer_{k}")
            return "—" if f is None else f"{f:.3f} ± {math.sqrt(f * (1 - f) / args.boards):.3f}"

        def power(k: str, g: float, r: dict[str, float] = r) -> str:
            p = r.get(f"power_{k}_{g:g}")
            return "—" if p is None else f"{p:.2f}"

        g1, g2 = GAPS[cell.family]
        row = [*cell.label.split(" | "), f"{r['df']:.1f}", f"{r['skew']:.2f}",
               *(fwer(k) for k in (*METHODS, "betting")),
               *(power(k, g) for g in (g1, g2) for k in (*METHODS, "betting"))]
        print(("| " + " | ".join(row) + " |") if args.markdown else "  ".join(row), flush=True)
    print(f"\n{args.boards} null boards per cell (Monte Carlo se {mc:.4f} at δ′ = "
          f"{DELTA_PRIME}; limit δ′ + 3 se = {limit:.4f}), {args.power_boards} boards per gap"
          f" (gaps {', '.join(f'{f} {GAPS[f]}' for f in families)}); worst family-wise rate: "
          + ", ".join(f"{names[k]} {v:.3f}" for k, v in worst.items())
          + f"; cells where {DEFAULT} exceeds the limit: {failures}; "
          f"{time.perf_counter() - t0:.0f} s")
    if totals["false_cf"] or totals["false_cr2"]:
        print(f"rare-binary: the rare-outcome warning flags {totals['flagged']} of "
              f"{totals['false_cf']} false certificates of {DEFAULT}; {DEFAULT} removes "
              f"{totals['removed']} of cr2-bm's {totals['false_cr2']}")
    return 0 if failures == 0 or args.no_check else 1


if __name__ == "__main__":
    raise SystemExit(main())
