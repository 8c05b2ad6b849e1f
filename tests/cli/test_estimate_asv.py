"""`agentlog estimate asv`: the four-corner face of recorded transitions; bad input exits 2."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agentlog as al
from agentlog.estimators import asv
from agentlog.examples.deep_research import run_study, task_ids
from tests.cli._cli import invoke

CHANNELS = ("direct", "quote")


def asv_json(*args: str | Path) -> dict[str, Any]:
    result = invoke("estimate", "asv", *args, "--json")
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def bad(*args: str | Path) -> str:
    result = invoke("estimate", "asv", *args)
    assert result.exit_code == 2, result.output
    return result.stderr


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example agent's traces: its evaluator scores every retrieval under both channels."""
    out = tmp_path_factory.mktemp("asv") / "traces"
    run_study(out, tasks=task_ids(3), rankings=("agent", "reversed"), seeds=(0, 1))
    return out


@al.window("asv_cli_hop")
def hop(x: int) -> int:
    return x + 1


def record_faces(folder: Path, gains: Sequence[Sequence[tuple[float, float]]], *,
                 skip: tuple[int, str, int] | None = None) -> Path:
    """One run (trajectory) per transition; ``gains[i][wave] = (G^direct, G^quote)``.

    Each channel scores x− as 0.1 and x+ as 0.1 + its gain, in two layouts. ``skip =
    (transition, channel, wave)`` leaves out that cell's x+ scores (an incomplete corner).
    """
    folder.mkdir(parents=True, exist_ok=True)
    for i, waves in enumerate(gains):
        with al.record(folder / f"t{i}.zst", seed=i, task=f"task{i % 2}"):
            hop(i)
            ref = al.last_window("asv_cli_hop")
            assert ref is not None
            for wave, pair in enumerate(waves):
                for channel, g in zip(CHANNELS, pair, strict=True):
                    for layout in (0, 1):
                        al.score("margin", 0.1, channel=channel, layout=layout, wave=wave,
                                 transition=ref.id, state_hash=ref.entry_hash)
                        if skip != (i, channel, wave):
                            al.score("margin", 0.1 + g, channel=channel, layout=layout,
                                     wave=wave, transition=ref.id, state_hash=ref.exit_hash)
    return folder


def test_the_table_reports_the_face_its_allocation_and_the_calibration_verdict(
    study: Path,
) -> None:
    result = invoke("estimate", "asv", study, "--channels", "direct,quote", "--resamples",
                    "500")
    assert result.exit_code == 0, result.output
    for text in ("ASV on 12 transitions of window 'retrieval' from 12 trajectories in 12 "
                 "trace file(s)", "ρ0 = direct, ρ1 = quote", "score 'margin'",
                 "layouts direct 4 / quote 4", "Ω = G^quote − G^direct", "empirical weighting",
                 "mean Ω", "median Ω", "10%-trimmed mean Ω", "share of negative Ω",
                 "mean gain G^direct", "mean gain G^quote", "sign disagreement",
                 "diagonal F_quote(x+) − F_direct(x−)", "state part", "view part",
                 "95% interval", "500 shared draws", "Calibration (Remark 2)",
                 "the cross-channel sign disagreement", "The sign of the mean Ω",
                 "Per transition, Ω's sign survives"):
        assert text in result.stdout, text
    assert "dropped as incomplete" not in result.stdout
    assert "same-channel retry" not in result.stdout  # one wave only


def test_json_is_the_library_summary_plus_counts(study: Path) -> None:
    out = asv_json(study, "--channels", "direct,quote", "--resamples", "300", "--seed", "3")
    data = asv.from_traces(study, channels=CHANNELS, window="retrieval", score="margin")
    face = data.face()
    with pytest.warns(al.DegenerateDataWarning, match="12 trajectories: below 30"):
        expected = asv.summarize(face, trajectory=data.trajectory, n_resamples=300, seed=3)
    ref = json.loads(json.dumps(expected.to_dict()))
    for key in ("weighting", "n_transitions", "n_trajectories", "n_resamples", "seed",
                "interval_method", "statistics", "calibration", "note"):
        assert out[key] == ref[key], key
    assert out["channels"] == ["direct", "quote"]
    assert out["counts"] == {
        "transitions": 12, "complete": 12, "dropped_incomplete": 0, "trajectories": 12,
        "trajectories_complete": 12, "targets": len(set(data.target)),
        "sign_disagreements": int(face.sign_disagree.sum()),
        "negative_interactions": int((face.interaction < 0).sum()),
        "waves": [0], "layouts": {"direct": [0, 1, 2, 3], "quote": [0, 1, 2, 3]},
    }
    s = out["settings"]
    assert (s["window"], s["window_source"], s["score"], s["wave"], s["complete_only"]) == (
        "retrieval", "the window both channels score", "margin", 0, False)
    assert out["retry"] is None and out["plot"] is None
    assert out["interval_method"] == "BCa" and out["settings"]["ci_method"] == "BCa"
    assert len(out["warnings"]) == 1 and "below 30 the 95% BCa" in out["warnings"][0]
    assert set(out["statistics"]) == {
        "mean_interaction", "median_interaction", "trimmed_mean_interaction",
        "share_negative_interaction", "mean_gain0", "mean_gain1", "mean_sign_disagreement",
        "mean_diagonal", "mean_state_part", "mean_view_part"}


def test_equal_target_weighting_and_the_channel_order_reach_the_estimator(study: Path) -> None:
    out = asv_json(study, "--channels", "quote,direct", "--window", "retrieval", "--score",
                   "margin", "--weighting", "equal-target", "--resamples", "200")
    data = asv.from_traces(study, channels=("quote", "direct"), window="retrieval")
    with pytest.warns(al.DegenerateDataWarning, match="12 trajectories: below 30"):
        expected = asv.summarize(data.face(), trajectory=data.trajectory,
                                 target=data.target, weighting="equal-target", n_resamples=200)
    assert out["weighting"] == "equal-target"
    assert out["statistics"]["mean_interaction"]["value"] == pytest.approx(
        expected.values["mean_interaction"], abs=1e-12)
    assert out["settings"]["window_source"] == "--window" and out["channels"] == [
        "quote", "direct"]
    flipped = asv_json(study, "--channels", "direct,quote", "--resamples", "200",
                       "--weighting", "equal-target")
    assert out["statistics"]["mean_gain0"]["value"] == pytest.approx(
        flipped["statistics"]["mean_gain1"]["value"], abs=1e-12)


def test_plot_writes_a_png_of_the_gains_and_the_mean_interaction(study: Path,
                                                                 tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")  # the plot extra
    png = tmp_path / "face.png"
    out = asv_json(study, "--channels", "direct,quote", "--resamples", "200", "--plot", png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out["plot"] == str(png)
    shown = invoke("estimate", "asv", study, "--channels", "direct,quote", "--resamples",
                   "200", "--plot", png)
    assert shown.exit_code == 0 and "face.png (per-transition gains and the mean Ω)" in (
        shown.stdout)


def test_two_waves_add_the_same_channel_retry_baseline(tmp_path: Path) -> None:
    # Transitions 0-1 disagree across channels in both waves, 2-3 agree; retries never flip.
    gains = [[(0.5, -0.3), (0.4, -0.2)], [(0.2, -0.1), (0.3, -0.4)],
             [(0.5, 0.3), (0.6, 0.2)], [(-0.2, -0.1), (-0.3, -0.2)]]
    folder = record_faces(tmp_path / "waves", gains)
    out = asv_json(folder, "--channels", "direct,quote", "--resamples", "200")
    retry = out["retry"]
    assert (retry["n_transitions"], retry["n_trajectories"]) == (4, 4)
    assert retry["waves"] == {"direct": [0, 1], "quote": [0, 1]}
    assert retry["cross_channel"]["value"] == pytest.approx(0.5)
    assert retry["same_channel"]["value"] == 0.0
    assert retry["excess"]["value"] == pytest.approx(0.5)
    assert out["counts"]["waves"] == [0, 1] and out["settings"]["wave"] == 0
    shown = invoke("estimate", "asv", folder, "--channels", "direct,quote", "--resamples", "200")
    assert shown.exit_code == 0, shown.output
    for text in ("Sign disagreement vs same-channel retries (4 transitions complete in every "
                 "wave)", "cross-channel (every wave pairing)", "same-channel retry",
                 "excess", "50.0%"):
        assert text in shown.stdout, text


def test_an_incomplete_face_exits_2_and_complete_only_drops_it(tmp_path: Path) -> None:
    gains = [[(0.5, -0.3)], [(0.2, 0.1)], [(0.4, 0.3)]]
    folder = record_faces(tmp_path / "gap", gains, skip=(1, "quote", 0))
    err = bad(folder, "--channels", "direct,quote")
    assert "1 transition(s) lack a corner: transition 1: F_ρ1(x+)" in err
    assert "Proposition 1" in err and "(on the command line: --complete-only)" in err
    out = asv_json(folder, "--channels", "direct,quote", "--complete-only", "--resamples",
                   "200")
    assert out["counts"]["transitions"] == 3 and out["counts"]["complete"] == 2
    assert out["counts"]["dropped_incomplete"] == 1 and out["settings"]["complete_only"]
    np.testing.assert_allclose(out["statistics"]["mean_interaction"]["value"],
                               np.mean([-0.8, -0.1]), atol=1e-12)
    shown = invoke("estimate", "asv", folder, "--channels", "direct,quote", "--complete-only",
                   "--resamples", "200")
    assert shown.exit_code == 0 and "1 of 3 transitions dropped as incomplete" in shown.stdout


def test_one_trajectory_shows_the_degenerate_bootstrap_warning(tmp_path: Path) -> None:
    folder = record_faces(tmp_path / "one", [[(0.5, -0.3)]])
    shown = invoke("estimate", "asv", folder, "--channels", "direct,quote", "--resamples", "50")
    assert shown.exit_code == 0, shown.output
    assert "warning: one trajectory only" in shown.stdout


def test_missing_or_unreadable_traces_exit_2_naming_the_file(tmp_path: Path) -> None:
    assert "none.zst: no such file" in bad(tmp_path / "none.zst", "--channels", "direct,quote")
    (tmp_path / "empty").mkdir()
    assert "holds no *.zst trace files" in bad(tmp_path / "empty", "--channels", "a,b")
    junk = tmp_path / "junk.zst"
    junk.write_bytes(b"not a trace at all")
    assert "not a readable agentlog trace" in bad(junk, "--channels", "direct,quote")


def test_unknown_channels_exit_2_listing_the_channels_present(study: Path) -> None:
    err = bad(study, "--channels", "direct,judge")
    assert "no transition scores on channel(s) judge in 12 trace file(s)" in err
    assert "channels present: direct, quote" in err


def test_bad_options_exit_2(study: Path) -> None:
    for text in ("direct", "direct,direct", "direct,quote,judge", ",quote"):
        assert "--channels must name two different channels" in bad(study, "--channels", text)
    assert "--weighting must be one of empirical, equal-target" in bad(
        study, "--channels", "direct,quote", "--weighting", "uniform")
    assert "no transitions of window 'synthesis' are scored on both channels" in bad(
        study, "--channels", "direct,quote", "--window", "synthesis")
    assert ("no 'f1' scores on both channels for window 'retrieval': direct records margin; "
            "quote records margin") in bad(study, "--channels", "direct,quote", "--score", "f1")
    assert invoke("estimate", "asv", study).exit_code == 2  # --channels is required
    assert invoke("estimate", "asv", study, "--channels", "direct,quote", "--resamples",
                  "1").exit_code == 2


def test_an_unwritable_plot_exits_2(study: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")  # the plot extra
    err = bad(study, "--channels", "direct,quote", "--plot", tmp_path / "no" / "x.png")
    assert "x.png: cannot write the plot" in err


def test_several_scored_windows_need_window(tmp_path: Path) -> None:
    @al.window("asv_cli_other")
    def other(x: int) -> int:
        return x - 1

    with al.record(tmp_path / "two.zst", seed=1, task="t"):
        for fn, name in ((hop, "asv_cli_hop"), (other, "asv_cli_other")):
            fn(1)
            ref = al.last_window(name)
            assert ref is not None
            for channel in CHANNELS:
                for state in (ref.entry_hash, ref.exit_hash):
                    al.score("margin", 0.0, channel=channel, transition=ref.id,
                             state_hash=state)
                    al.score("f1", 0.0, channel=channel, transition=ref.id, state_hash=state)
    err = bad(tmp_path / "two.zst", "--channels", "direct,quote")
    assert "both score the transitions of windows: asv_cli_hop, asv_cli_other" in err
    assert "pass --window" in err
    err = bad(tmp_path / "two.zst", "--channels", "direct,quote", "--window", "asv_cli_hop")
    assert "several scores on both channels (f1, margin); pass --score" in err


def test_plot_without_matplotlib_names_the_pip_line(
    study: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    err = bad(study, "--channels", "direct,quote", "--resamples", "50", "--plot",
              tmp_path / "x.png")
    assert "pip install 'agentlog[plot]'" in err and not (tmp_path / "x.png").exists()


def test_estimate_lists_asv() -> None:
    result = invoke("estimate", "--help")
    assert result.exit_code == 0 and "asv" in result.stdout and "cess" in result.stdout


def test_ci_method_and_trajectory_key_reach_the_estimator(study: Path) -> None:
    out = asv_json(study, "--channels", "direct,quote", "--resamples", "300",
                   "--ci-method", "percentile", "--trajectory-key", "replicate")
    data = asv.from_traces(study, channels=CHANNELS, window="retrieval", score="margin",
                           trajectory_key="replicate")
    assert sorted(set(data.trajectory)) == ["0", "1"]  # two replicates: two blocks
    with pytest.warns(al.DegenerateDataWarning, match="2 trajectories: below 50"):
        expected = asv.summarize(data.face(), trajectory=data.trajectory, n_resamples=300,
                                 method="percentile")
    assert out["interval_method"] == "percentile" and out["n_trajectories"] == 2
    assert out["settings"]["trajectory_key"] == "replicate"
    assert out["statistics"]["mean_interaction"]["interval"] == list(
        expected.confidence_interval("mean_interaction"))
    err = bad(study, "--channels", "direct,quote", "--ci-method", "bca")
    assert "--ci-method must be one of BCa, percentile, basic; found 'bca'" in err
    err = bad(study, "--channels", "direct,quote", "--trajectory-key", "episode")
    assert "has no meta key 'episode' for `trajectory_key`" in err


def record_named(folder: Path, names: dict[str, Sequence[str]], n: int = 8) -> Path:
    """``n`` transitions (one run each) whose channels record the score ``names[channel]``:
    the same numbers as ``record_faces`` would write, under the names each scorer uses."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        with al.record(folder / f"t{i}.zst", seed=i, task=f"task{i % 2}"):
            hop(i)
            ref = al.last_window("asv_cli_hop")
            assert ref is not None
            for k, channel in enumerate(CHANNELS):
                for name in names[channel]:
                    al.score(name, 0.1, channel=channel, transition=ref.id,
                             state_hash=ref.entry_hash)
                    al.score(name, 0.1 + (i - 3) * (k + 1) / 10, channel=channel,
                             transition=ref.id, state_hash=ref.exit_hash)
    return folder


def test_channels_that_name_their_one_score_differently_are_compared(tmp_path: Path) -> None:
    """Before: "several scores on both channels (none)". Each channel's one score is its
    readout; the output says which name each channel had."""
    same = record_named(tmp_path / "same", {"direct": ["margin"], "quote": ["margin"]})
    named = record_named(tmp_path / "named", {"direct": ["margin"], "quote": ["judge"]})
    args = ("--channels", "direct,quote", "--resamples", "200")
    expected, got = asv_json(same, *args), asv_json(named, *args)
    s = got["settings"]
    assert (s["score"], s["scores"], s["score_source"]) == (
        None, {"direct": "margin", "quote": "judge"}, "the one score each channel records")
    assert expected["settings"]["scores"] == {"direct": "margin", "quote": "margin"}
    assert got["statistics"] == expected["statistics"]
    assert asv_json(named, *args, "--score", "margin,judge")["statistics"] == got["statistics"]
    text = invoke("estimate", "asv", named, *args).stdout
    assert "scores 'margin' (direct) / 'judge' (quote)" in " ".join(text.split())


def test_channels_with_no_common_score_and_several_names_say_what_each_records(
        tmp_path: Path) -> None:
    """Before: "several scores on both channels (none)" and "scores present: " (empty)."""
    folder = record_named(tmp_path / "t", {"direct": ["margin", "raw"], "quote": ["judge"]},
                          n=2)
    err = " ".join(bad(folder, "--channels", "direct,quote").split())
    assert ("channels direct and quote record no score of the same name for window "
            "'asv_cli_hop': direct records margin, raw; quote records judge. Pass one per "
            "channel as --score NAME0,NAME1") in err
    err = " ".join(bad(folder, "--channels", "direct,quote", "--score", "margin").split())
    assert ("no 'margin' scores on both channels for window 'asv_cli_hop': direct records "
            "margin, raw; quote records judge") in err
    err = " ".join(bad(folder, "--channels", "direct,quote", "--score", "margin,f1").split())
    assert "no 'f1' on quote for window 'asv_cli_hop': direct records margin, raw" in err
    err = " ".join(bad(folder, "--channels", "direct,quote", "--score", "a,b,c").split())
    assert "--score must be a score name both channels record" in err


def test_from_trace_takes_one_score_name_per_channel(tmp_path: Path) -> None:
    folder = record_named(tmp_path / "t", {"direct": ["margin", "raw"], "quote": ["judge"]})
    data = asv.from_traces(folder, channels=CHANNELS, score=("margin", "judge"))
    assert len(data.face()) == 8
    with pytest.raises(ValueError, match=r"`score` must be a score name, \(name under "
                                         r"'direct', name under 'quote'\) or None"):
        asv.from_traces(folder, channels=CHANNELS, score=("margin",))  # type: ignore[arg-type]
