"""Behavioural distances ([LBC] eq. 6, Definitions 8–11, Theorem 4, Proposition 2, eq. 20)
against closed forms, hand-solved fixed points, scipy and POT, and brute-force checks of the
pseudometric properties on seeded random kernels."""

from __future__ import annotations

import doctest
import itertools
import subprocess
import sys

import numpy as np
import ot
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, stats

from agentlog.estimators import (
    _contextwise,
    _controllability,
    _fgw,
    _wasserstein,
    distance,
)
from agentlog.estimators.distance import BranchKernel

# ----------------------------------------------------------------------- public surface


def test_public_names_are_exactly_the_documented_ones_in_sorted_order() -> None:
    assert distance.__all__ == sorted(distance.__all__)
    assert distance.__all__ == [
        "BranchKernel", "ContextwiseCmResult", "ControllabilityResult", "FgwResult",
        "contextwise_cm", "controllability_distance", "controllability_operator",
        "fgw_discrepancy", "wasserstein", "wasserstein_many",
    ]


@pytest.mark.parametrize("module", [distance, _wasserstein, _controllability])
def test_docstring_examples_run(module: object) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)  # type: ignore[arg-type]
    assert result.attempted > 0
    assert result.failed == 0


def test_importing_distance_imports_neither_scipy_nor_pot() -> None:
    code = ("import sys, agentlog, agentlog.estimators.distance as d;"
            "d.BranchKernel([0.0], [[(0, 0, 1.0)]]);"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('scipy', 'ot')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


# ----------------------------------------------------------------------- Wasserstein (eq. 6)


@pytest.mark.parametrize("seed", range(6))
def test_wasserstein_equals_scipy_in_one_dimension_with_and_without_weights(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=rng.integers(1, 40)), rng.normal(1.0, 2.0, size=rng.integers(1, 40))
    wx, wy = rng.random(x.size), rng.random(y.size)
    assert distance.wasserstein(x, y) == pytest.approx(stats.wasserstein_distance(x, y),
                                                       rel=1e-12, abs=1e-12)
    assert distance.wasserstein(x, y, a=wx, b=wy) == pytest.approx(
        stats.wasserstein_distance(x, y, wx, wy), rel=1e-12, abs=1e-12)


def test_wasserstein_p_equals_the_sorted_matching_for_equal_uniform_samples() -> None:
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=25), rng.exponential(size=25)
    for p in (1, 2, 3.5):
        expected = np.mean(np.abs(np.sort(x) - np.sort(y)) ** p) ** (1 / p)
        assert distance.wasserstein(x, y, p=p) == pytest.approx(expected, rel=1e-12)


def test_wasserstein_in_several_dimensions_is_the_optimal_assignment_for_uniform_samples() -> None:
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(12, 3)), rng.normal(0.5, 1.0, size=(12, 3))
    M = np.linalg.norm(x[:, None, :] - y[None, :, :], axis=2)
    rows, cols = optimize.linear_sum_assignment(M)
    assert distance.wasserstein(x, y) == pytest.approx(M[rows, cols].mean(), rel=1e-12)


def test_wasserstein_takes_a_callable_ground_cost_or_a_cost_matrix_with_the_same_value() -> None:
    words_a, words_b = ["search", "read", "write"], ["read", "write", "write", "cite"]

    def cost(u: str, v: str) -> float:
        return 0.0 if u == v else 1.0

    M = [[cost(u, v) for v in words_b] for u in words_a]
    by_callable = distance.wasserstein(words_a, words_b, cost=cost)
    assert by_callable == distance.wasserstein(cost=M)
    # a third of the mass ("search") must move, and 1/3 − 1/4 of "read"'s excess
    assert by_callable == pytest.approx(1 - (1 / 4 + 1 / 3))


def test_a_translated_law_is_as_far_as_the_translation() -> None:
    x = np.random.default_rng(3).normal(size=(20, 2))
    assert distance.wasserstein(x, x + np.array([3.0, 4.0])) == pytest.approx(5.0, rel=1e-12)
    assert distance.wasserstein(x, x) == 0.0


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"x": [0.0, np.nan], "y": [1.0]}, "`x` must be finite"),
    ({"x": [0.0], "y": [1.0, np.inf]}, "`y` must be finite"),
    ({"x": [0.0, 1.0], "y": [1.0], "a": [0.5, -0.5]}, "`a` must be non-negative"),
    ({"x": [0.0, 1.0], "y": [1.0], "a": [0.0, 0.0]}, "`a` must have positive total mass"),
    ({"x": [0.0, 1.0], "y": [1.0], "b": [0.5, 0.5]}, r"`b` must have one weight per support"),
    ({"x": [0.0, 1.0], "y": [1.0], "a": [np.nan, 1.0]}, "`a` must be finite"),
    ({"x": np.zeros((2, 2)), "y": np.zeros((2, 3))}, "`x` and `y` must live in the same space"),
    ({"x": [0.0, 1.0], "cost": np.ones((3, 2))}, "`x` has 2 points but `cost` has shape"),
    ({"cost": [[0.0, -1.0]]}, "`cost` must be non-negative"),
    ({"cost": [[0.0, np.nan]]}, "`cost` must be finite"),
    ({"x": [0.0], "y": [1.0], "p": 0.5}, "`p` must be a finite number ≥ 1"),
    ({"x": [0.0]}, "pass samples `x` and `y`"),
    ({"x": [], "y": [1.0]}, "`x` must have shape"),
])
def test_wasserstein_rejects_bad_input_naming_the_parameter(kwargs: dict[str, object],
                                                            match: str) -> None:
    with pytest.raises(ValueError, match=match):
        distance.wasserstein(**kwargs)  # type: ignore[arg-type]


def test_wasserstein_many_equals_ot_emd2_on_stacked_and_ragged_problems() -> None:
    rng = np.random.default_rng(4)
    stacked = rng.random((50, 3, 4))
    a, b = rng.dirichlet(np.ones(3), 50), rng.dirichlet(np.ones(4), 50)
    expected = [ot.emd2(a[k], b[k], stacked[k]) for k in range(50)]
    np.testing.assert_allclose(distance.wasserstein_many(stacked, a=a, b=b), expected,
                               rtol=1e-12, atol=1e-15)
    ragged = [rng.random((rng.integers(1, 6), rng.integers(1, 6))) for _ in range(60)]
    expected = [ot.emd2(np.full(M.shape[0], 1 / M.shape[0]), np.full(M.shape[1], 1 / M.shape[1]),
                        M) for M in ragged]
    np.testing.assert_allclose(distance.wasserstein_many(ragged), expected, rtol=1e-12,
                               atol=1e-15)
    strided = rng.random((4, 60))[::2, ::2]  # weights that are views with strides
    np.testing.assert_allclose(
        distance.wasserstein_many(stacked[:2, :, :2], a=[strided[0, :3], strided[1, :3]],
                                  b=[strided[0, 3:5], strided[1, 3:5]]),
        [ot.emd2(strided[k, :3] / strided[k, :3].sum(), strided[k, 3:5] / strided[k, 3:5].sum(),
                 stacked[k, :, :2]) for k in range(2)], rtol=1e-12)
    assert distance.wasserstein_many(ragged, p=2)[7] == pytest.approx(
        distance.wasserstein(cost=ragged[7], p=2), rel=1e-12)


def test_wasserstein_many_rejects_bad_problems_naming_the_index() -> None:
    good = np.ones((2, 2))
    with pytest.raises(ValueError, match=r"`costs\[1\]` must be finite"):
        distance.wasserstein_many([good, [[np.nan]]])
    with pytest.raises(ValueError, match=r"`costs\[0\]` must be finite and non-negative"):
        distance.wasserstein_many(-np.ones((3, 2, 2)))
    with pytest.raises(ValueError, match=r"`a\[1\]` must be non-negative"):
        distance.wasserstein_many([good, good], a=[None, [1.0, -1.0]])
    with pytest.raises(ValueError, match=r"`b` must hold one weight vector per problem"):
        distance.wasserstein_many([good, good], b=[None])


def test_the_fast_network_simplex_matches_the_public_ot_emd() -> None:
    solve = _wasserstein._emd_solver()
    rng = np.random.default_rng(5)
    for _ in range(200):
        n, m = rng.integers(2, 8, 2)
        a, b, M = rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(m)), rng.random((n, m))
        plan, value = solve(a, b, M)
        assert value == pytest.approx(ot.emd2(a, b, M), rel=1e-12, abs=1e-15)
        np.testing.assert_allclose(plan.sum(axis=1), a, atol=1e-14)
        np.testing.assert_allclose(plan.sum(axis=0), b, atol=1e-14)


def test_every_function_gives_the_same_numbers_on_the_public_pot_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback for a POT whose network simplex is laid out differently."""
    rng = np.random.default_rng(6)
    a, b = random_kernel(rng, 6, 3, 4), random_kernel(rng, 5, 3, 4)
    costs = [rng.random((3, 4)) for _ in range(5)]
    exits = [rng.random((2, 3)) for _ in range(3)]
    fast = (distance.controllability_distance(a, b, gamma=0.9, beta=0.5).distance,
            distance.wasserstein_many(costs), distance.contextwise_cm(exits, 0.1).value)
    for module in (_wasserstein, _controllability, _contextwise, _fgw):
        monkeypatch.setattr(module, "_emd_solver", lambda: _wasserstein._emd_public)
    public = (distance.controllability_distance(a, b, gamma=0.9, beta=0.5).distance,
              distance.wasserstein_many(costs), distance.contextwise_cm(exits, 0.1).value)
    for x, y in zip(fast, public, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-14)


# ----------------------------------------------------------------------- branch kernels


def test_a_branch_kernel_keeps_positive_branches_and_round_trips_its_dense_form() -> None:
    k = BranchKernel([[0.0, 1.0], [1.0, 0.0]], [[(0, 1, 0.25), (1, 1, 0.75), (2, 0, 0.0)],
                                                [(2, 1, 1.0)]], n_labels=4)
    assert (k.n_states, k.n_labels, k.source.tolist()) == (2, 4, [0, 0, 1])
    again = BranchKernel.from_transitions(k.interface, k.transitions())
    for field in ("source", "label", "target", "probability"):
        np.testing.assert_array_equal(getattr(again, field), getattr(k, field))
    with pytest.raises(ValueError, match="read-only"):
        k.probability[0] = 1.0


def test_from_counts_normalises_each_state_and_makes_unlogged_states_absorbing() -> None:
    counts = np.zeros((3, 2, 3))
    counts[0, 0, 1], counts[0, 1, 2], counts[1, 0, 2] = 3, 1, 5
    k = BranchKernel.from_counts([0.0, 0.5, 1.0], counts, absorbing_label=1)
    T = k.transitions()
    assert T[0, 0, 1] == 0.75 and T[0, 1, 2] == 0.25 and T[1, 0, 2] == 1.0
    assert T[2, 1, 2] == 1.0
    with pytest.raises(ValueError, match=r"`counts` has no logged branch for state\(s\) \[2\]"):
        BranchKernel.from_counts([0.0, 0.5, 1.0], counts)


@pytest.mark.parametrize(("branches", "match"), [
    ([[(0, 0, 0.5)]], r"`branches` is not stochastic: the branch probabilities of state 0 sum"),
    ([[(0, 0, 0.5), (0, 0, 0.6)]], "`branches` is not stochastic"),
    ([[(0, 0, 1.5), (1, 0, -0.5)]], "`branches` probabilities must be non-negative"),
    ([[(0, 0, np.nan)]], "`branches` probabilities must be finite"),
    ([[]], r"`branches\[0\]` is empty"),
    ([[(0, 3, 1.0)]], "`branches` next states must be in 0..0"),
    ([[(-1, 0, 1.0)]], r"`branches\[0\] label` must be a non-negative int"),
    ([[(0, 0, 1.0)], [(0, 0, 1.0)]], "`branches` must list the branches of each of the 1"),
])
def test_a_branch_kernel_rejects_non_stochastic_or_malformed_branches(
        branches: list[list[tuple[int, int, float]]], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        BranchKernel([0.0], branches)


def test_a_branch_kernel_rejects_bad_interfaces_and_dense_transitions() -> None:
    with pytest.raises(ValueError, match="`interface` must be finite"):
        BranchKernel([np.nan], [[(0, 0, 1.0)]])
    with pytest.raises(ValueError, match="`transitions` is not stochastic"):
        BranchKernel.from_transitions([0.0, 1.0], np.full((2, 1, 2), 0.4))
    with pytest.raises(ValueError, match=r"`transitions` must have shape \(n_states, n_labels"):
        BranchKernel.from_transitions([0.0, 1.0], np.full((2, 1, 3), 1 / 3))
    with pytest.raises(ValueError, match="`transitions` must be finite"):
        BranchKernel.from_transitions([0.0], [[[np.nan]]])


# ----------------------------------------------------------------------- Definition 8, Theorem 4


def absorbing(z: float, label: int = 0, n_labels: int = 2) -> BranchKernel:
    return BranchKernel([z], [[(label, 0, 1.0)]], n_labels=n_labels)


@pytest.mark.parametrize(("gamma", "beta", "z", "same_label"),
                         [(0.9, 0.5, 1.0, True), (0.5, 0.2, 0.3, False), (0.0, 1.0, 0.7, False),
                          (0.95, 0.05, 0.0, False)])
def test_two_absorbing_histories_reach_the_closed_form_fixed_point(
        gamma: float, beta: float, z: float, same_label: bool) -> None:
    """d = (1−γ)z + γ(β·1{ℓ≠ℓ'} + (1−β)d), so d† = ((1−γ)z + γβ·1{ℓ≠ℓ'}) / (1 − γ(1−β))."""
    r = distance.controllability_distance(absorbing(0.0), absorbing(z, 0 if same_label else 1),
                                          gamma=gamma, beta=beta)
    expected = ((1 - gamma) * z + gamma * beta * (not same_label)) / (1 - gamma * (1 - beta))
    assert r.distance[0, 0] == pytest.approx(expected, abs=1e-8)
    assert r.upper[0, 0] == pytest.approx(expected, abs=1e-8)
    assert r.converged and r.bound == pytest.approx(gamma * (1 - beta))


def test_the_operator_on_a_three_state_example_matches_the_hand_computed_step() -> None:
    """One step of eq. 17 with the optimal coupling of two two-branch laws worked by hand."""
    a = BranchKernel([0.0, 0.2, 1.0], [[(0, 1, 0.5), (1, 2, 0.5)], [(0, 2, 1.0)],
                                       [(1, 2, 1.0)]])
    b = BranchKernel([0.1, 0.9], [[(0, 0, 0.3), (1, 1, 0.7)], [(1, 1, 1.0)]])
    gamma, beta = 0.8, 0.25
    d = np.array([[0.1, 0.6], [0.3, 0.2], [0.9, 0.4]])
    lifted = np.array([  # rows: A's branches of state 0; columns: B's branches of state 0
        [beta * 0 + (1 - beta) * d[1, 0], beta * 1 + (1 - beta) * d[1, 1]],
        [beta * 1 + (1 - beta) * d[2, 0], beta * 0 + (1 - beta) * d[2, 1]],
    ])
    # couplings of (0.5, 0.5) and (0.3, 0.7): [[t, 0.5 − t], [0.3 − t, 0.2 + t]], t ∈ [0, 0.3]
    w00 = min(t * lifted[0, 0] + (0.5 - t) * lifted[0, 1] + (0.3 - t) * lifted[1, 0]
              + (0.2 + t) * lifted[1, 1] for t in (0.0, 0.3))
    Td = distance.controllability_operator(a, b, d, gamma=gamma, beta=beta)
    assert Td[0, 0] == pytest.approx((1 - gamma) * 0.1 + gamma * w00, abs=1e-15)
    # A's state 1 is a point mass: the product coupling is the only one
    w10 = 0.3 * (beta * 0 + (1 - beta) * d[2, 0]) + 0.7 * (beta * 1 + (1 - beta) * d[2, 1])
    assert Td[1, 0] == pytest.approx((1 - gamma) * 0.1 + gamma * w10, abs=1e-15)
    assert Td[2, 1] == pytest.approx((1 - gamma) * 0.1 + gamma * (1 - beta) * d[2, 1], abs=1e-15)


def test_the_fixed_point_of_a_two_state_example_is_the_hand_solved_one() -> None:
    """A: step to a terminal history. B: the same step half the time, else it stays put.

    With γ = 0.9, β = 0.5 (labels: 0 step, 1 stop): d(s1, t1) = 0.45 d(s1, t1) = 0;
    d(s1, t0) = 0.1 + 0.9(½(½ + ½·0) + ½(½ + ½ d(s1, t0))) = 0.55 + 0.225 d(s1, t0);
    d(s0, t1) = 0.1 + 0.9·½ = 0.55; d(s0, t0) = 0.9·½·½ d(s1, t0).
    """
    a = BranchKernel([0.0, 1.0], [[(0, 1, 1.0)], [(1, 1, 1.0)]])
    b = BranchKernel([0.0, 1.0], [[(0, 1, 0.5), (0, 0, 0.5)], [(1, 1, 1.0)]])
    r = distance.controllability_distance(a, b, gamma=0.9, beta=0.5, tol=1e-12)
    d10 = 0.55 / (1 - 0.225)
    expected = [[0.9 * 0.25 * d10, 0.55], [d10, 0.0]]
    np.testing.assert_allclose(r.distance, expected, atol=1e-11)
    np.testing.assert_allclose(r.upper, expected, atol=1e-11)
    assert r.distance[1, 1] == 0.0


def random_kernel(rng: np.random.Generator, n: int, n_labels: int, max_branches: int,
                  n_features: int = 1) -> BranchKernel:
    branches = []
    for _ in range(n):
        k = int(rng.integers(1, max_branches + 1))
        probs = rng.dirichlet(np.ones(k))
        branches.append([(int(rng.integers(n_labels)), int(rng.integers(n)), float(q))
                         for q in probs])
    return BranchKernel(rng.random((n, n_features)) * 0.8, branches, n_labels=n_labels)


SETTINGS = [(0.9, 0.5), (0.6, 0.3), (0.99, 0.5), (0.3, 0.9), (0.8, 0.1)]


@pytest.mark.parametrize(("gamma", "beta"), SETTINGS)
@pytest.mark.parametrize("seed", range(4))
def test_random_kernels_contract_at_most_at_the_bound_and_reach_one_fixed_point(
        gamma: float, beta: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = random_kernel(rng, int(rng.integers(3, 12)), 3, 4, n_features=2)
    b = random_kernel(rng, int(rng.integers(3, 12)), 3, 4, n_features=2)
    r = distance.controllability_distance(a, b, gamma=gamma, beta=beta)
    assert r.converged
    assert r.bound == pytest.approx(gamma * (1 - beta))
    # rounding of the transport values moves a measured ratio by ≲1e-10 (documented)
    assert r.contraction_ratio <= r.bound + 1e-9
    assert r.sup_gap <= 1e-6
    # monotone operator: the run from 0 stays below the run from 1
    assert (r.distance <= r.upper + 1e-12).all()
    assert ((r.distance >= 0) & (r.upper <= 1)).all()


@pytest.mark.parametrize("seed", range(5))
def test_the_operator_contracts_random_inputs_by_at_most_gamma_one_minus_beta(seed: int) -> None:
    rng = np.random.default_rng(10 + seed)
    a, b = random_kernel(rng, 8, 3, 4), random_kernel(rng, 6, 3, 4)
    gamma, beta = 0.9, 0.5
    for _ in range(20):
        d1, d2 = rng.random((8, 6)), rng.random((8, 6))
        step = np.abs(distance.controllability_operator(a, b, d1, gamma=gamma, beta=beta)
                      - distance.controllability_operator(a, b, d2, gamma=gamma, beta=beta))
        assert step.max() <= gamma * (1 - beta) * np.abs(d1 - d2).max() + 1e-15


def assert_pseudometric_across(kernels: list[BranchKernel], gamma: float, beta: float) -> int:
    """Symmetry, zero self-distance and every triangle across the systems (Proposition 2).

    Each limit sits below d† by at most e = tol·q/(1−q), q = γ(1−β) (a run stops after a step
    of at most tol), so a triangle may be off by 2e and a symmetric pair by e, plus rounding.
    """
    tol = 1e-11
    q = gamma * (1 - beta)
    e = tol * q / (1 - q) + 1e-13
    d = {(i, j): distance.controllability_distance(ki, kj, gamma=gamma, beta=beta,
                                                   tol=tol).distance
         for (i, ki), (j, kj) in itertools.product(enumerate(kernels), repeat=2)}
    n_triangles = 0
    for i, j in d:
        np.testing.assert_allclose(d[i, j], d[j, i].T, rtol=0, atol=e)
    for i in range(len(kernels)):
        assert np.abs(np.diag(d[i, i])).max() <= 1e-13
    for i, j, k in itertools.product(range(len(kernels)), repeat=3):
        # d_ik[a, c] ≤ d_ij[a, b] + d_jk[b, c] for every a, b, c
        through = (d[i, j][:, :, None] + d[j, k][None, :, :]).min(axis=1)
        assert (d[i, k] <= through + 2 * e).all(), (i, j, k, (d[i, k] - through).max())
        n_triangles += d[i, j].size * d[j, k].shape[1]
    return n_triangles


@pytest.mark.parametrize(("gamma", "beta"), SETTINGS[:3])
@pytest.mark.parametrize("seed", range(3))
def test_the_distance_is_a_pseudometric_across_a_panel_of_random_systems(
        gamma: float, beta: float, seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    kernels = [random_kernel(rng, int(rng.integers(2, 7)), 3, 3) for _ in range(3)]
    assert assert_pseudometric_across(kernels, gamma, beta) > 500


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), gamma=st.floats(0.0, 0.95),
       beta=st.floats(0.05, 1.0), n_labels=st.integers(1, 3))
def test_any_small_panel_gives_a_pseudometric_and_a_unique_fixed_point(
        seed: int, gamma: float, beta: float, n_labels: int) -> None:
    rng = np.random.default_rng(seed)
    kernels = [random_kernel(rng, int(rng.integers(1, 5)), n_labels, 3) for _ in range(3)]
    assert_pseudometric_across(kernels, gamma, beta)
    r = distance.controllability_distance(kernels[0], kernels[1], gamma=gamma, beta=beta)
    assert r.converged and r.sup_gap <= 1e-6 and r.contraction_ratio <= r.bound + 1e-9


def test_an_explicit_label_and_interface_cost_compare_different_spaces() -> None:
    a = BranchKernel([[0.0, 0.0]], [[(0, 0, 0.5), (1, 0, 0.5)]])       # 2 labels, 2 features
    b = BranchKernel([0.3], [[(0, 0, 1.0)]], n_labels=3)               # 3 labels, 1 feature
    with pytest.raises(ValueError, match="label spaces differ"):
        distance.controllability_distance(a, b, gamma=0.5, beta=0.5)
    label_cost = [[0.0, 1.0, 1.0], [0.5, 1.0, 1.0]]
    with pytest.raises(ValueError, match="interfaces live in different spaces"):
        distance.controllability_distance(a, b, gamma=0.5, beta=0.5, label_cost=label_cost)
    r = distance.controllability_distance(a, b, gamma=0.5, beta=0.5, label_cost=label_cost,
                                          interface_cost=[[0.3]], tol=1e-12)
    # d = ½·0.3 + ½(β·(½·0 + ½·0.5) + (1−β)d) = 0.15 + 0.0625 + 0.25 d
    assert r.distance[0, 0] == pytest.approx(0.2125 / 0.75, abs=1e-11)


def test_whole_system_controllability_couples_initial_laws_within_each_context() -> None:
    a = BranchKernel([0.0, 1.0], [[(0, 0, 1.0)], [(0, 1, 1.0)]])
    b = BranchKernel([0.0, 1.0], [[(0, 0, 1.0)], [(0, 1, 1.0)]])
    r = distance.controllability_distance(a, b, gamma=0.5, beta=0.5)
    far = r.distance[0, 1]
    # context 1: same start, context 2: opposite starts
    iota_a, iota_b = [[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]
    assert r.whole_system(iota_a, iota_b) == pytest.approx(far / 2)
    assert r.whole_system(iota_a, iota_b, uniform=True) == pytest.approx(far)
    assert r.whole_system(iota_a, iota_b, weights=[3, 1]) == pytest.approx(far / 4)
    # a pooled coupling would pair the two contexts' starts crosswise and reach 0
    assert r.whole_system([[0.5, 0.5]], [[0.5, 0.5]]) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match=r"`initial_a\[0\]` must be non-negative"):
        r.whole_system([[-1.0, 2.0]], [[1.0, 0.0]])


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"gamma": 1.0, "beta": 0.5}, r"`gamma` \(continuation weight γ\) must be in \[0, 1\)"),
    ({"gamma": 0.5, "beta": 0.0}, r"`beta` \(label weight β\) must be in \(0, 1\]"),
    ({"gamma": np.nan, "beta": 0.5}, "`gamma`"),
    ({"gamma": 0.5, "beta": 0.5, "label_cost": [[0.0, 2.0], [2.0, 0.0]]},
     r"`label_cost` must take values in \[0, 1\]"),
    ({"gamma": 0.5, "beta": 0.5, "label_cost": [[0.0]]}, "`label_cost` must have shape"),
    ({"gamma": 0.5, "beta": 0.5, "interface_cost": [[np.nan, 0], [0, 0]]},
     "`interface_cost` must be finite"),
    ({"gamma": 0.5, "beta": 0.5, "interface_cost": [[0.0]]}, "`interface_cost` must have shape"),
    ({"gamma": 0.5, "beta": 0.5, "tol": 0.0}, "`tol` must be a positive number"),
    ({"gamma": 0.5, "beta": 0.5, "max_iter": 0}, "`max_iter` must be a positive int"),
])
def test_controllability_distance_rejects_bad_settings_naming_the_parameter(
        kwargs: dict[str, object], match: str) -> None:
    k = BranchKernel([0.0, 1.0], [[(0, 1, 1.0)], [(1, 1, 1.0)]])
    with pytest.raises(ValueError, match=match):
        distance.controllability_distance(k, k, **kwargs)  # type: ignore[arg-type]


def test_controllability_rejects_a_dense_array_in_place_of_a_kernel_and_a_bad_d() -> None:
    k = absorbing(0.0)
    with pytest.raises(ValueError, match="`kernel_b` must be a BranchKernel"):
        distance.controllability_distance(k, np.ones((1, 1, 1)), gamma=0.5,  # type: ignore[arg-type]
                                          beta=0.5)
    with pytest.raises(ValueError, match=r"`d` must take values in \[0, 1\]"):
        distance.controllability_operator(k, k, [[1.5]], gamma=0.5, beta=0.5)
    with pytest.raises(ValueError, match=r"`d` must have shape"):
        distance.controllability_operator(k, k, [[0.5, 0.5]], gamma=0.5, beta=0.5)


def test_a_run_cut_short_by_max_iter_says_it_did_not_converge() -> None:
    rng = np.random.default_rng(7)
    a, b = random_kernel(rng, 5, 2, 3), random_kernel(rng, 5, 2, 3)
    r = distance.controllability_distance(a, b, gamma=0.9, beta=0.1, max_iter=3)
    assert not r.converged and r.iterations == (3, 3)
    assert r.sup_gap > 1e-3


# ----------------------------------------------------------------------- Definition 11, F.6


def test_contextwise_cm_with_one_entry_per_task_is_the_mean_bracket_of_appendix_f6() -> None:
    entry, exit_ = np.array([0.0, 0.2, 0.1]), np.array([0.3, 0.5, 0.1])
    r = distance.contextwise_cm(exit_, entry, lambda_in=0.5)
    per_task = 0.5 * entry + 0.5 * exit_
    assert r.value == pytest.approx(per_task.mean())
    assert r.sup == pytest.approx(per_task.max())
    assert not r.bracketed and r.n_contexts == 3
    weighted = distance.contextwise_cm(exit_, entry, lambda_in=0.25, weights=[0, 1, 1])
    assert weighted.value == pytest.approx(np.mean((0.25 * entry + 0.75 * exit_)[1:]))
    assert weighted.sup == pytest.approx(max(0.25 * entry[1:] + 0.75 * exit_[1:]))


def test_an_entry_known_only_through_the_reference_is_bracketed_by_the_triangle_inequality(
) -> None:
    e_a, e_b, exit_ = np.array([0.3, 0.1]), np.array([0.1, 0.1]), np.array([0.4, 0.6])
    r = distance.contextwise_cm(exit_, entry_reference=(e_a, e_b))
    assert r.bracketed
    assert r.low == pytest.approx(np.mean(0.5 * np.abs(e_a - e_b) + 0.5 * exit_))
    assert r.high == pytest.approx(np.mean(0.5 * (e_a + e_b) + 0.5 * exit_))
    assert r.sup_low == pytest.approx(0.5 * 0.0 + 0.5 * 0.6)
    assert r.sup_high == pytest.approx(0.5 * 0.2 + 0.5 * 0.6)
    with pytest.raises(ValueError, match=r"only known to lie in \[0\.3, 0\.4\]"):
        _ = r.value


def test_several_entries_per_context_are_coupled_within_the_context_only() -> None:
    """Two entries per system and task on a line; the exit distance of a pair is |h_A − h_B|.

    Task-matched, each task's entries couple among themselves; a pooled coupling (eq. 19)
    may pair entries across tasks and can only be smaller (C_M ≤ C_M^ρ).
    """
    rng = np.random.default_rng(8)
    ent_a, ent_b = rng.random((4, 2)), rng.random((4, 2)) + 0.3
    ex_a, ex_b = rng.random((4, 2)), rng.random((4, 2))
    entry = [np.abs(ent_a[c][:, None] - ent_b[c][None, :]) for c in range(4)]
    exit_ = [np.abs(ex_a[c][:, None] - ex_b[c][None, :]) for c in range(4)]
    r = distance.contextwise_cm(exit_, entry, lambda_in=0.5)
    expected = np.mean([ot.emd2(np.full(2, 0.5), np.full(2, 0.5), 0.5 * entry[c] + 0.5 * exit_[c])
                        for c in range(4)])
    assert r.value == pytest.approx(expected, rel=1e-12)
    pooled = 0.5 * np.abs(ent_a.ravel()[:, None] - ent_b.ravel()[None, :]) + 0.5 * np.abs(
        ex_a.ravel()[:, None] - ex_b.ravel()[None, :])
    assert distance.wasserstein(cost=pooled) <= r.value + 1e-12
    assert r.sup >= max(r.per_context_low)


@pytest.mark.parametrize(("args", "kwargs", "match"), [
    (([0.1, np.nan], 0.0), {}, r"`exit_distance\[1\]` must be finite"),
    (([0.1, -0.2], 0.0), {}, r"`exit_distance\[1\]` must be non-negative"),
    (([0.1], [np.nan]), {}, r"`entry_distance\[0\]` must be finite"),
    (([0.1], 0.0), {"lambda_in": 1.0}, r"`lambda_in` must be in \(0, 1\)"),
    (([0.1],), {}, "pass exactly one of `entry_distance`"),
    (([0.1], 0.0), {"entry_reference": ([0.1], [0.2])}, "pass exactly one of"),
    (([0.1, 0.2], [0.1]), {}, "`entry_distance` must cover the 2 contexts"),
    (([np.ones((2, 2))], [np.ones((2, 3))]), {}, r"context 0: the entry term has shape \(2, 3\)"),
    (([0.1], 0.0), {"weights": [-1.0]}, "`weights` must be non-negative"),
    (([0.1],), {"entry_reference": ([0.1], [-0.2])}, r"`entry_reference\[1\]\[0\]` must be"),
    (([], 0.0), {}, "`exit_distance` holds no context"),
])
def test_contextwise_cm_rejects_bad_input_naming_the_parameter(
        args: tuple[object, ...], kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        distance.contextwise_cm(*args, **kwargs)  # type: ignore[arg-type]


# ----------------------------------------------------------------------- eq. 20 (FGW)


def eq20_brute_force(C: np.ndarray, R1: np.ndarray, R2: np.ndarray, G: np.ndarray,
                     lam: float) -> float:
    quad = sum((R1[i, j] - R2[k, m]) ** 2 * G[i, k] * G[j, m]
               for i, j in itertools.product(range(R1.shape[0]), repeat=2)
               for k, m in itertools.product(range(R2.shape[0]), repeat=2))
    return float((1 - lam) * np.sum(C * G) + lam * quad)


def small_graph_pair(seed: int, n: int = 4, m: int = 5) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    C = rng.random((n, m))
    R1, R2 = rng.integers(0, 3, (n, n)).astype(float), rng.integers(0, 3, (m, m)).astype(float)
    return C, R1, R2


@pytest.mark.parametrize("seed", range(4))
def test_fgw_reports_eq_20_at_a_feasible_coupling_no_worse_than_pots_default_start(
        seed: int) -> None:
    C, R1, R2 = small_graph_pair(seed)
    rng = np.random.default_rng(seed)
    a, b = rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(5))
    r = distance.fgw_discrepancy(C, R1, R2, lambda_g=0.6, a=a, b=b)
    np.testing.assert_allclose(r.plan.sum(axis=1), a, atol=1e-9)
    np.testing.assert_allclose(r.plan.sum(axis=0), b, atol=1e-9)
    assert r.value == pytest.approx(max(eq20_brute_force(C, R1, R2, r.plan, 0.6), 0.0),
                                    abs=1e-12)
    assert r.value == r.start_values.min() and r.start_values.shape == (8,)
    pot_default = ot.gromov.fused_gromov_wasserstein2(C, R1, R2, a, b, alpha=0.6)
    assert r.value <= float(pot_default) + 1e-9
    product = np.outer(a, b)
    assert r.value <= eq20_brute_force(C, R1, R2, product, 0.6) + 1e-12


def test_fgw_finds_zero_between_a_graph_and_a_relabelled_copy() -> None:
    rng = np.random.default_rng(9)
    R = rng.integers(0, 3, (6, 6)).astype(float)
    perm = rng.permutation(6)
    features = rng.random((6, 2))
    C = np.linalg.norm(features[:, None, :] - features[perm][None, :, :], axis=2)
    r = distance.fgw_discrepancy(C, R, R[np.ix_(perm, perm)], lambda_g=0.5)
    assert r.value <= 1e-12


def test_fgw_without_structure_is_the_wasserstein_distance_of_the_node_costs() -> None:
    C, R1, R2 = small_graph_pair(11)
    r = distance.fgw_discrepancy(C, R1, R2, lambda_g=0.0)
    assert r.value == pytest.approx(distance.wasserstein(cost=C), rel=1e-12)


def test_fgw_with_structure_only_is_gromov_wasserstein_from_above() -> None:
    C, R1, R2 = small_graph_pair(12)
    r = distance.fgw_discrepancy(C, R1, R2, lambda_g=1.0, n_starts=4, seed=3)
    assert r.value <= float(ot.gromov.gromov_wasserstein2(R1, R2)) + 1e-9
    assert r.value == pytest.approx(eq20_brute_force(C, R1, R2, r.plan, 1.0), abs=1e-12)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"relation_a": np.zeros((3, 3))}, r"`relation_a` must have shape \(4, 4\)"),
    ({"relation_b": np.full((5, 5), np.nan)}, "`relation_b` must be finite"),
    ({"cost": np.full((4, 5), -1.0)}, "`cost` must be non-negative"),
    ({"a": [1.0, 1.0, 1.0, -1.0]}, "`a` must be non-negative"),
    ({"b": [1.0, 1.0]}, r"`b` must have one weight per support point, shape \(5,\)"),
    ({"lambda_g": 1.5}, r"`lambda_g` \(λ_G\) must be in \[0, 1\]"),
    ({"n_starts": 0}, "`n_starts` must be a positive int"),
])
def test_fgw_rejects_bad_input_naming_the_parameter(kwargs: dict[str, object],
                                                    match: str) -> None:
    C, R1, R2 = small_graph_pair(0)
    args: dict[str, object] = {"cost": C, "relation_a": R1, "relation_b": R2, "lambda_g": 0.5}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        distance.fgw_discrepancy(**args)  # type: ignore[arg-type]
