"""``select`` over vectors of every size: the recorded draws are the keyed noise of
``reentry.gumbel_draws`` (same (seed, stream, step, id) -> same draw), the choice their
argmax, and a bad vector gets the same message whatever its length."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import agentlog as al
from agentlog.reentry import gumbel_draws

SMALL = 32  # a size on each side of which select once took a different path


@pytest.mark.parametrize("n", [1, 2, 7, 8, 10, SMALL, SMALL + 1, 100])
def test_select_records_the_keyed_draws_and_their_argmax(
    tmp_path: Path, n: int
) -> None:
    rng = np.random.default_rng(n)
    ids = [f"doc-{i}" for i in range(n)]
    vectors = [rng.dirichlet(np.ones(n)) for _ in range(20)]
    for p in vectors[::4]:
        p[: n // 3] = 0.0  # zeros: log 0 = -inf is never chosen
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
def test_bad_vectors_of_any_length_get_the_same_messages(n: int) -> None:
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
def test_normalize_logs_the_vector_divided_by_its_numpy_sum(tmp_path: Path, n: int) -> None:
    scores = np.random.default_rng(n).random(n) * 3.0
    path = tmp_path / "t.zst"
    with al.record(path, seed=1):
        al.select(scores, normalize=True, name="s")
    logged = np.frombuffer(al.read(path).selections("s")[0].probs, dtype="<f8")
    np.testing.assert_array_equal(logged, scores / float(np.add.reduce(scores)))


def test_finite_scores_whose_sum_overflows_get_a_clear_error() -> None:
    # Was an IndexError from the diagnosis, which looked only for NaN and negatives. numpy's
    # own overflow warning comes first (its sum is the one every select takes).
    for n in (2, SMALL + 8):
        with (pytest.warns(RuntimeWarning, match="overflow"),
              pytest.raises(ValueError, match=r"sums to inf in float64 \(largest entry "
                                              r"1e\+308\); scale the scores down")):
            al.select([1e308] * n, normalize=True)
