"""`agentlog replay TRACES --channel NAME --window W`: channel replay from the command line."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.replay import read_units
from agentlog.replay.lowlevel import APP_ENV
from tests.cli._cli import invoke

DEMO_APP = "agentlog.examples.deep_research"
TEST_APP = "tests.replay.test_channel_replay"  # registers the chrep-* channels


@pytest.fixture(autouse=True)
def _no_app_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path
                                 ) -> Iterator[None]:
    monkeypatch.delenv(APP_ENV, raising=False)
    monkeypatch.chdir(tmp_path)  # no pyproject.toml names an app here
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("demo") / "demo"
    result = invoke("demo", "--out", out, "--tasks", "3", "--seeds", "2", "--json")
    assert result.exit_code == 0, result.output
    return out, json.loads(result.stdout)


def _study(out: Path) -> list[Path]:
    return sorted(out.glob("*.zst"))  # what the shell makes of out/*.zst


def test_replay_then_estimate_reproduces_the_demos_asv_numbers(
        demo: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    out, summary = demo
    result = invoke("replay", *_study(out), "--channel", "quote", "--channel", "direct",
                    "--window", "retrieval", "--app", DEMO_APP, "--out", tmp_path / "asv.zst")
    assert result.exit_code == 0, result.output
    assert ("Replayed 12 transitions of window retrieval under quote (4 layouts, "
            in result.stdout)
    assert "96 scored, 0 already sealed (skipped), 0 failed" in result.stdout
    assert "next: agentlog estimate asv asv.zst --channels quote,direct" in result.stdout
    est = invoke("estimate", "asv", tmp_path / "asv.zst", "--channels", "direct,quote",
                 "--resamples", "2000", "--json")
    assert est.exit_code == 0, est.output
    got = json.loads(est.stdout)
    demo_asv = summary["asv"]
    assert got["counts"]["complete"] == demo_asv["n_transitions"] == 12
    assert got["n_resamples"] == demo_asv["n_resamples"] == 2000
    for key, stat in demo_asv["statistics"].items():
        assert got["statistics"][key] == stat, key


def test_the_demo_suggests_the_replay_and_estimate_commands(
        demo: tuple[Path, dict[str, Any]]) -> None:
    out, summary = demo
    replay, estimate = summary["next"][3], summary["next"][4]
    assert replay == (f"agentlog replay {out}/*.zst --channel direct --channel quote "
                      f"--window retrieval --app {DEMO_APP} --out asv.zst")
    assert estimate == "agentlog estimate asv asv.zst --channels direct,quote"


def test_a_second_replay_does_no_work_and_json_reports_it(
        demo: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    out, _ = demo
    args = ("replay", *_study(out), "--channel", "direct", "--window", "retrieval",
            "--app", DEMO_APP, "--out", tmp_path / "a.zst", "--layouts", "2", "--json")
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    al.flush()  # the file's bytes are read below: wait for the background close of the run
    data = (tmp_path / "a.zst").read_bytes()
    second = invoke(*args)
    assert second.exit_code == 0, second.output
    a, b = json.loads(first.stdout), json.loads(second.stdout)
    assert (a["total"], a["done"], a["skipped"], a["transitions"]) == (24, 24, 0, 12)
    assert (b["total"], b["done"], b["skipped"], b["failed"]) == (24, 0, 24, 0)
    assert b["layouts"] == {"direct": 2} and b["window"] == "retrieval"
    (ch,) = b["channels"]
    assert (ch["name"], ch["scorer"], ch["layouts"]) == ("direct", "margin", 4)
    assert len(ch["hash"]) == len(ch["scorer_hash"]) == 64
    assert (tmp_path / "a.zst").read_bytes() == data
    assert al.verify(tmp_path / "a.zst").ok


def test_the_output_inside_a_globbed_folder_is_not_replayed_as_a_source(
        demo: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    out, _ = demo
    folder = tmp_path / "runs"
    folder.mkdir()
    for p in _study(out)[:2]:
        (folder / p.name).write_bytes(p.read_bytes())
    target = folder / "asv.zst"
    for _ in range(2):
        result = invoke("replay", *sorted(folder.glob("*.zst")), "--channel", "direct",
                        "--window", "retrieval", "--app", DEMO_APP, "--out", target, "--json")
        assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["total"] == 8


def _source(tmp_path: Path, xs: list[float]) -> Path:
    from tests.replay.test_channel_replay import _record

    return _record(tmp_path / "src.zst", xs)


def test_units_that_fail_are_counted_recorded_and_exit_1(tmp_path: Path) -> None:
    src = _source(tmp_path, [1.0, 3.0, 2.0])
    result = invoke("replay", src, "--channel", "chrep-fragile", "--channel", "chrep-direct",
                    "--window", "chrep-step", "--app", TEST_APP, "--out", tmp_path / "o.zst")
    assert result.exit_code == 1, result.output
    assert "8 scored, 0 already sealed (skipped), 1 failed" in result.stdout
    assert "RuntimeError: this scorer cannot read x=3" in result.stdout
    assert "run the same command again: only the units not sealed yet run" in result.stdout
    statuses = sorted(u.status for u in read_units(tmp_path / "o.zst").values())
    assert statuses == ["failed"] + ["ok"] * 8
    again = invoke("replay", src, "--channel", "chrep-fragile", "--channel", "chrep-direct",
                   "--window", "chrep-step", "--app", TEST_APP, "--out", tmp_path / "o.zst",
                   "--json")
    assert again.exit_code == 1
    j = json.loads(again.stdout)
    assert (j["skipped"], j["done"], j["failed"]) == (8, 0, 1)
    assert j["failures"][0]["error_type"] == "RuntimeError"


@pytest.mark.parametrize(("extra", "message"), [
    ((), r"no app module given: the windows of the trace were recorded from "
         r"tests\.replay\.test_channel_replay; .*--app tests\.replay\.test_channel_replay"),
    (("--app", "agentlog_no_such_module"),
     r"module 'agentlog_no_such_module' \(from --app\) is not importable"),
    (("--app", TEST_APP, "--channel", "chrep-nope"),
     r"no channel named 'chrep-nope' is registered \(registered channels: .*chrep-direct.*\)"
     r"\. Pass the module that registers it with --app MODULE"),
    (("--app", TEST_APP, "--window", "retrieval"),
     r"no completed instance of window 'retrieval' in the traces; windows present: "
     r"chrep-step\. Pass one of them \(--window NAME\)"),
    (("--app", TEST_APP, "--frozen"), r"--frozen needs --cache PATH"),
])
def test_bad_input_exits_2_with_what_to_do(tmp_path: Path, extra: tuple[str, ...],
                                           message: str) -> None:
    import re

    src = _source(tmp_path, [1.0])
    args = ["replay", str(src), "--channel", "chrep-direct", "--out", str(tmp_path / "o.zst")]
    if "--window" not in extra:
        args += ["--window", "chrep-step"]
    result = invoke(*args, *extra, columns=1000)
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert re.search(message, text), text
    assert not (tmp_path / "o.zst").exists()


def test_a_missing_trace_or_no_channel_or_no_window_exits_2(tmp_path: Path) -> None:
    missing = invoke("replay", tmp_path / "nope.zst", "--channel", "direct", "--window", "w",
                     "--app", DEMO_APP)
    assert missing.exit_code == 2 and "no such file" in missing.output
    src = _source(tmp_path, [1.0])
    no_channel = invoke("replay", src, "--window", "chrep-step", "--app", TEST_APP)
    assert no_channel.exit_code == 2 and "pass --channel NAME" in no_channel.output
    no_window = invoke("replay", src, "--channel", "chrep-direct", "--app", TEST_APP)
    assert no_window.exit_code == 2 and "--channel needs --window NAME" in no_window.output


def test_the_app_can_come_from_pyproject(tmp_path: Path) -> None:
    src = _source(tmp_path, [1.0, 2.0])
    (tmp_path / "pyproject.toml").write_text(f'[tool.agentlog]\napp = "{TEST_APP}"\n')
    result = invoke("replay", src, "--channel", "chrep-direct", "--window", "chrep-step",
                    "--out", tmp_path / "o.zst", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["done"] == 4
