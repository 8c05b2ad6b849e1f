"""Independent cross-check: sequential IPW and raw DR ([SSC] eq. 6) against obp.

Reference: Open Bandit Pipeline (obp 0.5.7, numpy 1.23.5, Python 3.10), its
``InverseProbabilityWeighting`` and ``DoublyRobust`` run on the same logged data by
``tests/fixtures/cess/make_golden.py``, which documents how eq. 6 maps onto obp (one obp
row per planned round, ``pscore = p_t s_t``, the uniform policy over the pool as the
evaluation policy, reward 0 / the prediction on rounds not reached) and also checks obp
against a naive loop implementation. obp is not a test dependency: its values are
committed in ``golden_v1.npz``.

Tolerance: 1e-12, absolute and relative. obp divides ``(1/N) / (p s)`` and averages the
predictions with ``np.average(..., weights=1/N)``; ``cess.estimate`` computes
``1 / (N p s)``. The two float paths differ by a few ulp of the largest term (weights
below 25 here, differences ~1e-15), three orders of magnitude below the tolerance, while
any real discrepancy (a wrong weight, K vs T, a missed round) moves values by ≥ 1e-3.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from agentlog.estimators import cess

GOLDEN = Path(__file__).parents[1] / "fixtures" / "cess" / "golden_v1.npz"
TOL = 1e-12


@pytest.fixture(scope="module")
def golden() -> dict[str, NDArray[Any]]:
    with np.load(GOLDEN, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def _estimate(g: dict[str, NDArray[Any]]) -> cess.CessResult:
    """``cess.estimate`` on the fixture's logged rounds; ``m_{J_t}`` and ``m̄`` from the pool."""
    action = g["action"].astype(np.int64)
    m_pool = g["m_pool"].astype(np.float64)
    observed = action >= 0
    m_chosen = np.where(observed,
                        np.take_along_axis(m_pool, np.where(observed, action, 0), axis=1),
                        np.nan)
    return cess.estimate(g["y"], g["p"], g["s"], m_chosen, m_pool.mean(axis=1),
                         int(g["n_pool"]), budget=int(g["budget"]), lam=1.0)


def test_the_fixture_covers_stopping_revisits_and_every_trajectory_length(
    golden: dict[str, NDArray[Any]],
) -> None:
    """The golden data exercise NaN padding at every length, revisits and biased weights."""
    assert int(golden["format_version"]) == 1
    assert str(golden["reference"]).startswith("obp 0.5.7")
    action = golden["action"]
    K = int(golden["budget"])
    n_rounds = (action >= 0).sum(axis=1)
    assert set(n_rounds.tolist()) == set(range(1, K + 1))
    assert np.array_equal(np.isnan(golden["y"]), action < 0)
    assert any(len(set(r[r >= 0])) < (r >= 0).sum() for r in action)
    # s_t = Π_{k≤t} (1 − c_k) with c_1 = 0, as eq. 5 defines it.
    c = np.where(action >= 0, golden["c"], 0.0)
    assert np.allclose(np.where(action >= 0, np.cumprod(1 - c, axis=1), np.nan), golden["s"],
                       equal_nan=True, rtol=0, atol=1e-15)


def test_sequential_ipw_equals_obp_inverse_probability_weighting(
    golden: dict[str, NDArray[Any]],
) -> None:
    res = _estimate(golden)
    np.testing.assert_allclose(res.ipw, golden["ipw_obp"], rtol=TOL, atol=TOL)
    assert res.ipw.mean() == pytest.approx(float(golden["ipw_obp_pooled"]), abs=TOL)


def test_raw_dr_equals_obp_doubly_robust(golden: dict[str, NDArray[Any]]) -> None:
    res = _estimate(golden)
    np.testing.assert_allclose(res.dr_raw, golden["dr_obp"], rtol=TOL, atol=TOL)
    assert res.dr_raw.mean() == pytest.approx(float(golden["dr_obp_pooled"]), abs=TOL)


def test_cess_at_lambda_one_without_clipping_is_the_obp_doubly_robust_value(
    golden: dict[str, NDArray[Any]],
) -> None:
    """With λ = 1 and bounds wide enough never to clip, CESS (eq. 9) is eq. 6 itself."""
    g = golden
    action = g["action"].astype(np.int64)
    m_pool = g["m_pool"].astype(np.float64)
    m_chosen = np.where(action >= 0, np.take_along_axis(m_pool, np.maximum(action, 0), axis=1),
                        np.nan)
    res = cess.estimate(g["y"], g["p"], g["s"], m_chosen, m_pool.mean(axis=1),
                        int(g["n_pool"]), budget=int(g["budget"]), lam=1.0,
                        bounds=(-1e6, 1e6))
    np.testing.assert_allclose(res.estimate, g["dr_obp"], rtol=TOL, atol=TOL)
