"""End to end: the example agent's record-time evaluator gives complete ASV faces."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import agentlog as al
from agentlog.cli import app
from agentlog.estimators import asv
from agentlog.examples.deep_research import (
    OPTIONS,
    EvalChannel,
    Evaluator,
    make_pool,
    run_agent,
    run_study,
    task_ids,
)

BIAS = (0.06, 0.02, -0.02, -0.06)  # the evaluator's position bias, first to last position


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("asv_study")
    paths: list[Path] = run_study(out, tasks=task_ids(3),
                                  rankings=("agent", "reversed", "uniform"), seeds=(0, 1))
    return paths


def hand_margin(lean: float, target: int) -> float:
    """The target-option margin averaged over the 4 cyclic layouts, written out longhand."""
    ratings = [lean, -lean, 0.1 - abs(lean), -0.5]
    total = 0.0
    for layout in range(4):
        rated = [ratings[i] + BIAS[(i + layout) % 4] for i in range(4)]
        total += rated[target] - max(r for i, r in enumerate(rated) if i != target)
    return total / 4


def quoted(values: list[float]) -> float:
    labels = [1 if v >= 0.3 else -1 if v <= -0.3 else 0 for v in values]
    return sum(labels) / len(labels)


def test_every_retrieval_gets_a_complete_face_in_four_layouts(study: list[Path]) -> None:
    data = asv.from_traces(study, channels=("direct", "quote"), window="retrieval",
                           score="margin")
    face = data.face()  # complete: no IncompleteFaceError
    assert len(face) == len(study) == 18 and face.dropped.size == 0
    assert data.layouts == {"direct": (0, 1, 2, 3), "quote": (0, 1, 2, 3)}
    assert data.waves == [0] and set(data.window_names) == {"retrieval"}
    # the target identity is the reviewed option each run records in its meta
    targets = {al.read(p).runs[0].start.meta["target"] for p in study}
    assert len(set(data.trajectory)) == 18 and set(data.target) == targets
    assert targets <= {"supports", "opposes", "mixed"}
    for path in study:
        trace = al.read(path)
        margins = trace.scores("margin")
        assert len(margins) == 2 * 2 * 4  # channels x states x layouts
        assert all(s.window == -1 and s.wave == 0 for s in margins)  # run-level readouts
        assert al.verify(path).ok
    # the layouts matter: the position bias moves the per-layout margins
    per_layout = np.stack([data.per_layout[(0, "direct", lay)] for lay in range(4)])
    assert np.ptp(per_layout, axis=0).max() > 0.05
    # the quote view's gain has the other sign on some transitions, not on all
    assert 0 < face.sign_disagree.sum() < len(face)


def test_the_reduced_corners_equal_the_evaluator_worked_by_hand(tmp_path: Path) -> None:
    episode = run_agent("q2", ranking="reversed", seed=11, path=tmp_path / "q2.zst")
    pool = make_pool("q2", seed=0)
    theta = pool.theta_star
    target = 0 if theta > 0.05 else 1 if theta < -0.05 else 2
    shown = pool.order("reversed")[:3]  # the quote view's results page before search
    before_quote = quoted([pool.prediction[pool.ids.index(d)] for d in shown])
    opened = list(episode.retrieval.y)
    expected = [
        hand_margin(float(np.mean(pool.prediction)), target),  # F_direct(x−): from m̄
        hand_margin(float(np.mean(opened)), target),  # F_direct(x+): the opened scores
        hand_margin(before_quote, target),  # F_quote(x−)
        hand_margin(quoted(opened), target),  # F_quote(x+)
    ]
    data = asv.from_traces(tmp_path / "q2.zst", channels=("direct", "quote"),
                           window="retrieval")
    np.testing.assert_allclose(data.corners[0][0], expected, rtol=0, atol=1e-12)
    face = data.face()
    assert face.interaction[0] == pytest.approx(
        (expected[3] - expected[2]) - (expected[1] - expected[0]), abs=1e-12)
    assert OPTIONS[target] in ("supports", "opposes", "mixed")


def test_two_channels_reading_the_same_view_have_zero_interaction_end_to_end(
    tmp_path: Path,
) -> None:
    """An additive channel offset moves every corner but cancels in both gains: Ω = 0."""
    same_view = Evaluator(channels=(EvalChannel("direct", "evidence"),
                                    EvalChannel("shifted", "evidence", offset=0.7)))
    paths = run_study(tmp_path / "same", tasks=task_ids(2), rankings=("agent", "reversed"),
                      seeds=(0, 1), evaluate=same_view)
    data = asv.from_traces(paths, channels=("direct", "shifted"), window="retrieval")
    face = data.face()
    np.testing.assert_allclose(face.after1 - face.after0, 0.7, atol=1e-12)
    np.testing.assert_allclose(face.interaction, 0.0, atol=1e-12)
    np.testing.assert_allclose(face.view_part, 0.7, atol=1e-12)  # the offset is all view
    assert not face.sign_disagree.any()
    result = CliRunner(env={"COLUMNS": "200"}).invoke(app, [
        "estimate", "asv", str(tmp_path / "same"), "--channels", "direct,shifted",
        "--resamples", "200", "--json"])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)["statistics"]
    assert stats["mean_interaction"]["value"] == pytest.approx(0.0, abs=1e-12)
    assert max(map(abs, stats["mean_interaction"]["interval"])) < 1e-6
    assert stats["mean_sign_disagreement"]["value"] == 0.0
    assert stats["mean_view_part"]["value"] == pytest.approx(0.7, abs=1e-12)


def test_the_evaluator_can_be_switched_off_and_is_a_no_op_without_a_recorder(
    tmp_path: Path,
) -> None:
    run_agent("q1", ranking="agent", seed=3, path=tmp_path / "off.zst", evaluate=False)
    trace = al.read(tmp_path / "off.zst")
    assert trace.scores("margin") == [] and len(trace.scores()) == 3  # the grade's scores
    episode = run_agent("q1", ranking="agent", seed=3)  # no recorder: nothing to score
    assert episode.path is None
