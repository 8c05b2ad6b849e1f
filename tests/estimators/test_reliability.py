"""Reliability statistics ([DMC] §4.3–4.4) against the paper's numbers, closed forms,
scipy and seeded simulations."""

from __future__ import annotations

import doctest
import math
import subprocess
import sys
import warnings

import numpy as np
import pytest
from scipy import stats

from agentlog import DegenerateDataWarning
from agentlog.estimators import reliability
from agentlog.estimators import reliability as public

# Most tests here pin statistics of a few runs, not interval coverage: the small-sample
# coverage warning is asserted by its own tests below.
pytestmark = pytest.mark.filterwarnings(
    "ignore:fewer than .* runs.*coverage study:agentlog.DegenerateDataWarning")

GPT4O_T3 = [0, 0, 1, 0, 0, 0, 0, 1, 1, 1]  # [DMC] §5.1: GPT-4o per-seed F1 on T3 dedup


def cvar_rockafellar_uryasev(x: np.ndarray, alpha: float) -> float:
    """max_c {c − E[(c − X)+]/α}: concave piecewise linear in c, maximal at a sample point."""
    c = np.sort(x)[:, None]
    return float((c[:, 0] - np.maximum(c - x[None, :], 0).mean(axis=1) / alpha).max())


# ------------------------------------------------------------------------ paper's numbers


def test_gpt4o_dedup_vector_gives_the_papers_mean_worst_cvar_and_reliability() -> None:
    r = reliability.summary(GPT4O_T3, alpha=0.2, tau=0.9)
    assert (r.mean, r.worst, r.cvar, r.reliability, r.n) == (0.4, 0.0, 0.0, 0.4, 10)


def test_reliability_counts_runs_at_the_threshold_as_clearing_it() -> None:
    assert reliability.summary([0.9, 0.89, 1.0, 0.5], tau=0.9).reliability == 0.5


# ------------------------------------------------------------------------------- CVaR


@pytest.mark.parametrize("n", [1, 3, 7, 11, 25, 51, 99])
@pytest.mark.parametrize("alpha", [0.013, 0.1, 0.2, 0.25, 1 / 3, 0.5, 0.77, 1.0])
def test_cvar_equals_the_rockafellar_uryasev_form_on_random_odd_samples(
        n: int, alpha: float) -> None:
    rng = np.random.default_rng(1000 * n + int(alpha * 1000))
    x = np.round(rng.beta(0.7, 0.5, size=n), 2)  # rounded: ties, like per-seed F1 scores
    with np.errstate(all="ignore"):
        if n == 1:
            with pytest.warns(DegenerateDataWarning):
                r = reliability.summary(x, alpha=alpha, n_resamples=2)
        else:
            r = reliability.summary(x, alpha=alpha, n_resamples=2)
    assert r.cvar == pytest.approx(cvar_rockafellar_uryasev(x, alpha), abs=1e-9)


def test_cvar_puts_fractional_weight_on_the_boundary_value() -> None:
    # αn = 1.5: the worst run with weight 1 and the second worst with weight 0.5.
    r = reliability.summary([5.0, 1.0, 4.0, 2.0, 3.0], alpha=0.3)
    assert r.cvar == pytest.approx((1.0 + 0.5 * 2.0) / 1.5, abs=1e-12)


def test_cvar_at_alpha_one_is_the_mean_and_at_tiny_alpha_the_worst_case() -> None:
    x = np.random.default_rng(3).random(31)
    assert reliability.summary(x, alpha=1.0).cvar == pytest.approx(x.mean(), abs=1e-12)
    assert reliability.summary(x, alpha=1e-6).cvar == pytest.approx(x.min(), abs=1e-12)


# ---------------------------------------------------------------------------- bootstrap


def test_bootstrap_interval_is_bit_reproducible_and_moves_with_the_seed() -> None:
    x = np.random.default_rng(4).random(50)
    a = reliability.summary(x, seed=7)
    b = reliability.summary(x, seed=7)
    assert np.array_equal(a.bootstrap_distribution, b.bootstrap_distribution)
    assert a.confidence_interval() == b.confidence_interval()
    assert a.confidence_interval() != reliability.summary(x, seed=8).confidence_interval()
    assert a.n_resamples == 2000


def test_bootstrap_standard_error_matches_the_plug_in_se_within_monte_carlo_error() -> None:
    x = np.random.default_rng(5).normal(size=40)
    r = reliability.summary(x, n_resamples=20_000, seed=1)
    plug_in = x.std(ddof=0) / math.sqrt(x.size)
    # The bootstrap SD of B means has relative Monte Carlo error about 1/√(2B).
    assert abs(r.standard_error / plug_in - 1) < 4 / math.sqrt(2 * 20_000)


def test_percentile_interval_covers_the_true_mean_at_the_nominal_rate() -> None:
    rng = np.random.default_rng(6)
    reps, n = 400, 50
    covered = 0
    for rep in range(reps):
        x = rng.beta(2, 5, size=n)  # true mean 2/7
        low, high = reliability.summary(x, n_resamples=1000, seed=rep).confidence_interval()
        covered += low <= 2 / 7 <= high
    # Percentile intervals undercover slightly at n = 50; allow 3 SE of the binomial.
    se = math.sqrt(0.95 * 0.05 / reps)
    assert 0.95 - 0.01 - 3 * se <= covered / reps <= 0.95 + 3 * se


def test_the_percentile_interval_is_the_percentile_of_the_bootstrap_means() -> None:
    r = reliability.summary(np.random.default_rng(7).random(30), method="percentile")
    low, high = r.confidence_interval(confidence_level=0.9)
    assert (low, high) == tuple(np.quantile(r.bootstrap_distribution, [0.05, 0.95]))
    basic = r.confidence_interval(confidence_level=0.9, method="basic")
    assert basic == (2 * r.mean - high, 2 * r.mean - low)


def test_bca_is_the_default_and_its_pieces_are_closed_forms_and_scipys() -> None:
    """â is the jackknife's closed form, ẑ0 the normal quantile of the share of resamples
    below the mean (ties ½), and the interval the quantiles at the BCa levels they give:
    what ``scipy.stats.bootstrap`` computes from the same bootstrap distribution (the
    result, like scipy's ``BootstrapResult``, is passed as ``bootstrap_result`` with no
    new resamples)."""
    from scipy.special import ndtr, ndtri

    x = np.random.default_rng(3).lognormal(size=25)
    with pytest.warns(DegenerateDataWarning, match=r"25 runs: the scores are skewed"):
        r = reliability.summary(x)
    assert r.method == "BCa"
    jack = np.array([np.delete(x, i).mean() for i in range(x.size)])
    u = (x.size - 1) * (jack.mean() - jack)
    a_hat = (u ** 3).sum() / (6 * (u ** 2).sum() ** 1.5)
    assert r.acceleration == pytest.approx(a_hat, rel=1e-12)
    b = np.asarray(r.bootstrap_distribution)
    z0 = ndtri(((b < r.mean).mean() + (b <= r.mean).mean()) / 2)
    levels = [ndtr(z0 + (z0 + z) / (1 - a_hat * (z0 + z))) for z in ndtri([0.025, 0.975])]
    low, high = r.confidence_interval(0.95)
    assert (low, high) == pytest.approx(tuple(np.quantile(b, levels)), rel=1e-12)
    theirs = stats.bootstrap((x,), np.mean, n_resamples=0, bootstrap_result=r,
                             method="BCa", confidence_level=0.95).confidence_interval
    assert (low, high) == pytest.approx((theirs.low, theirs.high), rel=1e-12)


def test_bca_agrees_with_scipy_bootstrap_within_monte_carlo_error() -> None:
    """Independent resamples (ours and scipy's): the endpoints differ by Monte Carlo error
    only, whose sd is √(q(1−q)/B)/f(x_q) per interval, f the bootstrap density near the
    endpoint (normal approximation: φ(z_q)/se); the tolerance is 4 sd of the difference."""
    x = np.random.default_rng(11).beta(2.0, 0.7, size=40)
    B = 20_000
    ours = reliability.summary(x, n_resamples=B, seed=5).confidence_interval(0.95)
    theirs = stats.bootstrap((x,), np.mean, method="BCa", n_resamples=B,
                             rng=np.random.default_rng(6)).confidence_interval
    se = x.std(ddof=1) / np.sqrt(x.size)
    q = 0.025
    sd_endpoint = np.sqrt(q * (1 - q) / B) * se / stats.norm.pdf(stats.norm.ppf(q))
    tol = 4 * np.sqrt(2) * sd_endpoint
    assert abs(ours.low - theirs.low) <= tol, (ours, theirs, tol)
    assert abs(ours.high - theirs.high) <= tol, (ours, theirs, tol)


def test_the_default_interval_covers_as_the_readme_table_says() -> None:
    """The README's coverage study at n = 30, beta(2, 0.7) scores: BCa covered 0.934
    (2,000 trials). 1,000 fresh trials must agree within 3 Monte Carlo standard errors of
    the difference, and BCa must cover more than the percentile interval on right-skewed
    lognormal scores at n = 10 (0.812 vs 0.780 in the study; 2,000 paired trials, so the
    test uses the discordant pairs' standard error)."""
    trials, n = 1_000, 30
    rng = np.random.default_rng(2026)
    truth = 2.0 / 2.7
    groups = np.repeat(np.arange(trials), n)
    with warnings.catch_warnings():  # skewed trials warn; the coverage is what is tested
        warnings.simplefilter("ignore", DegenerateDataWarning)
        res = reliability.summary(rng.beta(2.0, 0.7, size=trials * n), groups=groups,
                                  seed=1)
    low, high = res.confidence_interval(0.95)
    coverage = float(np.mean((low <= truth) & (truth <= high)))
    se = np.sqrt(0.934 * 0.066 / trials + 0.934 * 0.066 / 2_000)
    assert abs(coverage - 0.934) <= 3 * se, coverage

    trials, n = 2_000, 10
    groups = np.repeat(np.arange(trials), n)
    res = reliability.summary(rng.lognormal(size=trials * n), groups=groups, seed=1)
    truth = float(np.exp(0.5))
    hits = {}
    for m in ("BCa", "percentile"):
        lo, hi = res.confidence_interval(0.95, method=m)  # type: ignore[arg-type]
        hits[m] = (lo <= truth) & (truth <= hi)
    diff = float(np.mean(hits["BCa"]) - np.mean(hits["percentile"]))
    discordant = float(np.mean(hits["BCa"] != hits["percentile"]))
    # over six seeds of this check the difference was 2.7 to 5.4 of these standard errors
    assert diff > 2 * np.sqrt(discordant / trials), (diff, discordant)


@pytest.mark.filterwarnings("default")
def test_groups_below_the_coverage_threshold_warn_with_the_study_in_the_message() -> None:
    limit = reliability.MIN_RUNS_FOR_COVERAGE["BCa"]
    with pytest.warns(DegenerateDataWarning, match=rf"fewer than {limit} runs: the 95% BCa "
                                                   r"bootstrap interval of the mean covered "
                                                   r"less than 92%"):
        reliability.summary(np.arange(limit - 1, dtype=float))
    with pytest.warns(DegenerateDataWarning, match=r"in 1 group\(s\), e.g. 'b' with 3 runs"):
        reliability.summary(np.arange(limit + 3, dtype=float),
                            groups=["a"] * limit + ["b"] * 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reliability.summary(np.arange(limit, dtype=float))  # at the threshold: silent


def test_an_unknown_interval_method_is_named() -> None:
    with pytest.raises(ValueError, match=r"`method` must be one of 'percentile', 'basic', "
                                         r"'BCa' \(scipy.stats.bootstrap's names\); found "
                                         r"'bca'"):
        reliability.summary([0.1, 0.2, 0.3], method="bca")  # type: ignore[call-overload]
    r = reliability.summary([0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="`method` must be one of"):
        r.confidence_interval(method="t")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------- groups


def long_table(n_models: int = 3, n_tasks: int = 4, runs: int = 10, seed: int = 0
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    model = np.repeat([f"m{i}" for i in range(n_models)], n_tasks * runs)
    task = np.tile(np.repeat([f"T{j}" for j in range(n_tasks)], runs), n_models)
    scores = np.round(rng.beta(2, 1, size=model.size), 2)
    perm = rng.permutation(model.size)  # a long table is in no particular order
    return scores[perm], model[perm], task[perm]


def test_grouped_summary_per_model_and_task_equals_one_summary_per_group() -> None:
    scores, model, task = long_table()
    g = reliability.summary(scores, groups=(model, task), alpha=0.3, tau=0.8, seed=3)
    assert len(g) == 12 and g.names == ("group_0", "group_1")
    for key in g:
        mask = (model == key[0]) & (task == key[1])
        one = reliability.summary(scores[mask], alpha=0.3, tau=0.8, seed=3)
        got = g[key]
        assert (got.mean, got.worst, got.cvar, got.reliability, got.n) == pytest.approx(
            (one.mean, one.worst, one.cvar, one.reliability, one.n), abs=1e-12)
        # Bit-identical: a group's draws depend only on its size and the seed.
        assert np.array_equal(got.bootstrap_distribution, one.bootstrap_distribution)
        assert got.inputs_hash == one.inputs_hash


def test_a_groups_interval_does_not_change_when_other_groups_are_added() -> None:
    scores, model, _ = long_table()
    full = reliability.summary(scores, groups=model)
    keep = model != "m2"
    part = reliability.summary(scores[keep], groups=model[keep])
    assert full["m0"].confidence_interval() == part["m0"].confidence_interval()


def test_grouped_summary_accepts_named_columns_and_gives_table_rows() -> None:
    scores, model, task = long_table(2, 2, 5)
    g = reliability.summary(scores, groups={"model": model, "task": task})
    rows = g.table()
    assert [(r["model"], r["task"]) for r in rows] == list(g.groups)
    assert set(rows[0]) == {"model", "task", "n", "mean", "worst", "cvar", "reliability",
                            "ci_low", "ci_high"}
    low, high = g.confidence_interval()
    assert rows[1]["ci_low"] == low[1] and rows[1]["ci_high"] == high[1]
    assert g["m1", "T0"].n == 5


def test_grouped_summary_with_one_label_column_keys_by_the_label() -> None:
    g = reliability.summary([1.0, 0.0, 0.5, 0.5], groups=["b", "a", "b", "a"])
    assert list(g) == ["a", "b"] and g["b"].worst == 0.5
    with pytest.raises(KeyError, match="no group 'c'"):
        g["c"]


def test_a_single_named_column_keys_by_its_labels() -> None:
    g = reliability.summary([1.0, 0.0, 0.5, 0.5], groups={"model": ["b", "a", "b", "a"]})
    assert list(g) == ["a", "b"] and g.table()[1] == {**g.table()[1], "model": "b"}


def test_ragged_groups_each_get_their_own_draw_matrix() -> None:
    rng = np.random.default_rng(15)
    sizes = rng.integers(2, 300, size=40)  # both sides of the 128-run switch
    labels = np.repeat(np.arange(40), sizes)
    x = rng.random(labels.size)
    g = reliability.summary(x, groups=labels, n_resamples=50)
    for i in (0, int(np.argmax(sizes)), int(np.argmin(sizes))):
        one = reliability.summary(x[labels == i], n_resamples=50)
        assert np.array_equal(g[i].bootstrap_distribution, one.bootstrap_distribution)
        assert g[i].n == sizes[i]


def test_single_run_group_warns_degenerate() -> None:
    with pytest.warns(DegenerateDataWarning, match="single run"):
        reliability.summary([0.1, 0.2, 0.3], groups=["a", "a", "b"])


# ------------------------------------------------------------------------- Cliff's delta


def test_unpaired_delta_equals_2u_over_mn_minus_1_from_mannwhitneyu_with_ties() -> None:
    rng = np.random.default_rng(8)
    for m, n in [(5, 7), (12, 9), (30, 41)]:
        a = np.round(rng.random(m), 1)
        b = np.round(rng.random(n) * 0.9, 1)
        u = stats.mannwhitneyu(a, b).statistic
        r = reliability.cliffs_delta(a, b, paired=False, n_resamples=10)
        assert r.delta == pytest.approx(2 * u / (m * n) - 1, abs=1e-12)


def test_paired_delta_is_the_net_share_of_positive_differences() -> None:
    a = [0.9, 0.8, 0.5, 0.7, 0.7]
    b = [0.5, 0.8, 0.6, 0.2, 0.1]  # differences +, 0, −, +, +
    r = reliability.cliffs_delta(a, b)
    assert r.delta == pytest.approx((3 - 1) / 5) and r.statistic == r.delta
    assert r.mean_difference == pytest.approx(np.mean(np.subtract(a, b)))


@pytest.mark.parametrize("statistic", ["mean_difference", "delta"])
def test_sign_flip_pvalue_equals_scipys_exact_permutation_test(statistic: str) -> None:
    rng = np.random.default_rng(9)
    for n in (5, 9, 14):
        a = np.round(rng.random(n), 2)
        b = np.round(a - 0.1 + 0.3 * rng.random(n), 2)

        def stat(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
            d = x - y
            return np.mean(d if statistic == "mean_difference" else np.sign(d), axis=axis)

        ref = stats.permutation_test((a, b), stat, permutation_type="samples",
                                     n_resamples=np.inf, vectorized=True)
        r = reliability.cliffs_delta(a, b, pvalue_statistic=statistic)  # type: ignore[arg-type]
        assert r.pvalue_method == "exact" and r.n_permutations == 2 ** n
        assert r.pvalue == pytest.approx(ref.pvalue, abs=1e-12)


@pytest.mark.parametrize("statistic", ["mean_difference", "delta"])
def test_unpaired_permutation_pvalue_equals_scipys_exact_permutation_test(
        statistic: str) -> None:
    rng = np.random.default_rng(10)
    a = np.round(rng.random(6) + 0.2, 1)
    b = np.round(rng.random(8), 1)

    def stat(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        if statistic == "mean_difference":
            return np.mean(x, axis=axis) - np.mean(y, axis=axis)
        s = np.sign(x[..., :, None] - y[..., None, :])
        return s.mean(axis=(-1, -2))

    ref = stats.permutation_test((a, b), stat, n_resamples=np.inf, vectorized=True)
    r = reliability.cliffs_delta(a, b, paired=False,
                                 pvalue_statistic=statistic)  # type: ignore[arg-type]
    assert r.pvalue_method == "exact" and r.n_permutations == math.comb(14, 6)
    assert r.pvalue == pytest.approx(ref.pvalue, abs=1e-12)


def test_monte_carlo_sign_flip_pvalue_is_within_its_standard_error_of_the_exact_one() -> None:
    rng = np.random.default_rng(11)
    a = rng.normal(0.3, 1, size=18)
    b = rng.normal(0.0, 1, size=18)
    exact = stats.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis),
                                   permutation_type="samples", n_resamples=np.inf,
                                   vectorized=True).pvalue
    # 2^18 sign vectors exceed the enumeration limit: seeded Monte Carlo.
    r = reliability.cliffs_delta(a, b, n_permutations=20_000, seed=2)
    assert r.pvalue_method == "monte carlo"
    assert abs(r.pvalue - exact) < 4 * math.sqrt(exact * (1 - exact) / 20_000) + 1e-4


def test_delta_bootstrap_is_seeded_and_centred_on_delta() -> None:
    rng = np.random.default_rng(12)
    a, b = rng.random(40) + 0.2, rng.random(40)
    r1 = reliability.cliffs_delta(a, b, seed=5)
    r2 = reliability.cliffs_delta(a, b, seed=5)
    assert np.array_equal(r1.bootstrap_distribution, r2.bootstrap_distribution)
    assert r1.pvalue == r2.pvalue
    low, high = r1.confidence_interval()
    assert low <= r1.delta <= high
    # The bootstrap mean of a sample mean of signs is unbiased: within 4 Monte Carlo SE.
    se = r1.bootstrap_distribution.std(ddof=1) / math.sqrt(r1.n_resamples)
    assert abs(r1.bootstrap_distribution.mean() - r1.delta) < 4 * se
    u = reliability.cliffs_delta(a, b, paired=False, seed=5)
    assert u.confidence_interval()[0] <= u.delta <= u.confidence_interval()[1]


def test_paired_delta_with_all_differences_zero_warns_and_gives_p_one() -> None:
    with pytest.warns(DegenerateDataWarning, match="zero"):
        r = reliability.cliffs_delta([0.5, 0.7], [0.5, 0.7])
    assert (r.delta, r.pvalue) == (0.0, 1.0)


# ----------------------------------------------------------------------------------- pass^k


def test_pass_hat_k_matches_the_tau_bench_formula() -> None:
    successes = [0, 1, 3, 5, 8, 8]
    trials = [8, 8, 8, 8, 8, 8]
    for k in range(1, 9):
        expected = np.mean([math.comb(c, k) / math.comb(8, k) for c in successes])
        r = reliability.pass_hat_k(successes, trials, k)
        assert r.estimate == pytest.approx(expected, abs=1e-12)
    assert reliability.pass_hat_k(successes, 8, 1).estimate == pytest.approx(
        np.mean(successes) / 8)


def test_pass_hat_k_matches_a_subsampling_monte_carlo_within_its_standard_error() -> None:
    rng = np.random.default_rng(13)
    n, k, draws = 10, 3, 20_000
    successes = rng.integers(0, n + 1, size=6)
    outcomes = [np.r_[np.ones(c), np.zeros(n - c)] for c in successes]
    # Draw a task and k of its trials without replacement; pass iff all k succeed.
    tasks = rng.integers(0, 6, size=draws)
    picks = np.argsort(rng.random((draws, n)), axis=1)[:, :k]
    passed = np.array([outcomes[t][p].all() for t, p in zip(tasks, picks, strict=True)])
    p_hat = passed.mean()
    se = math.sqrt(p_hat * (1 - p_hat) / draws)
    assert abs(reliability.pass_hat_k(successes, n, k).estimate - p_hat) < 4 * se


# ------------------------------------------------------------------------------- record F1


TRUTH = [f"T3-{i:06d}" for i in range(10)]


def test_record_f1_scores_the_exact_set_1_and_the_fabricated_set_0() -> None:
    exact = reliability.record_f1(TRUTH, TRUTH)
    assert (exact.precision, exact.recall, exact.f1) == (1.0, 1.0, 1.0)
    fabricated = reliability.record_f1([f"fake-{i}" for i in range(10)], TRUTH)
    assert (fabricated.f1, fabricated.n_fabricated) == (0.0, 10)


def test_record_f1_duplicates_lower_precision_only() -> None:
    r = reliability.record_f1(TRUTH + TRUTH[:5], TRUTH)
    assert r.recall == 1.0 and r.precision == pytest.approx(10 / 15)
    assert r.f1 == pytest.approx(2 * (10 / 15) / (1 + 10 / 15))
    assert (r.n_submitted, r.n_correct, r.n_duplicates, r.n_fabricated) == (15, 10, 5, 0)


def test_record_f1_reads_record_mappings_and_counts_omissions_against_recall() -> None:
    rows = [{"id": t, "value": 1.0} for t in TRUTH[:4]] + [{"id": "TOTAL", "value": 4.0}]
    r = reliability.record_f1(rows, TRUTH)
    assert (r.precision, r.recall, r.n_fabricated) == (0.8, 0.4, 1)
    assert reliability.record_f1([], TRUTH).f1 == 0.0


# ------------------------------------------------------------ gap and degradation curve


def test_reliability_gap_without_levels_is_mean_minus_worst() -> None:
    g = reliability.reliability_gap(GPT4O_T3)
    assert (g.gap, g.static_mean, g.hardest_worst) == (0.4, 0.4, 0.0)


def test_reliability_gap_is_easiest_level_mean_minus_hardest_level_worst() -> None:
    scores = [1.0, 0.9, 0.8, 0.7, 0.6, 0.1]
    level = ["easy", "easy", "mid", "mid", "hard", "hard"]
    g = reliability.reliability_gap(scores, level, levels=["easy", "mid", "hard"])
    assert g.gap == pytest.approx(0.95 - 0.1)
    assert (g.static_level, g.hardest_level) == ("easy", "hard")
    pooled = reliability.reliability_gap(scores, level, levels=["easy", "mid", "hard"],
                                         baseline="pooled")
    assert pooled.gap == pytest.approx(np.mean(scores) - 0.1)


def test_degradation_curve_gives_per_level_statistics_and_the_gap_per_group() -> None:
    rng = np.random.default_rng(14)
    model = np.repeat(["a", "b"], 60)
    level = np.tile(np.repeat([1, 2, 3], 20), 2)
    scores = np.clip(rng.normal(1.0 - 0.2 * level, 0.1), 0, 1)
    c = reliability.degradation_curve(scores, level, groups=model, n_resamples=200)
    assert c.levels == (1, 2, 3) and c.groups == ("a", "b") and c.mean.shape == (2, 3)
    for g, m in enumerate(["a", "b"]):
        for j, lv in enumerate([1, 2, 3]):
            cell = scores[(model == m) & (level == lv)]
            assert c.mean[g, j] == pytest.approx(cell.mean(), abs=1e-12)
            assert c.worst[g, j] == cell.min()
        gap = reliability.reliability_gap(scores[model == m], level[model == m])
        assert c.gap[g] == pytest.approx(gap.gap, abs=1e-12)
    assert len(c.table()) == 6 and c.gap_table()[1]["group"] == "b"
    assert (np.diff(c.mean, axis=1) < 0).all()  # it degrades


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize("alpha", [0, -0.1, 1.5, float("nan"), "0.2"])
def test_alpha_outside_zero_one_is_rejected_naming_alpha(alpha: object) -> None:
    with pytest.raises(ValueError, match="`alpha` must be in \\(0, 1\\]"):
        reliability.summary([0.1, 0.2], alpha=alpha)  # type: ignore[arg-type]


def test_nan_scores_are_rejected_naming_the_parameter() -> None:
    with pytest.raises(ValueError, match="`scores` must be finite; found nan at run 1"):
        reliability.summary([0.1, float("nan")])
    with pytest.raises(ValueError, match="`a` must be finite"):
        reliability.cliffs_delta([float("nan"), 1.0], [0.0, 1.0])
    with pytest.raises(ValueError, match="`scores` must be finite"):
        reliability.degradation_curve([0.1, float("inf")], [1, 2])


def test_mismatched_lengths_are_rejected_naming_the_parameter() -> None:
    with pytest.raises(ValueError, match="`groups` must hold one label per score"):
        reliability.summary([0.1, 0.2, 0.3], groups=["a", "b"])
    with pytest.raises(ValueError, match="`groups` must hold one label per score"):
        reliability.summary([0.1, 0.2], groups=(["a", "b"], ["x"]))
    with pytest.raises(ValueError, match="`b` must pair with `a`"):
        reliability.cliffs_delta([0.1, 0.2], [0.3])
    with pytest.raises(ValueError, match="`trials` must be a scalar or one count per task"):
        reliability.pass_hat_k([1, 2], [3, 3, 3], 1)
    with pytest.raises(ValueError, match="`difficulty` must hold one level per score"):
        reliability.degradation_curve([0.1, 0.2], [1])


def test_empty_inputs_and_empty_groups_are_rejected_naming_the_parameter() -> None:
    with pytest.raises(ValueError, match="`scores` is empty"):
        reliability.summary([])
    with pytest.raises(ValueError, match="`b` is empty"):
        reliability.cliffs_delta([0.1], [], paired=False)
    with pytest.raises(ValueError, match="`truth` is empty"):
        reliability.record_f1(["a"], [])
    with pytest.raises(ValueError, match="`successes` must be a non-empty"):
        reliability.pass_hat_k([], 3, 1)
    with pytest.raises(ValueError, match="`difficulty`: group 'b' has no run at level 2"):
        reliability.degradation_curve([0.1, 0.2, 0.3], [1, 2, 1], groups=["a", "a", "b"])
    with pytest.raises(ValueError, match="`levels` lists 'hard' but no run has"):
        reliability.reliability_gap([0.1, 0.2], ["easy", "easy"], levels=["easy", "hard"])


def test_other_impossible_parameters_are_rejected_naming_them() -> None:
    with pytest.raises(ValueError, match="`tau` must be a finite number"):
        reliability.summary([0.1], tau=float("nan"))
    with pytest.raises(ValueError, match="`n_resamples` must be an int >= 2"):
        reliability.summary([0.1, 0.2], n_resamples=1)
    with pytest.raises(ValueError, match="`seed` must be an int >= 0"):
        reliability.summary([0.1, 0.2], seed=-1)
    with pytest.raises(ValueError, match=r"`confidence_level` must be a number in \(0, 1\)"):
        reliability.summary([0.1, 0.2]).confidence_interval(confidence_level=95)
    with pytest.raises(ValueError, match="`k` = 4 exceeds the 3 trials of task 0"):
        reliability.pass_hat_k([1], 3, 4)
    with pytest.raises(ValueError, match="`successes` exceeds `trials` at task 0"):
        reliability.pass_hat_k([4], 3, 1)
    with pytest.raises(ValueError, match="`successes` must be non-negative integer counts"):
        reliability.pass_hat_k([1.5], 3, 1)
    with pytest.raises(ValueError, match="`pvalue_statistic` must be"):
        reliability.cliffs_delta([1.0], [0.0], pvalue_statistic="t")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`truth` repeats 1 id"):
        reliability.record_f1(["a"], ["a", "a"])
    with pytest.raises(ValueError, match="`submitted` record 0 has no 'id' field"):
        reliability.record_f1([{"key": "a"}], ["a"])
    with pytest.raises(ValueError, match="`difficulty` has level\\(s\\) \\[3\\]"):
        reliability.degradation_curve([0.1, 0.2], [1, 3], levels=[1, 2])
    with pytest.raises(ValueError, match="`baseline` must be"):
        reliability.reliability_gap([0.1], baseline="median")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the module


def test_public_names_are_fixed_and_sorted() -> None:
    # isort-style, as ruff's RUF022 keeps it: constants, classes, then functions.
    def kind(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2), name

    assert public.__all__ == sorted(public.__all__, key=kind)
    assert set(public.__all__) == {
        "CLAIMS", "EXACT_LIMIT", "MIN_RUNS_FOR_COVERAGE", "VARIANTS", "Cell", "CliffsDeltaResult",
        "ConfidenceInterval", "DecisionOutcomes", "DecisionOwnership", "DegradationCurveResult",
        "GroupedReliabilityResult", "NonDegeneracyResult", "OwnershipMap", "PassHatKResult",
        "ProbeReport", "ProbeTask", "RecordF1Result", "ReliabilityGapResult",
        "ReliabilitySummaryResult", "Submission", "TerminalScores", "TerminalTable",
        "ValidityCard",
        "cliffs_delta", "decision_outcomes", "degradation_curve", "from_dataset",
        "licensed_claim", "non_degeneracy",
        "ownership_map", "pass_hat_k", "probe_scorer", "probe_variants", "record_f1",
        "reliability_gap", "replay_cell", "replay_check", "summary", "terminal_table",
        "validity_card",
    }


@pytest.mark.parametrize("module", ["agentlog.estimators.reliability",
                                    "agentlog.estimators._reliability",
                                    "agentlog.estimators._validity",
                                    "agentlog.examples.scorers"])
def test_docstring_examples_run(module: str) -> None:
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_importing_the_reliability_module_does_not_import_scipy() -> None:
    code = ("import sys; import agentlog.estimators.reliability, agentlog.examples.scorers; "
            "print('scipy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_a_group_whose_runs_all_scored_the_same_warns_whatever_its_size() -> None:
    """[1.0] * 30 gave the point interval [1, 1] without a word; so did the 12 % of
    Bernoulli(0.1) samples of 20 that are all zeros."""
    with pytest.warns(DegenerateDataWarning, match=r"all 30 runs scored 1\.0: the bootstrap "
                                                   r"interval of the mean is that point"):
        r = reliability.summary([1.0] * 30)
    assert r.confidence_interval() == (1.0, 1.0)
    with pytest.warns(DegenerateDataWarning, match=r"all 20 runs scored 0\.0 in 1 group\(s\), "
                                                   r"e\.g\. 'never'"):
        reliability.summary([0.0] * 20 + list(np.linspace(0, 1, 20)),
                            groups=["never"] * 20 + ["spread"] * 20)


def test_skewed_scores_warn_above_the_size_floor_and_symmetric_ones_do_not() -> None:
    """Rare successes at n = 20 (2 of 20: skewness +2.67, needs ~178 runs) warn; 30 normal
    scores (the coverage study: 0.93, flagged in 1 %) do not."""
    rare = [1.0, 1.0] + [0.0] * 18
    with pytest.warns(DegenerateDataWarning, match=r"20 runs: the scores are skewed \(sample "
                                                   r"skewness \+2\.67.*about 25·g₁² = 178 runs"):
        reliability.summary(rare)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reliability.summary(np.random.default_rng(0).normal(size=30))
        reliability.summary(np.linspace(0.0, 1.0, 40))


def test_the_skewness_rule_flags_the_designs_that_under_cover() -> None:
    """The module's measured claim at n = 20, re-checked on 400 fresh seeded samples per
    design: the rule (n < 25·g₁², or all equal) flags at least 90 % of Bernoulli(0.1)
    samples (which covered 0.88) and at most 10 % of normal ones (0.93). Binomial s.e. of a
    share over 400 samples is at most 0.025, so the margins are > 3 s.e. from the measured
    99 % and 4 %."""
    from agentlog.estimators._reliability import RUNS_SKEWNESS_RULE

    rng = np.random.default_rng(11)

    def flagged(x: np.ndarray) -> float:
        d = x - x.mean(axis=1, keepdims=True)
        m2 = (d ** 2).mean(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            g1 = np.where(m2 > 0, (d ** 3).mean(axis=1) / np.where(m2 > 0, m2, 1) ** 1.5, 0)
        return float(np.mean((m2 == 0) | (x.shape[1] < RUNS_SKEWNESS_RULE * g1 ** 2)))

    assert flagged((rng.random((400, 20)) < 0.1).astype(float)) >= 0.90
    assert flagged(rng.normal(size=(400, 20))) <= 0.10
