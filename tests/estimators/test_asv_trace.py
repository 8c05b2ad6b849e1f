"""ASV faces built from channel Score records written at record time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import agentlog as al
from agentlog import IncompleteFaceError
from agentlog.estimators import asv


@al.window("step")
def step(x: int) -> int:
    return x + 1


def record_scores(path: Path, table: dict[str, list[tuple[float, float]]], *,
                  n_steps: int = 2, skip: tuple[str, int, int] | None = None,
                  waves: int = 1) -> None:
    """table[channel][layout] = (before, after) margins, the same for every step + step index."""
    with al.record(path, seed=1, task="t1"):
        for i in range(n_steps):
            step(i)
            ref = al.last_window("step")
            assert ref is not None
            for wave in range(waves):
                for channel, per_layout in table.items():
                    for layout, (b, a) in enumerate(per_layout):
                        if skip == (channel, layout, i):
                            continue
                        al.score("margin", b + i + wave, channel=channel, layout=layout,
                                 wave=wave, transition=ref.id, state_hash=ref.entry_hash)
                        al.score("margin", a + i + 2 * wave, channel=channel, layout=layout,
                                 wave=wave, transition=ref.id, state_hash=ref.exit_hash)


def test_layouts_are_reduced_within_channel_before_differencing(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    record_scores(path, {"direct": [(0.0, 1.0), (0.2, 0.6)], "quote": [(0.5, 0.1)] * 2})
    data = asv.from_trace(path, channels=("direct", "quote"))
    f = data.face()
    # direct: before mean 0.1, after 0.8 -> gain 0.7 ; quote gain -0.4 ; Ω = -1.1
    np.testing.assert_allclose(f.gain0, [0.7, 0.7], atol=1e-12)
    np.testing.assert_allclose(f.interaction, [-1.1, -1.1], atol=1e-12)
    assert data.layouts == {"direct": (0, 1), "quote": (0, 1)}
    assert list(data.target) == ["t1", "t1"] and len(set(data.trajectory)) == 1


def test_a_missing_layout_makes_the_corner_incomplete(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    record_scores(path, {"direct": [(0.0, 1.0), (0.2, 0.6)], "quote": [(0.5, 0.1)] * 2},
                  skip=("quote", 1, 1))
    data = asv.from_trace(path, channels=("direct", "quote"))
    with pytest.raises(IncompleteFaceError, match=r"transition 1: F_ρ1\(x−\), F_ρ1\(x\+\)"):
        data.face()
    assert data.face(complete_only=True).dropped.tolist() == [1]


def test_waves_are_kept_apart_for_the_retry_baseline(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    record_scores(path, {"direct": [(0.0, 1.0)], "quote": [(0.5, 0.1)]}, waves=2)
    data = asv.from_trace(path, channels=("direct", "quote"))
    assert data.waves == [0, 1]
    # wave w adds w to x− and 2w to x+: gains grow by w
    np.testing.assert_allclose(data.wave_gains("direct"), [[1.0, 2.0], [1.0, 2.0]], atol=1e-12)
    np.testing.assert_allclose(data.wave_gains("quote"), [[-0.4, 0.6], [-0.4, 0.6]], atol=1e-12)


def test_scores_that_name_no_endpoint_or_repeat_a_cell_are_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.zst"
    with al.record(path, seed=1):
        step(1)
        ref = al.last_window("step")
        assert ref is not None
        al.score("margin", 0.1, channel="direct", transition=ref.id, state_hash=b"x" * 32)
        al.score("margin", 0.1, channel="quote", transition=ref.id, state_hash=ref.entry_hash)
    with pytest.raises(ValueError, match="neither the entry nor the exit"):
        asv.from_trace(path, channels=("direct", "quote"))
    dup = tmp_path / "dup.zst"
    with al.record(dup, seed=1):
        step(1)
        ref = al.last_window("step")
        assert ref is not None
        for _ in range(2):
            al.score("m", 0.1, channel="direct", transition=ref.id, state_hash=ref.entry_hash)
    with pytest.raises(ValueError, match="scored twice on channel 'direct'"):
        asv.from_trace(dup, channels=("direct", "quote"))
    with pytest.raises(ValueError, match=r"no scores on channel\(s\) \['generated'\]"):
        asv.from_trace(path, channels=("quote", "generated"))


def test_the_target_identity_comes_from_run_meta_else_the_task(tmp_path: Path) -> None:
    for i, meta in enumerate(({"target": "opt-a"}, {})):
        with al.record(tmp_path / f"r{i}.zst", seed=1, task=f"task-{i}", meta=meta):
            step(i)
            ref = al.last_window("step")
            assert ref is not None
            for channel in ("direct", "quote"):
                for state in (ref.entry_hash, ref.exit_hash):
                    al.score("margin", 0.1, channel=channel, transition=ref.id,
                             state_hash=state)
    data = asv.from_trace(tmp_path, channels=("direct", "quote"))
    assert list(data.target) == ["opt-a", "task-1"]
    other = asv.from_trace(tmp_path, channels=("direct", "quote"), target_key="absent")
    assert list(other.target) == ["task-0", "task-1"]


def test_without_window_the_face_is_that_of_the_window_both_channels_score(
    tmp_path: Path,
) -> None:
    """The Python default matches `agentlog estimate asv`: an unscored window (a planner, a
    synthesis) in the same runs no longer makes ``face()`` incomplete."""
    from tests.cli._cli import invoke

    @al.window("plan")
    def plan(q: str) -> str:
        return q

    path = tmp_path / "t.zst"
    with al.record(path, seed=1, task="t1"):
        for i in range(3):
            plan("q")
            step(i)
            ref = al.last_window("step")
            assert ref is not None
            for channel, (b, a) in {"direct": (0.0, 1.0), "quote": (0.5, 0.1)}.items():
                al.score("margin", b, channel=channel, transition=ref.id,
                         state_hash=ref.entry_hash)
                al.score("margin", a + i, channel=channel, transition=ref.id,
                         state_hash=ref.exit_hash)
    data = asv.from_trace(path, channels=("direct", "quote"))
    assert set(data.window_names) == {"step"}
    np.testing.assert_allclose(data.face().interaction, [-1.4, -1.4, -1.4], atol=1e-12)
    result = invoke("estimate", "asv", path, "--channels", "direct,quote", "--json")
    assert result.exit_code == 0, result.output
    import json

    assert json.loads(result.stdout)["settings"]["window"] == "step"
    with pytest.raises(ValueError, match=r"no channel scores on the 3 transitions of "
                                         r"windows \['plan'\]; pick the window"):
        asv.from_trace(path, channels=("direct", "quote"), window="plan").face()


def test_without_window_two_scored_windows_are_refused_naming_them(tmp_path: Path) -> None:
    @al.window("other")
    def other(x: int) -> int:
        return x

    path = tmp_path / "t.zst"
    with al.record(path, seed=1, task="t1"):
        for fn, name in ((step, "step"), (other, "other")):
            fn(1)
            ref = al.last_window(name)
            assert ref is not None
            for channel in ("direct", "quote"):
                al.score("m", 0.0, channel=channel, transition=ref.id,
                         state_hash=ref.entry_hash)
                al.score("m", 1.0, channel=channel, transition=ref.id,
                         state_hash=ref.exit_hash)
    with pytest.raises(ValueError, match=r"both score the transitions of windows \['other', "
                                         r"'step'\]; pass window= to pick one"):
        asv.from_trace(path, channels=("direct", "quote"))
    assert asv.from_trace(path, channels=("direct", "quote"), window="other").window_names == [
        "other"]
