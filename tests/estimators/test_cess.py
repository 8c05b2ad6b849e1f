"""CESS estimators against hand computations, Theorem 1 by simulation, limited support."""

from __future__ import annotations

import numpy as np
import pytest

from agentlog import DegenerateDataWarning
from agentlog.estimators import cess
from tests.estimators._simulate import clustered_mean_se, simulate

NAN = float("nan")

# Three trajectories, pool size N = 5, m̄ = 0.1, budget K = 3, written out by hand.
#   A: three rounds; the document with Y = 0.8, m = 0.5 is selected twice (rounds 1 and 3).
#      c = (0, 0.2, 0.5) -> s = (1, 0.8, 0.4); w = 1/(N p s) = (0.5, 1.0, 2.5)
#   B: stopped after one round: w = 1/(5 * 0.1 * 1) = 2
#   C: two rounds with small p: w = (4, 8); the raw correction leaves [-1, 1]
Y = [[0.8, -0.4, 0.8], [0.9, NAN, NAN], [1.0, 1.0, NAN]]
P = [[0.4, 0.25, 0.2], [0.1, NAN, NAN], [0.05, 0.05, NAN]]
S = [[1.0, 0.8, 0.4], [1.0, NAN, NAN], [1.0, 0.5, NAN]]
M = [[0.5, 0.0, 0.5], [0.0, NAN, NAN], [-0.5, -0.5, NAN]]
M_BAR, N_POOL, K = 0.1, 5, 3


def run(**kwargs: object) -> cess.CessResult:
    return cess.estimate(Y, P, S, M, M_BAR, N_POOL, budget=K, **kwargs)  # type: ignore[arg-type]


def test_eq6_raw_dr_ipw_opened_mean_and_diagnostics_by_hand() -> None:
    r = run()
    # A: residuals (0.3, -0.4, 0.3) * w (0.5, 1, 2.5) = (0.15, -0.4, 0.75): sum 0.5
    # B: 0.9 * 2 = 1.8;  C: 1.5 * 4 + 1.5 * 8 = 18
    expected_dr = [0.1 + 0.5 / 3, 0.1 + 1.8 / 3, 0.1 + 18 / 3]
    np.testing.assert_allclose(r.dr_raw, expected_dr, rtol=0, atol=1e-12)
    # IPW: A (0.8*0.5 - 0.4*1 + 0.8*2.5)/3 = 2/3; B 0.9*2/3; C (4 + 8)/3
    np.testing.assert_allclose(r.ipw, [2 / 3, 0.6, 4.0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(r.opened_mean, [0.4, 0.9, 1.0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(r.outcome_regression, [0.1] * 3, rtol=0, atol=1e-12)
    # ESS (sum w)^2 / sum w^2: A 16/7.5, B 1, C 144/80
    np.testing.assert_allclose(r.ess, [16 / 7.5, 1.0, 144 / 80], rtol=0, atol=1e-12)
    np.testing.assert_allclose(r.max_weight, [2.5, 2.0, 8.0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(r.min_ps, [0.08, 0.1, 0.025], rtol=0, atol=1e-12)
    assert r.n_rounds.tolist() == [3, 1, 2]
    assert "not a policy effect" in r.note


def test_eq9_shrink_then_clip_by_hand() -> None:
    r = run(lam=0.5)
    # m̄ + λ(raw − m̄): A 0.1 + 0.5*(0.5/3); B 0.1 + 0.5*0.6 = 0.4; C 0.1 + 0.5*6 = 3.1 -> 1
    np.testing.assert_allclose(r.estimate, [0.1 + 0.25 / 3, 0.4, 1.0], rtol=0, atol=1e-12)


def test_eq13_clip_then_shrink_by_hand() -> None:
    r = run(lam=0.5, order="clip-then-shrink")
    # C: Π[6.1] = 1, then 0.1 + 0.5 * (1 − 0.1) = 0.55
    np.testing.assert_allclose(r.estimate, [0.1 + 0.25 / 3, 0.4, 0.55], rtol=0, atol=1e-12)


def test_eq12_opened_anchor_by_hand() -> None:
    r = run(lam=0.2, order="clip-then-shrink", anchor="opened")
    # ō + 0.2(Π[raw] − ō): A 0.4 + 0.2*(0.1 + 0.5/3 − 0.4); B 0.9 + 0.2*(0.7 − 0.9) = 0.86;
    # C 1 + 0.2*(1 − 1) = 1
    a = 0.4 + 0.2 * (0.1 + 0.5 / 3 - 0.4)
    np.testing.assert_allclose(r.estimate, [a, 0.86, 1.0], rtol=0, atol=1e-12)


def test_lambda_zero_is_outcome_regression_and_one_is_clipped_raw_dr() -> None:
    np.testing.assert_allclose(run(lam=0.0).estimate, [0.1] * 3, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run(lam=1.0).estimate, np.clip(run().dr_raw, -1, 1), atol=1e-12)


def test_per_trajectory_lambda_for_taskwise_cess() -> None:
    r = run(lam=[0.0, 0.5, 1.0])
    np.testing.assert_allclose(r.estimate, [0.1, 0.4, 1.0], rtol=0, atol=1e-12)


def test_a_single_trajectory_may_be_one_dimensional() -> None:
    one = cess.estimate(Y[1], P[1], S[1], M[1], M_BAR, N_POOL, budget=K)
    np.testing.assert_allclose(one.dr_raw, [0.7], atol=1e-12)


def test_columns_beyond_the_budget_are_a_prefix_analysis() -> None:
    r = cess.estimate(Y, P, S, M, M_BAR, N_POOL, budget=1)
    # only round 1: A 0.1 + 0.3*0.5; B 0.1 + 1.8; C 0.1 + 6
    np.testing.assert_allclose(r.dr_raw, [0.25, 1.9, 6.1], atol=1e-12)


def test_eq10_support_interval_by_hand() -> None:
    low, high = cess.support_interval(0.3, 0.25)
    assert low == pytest.approx(0.75 * 0.3 - 0.25, abs=1e-12)
    assert high == pytest.approx(0.75 * 0.3 + 0.25, abs=1e-12)
    low, high = cess.support_interval([0.3, -0.5], [0.0, 1.0], bounds=(-2.0, 3.0))
    np.testing.assert_allclose(low, [0.3, -2.0], atol=1e-12)
    np.testing.assert_allclose(high, [0.3, 3.0], atol=1e-12)


def test_support_from_logged_vectors_counts_candidates_with_positive_probability() -> None:
    support = cess.support_from_vectors(
        [(["a", "b", "c"], [0.5, 0.5, 0.0]), (["c", "d"], [0.0, 1.0])],
        pool=["a", "b", "c", "d", "e"],
    )
    assert support.reachable == frozenset({"a", "b", "d"})
    assert support.n_pool == 5 and support.rho == pytest.approx(0.4)


def test_theorem_1_raw_dr_is_design_unbiased_and_each_weight_is_needed() -> None:
    """Biased selection (favours a high attribute correlated with Y), informative stopping,
    N = 30, K = 4, 20,000 trajectories (2,000 pools x 10 runs). Standard errors are across
    pools (runs of one pool are not independent), as in [SSC] Table 5. Over 40 seeds of
    this design the z-statistic of the full correction had mean -0.03 and sd 1.09, so a
    3-SE bound fails about 0.3% of the time by chance; the seed is fixed (0)."""
    log = simulate(n_pools=2_000, runs_per_pool=10, n_pool=30, budget=4, stop_high=0.5,
                   floor=0.2, seed=0)
    assert (log.s[~np.isnan(log.s)] < 1).any()  # stopping is active
    full = cess.estimate(log.y, log.p, log.s, log.m, log.m_bar, log.n_pool, budget=4)
    bias, se = clustered_mean_se(full.dr_raw - log.theta_star, log.pool)
    assert abs(bias) <= 3 * se, (bias, se)

    uniform_p = np.where(np.isnan(log.p), np.nan, 1 / log.n_pool)
    no_sel = cess.estimate(log.y, uniform_p, log.s, log.m, log.m_bar, log.n_pool, budget=4)
    bias_p, se_p = clustered_mean_se(no_sel.dr_raw - log.theta_star, log.pool)
    assert abs(bias_p) >= 5 * se_p, (bias_p, se_p)

    unit_s = np.where(np.isnan(log.s), np.nan, 1.0)
    no_stop = cess.estimate(log.y, log.p, unit_s, log.m, log.m_bar, log.n_pool, budget=4)
    bias_s, se_s = clustered_mean_se(no_stop.dr_raw - log.theta_star, log.pool)
    assert abs(bias_s) >= 5 * se_s, (bias_s, se_s)

    opened_bias, opened_se = clustered_mean_se(full.opened_mean - log.theta_star, log.pool)
    assert abs(opened_bias) >= 5 * opened_se  # the uncorrected mean is biased here


def test_limited_support_interval_contains_the_target_in_every_pool() -> None:
    """Deterministic selection of the top document: a small part of the pool is reachable;
    the eq. 10 interval around the reachable mean contains θ* in every simulated pool."""
    log = simulate(n_pools=500, runs_per_pool=4, n_pool=30, budget=4, deterministic=True,
                   seed=5)
    assert log.rho.mean() > 0.85  # most of the pool is unreachable
    low, high = cess.support_interval(log.reachable_mean, log.rho)
    assert np.all((low <= log.theta_star) & (log.theta_star <= high))


def test_a_point_estimate_under_limited_support_warns_and_carries_the_interval() -> None:
    with pytest.warns(DegenerateDataWarning, match="targets the reachable mean"):
        r = cess.estimate(Y, P, S, M, M_BAR, N_POOL, budget=K, rho=[0.0, 0.2, 0.0])
    assert r.support_low[1] == pytest.approx(0.8 * r.estimate[1] - 0.2, abs=1e-12)
    assert r.support_high[1] == pytest.approx(0.8 * r.estimate[1] + 0.2, abs=1e-12)
    assert r.support_low[0] == r.support_high[0] == r.estimate[0]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"p": [[0.4, 0.0, 0.2]]}, r"`p` must be in \(0, 1\] on observed rounds; found 0.0 at "
                                   r"trajectory 0, round 2"),
        ({"s": [[1.0, -0.1, 0.4]]}, r"`s` must be in \(0, 1\]"),
        ({"y": [[0.8, NAN, 0.8]]}, r"NaN inside the observed prefix: trajectory 0, round 2"),
        ({"m_chosen": [[0.5, NAN, 0.5]]}, r"`m_chosen` has NaN at trajectory 0, round 2 where "
                                          r"`y` is observed"),
        ({"p": [[0.4, 0.25]]}, r"`p` must have the shape of `y` \(1, 3\); found shape \(1, 2\)"),
        ({"lam": 1.5}, r"`lam` must be in \[0, 1\]; found 1.5"),
        ({"lam": -0.1}, r"`lam` must be in \[0, 1\]"),
        ({"n_pool": 0}, r"`n_pool` must be a positive integer"),
        ({"budget": 0}, r"`budget` must be a positive int"),
        ({"order": "clip"}, r"`order` must be 'shrink-then-clip'"),
        ({"anchor": "zero"}, r"`anchor` must be 'prediction'"),
        ({"m_bar": [0.1, 0.2]}, r"`m_bar` must be a scalar or have shape \(1,\)"),
        ({"y": np.zeros((1, 3, 1))}, r"`y` must have shape \(n_trajectories, K\) or \(K,\)"),
        ({"y": [[0.8, -1.4, 0.8]]}, r"`y` must lie in `bounds` \[-1.0, 1.0\].*found -1.4 at "
                                    r"trajectory 0, round 2"),
        ({"y": [[0.8, -0.4, 1.5]], "bounds": (0.0, 2.0)}, r"`y` must lie in `bounds` \[0.0, "
                                                          r"2.0\].*found -0.4 at trajectory 0, "
                                                          r"round 2"),
        ({"s": [[1.0, 0.8, 0.9]]}, r"`s` must be non-increasing along the rounds .*found s = "
                                   r"0.8 at round 2 and 0.9 at round 3 of trajectory 0"),
    ],
)
def test_bad_input_raises_naming_the_parameter(change: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"y": [Y[0]], "p": [P[0]], "s": [S[0]], "m_chosen": [M[0]],
                               "m_bar": M_BAR, "n_pool": N_POOL, "budget": K}
    args.update(change)
    with pytest.raises(ValueError, match=message):
        cess.estimate(**args)  # type: ignore[arg-type]


def test_an_empty_set_of_trajectories_is_an_error() -> None:
    with pytest.raises(ValueError, match="holds no trajectories"):
        cess.estimate(np.empty((0, 3)), np.empty((0, 3)), np.empty((0, 3)), np.empty((0, 3)),
                      0.0, 5, budget=3)


def test_a_trajectory_that_opened_nothing_warns_and_falls_back_to_the_prediction() -> None:
    with pytest.warns(DegenerateDataWarning, match="opened no document"):
        r = cess.estimate([[NAN, NAN]], [[NAN, NAN]], [[NAN, NAN]], [[NAN, NAN]], 0.2, 5,
                          budget=2)
    assert np.isnan(r.opened_mean[0]) and r.dr_raw[0] == 0.2


def test_the_opened_anchor_of_a_trajectory_that_opened_nothing_is_the_prediction() -> None:
    """The warning's fallback is what happens: eq. 12 with no ō gives m̄, not NaN."""
    y = [[0.5, NAN], [NAN, NAN]]
    p = [[0.2, NAN], [NAN, NAN]]
    m = [[0.1, NAN], [NAN, NAN]]
    with pytest.warns(DegenerateDataWarning, match="the opened anchor of eq. 12 falls back "
                                                   "to m̄ there"):
        r = cess.estimate(y, p, [[1.0, NAN], [NAN, NAN]], m, 0.2, 5, budget=2, lam=0.5,
                          anchor="opened")
    assert r.estimate[1] == 0.2
    # the row that opened something still anchors on its Opened Mean: Π[ō + λ(Π[raw] − ō)]
    raw = 0.2 + (0.5 - 0.1) / (5 * 0.2) / 2
    assert r.estimate[0] == pytest.approx(0.5 + 0.5 * (raw - 0.5), abs=1e-12)


def test_the_opened_anchor_with_rho_gives_the_support_interval_of_the_fallback() -> None:
    """With ``rho=`` the empty trajectory's interval is built around m̄ (no `theta_plus`
    error the caller never passed)."""
    with pytest.warns(DegenerateDataWarning, match="opened no document"):
        r = cess.estimate([[NAN]], [[NAN]], [[NAN]], [[NAN]], 0.2, 5, budget=1,
                          anchor="opened", rho=0.0)
    assert r.estimate[0] == r.support_low[0] == r.support_high[0] == 0.2


@pytest.mark.parametrize(
    ("vectors", "message"),
    [
        ([(["a", "b"], [0.5, 0.5]), (["a", "b", "c"], [1.0, 1.0, 1.0])],
         r"`vectors` item 1: a logged probability vector must sum to 1 within 1e-06; found "
         r"sum 3.0"),
        ([(["a", "b"], [1.5, -0.5])], r"`vectors` item 0: probabilities must be non-negative; "
                                       r"found -0.5 for id 'b'"),
        ([(["a", "b"], [1.0, NAN])], r"`vectors` item 0: probabilities must be finite; found "
                                      r"nan for id 'b'. A NaN is not an unreachable candidate"),
        ([(["a", "b"], [1.0])], r"`vectors` item 0: each logged vector must have one "
                                 r"probability per id"),
    ],
)
def test_support_from_vectors_refuses_what_select_would_not_log(
        vectors: list[tuple[list[str], list[float]]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cess.support_from_vectors(vectors)


def test_the_result_records_a_hash_of_its_inputs() -> None:
    assert run().inputs_hash == run().inputs_hash
    assert run().inputs_hash != cess.estimate(Y, P, S, M, 0.2, N_POOL, budget=K).inputs_hash
