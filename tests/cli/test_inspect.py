"""`agentlog inspect`: what a trace holds, as tables or JSON; bad input exits 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog._recorder import log_llm_call
from agentlog.examples.deep_research import Episode, run_agent
from tests.cli._cli import invoke


def inspect_json(path: Path) -> dict[str, Any]:
    result = invoke("inspect", path, "--json")
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.stdout)
    return out


@pytest.fixture
def episode(tmp_path: Path) -> Episode:
    return run_agent("q3", ranking="agent", seed=5, path=tmp_path / "q3.zst")


def test_inspect_json_reports_the_run_its_windows_streams_scores_and_tools(
    episode: Episode,
) -> None:
    assert episode.path is not None
    summary = inspect_json(episode.path)
    (run,) = summary["runs"]
    assert (run["system"], run["task"], run["seed"], run["status"]) == (
        "deep-research", "q3", 5, "ok")
    assert run["ended"] and run["meta"]["ranking"] == "agent" and run["meta"]["cluster"] == "q3"
    windows = {w["name"]: w for w in summary["windows"]}
    assert list(windows) == ["retrieval", "synthesis", "score"]
    assert all(w["count"] == 1 and w["ok"] == 1 and w["failed"] == 0 for w in windows.values())
    assert windows["retrieval"]["mean_wall_ms"] > 0
    assert windows["synthesis"]["bypasses"] == 0 and windows["score"]["bypasses"] == 0
    (doc,) = summary["selections"]
    opened = len(episode.retrieval.opened)
    assert (doc["stream"], doc["owners"], doc["count"], doc["zeros"]) == (
        "doc", ["model"], opened, 0)
    assert doc["max_candidates"] == doc["min_candidates"] == 30  # every round: the whole pool
    stops = summary["continuations"]
    assert sum(c["count"] for c in stops) == len(episode.retrieval.c) - 1 + (
        1 if episode.retrieval.stopped else 0)
    scores = {s["name"]: s for s in summary["scores"]}
    assert scores["opened_mean"]["mean"] == pytest.approx(episode.conclusion.opened_mean)
    assert scores["abs_error"]["channel"] == "direct"
    (tool,) = summary["tool_calls"]
    assert (tool["name"], tool["count"], tool["failed"], tool["refused"]) == (
        "open_document", opened, 0, 0)
    assert summary["llm_calls"]["count"] == 0
    assert summary["truncated"] is False and summary["bytes_dropped"] == 0


def test_inspect_prints_tables_by_default(episode: Episode) -> None:
    assert episode.path is not None
    result = invoke("inspect", episode.path)
    assert result.exit_code == 0, result.output
    for word in ("Runs", "Windows", "retrieval", "synthesis", "Selections", "doc",
                 "Continuations", "Scores", "opened_mean", "open_document", "no LLM calls"):
        assert word in result.stdout


@al.window("flaky")
def flaky(x: int) -> int:
    raise RuntimeError(f"tool timed out on {x}")


def test_inspect_lists_failed_windows_with_their_error(tmp_path: Path) -> None:
    path = tmp_path / "fail.zst"
    with pytest.raises(RuntimeError), al.record(path, system="s", seed=1):
        flaky(3)
    summary = inspect_json(path)
    (window,) = summary["windows"]
    assert (window["name"], window["failed"], window["ok"]) == ("flaky", 1, 0)
    assert summary["failures"] == [{"run": 0, "window": 0, "name": "flaky",
                                    "error_type": "RuntimeError",
                                    "error_message": "tool timed out on 3"}]
    assert summary["runs"][0]["status"] == "failed"
    result = invoke("inspect", path)
    assert "Failures" in result.stdout and "tool timed out on 3" in result.stdout


@al.window("answer")
def answer(question: str) -> str:
    log_llm_call(provider="openai", model="gpt-x", request={"q": question},
                 response={"text": "42"}, input_tokens=11, output_tokens=3, cost=0.5,
                 latency_ns=2_000_000)
    return "42"


def test_inspect_counts_llm_calls_tokens_and_cost(tmp_path: Path) -> None:
    path = tmp_path / "llm.zst"
    with al.record(path, seed=1):
        answer("q")
        answer("r")
    summary = inspect_json(path)
    llm = summary["llm_calls"]
    assert (llm["count"], llm["failed"], llm["input_tokens"], llm["output_tokens"]) == (
        2, 0, 22, 6)
    assert llm["cost"] == pytest.approx(1.0) and llm["mean_latency_ms"] == pytest.approx(2.0)
    assert llm["models"] == [{"provider": "openai", "model": "gpt-x", "count": 2}]
    (window,) = summary["windows"]
    assert (window["llm_calls"], window["input_tokens"], window["output_tokens"]) == (2, 22, 6)
    result = invoke("inspect", path)
    assert "LLM calls" in result.stdout and "openai/gpt-x x2" in result.stdout


def test_inspect_reports_a_truncated_tail_instead_of_failing(episode: Episode) -> None:
    assert episode.path is not None
    al.flush()  # the file's bytes are read below: wait for the background close of the run
    data = episode.path.read_bytes()
    with al.iter_frames(episode.path) as frames:
        frame_list = list(frames)
    last = frame_list[-1]  # the RunEnd's own frame
    episode.path.write_bytes(data[:-7])
    summary = inspect_json(episode.path)
    assert summary["truncated"] is True
    assert summary["bytes_dropped"] == len(data) - 7 - last.offset  # the torn last frame
    assert summary["records_recovered"] == sum(len(f.records) for f in frame_list[:-1])
    (run,) = summary["runs"]
    assert run["status"] == "not ended"
    assert "truncated" in invoke("inspect", episode.path).stdout


def test_inspect_of_a_missing_file_exits_2_and_names_it(tmp_path: Path) -> None:
    result = invoke("inspect", tmp_path / "nope.zst")
    assert result.exit_code == 2
    assert "nope.zst: no such file" in result.stderr and "check the path" in result.stderr


def test_inspect_of_a_garbage_file_exits_2_and_says_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "garbage.zst"
    path.write_bytes(b"definitely not a trace file")
    result = invoke("inspect", path)
    assert result.exit_code == 2
    assert "garbage.zst" in result.stderr and "not an agentlog trace" in result.stderr
    assert "al.record()" in result.stderr


def test_inspect_of_an_empty_folder_exits_2(tmp_path: Path) -> None:
    result = invoke("inspect", tmp_path)
    assert result.exit_code == 2 and "folder holds no *.zst trace files" in result.stderr


def _hostile_meta_trace(path: Path, meta: dict[str, Any]) -> Path:
    """A ~90-byte trace whose one RunStart holds ``meta`` (made by hand: no recorder
    writes such metadata)."""
    import msgspec

    from agentlog._trace_format import FILE_HEADER, encode_frame_raw

    content = msgspec.msgpack.encode(
        [[1, 0, "r" * 32, "s", 0, None, meta, 0, "splitmix64-gumbel/1", "0"]])
    path.write_bytes(FILE_HEADER + encode_frame_raw(content, 1))
    return path


def _nested(depth: int) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    cur = meta
    for _ in range(depth):
        cur["a"] = {}
        cur = cur["a"]
    return meta


def test_inspect_shows_metadata_nested_900_deep_as_a_marker(tmp_path: Path) -> None:
    path = _hostile_meta_trace(tmp_path / "deep.zst", _nested(900))
    assert path.stat().st_size < 2000
    result = invoke("inspect", path)
    assert result.exit_code == 0, result.output
    assert "nested deeper than 32 levels" in result.stdout
    (run,) = inspect_json(path)["runs"]
    depth, cur = 0, run["meta"]
    while isinstance(cur, dict):
        cur, depth = cur["a"], depth + 1
    assert (depth, cur) == (32, "<nested deeper than 32 levels>")


def test_inspect_shows_a_msgpack_ext_value_as_a_marker(tmp_path: Path) -> None:
    import msgspec

    path = _hostile_meta_trace(tmp_path / "ext.zst", {"x": msgspec.msgpack.Ext(5, b"ab")})
    result = invoke("inspect", path)
    assert result.exit_code == 0, result.output
    assert "<msgpack ext type 5, 2 bytes>" in result.stdout
    (run,) = inspect_json(path)["runs"]
    assert run["meta"] == {"x": "<msgpack ext type 5, 2 bytes>"}


def test_inspect_streams_the_file_instead_of_reading_it_whole(
    episode: Episode, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_read(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("inspect must stream, not al.read the whole file")

    monkeypatch.setattr(al, "read", no_read)
    assert episode.path is not None
    summary = inspect_json(episode.path)
    assert summary["records"] > 0 and summary["runs"][0]["status"] == "ok"


def test_inspect_of_a_folder_prints_one_row_per_file_and_totals(tmp_path: Path) -> None:
    for seed in (1, 2, 3):
        run_agent("q1", ranking="agent", seed=seed, path=tmp_path / "runs" / f"s{seed}.zst")
    (tmp_path / "runs" / "bad.zst").write_bytes(b"not a trace")
    result = invoke("inspect", tmp_path / "runs")
    assert result.exit_code == 2, result.output  # one file is unreadable
    lines = result.stdout.splitlines()
    assert sum("s1.zst" in ln or "s2.zst" in ln or "s3.zst" in ln for ln in lines) == 3
    assert any("bad.zst" in ln and "unreadable" in ln for ln in lines)
    assert "4 files:" in result.stdout and "1 unreadable" in result.stdout
    out = json.loads(invoke("inspect", tmp_path / "runs", "--json").stdout)
    good = [f for f in out["files"] if f["readable"]]
    assert len(good) == 3 and all(f["runs"] == f["runs_ended"] == 1 for f in good)
    assert out["counts"]["runs"] == 3 and out["counts"]["unreadable"] == 1
    assert out["counts"]["records"] == sum(f["records"] for f in good)


def test_inspect_of_several_files_summarizes_each(tmp_path: Path) -> None:
    paths = [tmp_path / f"{i}.zst" for i in range(2)]
    for i, p in enumerate(paths):
        run_agent("q2", ranking="agent", seed=i, path=p)
    out = json.loads(invoke("inspect", *paths, "--json").stdout)
    assert [f["path"] for f in out["files"]] == [str(p) for p in paths]
    single = inspect_json(paths[0])
    assert out["files"][0]["records"] == single["records"]
    assert out["files"][0]["windows"] == sum(w["count"] for w in single["windows"])
