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
    data = asv.from_traces(path, channels=("direct", "quote"))
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
    data = asv.from_traces(path, channels=("direct", "quote"))
    with pytest.raises(IncompleteFaceError, match=r"transition 1: F_ρ1\(x−\), F_ρ1\(x\+\)"):
        data.face()
    assert data.face(complete_only=True).dropped.tolist() == [1]


def test_waves_are_kept_apart_for_the_retry_baseline(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    record_scores(path, {"direct": [(0.0, 1.0)], "quote": [(0.5, 0.1)]}, waves=2)
    data = asv.from_traces(path, channels=("direct", "quote"))
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
        asv.from_traces(path, channels=("direct", "quote"))
    dup = tmp_path / "dup.zst"
    with al.record(dup, seed=1):
        step(1)
        ref = al.last_window("step")
        assert ref is not None
        for _ in range(2):
            al.score("m", 0.1, channel="direct", transition=ref.id, state_hash=ref.entry_hash)
    with pytest.raises(ValueError, match="scored twice on channel 'direct'"):
        asv.from_traces(dup, channels=("direct", "quote"))
    with pytest.raises(ValueError, match=r"no scores on channel\(s\) \['generated'\]"):
        asv.from_traces(path, channels=("quote", "generated"))


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
    data = asv.from_traces(tmp_path, channels=("direct", "quote"))
    assert list(data.target) == ["opt-a", "task-1"]
    other = asv.from_traces(tmp_path, channels=("direct", "quote"), target_key="absent")
    assert list(other.target) == ["task-0", "task-1"]


def record_study(folder: Path, *, reverse: bool = False) -> None:
    """Twelve runs (system, task, seed) with one scored step each; the same content every
    time it is recorded (only the random run ids and clocks differ)."""
    rng = np.random.default_rng(7)
    margins = rng.normal(size=(12, 4))
    order = range(11, -1, -1) if reverse else range(12)
    for i in order:
        with al.record(folder / f"run{i:02d}.zst", seed=100 + i, task=f"task-{i % 4}",
                       system="agent", meta={"replicate": i // 4}):
            step(i)
            ref = al.last_window("step")
            assert ref is not None
            for j, channel in enumerate(("direct", "quote")):
                al.score("margin", float(margins[i, 2 * j]), channel=channel,
                         transition=ref.id, state_hash=ref.entry_hash)
                al.score("margin", float(margins[i, 2 * j + 1]), channel=channel,
                         transition=ref.id, state_hash=ref.exit_hash)


def test_re_recording_the_same_runs_gives_bit_identical_bootstrap_intervals(
        tmp_path: Path) -> None:
    """Blocks are keyed by what was recorded (system, task, seed and differing meta), never
    by the random run id, and ordered by their keys: the intervals of a second recording
    (run ids, clocks and the order in which the files were written all differ) are the
    same to the bit."""
    record_study(tmp_path / "a")
    record_study(tmp_path / "b", reverse=True)
    summaries = []
    for folder in ("a", "b"):
        data = asv.from_traces(tmp_path / folder, channels=("direct", "quote"))
        f = data.face()
        with pytest.warns(al.DegenerateDataWarning, match="12 trajectories: below"):
            summaries.append(asv.summarize(f, trajectory=data.trajectory[f.kept],
                                           n_resamples=500, seed=0))
    a, b = summaries
    assert len({t for t, _ in asv.from_traces(tmp_path / "a", channels=("direct", "quote")
                                              ).transitions}) == 12  # distinct run ids
    for name in a.values:
        assert a.confidence_interval(name) == b.confidence_interval(name), name
        assert np.array_equal(a.samples[name], b.samples[name]), name
    assert a.inputs_hash == b.inputs_hash


def test_the_default_trajectory_key_names_system_task_seed_and_replicate(
        tmp_path: Path) -> None:
    record_study(tmp_path)
    data = asv.from_traces(tmp_path, channels=("direct", "quote"))
    assert data.trajectory[0] == "agent/task-0/seed=100"
    assert len(set(data.trajectory)) == 12


def test_runs_sharing_system_task_and_seed_are_told_apart_by_their_differing_meta(
        tmp_path: Path) -> None:
    """Paired rankings of one seed are two trajectories; an exact repeat is one block."""
    for i, meta in enumerate(({"ranking": "agent", "k": 1}, {"ranking": "reversed", "k": 1},
                              {"ranking": "agent", "k": 1})):
        with al.record(tmp_path / f"r{i}.zst", seed=5, task="q", system="s", meta=meta):
            step(i)
            ref = al.last_window("step")
            assert ref is not None
            for channel in ("direct", "quote"):
                for state in (ref.entry_hash, ref.exit_hash):
                    al.score("margin", 0.1 * i, channel=channel, transition=ref.id,
                             state_hash=state)
    data = asv.from_traces(tmp_path, channels=("direct", "quote"))
    assert list(data.trajectory) == ["s/q/seed=5/ranking=agent", "s/q/seed=5/ranking=reversed",
                                     "s/q/seed=5/ranking=agent"]


def test_a_user_given_trajectory_key_groups_runs_into_blocks(tmp_path: Path) -> None:
    record_study(tmp_path)
    data = asv.from_traces(tmp_path, channels=("direct", "quote"), trajectory_key="replicate")
    assert sorted(set(data.trajectory)) == ["0", "1", "2"]
    with pytest.raises(ValueError, match=r"run 0 has no meta key 'episode' for "
                                         r"`trajectory_key`; meta keys present: replicate"):
        asv.from_traces(tmp_path, channels=("direct", "quote"), trajectory_key="episode")


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
    data = asv.from_traces(path, channels=("direct", "quote"))
    assert set(data.window_names) == {"step"}
    np.testing.assert_allclose(data.face().interaction, [-1.4, -1.4, -1.4], atol=1e-12)
    result = invoke("estimate", "asv", path, "--channels", "direct,quote", "--json")
    assert result.exit_code == 0, result.output
    import json

    assert json.loads(result.stdout)["settings"]["window"] == "step"
    with pytest.raises(ValueError, match=r"no channel scores on the 3 transitions of "
                                         r"windows \['plan'\]; pick the window"):
        asv.from_traces(path, channels=("direct", "quote"), window="plan").face()


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
        asv.from_traces(path, channels=("direct", "quote"))
    assert asv.from_traces(path, channels=("direct", "quote"), window="other").window_names == [
        "other"]


def test_cells_land_on_their_rows_whatever_the_number_of_transitions(
        tmp_path: Path) -> None:
    """The collection keeps a (transitions, 2) array per (wave, channel, layout), grown as
    transitions come: 2,500 transitions, scored sparsely and a grid's first score on a late
    transition, land on their own rows."""
    path = tmp_path / "many.zst"
    n = 2500
    with al.record(path, seed=1, task="t"):
        refs = []
        for i in range(n):
            step(i)
            ref = al.last_window("step")
            assert ref is not None
            refs.append(ref)
        for i in reversed(range(0, n, 7)):  # the quote grid first sees a late transition
            ref = refs[i]
            al.score("m", float(i), channel="quote", transition=ref.id,
                     state_hash=ref.exit_hash)
        for i in range(0, n, 3):
            ref = refs[i]
            al.score("m", -float(i), channel="direct", transition=ref.id,
                     state_hash=ref.entry_hash)
    data = asv.from_traces(path, channels=("direct", "quote"))
    corners = data.corners[0]
    expect = np.full((n, 4), np.nan)
    expect[::3, 0] = -np.arange(0, n, 3)
    expect[::7, 3] = np.arange(0, n, 7)
    np.testing.assert_array_equal(corners, expect)
    assert [t[1] for t in data.transitions] == [r.id for r in refs]
