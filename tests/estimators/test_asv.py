"""ASV faces, cohort summaries, retry baselines, calibration invariance and AUC."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from agentlog import DegenerateDataWarning, IncompleteFaceError
from agentlog.estimators import asv

# Most tests pin statistics on a handful of trajectories, not coverage: the small-sample
# coverage warning has its own tests below.
pytestmark = pytest.mark.filterwarnings(
    "ignore:.* trajectories. below .*coverage study:agentlog.DegenerateDataWarning")


def test_papers_004_four_corner_example() -> None:
    """Direct margins (−0.2, +0.4), generated (+0.5, +0.1): gains +0.6 and −0.4, Ω = −1.0,
    diagonal +0.3, and state part + view part = diagonal exactly."""
    f = asv.face([-0.2], [0.4], [0.5], [0.1])
    assert f.gain0[0] == pytest.approx(0.6, abs=1e-12)
    assert f.gain1[0] == pytest.approx(-0.4, abs=1e-12)
    assert f.interaction[0] == pytest.approx(-1.0, abs=1e-12)
    assert f.diagonal[0] == pytest.approx(0.3, abs=1e-12)
    assert f.state_part[0] + f.view_part[0] == f.diagonal[0]
    assert f.sign_disagree.tolist() == [True]


def test_state_and_view_parts_sum_to_the_diagonal_on_random_faces() -> None:
    rng = np.random.default_rng(0)
    c = rng.normal(size=(4, 1000))
    f = asv.face(*c)
    np.testing.assert_allclose(f.state_part + f.view_part, f.diagonal, rtol=0, atol=1e-14)
    # and the parts are what their definitions say
    np.testing.assert_allclose(f.state_part, 0.5 * (f.gain0 + f.gain1), rtol=0, atol=1e-14)
    np.testing.assert_allclose(f.view_part, 0.5 * ((c[2] - c[0]) + (c[3] - c[1])), rtol=0,
                               atol=1e-14)


def test_additive_channel_offsets_cancel_for_every_transition() -> None:
    rng = np.random.default_rng(1)
    h_before, h_after = rng.normal(size=50), rng.normal(size=50)
    a0, a1 = 0.7, -1.3
    f = asv.face(h_before + a0, h_after + a0, h_before + a1, h_after + a1)
    np.testing.assert_allclose(f.interaction, 0.0, atol=1e-12)


def test_the_four_corner_contrast_is_the_ols_interaction_coefficient() -> None:
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(2)
    n = 120
    corners = rng.normal(size=(4, n)) + np.array([[0.0], [0.3], [0.1], [-0.2]])
    f = asv.face(*corners)
    y = np.concatenate(corners)
    after = np.repeat([0, 1, 0, 1], n)
    channel = np.repeat([0, 0, 1, 1], n)
    X = sm.add_constant(np.column_stack([after, channel, after * channel]))
    fit = sm.OLS(y, X).fit()
    assert fit.params[3] == pytest.approx(f.interaction.mean(), abs=1e-12)


def test_trajectory_block_bootstrap_se_is_close_to_the_cluster_robust_se() -> None:
    """100 trajectories x 11 transitions with trajectory effects: the bootstrap SE of mean Ω
    is within 15% of statsmodels' cluster-robust SE (clusters = trajectories)."""
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(3)
    T, k = 100, 11
    traj = np.repeat(np.arange(T), k)
    effect = rng.normal(scale=0.3, size=T)[traj]
    b0 = rng.normal(size=T * k)
    a0 = b0 + 0.2 + rng.normal(scale=0.3, size=T * k)
    b1 = b0 + 0.5
    a1 = b1 + 0.2 - 0.3 + effect + rng.normal(scale=0.3, size=T * k)
    f = asv.face(b0, a0, b1, a1)
    summary = asv.summarize(f, trajectory=traj, n_resamples=10_000, seed=1)
    se_boot = float(np.std(summary.samples["mean_interaction"], ddof=1))
    fit = sm.OLS(f.interaction, np.ones(T * k)).fit(cov_type="cluster",
                                                    cov_kwds={"groups": traj})
    se_cr = float(fit.bse[0])
    assert abs(se_boot / se_cr - 1) <= 0.15, (se_boot, se_cr)
    assert summary.values["mean_interaction"] == pytest.approx(f.interaction.mean())


def test_a_missing_corner_names_the_transition_and_corner() -> None:
    nan = np.nan
    with pytest.raises(IncompleteFaceError, match=r"transition 1: F_ρ1\(x\+\).*Proposition 1"):
        asv.face([0.0, 0.0], [1.0, 1.0], [0.0, 0.0], [1.0, nan])
    f = asv.face([0.0, 0.0], [1.0, 1.0], [0.0, 0.0], [1.0, nan], complete_only=True)
    assert f.kept.tolist() == [0] and f.dropped.tolist() == [1] and len(f) == 1


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match=r"`after0` must be 1-D with one value per transition"):
        asv.face([0.0, 1.0], [1.0], [0.0, 1.0], [1.0, 1.0])
    f = asv.face([0.0, 1.0], [1.0, 0.5], [0.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="`trajectory` has 1 labels for 2 transitions"):
        asv.summarize(f, trajectory=["t"])
    with pytest.raises(ValueError, match="`target` is needed"):
        asv.summarize(f, trajectory=["t", "u"], weighting="equal-target")


def test_cyclic_layouts_put_each_candidate_in_each_position_once() -> None:
    layouts = asv.cyclic_layouts(4)
    assert layouts.shape == (4, 4)
    for candidate in range(4):
        assert sorted(layouts[:, candidate].tolist()) == [0, 1, 2, 3]
    for layout in layouts:
        assert sorted(layout.tolist()) == [0, 1, 2, 3]


def test_layouts_are_reduced_within_channel_and_a_missing_layout_is_incomplete() -> None:
    scores = np.array([[0.1, 0.3, 0.2, 0.2], [0.0, np.nan, 0.5, 0.1]])
    reduced = asv.reduce_layouts(scores, layout_axis=1)
    assert reduced[0] == pytest.approx(0.2) and np.isnan(reduced[1])


def test_summary_statistics_match_their_closed_forms_and_are_bit_reproducible() -> None:
    rng = np.random.default_rng(4)
    corners = rng.normal(size=(4, 100))
    f = asv.face(*corners)
    traj = np.repeat(np.arange(20), 5)
    s = asv.summarize(f, trajectory=traj, n_resamples=500, seed=9)
    omega = f.interaction
    assert s.values["mean_interaction"] == pytest.approx(omega.mean(), abs=1e-12)
    assert s.values["median_interaction"] in (np.sort(omega)[49], np.sort(omega)[50])
    assert s.values["trimmed_mean_interaction"] == pytest.approx(stats.trim_mean(omega, 0.1),
                                                                 abs=1e-12)
    assert s.values["share_negative_interaction"] == pytest.approx(np.mean(omega < 0))
    assert s.values["mean_sign_disagreement"] == pytest.approx(np.mean(f.sign_disagree))
    again = asv.summarize(f, trajectory=traj, n_resamples=500, seed=9)
    assert all(np.array_equal(s.samples[k], again.samples[k]) for k in s.samples)
    low, high = s.confidence_interval("mean_interaction")
    assert low < s.values["mean_interaction"] < high


def test_equal_target_weighting_gives_each_target_equal_total_weight() -> None:
    # target A has three transitions with Ω = 1, target B one with Ω = -1
    f = asv.face([0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, -1])
    emp = asv.summarize(f, trajectory=[0, 1, 2, 3], n_resamples=200)
    eq = asv.summarize(f, trajectory=[0, 1, 2, 3], target=["A", "A", "A", "B"],
                       weighting="equal-target", n_resamples=200)
    assert emp.values["mean_interaction"] == pytest.approx(0.5)
    assert eq.values["mean_interaction"] == pytest.approx(0.0, abs=1e-12)


def test_retry_disagreement_by_hand() -> None:
    # transition 0: a waves (+,+), b waves (-,-): cross 1, same 0
    # transition 1: a (+,-), b (+,+): cross pairings (++,++,-+,-+) -> 0.5; same a 1, b 0 -> 0.5
    r = asv.retry_disagreement([[1.0, 2.0], [1.0, -1.0]], [[-1.0, -1.0], [1.0, 1.0]],
                               trajectory=[0, 1], n_resamples=200)
    assert r.cross_channel == pytest.approx(0.75)
    assert r.same_channel == pytest.approx(0.25)
    assert r.excess == pytest.approx(0.5)
    with pytest.raises(ValueError, match="at least two waves"):
        asv.retry_disagreement([[1.0], [2.0]], [[1.0], [2.0]], trajectory=[0, 1])


def test_calibration_sign_disagreement_survives_but_the_interaction_sign_may_not() -> None:
    opposite = asv.face([0.0, 0.0], [1.0, 0.5], [0.0, 0.0], [-1.0, -0.2])
    check = asv.calibration_check(opposite)
    assert check.mean_interaction_sign == "invariant" and check.witness is None
    same = asv.face([0.0, 0.0], [1.0, 0.5], [0.0, 0.0], [0.3, 0.2])  # both gains positive
    check = asv.calibration_check(same)
    assert check.mean_interaction_sign == "not invariant"
    assert check.sign_disagreement == "invariant" and check.gain_signs == "invariant"
    a0, a1 = check.witness  # type: ignore[misc]
    g0, g1 = same.gain0.mean(), same.gain1.mean()
    assert np.sign(a1 * g1 - a0 * g0) != np.sign(g1 - g0)
    # and sign disagreement is unchanged by any positive rescaling
    rescaled = asv.face(*(np.array(c) * s for c, s in zip(
        ([0.0, 0.0], [1.0, 0.5], [0.0, 0.0], [-1.0, -0.2]), (3.0, 3.0, 0.1, 0.1), strict=True)))
    assert (rescaled.sign_disagree == opposite.sign_disagree).all()


def test_auc_difference_matches_mann_whitney() -> None:
    rng = np.random.default_rng(5)
    n = 200
    success = rng.random(n) < 0.4
    post0 = rng.normal(size=n) + 0.3 * success
    post1 = np.round(rng.normal(size=n) + 1.0 * success, 1)  # ties included
    res = asv.auc_difference(post0, post1, success, trajectory=np.arange(n) // 4,
                             n_resamples=2_000, seed=2)
    for post, auc in ((post0, res.auc0), (post1, res.auc1)):
        u = stats.mannwhitneyu(post[success], post[~success]).statistic
        assert auc == pytest.approx(u / (success.sum() * (~success).sum()), abs=1e-12)
    low, high = res.confidence_interval("difference")
    assert low < res.difference < high and res.difference > 0


def _weighted_reference(x: np.ndarray, w: np.ndarray, trim: float) -> dict[str, float]:
    """Direct per-transition weighted statistics, written the slow way."""
    order = np.argsort(x, kind="stable")
    xs, ws = x[order], w[order]
    total = ws.sum()
    cum = np.cumsum(ws)
    prev = cum - ws
    lo, hi = trim * total, (1 - trim) * total
    mass = np.clip(cum, lo, hi) - np.clip(prev, lo, hi)
    return {
        "mean_interaction": float((w * x).sum() / total),
        "median_interaction": float(xs[np.argmax(cum >= 0.5 * total - 1e-9 * total)]),
        "trimmed_mean_interaction": float((mass * xs).sum() / (hi - lo)),
        "share_negative_interaction": float(ws[xs < 0].sum() / total),
    }


@pytest.mark.parametrize("weighting", ["empirical", "equal-target"])
def test_bootstrap_statistics_equal_a_direct_weighted_computation(weighting: str) -> None:
    """The block-prefix resampler gives exactly what per-transition weights give."""
    from agentlog.estimators._asv import _block_count_rows

    rng = np.random.default_rng(6)
    T, k = 40, 7
    traj = np.repeat(np.arange(T), k)
    target = rng.integers(0, 5, size=T * k)  # trajectories span several targets
    f = asv.face(*np.round(rng.normal(size=(4, T * k)), 1))  # ties in Ω
    s = asv.summarize(f, trajectory=traj, target=target, weighting=weighting,
                      n_resamples=50, seed=3)
    counts = np.concatenate(list(_block_count_rows(T, 50, 3, 50)))
    for row in (0, 17, 49):
        w = counts[row][traj]
        if weighting == "equal-target":
            totals = np.bincount(target, weights=w, minlength=5)
            w = np.divide(w, totals[target], out=np.zeros_like(w), where=w > 0)
        ref = _weighted_reference(f.interaction, w, 0.1)
        for key, value in ref.items():
            assert s.samples[key][row] == pytest.approx(value, abs=1e-9), (key, row)


def test_the_summary_records_a_hash_of_its_inputs_and_settings() -> None:
    f = asv.face([0.0, 1.0], [1.0, 2.0], [0.0, 1.0], [2.0, 0.0])
    a = asv.summarize(f, trajectory=[0, 1], n_resamples=10)
    assert a.inputs_hash == asv.summarize(f, trajectory=[0, 1], n_resamples=10).inputs_hash
    assert a.inputs_hash != asv.summarize(f, trajectory=[1, 0], n_resamples=10).inputs_hash
    assert a.inputs_hash != asv.summarize(f, trajectory=[0, 1], n_resamples=11).inputs_hash
    assert a.to_dict()["inputs_hash"] == a.inputs_hash


@pytest.mark.parametrize("call", ["summarize", "retry_disagreement", "auc_difference"])
@pytest.mark.parametrize("level", [1.5, 0.0, 1.0, -0.2, float("nan"), "0.9"])
def test_a_confidence_level_outside_0_1_is_refused_up_front(call: str, level: object) -> None:
    f = asv.face([0.0, 1.0, 0.5], [1.0, 0.5, 0.2], [0.0, 1.0, 0.1], [1.0, 1.0, 0.3])
    run = {
        "summarize": lambda: asv.summarize(f, trajectory=[0, 1, 2], confidence_level=level),
        "retry_disagreement": lambda: asv.retry_disagreement(
            [[1.0, 2.0], [1.0, -1.0]], [[-1.0, -1.0], [1.0, 1.0]], trajectory=[0, 1],
            confidence_level=level),
        "auc_difference": lambda: asv.auc_difference(
            [0.1, 0.5, 0.3], [0.2, 0.1, 0.4], [1, 0, 1], trajectory=[0, 1, 2],
            confidence_level=level),
    }[call]
    with pytest.raises(ValueError, match=r"`confidence_level` must be a number in \(0, 1\), "
                                         r"e.g. 0.95; found"):
        run()


def test_an_unknown_interval_method_is_named() -> None:
    f = asv.face([0.0, 1.0], [1.0, 0.5], [0.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match=r"`method` must be one of 'percentile', 'basic', "
                                         r"'BCa'.*found 'student'"):
        asv.summarize(f, trajectory=[0, 1], method="student")  # type: ignore[arg-type]
    s = asv.summarize(f, trajectory=[0, 1], n_resamples=20)
    with pytest.raises(ValueError, match="`method` must be one of"):
        s.confidence_interval("mean_interaction", method="t")  # type: ignore[arg-type]


def test_bca_pieces_of_the_mean_interaction_are_the_jackknife_and_the_bias_correction() -> None:
    """One transition per trajectory: the leave-one-trajectory-out mean Ω is the jackknife
    of a mean, so â = Σd³/(6(Σd²)^{3/2}); the interval is the quantiles of the resamples at
    the BCa levels; percentile and basic are the plain and reflected quantiles."""
    from scipy.special import ndtr, ndtri

    rng = np.random.default_rng(8)
    n = 60
    omega = rng.exponential(size=n)
    f = asv.face(np.zeros(n), np.zeros(n), np.zeros(n), omega)
    s = asv.summarize(f, trajectory=np.arange(n), n_resamples=4_000, seed=2)
    assert s.method == "BCa"
    d = omega - omega.mean()
    a = (d ** 3).sum() / (6 * (d ** 2).sum() ** 1.5)
    assert s.accelerations["mean_interaction"] == pytest.approx(a, rel=1e-9)
    b = s.samples["mean_interaction"]
    theta = s.values["mean_interaction"]
    z0 = ndtri(((b < theta).mean() + (b <= theta).mean()) / 2)
    levels = [ndtr(z0 + (z0 + z) / (1 - a * (z0 + z))) for z in (ndtri(0.025), ndtri(0.975))]
    expected = np.quantile(b, levels)
    assert s.confidence_interval("mean_interaction") == pytest.approx(tuple(expected), rel=1e-9)
    pct = np.quantile(b, [0.025, 0.975])
    assert s.confidence_interval("mean_interaction", method="percentile") == pytest.approx(
        tuple(pct), rel=1e-12)
    assert s.confidence_interval("mean_interaction", method="basic") == pytest.approx(
        (2 * theta - pct[1], 2 * theta - pct[0]), rel=1e-12)
    assert s.to_dict()["interval_method"] == "BCa"


@pytest.mark.filterwarnings("default")
def test_fewer_trajectories_than_the_coverage_threshold_warn() -> None:
    limit = asv.MIN_TRAJECTORIES_FOR_COVERAGE["BCa"]
    n = limit - 1
    f = asv.face(np.zeros(n), np.zeros(n), np.zeros(n), np.arange(n, dtype=float))
    with pytest.warns(DegenerateDataWarning, match=rf"{n} trajectories: below {limit} the 95% "
                                                   r"BCa trajectory-block interval of the mean "
                                                   r"Ω covered less than 92%"):
        asv.summarize(f, trajectory=np.arange(n), n_resamples=20)
    m = asv.MIN_TRAJECTORIES_FOR_COVERAGE["percentile"]
    assert m > limit  # the study: percentile needs more trajectories than BCa
    f = asv.face(np.zeros(limit), np.zeros(limit), np.zeros(limit), np.arange(limit * 1.0))
    with pytest.warns(DegenerateDataWarning, match=rf"below {m} the 95% percentile"):
        asv.summarize(f, trajectory=np.arange(limit), n_resamples=20, method="percentile")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        asv.summarize(f, trajectory=np.arange(limit), n_resamples=20)  # BCa: silent


def test_the_default_interval_of_the_mean_interaction_covers_as_the_readme_table_says() -> None:
    """The README's study, skewed trajectory effects, T = 30 trajectories × 11 transitions:
    BCa covered 0.922 (400 trials, 1,000 resamples). 150 fresh trials (400 resamples) must
    agree within 3 Monte Carlo standard errors of the difference."""
    trials, T, k = 150, 30, 11
    rng = np.random.default_rng(99)
    traj = np.repeat(np.arange(T), k)
    hits = 0
    for _ in range(trials):
        omega = (rng.exponential(size=T) - 1.0)[traj] + 0.5 * rng.normal(size=T * k)
        f = asv.face(np.zeros(T * k), np.zeros(T * k), np.zeros(T * k), omega)
        with warnings.catch_warnings():  # skewed effects warn; the coverage is tested here
            warnings.simplefilter("ignore", DegenerateDataWarning)
            s = asv.summarize(f, trajectory=traj, n_resamples=400,
                              seed=int(rng.integers(2**31)))
        low, high = s.confidence_interval("mean_interaction")
        hits += int(low <= 0.0 <= high)
    coverage = hits / trials
    se = np.sqrt(0.922 * 0.078 * (1 / trials + 1 / 400))
    assert abs(coverage - 0.922) <= 3 * se, coverage


def test_retry_and_auc_intervals_take_a_method_with_jackknife_accelerations() -> None:
    """One transition per trajectory: each leave-one-out retry rate is the jackknife of a
    mean, so â is Σd³/(6(Σd²)^{3/2}) per column; the AUC's â is the brute-force jackknife's."""
    rng = np.random.default_rng(12)
    n = 40
    a = rng.normal(size=(n, 2))
    b = rng.normal(loc=0.3, size=(n, 2))
    r = asv.retry_disagreement(a, b, trajectory=np.arange(n), n_resamples=500, seed=1)
    assert r.method == "BCa"
    sa, sb = np.sign(a), np.sign(b)
    cross = (sa[:, :, None] * sb[:, None, :] < 0).mean(axis=(1, 2))
    d = cross - cross.mean()
    assert r.accelerations[0] == pytest.approx((d ** 3).sum() / (6 * (d ** 2).sum() ** 1.5))
    pct = np.quantile(r.samples[:, 0], [0.025, 0.975])
    assert r.confidence_interval("cross_channel", method="percentile") == pytest.approx(tuple(pct))
    low, high = r.confidence_interval("cross_channel")
    assert 0.0 <= low <= r.cross_channel <= high <= 1.0

    post0, post1 = rng.normal(size=n), rng.normal(size=n)
    success = rng.random(n) < 0.5
    auc = asv.auc_difference(post0, post1, success, trajectory=np.arange(n),
                             n_resamples=500, seed=1)
    jack = []
    for i in range(n):
        keep = np.arange(n) != i
        jack.append(stats.mannwhitneyu(post1[keep][success[keep]], post1[keep][~success[keep]]
                                       ).statistic / (success[keep].sum() * (~success[keep]).sum()))
    u = (n - 1) * (np.mean(jack) - np.array(jack))
    assert auc.accelerations[1] == pytest.approx((u ** 3).sum() / (6 * (u ** 2).sum() ** 1.5),
                                                 rel=1e-9)
    with pytest.raises(ValueError, match="`method` must be one of"):
        asv.auc_difference(post0, post1, success, trajectory=np.arange(n), method="BCA")


def test_bca_is_nan_with_a_warning_when_every_resample_lies_on_one_side() -> None:
    """scipy's rule: an infinite bias correction has no BCa interval; say so, do not guess."""
    from agentlog.estimators._bootstrap import bootstrap_interval

    with pytest.warns(DegenerateDataWarning, match="the BCa interval cannot be computed"):
        low, high = bootstrap_interval(np.array([1.0, 2.0, 3.0]), 0.5, confidence_level=0.95,
                                       method="BCa", acceleration=0.0)
    assert np.isnan(low) and np.isnan(high)


def test_skewed_or_identical_trajectory_means_warn_above_the_floor() -> None:
    """Above MIN_TRAJECTORIES_FOR_COVERAGE the warning depends on the data: 40 trajectories
    whose mean Ω is exponential-skewed warn (an outside study measured 0.902 coverage at
    30); 40 symmetric ones do not; identical means give a point interval and warn."""
    T, k = 40, 5
    traj = np.repeat(np.arange(T), k)
    skewed = np.repeat(np.r_[np.full(T - 2, -0.05), 0.9, 1.0], k)  # two big trajectories
    f = asv.face(np.zeros(T * k), np.zeros(T * k), np.zeros(T * k), skewed)
    with pytest.warns(DegenerateDataWarning, match=r"40 trajectories whose mean Ω is skewed "
                                                   r"\(sample skewness \+\d\.\d\d\)"):
        asv.summarize(f, trajectory=traj, n_resamples=50)
    same = asv.face(np.zeros(T * k), np.zeros(T * k), np.zeros(T * k), np.ones(T * k))
    with pytest.warns(DegenerateDataWarning, match=r"all 40 trajectories have the same mean"):
        asv.summarize(same, trajectory=traj, n_resamples=50)
    sym = np.repeat(np.linspace(-1.0, 1.0, T), k)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        asv.summarize(asv.face(np.zeros(T * k), np.zeros(T * k), np.zeros(T * k), sym),
                      trajectory=traj, n_resamples=50)


@pytest.mark.parametrize("weighting", ["empirical", "equal-target"])
def test_long_blocks_and_short_batches_for_large_inputs_give_the_same_draws(
        monkeypatch: pytest.MonkeyPatch, weighting: str) -> None:
    """A private piece: large inputs get longer quantile blocks and shorter batches of
    resamples (bounded memory; 64-position blocks over 10⁵ trajectories took 1.25 GB a
    table). Forced here on a small input, every statistic of every draw and the jackknife
    are those of the default layout (medians exactly, sums to rounding)."""
    from agentlog.estimators import _asv

    rng = np.random.default_rng(12)
    corners = rng.normal(size=(4, 600))
    f = asv.face(*corners)
    traj, target = np.repeat(np.arange(120), 5), np.tile(np.arange(5), 120)
    kw = {"trajectory": traj, "target": target, "weighting": weighting, "n_resamples": 300,
          "seed": 5}
    default = asv.summarize(f, **kw)  # type: ignore[arg-type]
    monkeypatch.setattr(_asv, "_TABLE_NUMBERS", 250)  # blocks of 320 positions
    monkeypatch.setattr(_asv, "_BATCH_NUMBERS", 1_000)  # batches of 8 resamples
    long = asv.summarize(f, **kw)  # type: ignore[arg-type]
    assert _asv._Resampler(f, traj, 120).block == 320
    assert np.array_equal(default.samples["median_interaction"],
                          long.samples["median_interaction"])
    for key in default.samples:
        np.testing.assert_allclose(long.samples[key], default.samples[key], rtol=1e-12,
                                   atol=1e-14)
    assert long.accelerations == pytest.approx(default.accelerations, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("n_blocks", [1, 2, 7, 1001])
def test_block_counts_drawn_a_batch_at_a_time_are_the_whole_draw(n_blocks: int) -> None:
    """``summarize`` draws its resamples' counts a batch of rows at a time; any batch size,
    odd ones included, gives the numbers of one whole (resamples × trajectories) draw."""
    from agentlog.estimators._asv import _block_count_rows

    whole = np.random.default_rng(5).integers(0, n_blocks, size=(9, n_blocks))
    expect = np.stack([np.bincount(row, minlength=n_blocks) for row in whole])
    for rows in (1, 2, 3, 4, 9, 50):
        got = np.concatenate(list(_block_count_rows(n_blocks, 9, 5, rows)))
        np.testing.assert_array_equal(got, expect)
        assert got.sum(axis=1).tolist() == [n_blocks] * 9


def test_the_auc_baseline_scales_to_many_distinct_scores() -> None:
    """20,000 transitions with as many distinct margins: the AUC is Mann–Whitney's U over
    n₁·n₀ (ties ½), and the bootstrap holds a batch of resamples' weights, not a one-hot
    matrix of transitions × distinct scores (3.2 GB here)."""
    import tracemalloc

    from scipy.stats import mannwhitneyu

    rng = np.random.default_rng(8)
    n = 20_000
    success = rng.integers(0, 2, n)
    post0 = rng.normal(size=n) + 0.3 * success
    post1 = np.round(rng.normal(size=n) + 0.6 * success, 2)  # ties
    tracemalloc.start()
    try:
        result = asv.auc_difference(post0, post1, success, trajectory=np.arange(n) // 10,
                                    n_resamples=20, seed=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200e6, peak
    n1, n0 = int(success.sum()), int(n - success.sum())
    for value, post in ((result.auc0, post0), (result.auc1, post1)):
        u = mannwhitneyu(post[success == 1], post[success == 0]).statistic
        assert value == pytest.approx(u / (n1 * n0), rel=1e-12)
    assert result.samples.shape == (20, 3) and np.isfinite(result.samples).all()


@pytest.mark.parametrize("weighting", ["empirical", "equal-target"])
def test_the_delete_a_group_jackknife_over_classes_equals_it_over_units(
        weighting: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the group count the jackknife's rows weigh every unit of a group (and target)
    alike, and run on a resampler over those classes: the statistics the same rows give
    over the units, to rounding (sums regrouped)."""
    from agentlog.estimators import _asv

    rng = np.random.default_rng(21)
    n_traj, per = 300, 4
    corners = rng.normal(size=(4, n_traj * per))
    f = asv.face(*corners)
    traj = np.repeat(np.arange(n_traj), per)
    target = rng.integers(0, 3, size=n_traj * per)
    monkeypatch.setattr(_asv, "_JACKKNIFE_GROUPS", 7)
    got = asv.summarize(f, trajectory=traj, target=target,
                        weighting=weighting, n_resamples=50, seed=1)  # type: ignore[arg-type]
    # The reference: the same delete-a-group rows over the trajectories, on the units.
    if weighting == "empirical":
        unit, unit_traj, unit_target, per_target = traj, np.arange(n_traj), None, None
    else:
        pairs, unit = np.unique(np.column_stack([traj, target]), axis=0, return_inverse=True)
        unit = unit.ravel()
        unit_traj, unit_target = pairs[:, 0], pairs[:, 1]
        per_target = np.zeros((n_traj, 3))
        np.add.at(per_target, (traj, target), 1.0)
    resampler = _asv._Resampler(f, unit, len(unit_traj))
    rows = np.concatenate(list(_asv._jackknife_rows(n_traj)))
    assert rows.shape == (7, n_traj) and set(rows.sum(axis=1)) <= {n_traj - 43, n_traj - 42}
    stats = resampler.stats(_asv._unit_weights(rows, unit_traj, unit_target, per_target), 0.1)
    for key, values in stats.items():
        assert got.accelerations[key] == pytest.approx(
            float(_asv.jackknife_acceleration(values)), rel=1e-9, abs=1e-12), key
