"""Keyed runs are chained: removing, reordering, duplicating or cutting them is detected.

Before the chain each keyed run's HMAC stood alone, so a file could lose a keyed run
(any of them, the last one included) and still verify with ``--key``. Now each keyed
run's HMAC covers its place in the file's chain of keyed runs and the digest of the
keyed run before it; a head stored at record time catches runs cut from the end.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from typer.testing import CliRunner

import agentlog as al
from agentlog._digest import CHAIN_START, RunDigest, chain_link, run_end_tail
from agentlog._trace_format import FILE_HEADER, FrameEncoder
from agentlog._writer import file as _trace_file
from agentlog._writer.file import Mode
from agentlog.cli import app
from agentlog.records import RunEnd, RunStart

KEY = "chain-s3cret"


def record_runs(path: Path, n: int, *, key: str | None = KEY, mode: Mode = "a",
                start: int = 0) -> Path:
    for i in range(start, start + n):
        with al.record(path, seed=i, task=f"t-{i}", key=key, mode=mode):
            al.select([0.5, 0.5], candidates=["a", "b"], name="pick")
            al.score("f1", i / 10)
    return path


def runs_of(path: Path) -> list[list[list[Any]]]:
    """The file's frames (lists of records) grouped by run, in the order the runs start.

    Each frame holds one run's records (and the Blobs it used first): the writer starts
    a frame at each run's start and ends one before each RunEnd.
    """
    runs: dict[int, list[list[Any]]] = {}
    with al.iter_frames(path) as frames:
        for frame in frames:
            run = next(r.run for r in frame.records if hasattr(r, "run"))
            runs.setdefault(run, []).append(list(frame.records))
    return list(runs.values())


def write_runs(target: Path, runs: Iterable[list[list[Any]]]) -> Path:
    """Write the runs' frames as they were: the same records give the same payloads, so
    untouched runs keep their digests wherever they now sit."""
    encoder = FrameEncoder()
    with target.open("wb") as f:
        f.write(FILE_HEADER)
        for frames in runs:
            for records in frames:
                header, payload = encoder.encode_parts(encoder.encode_records(records),
                                                       len(records))
                f.write(header + payload)
    return target


def edit_end(run: list[list[Any]], **changes: Any) -> list[list[Any]]:
    """The run with its RunEnd's fields changed."""
    return [[msgspec.structs.replace(r, **changes) if isinstance(r, RunEnd) else r
             for r in records] for records in run]


def kinds(path: Path, **kw: Any) -> set[str]:
    return {p.kind for p in al.verify(path, **kw).problems}


def ends(path: Path) -> list[RunEnd]:
    return [r for r in al.iter_records(path) if isinstance(r, RunEnd)]


def test_keyed_runs_take_consecutive_places_and_the_head_is_the_last_digest(
        tmp_path: Path) -> None:
    path = record_runs(tmp_path / "t.zst", 4, mode="a")
    chained = ends(path)
    assert [e.chain for e in chained] == [1, 2, 3, 4] and all(e.keyed for e in chained)
    report = al.verify(path, key=KEY)
    assert report.ok, report.problems
    assert report.keyed_runs == 4 and report.checked["digests"] == 4
    assert report.chain_head == f"4:{bytes(chained[-1].digest or b'').hex()}"
    assert any("store this head" in n for n in report.notes)


def test_the_chain_is_the_hmac_over_the_tail_then_place_and_previous_digest(
        tmp_path: Path) -> None:
    """Recomputed here from the formula in agentlog._digest, frame payloads included."""
    path = record_runs(tmp_path / "t.zst", 2)
    previous, expected = CHAIN_START, []
    digest: RunDigest | None = None
    with al.iter_frames(path, raw=True) as frames:
        for frame in frames:
            assert frame.payload is not None
            first = frame.records[0]
            if isinstance(first, RunStart):
                digest = RunDigest(first.run_id, KEY.encode())
            if isinstance(first, RunEnd):
                assert digest is not None and first.chain is not None
                tail = run_end_tail(first.run, first.t_ns, first.status, first.receipt,
                                    first.n_windows, first.n_selections,
                                    first.n_continuations, first.dropped, first.error_type)
                previous = digest.finish_bytes(tail + chain_link(first.chain, previous))
                expected.append(previous)
            elif digest is not None:
                digest.update(frame.payload)
    assert expected == [e.digest for e in ends(path)]


@pytest.mark.parametrize("edit", ["remove-first", "remove-middle", "reorder"])
def test_removing_or_reordering_a_keyed_run_fails_with_the_key(tmp_path: Path,
                                                               edit: str) -> None:
    runs = runs_of(record_runs(tmp_path / "t.zst", 4))
    edited = {
        "remove-first": runs[1:],
        "remove-middle": [runs[0], runs[1], runs[3]],
        "reorder": [runs[0], runs[2], runs[1], runs[3]],
    }[edit]
    out = write_runs(tmp_path / "edited.zst", edited)
    report = al.verify(out, key=KEY)
    assert {"chain", "digest"} <= {p.kind for p in report.problems}, report.problems
    # Without the key the places alone still show the gap or the swap.
    assert "chain" in kinds(out)


def test_a_duplicated_keyed_run_fails_however_it_is_renamed(tmp_path: Path) -> None:
    runs = runs_of(record_runs(tmp_path / "t.zst", 2))
    again = write_runs(tmp_path / "again.zst", [runs[0], runs[1], runs[1]])
    assert "duplicate-run" in kinds(again, key=KEY)
    # Renamed to a new run index at a fresh place after the last, it still carries the
    # HMAC of its old name and place.
    renamed = [[msgspec.structs.replace(r, run=9) if hasattr(r, "run") else r
                for r in records] for records in edit_end(runs[1], chain=3)]
    placed = write_runs(tmp_path / "placed.zst", [runs[0], runs[1], renamed])
    assert kinds(placed, key=KEY) == {"digest"}


def test_the_untouched_file_rewritten_the_same_way_still_verifies(tmp_path: Path) -> None:
    """The control for the test above: the rewrite itself changes nothing."""
    out = write_runs(tmp_path / "same.zst", runs_of(record_runs(tmp_path / "t.zst", 3)))
    assert al.verify(out, key=KEY).ok


def test_renumbering_the_places_after_a_removal_cannot_mend_the_hmac(tmp_path: Path) -> None:
    runs = runs_of(record_runs(tmp_path / "t.zst", 4))
    out = write_runs(tmp_path / "renumbered.zst",
                     [runs[0], edit_end(runs[2], chain=2), edit_end(runs[3], chain=3)])
    report = al.verify(out, key=KEY)
    assert "chain" not in {p.kind for p in report.problems}  # the places look right...
    assert [p.run for p in report.problems if p.kind == "digest"] == [2, 3]  # ...the MACs not


def test_runs_cut_from_the_end_verify_alone_but_not_against_the_stored_head(
        tmp_path: Path) -> None:
    path = record_runs(tmp_path / "t.zst", 4)
    head = al.verify(path, key=KEY).chain_head
    assert head is not None and head.startswith("4:")
    cut = write_runs(tmp_path / "cut.zst", runs_of(path)[:3])
    alone = al.verify(cut, key=KEY)
    assert alone.ok and alone.chain_head is not None and alone.chain_head.startswith("3:")
    report = al.verify(cut, key=KEY, expect_head=head)
    (problem,) = report.problems
    assert problem.kind == "chain" and "1 keyed run(s) were cut from the end" in problem.message
    assert al.verify(path, key=KEY, expect_head=head).ok


def test_runs_appended_after_the_stored_head_keep_it_valid(tmp_path: Path) -> None:
    path = record_runs(tmp_path / "t.zst", 2)
    head = al.verify(path, key=KEY).chain_head
    record_runs(path, 2, start=2)
    assert al.verify(path, key=KEY, expect_head=head).ok
    other = record_runs(tmp_path / "other.zst", 2)  # same places, other runs
    (problem,) = al.verify(other, key=KEY, expect_head=head).problems
    assert "is not the one the stored head names" in problem.message


def test_a_head_is_checked_where_it_comes_in() -> None:
    with pytest.raises(ValueError, match="needs the key"):
        al.verify("never-read.zst", expect_head="1:" + "ab" * 32)
    for bad in ("1:abcd", "0:" + "ab" * 32, "x:" + "ab" * 32, "ab" * 32):
        with pytest.raises(ValueError, match="'<position>:<64 hex digits>'"):
            al.verify("never-read.zst", key=KEY, expect_head=bad)
    with pytest.raises(TypeError, match="must be a str"):
        al.verify("never-read.zst", key=KEY, expect_head=12)  # type: ignore[arg-type]


def test_appending_continues_the_chain_whether_or_not_the_file_is_scanned(
        tmp_path: Path) -> None:
    path = record_runs(tmp_path / "t.zst", 2)
    _trace_file.forget()  # the next open scans the file for its chain
    record_runs(path, 1, start=2)
    assert al.flush()  # lets go of the file: one writing process at a time
    subprocess.run(  # another process appends: it learns the chain from the file
        [sys.executable, "-c",
         "import agentlog as al, sys\n"
         "with al.record(sys.argv[1], seed=9, key=sys.argv[2], mode='a'):\n"
         "    al.score('f1', 0.5)\n", str(path), KEY], check=True)
    record_runs(path, 1, start=4)  # and this one reads what the other appended
    assert [e.chain for e in ends(path)] == [1, 2, 3, 4, 5]
    assert al.verify(path, key=KEY).ok


def test_unkeyed_runs_are_not_in_the_chain(tmp_path: Path) -> None:
    path = record_runs(tmp_path / "t.zst", 1)
    record_runs(path, 1, key=None, start=1)
    record_runs(path, 1, start=2)
    assert [e.chain for e in ends(path)] == [1, None, 2]
    report = al.verify(path)
    assert report.ok and report.keyed_runs == 2


def test_a_keyed_run_from_before_the_chain_verifies_on_its_own(tmp_path: Path) -> None:
    """Its HMAC covers no place (chain None): rebuilt here as the older writer made it."""
    path = record_runs(tmp_path / "t.zst", 1)
    (run,) = runs_of(path)
    digest = RunDigest(run[0][0].run_id, KEY.encode())
    with al.iter_frames(path, raw=True) as frames:
        for frame in frames:
            assert frame.payload is not None
            if not isinstance(frame.records[0], RunEnd):
                digest.update(frame.payload)
    (end,) = ends(path)
    tail = run_end_tail(end.run, end.t_ns, end.status, end.receipt, end.n_windows,
                        end.n_selections, end.n_continuations, end.dropped, end.error_type)
    old = write_runs(tmp_path / "old.zst",
                     [edit_end(run, chain=None, digest=digest.finish_bytes(tail))])
    report = al.verify(old, key=KEY)
    assert report.ok and report.keyed_runs == 0 and report.checked["digests"] == 1
    # Claiming the older form for a chained run breaks its HMAC.
    stripped = write_runs(tmp_path / "stripped.zst", [edit_end(run, chain=None)])
    assert kinds(stripped, key=KEY) == {"digest"}


def test_a_place_on_an_unkeyed_run_is_an_edit(tmp_path: Path) -> None:
    (run,) = runs_of(record_runs(tmp_path / "t.zst", 1, key=None))
    out = write_runs(tmp_path / "e.zst", [edit_end(run, chain=1)])
    assert kinds(out) == {"chain"}


def test_the_cli_prints_the_head_and_checks_a_stored_one(tmp_path: Path) -> None:
    path = record_runs(tmp_path / "t.zst", 3)
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    runner = CliRunner(env={"COLUMNS": "200"})
    ok = runner.invoke(app, ["verify", str(path), "--key-file", str(key_file)])
    assert ok.exit_code == 0, ok.output
    head = al.verify(path, key=KEY).chain_head
    assert head is not None and f"3 keyed run(s), head {head}" in ok.output.replace("\n", "")
    cut = write_runs(tmp_path / "cut.zst", runs_of(path)[:2])
    bad = runner.invoke(app, ["verify", str(cut), "--key-file", str(key_file),
                              "--expect-head", head])
    assert bad.exit_code == 1 and "cut from the end" in bad.output.replace("\n", " ")
    for args, message in (
            ([str(cut), "--expect-head", head], "needs the key"),
            ([str(cut), "--key-file", str(key_file), "--expect-head", "3:zz"],
             "'<position>:<64 hex digits>'"),
            ([str(cut), str(path), "--key-file", str(key_file), "--expect-head", head],
             "found 2 paths")):
        result = runner.invoke(app, ["verify", *args])
        assert result.exit_code == 2, result.output
        assert message in result.output.replace("\n", " ")
        assert "Traceback" not in result.output
