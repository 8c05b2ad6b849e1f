"""Every estimator result's ``confidence_interval(...)`` returns one ``ConfidenceInterval``
type, takes a validated ``confidence_level`` keyword, and still unpacks as ``(low, high)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from agentlog.estimators import ConfidenceInterval, asv, cess, reliability

RNG = np.random.default_rng(11)
SCORES = RNG.normal(0.6, 0.1, size=60)
A = RNG.normal(0.0, 1.0, size=(4, 40))
TRAJ = np.arange(40)  # one transition per trajectory: 40, past the coverage warning
TRUTH = SCORES + RNG.normal(0.0, 0.05, size=60)
SUCCESS = np.arange(40) % 3 == 0


def _summary() -> Any:
    return reliability.summary(SCORES, n_resamples=400)


def _grouped() -> Any:
    return reliability.summary(SCORES, groups=np.arange(60) % 2, n_resamples=400)


def _curve() -> Any:
    return reliability.degradation_curve(SCORES, np.arange(60) % 2, n_resamples=400)


def _cliffs() -> Any:
    return reliability.cliffs_delta(SCORES[:30], SCORES[30:], n_resamples=400,
                                    n_permutations=99)


def _bootstrap() -> Any:
    return cess.cluster_bootstrap(SCORES, np.arange(60) % 12, n_resamples=400)


def _effects() -> Any:
    theta = RNG.normal(size=(4, 12)) + np.array([[0.0], [0.3], [0.1], [0.5]])
    return cess.policy_effects(*theta, n_resamples=400)


def _audit() -> Any:
    return cess.audit({"m": SCORES}, TRUTH, question=np.arange(60) % 12,
                      n_resamples=400)


def _asv_summary() -> Any:
    return asv.summarize(asv.face(*A), trajectory=TRAJ, n_resamples=400)


def _retry() -> Any:
    return asv.retry_disagreement(A[:2].T, A[2:].T, trajectory=TRAJ, n_resamples=400)


def _auc() -> Any:
    return asv.auc_difference(A[0] + SUCCESS, A[1] + 2 * SUCCESS, SUCCESS, trajectory=TRAJ,
                              n_resamples=400)


# (result factory, positional arguments naming what the interval is of)
RESULTS: dict[str, tuple[Callable[[], Any], tuple[str, ...]]] = {
    "reliability.summary": (_summary, ()),
    "reliability.summary(groups=)": (_grouped, ()),
    "reliability.degradation_curve": (_curve, ()),
    "reliability.cliffs_delta": (_cliffs, ()),
    "cess.cluster_bootstrap": (_bootstrap, ()),
    "cess.policy_effects": (_effects, ("selection",)),
    "cess.audit": (_audit, ("m", "mae")),
    "asv.summarize": (_asv_summary, ("mean_interaction",)),
    "asv.retry_disagreement": (_retry, ("excess",)),
    "asv.auc_difference": (_auc, ("difference",)),
}


@pytest.fixture(scope="module", params=sorted(RESULTS))
def result(request: pytest.FixtureRequest) -> tuple[Any, tuple[str, ...]]:
    make, args = RESULTS[request.param]
    return make(), args


def test_every_interval_is_a_confidence_interval_that_unpacks_as_low_high(
        result: tuple[Any, tuple[str, ...]]) -> None:
    res, args = result
    ci = res.confidence_interval(*args)
    assert type(ci) is ConfidenceInterval
    low, high = ci
    assert (low, high) == (ci.low, ci.high)
    assert np.all(np.asarray(low) <= np.asarray(high))


def test_a_lower_confidence_level_gives_a_narrower_interval(
        result: tuple[Any, tuple[str, ...]]) -> None:
    res, args = result
    wide = res.confidence_interval(*args, confidence_level=0.99)
    narrow = res.confidence_interval(*args, confidence_level=0.5)
    assert np.all(np.asarray(wide.low) <= np.asarray(narrow.low))
    assert np.all(np.asarray(narrow.high) <= np.asarray(wide.high))
    assert np.any(np.asarray(wide.high) - np.asarray(wide.low)
                  > np.asarray(narrow.high) - np.asarray(narrow.low))


@pytest.mark.parametrize("level", [0, 1, 95, -0.5, float("nan"), True, "0.95"])
def test_a_confidence_level_outside_0_1_is_refused_by_name(
        result: tuple[Any, tuple[str, ...]], level: Any) -> None:
    res, args = result
    with pytest.raises(ValueError, match=r"`confidence_level` must be a number in \(0, 1\)"):
        res.confidence_interval(*args, confidence_level=level)


def test_results_that_store_a_level_use_it_unless_told_otherwise() -> None:
    theta = RNG.normal(size=(4, 12)) + np.array([[0.0], [0.3], [0.1], [0.5]])
    fx = cess.policy_effects(*theta, n_resamples=400, confidence_level=0.8)
    assert fx.confidence_interval("total") == fx.confidence_interval("total",
                                                                     confidence_level=0.8)
    assert fx.confidence_interval("total") != fx.confidence_interval("total",
                                                                     confidence_level=0.95)
    s = asv.summarize(asv.face(*A), trajectory=TRAJ, n_resamples=400, confidence_level=0.8)
    assert s.confidence_interval("mean_interaction") == s.confidence_interval(
        "mean_interaction", confidence_level=0.8)


def test_estimators_that_store_a_level_refuse_a_bad_one_before_any_work() -> None:
    theta = np.zeros((4, 3)) + np.array([[0.0], [0.3], [0.1], [0.5]])
    with pytest.raises(ValueError, match=r"`confidence_level` must be a number in \(0, 1\)"):
        cess.policy_effects(*theta, confidence_level=95)
    with pytest.raises(ValueError, match=r"`confidence_level` must be a number in \(0, 1\)"):
        cess.audit({"m": SCORES}, SCORES, question=np.arange(60) % 12, confidence_level=1.0)
    with pytest.raises(ValueError, match=r"`confidence_level` must be a number in \(0, 1\)"):
        cess.effects_from_traces([], outcome="y", confidence_level=0.0)


def test_the_interval_type_is_one_class_everywhere_it_is_exported() -> None:
    import agentlog.estimators as est

    assert est.ConfidenceInterval is reliability.ConfidenceInterval is ConfidenceInterval
    assert ConfidenceInterval(1.0, 2.0) == (1.0, 2.0)
