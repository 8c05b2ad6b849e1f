"""Attribution bounds and certificates ([LBC] Theorem 1–3, Proposition 1, F.1) against
the paper's worked numbers, closed forms and seeded simulations whose truth is known."""

from __future__ import annotations

import doctest
import math
import subprocess
import sys
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from agentlog import DegenerateDataWarning
from agentlog.estimators import _nuisance, bounds

INF = math.inf


# ----------------------------------------------------------------------- public surface


def test_public_names_are_exactly_the_documented_ones_in_sorted_order() -> None:
    assert bounds.__all__ == sorted(bounds.__all__)
    assert bounds.__all__ == [
        "CompositionBound", "GroupCoverage", "NuisanceRadius", "PropagatedBound",
        "SensitivityFit", "UpperCertificate", "UtilityBound", "composition_bound",
        "fit_sensitivity", "nuisance_radius", "propagated_bound", "upper_certificate",
        "utility_bound",
    ]


@pytest.mark.parametrize("module", [bounds, _nuisance])
def test_docstring_examples_run(module: object) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)  # type: ignore[arg-type]
    assert result.attempted > 0
    assert result.failed == 0


def test_importing_bounds_imports_neither_scipy_nor_pot() -> None:
    code = ("import sys, agentlog, agentlog.estimators.bounds as b;"
            "b.nuisance_radius(L_M=1.0, eps_in=(0.1, 0.2));"
            "b.fit_sensitivity([1.0, 2.0], [0.5, 0.5], groups=['a', 'b']);"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('scipy', 'ot')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------- Theorem 1: the paper's numbers


def writing_score_a(e: float) -> float:
    return 0.8 * e  # [LBC] §3.1: f_A(e) = 0.8 e


def writing_score_b(e: float) -> float:
    return 0.5 * e  # f_B(e) = 0.5 e


def test_motivating_example_radius_is_029_and_covers_the_019_discrepancy() -> None:
    """§3.1/§3.3: e_A = 0.2, e_B = 0.4, common bundle e = 0.5, L_M = 0.8 and 0.5."""
    observed = writing_score_a(0.2) - writing_score_b(0.4)
    controlled = writing_score_a(0.5) - writing_score_b(0.5)
    assert observed == pytest.approx(-0.04)
    assert controlled == pytest.approx(0.15)
    r = bounds.nuisance_radius(L_s=1.0, L_C=1.0, L_M=(0.8, 0.5), eps_in=(0.3, 0.1),
                               xi=(0.0, 0.0), eps_cont=(0.0, 0.0), eps_protocol=0.0,
                               entry_matched=(False, False))
    assert r.value == pytest.approx(0.29, abs=1e-12)
    assert r.terms["entry_A"] == pytest.approx(0.24)
    assert r.terms["entry_B"] == pytest.approx(0.05)
    assert abs(observed - controlled) == pytest.approx(0.19)
    assert abs(observed - controlled) <= r.value
    # §3.4: the 0.04 gap lies inside the radius, so more tasks alone cannot certify it.
    assert abs(observed) < r.value


def test_motivating_example_with_the_same_bundle_has_radius_zero_and_no_gap() -> None:
    """§3.4: both modules receive the same bundle: ε_outside = 0 and Δ_obs = Δ*."""
    r = bounds.nuisance_radius(L_M=(0.8, 0.5), eps_in=(0.0, 0.0), entry_matched=(True, True))
    assert r.value == 0.0
    assert r.exact
    assert writing_score_a(0.5) - writing_score_b(0.5) == pytest.approx(0.15)


AUTOSURVEY_ENTRY = 0.975   # ε_in,P: AutoSurvey's self-retrieved papers to the bundle
LIRA_ENTRY = 0.002          # ε_in,LiRA: LiRA's own entry is the common entry μ
L_M_PANEL = 0.890           # Table 11, ratio q95 (ξ = 0)
L_S_MEDIAN = 0.833          # median score constant at the writing window
TOLERANCE_MEDIAN = 0.208    # median pre-registered tolerance of the 15 admissible readouts


def test_autosurvey_lira_radius_is_0724_and_is_refused_against_0208() -> None:
    """F.3: ε_outside = L_s·L_M·(ε_in,P + ε_in,LiRA) with L_C = 1, no slack/channel/protocol."""
    r = bounds.nuisance_radius(L_s=L_S_MEDIAN, L_C=1.0, L_M=(L_M_PANEL, L_M_PANEL),
                               eps_in=(AUTOSURVEY_ENTRY, LIRA_ENTRY))
    assert r.value == pytest.approx(0.833 * 0.890 * (0.975 + 0.002), rel=1e-12)
    assert r.value == pytest.approx(0.724, abs=5e-4)
    assert r.value == pytest.approx(0.725, abs=1.5e-3)  # Table 14 prints 0.725
    assert r.contributions["entry_A"] == pytest.approx(0.833 * 0.890 * 0.975)
    assert r.within_tolerance(TOLERANCE_MEDIAN) is False
    assert r.value - TOLERANCE_MEDIAN == pytest.approx(0.516, abs=1e-3)


def test_the_five_lira_pairs_are_refused_vectorised_over_pairs() -> None:
    """Table 14: one radius per pair from the pairs' entry mismatches."""
    eps_pipeline = np.array([0.975, 0.968, 0.972, 0.942, 0.979])
    r = bounds.nuisance_radius(L_s=L_S_MEDIAN, L_M=L_M_PANEL, eps_in=(eps_pipeline, LIRA_ENTRY))
    assert isinstance(r.value, np.ndarray)
    np.testing.assert_allclose(r.value, [0.725, 0.720, 0.723, 0.700, 0.728], atol=1.5e-3)
    assert not np.any(r.within_tolerance(TOLERANCE_MEDIAN))


def test_a_readout_is_admitted_only_below_the_implied_sensitivity() -> None:
    """F.3's "admitted only if L_M ≤ …": the L_M at which the radius meets the tolerance."""
    threshold = TOLERANCE_MEDIAN / (L_S_MEDIAN * (AUTOSURVEY_ENTRY + LIRA_ENTRY))
    below = bounds.nuisance_radius(L_s=L_S_MEDIAN, L_M=threshold * 0.999,
                                   eps_in=(AUTOSURVEY_ENTRY, LIRA_ENTRY))
    above = bounds.nuisance_radius(L_s=L_S_MEDIAN, L_M=threshold * 1.001,
                                   eps_in=(AUTOSURVEY_ENTRY, LIRA_ENTRY))
    assert below.within_tolerance(TOLERANCE_MEDIAN) is True
    assert above.within_tolerance(TOLERANCE_MEDIAN) is False


def test_within_tolerance_adds_the_one_sided_radius_of_definition_7() -> None:
    r = bounds.nuisance_radius(L_M=1.0, eps_in=(0.05, 0.05))
    assert r.within_tolerance(0.12) is True
    assert r.within_tolerance(0.12, r=0.03) is False


# ------------------------------------------------------ Theorem 1: which terms are charged


@pytest.mark.parametrize("protocol", [0.0, 0.013])
def test_both_entries_matched_leave_only_the_protocol_term(protocol: float) -> None:
    """A.2 "When terms vanish": no entry or slack term, however large L_M, ε_in and ξ."""
    r = bounds.nuisance_radius(L_s=0.9, L_C=3.0, L_M=(INF, 2.0), eps_in=(0.4, 0.7),
                               xi=(0.2, 0.3), eps_protocol=protocol,
                               entry_matched=(True, True))
    assert r.value == protocol
    assert r.exact is (protocol == 0.0)
    assert r.finite is True
    assert r.terms["entry_A"] == r.terms["slack_A"] == r.terms["entry_B"] == 0.0
    assert "ε_protocol" in r.explanation
    assert "ignored" in r.explanation  # the declared ε_in of a matched entry is not charged


def test_slack_is_charged_only_for_the_system_whose_entry_differs() -> None:
    r = bounds.nuisance_radius(L_s=0.5, L_C=2.0, L_M=(1.0, 1.0), eps_in=(0.0, 0.1),
                               xi=(0.1, 0.2), entry_matched=(True, False))
    assert r.terms["slack_A"] == 0.0
    assert r.terms["slack_B"] == 0.2
    assert r.value == pytest.approx(0.5 * 2.0 * (0.1 + 0.2))


def test_an_unmatched_entry_with_zero_distance_still_pays_its_slack() -> None:
    r = bounds.nuisance_radius(L_M=(1.0, 1.0), eps_in=(0.0, 0.0), xi=(0.05, 0.0))
    assert r.value == pytest.approx(0.05)


def test_channel_mismatch_enters_on_the_score_scale_without_l_c() -> None:
    r = bounds.nuisance_radius(L_s=0.5, L_C=10.0, L_M=1.0, eps_in=0.0, eps_cont=(0.02, 0.04),
                               entry_matched=(True, True))
    assert r.value == pytest.approx(0.5 * 0.06)


def test_contributions_add_up_to_the_value_and_match_eq_3() -> None:
    kw = dict(L_s=0.7, L_C=1.3, L_M=(0.9, 1.4), eps_in=(0.2, 0.1), xi=(0.03, 0.01),
              eps_cont=(0.02, 0.05), eps_protocol=0.01)
    r = bounds.nuisance_radius(**kw)  # type: ignore[arg-type]
    eq3 = 0.7 * (1.3 * (0.9 * 0.2 + 1.4 * 0.1 + 0.03 + 0.01) + 0.02 + 0.05) + 0.01
    assert r.value == pytest.approx(eq3, rel=1e-12)
    assert sum(r.contributions.values()) == pytest.approx(r.value, rel=1e-12)
    assert r.non_expansive is False  # L_MB = 1.4 > 1


def test_a_bare_number_applies_to_both_systems() -> None:
    one = bounds.nuisance_radius(L_M=0.8, eps_in=(0.3, 0.1), xi=0.01)
    two = bounds.nuisance_radius(L_M=(0.8, 0.8), eps_in=(0.3, 0.1), xi=(0.01, 0.01))
    assert one.value == two.value


finite_constant = st.floats(0.0, 10.0, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(finite_constant, min_size=10, max_size=10), st.booleans(), st.booleans())
def test_radius_is_eq_3_with_the_matched_systems_dropped(
        c: list[float], matched_a: bool, matched_b: bool) -> None:
    L_s, L_C, LA, LB, eA, eB, xA, xB, cont, prot = c
    r = bounds.nuisance_radius(L_s=L_s, L_C=L_C, L_M=(LA, LB), eps_in=(eA, eB), xi=(xA, xB),
                               eps_cont=(cont, cont / 2), eps_protocol=prot,
                               entry_matched=(matched_a, matched_b))
    ia, ib = (not matched_a), (not matched_b)
    expected = L_s * (L_C * (ia * (LA * eA + xA) + ib * (LB * eB + xB)) + 1.5 * cont) + prot
    assert r.value == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert r.value >= prot


@settings(max_examples=100, deadline=None)
@given(st.lists(finite_constant, min_size=10, max_size=10), st.integers(0, 9),
       st.floats(0.0, 5.0))
def test_radius_never_decreases_when_a_constant_grows(
        c: list[float], which: int, bump: float) -> None:
    def radius(v: list[float]) -> float:
        r = bounds.nuisance_radius(L_s=v[0], L_C=v[1], L_M=(v[2], v[3]), eps_in=(v[4], v[5]),
                                   xi=(v[6], v[7]), eps_cont=(v[8], 0.0), eps_protocol=v[9])
        assert isinstance(r.value, float)
        return r.value
    bigger = list(c)
    bigger[which] += bump
    assert radius(bigger) >= radius(c) * (1 - 1e-12)


def test_vectorised_radius_equals_the_scalar_radius_readout_by_readout() -> None:
    rng = np.random.default_rng(3)
    n = 34
    L_s = rng.uniform(0.5, 1.0, n)
    eps_a = rng.uniform(0, 1, n)
    matched_b = rng.random(n) < 0.5
    r = bounds.nuisance_radius(L_s=L_s, L_C=1.2, L_M=(0.9, 0.7), eps_in=(eps_a, 0.1),
                               xi=(0.01, 0.02), eps_cont=(0.0, 0.01), eps_protocol=0.005,
                               entry_matched=(False, matched_b))
    assert isinstance(r.value, np.ndarray) and r.value.shape == (n,)
    for i in range(n):
        one = bounds.nuisance_radius(L_s=L_s[i], L_C=1.2, L_M=(0.9, 0.7),
                                     eps_in=(eps_a[i], 0.1), xi=(0.01, 0.02),
                                     eps_cont=(0.0, 0.01), eps_protocol=0.005,
                                     entry_matched=(False, bool(matched_b[i])))
        assert r.value[i] == pytest.approx(one.value, rel=1e-12)
    assert not r.value.flags.writeable
    assert "over 34 values" in r.explanation


# --------------------------------------------------------- Theorem 1: infinite constants


def test_an_unbounded_window_on_a_changed_entry_has_no_finite_radius() -> None:
    """§6.2: a backbone change inside a scaffold window gives no finite radius."""
    r = bounds.nuisance_radius(L_M=(INF, 0.9), eps_in=(0.1, 0.1))
    assert r.value == INF
    assert r.finite is False
    assert r.within_tolerance(0.5) is False
    assert "no finite radius" in r.explanation


def test_an_unbounded_window_is_infinite_even_at_a_declared_zero_distance() -> None:
    """ε_in = 0 without `entry_matched` is a measurement, not an identity: 0·∞ is ∞ here."""
    assert bounds.nuisance_radius(L_M=(INF, 0.9), eps_in=(0.0, 0.1)).value == INF


def test_a_constant_window_ignores_even_an_unbounded_entry_distance() -> None:
    assert bounds.nuisance_radius(L_M=(0.0, 1.0), eps_in=(INF, 0.1)).value == pytest.approx(0.1)


def test_unbounded_channel_or_score_constants_cost_nothing_on_exact_paths() -> None:
    matched = bounds.nuisance_radius(L_s=INF, L_C=INF, L_M=1.0, eps_in=(0.2, 0.2),
                                     eps_protocol=0.02, entry_matched=(True, True))
    assert matched.value == pytest.approx(0.02)
    changed = bounds.nuisance_radius(L_C=INF, L_M=1.0, eps_in=(0.0, 0.0),
                                     entry_matched=(True, False))
    assert changed.value == INF
    assert "L_C is unbounded" in changed.explanation


@pytest.mark.parametrize(("kwargs", "absent"), [
    ({"L_C": INF, "L_M": (0.0, 0.0), "eps_in": (0.1, 0.1)}, "a constant window (L_M = 0)"),
    ({"L_s": INF, "L_M": (0.0, 0.0), "eps_in": (0.1, 0.1)}, "a constant window (L_M = 0)"),
    ({"L_s": INF, "L_C": INF, "L_M": (0.0, INF), "eps_in": (0.1, 0.1),
      "entry_matched": (False, True)}, "a constant window and a matched entry"),
])
def test_an_absent_term_costs_nothing_even_behind_an_unbounded_amplifier(
        kwargs: dict[str, object], absent: str) -> None:
    """0·∞ = 0 where the term is absent: nothing reaches the unbounded stage."""
    r = bounds.nuisance_radius(**kwargs)  # type: ignore[arg-type]
    assert r.value == 0.0, absent
    assert all(v == 0.0 for v in r.contributions.values()), absent
    assert "no finite radius" not in r.explanation


def test_no_slack_is_charged_nothing_while_the_entry_term_keeps_its_unbounded_channel() -> None:
    """ξ = 0 is an absent slack: slack_A contributes 0, the measured entry term stays ∞."""
    r = bounds.nuisance_radius(L_C=INF, L_M=(1.0, 1.0), eps_in=(0.1, 0.1), xi=(0.0, 0.0),
                               entry_matched=(False, True))
    assert r.contributions["slack_A"] == 0.0
    assert r.contributions["entry_A"] == INF
    assert r.value == INF
    finite = bounds.nuisance_radius(L_C=2.0, L_M=(0.0, 1.0), eps_in=(0.3, 0.1),
                                    xi=(0.0, 0.05), entry_matched=(False, True))
    assert finite.value == 0.0


def test_infinite_radii_are_reported_per_readout() -> None:
    r = bounds.nuisance_radius(L_M=(np.array([INF, 1.0, 1.0]), 1.0), eps_in=(0.1, 0.1))
    np.testing.assert_array_equal(r.finite, [False, True, True])
    assert "1 infinite" in r.explanation


# ----------------------------------------------------- Theorem 1 on simulated windows


def w1(a: np.ndarray, b: np.ndarray) -> float:
    return float(stats.wasserstein_distance(a, b))


def test_the_radius_covers_the_gap_on_simulated_lipschitz_windows_with_slack() -> None:
    """Entries are empirical laws on [0, 1]; windows are L-Lipschitz maps with a jump of
    height ξ (so W(νQ, ν'Q) ≤ L·W(ν, ν') + ξ); channels add an offset of at most ε_cont;
    the score is L_s-Lipschitz. Theorem 1 must hold on every draw."""
    rng = np.random.default_rng(2026)
    for _ in range(300):
        n = int(rng.integers(20, 200))
        mu = rng.beta(2, 3, n)
        mu_a = np.clip(mu + rng.normal(rng.uniform(-0.3, 0.3), 0.1, n), 0, 1)
        matched_b = bool(rng.random() < 0.3)
        mu_b = mu.copy() if matched_b else rng.uniform(0, 1, n)
        la, lb = rng.uniform(0, 2, 2)
        ja, jb = rng.uniform(0, 0.2, 2)
        ta, tb = rng.uniform(0, 1, 2)
        ca, cb = rng.uniform(-0.1, 0.1, 2)
        l_s = rng.uniform(0.2, 1.5)

        def window(e: np.ndarray, L: float, jump: float, t: float) -> np.ndarray:
            return L * np.sin(e) + jump * (e > t)  # |Δ| ≤ L|Δe| + jump

        def score(y: np.ndarray, l_s: float = l_s) -> np.ndarray:
            return l_s * np.tanh(y)  # L_s-Lipschitz

        observed = (score(window(mu_a, la, ja, ta) + ca).mean()
                    - score(window(mu_b, lb, jb, tb) + cb).mean())
        controlled = score(window(mu, la, ja, ta)).mean() - score(window(mu, lb, jb, tb)).mean()
        r = bounds.nuisance_radius(L_s=l_s, L_C=1.0, L_M=(la, lb),
                                   eps_in=(w1(mu_a, mu), w1(mu_b, mu)), xi=(ja, jb),
                                   eps_cont=(abs(ca), abs(cb)),
                                   entry_matched=(False, matched_b))
        assert abs(observed - controlled) <= r.value + 1e-12


def test_the_radius_is_attained_by_linear_windows_entering_from_one_side() -> None:
    """Tightness: f_X(e) = L_X e, every entry of A above μ and of B below it."""
    rng = np.random.default_rng(7)
    mu = rng.uniform(0.3, 0.7, 500)
    mu_a, mu_b = mu + 0.2, mu - 0.1
    observed = 0.8 * mu_a.mean() - 0.5 * mu_b.mean()
    controlled = 0.8 * mu.mean() - 0.5 * mu.mean()
    r = bounds.nuisance_radius(L_M=(0.8, 0.5), eps_in=(w1(mu_a, mu), w1(mu_b, mu)))
    assert abs(observed - controlled) == pytest.approx(r.value, rel=1e-9)


# ------------------------------------------------------------- Theorem 1: bad input


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(L_s=-1.0), "`L_s` must be ≥ 0"),
    (dict(L_C=float("nan")), "`L_C` must not be NaN"),
    (dict(L_M=(0.5, -0.1)), "`L_M` must be ≥ 0"),
    (dict(L_M=(0.5, 0.5, 0.5)), "`L_M` must be a pair"),
    (dict(eps_in=(float("nan"), 0.1)), "`eps_in` must not be NaN"),
    (dict(eps_in="0.3"), "`eps_in` must be a pair"),
    (dict(xi=(0.1, "x")), "`xi` must be a number"),
    (dict(eps_cont=(-0.01, 0.0)), "`eps_cont` must be ≥ 0"),
    (dict(eps_protocol=-0.01), "`eps_protocol` must be ≥ 0"),
    (dict(entry_matched=(1, 0)), "`entry_matched` must hold booleans"),
    (dict(entry_matched=(True,)), "`entry_matched` must be a pair"),
    (dict(L_s=[0.5, 0.6, 0.7], eps_in=([0.1, 0.2], 0.1)), "must broadcast"),
])
def test_nuisance_radius_rejects_bad_input_naming_the_parameter(
        kwargs: dict[str, object], match: str) -> None:
    base: dict[str, object] = dict(L_M=(0.8, 0.5), eps_in=(0.3, 0.1))
    with pytest.raises(ValueError, match=match):
        bounds.nuisance_radius(**(base | kwargs))  # type: ignore[arg-type]


def test_within_tolerance_rejects_a_zero_tolerance() -> None:
    r = bounds.nuisance_radius(L_M=1.0, eps_in=0.1)
    with pytest.raises(ValueError, match="`eps_fair` must be > 0"):
        r.within_tolerance(0.0)


def test_nuisance_radius_is_frozen() -> None:
    r = bounds.nuisance_radius(L_M=1.0, eps_in=0.1)
    with pytest.raises(AttributeError):
        r.value = 0.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        r.terms["entry_A"] = 0.0  # type: ignore[index]


# -------------------------------------------------- Proposition 1: upper certificate


def test_upper_certificate_is_the_mean_plus_hoeffding_plus_the_etas() -> None:
    losses = np.r_[np.full(10, 1.0), np.zeros(40)]  # mean 0.2, N = 50
    c = bounds.upper_certificate(losses, confidence_level=0.95, eta_roll=0.01,
                                 eta_align=0.02, eta_ann=0.03)
    hoeffding = math.sqrt(math.log(1 / 0.05) / (2 * 50))
    assert c.mean == pytest.approx(0.2)
    assert c.sampling == pytest.approx(hoeffding)
    assert c.value == pytest.approx(0.2 + hoeffding + 0.06)
    assert (c.n, c.delta) == (50, pytest.approx(0.05))
    assert not c.vacuous


def test_repeated_rollouts_of_a_context_do_not_increase_n() -> None:
    """A.3: the context is the statistical cluster; rollouts are averaged within it."""
    losses = [0.0, 1.0, 0.5, 0.5, 0.5, 1.0]
    contexts = ["a", "a", "b", "b", "b", "c"]
    c = bounds.upper_certificate(losses, clusters=contexts)
    assert c.n == 3
    assert c.mean == pytest.approx((0.5 + 0.5 + 1.0) / 3)
    assert c.sampling == pytest.approx(math.sqrt(math.log(20) / 6))
    assert c.vacuous


def test_upper_certificate_covers_the_true_mean_at_least_at_the_nominal_rate() -> None:
    """Bernoulli(0.3) context losses, N = 40: the miss rate must not exceed δ beyond 3 SE."""
    rng = np.random.default_rng(11)
    p, reps, delta = 0.3, 2000, 0.1
    misses = sum(
        bounds.upper_certificate(rng.random(40) < p, confidence_level=1 - delta).value < p
        for _ in range(reps))
    assert misses / reps <= delta + 3 * math.sqrt(delta * (1 - delta) / reps)


@pytest.mark.parametrize(("args", "kwargs", "match"), [
    ([[0.1, 1.2]], {}, "`losses` must lie in \\[0, 1\\]"),
    ([[0.1, float("nan")]], {}, "`losses` must lie in \\[0, 1\\]"),
    ([[]], {}, "`losses` must be a non-empty 1-D array"),
    ([[[0.1]]], {}, "`losses` must be a non-empty 1-D array"),
    ([[0.1, 0.2]], dict(clusters=["a"]), "`clusters` must have the shape of `losses`"),
    ([[0.1, 0.2]], dict(confidence_level=1.0), "`confidence_level` must be in \\(0, 1\\)"),
    ([[0.1, 0.2]], dict(eta_ann=-0.1), "`eta_ann` must be ≥ 0"),
])
def test_upper_certificate_rejects_bad_input(
        args: list[object], kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        bounds.upper_certificate(*args, **kwargs)  # type: ignore[arg-type]


# ----------------------------------------------------- Theorem 2, Corollaries 2 and 3


def test_composition_bound_by_hand() -> None:
    """eq. 12: ε_0 = 0.1, ε = (0.05, 0.02), L = (2, 0.5), ξ = (0, 0.01)."""
    c = bounds.composition_bound([0.05, 0.02], L=[2.0, 0.5], xi=[0.0, 0.01], eps0=0.1)
    np.testing.assert_allclose(c.per_stage, [0.1 * 2 + 0.05, 0.1 * 2 * 0.5 + 0.05 * 0.5 + 0.03])
    np.testing.assert_allclose(c.contributions, [0.1, 0.025, 0.03])
    assert c.value == pytest.approx(0.155)
    assert c.contributions.sum() == pytest.approx(c.value)
    assert c.non_expansive is False


def test_one_stage_bound_is_l_eps0_plus_eps_plus_xi_with_an_empty_product() -> None:
    c = bounds.composition_bound([0.1], L=[3.0], xi=0.02, eps0=0.2)
    assert c.value == pytest.approx(3 * 0.2 + 0.1 + 0.02)


def test_non_expansive_stages_add_errors_corollary_2() -> None:
    c = bounds.composition_bound([0.05, 0.1, 0.02], L=[1.0, 0.7, 0.9], xi=0.01, eps0=0.2)
    assert c.non_expansive is True
    assert c.additive == pytest.approx(0.2 + 0.17 + 0.03)
    assert c.value <= c.additive
    equal = bounds.composition_bound([0.05, 0.1], L=[1.0, 1.0], eps0=0.2)
    assert equal.value == pytest.approx(equal.additive)


def test_composition_bound_vectorises_over_chains_on_trailing_axes() -> None:
    rng = np.random.default_rng(5)
    eps, L = rng.uniform(0, 0.2, (4, 6)), rng.uniform(0.2, 2.0, (4, 6))
    c = bounds.composition_bound(eps, L=L, xi=0.01, eps0=0.05)
    assert isinstance(c.value, np.ndarray)
    for j in range(6):
        assert c.value[j] == pytest.approx(
            bounds.composition_bound(eps[:, j], L=L[:, j], xi=0.01, eps0=0.05).value)


def test_zero_and_infinite_constants_follow_the_path_rules() -> None:
    # identical inputs: an unbounded first stage amplifies nothing
    assert bounds.composition_bound([0.1, 0.0], L=[INF, 1.0]).value == pytest.approx(0.1)
    # a real initial mismatch through an unbounded stage: no finite bound
    assert bounds.composition_bound([0.1], L=[INF], eps0=0.2).value == INF
    # a constant stage erases the upstream mismatch, even an unbounded one
    assert bounds.composition_bound([0.1], L=[0.0], eps0=INF).value == pytest.approx(0.1)


def test_propagated_bound_by_hand_and_as_theorem_2_with_zero_downstream_errors() -> None:
    """eq. 14: window = stage 1 (ε_0 = 0.1, ε_1 = 0.05, L_1 = 2), then two shared stages."""
    p = bounds.propagated_bound([0.05], L=[2.0], eps_entry=0.1, L_downstream=[0.5, 3.0],
                                xi_downstream=[0.01, 0.0])
    assert p.window == pytest.approx(0.25)
    assert p.downstream_gain == pytest.approx(1.5)
    assert p.downstream_slack == pytest.approx(0.03)
    assert p.value == pytest.approx(0.25 * 1.5 + 0.03)
    c = bounds.composition_bound([0.05, 0.0, 0.0], L=[2.0, 0.5, 3.0], xi=[0.0, 0.01, 0.0],
                                 eps0=0.1)
    assert p.value == pytest.approx(c.value)
    assert "not a fairness criterion" in p.note
    assert p.substitutable(0.5) is True and p.substitutable(0.4) is False


def test_a_window_that_ends_the_pipeline_propagates_to_itself() -> None:
    p = bounds.propagated_bound([0.05, 0.02], L=[2.0, 0.5], xi=[0.0, 0.01], eps_entry=0.1)
    assert p.value == p.window == pytest.approx(0.155)
    assert (p.downstream_gain, p.downstream_slack) == (1.0, 0.0)


def test_utility_bound_is_l_u_times_the_terminal_distance() -> None:
    c = bounds.composition_bound([0.05, 0.02], L=[2.0, 0.5], xi=[0.0, 0.01], eps0=0.1)
    u = bounds.utility_bound(c, L_U=2.0)
    assert (u.value, u.L_U, u.distance) == (pytest.approx(0.31), 2.0, pytest.approx(0.155))
    assert bounds.utility_bound(0.3, L_U=0.5).value == pytest.approx(0.15)
    assert bounds.utility_bound(0.0, L_U=INF).value == 0.0
    p = bounds.propagated_bound([0.1], L=[1.0], L_downstream=[2.0])
    assert bounds.utility_bound(p, L_U=1.5).value == pytest.approx(0.3)


@pytest.mark.parametrize(("call", "match"), [
    (lambda: bounds.composition_bound([0.1, 0.2], L=[1.0]), "`eps` must have one value per"),
    (lambda: bounds.composition_bound([0.1], L=1.0), "`L` must have one constant per stage"),
    (lambda: bounds.composition_bound([], L=[]), "`L` must hold at least one stage"),
    (lambda: bounds.composition_bound([0.1], L=[-1.0]), "`L` must be ≥ 0"),
    (lambda: bounds.composition_bound([0.1], L=[1.0], xi=[0.1, 0.1]), "`xi` must have one"),
    (lambda: bounds.composition_bound([0.1], L=[1.0], eps0=float("nan")), "`eps0` must not"),
    (lambda: bounds.propagated_bound([0.1], L=[1.0], eps_entry=-1), "`eps_entry` must be ≥ 0"),
    (lambda: bounds.propagated_bound([0.1], L=[1.0], L_downstream=[1.0], xi_downstream=[0, 1]),
     "`xi_downstream` must have one"),
    (lambda: bounds.propagated_bound([0.1], L=[1.0], L_downstream=2.0),
     "`L_downstream` must have one constant per downstream stage"),
    (lambda: bounds.utility_bound(0.1, L_U=-2.0), "`L_U` must be ≥ 0"),
    (lambda: bounds.utility_bound([0.1, 0.2], L_U=[1.0, 2.0, 3.0]), "must broadcast"),
])
def test_composition_functions_reject_bad_input(call: Callable[[], object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def _chain_laws(u: np.ndarray, d0: float, slopes: np.ndarray, offsets: np.ndarray,
                jumps: np.ndarray, thresholds: np.ndarray, kind: str,
                ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Empirical laws of A and B at every interface. B's stage k is g_k; A's is g_k + c_k,
    so sup_z W(Q_A,k(z), Q_B,k(z)) = |c_k| = ε_k, and g_k is |a_k|-Lipschitz up to a jump
    of height ξ_k (W(νg, ν'g) ≤ |a_k| W(ν, ν') + ξ_k)."""
    def g(k: int, z: np.ndarray) -> np.ndarray:
        base = slopes[k] * (z if kind == "linear" else np.sin(z))
        return base + jumps[k] * (z > thresholds[k])
    za, zb = u + d0, u.copy()
    laws_a, laws_b = [], []
    for k in range(len(slopes)):
        za, zb = g(k, za) + offsets[k], g(k, zb)
        laws_a.append(za)
        laws_b.append(zb)
    return laws_a, laws_b


def test_theorem_2_holds_at_every_stage_of_simulated_lipschitz_chains_with_slack() -> None:
    rng = np.random.default_rng(12)
    for _ in range(200):
        K = int(rng.integers(1, 6))
        u = rng.normal(0, 1, int(rng.integers(10, 300)))
        d0 = float(rng.uniform(-0.5, 0.5))
        slopes = rng.uniform(-2, 2, K)
        offsets = rng.uniform(-0.3, 0.3, K)
        jumps = rng.uniform(0, 0.2, K) * (rng.random(K) < 0.5)
        laws_a, laws_b = _chain_laws(u, d0, slopes, offsets, jumps, rng.normal(0, 1, K),
                                     "sine")
        c = bounds.composition_bound(np.abs(offsets), L=np.abs(slopes), xi=jumps,
                                     eps0=abs(d0))
        for m in range(K):
            assert w1(laws_a[m], laws_b[m]) <= c.per_stage[m] + 1e-9
        # Theorem 3 with a nonlinear L_U-Lipschitz utility
        L_U = float(rng.uniform(0.1, 3))
        gap = abs(np.mean(L_U * np.cos(laws_a[-1])) - np.mean(L_U * np.cos(laws_b[-1])))
        assert gap <= bounds.utility_bound(c, L_U=L_U).value + 1e-9


def test_theorem_2_and_3_are_tight_for_increasing_linear_maps_shifted_one_way() -> None:
    rng = np.random.default_rng(13)
    for _ in range(50):
        K = int(rng.integers(1, 6))
        u = rng.normal(0, 1, 100)
        slopes = rng.uniform(0.1, 2, K)
        offsets = rng.uniform(0, 0.3, K)
        d0 = float(rng.uniform(0, 0.5))
        laws_a, laws_b = _chain_laws(u, d0, slopes, offsets, np.zeros(K), np.zeros(K),
                                     "linear")
        c = bounds.composition_bound(offsets, L=slopes, eps0=d0)
        for m in range(K):
            assert w1(laws_a[m], laws_b[m]) == pytest.approx(c.per_stage[m], rel=1e-9)
        gap = abs(np.mean(2.5 * laws_a[-1]) - np.mean(2.5 * laws_b[-1]))
        assert gap == pytest.approx(bounds.utility_bound(c, L_U=2.5).value, rel=1e-9)


def test_corollary_3_holds_when_the_systems_differ_only_on_a_block_of_stages() -> None:
    rng = np.random.default_rng(14)
    for _ in range(100):
        K, i, j = 5, 2, 3  # stages 2..3 (1-based) differ; 4..5 shared
        u = rng.normal(0, 1, 200)
        slopes = rng.uniform(-1.5, 1.5, K)
        offsets = np.zeros(K)
        offsets[i - 1:j] = rng.uniform(-0.3, 0.3, j - i + 1)
        offsets[0] = rng.uniform(-0.2, 0.2)  # an upstream difference, summarised by ε_{i−1}
        jumps = rng.uniform(0, 0.1, K)
        laws_a, laws_b = _chain_laws(u, 0.0, slopes, offsets, jumps, rng.normal(0, 1, K),
                                     "sine")
        eps_entry = w1(laws_a[i - 2], laws_b[i - 2])
        p = bounds.propagated_bound(np.abs(offsets[i - 1:j]), L=np.abs(slopes[i - 1:j]),
                                    xi=jumps[i - 1:j], eps_entry=eps_entry,
                                    L_downstream=np.abs(slopes[j:]), xi_downstream=jumps[j:])
        assert w1(laws_a[j - 1], laws_b[j - 1]) <= p.window + 1e-9
        assert w1(laws_a[-1], laws_b[-1]) <= p.value + 1e-9


# -------------------------------------------------------- F.1: fitting L_M from pairs

X_HAND = [1.0, 2.0, 4.0, 0.5]
Y_HAND = [0.5, 1.0, 1.0, 0.45]  # ratios 0.5, 0.5, 0.25, 0.9


def test_ratio_sup_is_the_largest_ratio_and_covers_every_pair() -> None:
    f = bounds.fit_sensitivity(X_HAND, Y_HAND, method="ratio-sup")
    assert (f.constant, f.slack, f.coverage, f.max_ratio) == (0.9, 0.0, 1.0, 0.9)
    assert (f.n, f.n_expansive) == (4, 0)
    assert f.groups == () and math.isnan(f.heldout_coverage)


def test_ratio_q95_is_the_linear_quantile_of_the_ratios() -> None:
    """Sorted ratios 0.25, 0.5, 0.5, 0.9; position 0.95·3 = 2.85 → 0.5 + 0.85·0.4."""
    f = bounds.fit_sensitivity(X_HAND, Y_HAND)
    assert f.method == "ratio-q95"
    assert f.constant == pytest.approx(0.84)
    assert f.coverage == 0.75
    assert f.bound(2.0) == pytest.approx(1.68)


def test_affine_is_the_least_squares_slope_plus_the_quantile_of_the_residuals() -> None:
    """x = 0..3, y = (0, 1, 1, 2): slope 3/5; residuals (0, .4, −.2, .2); q95 = .2 + .85·.2."""
    f = bounds.fit_sensitivity([0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 1.0, 2.0], method="affine")
    assert f.constant == pytest.approx(0.6)
    assert f.slack == pytest.approx(0.37)
    assert f.coverage == 0.75
    worst = bounds.fit_sensitivity([0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 1.0, 2.0],
                                   method="affine", level=1.0)
    assert worst.slack == pytest.approx(0.4) and worst.coverage == 1.0


def test_affine_recovers_an_exact_line_and_covers_a_pair_at_zero_entry_mismatch() -> None:
    """F.2: a reference-fed system sits at x = 0 with a nonzero exit displacement."""
    x = np.array([0.0, 0.2, 0.5, 1.0])
    f = bounds.fit_sensitivity(x, 0.5 * x + 0.1, method="affine", level=1.0)
    assert (f.constant, f.slack) == (pytest.approx(0.5), pytest.approx(0.1))
    assert f.coverage == 1.0
    assert math.isfinite(f.max_ratio)  # over the pairs with x > 0


def test_affine_floors_a_negative_slope_at_zero() -> None:
    f = bounds.fit_sensitivity([1.0, 2.0, 3.0], [0.3, 0.2, 0.1], method="affine", level=1.0)
    assert (f.constant, f.slack) == (0.0, pytest.approx(0.3))


def test_locally_expansive_pairs_are_counted() -> None:
    assert bounds.fit_sensitivity([0.5, 0.5, 1.0], [0.6, 0.4, 1.0]).n_expansive == 1


def test_leave_one_group_out_by_hand() -> None:
    """Ratios a: .5, .6; b: .7; c: .9, .4. Held-out c meets sup(a, b) = .7: covers 1 of 2."""
    f = bounds.fit_sensitivity([1.0, 1.0, 1.0, 1.0, 1.0], [0.5, 0.6, 0.7, 0.9, 0.4],
                               method="ratio-sup", groups=["a", "a", "b", "c", "c"])
    by = {g.label: g for g in f.groups}
    assert [g.label for g in f.groups] == ["a", "b", "c"]
    assert (by["a"].constant_train, by["a"].constant_own, by["a"].coverage) == (0.9, 0.6, 1.0)
    assert (by["b"].constant_train, by["b"].constant_own, by["b"].coverage) == (0.9, 0.7, 1.0)
    assert (by["c"].constant_train, by["c"].constant_own, by["c"].coverage) == (0.7, 0.9, 0.5)
    assert (by["a"].n, by["b"].n, by["c"].n) == (2, 1, 2)
    assert f.heldout_coverage == pytest.approx(4 / 5)
    assert f.heldout_coverage_mean == pytest.approx(2.5 / 3)
    assert f.heldout_coverage_min == 0.5


def _simulate_pairs(rng: np.random.Generator, sizes: list[int], sensitivities: list[float],
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x ∈ [0.5, 1]; y/x ~ L_g·U(0, 1), so sup y/x = L_g and q95(y/x) = 0.95 L_g."""
    xs, ys, gs = [], [], []
    for g, (n, L) in enumerate(zip(sizes, sensitivities, strict=True)):
        x = rng.uniform(0.5, 1.0, n)
        xs.append(x)
        ys.append(L * rng.random(n) * x)
        gs.append(np.full(n, f"system-{g}"))
    return np.concatenate(xs), np.concatenate(ys), np.concatenate(gs)


def test_fitted_constants_recover_a_known_sensitivity() -> None:
    rng = np.random.default_rng(20)
    L, n = 0.9, 1500
    x, y, _ = _simulate_pairs(rng, [n], [L])
    sup = bounds.fit_sensitivity(x, y, method="ratio-sup")
    assert L * (1 - 10 / n) <= sup.constant <= L  # P(miss) ≈ e^-10
    q95 = bounds.fit_sensitivity(x, y)
    se = L * math.sqrt(0.95 * 0.05 / n)  # quantile SE: sqrt(p(1−p)/n) / density (1/L)
    assert q95.constant == pytest.approx(0.95 * L, abs=4 * se)


def test_leave_one_group_out_coverage_is_near_nominal_when_the_constant_transfers() -> None:
    """Five systems sharing L = 0.9: held-out coverage ≈ 0.95 within 4 SE (binomial SE of
    the held-out pairs plus the coverage SE of a quantile fitted on the others)."""
    rng = np.random.default_rng(21)
    sizes, p = [300] * 5, 0.95
    x, y, g = _simulate_pairs(rng, sizes, [0.9] * 5)
    f = bounds.fit_sensitivity(x, y, groups=g)
    n_total, n_train = sum(sizes), sum(sizes) - 300
    se_pooled = math.sqrt(p * (1 - p) * (1 / n_total + 1 / n_train))
    assert f.heldout_coverage == pytest.approx(p, abs=4 * se_pooled)
    se_group = math.sqrt(p * (1 - p) * (1 / 300 + 1 / n_train))
    for grp in f.groups:
        assert grp.coverage == pytest.approx(p, abs=4 * se_group)
        assert grp.constant_own == pytest.approx(grp.constant_train, abs=0.1)


def test_leave_one_group_out_coverage_exposes_a_system_the_constant_does_not_fit() -> None:
    """Table 12a's failure mode: one system is more sensitive than the panel."""
    rng = np.random.default_rng(22)
    x, y, g = _simulate_pairs(rng, [300] * 4, [0.9, 0.9, 0.9, 1.3])
    f = bounds.fit_sensitivity(x, y, groups=g)
    odd = f.groups[-1]
    # expected coverage P(1.3·U ≤ 0.855) ≈ 0.66
    assert odd.coverage < 0.8
    assert odd.constant_own > odd.constant_train
    assert f.heldout_coverage_min == odd.coverage


def test_affine_leave_one_group_out_on_a_known_envelope() -> None:
    """y = 0.6 x + 0.2 V, V ~ U(0, 1): slope 0.6, slack q95 = 0.19, coverage ≈ 0.95."""
    rng = np.random.default_rng(23)
    n_per, k = 400, 4
    x = rng.uniform(0, 1, n_per * k)
    y = 0.6 * x + 0.2 * rng.random(n_per * k)
    g = np.repeat(np.arange(k), n_per)
    f = bounds.fit_sensitivity(x, y, method="affine", groups=g)
    n = n_per * k
    slope_se = 0.2 / math.sqrt(12) / (x.std() * math.sqrt(n))
    assert f.constant == pytest.approx(0.6, abs=4 * slope_se)
    assert f.slack == pytest.approx(0.19, abs=0.02)
    p = 0.95
    se = math.sqrt(p * (1 - p) * (1 / n + 1 / (n - n_per)))
    assert f.heldout_coverage == pytest.approx(p, abs=4 * se + 0.01)  # + slope noise


def test_a_group_too_small_for_its_own_affine_fit_warns_and_reports_nan() -> None:
    with pytest.warns(DegenerateDataWarning, match="own affine constant is not identified"):
        f = bounds.fit_sensitivity([0.1, 0.5, 0.9, 0.2, 0.6, 0.3],
                                   [0.1, 0.3, 0.5, 0.2, 0.3, 0.2],
                                   method="affine", groups=["a", "a", "a", "b", "b", "c"])
    c = f.groups[2]
    assert math.isnan(c.constant_own) and math.isnan(c.slack_own)
    assert c.coverage in (0.0, 1.0)
    assert not math.isnan(f.groups[0].constant_own)


def test_inputs_hash_depends_on_the_data_the_method_and_the_groups() -> None:
    base = bounds.fit_sensitivity(X_HAND, Y_HAND)
    assert base.inputs_hash == bounds.fit_sensitivity(X_HAND, Y_HAND).inputs_hash
    assert base.inputs_hash != bounds.fit_sensitivity(X_HAND, Y_HAND,
                                                      method="ratio-sup").inputs_hash
    assert base.inputs_hash != bounds.fit_sensitivity(
        X_HAND, Y_HAND, groups=["a", "a", "b", "b"]).inputs_hash


@pytest.mark.parametrize(("x", "y", "kwargs", "match"), [
    ([1.0, 0.0], [0.5, 0.1], {}, "`x` must be > 0 for the ratio designs: pair 1 has x = 0"),
    ([1.0, 0.0], [0.5, 0.1], dict(method="ratio-sup"), "use method='affine'"),
    ([1.0, 2.0], [0.5], {}, "`x` and `y` must have the same length"),
    ([1.0, float("nan")], [0.5, 0.5], {}, "`x` must not be NaN"),
    ([1.0, 2.0], [0.5, -0.5], {}, "`y` must be ≥ 0"),
    ([1.0, INF], [0.5, 0.5], {}, "`x` must be finite"),
    ([[1.0, 2.0]], [[0.5, 0.5]], {}, "`x` must be 1-D"),
    ([], [], {}, "`x` is empty"),
    ([1.0, 2.0], [0.5, 0.5], dict(method="ratio-q90"), "`method` must be 'ratio-q95'"),
    ([1.0, 2.0], [0.5, 0.5], dict(level=0.0), "`level` must be in \\(0, 1\\]"),
    ([1.0, 1.0], [0.5, 0.6], dict(method="affine"), "at least two distinct entry distances"),
    ([1.0, 2.0], [0.5, 0.6], dict(groups=["a", "a"]), "at least two groups"),
    ([1.0, 2.0], [0.5, 0.6], dict(groups=["a"]), "`groups` must have the shape of `x`"),
    ([1.0, 1.0, 2.0], [0.5, 0.6, 0.7], dict(method="affine", groups=["a", "b", "b"]),
     "without group 'b'"),
])
def test_fit_sensitivity_rejects_bad_input_naming_the_parameter(
        x: list[float], y: list[float], kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        bounds.fit_sensitivity(x, y, **kwargs)  # type: ignore[arg-type]
