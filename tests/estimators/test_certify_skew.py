"""Skewed paired differences: the default Cornish–Fisher radius, betting, and the warnings.

The design that broke CR2 + BM: rare 0/1 successes against a calibrated continuous scorer.
Per cluster a success probability ``p_g ~ Beta(0.3, 7)``; system A scores Bernoulli(p_g)
per task, system B ``p_g + N(0, 0.02²)``. ``E[A − B] = 0`` in every cluster, so any
certificate is false. Tolerances are Monte Carlo standard errors, never tuned: the rates
below are the README's bench cells, rerun here with fewer boards.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

import agentlog as al
from agentlog.estimators import certify

F = NDArray[np.float64]
DELTA_PRIME = 0.05
AUDIT = np.repeat(np.arange(8), [1, 2, 2, 3, 4, 5, 6, 8])  # the audit's unequal layout
BALANCED = np.repeat(np.arange(8), 4)
SCORE_RANGE = (-0.1, 1.1)  # B leaves it with probability < 1e-6 per task; clipped anyway


def rare_binary(codes: NDArray[np.intp], boards: int, seed: int, *, a: float = 0.3,
                b: float = 7.0) -> tuple[F, F]:
    """``(A, B)`` scores, each ``(boards, n_tasks)``, of the null rare-binary design."""
    rng = np.random.default_rng(seed)
    p = rng.beta(a, b, (boards, int(codes.max()) + 1))[:, codes]
    binary = (rng.random(p.shape) < p).astype(np.float64)
    calibrated = np.clip(p + rng.normal(0.0, 0.02, p.shape), *SCORE_RANGE)
    return binary, calibrated


def false_rate(d: F, codes: NDArray[np.intp], sampling: str) -> float:
    r = certify.sampling_radius(d, codes, delta_prime=DELTA_PRIME, sampling=sampling,  # type: ignore[arg-type]
                                score_range=SCORE_RANGE if sampling == "betting" else None)
    return float((np.abs(r.estimate) > r.q).mean())


def make_plan(body: str = "", *, head: str = "") -> certify.Plan:
    return certify.Plan.from_toml(
        f'estimand = "whole-agent contrast"\n{head}\n[readouts.f1]\ntolerance = 0.05\n'
        f"[conditions]\nshared_entry = true\n{body}\n")


# ====================================================================== null boards


@pytest.mark.parametrize("layout", ["audit", "balanced"])
def test_on_rare_binary_null_boards_the_default_holds_delta_prime_where_cr2_bm_does_not(
        layout: str) -> None:
    """2,000 two-system null boards: the default stays within δ′ + 3 Monte Carlo se; CR2 + BM
    exceeds it on the balanced layout (measured 0.094) and is above the default on both."""
    boards = 2000
    limit = DELTA_PRIME + 3 * math.sqrt(DELTA_PRIME * (1 - DELTA_PRIME) / boards)
    codes = AUDIT if layout == "audit" else BALANCED
    a, b = rare_binary(codes, boards, seed=29)
    rates = {s: false_rate(a - b, codes, s) for s in ("cr2-bm-cf", "cr2-bm", "betting")}
    assert rates["cr2-bm-cf"] <= limit, rates
    assert rates["cr2-bm"] > rates["cr2-bm-cf"] + 2 * math.sqrt(limit * (1 - limit) / boards)
    if layout == "balanced":
        assert rates["cr2-bm"] > limit, rates  # the test can fail: the old default does
    assert rates["betting"] <= limit, rates


def test_a_rare_outcome_that_never_happened_defeats_every_t_radius_but_not_betting() -> None:
    """With ``p_g ~ Beta(40, 960)`` (every cluster near 0.04) a board without a success shows
    a clean gap of about −0.04: no radius computed from the sample can tell it from a real
    one, and every t-based radius certifies about a quarter of the null boards. Only the
    declared score range protects (the README's limits)."""
    boards = 2000
    limit = DELTA_PRIME + 3 * math.sqrt(DELTA_PRIME * (1 - DELTA_PRIME) / boards)
    a, b = rare_binary(BALANCED, boards, seed=31, a=40.0, b=960.0)
    for sampling in ("cr1", "cr2-bm", "cr2-bm-cf"):
        assert false_rate(a - b, BALANCED, sampling) > 0.2
    assert false_rate(a - b, BALANCED, "betting") <= limit


def test_on_symmetric_null_boards_the_default_is_at_most_cr2_bm() -> None:
    """The skewness terms only widen: symmetric data keep the rate at most CR2 + BM's."""
    rng = np.random.default_rng(5)
    codes = np.repeat(np.arange(15), 4)
    d = rng.normal(0, 1, (3000, len(codes))) + rng.normal(0, 0.5, (3000, 15))[:, codes]
    cf = certify.sampling_radius(d, codes)
    cr2 = certify.sampling_radius(d, codes, sampling="cr2-bm")
    assert np.all(cf.q >= cr2.q)
    limit = DELTA_PRIME + 3 * math.sqrt(DELTA_PRIME * (1 - DELTA_PRIME) / 3000)
    assert (np.abs(cf.estimate) > cf.q).mean() <= (np.abs(cr2.estimate) > cr2.q).mean() <= limit


# ====================================================================== the radius


def cornish_fisher_by_hand(d: F, codes: NDArray[np.intp], m: int) -> tuple[float, float]:
    """``(G₁, q)`` of ``"cr2-bm-cf"`` written out from its formula, one cluster at a time."""
    labels = np.unique(codes)
    N, G = len(d), len(labels)
    mean = d.mean()
    E = np.array([(d[codes == g] - mean).sum() for g in labels])
    p = np.array([(codes == g).sum() for g in labels]) / N
    u = E / np.sqrt(1 - p)  # CR2: (I − H_gg)^{−1/2} on the cluster's sum
    se = math.sqrt((u**2).sum()) / N
    a = p**2 / (1 - p)
    df = 1 / ((p**2).sum() + a.sum() ** 2 - (a**2).sum())
    g1 = (u**3).mean() / (u**2).mean() ** 1.5
    G1 = g1 * math.sqrt(G * (G - 1)) / (G - 2)
    s = abs(G1) / math.sqrt(G)
    level = 1 - DELTA_PRIME / (2 * m)
    z, t = stats.norm.ppf(level), stats.t.ppf(level, df)
    return G1, (t + s * (2 * z * z + 1) / 6 + s * s * z * (4 * z * z - 3) / 24) * se


def test_the_default_radius_is_the_t_quantile_widened_by_the_cornish_fisher_terms() -> None:
    rng = np.random.default_rng(8)
    for trial in range(20):
        G = 4 + trial
        codes = np.repeat(np.arange(G), rng.integers(1, 7, G))
        d = rng.exponential(1.0, len(codes)) + rng.exponential(0.5, G)[codes]
        m = 1 + trial % 6
        r = certify.sampling_radius(d, codes, family_size=m)
        G1, q = cornish_fisher_by_hand(d, codes, m)
        assert r.method == "cr2-bm-cf"
        assert r.skewness[0] == pytest.approx(G1, rel=1e-10)
        assert r.q[0] == pytest.approx(q, rel=1e-10)


def test_with_equal_clusters_the_skewness_is_scipys_adjusted_sample_skewness() -> None:
    rng = np.random.default_rng(2)
    codes = np.repeat(np.arange(12), 3)
    d = rng.lognormal(0, 1, len(codes))
    totals = np.array([(d[codes == g] - d.mean()).sum() for g in range(12)])
    r = certify.sampling_radius(d, codes)
    assert r.skewness[0] == pytest.approx(stats.skew(totals, bias=False), rel=1e-10)


def test_the_widening_ignores_the_sign_of_the_skewness_and_vanishes_without_it() -> None:
    """A rare success that did not happen skews the sample the other way: both tails widen."""
    codes = np.repeat(np.arange(6), 2)
    d = np.array([0.1, 0.3, 0.0, 0.2, 0.1, 0.2, 0.4, 0.2, 0.1, 0.1, 1.5, 1.1])
    right, left = certify.sampling_radius(d, codes), certify.sampling_radius(-d, codes)
    assert right.skewness[0] == pytest.approx(-left.skewness[0]) and right.skewness[0] > 1
    assert right.q[0] == pytest.approx(left.q[0], rel=1e-12)
    mirrored = np.array([-0.3, -0.1, 0.0, 0.0, 0.1, 0.3])  # cluster totals symmetric about 0
    plain = certify.sampling_radius(mirrored, np.arange(6) // 1, sampling="cr2-bm")
    cf = certify.sampling_radius(mirrored, np.arange(6) // 1)
    assert abs(cf.skewness[0]) < 1e-12 and cf.q[0] == pytest.approx(plain.q[0], rel=1e-12)


# ====================================================================== betting


def wealth_by_hand(x: list[float], m0: float, floor: float) -> float:
    """The average over the fixed bets of ``Π (1 + c (x_g − m0)/(m0 − floor))``."""
    bets = [0.95 * 0.5**k for k in range(12)]
    return sum(math.prod(1 + c * (v - m0) / (m0 - floor) for v in x) for c in bets) / len(bets)


def test_the_betting_bound_is_where_the_averaged_wealth_reaches_one_over_alpha() -> None:
    """Scores in [0, 1], 10 clusters of 2 tasks: ``x_g = G S_g / N`` is each cluster's mean
    difference, ``floor = −1``; the lower bound ``Δ̂ − q`` is where the wealth hits 1/α."""
    rng = np.random.default_rng(4)
    codes = np.repeat(np.arange(10), 2)
    d = np.clip(rng.normal(0.6, 0.1, 20), -1, 1)
    r = certify.sampling_radius(d, codes, sampling="betting", score_range=(0.0, 1.0))
    x = [float(d[codes == g].mean()) for g in range(10)]
    lower = float(r.estimate[0] - r.q[0])
    alpha = DELTA_PRIME / 2
    assert wealth_by_hand(x, lower, -1.0) == pytest.approx(1 / alpha, rel=1e-9)
    assert wealth_by_hand(x, lower + 1e-6, -1.0) < 1 / alpha < wealth_by_hand(x, lower - 1e-6,
                                                                                 -1.0)
    # Ten clusters on a range of width 2 certify little: the bound sits below 0 here, far
    # below the t radius's (the price of holding whatever the shape).
    assert lower < 0 < float(r.estimate[0] - certify.sampling_radius(d, codes).q[0])
    again = certify.sampling_radius(d, codes, sampling="betting", score_range=(0.0, 1.0))
    assert again.q.tobytes() == r.q.tobytes()  # no draws: the same input, the same bound
    flipped = certify.sampling_radius(-d, codes, sampling="betting", score_range=(0.0, 1.0))
    assert flipped.q[0] == pytest.approx(r.q[0], rel=1e-12)  # the upper bound mirrors it


def test_betting_needs_a_declared_range_that_holds_and_no_other_radius_takes_one() -> None:
    with pytest.raises(ValueError, match=r"`score_range` .* is needed by sampling='betting'"):
        certify.sampling_radius([0.1, 0.2, 0.3], [0, 1, 2], sampling="betting")
    with pytest.raises(ValueError, match=r"found score_range=\(0, 1\) with "
                                         r"sampling='cr2-bm-cf'"):
        certify.sampling_radius([0.1, 0.2, 0.3], [0, 1, 2], score_range=(0, 1))
    with pytest.raises(ValueError, match="`score_range` must be two finite numbers"):
        certify.sampling_radius([0.1, 0.2], [0, 1], sampling="betting", score_range=(1, 0))
    with pytest.raises(ValueError, match=r"allows differences up to 1 in size; found 1\.5"):
        certify.sampling_radius([0.1, 1.5], [0, 1], sampling="betting", score_range=(0, 1))


# ====================================================================== the board


def test_each_pair_reports_the_skewness_of_its_cluster_differences_beside_df() -> None:
    rng = np.random.default_rng(6)
    codes = np.repeat(np.arange(12), 4)
    task = rng.normal(0, 1, 48)
    scores = {"a": task + 1.0 + rng.lognormal(0, 1, 12)[codes], "b": task + 2.6,
              "c": task + rng.normal(0, 1, 48)}
    board = certify.certify(scores, clusters=codes, plan=make_plan(), calibrate=False)
    p = board.decision("a", "b")
    r = certify.sampling_radius(scores["a"] - scores["b"], codes, family_size=3)
    assert p.sampling == "cr2-bm-cf" and p.skewness == pytest.approx(float(r.skewness[0]))
    assert p.skewness > 0.5 and p.q == pytest.approx(float(r.q[0]))
    row = next(x for x in board.to_dict()["pairs"] if (x["a"], x["b"]) == ("a", "b"))
    assert row["skewness"] == pytest.approx(p.skewness) and row["df"] == pytest.approx(p.df)


def test_a_certificate_that_rests_on_symmetry_warns_under_cr2_bm_but_not_the_default() -> None:
    """One far cluster: Δ̂ = 0.65 clears CR2 + BM's q = 0.61 but not the widened 1.23."""
    codes = np.repeat(np.arange(8), 2)
    gap = np.array([0.1, 0.3, 0.0, 0.2, 0.1, 0.2, 0.2, 0.1, 0.1, 0.1, 0.2, 0.3,
                    0.0, 0.2, 2.4, 2.0]) + 0.25
    task = np.linspace(0, 1, 16)
    scores = {"a": task, "b": task + gap}
    with pytest.warns(al.DegenerateDataWarning,
                      match=r"2 certified pair\(s\) have skewed differences \(\|G₁\| > 2\) and "
                            r"would not be certified once their skewness is accounted for "
                            r"\(b ≻ a on `composite` \(G₁ = -2.8\)"):
        old = certify.certify(scores, clusters=codes, plan=make_plan(
            "[calibration]\nn_resamples = 0\n", head='sampling = "cr2-bm"\ntarget = "f1"'))
    assert old.certified() == [("b", "a")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = certify.certify(scores, clusters=codes,
                              plan=make_plan("[calibration]\nn_resamples = 0\n",
                                             head='target = "f1"'))
    assert new.certified() == [] and new.decision("a", "b").decision == "undecided-sampling"


def test_a_certificate_against_a_system_that_barely_varies_warns() -> None:
    """A binary system with no success, against a calibrated scorer: the spread the radius
    sees is the scorer's alone, and the board says so."""
    rng = np.random.default_rng(12)
    codes = np.repeat(np.arange(20), 4)
    p = rng.uniform(0.1, 0.3, 20)[codes]
    scores = {"binary": np.zeros(80), "scorer": p + rng.normal(0, 0.01, 80)}
    with pytest.warns(al.DegenerateDataWarning,
                      match=r"2 certified pair\(s\) rest on a system whose score barely varies "
                            r"\(scorer ≻ binary on `composite` \(binary differs from its most "
                            r"common score on 0 of 80 tasks\)"):
        board = certify.certify(scores, clusters=codes,
                                plan=make_plan("[calibration]\nn_resamples = 0\n"))
    assert ("scorer", "binary") in board.certified()


# ====================================================================== F.5 calibration


def test_the_sign_flip_calibration_cannot_see_skew() -> None:
    """On rare-binary boards CR2 + BM's true rate exceeds δ′ (the null test above), yet the
    sign-flip null, symmetric by construction, reports a comfortable rate."""
    plan = make_plan("[calibration]\nn_resamples = 400\nleave_one_cluster_out = false\n",
                     head='sampling = "cr2-bm"')
    a, b = rare_binary(BALANCED, 40, seed=3)
    reported = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", al.DegenerateDataWarning)
        for k in range(40):
            cal = certify.certify({"a": a[k], "b": b[k]}, clusters=BALANCED,
                                  plan=plan).calibration
            assert cal is not None
            reported.append(cal.family_rate)
    assert np.mean(reported) < DELTA_PRIME
