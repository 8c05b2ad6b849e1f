"""Per-step attribution (``agentlog.estimators.attribution``) against closed forms.

The simulated agent draws three picks from a fixed vector over three candidates of known
value, and earns a bonus when its first two picks are both the best candidate: every
contrastive effect and Shapley value has a closed form (below), and the estimates from
branch-mode re-entries on common random numbers must recover them within 3 standard errors.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

import agentlog as al
from agentlog.estimators import attribution
from agentlog.reentry import continuation_uniform, gumbel_draws
from agentlog.replay import alteration_arm, intervene
from agentlog.replay.interventions import Alter

APP_HERE = __name__
IDS = ("a", "b", "c")
P = np.array([0.5, 0.3, 0.2])
V = np.array([1.0, 0.0, -1.0])
BONUS = 2.0  # when the first two picks are both "a": the interaction of steps 0 and 1


@al.window("episode")
def episode(rounds: int) -> list[str]:
    return [IDS[al.select(P, candidates=list(IDS), name="pick")] for _ in range(rounds)]


def outcome(picks: list[str]) -> dict[str, float]:
    value = sum(V[IDS.index(x)] for x in picks)
    bonus = BONUS if picks[:2] == ["a", "a"] else 0.0
    return {"y": float(value + bonus)}


# Closed forms. Player 0 and 1 force "c" at step 0 / 1, player 2 forces "b" at step 2.
MEAN_V = float(P @ V)
PA2 = float(P[0] ** 2)
TRUE_CONTRASTIVE = {"pick@0=pick:2": V[2] - MEAN_V - BONUS * PA2,
                    "pick@1=pick:2": V[2] - MEAN_V - BONUS * PA2,
                    "pick@2=pick:1": V[1] - MEAN_V}
# Shapley splits the lost bonus between steps 0 and 1 (each loses it alone or together).
TRUE_SHAPLEY = {"pick@0=pick:2": V[2] - MEAN_V - BONUS * PA2 / 2,
                "pick@1=pick:2": V[2] - MEAN_V - BONUS * PA2 / 2,
                "pick@2=pick:1": V[1] - MEAN_V}
PLAYERS = list(TRUE_CONTRASTIVE)


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 tasks recorded once, re-entered under every coalition (exact Shapley) × 3 seeds."""
    d = tmp_path_factory.mktemp("attribution")
    for t in range(20):
        with al.record(d / "src" / f"t{t}.zst", seed=100 + t, task=f"t{t}", mode="w"):
            episode(3)
    run = intervene(d / "src", window="episode", app=APP_HERE, mode="branch",
                    arms=attribution.arms(PLAYERS, shapley="exact"), seeds=range(3),
                    scores=outcome, out=d / "out")
    assert run.summary.failed == 0, run.summary.failures
    assert run.units == 20 * 8 * 3
    return d / "out"


def test_the_simulated_agents_effects_are_recovered_within_three_standard_errors(
        study: Path) -> None:
    fx = attribution.from_traces(study, outcome="y")
    assert fx.players == tuple(sorted(PLAYERS))
    assert fx.n_blocks == 60 and fx.n_clusters == 20 and fx.shapley_method == "exact"
    for p in PLAYERS:
        se = fx.standard_error(p)
        assert se > 0
        assert abs(fx.contrastive[p] - TRUE_CONTRASTIVE[p]) <= 3 * se, p
        assert fx.shapley is not None
        se_s = fx.standard_error(p, "shapley")
        assert abs(fx.shapley[p] - TRUE_SHAPLEY[p]) <= 3 * se_s, p
        low, high = fx.confidence_interval(p)
        assert low < fx.contrastive[p] < high
    # Efficiency holds block by block, so exactly for the means.
    assert fx.total is not None
    assert math.isclose(sum(fx.shapley.values()), fx.total, abs_tol=1e-12)
    np.testing.assert_allclose(fx.per_block["shapley"].sum(axis=1), fx.per_block["total"],
                               atol=1e-12)


def test_common_random_numbers_shrink_the_standard_error_against_independent_draws(
        study: Path) -> None:
    """The same altered arms re-run on independent seeds (replicates 3-5), each paired
    with the agent's own arm of replicate r - 3: the unpaired standard error, measured."""
    paired = attribution.from_traces(study, outcome="y", shapley=None)
    out = study.parent / "independent"
    run = intervene(study.parent / "src", window="episode", app=APP_HERE, mode="branch",
                    arms=[alteration_arm([p]) for p in PLAYERS], seeds=range(3, 6),
                    scores=outcome, out=out)
    assert run.summary.failed == 0, run.summary.failures
    own = {(t, r): y for t, r, y in zip(paired.task, paired.replicate, paired.baseline,
                                       strict=True)}
    ratios = {}
    for p in PLAYERS:
        diffs: dict[str, list[float]] = {}
        for r in al.read(out / "units.zst").runs:
            prov = r.start.meta["agentlog.replay"]
            if prov["factors"]["alter"] != p:
                continue
            (score,) = [s.value for s in r.records if type(s) is al.records.Score]
            base = own[prov["task"], str(prov["replicate"] - 3)]
            diffs.setdefault(prov["task"], []).append(score - base)
        per_task = np.array([np.mean(v) for v in diffs.values()])
        independent = per_task.std(ddof=1) / math.sqrt(per_task.size)
        ratios[p] = paired.standard_error(p) / independent
        # The result's estimate of the unpaired standard error agrees with the measured
        # one within the sampling error of two standard errors over 20 tasks.
        assert 0.5 < paired.independent_standard_error(p) / independent < 2.0, p
    # Step 2 changes one pick of three: paired, only that pick's variance is left
    # (about 1/√5 of the unpaired standard error in theory).
    assert ratios["pick@2=pick:1"] < 0.7, ratios
    assert all(r < 1.0 for r in ratios.values()), ratios


def test_permutation_shapley_reads_the_coalitions_its_arms_ran(study: Path) -> None:
    exact = attribution.from_traces(study, outcome="y", shapley="exact")
    sampled = attribution.from_traces(study, outcome="y", shapley=4, seed=3)
    assert sampled.shapley_method == "permutations:4"
    assert sampled.shapley is not None and exact.shapley is not None
    assert sampled.permutation_spread is not None
    for p in PLAYERS:
        # The 4-permutation value sits within its permutation spread of the exact one
        # (3 spreads; a spread of 0 means every permutation gave the same marginal).
        gap = abs(sampled.shapley[p] - exact.shapley[p])
        assert gap <= 3 * sampled.permutation_spread[p] + 1e-12, (p, gap)
    assert math.isclose(sum(sampled.shapley.values()), sampled.total or 0.0, abs_tol=1e-12)


def test_exact_shapley_on_a_known_game_splits_an_interaction_equally() -> None:
    rng = np.random.default_rng(0)
    n = 200
    base = rng.normal(size=n)
    a, b, c, gamma = 1.0, -0.5, 0.25, 2.0

    def value(s: tuple[str, ...]) -> np.ndarray:
        return (base + a * ("a" in s) + b * ("b" in s) + c * ("c" in s)
                + gamma * ("a" in s and "b" in s))

    game = {s: value(s) for k in range(4) for s in itertools.combinations("abc", k)}
    with pytest.warns(al.DegenerateDataWarning, match="the same value in all 10 tasks"):
        fx = attribution.estimate(game, cluster=np.arange(n) % 10)
    assert fx.shapley is not None
    assert fx.shapley["a"] == pytest.approx(a + gamma / 2, abs=1e-12)
    assert fx.shapley["b"] == pytest.approx(b + gamma / 2, abs=1e-12)
    assert fx.shapley["c"] == pytest.approx(c, abs=1e-12)
    assert fx.contrastive == pytest.approx({"a": a, "b": b, "c": c}, abs=1e-12)


# Random games and effects: a sample may look skewed to the interval's check; these tests
# are about the point values and the coverage over every sample, warned or not.
@pytest.mark.filterwarnings("ignore::agentlog.DegenerateDataWarning")
def test_permutation_shapley_converges_to_the_exact_value_within_its_spread() -> None:
    rng = np.random.default_rng(1)
    players = [f"p{i}" for i in range(6)]
    weights = rng.normal(size=(1 << 6, 50))
    game = {}
    for mask in range(1 << 6):
        game[tuple(p for i, p in enumerate(players) if mask >> i & 1)] = weights[mask]
    game[()] = np.zeros(50)
    exact = attribution.estimate(game, cluster=np.arange(50) % 5, shapley="exact")
    sampled = attribution.estimate(game, cluster=np.arange(50) % 5, shapley=400, seed=2)
    assert exact.shapley is not None and sampled.shapley is not None
    assert sampled.permutation_spread is not None
    for p in players:
        assert abs(sampled.shapley[p] - exact.shapley[p]) <= 4 * sampled.permutation_spread[p]


@pytest.mark.filterwarnings("ignore::agentlog.DegenerateDataWarning")
def test_cluster_t_intervals_cover_at_the_nominal_rate() -> None:
    """A seeded simulation with a known effect: 95 % intervals over 12 tasks cover the
    truth in 95 % ± 3 binomial standard errors of 400 repetitions."""
    rng = np.random.default_rng(7)
    hits = 0
    reps = 400
    for _ in range(reps):
        task_effect = rng.normal(0.3, 0.5, size=12)
        cluster = np.repeat(np.arange(12), 4)
        base = rng.normal(size=48)
        altered = base + task_effect[cluster] + rng.normal(0, 0.3, size=48)
        fx = attribution.estimate({(): base, ("x",): altered}, cluster=cluster, shapley=None)
        low, high = fx.confidence_interval("x")
        hits += low <= 0.3 <= high
    se = math.sqrt(0.95 * 0.05 / reps)
    assert abs(hits / reps - 0.95) <= 3 * se


def test_alter_changes_only_the_named_decision_on_the_same_random_numbers(
        tmp_path: Path) -> None:
    from agentlog.reentry import steering

    with al.record(tmp_path / "own.zst", seed=5, task="t", mode="w"):
        episode(3)
        own_stop = al.proceed(0.6, name="stop")
    with al.record(tmp_path / "alt.zst", seed=5, task="t", mode="w"), \
            steering(Alter(["pick@1", "stop@0"])):
        episode(3)
        alt_stop = al.proceed(0.6, name="stop")
    own, alt = al.read(tmp_path / "own.zst"), al.read(tmp_path / "alt.zst")
    s_own, s_alt = own.selections(), alt.selections()
    for k in range(3):  # every draw shares its noise
        np.testing.assert_array_equal(own.draws(s_own[k]), alt.draws(s_alt[k]))
    assert s_own[0].choice == s_alt[0].choice and s_own[2].choice == s_alt[2].choice
    keys = np.log(P) + gumbel_draws(list(IDS), 5, "pick", 1, s_own[1].generator, task="t")
    runner_up = int(np.argsort(-keys)[1])
    assert s_own[1].choice == int(np.argmax(keys))
    assert s_alt[1].choice == runner_up != s_own[1].choice
    u = continuation_uniform(5, "stop", 0, s_own[1].generator, task="t")
    assert own_stop == (u < 0.6) and alt_stop == (not own_stop)


def test_resample_redraws_one_decision_on_independent_noise_that_every_arm_shares(
        tmp_path: Path) -> None:
    from agentlog.reentry import steering

    for name in ("a", "b"):  # two arms resampling the same decision: the same redraw
        with al.record(tmp_path / f"{name}.zst", seed=9, task="t", mode="w"), \
                steering(Alter(["pick@1=resample", "stop@0=resample"])):
            episode(3)
            al.proceed(0.5, name="stop")
    first, second = al.read(tmp_path / "a.zst"), al.read(tmp_path / "b.zst")
    assert al.verify(tmp_path / "a.zst").ok
    s = first.selections()
    keys = np.log(P) + gumbel_draws(list(IDS), 9, "pick~resample", 1, s[1].generator,
                                    task="t")
    assert s[1].choice == int(np.argmax(keys))
    np.testing.assert_array_equal(first.draws(s[1]),  # the stream's own draws are kept
                                  gumbel_draws(list(IDS), 9, "pick", 1, s[1].generator,
                                               task="t"))
    u = continuation_uniform(9, "stop~resample", 0, s[1].generator, task="t")
    (c,) = first.continuations()
    assert c.decision == (u < 0.5)
    assert [x.choice for x in s] == [x.choice for x in second.selections()]


@pytest.mark.parametrize(("tokens", "message"), [
    (["pick"], "expected STREAM@K"),
    (["pick@x"], "expected STREAM@K"),
    (["pick@0=sideways"], "unknown alternative 'sideways'"),
    (["pick@0", "pick@0=uniform"], "named twice"),
])
def test_bad_decisions_are_refused_with_the_form_expected(tokens: list[str],
                                                         message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Alter(tokens)


def test_an_alternative_of_the_wrong_kind_fails_the_draw_naming_both(tmp_path: Path) -> None:
    from agentlog.reentry import steering

    with al.record(tmp_path / "x.zst", seed=1, mode="w"), steering(Alter(["pick@0=flip"])), \
            pytest.raises(ValueError, match="'pick' is a selection stream"):
        episode(1)


def test_arms_and_estimate_refuse_what_they_cannot_do() -> None:
    with pytest.raises(ValueError, match="2\\^13 arms"):
        attribution.arms([f"s@{i}" for i in range(13)], shapley="exact")
    with pytest.raises(ValueError, match="no baseline"):
        attribution.estimate({("a",): [1.0, 2.0]})
    with pytest.raises(ValueError, match=r"\['b'\] have no arm of their own"):
        attribution.estimate({(): [1.0, 2.0], ("a",): [1.0, 2.0], ("a", "b"): [0.0, 1.0]})
    with pytest.raises(ValueError, match="needs the arm changing"):
        attribution.estimate({(): [1.0, 2.0], ("a",): [1.5, 2.0], ("b",): [0.0, 1.0]},
                             shapley="exact")
    fx = attribution.estimate({(): [1.0, 2.0, 3.0], ("a",): [1.5, 2.0, 3.5],
                               ("b",): [0.0, 1.0, 2.5]})
    assert fx.shapley is None and "2^2 = 4 arms" in fx.shapley_note
    with pytest.raises(ValueError, match="no Shapley values"):
        fx.confidence_interval("a", "shapley")
    assert len(attribution.arms(["x@0", "y@0"])) == 4  # own, two singletons, both
    assert len(attribution.arms(["x@0", "y@0", "z@0"], shapley="exact")) == 8


def test_grouped_players_attribute_to_a_group_of_decisions(study: Path) -> None:
    groups = {"first two": ["pick@0=pick:2", "pick@1=pick:2"], "last": ["pick@2=pick:1"]}
    fx = attribution.from_traces(study, outcome="y", players=groups)
    assert fx.players == ("first two", "last")
    # Forcing both early picks to "c": 2(v_c − E v) minus the whole expected bonus.
    truth = 2 * (V[2] - MEAN_V) - BONUS * PA2
    assert abs(fx.contrastive["first two"] - truth) <= 3 * fx.standard_error("first two")
    assert fx.n_unused > 0  # arms changing one early pick are no coalition of the groups


def test_a_2x2_arm_folder_is_refused_naming_the_estimator_to_use(tmp_path: Path) -> None:
    meta = {"agentlog.replay": {"factors": {"selection": "agent", "stopping": "adaptive"},
                                "replicate": 0}}
    with al.record(tmp_path / "arms.zst", seed=1, task="t", meta=meta, mode="w"):
        al.score("y", 1.0)
    with pytest.raises(ValueError, match=r"not an alteration arm.*effects_from_traces"):
        attribution.from_traces(tmp_path / "arms.zst", outcome="y")


def test_resampling_attributions_of_bad_runs_match_their_exact_values() -> None:
    """causal-agent-replay's two questions asked through agentlog's arms (the comparison
    script ``tests/benchmarks/bench_attribution_vs_car.py``): hold [0, k) factual and
    re-draw k onward, and the Shapley values of holding decisions, over bad runs only;
    exact values by enumeration."""
    from tests.benchmarks import bench_attribution_vs_car as bench

    exact = bench.truth()
    ours = bench.run_agentlog(runs=60, seed=3)
    for kind in ("contrastive", "shapley"):
        for k in range(bench.N_STEPS):
            se = ours[kind + "_se"][k]
            assert se > 0
            assert abs(ours[kind][k] - exact[kind][k]) <= 3 * se, (kind, k)
    # Shapley efficiency: holding every decision of a bad run gives it back (1 − P(bad)
    # when all are re-drawn), so the values add up to 1 − P(bad) in expectation.
    p_bad = 1 - (1 - bench.P_A[0] * bench.P_A[1]) * bench.P_A[2]
    assert sum(exact["shapley"]) == pytest.approx(1 - p_bad, abs=1e-12)


def test_a_decision_the_reentries_never_reach_is_warned_about_not_reported_as_zero(
        tmp_path: Path) -> None:
    for t in range(4):
        with al.record(tmp_path / "src" / f"t{t}.zst", seed=t, task=f"t{t}", mode="w"):
            episode(2)
    intervene(tmp_path / "src", window="episode", app=APP_HERE, mode="branch",
              arms=attribution.arms(["pick@0=pick:2", "pick@7"]), seeds=range(2),
              scores=outcome, out=tmp_path / "out")
    with pytest.warns(al.DegenerateDataWarning, match=r"changing pick@7 left the outcome "
                                                      r"as it was in every one of the 8"):
        fx = attribution.from_traces(tmp_path / "out", outcome="y")
    assert fx.changed["pick@7"] == 0 and fx.to_dict()["players"]["pick@7"][
        "blocks_changed"] == 0
    assert 0 < fx.changed["pick@0=pick:2"] <= 8


def test_an_intervention_whose_every_unit_failed_says_so_with_the_first_error(
        tmp_path: Path) -> None:
    with al.record(tmp_path / "src" / "t.zst", seed=1, task="t", mode="w"):
        episode(2)
    run = intervene(tmp_path / "src", window="episode", app=APP_HERE, mode="branch",
                    arms=attribution.arms(["pick@0=flip"]), scores=outcome,
                    out=tmp_path / "out")
    assert run.summary.failed == run.units - 1  # the agent's own arm alone ran
    with pytest.raises(ValueError, match=r"only the agent's own arm ran; 1 arm unit\(s\) "
                                         r"failed \(first: ValueError: Alter pick@0=flip"):
        attribution.from_traces(tmp_path / "out", outcome="y")
    only_failed = intervene(tmp_path / "src", window="episode", app=APP_HERE, mode="branch",
                            arms=[alteration_arm(["pick@0=flip"])], scores=outcome,
                            out=tmp_path / "out2")
    assert only_failed.summary.failed == 1
    with pytest.raises(ValueError, match=r"every arm unit in .* failed \(1; first: "
                                         r"ValueError: Alter pick@0=flip: 'pick' is a "
                                         r"selection stream"):
        attribution.from_traces(tmp_path / "out2", outcome="y")


def test_arm_runs_of_several_systems_are_pooled_with_a_warning(tmp_path: Path) -> None:
    for system in ("a", "b"):
        for t in range(3):
            with al.record(tmp_path / "src" / f"{system}{t}.zst", system=system, seed=t,
                           task=f"t{t}", mode="w"):
                episode(2)
    intervene(tmp_path / "src", window="episode", app=APP_HERE, mode="branch",
              arms=attribution.arms(["pick@0"]), scores=outcome, out=tmp_path / "out")
    with pytest.warns(al.DegenerateDataWarning, match=r"come from 2 systems \(a, b\)"):
        fx = attribution.from_traces(tmp_path / "out", outcome="y")
    assert fx.n_blocks == 6 and fx.n_clusters == 3
