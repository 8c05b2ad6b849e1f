"""`agentlog verify`: exit 0 when every trace holds, 1 when one does not, 2 on bad input."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentlog as al
from agentlog._writer import TraceWriter
from agentlog.examples.deep_research import make_pool, retrieve, run_agent, synthesize
from agentlog.records import Selection
from tests.cli._cli import invoke


def verify_json(*paths: Path) -> tuple[int, dict[str, Any]]:
    result = invoke("verify", *paths, "--json")
    out: dict[str, Any] = json.loads(result.stdout)
    return result.exit_code, out


@pytest.fixture
def clean(tmp_path: Path) -> Path:
    path = tmp_path / "clean.zst"
    run_agent("q1", ranking="agent", seed=2, path=path)
    return path


def with_wrong_choice(source: Path, target: Path) -> Selection:
    """Rewrite ``source`` into ``target`` with the first selection's choice moved by one."""
    records = list(al.read(source).records)
    i = next(k for k, r in enumerate(records) if isinstance(r, Selection))
    sel = records[i]
    records[i] = msgspec.structs.replace(sel, choice=(sel.choice + 1) % sel.n)
    with TraceWriter(target) as writer:
        for r in records:
            writer.put(r)
    tampered: Selection = records[i]
    return tampered


def test_a_clean_trace_verifies_with_exit_0(clean: Path) -> None:
    result = invoke("verify", clean)
    assert result.exit_code == 0, result.output
    assert "ok" in result.stdout and "1 file: 1 ok, 0 with problems, 0 unreadable" in result.stdout
    code, out = verify_json(clean)
    assert code == 0 and out["ok"] is True and out["exit_code"] == 0
    (entry,) = out["files"]
    assert entry["path"] == str(clean) and entry["ok"] and entry["problems"] == []
    assert entry["checked"]["windows"] == 3 and entry["checked"]["selections"] >= 1


def test_a_wrong_selection_choice_exits_1_and_lists_the_problem(
    clean: Path, tmp_path: Path
) -> None:
    tampered = tmp_path / "tampered.zst"
    sel = with_wrong_choice(clean, tampered)
    result = invoke("verify", clean, tampered)
    assert result.exit_code == 1, result.output
    assert "tampered.zst" in result.stdout and "choice" in result.stdout
    assert f"recorded choice {sel.choice}" in result.stdout
    assert "re-record the run" in result.stdout
    code, out = verify_json(clean, tampered)
    assert code == 1 and out["counts"] == {"files": 2, "ok": 1, "problems": 1, "unreadable": 0}
    problem, digest = out["files"][1]["problems"]
    assert problem["kind"] == "choice" and "argmax(log p + g)" in problem["message"]
    assert digest["kind"] == "digest"


def test_a_synthesis_fed_other_evidence_than_retrieval_returned_is_a_bypass(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bypass.zst"
    pool = make_pool("q2", seed=0)
    with al.record(path, seed=1):
        found = retrieve(pool, "agent")
        synthesize(dataclasses.replace(found, y=tuple(-v for v in found.y)))
    result = invoke("verify", path)
    assert result.exit_code == 1
    assert "bypass" in result.stdout and "declared predecessor 'retrieval'" in result.stdout
    code, out = verify_json(path)
    assert code == 1 and [p["kind"] for p in out["files"][0]["problems"]] == ["bypass"]


def test_a_garbage_file_exits_2_naming_the_file_and_what_to_do(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.zst"
    garbage.write_bytes(b"\x00not a trace at all" * 10)
    result = invoke("verify", garbage)
    assert result.exit_code == 2
    assert "garbage.zst" in result.stdout and "unreadable" in result.stdout
    assert "not an agentlog trace" in result.stdout and "al.record()" in result.stdout
    code, out = verify_json(garbage)
    assert code == 2 and out["files"][0]["readable"] is False


def test_a_named_pipe_exits_2_at_once_naming_what_to_do(tmp_path: Path) -> None:
    """Before: ``verify`` and ``inspect`` waited forever for a writer to the pipe."""
    import os

    fifo = tmp_path / "pipe.zst"
    os.mkfifo(fifo)
    result = invoke("verify", fifo)
    assert result.exit_code == 2 and "unreadable" in result.stdout
    assert "found a named pipe" in result.stdout and "to a file first" in result.stdout
    result = invoke("inspect", fifo)
    assert result.exit_code == 2 and "found a named pipe" in result.output
    assert "Traceback" not in result.output


def test_a_missing_file_exits_2(tmp_path: Path) -> None:
    result = invoke("verify", tmp_path / "missing.zst")
    assert result.exit_code == 2
    assert "missing.zst: no such file" in result.stdout and "check the path" in result.stdout


def test_bad_input_outranks_a_problem_and_every_file_is_still_reported(
    clean: Path, tmp_path: Path
) -> None:
    tampered = tmp_path / "tampered.zst"
    with_wrong_choice(clean, tampered)
    code, out = verify_json(clean, tampered, tmp_path / "missing.zst")
    assert code == 2
    assert out["counts"] == {"files": 3, "ok": 1, "problems": 1, "unreadable": 1}


def test_a_folder_stands_for_the_traces_inside_it(tmp_path: Path) -> None:
    for seed in (1, 2):
        run_agent("q0", ranking="reversed", seed=seed, path=tmp_path / "runs" / f"s{seed}.zst")
    code, out = verify_json(tmp_path / "runs")
    assert code == 0
    assert [Path(f["path"]).name for f in out["files"]] == ["s1.zst", "s2.zst"]


def test_an_empty_folder_is_bad_input(tmp_path: Path) -> None:
    code, out = verify_json(tmp_path)
    assert code == 2 and "holds no *.zst trace files" in out["files"][0]["error"]


def test_a_truncated_trace_is_a_problem_not_bad_input(clean: Path) -> None:
    al.flush()  # the file's bytes are read below: wait for the background close of the run
    clean.write_bytes(clean.read_bytes()[:-5])
    code, out = verify_json(clean)
    assert code == 1
    assert [p["kind"] for p in out["files"][0]["problems"]][-1] == "truncated"


def test_verify_needs_at_least_one_path() -> None:
    assert invoke("verify").exit_code == 2


def test_verify_of_a_folder_prints_a_summary_line_and_only_the_problems(
    clean: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "many"
    for seed in range(4):
        run_agent("q1", ranking="agent", seed=seed, path=folder / f"ok{seed}.zst")
    with_wrong_choice(clean, folder / "tampered.zst")
    result = invoke("verify", folder)
    assert result.exit_code == 1
    assert "ok0.zst" not in result.stdout and "tampered.zst" in result.stdout
    assert "5 files: 4 ok, 1 with problems, 0 unreadable (--all for one row per file)" in (
        result.stdout)
    every = invoke("verify", folder, "--all")
    assert every.exit_code == 1
    assert all(f"ok{seed}.zst" in every.stdout for seed in range(4))


def test_verify_checks_a_keyed_run_with_the_key_from_a_file_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "signed.zst"
    with al.record(path, seed=1, key="k-123"):
        al.score("f1", 0.5)
    key_file = tmp_path / "key.txt"
    key_file.write_text("k-123\n")
    assert invoke("verify", path, "--key-file", key_file).exit_code == 0
    wrong = tmp_path / "wrong.txt"
    wrong.write_text("other")
    result = invoke("verify", path, "--key-file", wrong)
    assert result.exit_code == 1 and "keyed digest (HMAC) does not match" in result.stdout
    monkeypatch.setenv("AGENTLOG_TRACE_KEY", "k-123")
    assert invoke("verify", path).exit_code == 0
    monkeypatch.setenv("AGENTLOG_TRACE_KEY", "nope")
    assert invoke("verify", path).exit_code == 1
    monkeypatch.delenv("AGENTLOG_TRACE_KEY")
    unchecked = invoke("verify", path)
    assert unchecked.exit_code == 0 and "was not checked" in unchecked.stdout


def test_a_missing_key_file_exits_2_with_a_message(tmp_path: Path, clean: Path) -> None:
    result = invoke("verify", clean, "--key-file", tmp_path / "nope.txt")
    assert result.exit_code == 2
    assert "--key-file" in result.stderr and "cannot be read" in result.stderr


def test_verify_of_a_header_only_file_exits_1_with_no_runs(tmp_path: Path) -> None:
    from agentlog._trace_format import FILE_HEADER

    path = tmp_path / "header.zst"
    path.write_bytes(FILE_HEADER)
    result = invoke("verify", path)
    assert result.exit_code == 1 and "no-runs" in result.stdout


def test_verify_of_a_record_bomb_exits_2_with_a_message(tmp_path: Path) -> None:
    import struct

    from agentlog._trace_format import FILE_HEADER, FrameEncoder

    n = 1 << 18
    rec = msgspec.msgpack.encode([8, 0, 0, "", 0])
    frame = FrameEncoder(level=19).encode_raw(b"\xdd" + struct.pack(">I", n) + rec * n, n)
    path = tmp_path / "bomb.zst"
    path.write_bytes(FILE_HEADER + frame * 31)
    result = invoke("verify", path)
    assert result.exit_code == 2 and "record bomb" in result.stdout
