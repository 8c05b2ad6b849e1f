"""Certified leaderboards: admissibility, eq. 4, rank intervals, ladder, F.5 ([LBC])."""

from __future__ import annotations

import doctest
import hashlib
import inspect
import itertools
import json
import math
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

import agentlog as al
from agentlog._encoding import encode
from agentlog.estimators import _certify, _radius, bounds, certify

F = NDArray[np.float64]

EXPORTS = [
    "Admissibility", "BoardResult", "Calibration", "CalibrationResult", "CertifyData",
    "Conditions", "Constants", "Entry", "EntryTable", "FailurePolicy", "LadderRung", "LeaveOneOut",
    "PairAdmissibility", "PairDecision", "Plan", "RankIntervalsResult", "Readout",
    "SamplingRadiusResult", "SystemConstants", "TargetRadius", "WindowConstants",
    "admissibility", "certify", "draw_rank_intervals", "from_dataset", "from_traces",
    "rank_intervals",
    "sampling_radius",
]


def make_plan(body: str = "", *, readouts: str = "[readouts.f1]\ntolerance = 0.05\n",
              head: str = "") -> certify.Plan:
    return certify.Plan.from_toml(f'estimand = "whole-agent contrast"\n{head}\n{readouts}\n'
                                  f"{body}\n")


SHARED = "[conditions]\nshared_entry = true\n"


def leaderboard(means: dict[str, float], *, n: int = 50, n_clusters: int = 23,
                noise: float = 0.05, seed: int = 0) -> tuple[dict[str, F], NDArray[np.intp]]:
    rng = np.random.default_rng(seed)
    clusters = np.concatenate([np.arange(n_clusters), rng.integers(0, n_clusters,
                                                                    n - n_clusters)])
    task = rng.normal(0, 0.1, n) + rng.normal(0, 0.1, n_clusters)[clusters]
    return ({s: m + task + rng.normal(0, noise, n) for s, m in means.items()}, clusters)


# ====================================================================== public surface


def test_the_public_names_are_fixed_and_sorted() -> None:
    assert certify.__all__ == sorted(certify.__all__) == EXPORTS
    for name in certify.__all__:
        assert getattr(certify, name) is not None


@pytest.mark.parametrize("module", [_certify, _radius, certify])
def test_the_module_examples_run(module: Any) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_importing_agentlog_or_certify_stays_light() -> None:
    code = ("import sys, agentlog, agentlog.estimators.certify; "
            "print(sorted(m for m in ('scipy', 'ot', 'statsmodels') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


# ====================================================================== rank intervals


def brute_force(k: int, relations: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Min and max 1-based position of each element over every linear extension."""
    orders = np.array(list(itertools.permutations(range(k))), dtype=np.intp)
    position = np.argsort(orders, axis=1)  # position[o, x]: where x stands in order o
    ok = np.ones(len(orders), dtype=bool)
    for a, b in relations:
        ok &= position[:, a] < position[:, b]
    pos = position[ok]
    return [(int(pos[:, x].min()) + 1, int(pos[:, x].max()) + 1) for x in range(k)]


def test_rank_intervals_equal_brute_force_over_all_linear_extensions() -> None:
    rng = np.random.default_rng(20240611)
    for trial in range(420):
        k = 1 + trial % 7
        topo = rng.permutation(k)  # a hidden order makes the relation acyclic
        density = rng.choice([0.0, 0.15, 0.3, 0.5, 0.8])
        rel = [(int(topo[i]), int(topo[j])) for i in range(k) for j in range(i + 1, k)
               if rng.random() < density]
        names = [f"s{x}" for x in range(k)]
        got = certify.rank_intervals(names, [(names[a], names[b]) for a, b in rel])
        assert [got.intervals[s] for s in names] == brute_force(k, rel), (k, rel)
        assert got.cycles == ()
        for s in names:
            assert got.pinned(s) == (got.intervals[s][0] == got.intervals[s][1])


def test_rank_intervals_equal_those_of_multiple_inference_on_its_rejection_matrix() -> None:
    ci = pytest.importorskip("multiple_inference.confidence_set",
                             reason="multiple-inference is not installed (pip install "
                                    "multiple-inference; it is in the dev extra)")
    rng = np.random.default_rng(7)
    compared = equal = 0
    for trial in range(12):
        k = 4 + trial % 4
        mean = np.sort(rng.normal(0, 1.0, k))[::-1] + rng.normal(0, 0.05, k)
        # Unequal variances (every third trial) may give a rejection matrix that is not
        # transitive; equal ones never do.
        cov = np.diag(rng.uniform(0.02, 0.2, k)) if trial % 3 == 2 else np.eye(k) * 0.05
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            # its q-value spline fit overflows on well-separated means; q-values are unused
            warnings.simplefilter("ignore", RuntimeWarning)
            res = ci.SimultaneousRanking(mean, cov, random_state=trial).fit(n_samples=4000)
        alpha = 0.05
        M = res._pairwise_comparison.test_hypotheses(alpha).to_numpy()  # M[i, j]: j > i
        names = [f"x{i}" for i in range(k)]
        rel = [(names[j], names[i]) for i in range(k) for j in range(k) if M[i, j]]
        theirs = res.conf_int(alpha)
        ours = certify.rank_intervals(names, rel)
        closed = set(ours.closure) == set(rel)
        for i, s in enumerate(names):
            lo, hi = ours.intervals[s]
            if closed:
                assert (lo, hi) == (int(theirs[i, 0]), int(theirs[i, 1]))
            else:  # the closure adds relations theirs does not count: ours is inside
                assert theirs[i, 0] <= lo <= hi <= theirs[i, 1]
        compared += 1
        equal += closed
    assert compared == 12 and equal >= 8


def test_a_cycle_is_reported_and_nothing_in_it_is_pinned() -> None:
    r = certify.rank_intervals(["a", "b", "c", "d", "e"],
                               [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("e", "a")])
    assert r.cycles == (("a", "b", "c"),)
    # e is above the cycle, d below it; the cycle's members are tied among themselves.
    assert r.intervals == {"a": (2, 4), "b": (2, 4), "c": (2, 4), "d": (5, 5), "e": (1, 1)}
    assert not any(r.pinned(s) for s in "abc")
    assert ("e", "d") in r.closure and ("a", "a") not in r.closure


def test_rank_interval_input_is_checked() -> None:
    with pytest.raises(ValueError, match="`relations` names 'z', which is not in `systems`"):
        certify.rank_intervals(["a", "b"], [("a", "z")])
    with pytest.raises(ValueError, match="relates 'a' to itself"):
        certify.rank_intervals(["a", "b"], [("a", "a")])
    with pytest.raises(ValueError, match="`systems` must be unique"):
        certify.rank_intervals(["a", "a"], [])


# ====================================================================== sampling radius


def test_the_cr1_radius_equals_statsmodels_cluster_robust_t() -> None:
    """`sampling="cr1"` is [LBC] eq. 4 as published: statsmodels' CR1 with t(G − 1)."""
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(3)
    for trial in range(20):
        n = 20 + trial * 3
        g = rng.integers(0, 5 + trial, n)
        d = rng.normal(0.05, 0.2, n) + rng.normal(0, 0.2, g.max() + 1)[g]
        keep = rng.random(n) < 0.85
        res = sm.OLS(d[keep], np.ones(keep.sum())).fit(
            cov_type="cluster", cov_kwds={"groups": g[keep], "use_correction": True},
            use_t=True)
        m = 1 + trial % 7
        ours = certify.sampling_radius(d, g, mask=keep, delta_prime=0.05, family_size=m,
                                       sampling="cr1")
        assert abs(ours.standard_error[0] - res.bse[0]) <= 1e-10
        assert abs(ours.estimate[0] - res.params[0]) <= 1e-12
        low, high = res.conf_int(alpha=0.05 / m)[0]
        assert abs(ours.q[0] - (high - low) / 2) <= 1e-10  # t(G − 1), Bonferroni over m
        assert ours.n_clusters[0] == len(set(g[keep]))


def test_the_sampling_radius_is_vectorised_over_pairs_and_needs_two_clusters() -> None:
    d = np.array([[0.1, 0.2, 0.3, 0.4], [0.1, 0.2, 0.3, 0.4]])
    r = certify.sampling_radius(d, ["a", "a", "b", "b"],
                                mask=[[True] * 4, [True, True, False, False]])
    assert r.n_clusters.tolist() == [2, 1] and r.n_tasks.tolist() == [4, 2]
    assert np.isfinite(r.q[0]) and np.isnan(r.q[1])
    with pytest.raises(ValueError, match="`delta_prime` must be in"):
        certify.sampling_radius([0.1, 0.2], [0, 1], delta_prime=1.0)
    with pytest.raises(ValueError, match="`clusters` has 1 labels for 2 tasks"):
        certify.sampling_radius([0.1, 0.2], [0])
    with pytest.raises(ValueError, match="`differences` must be finite"):
        certify.sampling_radius([0.1, np.nan], [0, 1])


# ====================================================================== null calibration


def test_on_a_null_the_family_wise_false_certification_rate_is_at_most_nominal() -> None:
    """8 systems of equal means, 50 tasks in 23 clusters, 2,000 simulated leaderboards."""
    L, S, N, G = 2000, 8, 50, 23
    rng = np.random.default_rng(11)
    clusters = np.concatenate([np.arange(G), rng.integers(0, G, N - G)])
    task = rng.normal(0, 0.15, (L, 1, N))
    by_cluster = rng.normal(0, 0.05, (L, S, G))[:, :, clusters]  # system × cluster effects
    y = 0.5 + task + by_cluster + rng.normal(0, 0.08, (L, S, N))
    ia, ib = np.triu_indices(S, 1)
    d = (y[:, ia] - y[:, ib]).reshape(-1, N)
    r = certify.sampling_radius(d, clusters, delta_prime=0.05, family_size=len(ia))
    false_any = (np.abs(r.estimate) > r.q).reshape(L, len(ia)).any(axis=1)
    rate = false_any.mean()
    assert rate <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / L), rate
    # The board decides exactly what the vectorised rule decides.
    plan = make_plan(SHARED + "[calibration]\nn_resamples = 0\n")
    for b in range(0, L, 97):
        board = certify.certify({f"s{i}": y[b, i] for i in range(S)}, clusters=clusters,
                                plan=plan)
        expected = {(f"s{ia[k]}", f"s{ib[k]}") if r.estimate[b * len(ia) + k] > 0
                    else (f"s{ib[k]}", f"s{ia[k]}")
                    for k in range(len(ia)) if abs(r.estimate[b * len(ia) + k])
                    > r.q[b * len(ia) + k]}
        assert set(board.certified()) == expected


def test_the_sign_flip_rate_equals_a_draw_by_draw_recomputation() -> None:
    scores, clusters = leaderboard({"a": 0.55, "b": 0.5, "c": 0.5, "d": 0.45}, noise=0.08)
    plan = make_plan(SHARED + "[calibration]\nn_resamples = 300\nseed = 5\n")
    board = certify.certify(scores, clusters=clusters, plan=plan)
    cal = board.calibration
    assert cal is not None
    names = list(scores)
    ia, ib = np.triu_indices(len(names), 1)
    d = np.stack([scores[names[a]] - scores[names[b]] for a, b in zip(ia, ib, strict=True)])
    d = d - d.mean(axis=1, keepdims=True)
    G = len(set(clusters.tolist()))
    # Blocks of 256 draws, block j from the j-th child of SeedSequence(seed) (a Ray task
    # draws a block alone, with the same signs).
    children = np.random.SeedSequence(5).spawn(2)
    signs = np.concatenate([np.random.default_rng(children[j]).integers(0, 2, size=(rows, G))
                            for j, rows in enumerate((256, 44))]) * 2.0 - 1.0
    # One sign per cluster label, labels in the board's order (sorted as text).
    order = sorted({str(c) for c in clusters})
    codes = np.array([order.index(str(c)) for c in clusters])
    worst = np.empty(300)
    for b in range(300):
        r = certify.sampling_radius(d * signs[b][codes], clusters, family_size=len(ia))
        worst[b] = np.max(np.abs(r.estimate) / r.q)
    assert cal.family_rate == pytest.approx((worst > 1).mean(), abs=1e-12)
    # c*: the rate at scale c* is at most δ′, and any smaller scale exceeds it (up to the
    # rounding of two ways of computing the same flipped skewness).
    tol = 1e-9 * cal.c_star
    assert (worst > cal.c_star + tol).mean() <= 0.05 < (worst >= cal.c_star - tol).mean()
    assert cal.mc_se == pytest.approx(math.sqrt(cal.family_rate * (1 - cal.family_rate) / 300))
    assert cal.rates["f1"] == cal.rates["composite"]
    again = certify.certify(scores, clusters=clusters, plan=plan).calibration
    assert again is not None and again.to_dict() == cal.to_dict()


def test_c_star_drops_exactly_the_relations_whose_margin_it_covers() -> None:
    scores, clusters = leaderboard({"a": 0.56, "b": 0.5, "c": 0.44}, noise=0.1, seed=4)
    board = certify.certify(scores, clusters=clusters,
                            plan=make_plan(SHARED + "[calibration]\nn_resamples = 400\n"))
    cal = board.calibration
    assert cal is not None and math.isfinite(cal.c_star)
    expected = sorted((p.better, p.worse) for p in board.pairs
                      if p.decision == "certified" and p.margin <= cal.c_star)
    assert list(cal.drops) == expected


def test_leave_one_cluster_out_matches_certifying_again_without_the_cluster() -> None:
    scores, clusters = leaderboard({"a": 0.58, "b": 0.54, "c": 0.5, "d": 0.5, "e": 0.46},
                                   noise=0.06, seed=9)
    plan = make_plan(SHARED + "[calibration]\nn_resamples = 50\n")
    board = certify.certify(scores, clusters=clusters, plan=plan)
    cal = board.calibration
    assert cal is not None and len(cal.leave_one_out) == 23
    full = set(board.certified())
    jac, flips, winner_flips = [], 0, 0
    for h, loo in enumerate(cal.leave_one_out):
        keep = clusters != int(loo.cluster)
        assert sorted({str(c) for c in clusters})[h] == loo.cluster
        other = certify.certify({s: v[keep] for s, v in scores.items()},
                                clusters=clusters[keep], plan=plan, calibrate=False)
        rel = set(other.certified())
        union = full | rel
        jac.append(len(full & rel) / len(union) if union else 1.0)
        flips += sum((b, a) in rel for a, b in full)
        assert loo.certified == len(rel) and loo.jaccard == pytest.approx(jac[-1])
        first = {s for s in other.systems if other.rank(s)[0] == 1}
        assert set(loo.winners) == first
        winner_flips += not first & {s for s in board.systems if board.rank(s)[0] == 1}
    assert cal.jaccard_mean == pytest.approx(np.mean(jac))
    assert cal.jaccard_min == pytest.approx(np.min(jac))
    assert cal.flips == flips and cal.winner_flips == winner_flips


# ====================================================================== certification


def test_a_pair_is_certified_iff_its_gap_exceeds_q_plus_the_nuisance_radius() -> None:
    scores, clusters = leaderboard({"a": 0.6, "b": 0.55, "c": 0.5, "d": 0.49}, noise=0.05)
    board = certify.certify(scores, clusters=clusters, plan=make_plan(SHARED))
    assert board.family_size == 6
    for p in board.pairs:
        total = p.q + p.eps_out + p.r
        assert (p.decision == "certified") == (abs(p.delta) > total)
        assert p.eps_out == 0.0 and p.r == 0.0  # a declared shared entry: exact cells
        if p.decision == "certified":
            assert (p.better, p.worse) == ((p.a, p.b) if p.delta > 0 else (p.b, p.a))
            assert p.margin > 1
        expect = np.mean(scores[p.a] - scores[p.b])
        assert p.delta == pytest.approx(expect, abs=1e-12)


def centred(x: F) -> F:
    out: F = x - x.mean()
    return out


def test_undecided_pairs_are_labelled_sampling_or_attribution_limited() -> None:
    """Def. 7 / A.3: a gap inside ε̂_out + r cannot be certified by more tasks."""
    rng = np.random.default_rng(1)
    n = 60
    clusters = np.arange(n) // 2
    base = rng.normal(0.5, 0.1, n)
    scores = {"precise": base + 0.03 + rng.normal(0, 0.001, n),  # gap 0.03 < radius
              "ref": base,
              "noisy": base + 0.3 + centred(rng.normal(0, 1.5, n)),  # Δ̂ = 0.3 exactly
              "far": base + 0.2 + rng.normal(0, 0.001, n)}
    plan = make_plan("[constants.default]\neps_in = 0.025\nL_M = 1.0\n",
                     readouts="[readouts.f1]\ntolerance = 0.2\n")
    board = certify.certify(scores, clusters=clusters, plan=plan)
    rad = board.decision("precise", "ref")
    assert rad.eps_out == pytest.approx(0.05) and rad.r == 0.0  # L_M(ε_A + ε_B), declared
    assert rad.decision == "undecided-attribution" and "nuisance radius" in (rad.reason or "")
    assert board.decision("noisy", "ref").decision == "undecided-sampling"
    assert board.decision("far", "ref").decision == "certified"
    assert board.admissibility.source == "declared"


def test_bonferroni_divides_delta_prime_by_the_family_size() -> None:
    scores, clusters = leaderboard({"a": 0.52, "b": 0.5, "c": 0.5})
    full = certify.certify(scores, clusters=clusters, plan=make_plan(SHARED))
    one = certify.certify(scores, clusters=clusters,
                          plan=make_plan(SHARED, head='family = [["a", "b"]]'))
    assert one.family_size == 1 and full.family_size == 3 and len(one.pairs) == 1
    p1, p3 = one.decision("a", "b"), full.decision("a", "b")
    assert p1.se == p3.se and p1.q < p3.q
    r = certify.sampling_radius(scores["a"] - scores["b"], clusters, family_size=3)
    assert p3.q == pytest.approx(r.q[0], abs=1e-14)


def test_too_few_common_tasks_is_an_explicit_decision_never_a_certificate() -> None:
    scores, clusters = leaderboard({"a": 0.9, "b": 0.1, "c": 0.1}, noise=0.001)
    present = {"a": np.arange(50) < 9, "b": np.ones(50, dtype=bool)}
    board = certify.certify(scores, clusters=clusters, plan=make_plan(SHARED),
                            present=present)
    p = board.decision("a", "b")
    assert p.decision == "not-enough-common-tasks" and p.better is None
    assert p.reason == "9 common tasks < min_common_tasks = 10 (failed tasks dropped)"
    assert board.decision("b", "c").decision != "not-enough-common-tasks"
    assert board.rank("a") == (1, 3)
    # Dropping failed tasks counts too.
    failed = {"c": np.arange(50) >= 5}
    board = certify.certify(scores, clusters=clusters, plan=make_plan(SHARED), failed=failed)
    assert board.decision("a", "c").decision == "not-enough-common-tasks"
    assert board.decision("a", "c").n_tasks == 5


def test_a_pair_in_one_cluster_is_not_decided() -> None:
    scores = {"a": np.linspace(0.8, 0.9, 12), "b": np.linspace(0.1, 0.2, 12)}
    board = certify.certify(scores, clusters=["one"] * 12, plan=make_plan(SHARED))
    p = board.pairs[0]
    assert p.decision == "not-enough-common-tasks" and "1 cluster" in (p.reason or "")


def test_the_failure_policy_drops_or_scores_bottom_as_declared() -> None:
    scores, clusters = leaderboard({"a": 0.6, "b": 0.5}, noise=0.02)
    failed = {"a": np.arange(50) % 10 == 0}
    scores["a"][failed["a"]] = np.nan  # a failed task's score is never read
    drop = certify.certify(scores, clusters=clusters, plan=make_plan(SHARED), failed=failed)
    keep = ~failed["a"]
    assert drop.pairs[0].n_tasks == 45
    assert drop.pairs[0].delta == pytest.approx(np.mean(scores["a"][keep] - scores["b"][keep]))
    bottom = certify.certify(scores, clusters=clusters, failed=failed,
                             plan=make_plan(SHARED + '[failure]\npolicy = "score"\nvalue = 0.0'))
    a = np.where(failed["a"], 0.0, scores["a"])
    assert bottom.pairs[0].n_tasks == 50
    assert bottom.pairs[0].delta == pytest.approx(np.mean(a - scores["b"]))
    assert bottom.scores["a"]["f1"] == pytest.approx(a.mean())


def test_a_lower_is_better_readout_is_oriented_and_the_composite_weighs_axes() -> None:
    rng = np.random.default_rng(2)
    n = 40
    clusters = np.arange(n) % 20
    err_a, err_b = rng.uniform(0.1, 0.2, n), rng.uniform(0.4, 0.5, n)
    f1_a, f1_b = rng.uniform(0.5, 0.6, n), rng.uniform(0.5, 0.6, n)
    plan = make_plan(SHARED, readouts=(
        "[readouts.f1]\ntolerance = 0.1\naxis = 'quality'\n"
        "[readouts.err]\ntolerance = 0.1\nbetter = 'lower'\naxis = 'error'\n"))
    board = certify.certify({"a": np.column_stack([f1_a, err_a]),
                             "b": {"f1": f1_b, "err": err_b}}, clusters=clusters, plan=plan)
    p = board.decision("a", "b", "err")
    assert p.delta == pytest.approx(np.mean(err_b - err_a)) and p.better == "a"
    assert board.scores["a"]["err"] == pytest.approx(err_a.mean())  # reported in its units
    assert board.scores["a"]["composite"] == pytest.approx(np.mean(0.5 * f1_a - 0.5 * err_a))
    comp = board.decision("a", "b")
    assert comp.delta == pytest.approx(np.mean(0.5 * (f1_a - f1_b) - 0.5 * (err_a - err_b)))
    assert board.targets == ("composite", "f1", "err") and set(board.decisions) == set(
        board.targets)


def test_the_board_carries_the_plan_hash_and_serialises_to_strict_json() -> None:
    scores, clusters = leaderboard({"a": 0.6, "b": 0.5, "c": 0.5})
    plan = make_plan(SHARED + "[calibration]\nn_resamples = 100\n")
    board = certify.certify(scores, clusters=clusters, plan=plan)
    d = json.loads(json.dumps(board.to_dict(), allow_nan=False))
    assert d["plan_hash"] == plan.hash() == board.admissibility.plan_hash
    assert d["plan"]["readouts"]["f1"]["tolerance"] == 0.05
    assert [s["system"] for s in d["systems"]] == list(board.systems)
    assert d["systems"][0]["rank"] == list(board.rank(board.systems[0]))
    assert {"a", "b", "decision", "delta", "q", "eps_out", "r", "reason", "n_tasks",
            "better", "worse", "margin", "se", "tolerance"} <= set(d["pairs"][0])
    assert [r["rule"] for r in d["ladder"]] == ["R0", "R1", "R2", "R3", "R4", "R5"]
    assert d["calibration"]["n_resamples"] == 100 and "jaccard_mean" in d["calibration"]
    assert set(d["cells"]) == {"f1"} and d["cycles"] == []
    assert d["counts"]["certified"] == len(board.certified())
    assert len(d["scores_hash"]) == 64 and d["input_hashes"] == {}


# ====================================================================== bad input


def test_nan_scores_are_refused_with_the_system_task_and_readout() -> None:
    scores, clusters = leaderboard({"a": 0.6, "b": 0.5})
    scores["b"][7] = np.nan
    with pytest.raises(ValueError, match=r"`scores\['b'\]` is nan at task 't7' \(readout `f1`\)"):
        certify.certify(scores, clusters=clusters, plan=make_plan(SHARED),
                        tasks=[f"t{i}" for i in range(50)])
    # ...but a NaN where the system has no run is never read.
    board = certify.certify(scores, clusters=clusters, plan=make_plan(SHARED),
                            present={"b": np.arange(50) != 7})
    assert board.pairs[0].n_tasks == 49


def test_clusters_must_cover_every_task() -> None:
    scores, clusters = leaderboard({"a": 0.6, "b": 0.5})
    with pytest.raises(ValueError, match="`clusters` has 48 labels for 50 tasks"):
        certify.certify(scores, clusters=clusters[:48], plan=make_plan(SHARED))
    labels: list[Any] = clusters.tolist()
    labels[3] = None
    with pytest.raises(ValueError, match="`clusters` has no label for task 3"):
        certify.certify(scores, clusters=labels, plan=make_plan(SHARED))
    with pytest.raises(ValueError, match="`clusters` is required"):
        certify.certify(scores, plan=make_plan(SHARED))


def test_malformed_scores_are_refused() -> None:
    plan = make_plan(SHARED)
    with pytest.raises(ValueError, match="at least two systems"):
        certify.certify({"a": np.zeros(12)}, clusters=range(12), plan=plan)
    with pytest.raises(ValueError, match=r"`scores\['b'\]` has 11 tasks"):
        certify.certify({"a": np.zeros(12), "b": np.zeros(11)}, clusters=range(12), plan=plan)
    with pytest.raises(ValueError, match=r"must have shape \(n_tasks, 1\)"):
        certify.certify({"a": np.zeros((12, 2)), "b": np.zeros((12, 2))}, clusters=range(12),
                        plan=plan)
    with pytest.raises(ValueError, match=r"missing \['f1'\], unknown \['g'\]"):
        certify.certify({"a": {"g": np.zeros(12)}, "b": np.zeros(12)}, clusters=range(12),
                        plan=plan)
    with pytest.raises(ValueError, match=r"`failed\['a'\]` must be a boolean array"):
        certify.certify({"a": np.zeros(12), "b": np.zeros(12)}, clusters=range(12), plan=plan,
                        failed={"a": np.zeros(12)})
    with pytest.raises(TypeError, match=r"`plan` must be a certify\.Plan"):
        certify.certify({"a": np.zeros(12), "b": np.zeros(12)}, clusters=range(12),
                        plan={"readouts": {}})  # type: ignore[arg-type]


def test_a_plan_missing_a_tolerance_never_reaches_certification() -> None:
    with pytest.raises(ValueError, match="without a `tolerance`"):
        make_plan(readouts="[readouts.f1]\ntolerance = 0.05\n[readouts.g]\nbetter = 'lower'\n")


def test_an_admissibility_decided_under_another_plan_is_refused() -> None:
    scores, clusters = leaderboard({"a": 0.6, "b": 0.5})
    adm = certify.admissibility(None, plan=make_plan(SHARED), systems=["a", "b"])
    with pytest.raises(ValueError, match="decided under another plan"):
        certify.certify(scores, clusters=clusters, admissibility=adm,
                        plan=make_plan(SHARED + "[calibration]\nseed = 1\n"))


# ====================================================================== admissibility


def entry_table(contexts: dict[str, list[Any]], *, backbones: dict[str, str] | None = None,
                window: str = "work") -> certify.EntryTable:
    rows = []
    for system, per_task in contexts.items():
        for i, ctx in enumerate(per_task):
            data = encode(ctx)
            rows.append(certify.Entry(system=system, task=f"t{i}",
                                      entry_hash=hashlib.sha256(data).hexdigest(),
                                      entry_bytes=data,
                                      backbone=(backbones or {}).get(system)))
    return certify.EntryTable(window=window, entries=tuple(rows))


def test_admissibility_takes_no_scores() -> None:
    params = inspect.signature(certify.admissibility).parameters
    assert "scores" not in params and next(iter(params)) == "traces_or_entries"
    assert "score" not in " ".join(f.name for f in
                                   certify.Entry.__dataclass_fields__.values())


def test_equal_entry_hashes_on_every_common_task_make_an_exact_cell() -> None:
    ctx = [{"docs": [i, i + 1]} for i in range(12)]
    adm = certify.admissibility(entry_table({"a": ctx, "b": ctx}), plan=make_plan())
    p = adm.pair("a", "b")
    assert p.status == "exact" and p.n_common == 12
    assert p.eps_in == (0.0, 0.0) and p.r_in == 0.0
    assert p.targets["f1"].eps_out == 0.0 and p.targets["f1"].r == 0.0
    assert "equal on 12 of 12 common tasks" in p.reason and p.admissible("f1")


def test_different_entries_are_measured_by_wasserstein_with_a_hoeffding_radius() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    a = [{"docs": rng.uniform(0, 0.5, 6).tolist()} for _ in range(40)]
    b = [{"docs": (np.asarray(x["docs"]) + rng.uniform(0, 0.02, 6)).tolist()} for x in a]
    plan = make_plan('[conditions]\nentry_feature = "docs"\n'
                     "[constants.default]\nL_M = 0.5\n",
                     readouts="[readouts.f1]\ntolerance = 0.3\nL_s = 0.8\n")
    p = certify.admissibility(entry_table({"a": a, "b": b}), plan=plan).pair("a", "b")
    w = np.mean([scipy_stats.wasserstein_distance(x["docs"], y["docs"])
                 for x, y in zip(a, b, strict=True)])
    r_in = 1.0 * math.sqrt(math.log(1 / 0.05) / (2 * 40))  # one pair: m = 1
    assert p.status == "measured" and p.r_in == pytest.approx(r_in)
    assert max(p.eps_in) == pytest.approx(w) and min(p.eps_in) == 0.0
    f1 = p.targets["f1"]
    expected = bounds.nuisance_radius(L_s=0.8, L_M=(0.5, 0.5), eps_in=(w, 0.0),
                                      entry_matched=(False, True)).value
    assert f1.eps_out == pytest.approx(expected) and f1.r == pytest.approx(0.8 * 0.5 * r_in)
    assert f1.admissible == (f1.eps_out + f1.r <= 0.3)


def test_a_large_entry_mismatch_is_refused_before_any_score() -> None:
    """[LBC] F.3: LiRA's bundle against a self-retrieved one, radius > ε_fair."""
    a = [{"docs": [0.0, 0.05]} for _ in range(20)]
    b = [{"docs": [0.9, 1.0]} for _ in range(20)]
    plan = make_plan('[conditions]\nentry_feature = "docs"\n[constants.default]\nL_M = 0.89\n',
                     readouts="[readouts.f1]\ntolerance = 0.208\nL_s = 0.833\n")
    p = certify.admissibility(entry_table({"lira": a, "auto": b}), plan=plan).pair("lira",
                                                                                   "auto")
    assert p.status == "measured" and not p.admissible("f1")
    assert p.targets["f1"].eps_out == pytest.approx(0.833 * 0.89 * 0.925)
    assert "ε̂_out + r" in (p.targets["f1"].reason or "") and "> ε_fair = 0.208" in (
        p.targets["f1"].reason or "")


def test_differing_entries_without_a_declared_feature_are_refused() -> None:
    a = [{"docs": [i]} for i in range(12)]
    b = [{"docs": [i + 1]} for i in range(12)]
    p = certify.admissibility(entry_table({"a": a, "b": b}), plan=make_plan()).pair("a", "b")
    assert p.status == "refused" and "no `entry_feature`" in p.reason
    shared = certify.admissibility(entry_table({"a": a, "b": b}),
                                   plan=make_plan(SHARED)).pair("a", "b")
    assert shared.status == "refused" and "declares one shared entry, but the entry hashes " \
        "differ on 12 of 12 common tasks" in shared.reason


def test_a_backbone_change_inside_a_scaffold_window_is_refused_with_its_reason() -> None:
    ctx = [{"docs": [i]} for i in range(12)]
    table = entry_table({"a": ctx, "b": ctx, "tulu": ctx},
                        backbones={"a": "qwen3-8b", "b": "qwen3-8b", "tulu": "olmo-2"})
    plan = make_plan('[conditions]\nbackbone = "fixed"\n')
    adm = certify.admissibility(table, plan=plan)
    assert adm.pair("a", "b").status == "exact"
    for other in ("a", "b"):
        p = adm.pair(other, "tulu")
        assert p.status == "refused" and math.isinf(p.targets["f1"].eps_out)
        assert "backbone change" in p.reason and "'tulu' runs olmo-2" in p.reason
        assert "no finite radius" in p.reason
    # As a system window (the backbone part of the system) the same pairs are exact cells.
    adm2 = certify.admissibility(table, plan=make_plan())
    assert adm2.pair("a", "tulu").status == "exact"
    # Unrecorded backbones cannot be checked against a declared fixed backbone.
    p = certify.admissibility(entry_table({"a": ctx, "b": ctx}), plan=plan).pair("a", "b")
    assert p.status == "refused" and "record no meta['backbone']" in p.reason


def test_refused_pairs_are_refused_on_the_board_and_counted_by_the_ladder() -> None:
    ctx = [{"docs": [i]} for i in range(50)]
    table = entry_table({"a": ctx, "b": ctx, "c": ctx, "tulu": ctx},
                        backbones={"a": "q", "b": "q", "c": "q", "tulu": "o"})
    scores, clusters = leaderboard({"a": 0.6, "b": 0.55, "c": 0.5, "tulu": 0.3})
    plan = make_plan('[conditions]\nbackbone = "fixed"\n')
    adm = certify.admissibility(table, plan=plan)
    board = certify.certify(scores, clusters=clusters, plan=plan, admissibility=adm,
                            tasks=[f"t{i}" for i in range(50)])
    tulu = [p for p in board.pairs if "tulu" in (p.a, p.b)]
    assert all(p.decision == "refused" and "backbone change" in (p.reason or "") for p in tulu)
    assert board.rank("tulu") == (1, 4)  # refused pairs certify nothing
    rungs = {r.rule: r for r in board.ladder}
    assert rungs["R0"].out_of == rungs["R3"].out_of == 6
    assert rungs["R4"].out_of == rungs["R5"].out_of == 3
    assert rungs["R3"].decided >= rungs["R4"].decided >= rungs["R5"].decided
    assert any("tulu" in pair for pair in rungs["R3"].pairs)  # the conventional analysis
    assert rungs["R5"].decided == board.counts()["certified"]
    assert rungs["R4"].adds == "3 pairs refused before any score is read"


def test_the_ladder_rungs_are_the_conventional_tests_of_table_2() -> None:
    stats = pytest.importorskip("scipy.stats")
    sm = pytest.importorskip("statsmodels.api")
    scores, clusters = leaderboard({"a": 0.52, "b": 0.5, "c": 0.49, "d": 0.47, "e": 0.47},
                                   noise=0.06, seed=21)
    board = certify.certify(scores, clusters=clusters, calibrate=False,
                            plan=make_plan(SHARED, head='sampling = "cr1"'))  # as in [LBC]
    rungs = {r.rule: r for r in board.ladder}
    names = list(scores)
    r0, r1, r2, r3 = set(), set(), set(), set()
    for i, j in itertools.combinations(range(len(names)), 2):
        a, b = names[i], names[j]
        d = scores[a] - scores[b]
        order = (a, b) if d.mean() > 0 else (b, a)
        if scores[a].mean() != scores[b].mean():
            r0.add((a, b) if scores[a].mean() > scores[b].mean() else (b, a))
        if stats.ttest_rel(scores[a], scores[b]).pvalue < 0.05:
            r1.add(order)
        fit = sm.OLS(d, np.ones(len(d))).fit(
            cov_type="cluster", cov_kwds={"groups": clusters, "use_correction": True},
            use_t=True)
        if fit.pvalues[0] < 0.05:
            r2.add(order)
        if fit.pvalues[0] < 0.05 / 10:
            r3.add(order)
    assert set(rungs["R0"].pairs) == r0 and set(rungs["R1"].pairs) == r1
    assert set(rungs["R2"].pairs) == r2 and set(rungs["R3"].pairs) == r3
    assert set(rungs["R5"].pairs) == set(board.certified()) == r3  # exact cells: R5 = R3
    assert [r.label for r in board.ladder] == ["sorted table", "paired t-test",
                                               "cluster-robust t", "+ Bonferroni",
                                               "+ admissibility test", "+ nuisance radius"]


def test_the_admissibility_decision_does_not_change_when_scores_are_permuted(
        tmp_path: Path) -> None:
    plan = make_plan('[conditions]\nbackbone = "fixed"\n', head='window = "work"')
    rng = np.random.default_rng(0)
    values = {s: rng.uniform(0, 1, 12) for s in ("a", "b", "tulu")}
    for name, perm in (("one", None), ("two", rng.permutation)):
        for s, v in values.items():
            vals = v if perm is None else perm(v)
            for i in range(12):
                record(tmp_path / name, s, f"t{i}", float(vals[i]),
                       backbone="olmo" if s == "tulu" else "qwen")
    first = certify.from_traces(tmp_path / "one", plan=plan)
    second = certify.from_traces(tmp_path / "two", plan=plan)
    assert any(not np.array_equal(first.scores[s], second.scores[s]) for s in first.systems)
    assert first.entries is not None and second.entries is not None
    adm1 = certify.admissibility(first.entries, plan=plan)
    adm2 = certify.admissibility(second.entries, plan=plan)

    def decided(adm: certify.Admissibility) -> dict[str, Any]:
        return {k: v for k, v in adm.to_dict().items() if k != "input_hashes"}  # other files

    assert decided(adm1) == decided(adm2)
    assert {p.status for p in adm1.pairs} == {"exact", "refused"}
    # ... and the paths straight from the traces decide the same.
    assert certify.admissibility(tmp_path / "one", plan=plan).to_dict() == adm1.to_dict()
    b1 = certify.certify(first, plan=plan, calibrate=False)
    b2 = certify.certify(second, plan=plan, calibrate=False)
    for x, y in zip(b1.pairs, b2.pairs, strict=True):
        assert (x.decision == "refused") == (y.decision == "refused")
        assert x.reason == y.reason or x.decision != "refused"
    with pytest.raises(TypeError, match=r"pass `data\.entries`"):
        certify.admissibility(first, plan=plan)  # type: ignore[arg-type]


def test_declared_admissibility_without_entries() -> None:
    plan = make_plan("[constants.default]\nL_M = 0.5\n[constants.systems.a]\neps_in = 0.1\n"
                     "[constants.systems.b]\neps_in = 0.0\n")
    p = certify.admissibility(None, plan=plan, systems=["a", "b", "c"]).pair("a", "b")
    assert p.status == "declared" and p.targets["f1"].eps_out == pytest.approx(0.05)
    assert p.targets["f1"].r == 0.0 and p.admissible("f1")
    q = certify.admissibility(None, plan=plan, systems=["a", "b", "c"]).pair("a", "c")
    assert q.status == "refused" and "declares no `eps_in` for 'c'" in q.reason
    with pytest.raises(ValueError, match="`systems` is required"):
        certify.admissibility(None, plan=plan)


def test_without_assumption_1_every_pair_is_refused() -> None:
    ctx = [{"docs": [i]} for i in range(12)]
    adm = certify.admissibility(entry_table({"a": ctx, "b": ctx}),
                                plan=make_plan("[conditions]\nassumption_1 = false\n"))
    assert adm.pair("a", "b").status == "refused"
    assert "Assumption 1" in adm.pair("a", "b").reason
    assert adm.refused("f1") == [("a", "b", adm.pair("a", "b").reason)]


def test_too_few_common_entries_is_not_enough_common_tasks() -> None:
    ctx = [{"docs": [i]} for i in range(12)]
    table = entry_table({"a": ctx, "b": ctx[:6]})
    adm = certify.admissibility(table, plan=make_plan())
    assert adm.pair("a", "b").status == "insufficient"
    scores, clusters = leaderboard({"a": 0.9, "b": 0.1}, n=12, n_clusters=6)
    board = certify.certify(scores, clusters=clusters, plan=make_plan(), admissibility=adm)
    assert board.pairs[0].decision == "not-enough-common-tasks"
    assert "6 common tasks with entries" in (board.pairs[0].reason or "")


def test_an_entry_key_compares_only_the_declared_part_of_the_entry() -> None:
    a = [{"input": {"docs": [i]}, "config": "greedy"} for i in range(12)]
    b = [{"input": {"docs": [i]}, "config": "explore"} for i in range(12)]
    plain = certify.admissibility(entry_table({"a": a, "b": b}), plan=make_plan(SHARED))
    assert plain.pair("a", "b").status == "refused"
    keyed = certify.admissibility(entry_table({"a": a, "b": b}),
                                  plan=make_plan(SHARED + 'entry_key = "input"'))
    assert keyed.pair("a", "b").status == "exact"
    bad = certify.admissibility(entry_table({"a": a, "b": b}),
                                plan=make_plan(SHARED + 'entry_key = "nope"\n'))
    assert "does not resolve" in bad.pair("a", "b").reason


# ====================================================================== from traces


@al.window("work", entry=lambda context, value, fail: context)
def work(context: dict[str, Any], value: float, fail: bool) -> float:
    if fail:
        raise RuntimeError("the tool crashed")
    al.score("f1", value, channel="direct")
    al.score("f1", value + 10.0, channel="judge")  # another channel: filtered by the plan
    return value


_counter = itertools.count()


def record(folder: Path, system: str, task: str, value: float, *, cluster: str | None = None,
           backbone: str | None = None, fail: bool = False, context: Any = None,
           meta: dict[str, Any] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{system}_{task}_{next(_counter)}.zst"
    m: dict[str, Any] = {"cluster": cluster or f"c-{task}"}
    if backbone is not None:
        m["backbone"] = backbone
    m.update(meta or {})
    try:
        with al.record(path, system=system, seed=0, task=task, meta=m):
            work(context if context is not None else {"task": task}, value, fail)
    except RuntimeError:
        pass
    return path


def test_record_then_from_traces_then_admissibility_then_certify(tmp_path: Path) -> None:
    plan = make_plan('[conditions]\nbackbone = "fixed"\n', head='window = "work"',
                     readouts='[readouts.f1]\ntolerance = 0.05\nchannel = "direct"\n')
    rng = np.random.default_rng(5)
    means = {"a": 0.8, "b": 0.5, "c": 0.5}
    for t in range(14):
        base = rng.normal(0, 0.05)
        for s, mu in means.items():
            for _rep in range(2):
                record(tmp_path, s, f"q{t:02d}", mu + base + rng.normal(0, 0.03),
                       cluster=f"field{t // 2}", backbone="qwen",
                       fail=(s == "c" and t == 3))
    data = certify.from_traces(tmp_path, plan=plan)
    assert data.systems == ("a", "b", "c") and len(data.tasks) == 14
    assert data.clusters[:4] == ("field0", "field0", "field1", "field1")
    assert data.n_runs == 84 and data.n_failed_runs == 2
    assert data.failed["c"][3] and not data.failed["a"].any() and data.present["c"].all()
    assert np.isnan(data.scores["c"][3, 0]) and data.scores["a"].shape == (14, 1)
    assert data.scores["a"].max() < 1.5  # the judge channel's +10 was filtered out
    files = sorted(tmp_path.glob("*.zst"))
    assert data.input_hashes == {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
                                 for p in files}
    assert data.entries is not None
    adm = certify.admissibility(data.entries, plan=plan)
    assert all(p.status == "exact" for p in adm.pairs)
    assert adm.input_hashes == data.input_hashes == data.entries.input_hashes
    board = certify.certify(data, plan=plan, admissibility=adm)
    assert board.input_hashes == data.input_hashes and board.plan_hash == plan.hash()
    assert board.certified() == [("a", "b"), ("a", "c")]
    assert board.decision("a", "c").n_tasks == 13  # the failed task is dropped
    assert board.rank("a") == (1, 1)
    # Without an explicit admissibility, certify decides it from the same entries.
    assert certify.certify(data, plan=plan).to_dict()["pairs"] == board.to_dict()["pairs"]
    with pytest.raises(ValueError, match="`clusters` comes from the CertifyData"):
        certify.certify(data, plan=plan, clusters=list(range(14)))


def test_from_traces_scores_bottom_for_failed_runs_when_declared(tmp_path: Path) -> None:
    plan = make_plan('[failure]\npolicy = "score"\nvalue = 0.0\n', head='window = "work"',
                     readouts='[readouts.f1]\ntolerance = 0.05\nchannel = "direct"\n')
    record(tmp_path, "a", "t0", 0.8)
    record(tmp_path, "a", "t0", 0.6, fail=True)
    record(tmp_path, "b", "t0", 0.5, fail=True)
    data = certify.from_traces(tmp_path, plan=plan)
    assert data.scores["a"][0, 0] == pytest.approx(0.4)  # (0.8 + ⊥) / 2
    assert data.scores["b"][0, 0] == 0.0 and not data.failed["b"][0]


def test_from_traces_selects_runs_by_meta(tmp_path: Path) -> None:
    plan = make_plan(head='select = {ranking = "agent"}',
                     readouts='[readouts.f1]\ntolerance = 0.05\nchannel = "direct"\n')
    record(tmp_path, "a", "t0", 0.8, meta={"ranking": "agent"})
    record(tmp_path, "a", "t0", 0.1, meta={"ranking": "reversed"})
    record(tmp_path, "b", "t0", 0.3, meta={"ranking": "agent"})
    data = certify.from_traces(tmp_path, plan=plan)
    assert data.n_runs == 2 and data.scores["a"][0, 0] == pytest.approx(0.8)
    assert data.entries is None  # no window declared


def test_from_traces_refuses_incomplete_or_inconsistent_records(tmp_path: Path) -> None:
    plan = make_plan(readouts='[readouts.f1]\ntolerance = 0.05\nchannel = "direct"\n'
                              "[readouts.g]\ntolerance = 0.05\n")
    record(tmp_path / "x", "a", "t0", 0.8)
    with pytest.raises(ValueError, match=r"ended normally but has no score for readout\(s\) "
                                         r"\['g'\]"):
        certify.from_traces(tmp_path / "x", plan=plan)
    plan = make_plan(readouts='[readouts.f1]\ntolerance = 0.05\nchannel = "direct"\n')
    record(tmp_path / "y", "a", "t0", 0.8, cluster="c1")
    record(tmp_path / "y", "b", "t0", 0.8, cluster="c2")
    with pytest.raises(ValueError, match="task 't0' is in cluster"):
        certify.from_traces(tmp_path / "y", plan=plan)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        certify.from_traces(tmp_path / "nope.zst", plan=plan)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no"):
        certify.from_traces(tmp_path / "empty", plan=plan)
    path = tmp_path / "notask.zst"
    with al.record(path, system="a", seed=0):
        al.score("f1", 0.5, channel="direct")
    with pytest.raises(ValueError, match="has no task"):
        certify.from_traces(path, plan=plan)


def test_the_example_plan_certifies_variants_of_the_example_agent(tmp_path: Path) -> None:
    """examples/plans/deep_research.toml end to end on the bundled deep-research agent."""
    from agentlog.examples.deep_research import run_study, task_ids
    from agentlog.examples.deep_research.agent import Policy

    systems = {"greedy": Policy(temperature=1.0), "explorer": Policy(temperature=10.0,
                                                                     floor=0.5)}
    run_study(tmp_path, tasks=task_ids(10), rankings=("agent", "reversed"), seeds=(0,),
              systems=systems, evaluate=False)
    plan = certify.Plan.from_toml(Path(__file__).resolve().parents[2] / "examples" / "plans"
                                  / "deep_research.toml")
    data = certify.from_traces(tmp_path, plan=plan)
    assert data.n_runs == 20 and data.systems == ("explorer", "greedy")  # ranking = agent
    assert data.entries is not None
    adm = certify.admissibility(data.entries, plan=plan)
    pair = adm.pair("greedy", "explorer")
    # The retrieval entries differ (each carries its policy), their `pool` parts do not.
    assert len({e.entry_hash for e in data.entries.entries}) == 20
    assert pair.status == "exact" and "`pool` bytes equal on 10 of 10" in pair.reason
    board = certify.certify(data, plan=plan, admissibility=adm)
    assert board.target == "abs_error" and board.pairs[0].n_tasks == 10
    assert board.pairs[0].decision in ("certified", "undecided-sampling")
    assert json.loads(json.dumps(board.to_dict(), allow_nan=False))["plan_hash"] == plan.hash()


def _same_data(a: certify.CertifyData, b: certify.CertifyData) -> None:
    assert (a.systems, a.tasks, a.clusters, a.readouts) == (b.systems, b.tasks, b.clusters,
                                                            b.readouts)
    assert (a.n_runs, a.n_failed_runs, a.input_hashes) == (b.n_runs, b.n_failed_runs,
                                                           b.input_hashes)
    for s in a.systems:  # bit for bit: the same means in the same order
        np.testing.assert_array_equal(a.scores[s], b.scores[s])
        np.testing.assert_array_equal(a.present[s], b.present[s])
        np.testing.assert_array_equal(a.failed[s], b.failed[s])


def test_from_dataset_gives_what_from_traces_gives_and_the_same_board(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    from agentlog.dataset import read_table, to_parquet

    plan = make_plan('[conditions]\nbackbone = "fixed"\n', head='window = "work"',
                     readouts='[readouts.f1]\ntolerance = 0.05\nchannel = "direct"\n')
    rng = np.random.default_rng(11)
    traces = tmp_path / "traces"
    for t in range(10):
        base = rng.normal(0, 0.05)
        for s, mu in {"a": 0.8, "b": 0.5, "c": 0.45}.items():
            for _rep in range(3):
                record(traces, s, f"q{t:02d}", mu + base + rng.normal(0, 0.03),
                       cluster=f"field{t // 2}", backbone="qwen",
                       fail=(s == "c" and t == 3))
    files = sorted(str(p) for p in traces.glob("*.zst"))
    to_parquet(files, tmp_path / "ds", batch_rows=40)
    want = certify.from_traces(files, plan=plan)
    with pytest.raises(ValueError, match=r"pass entries=certify\.EntryTable\.from_traces"):
        certify.from_dataset(tmp_path / "ds", plan=plan)
    got = certify.from_dataset(tmp_path / "ds", plan=plan, entries=want.entries)
    _same_data(got, want)
    assert (certify.certify(got, plan=plan).to_dict()
            == certify.certify(want, plan=plan).to_dict())
    # Tables selected first (here with pyarrow; a DuckDB relation works the same way).
    tables = {k: read_table(tmp_path / "ds", k) for k in ("runs", "scores", "windows")}
    _same_data(certify.from_dataset(tables, plan=plan, entries=want.entries), want)
    with pytest.raises(ValueError, match="lacks the column"):
        certify.from_dataset({**tables, "runs": tables["runs"].drop_columns(["meta"])},
                             plan=plan, entries=want.entries)


def test_from_dataset_takes_duckdb_relations_filtered_in_sql(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    from agentlog.dataset import to_parquet

    plan = make_plan(readouts='[readouts.f1]\ntolerance = 0.05\nchannel = "direct"\n')
    for t in range(4):
        for s, v in (("a", 0.9), ("b", 0.2), ("z", 0.5)):
            record(tmp_path / "traces", s, f"t{t}", v + t / 100)
    to_parquet(tmp_path / "traces", tmp_path / "ds")
    con = duckdb.connect()
    runs = con.sql(f"select * from read_parquet('{tmp_path}/ds/runs/**/*.parquet', "
                   "hive_partitioning = true) where system <> 'z'")
    scores = con.sql(f"select * from read_parquet('{tmp_path}/ds/scores/**/*.parquet', "
                     "hive_partitioning = true)")
    data = certify.from_dataset({"runs": runs, "scores": scores}, plan=plan)
    assert data.systems == ("a", "b") and data.n_runs == 8
    np.testing.assert_allclose(data.scores["a"][:, 0], [0.9, 0.91, 0.92, 0.93], rtol=0,
                               atol=1e-15)


def test_the_first_problem_in_run_order_is_the_one_raised_from_traces_and_dataset(
        tmp_path: Path) -> None:
    """A run lacking a readout (file a.zst) comes before a run without a task (b.zst): the
    readout's message is raised, from the traces and from their dataset; each file alone
    raises its own."""
    pytest.importorskip("pyarrow")
    from agentlog.dataset import to_parquet

    plan = make_plan(readouts='[readouts.f1]\ntolerance = 0.05\nchannel = "direct"\n'
                              "[readouts.g]\ntolerance = 0.05\n")
    with al.record(tmp_path / "a.zst", system="s", task="t0", seed=0):
        al.score("f1", 0.5, channel="direct")  # no g
    with al.record(tmp_path / "b.zst", system="s", seed=1):  # no task
        al.score("f1", 0.5, channel="direct")
        al.score("g", 0.5)
    files = [tmp_path / "a.zst", tmp_path / "b.zst"]
    to_parquet(files, tmp_path / "ds")
    for source in (files, tmp_path / "ds"):
        load = (certify.from_dataset if source == tmp_path / "ds" else certify.from_traces)
        with pytest.raises(ValueError, match=r"a\.zst: run \w+ \(system 's', task 't0'\) "
                                             r"ended normally but has no score.*\['g'\]"):
            load(source, plan=plan)  # type: ignore[operator]
    with pytest.raises(ValueError, match=r"b\.zst: run \w+ has no task"):
        certify.from_traces(files[1], plan=plan)
