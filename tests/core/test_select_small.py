"""``select`` over a short vector takes a pure-Python path; it draws and checks bit for bit
what the numpy path does (the noise contract: same (seed, stream, step, id) -> same draw)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import agentlog as al
from agentlog import _noise, _select
from agentlog.reentry import gumbel_draws

SMALL = _noise.SMALL_POOL


def test_small_pool_draws_equal_the_numpy_draws_bit_for_bit() -> None:
    rng = np.random.default_rng(20261201)
    edge = np.array([0, 1, 2**63, 2**64 - 1, 2**32 - 1, 0x9E3779B97F4A7C15], dtype=np.uint64)
    for trial in range(600):
        n = trial % SMALL + 1
        keys = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
        if trial % 7 == 0:  # extreme words too, where a lane's carry or sign would show
            keys[: min(n, edge.shape[0])] = edge[:n]
        seed = int(rng.integers(-(2**63), 2**63))
        step = int(rng.integers(0, 2**40)) if trial % 3 else trial
        stream = f"s{trial % 5}"
        expected = _noise.gumbel(keys, seed, stream, step)
        got = _noise.gumbel_small(_noise.pack_keys(keys), n, seed, stream, step)
        assert got.dtype == np.float64 and got.shape == (n,)
        np.testing.assert_array_equal(got, expected, err_msg=f"trial {trial}, n {n}")


def test_pairwise_sum_is_numpys_sum_bit_for_bit() -> None:
    rng = np.random.default_rng(7)
    for trial in range(3000):
        n = trial % 128 + 1
        v = rng.random(n) * 10.0 ** rng.integers(-12, 12, size=n)
        if trial % 4 == 0:
            v *= rng.choice([-1.0, 1.0], size=n)
        assert _select._pairwise_sum(v.tolist()) == float(np.add.reduce(v)), (trial, n)
    assert _select._pairwise_sum([-0.0]) == 0.0 == np.add.reduce(np.array([-0.0]))


@pytest.mark.parametrize("n", [1, 2, 7, 8, 10, SMALL, SMALL + 1, 100])
def test_select_records_the_numpy_draws_and_choice_on_both_sides_of_the_cut(
    tmp_path: Path, n: int
) -> None:
    rng = np.random.default_rng(n)
    ids = [f"doc-{i}" for i in range(n)]
    vectors = [rng.dirichlet(np.ones(n)) for _ in range(20)]
    for p in vectors[::4]:
        p[: n // 3] = 0.0  # zeros: log 0 = -inf is never chosen on either path
        p /= p.sum()
    path = tmp_path / "t.zst"
    with al.record(path, seed=99):
        choices = [al.select(p, candidates=ids, name="doc") for p in vectors]
    sels = al.read(path).selections("doc")
    for step, (sel, p, choice) in enumerate(zip(sels, vectors, choices, strict=True)):
        g = np.frombuffer(sel.draws, dtype="<f8")
        np.testing.assert_array_equal(g, gumbel_draws(ids, 99, "doc", step))
        with np.errstate(divide="ignore"):
            assert choice == sel.choice == int(np.argmax(np.log(p) + g))
        assert sel.n_zero == int((p == 0).sum())
    assert al.verify(path).problems == []


@pytest.mark.parametrize("n", [3, SMALL, SMALL + 1, 200])
def test_both_paths_refuse_bad_vectors_with_the_same_messages(n: int) -> None:
    good = np.full(n, 1.0 / n)
    cases: list[tuple[float, type[Exception], str]] = [
        (float("nan"), ValueError, "must be finite; found nan at index 1"),
        (float("inf"), ValueError, "must be finite; found inf at index 1"),
        (-0.25, ValueError, r"must be non-negative; found -0\.25 at index 1"),
    ]
    for value, error, message in cases:
        bad = good.copy()
        bad[1] = value
        with pytest.raises(error, match=message):
            al.select(bad)
    with pytest.raises(ValueError, match=r"must sum to 1 within 1e-06; found sum 0\.(5|4999)"):
        al.select(good / 2)
    with pytest.raises(ValueError, match="cannot normalise an all-zero vector"):
        al.select(np.zeros(n), normalize=True)
    with pytest.raises(TypeError, match="must be a 1-D array of numbers"):
        al.select(["x"] * n)


@pytest.mark.parametrize("n", [5, SMALL, SMALL + 1, 300])
def test_normalize_logs_the_same_vector_on_both_paths(tmp_path: Path, n: int) -> None:
    scores = np.random.default_rng(n).random(n) * 3.0
    path = tmp_path / "t.zst"
    with al.record(path, seed=1):
        al.select(scores, normalize=True, name="s")
    logged = np.frombuffer(al.read(path).selections("s")[0].probs, dtype="<f8")
    np.testing.assert_array_equal(logged, scores / float(np.add.reduce(scores)))


def test_finite_scores_whose_sum_overflows_get_a_clear_error_on_both_paths() -> None:
    # Was an IndexError from the diagnosis, which looked only for NaN and negatives.
    with pytest.raises(ValueError, match=r"sums to inf in float64 \(largest entry 1e\+308\); "
                                         "scale the scores down"):
        al.select([1e308, 1e308], normalize=True)
    with (pytest.warns(RuntimeWarning, match="overflow"),
          pytest.raises(ValueError, match="sums to inf in float64")):
        al.select([1e308] * (SMALL + 8), normalize=True)
