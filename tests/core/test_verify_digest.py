"""A run that claims no digest, where its writer always wrote one, fails ``verify``
(issue 30.8).

The digest catches an edit not followed by recomputing it; setting it to None used to
turn any edit into a note ("written by an older agentlog"). Every writer since the digest
(2026-12-01) writes one, and the trace shows which writer it was: a run recorded with
noise generator ``fmix64-gumbel/2`` or ``/3`` (both adopted after the digest), or whose
windows record re-entry seams (``WindowEnter.function``), or whose RunEnd says it is
keyed. Only a run without any such sign (the golden v1 trace, a ``/1`` run without
windows) keeps the note.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentlog as al
from agentlog._noise import GENERATOR_V1
from agentlog._trace_format import FILE_HEADER, FrameEncoder
from agentlog.records import RunEnd, RunStart, Score, WindowEnter
from tests.cli._cli import invoke

GOLDEN = Path(__file__).parents[1] / "fixtures" / "traces" / "v1" / "golden.zst"


@al.window("answer")
def answer(i: int) -> int:
    al.select([0.7, 0.3], candidates=["a", "b"], name="doc")
    al.score("f1", 0.25 * i)
    return i


def record(path: Path, **kw: Any) -> Path:
    with al.record(path, seed=5, task="q-1", **kw):
        for i in range(2):
            answer(i)
    return path


def reencode(source: Path, target: Path, edit: Callable[[Any], Any]) -> Path:
    """``source`` with ``edit`` applied to every record, frame by frame (the same frames,
    each compressed again: what a script editing a trace does)."""
    encoder = FrameEncoder()
    with al.iter_frames(source) as frames:
        body = b"".join(encoder.encode([edit(r) for r in f.records]) for f in frames)
    target.write_bytes(FILE_HEADER + body)
    return target


def no_digest(r: Any) -> Any:
    return msgspec.structs.replace(r, digest=None) if isinstance(r, RunEnd) else r


def no_digest_and_a_better_score(r: Any) -> Any:
    if isinstance(r, Score):
        return msgspec.structs.replace(r, value=1.0)
    return no_digest(r)


def test_a_digest_set_to_none_with_an_edited_score_fails_naming_the_run(
    tmp_path: Path,
) -> None:
    path = record(tmp_path / "t.zst")
    run_id = next(r.run_id for r in al.iter_records(path) if isinstance(r, RunStart))
    edited = reencode(path, tmp_path / "edited.zst", no_digest_and_a_better_score)
    assert [r.value for r in al.iter_records(edited) if isinstance(r, Score)] == [1.0, 1.0]
    report = al.verify(edited)
    assert not report.ok and report.notes == []
    (problem,) = report.problems
    assert (problem.kind, problem.run) == ("digest", 0)
    assert problem.message.startswith(f"run {run_id} has no digest, but it was written by an "
                                      "agentlog that always writes one (its RunStart names "
                                      "noise generator 'fmix64-gumbel/3'")
    assert "the digest was removed" in problem.message


def test_the_command_exits_1_and_prints_the_run(tmp_path: Path) -> None:
    edited = reencode(record(tmp_path / "t.zst"), tmp_path / "edited.zst",
                      no_digest_and_a_better_score)
    result = invoke("verify", edited)
    assert result.exit_code == 1, result.output
    assert "digest (run 0, record" in result.stdout and "has no digest" in result.stdout


def test_a_removed_digest_alone_fails_too(tmp_path: Path) -> None:
    stripped = reencode(record(tmp_path / "t.zst"), tmp_path / "stripped.zst", no_digest)
    assert [p.kind for p in al.verify(stripped).problems] == ["digest"]


def test_windows_with_reentry_seams_show_the_writer_of_a_generator_1_run(
    tmp_path: Path,
) -> None:
    """``record(generator="fmix64-gumbel/1")`` reproduces old draws, but its windows still
    record ``WindowEnter.function``, which agentlog wrote only after digests."""
    path = record(tmp_path / "t.zst", generator=GENERATOR_V1)
    report = al.verify(reencode(path, tmp_path / "stripped.zst", no_digest))
    assert [p.kind for p in report.problems] == ["digest"]
    assert "re-entry seams (WindowEnter.function)" in report.problems[0].message


def test_a_generator_1_run_without_windows_keeps_the_note(tmp_path: Path) -> None:
    """Nothing in it proves its writer postdates the digest: a note, as before."""
    path = tmp_path / "t.zst"
    with al.record(path, seed=5, generator=GENERATOR_V1):
        al.select([0.5, 0.5], candidates=["a", "b"], name="doc")
    report = al.verify(reencode(path, tmp_path / "stripped.zst", no_digest))
    assert report.ok and "1 run(s) have no record digest" in report.notes[0]


def test_a_keyed_run_without_its_digest_fails(tmp_path: Path) -> None:
    path = record(tmp_path / "t.zst", key="k", generator=GENERATOR_V1)

    def strip_and_drop_seams(r: Any) -> Any:  # leave only the keyed flag as the sign
        if isinstance(r, WindowEnter):
            return msgspec.structs.replace(r, function=None)
        return no_digest(r)

    report = al.verify(reencode(path, tmp_path / "stripped.zst", strip_and_drop_seams))
    assert [p.kind for p in report.problems] == ["digest"]
    assert "its RunEnd says the run was keyed" in report.problems[0].message


@pytest.mark.parametrize("key", [None, "k"])
def test_the_golden_trace_of_before_the_digest_keeps_its_note(key: str | None) -> None:
    report = al.verify(GOLDEN, key=key)
    assert "1 run(s) have no record digest" in report.notes[0]
    assert [p.kind for p in report.problems if p.kind == "digest"] == (
        [] if key is None else ["digest"])
