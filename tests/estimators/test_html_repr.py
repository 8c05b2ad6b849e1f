"""Every estimator result shows itself in a notebook: an escaped HTML table of the numbers
its ``to_dict`` and intervals give, formatted as the CLI prints them, and a figure of the
certified rank intervals where matplotlib is installed. Odd data (NaN, empty) renders."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from agentlog.display import format_interval
from agentlog.estimators import asv, certify, cess, reliability
from tests._html import parse_html

HOSTILE = "<script>alert(1)</script>"


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    """Small samples warn when a result is made; these tests are about showing it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def shown(result: Any) -> str:
    """The text of ``result._repr_html_()``, its tags balanced and free of markup from data."""
    markup = result._repr_html_()
    tags, text = parse_html(markup)
    assert "script" not in tags and HOSTILE not in markup
    assert "could not render" not in text
    return text


# ------------------------------------------------------------------------------ CESS


def test_cess_shows_each_estimator_per_trajectory_and_the_theorem_2_note() -> None:
    r = cess.estimate([0.5, -0.2], [0.1, 0.2], [1.0, 0.8], [0.1, 0.0], 0.05, 10,
                      budget=2, lam=0.5)
    text = shown(r)
    assert "|budget K|2|" in text and "|λ|0.500|" in text
    assert "|Opened Mean|OR|IPW|DR (raw)|CESS|" in text
    row = [f"{float(getattr(r, a)[0]):.3f}" for a in
           ("opened_mean", "outcome_regression", "ipw", "dr_raw", "estimate")]
    assert "|0|" + "|".join(row) + f"|2|{r.ess[0]:.3f}|" in text
    assert "Theorem 2" in text


def test_cess_with_nan_trajectories_and_no_trajectory_renders() -> None:
    nan = float("nan")
    r = cess.estimate([[nan, nan]], [[nan, nan]], [[nan, nan]], [[nan, nan]], 0.0, 10,
                      budget=2)
    assert "|trajectories|1|" in shown(r)
    try:
        empty = cess.estimate(np.empty((0, 2)), np.empty((0, 2)), np.empty((0, 2)),
                              np.empty((0, 2)), np.empty(0), 10, budget=2)
    except ValueError:
        return  # refused before a result exists: nothing to show
    assert "|trajectories|0|" in shown(empty)


# ------------------------------------------------------------------------------- ASV


def _face(n: int = 60) -> asv.AsvFace:
    rng = np.random.default_rng(0)
    return asv.face(*rng.normal(size=(4, n)))


def test_an_asv_face_shows_its_corners_gains_and_interaction() -> None:
    f = _face()
    text = shown(f)
    assert f"|transitions|{len(f)}|" in text
    assert f"|sign disagreements|{int(f.sign_disagree.sum())} of {len(f)}|" in text
    assert f"|mean|{np.mean(f.gain0):+.3f}|{np.mean(f.gain1):+.3f}|" \
           f"{np.mean(f.interaction):+.3f}|" in text
    assert "|" + "|".join(asv.CORNERS) + "|G0|G1|Ω|" in text
    assert f"|0|{f.before0[0]:+.3f}|{f.after0[0]:+.3f}|" in text
    assert "… and 40 more" in text


def test_an_asv_summary_shows_every_statistic_with_its_interval() -> None:
    f = _face()
    s = asv.summarize(f, trajectory=np.arange(len(f)) // 2, n_resamples=200, seed=0)
    text = shown(s)
    low, high = s.confidence_interval("mean_interaction")
    assert (f"|mean_interaction|{s.values['mean_interaction']:+.3f}|"
            f"{format_interval(low, high, '+.3f')}|") in text
    low, high = s.confidence_interval("mean_sign_disagreement")
    assert (f"|mean_sign_disagreement|{s.values['mean_sign_disagreement']:.1%}|"
            f"{format_interval(low, high, '.1%')}|") in text
    assert f"|trajectories|{s.n_trajectories}|" in text and "|95% CI|" in text
    assert s.calibration.explanation in text
    assert f"|mean Ω sign|{s.calibration.mean_interaction_sign}|" in shown(s.calibration)


def test_the_retry_and_auc_baselines_show_their_three_estimates() -> None:
    rng = np.random.default_rng(1)
    traj = np.arange(60) // 2
    r = asv.retry_disagreement(rng.normal(size=(60, 2)), rng.normal(size=(60, 2)),
                               trajectory=traj, n_resamples=200)
    text = shown(r)
    for name in ("cross_channel", "same_channel", "excess"):
        assert f"|{name}|{getattr(r, name):.1%}|" in text
    a = asv.auc_difference(rng.normal(size=60), rng.normal(size=60), np.arange(60) % 2,
                           trajectory=traj, n_resamples=200)
    text = shown(a)
    assert f"|auc0|{a.auc0:.3f}|" in text and f"|difference|{a.difference:+.3f}|" in text


# ----------------------------------------------------------------------- reliability


def test_a_reliability_summary_shows_the_tail_statistics_and_the_interval() -> None:
    r = reliability.summary([0, 0, 1, 0, 0, 0, 0, 1, 1, 1], n_resamples=500)
    text = shown(r)
    low, high = r.confidence_interval()
    assert "|runs|10|mean|0.400|" in text
    assert f"|95% CI (BCa)|{format_interval(low, high)}|" in text
    assert "|worst|0.000|CVaR@0.2|0.000|Reliability@0.9|40.0%|" in text


def test_grouped_reliability_shows_one_row_per_group_with_escaped_labels() -> None:
    g = reliability.summary([0.9, 1.0, 0.2, 0.8, 0.8, 0.9],
                            groups=([HOSTILE] * 3 + ["b"] * 3, ["T3"] * 6), n_resamples=500)
    text = shown(g)
    assert "|group_0|group_1|runs|mean|" in text
    b = g["b", "T3"]
    low, high = b.confidence_interval()
    assert (f"|b|T3|3|{b.mean:.3f}|{format_interval(low, high)}|{b.worst:.3f}|"
            f"{b.cvar:.3f}|{b.reliability:.1%}|") in text
    assert f"|{HOSTILE}|T3|3|" in text


def test_a_constant_group_renders_its_point_interval() -> None:
    r = reliability.summary([0.5] * 20, n_resamples=200)
    assert "|95% CI (BCa)|[0.500, 0.500]|" in shown(r)


def test_a_terminal_table_shows_its_score_names_and_runs(tmp_path: Any) -> None:
    pytest.importorskip("pyarrow")
    pytest.importorskip("duckdb")
    import agentlog as al
    from agentlog.dataset import to_parquet

    path = tmp_path / "t.zst"
    with al.record(str(path), seed=1, system=HOSTILE, task="t1", mode="w"):
        al.score("f1", 0.5)
    to_parquet(str(path), str(tmp_path / "ds"))
    table = reliability.terminal_table(str(tmp_path / "ds"))
    text = shown(table)
    assert "|f1|1|" in text and f"|{HOSTILE}|t1|1|" in text


# ---------------------------------------------------------------------------- effects


def test_policy_effects_show_each_effect_with_interval_and_standard_error() -> None:
    fx = cess.policy_effects([0.0, 0.1, 0.2], [0.3, 0.5, 0.4], [0.1, 0.1, 0.3],
                             [0.5, 0.6, 0.9], n_resamples=100)
    text = shown(fx)
    for e in ("selection", "stopping", "interaction", "total"):
        low, high = fx.confidence_interval(e)
        assert (f"|{e}|{getattr(fx, e):+.3f}|{format_interval(low, high, '+.3f')}|"
                f"{fx.standard_error(e):.3f}|") in text
    assert f"|paired blocks|{fx.n_blocks}|" in text and "Theorem 2" in text


# ---------------------------------------------------------------------------- certify


@pytest.fixture(scope="module")
def board() -> certify.BoardResult:
    rng = np.random.default_rng(0)
    n, g = 40, 20
    clusters = np.arange(n) % g
    task = rng.normal(0, 0.1, n)
    means = {"alpha": 0.8, "beta": 0.5, HOSTILE: 0.2}
    scores = {s: m + task + rng.normal(0, 0.05, n) for s, m in means.items()}
    plan = certify.Plan.from_toml('estimand = "whole-agent contrast"\n[readouts.f1]\n'
                                  "tolerance = 0.05\n[conditions]\nshared_entry = true\n"
                                  "[calibration]\nn_resamples = 200\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return certify.certify(scores, clusters=clusters, plan=plan)


def test_the_board_shows_each_system_its_rank_interval_and_scores(
        board: certify.BoardResult) -> None:
    text = shown(board)
    for s in board.systems:
        lo, hi = board.rank(s)
        rank = f"{lo} ●" if lo == hi else f"{lo}–{hi}"
        assert (f"|{rank}|{s}|{board.n_tasks[s]}|{board.scores[s]['composite']:.3f}|"
                f"{board.scores[s]['f1']:.3f}|") in text
    assert f"|pairs (family size)|{board.family_size}|" in text
    for p in board.pairs:
        assert f"|{p.a} vs {p.b}|" in text and f"|{p.delta:+.3f}|" in text
    assert f"|certified: alpha ≻ beta|{board.decision('alpha', 'beta').delta:+.3f}|" in text
    assert "|R0|" in text and "|R5|" in text
    if board.calibration is not None:
        assert f"|sign-flip draws|{board.calibration.n_resamples:,}" in text


def test_the_board_draws_its_rank_intervals_where_matplotlib_is_installed(
        board: certify.BoardResult) -> None:
    pytest.importorskip("matplotlib")
    tags, _ = parse_html(board._repr_html_())
    assert tags.count("img") == 1
    assert 'alt="certified rank intervals"' in board._repr_html_()


@pytest.mark.parametrize("part", [
    lambda b: b.pairs[0], lambda b: b.ladder[0], lambda b: b.calibration,
    lambda b: b.ranks[b.target],
    lambda b: b.calibration.leave_one_out[0] if b.calibration else None,
])
def test_every_part_of_the_board_renders(board: certify.BoardResult,
                                         part: Callable[[certify.BoardResult], Any]) -> None:
    obj = part(board)
    if obj is not None:
        assert shown(obj).strip("|")


def test_rank_intervals_show_pinned_positions_and_cycles() -> None:
    r = certify.rank_intervals(["a", "b", "c", HOSTILE], [("a", "b"), ("b", "a"), ("a", "c"),
                                                          ("b", "c"), ("c", HOSTILE)])
    text = shown(r)
    assert "|c|3 ●|" in text and f"|{HOSTILE}|4 ●|" in text and "|a|1–2|" in text
    assert "cycle among a, b" in text
