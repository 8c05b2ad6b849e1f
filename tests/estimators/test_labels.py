"""Labels to integer codes: the one helper (a private piece, tested directly) and the level
orders the estimators built on it keep (sorted, as strings, by repr, first appearance)."""

from __future__ import annotations

import numpy as np
import pytest

from agentlog.estimators import bounds, reliability
from agentlog.estimators._labels import codes


def test_levels_are_the_sorted_distinct_labels_and_codes_index_them() -> None:
    levels, code = codes(["b", "a", "c", "a"])
    assert levels.tolist() == ["a", "b", "c"]
    assert code.tolist() == [1, 0, 2, 0] and code.dtype == np.intp
    assert [levels[c] for c in code] == ["b", "a", "c", "a"]


def test_numbers_sort_as_numbers_and_mixed_labels_as_strings() -> None:
    assert codes([10, 9, 10])[0].tolist() == [9, 10]
    levels, code = codes(np.array([10, "9", 10], dtype=object))
    assert levels.tolist() == ["10", "9"] and code.tolist() == [0, 1, 0]


def test_given_levels_fix_the_order_and_every_label_must_be_one() -> None:
    levels, code = codes(["x", "y", "x"], levels=["y", "x", "z"])
    assert levels == ("y", "x", "z") and code.tolist() == [1, 0, 1]
    with pytest.raises(ValueError, match=r"`arm` has label\(s\) \['w'\] that are not among"):
        codes(["x", "w"], name="arm", levels=["x"])
    with pytest.raises(ValueError, match=r"the levels of `arm` repeat a level"):
        codes(["x"], name="arm", levels=["x", "x"])


def test_labels_must_be_one_dimensional() -> None:
    with pytest.raises(ValueError, match=r"`task` must be one label per run \(1-D\)"):
        codes([["a", "b"]], name="task")


def test_empty_labels_have_no_levels() -> None:
    levels, code = codes([])
    assert len(levels) == 0 and code.shape == (0,)


def test_sensitivity_groups_keep_their_first_appearance_order() -> None:
    x = np.array([1.0, 2.0, 1.0, 2.0, 1.0, 2.0])
    y = np.array([0.5, 0.9, 0.4, 1.0, 0.6, 1.2])
    fit = bounds.fit_sensitivity(x, y, method="ratio-sup", groups=["q", "q", "b", "b", "m", "m"])
    assert [g.label for g in fit.groups] == ["q", "b", "m"]


def test_non_degeneracy_orders_actions_by_their_repr() -> None:
    r = reliability.non_degeneracy([2, 10, 2, 10, 1, 1], [0.0, 1.0, 0.1, 0.9, 0.5, 0.4],
                                   n_permutations=99)
    assert r.actions == (1, 10, 2)  # repr order: '1' < '10' < '2'


def test_degradation_levels_follow_the_declared_order() -> None:
    scores = np.linspace(0.1, 0.9, 60)
    difficulty = np.repeat(["hard", "easy", "mid"], 20)
    curve = reliability.degradation_curve(scores, difficulty, levels=["easy", "mid", "hard"],
                                          n_resamples=50)
    assert curve.levels == ("easy", "mid", "hard")
    assert curve.mean[0].tolist() == pytest.approx([scores[20:40].mean(), scores[40:].mean(),
                                                    scores[:20].mean()])
    default = reliability.degradation_curve(scores, difficulty, n_resamples=50)
    assert default.levels == ("easy", "hard", "mid")
