"""Audit metrics, the question-clustered bootstrap and λ selection."""

from __future__ import annotations

import numpy as np
import pytest

from agentlog.estimators import cess
from tests.estimators._simulate import simulate

# Two questions, two rankings, two runs each (written out by hand).
EST = np.array([0.5, 0.7, -0.5, -0.3, 0.2, 0.2, 0.0, 0.0])
TRUTH = np.array([0.1] * 4 + [0.0] * 4)
QUESTION = ["a"] * 4 + ["b"] * 4
RANKING = ["pro", "pro", "anti", "anti"] * 2


def test_mae_averages_within_questions_then_weighs_questions_equally() -> None:
    # a: |0.4|,|0.6|,|0.6|,|0.4| -> 0.5 ; b: 0.2,0.2,0,0 -> 0.1 ; mean 0.3
    assert cess.mae(EST, TRUTH, question=QUESTION) == pytest.approx(0.3, abs=1e-12)
    # unequal run counts: question weights stay equal
    assert cess.mae([1.0, 1.0, 1.0, 0.0], [0.0] * 4, question=["a", "a", "a", "b"]) == 0.5


def test_ranking_sensitivity_averages_runs_before_comparing_rankings_eq16() -> None:
    # a: pro mean 0.6, anti mean -0.4 -> 1.0 ; b: 0.2 vs 0.0 -> 0.2 ; S = 0.6
    s = cess.ranking_sensitivity(EST, question=QUESTION, ranking=RANKING, pro="pro",
                                 anti="anti")
    assert s == pytest.approx(0.6, abs=1e-12)
    # comparing rankings run by run would give a different number: eq. 16 averages first
    est2 = EST.copy()
    est2[[0, 1]] = [1.2, 0.0]  # same pro mean 0.6 for question a
    assert cess.ranking_sensitivity(est2, question=QUESTION, ranking=RANKING, pro="pro",
                                    anti="anti") == pytest.approx(0.6, abs=1e-12)


def test_ranking_sensitivity_averages_over_configurations_within_a_question() -> None:
    est = [1.0, 0.0, 0.5, 0.5]
    s = cess.ranking_sensitivity(est, question=["q"] * 4, ranking=["pro", "anti"] * 2,
                                 pro="pro", anti="anti", group=["m1", "m1", "m2", "m2"])
    assert s == pytest.approx(0.5, abs=1e-12)  # (|1 - 0| + |0.5 - 0.5|) / 2


def test_worst_ranking_mae_and_direction_error_by_hand() -> None:
    # a: pro errors 0.4, 0.6 -> 0.5 ; anti 0.6, 0.4 -> 0.5 ; worst 0.5
    # b: pro 0.2 ; anti 0.0 ; worst 0.2 ; mean 0.35
    assert cess.worst_ranking_mae(EST, TRUTH, question=QUESTION,
                                  ranking=RANKING) == pytest.approx(0.35, abs=1e-12)
    # categories at ±0.05: truth a positive, b neutral; estimates a: +,+,-,- ; b: +,+,0,0
    assert cess.direction_error(EST, TRUTH, question=QUESTION) == pytest.approx(0.5)
    assert cess.direction([0.06, 0.05, -0.05, -0.06]).tolist() == [1, 0, 0, -1]


def test_audit_reports_every_metric_with_shared_bootstrap_draws() -> None:
    res = cess.audit({"opened": EST, "half": EST / 2}, TRUTH, question=QUESTION,
                     ranking=RANKING, pro="pro", anti="anti", n_resamples=2_000, seed=3)
    assert res.values["opened"]["ranking_sensitivity"] == pytest.approx(0.6)
    assert res.values["opened"]["worst_ranking_mae"] == pytest.approx(0.35)
    low, high = res.confidence_interval("opened", "mae")
    assert low <= res.values["opened"]["mae"] <= high
    diff, dlow, dhigh = res.difference("opened", "half", "ranking_sensitivity")
    assert diff == pytest.approx(0.3) and dlow <= diff <= dhigh
    again = cess.audit({"opened": EST, "half": EST / 2}, TRUTH, question=QUESTION,
                       ranking=RANKING, pro="pro", anti="anti", n_resamples=2_000, seed=3)
    assert np.array_equal(res.bootstrap.samples, again.bootstrap.samples)  # bit-reproducible


def test_audit_keeps_a_question_without_both_rankings_in_mae_and_direction_error() -> None:
    """Question c ran under "pro" only: it leaves S but not MAE, direction error or the
    worst-ranking MAE, and the result says how many questions each metric used."""
    est = np.concatenate([EST, [0.9, 0.7]])
    truth = np.concatenate([TRUTH, [0.0, 0.0]])
    question = [*QUESTION, "c", "c"]
    ranking = [*RANKING, "pro", "pro"]
    res = cess.audit({"x": est}, truth, question=question, ranking=ranking, pro="pro",
                     anti="anti", n_resamples=500, seed=0)
    # MAE: a 0.5, b 0.1, c 0.8 -> 1.4 / 3 (without c it would be 0.3)
    assert res.values["x"]["mae"] == pytest.approx(1.4 / 3, abs=1e-12)
    assert res.values["x"]["mae"] == pytest.approx(cess.mae(est, truth, question=question))
    # direction error: a 0.5, b 0.5, c 1.0 (truth neutral, both runs positive)
    assert res.values["x"]["direction_error"] == pytest.approx(2.0 / 3, abs=1e-12)
    assert res.values["x"]["worst_ranking_mae"] == pytest.approx((0.5 + 0.2 + 0.8) / 3)
    assert res.values["x"]["ranking_sensitivity"] == pytest.approx(0.6, abs=1e-12)
    assert res.n_questions == 3
    assert res.questions_used == {"mae": 3, "ranking_sensitivity": 2, "direction_error": 3,
                                  "worst_ranking_mae": 3}
    low, high = res.confidence_interval("x", "ranking_sensitivity")
    # every resample of S averages copies of a's 1.0 and b's 0.2
    assert 0.2 - 1e-12 <= low <= 0.6 <= high <= 1.0 + 1e-12
    low, high = res.confidence_interval("x", "mae")
    assert 0.1 - 1e-12 <= low <= 1.4 / 3 <= high <= 0.8 + 1e-12


def test_audit_validates_its_inputs() -> None:
    with pytest.raises(ValueError, match="`estimates` is empty"):
        cess.audit({}, TRUTH, question=QUESTION)
    with pytest.raises(ValueError, match="`pro` and `anti` name the two rankings"):
        cess.audit({"x": EST}, TRUTH, question=QUESTION, ranking=RANKING)
    with pytest.raises(ValueError, match=r"`pro`='up' is not a ranking in the data"):
        cess.ranking_sensitivity(EST, question=QUESTION, ranking=RANKING, pro="up",
                                 anti="anti")
    with pytest.raises(ValueError, match="must be finite; found NaN or inf at run 2"):
        cess.mae([0.0, 0.0, np.nan], [0.0, 0.0, 0.0])


def test_cluster_bootstrap_is_seeded_and_matches_the_closed_form_standard_error() -> None:
    rng = np.random.default_rng(0)
    G = 200
    clusters = np.repeat(np.arange(G), 3)
    values = np.repeat(rng.normal(size=G), 3) + rng.normal(scale=0.1, size=3 * G)
    a = cess.cluster_bootstrap(values, clusters, n_resamples=10_000, seed=7)
    b = cess.cluster_bootstrap(values, clusters, n_resamples=10_000, seed=7)
    assert np.array_equal(a.samples, b.samples)
    assert not np.array_equal(a.samples, cess.cluster_bootstrap(values, clusters,
                                                                n_resamples=10_000,
                                                                seed=8).samples)
    cluster_means = values.reshape(G, 3).mean(axis=1)
    # the bootstrap SE of a mean of G cluster means is sd * sqrt((G-1)/G) / sqrt(G); its
    # Monte Carlo relative error with B = 10,000 is about 1/sqrt(2B) = 0.7%
    closed = cluster_means.std(ddof=0) / np.sqrt(G)
    assert a.standard_error[0] == pytest.approx(closed, rel=0.03)
    assert a.estimate[0] == pytest.approx(cluster_means.mean(), abs=1e-12)


def test_cluster_bootstrap_intervals_cover_at_the_nominal_rate() -> None:
    """300 simulated studies of 60 clusters: the 90% interval's coverage is within three
    binomial standard errors (3 * sqrt(.9 * .1 / 300) = 0.052) of 0.90."""
    rng = np.random.default_rng(1)
    hits = 0
    for i in range(300):
        v = rng.normal(loc=0.5, size=60)
        res = cess.cluster_bootstrap(v, np.arange(60), n_resamples=1_000, seed=i)
        low, high = res.confidence_interval(0.90)
        hits += bool(low[0] <= 0.5 <= high[0])
    assert abs(hits / 300 - 0.90) <= 0.052


def test_tune_lambda_finds_the_grid_minimum_of_tuning_mae() -> None:
    log = simulate(n_pools=300, runs_per_pool=4, seed=2)
    grid = np.linspace(0, 1, 21)
    res = cess.tune_lambda(log.y, log.p, log.s, log.m, log.m_bar, log.n_pool, log.theta_star,
                           budget=4, question=log.pool, grid=grid)
    brute = [cess.mae(cess.estimate(log.y, log.p, log.s, log.m, log.m_bar, log.n_pool,
                                    budget=4, lam=lam).estimate, log.theta_star,
                      question=log.pool) for lam in grid]
    np.testing.assert_allclose(res.mae, brute, atol=1e-12)
    assert res.lam == grid[int(np.argmin(brute))]
    assert 0.0 < res.lam < 1.0  # neither pure prediction nor the raw correction wins here


def test_tune_lambda_breaks_ties_toward_more_shrinkage() -> None:
    nan = np.nan
    res = cess.tune_lambda([[0.0, nan]], [[0.5, nan]], [[1.0, nan]], [[0.0, nan]], 0.0, 2,
                           0.0, budget=2, grid=[0.0, 0.5, 1.0])
    assert res.lam == 0.0 and res.mae.tolist() == [0.0, 0.0, 0.0]


def test_taskwise_lambda_is_empirical_bayes_from_logged_weights_only() -> None:
    nan = np.nan
    # w = 1/(N p s): (1/(10*0.1*1), 1/(10*0.2*0.5)) = (1, 1); v = σ² (1 + 1) / K² = 0.16*2/4
    lam = cess.taskwise_lambda([[0.1, 0.2], [0.5, nan]], [[1.0, 0.5], [1.0, nan]], 10,
                               budget=2, tau2=0.04, sigma2=0.16)
    v = np.array([0.16 * 2 / 4, 0.16 * (1 / 5) ** 2 / 4])
    np.testing.assert_allclose(lam, 0.04 / (0.04 + v), atol=1e-12)
    with pytest.raises(ValueError, match="`tau2` must be a finite variance"):
        cess.taskwise_lambda([[0.1]], [[1.0]], 10, budget=1, tau2=-1.0, sigma2=0.1)


def test_fit_taskwise_prior_uses_tuning_targets_and_residuals() -> None:
    nan = np.nan
    tau2, sigma2 = cess.fit_taskwise_prior([[0.5, 0.1], [0.3, nan]], [[0.1, 0.1], [0.0, nan]],
                                           [0.0, 0.2], [0.2, 0.5], question=["a", "b"])
    assert tau2 == pytest.approx((0.2**2 + 0.3**2) / 2)
    assert sigma2 == pytest.approx((0.4**2 + 0.0 + 0.3**2) / 3)
