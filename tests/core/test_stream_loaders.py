"""The trace loaders of the validity card, ``certify`` and ``estimate reliability`` stream
their files one run at a time (issue 10): they never read a file whole, and they give what
the in-memory path (Traces read first) gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
import agentlog._reader as reader
from agentlog.estimators import certify, reliability
from agentlog.examples.deep_research import Policy, run_study, task_ids
from tests.cli._cli import invoke
from tests.estimators.test_streaming_loaders import _no_whole_reads

PLAN = Path(__file__).resolve().parents[2] / "examples" / "plans" / "deep_research.toml"


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two systems x 3 tasks x 2 seeds of the deep-research agent, one trace per run."""
    out = tmp_path_factory.mktemp("study")
    return run_study(out, tasks=task_ids(3), rankings=("agent",), seeds=(0, 1),
                     systems={"reference": Policy(), "explorer": Policy(temperature=30.0,
                                                                        floor=0.5)})


@pytest.fixture
def in_memory(study: list[Path]) -> list[al.Trace]:
    return [al.read(p) for p in study]


def test_the_guard_bites(study: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    _no_whole_reads(monkeypatch)
    with pytest.raises(AssertionError, match="a file was read whole"):
        reader.read_traces(study)


def test_ownership_map_streams_and_equals_the_in_memory_map(
    study: list[Path], in_memory: list[al.Trace], monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = reliability.ownership_map(in_memory)
    _no_whole_reads(monkeypatch)
    got = reliability.ownership_map(study)
    assert got.decisions == expected.decisions and got.decisions != ()
    assert got.traces == tuple(str(p) for p in study) == expected.traces
    assert reliability.ownership_map(study[0].parent).decisions == expected.decisions  # folder


def test_replay_check_and_the_validity_card_stream(
    study: list[Path], in_memory: list[al.Trace], monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = reliability.validity_card(traces=in_memory, decision_scores="abs_error",
                                         n_permutations=199)
    _no_whole_reads(monkeypatch)
    cell = reliability.replay_check(study)
    assert cell.status == "not probed" and f"all {len(study)} trace(s) verify" in cell.detail
    got = reliability.validity_card(traces=study, decision_scores="abs_error",
                                    n_permutations=199)
    assert got.to_dict() == expected.to_dict()
    (doc,) = [c for c in got.cells if c.item == "non-degeneracy: doc"]
    assert "actions" in doc.detail  # the decision's actions were read from the streamed runs


def _certify_inputs(source: Any) -> certify.CertifyData:
    return certify.from_traces(source, plan=certify.Plan.from_toml(PLAN))


def test_certify_from_traces_and_the_entry_table_stream(
    study: list[Path], in_memory: list[al.Trace], monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = _certify_inputs(in_memory)
    plan = certify.Plan.from_toml(PLAN)
    assert plan.window is not None
    expected_table = certify.EntryTable.from_traces(in_memory, window=plan.window)
    _no_whole_reads(monkeypatch)
    got = _certify_inputs(study)
    for field in ("systems", "tasks", "clusters", "readouts", "input_hashes", "n_runs",
                  "n_failed_runs"):
        assert getattr(got, field) == getattr(expected, field), field
    for s in expected.systems:
        assert got.scores[s].tolist() == expected.scores[s].tolist()
        assert got.present[s].tolist() == expected.present[s].tolist()
    assert got.entries is not None and expected.entries is not None
    assert got.entries.entries == expected.entries.entries != ()
    table = certify.EntryTable.from_traces(study, window=plan.window)
    assert table.entries == expected_table.entries and table.input_hashes == got.input_hashes


@pytest.mark.parametrize("command", [
    ("certify", "--plan", str(PLAN), "--json"),
    ("validity-card", "--decision", "doc", "--score", "abs_error", "--json"),
    ("estimate", "reliability", "--score", "abs_error", "--json"),
], ids=["certify", "validity-card", "estimate-reliability"])
def test_the_commands_stream_and_print_what_they_printed_from_memory(
    study: list[Path], monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...]
) -> None:
    name, *options = command
    args = (*name.split(), *([command[1]] if name == "estimate" else []))
    rest = options[1:] if name == "estimate" else options
    folder = study[0].parent
    shown = invoke(*args, folder, *rest)
    assert shown.exit_code in (0, 1), shown.output
    _no_whole_reads(monkeypatch)
    streamed = invoke(*args, folder, *rest)
    assert (streamed.exit_code, json.loads(streamed.stdout)) == (
        shown.exit_code, json.loads(shown.stdout))


@pytest.mark.parametrize("command", [("certify", "--plan", str(PLAN)), ("validity-card",),
                                     ("estimate", "reliability")])
def test_a_file_that_is_no_trace_is_found_while_streaming_and_exits_2(
    study: list[Path], tmp_path: Path, command: tuple[str, ...]
) -> None:
    junk = tmp_path / "junk.zst"
    junk.write_bytes(b"not a trace")
    cut = command[:2] if command[0] == "estimate" else command[:1]
    result = invoke(*cut, *study, junk, *command[len(cut):])
    assert result.exit_code == 2, result.output
    assert "not a readable agentlog trace" in " ".join(result.stderr.split())
