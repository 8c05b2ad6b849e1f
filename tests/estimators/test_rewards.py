"""Certified stage rewards ([LBC] §5): groups of exits from one sealed entry, their
readout scores as rewards, group-relative advantages, refusals of groups that are not
exact cells; the dataset a trainer reads (JSON lines, Parquet, 🤗 datasets, TRL's reward
function contract); the bundled agent's retrieval stage from 8 sampled exits per entry."""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agentlog as al
from agentlog.estimators import rewards
from agentlog.replay import Design, ExecutionOptions, intervene
from tests.cli._cli import invoke

QUALITY = {"short": 0.25, "plain": 0.5, "long": 0.875}


FAILING: set[int] = set()  # seeds whose draft breaks (not an argument: not in the entry)


@al.window("draft")
def draft(topic: str) -> str:
    style = ("short", "plain", "long")[al.select([0.2, 0.3, 0.5], name="style")]
    run = al.current_run()
    if run is not None and run.seed in FAILING:
        raise RuntimeError("the stage broke")
    al.score("quality", QUALITY[style])
    return f"{topic}: {style}"


def _record(path: Path, seeds: range, *, topic: str = "cells", meta: Any = None,
            fail_seed: int | None = None) -> None:
    FAILING.clear()
    FAILING.update({fail_seed} if fail_seed is not None else set())
    for seed in seeds:
        with al.record(path, seed=seed, task=topic, mode="a", meta=meta or {}), \
                contextlib.suppress(RuntimeError):  # a failed stage: the run goes on
            draft(topic)
    FAILING.clear()


def test_rewards_are_exit_scores_and_advantages_the_group_relative_ones(
        tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    _record(path, range(6))
    _record(path, range(4), topic="genes")
    table = rewards.from_traces(path, window="draft", readout="quality")
    assert table.groups == 2 and not table.refused and len(table.rows) == 10
    for group in {r.group for r in table.rows}:
        rows = [r for r in table.rows if r.group == group]
        r = np.array([row.reward for row in rows])
        assert [row.reward for row in rows] == [QUALITY[row.completion.split(": ")[1]]
                                                for row in rows]
        expected = (r - r.mean()) / r.std(ddof=1) if r.std() > 0 else np.zeros_like(r)
        assert np.allclose([row.advantage for row in rows], expected, atol=1e-12, rtol=0)
        assert len({row.prompt["topic"] for row in rows}) == 1
    trace = al.read(path)
    (first,) = [w for w in trace.windows("draft") if w.run == 0]
    row = table.rows[0]
    assert (row.entry_hash, row.exit_hash) == (first.entry_hash.hex(), first.exit_hash.hex())
    assert row.receipt == first.exit.receipt.hex() and len(row.source_sha256) == 64
    centred = rewards.from_traces(path, window="draft", readout="quality", scale="none")
    assert np.isclose(sum(r.advantage for r in centred.rows), 0.0, atol=1e-12)


def test_groups_that_are_not_exact_cells_are_refused_with_the_reason(tmp_path: Path) -> None:
    failed = tmp_path / "failed.zst"
    _record(failed, range(3), fail_seed=1)
    (refusal,) = rewards.from_traces(failed, window="draft", readout="quality").refused
    assert (refusal.reason, refusal.instances) == ("exit failed", 3)

    mixed = tmp_path / "backbones.zst"
    _record(mixed, range(2), meta={"backbone": "small"})
    _record(mixed, range(2, 4), meta={"backbone": "large"})
    (refusal,) = rewards.from_traces(mixed, window="draft", readout="quality").refused
    assert refusal.reason == "backbone differs" and "large" in refusal.detail

    alone = tmp_path / "alone.zst"
    _record(alone, range(1))
    (refusal,) = rewards.from_traces(alone, window="draft", readout="quality").refused
    assert refusal.reason == "too few"

    nothing = rewards.from_traces(alone, window="draft", readout="relevance")
    assert [r.reason for r in nothing.refused] == ["no readout"]

    topics = tmp_path / "topics.zst"
    _record(topics, range(2), topic="cells")
    _record(topics, range(2), topic="genes")
    by_meta = rewards.from_traces(topics, window="draft", readout="quality",
                                  group_by="missing-key")  # one group of two inputs
    assert [r.reason for r in by_meta.refused] == ["entries differ"]

    @al.window("draft2")
    def twice() -> str:
        al.score("quality", 0.5, channel="direct")
        al.score("quality", 0.7, channel="judge")
        return "x"

    channels = tmp_path / "channels.zst"
    for seed in range(2):
        with al.record(channels, seed=seed, task="t", mode="a"):
            twice()
    table = rewards.from_traces(channels, window="draft2", readout="quality")
    assert [r.reason for r in table.refused] == ["readout differs"]
    table = rewards.from_traces(channels, window="draft2", readout="quality", channel="judge")
    assert [r.reward for r in table.rows] == [0.7, 0.7] and not table.refused
    assert set(rewards.REFUSALS) >= {r.reason for r in table.refused}


def test_the_dataset_a_trainer_reads(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    _record(path, range(5))
    table = rewards.from_traces(path, window="draft", readout="quality",
                                prompt=lambda entry: f"Write about {entry['topic']}.")
    lines = [json.loads(x) for x in table.to_jsonl(tmp_path / "r.jsonl").read_text().splitlines()]
    assert [x["reward"] for x in lines] == [r.reward for r in table.rows]
    assert {"prompt", "completion", "reward", "advantage", "group", "run_id",
            "source_sha256", "receipt"} <= set(lines[0])
    assert lines[0]["prompt"] == "Write about cells."
    pq = pytest.importorskip("pyarrow.parquet")
    stored = pq.read_table(table.to_parquet(tmp_path / "r.parquet"))
    assert stored.column("advantage").to_pylist() == [r.advantage for r in table.rows]
    assert json.loads(stored.schema.metadata[b"agentlog.rewards"])["readout"] == "quality"
    # TRL's GRPO reward functions: f(prompts, completions, **columns) -> list[float | None]
    # (None: not scored); the certified reward of each pair the table holds.
    reward = table.reward_function()
    prompts = [r.prompt for r in table.rows] + ["Write about genes."]
    completions = [r.completion for r in table.rows] + ["genes: long"]
    assert reward(prompts, completions, group=None) == [r.reward for r in table.rows] + [None]
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_list(table.records())
    assert ds.column_names[:5] == ["group", "prompt", "completion", "reward", "advantage"]
    assert ds["reward"] == [r.reward for r in table.rows]
    assert datasets.load_dataset("json", data_files=str(tmp_path / "r.jsonl"),
                                 split="train").num_rows == len(table.rows)


def test_the_bundled_agents_retrieval_stage_from_8_sampled_exits(
        demo_run: Any, tmp_path: Path) -> None:
    """intervene re-enters each sealed retrieval entry under 8 replicate seeds, a channel
    replay scores every exit, and rewards are the exits' margins on that channel."""
    sources = sorted(demo_run.out.glob("deep-research_q[12]_agent_s0.zst"))
    res = intervene(sources, window="retrieval", arms=Design(seeds=range(8)),
                    out=tmp_path / "arms", app="agentlog.examples.deep_research",
                    mode="rerun", execution=ExecutionOptions(progress=False))
    assert res.summary.done == 16 and res.summary.failed == 0
    replayed = invoke("replay", tmp_path / "arms" / "arms", "--channel", "direct", "--window",
                      "retrieval", "--app", "agentlog.examples.deep_research", "--out",
                      tmp_path / "replay.zst")
    assert replayed.exit_code == 0, replayed.output
    result = invoke("rewards", tmp_path / "arms" / "arms", tmp_path / "replay.zst",
                    "--window", "retrieval", "--readout", "margin", "--channel", "direct",
                    "--out", tmp_path / "r.jsonl", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert (summary["groups"], summary["certified_groups"], summary["rows"]) == (2, 2, 16)
    rows = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert sorted(Counter(r["group"] for r in rows).values()) == [8, 8]
    replay = al.read(tmp_path / "replay.zst")
    for row in rows:  # the reward is the mean of the channel's layouts at that exit
        scores = [s.value for run in replay.runs for s in run.records
                  if isinstance(s, al.records.Score) and s.state_hash is not None
                  and s.state_hash.hex() == row["exit_hash"] and s.name == "margin"]
        # (exits that are the same state share their scores: 4 layouts each)
        assert len(scores) % 4 == 0 and np.isclose(row["reward"], np.mean(scores), atol=1e-12)


def test_the_cli_refuses_bad_input_with_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    _record(path, range(2))
    bad = invoke("rewards", path, "--window", "draft", "--readout", "quality", "--out",
                 tmp_path / "r.csv")
    assert bad.exit_code == 2 and ".jsonl or .parquet" in bad.stderr
    missing = invoke("rewards", path, "--window", "nope", "--readout", "quality", "--out",
                     tmp_path / "r.jsonl")
    assert missing.exit_code == 2 and "no instance of window 'nope'" in missing.stderr
    ok = invoke("rewards", path, "--window", "draft", "--readout", "quality", "--out",
                tmp_path / "r.jsonl")
    assert ok.exit_code == 0 and "2 rewarded exits" in ok.output
