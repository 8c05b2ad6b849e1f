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
    data = episode.path.read_bytes()
    episode.path.write_bytes(data[:-7])
    summary = inspect_json(episode.path)
    assert summary["truncated"] is True
    assert summary["bytes_dropped"] == len(data) - 7 - 8  # everything after the file header
    assert summary["records_recovered"] == 0
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


def test_inspect_of_a_folder_exits_2(tmp_path: Path) -> None:
    result = invoke("inspect", tmp_path)
    assert result.exit_code == 2 and "is a folder" in result.stderr
