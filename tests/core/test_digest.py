"""The run digest puts every field of every record under one hash; a key makes it an HMAC.

Before it, ``verify`` recomputed hashes, receipts and draws only: an edit of a score,
a status, the metadata, or a small edit of a probability that keeps the vector
normalised and the argmax unchanged, passed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

import agentlog as al
from agentlog._digest import RunDigest, run_end_tail
from agentlog._writer import TraceWriter
from agentlog.records import Continuation, RunEnd, RunStart, Score, Selection, WindowExit

GOLDEN = Path(__file__).parents[1] / "fixtures" / "traces" / "v1" / "golden.zst"


@al.window("step")
def step(i: int) -> int:
    al.select([0.6, 0.3, 0.1], candidates=["a", "b", "c"], name="doc")
    al.proceed(0.8, name="stop")
    al.score("f1", 0.25 * i)
    return i


def record_run(path: Path, **kw: Any) -> Path:
    with al.record(path, seed=11, task="t-1", meta={"backbone": "m"}, **kw):
        for i in range(3):
            step(i)
    return path


def rewrite(source: Path, target: Path, edit: Callable[[Any], Any]) -> Path:
    with TraceWriter(target) as w:
        for r in al.iter_records(source):
            w.put(edit(r))
    return target


def kinds(path: Path, **kw: Any) -> list[str]:
    return [p.kind for p in al.verify(path, **kw).problems]


def test_a_recorded_run_carries_a_digest_that_verify_recomputes(tmp_path: Path) -> None:
    path = record_run(tmp_path / "t.zst")
    (end,) = [r for r in al.iter_records(path) if isinstance(r, RunEnd)]
    assert end.digest is not None and len(end.digest) == 32 and not end.keyed
    report = al.verify(path)
    assert report.ok and report.checked["digests"] == 1 and report.notes == []


def test_the_digest_is_sha256_over_the_payloads_of_the_runs_frames(tmp_path: Path) -> None:
    """Recomputed here from the file's bytes by the formula in agentlog._digest."""
    path = record_run(tmp_path / "t.zst")
    d = hashlib.sha256()
    rid = next(r for r in al.iter_records(path) if isinstance(r, RunStart)).run_id.encode()
    d.update(b"agentlog-digest/1" + len(rid).to_bytes(4, "little") + rid)
    with al.iter_frames(path, raw=True) as frames:
        for frame in frames:
            assert frame.payload is not None
            if isinstance(frame.records[0], RunEnd):  # the writer ends a frame before it
                end = frame.records[0]
                break
            if any(hasattr(r, "run") for r in frame.records):
                d.update(frame.payload)
    d.update(msgspec.msgpack.encode([end.run, end.t_ns, end.status, end.receipt, end.n_windows,
                                     end.n_selections, end.n_continuations, end.dropped,
                                     end.error_type]))
    assert end.digest == d.digest()


def test_records_of_a_run_put_before_its_runend_in_the_same_frame_are_covered(
    tmp_path: Path,
) -> None:
    """The writer never makes such a frame; a hand-made one is still checked record by
    record, so a record slipped in next to the RunEnd breaks the digest."""
    path = record_run(tmp_path / "t.zst")
    records = list(al.iter_records(path))
    end = records.pop()
    assert isinstance(end, RunEnd)
    late = Score(run=0, window=-1, name="f1", value=1.0)
    from agentlog._trace_format import FILE_HEADER, encode_frame

    with al.iter_frames(path) as frames:
        body = path.read_bytes()[:[f.offset for f in frames][-1]]
    assert body.startswith(FILE_HEADER)
    forged = tmp_path / "forged.zst"
    forged.write_bytes(body + encode_frame([late, end]))
    assert kinds(forged)[-2:] == ["counts", "digest"] or kinds(forged)[-1:] == ["digest"]


def _nudge_probs(r: Any) -> Any:
    if isinstance(r, Selection) and r.step == 1:
        p = np.frombuffer(r.probs, "<f8").copy()
        p[0] += 1e-9  # keeps the sum within tolerance and the argmax unchanged
        p[1] -= 1e-9
        return msgspec.structs.replace(r, probs=p.tobytes())
    return r


EDITS: dict[str, Callable[[Any], Any]] = {
    "probs": _nudge_probs,
    "p": lambda r: (msgspec.structs.replace(r, p=r.p + 1e-6)
                    if isinstance(r, Continuation) and r.step == 0 else r),
    "Score.value": lambda r: (msgspec.structs.replace(r, value=0.99)
                              if isinstance(r, Score) and r.value == 0.25 else r),
    "Selection.window": lambda r: (msgspec.structs.replace(r, window=r.window + 100)
                                   if isinstance(r, Selection) and r.step == 2 else r),
    "WindowExit.status": lambda r: (msgspec.structs.replace(r, status=1, error_type="X")
                                    if isinstance(r, WindowExit) else r),
    "RunStart.meta": lambda r: (msgspec.structs.replace(r, meta={"backbone": "other"})
                                if isinstance(r, RunStart) else r),
    "RunStart.task": lambda r: (msgspec.structs.replace(r, task="t-2")
                                if isinstance(r, RunStart) else r),
    "RunEnd.status": lambda r: (msgspec.structs.replace(r, status=1)
                                if isinstance(r, RunEnd) else r),
}


@pytest.mark.parametrize("field", list(EDITS))
def test_an_edit_of_an_estimator_input_is_detected(tmp_path: Path, field: str) -> None:
    path = record_run(tmp_path / "t.zst")
    edited = rewrite(path, tmp_path / "edited.zst", EDITS[field])
    assert kinds(edited)[-1:] == ["digest"]
    assert "does not match its records" in al.verify(edited).problems[-1].message


def test_stripping_the_digest_to_hide_an_edit_is_itself_a_failure(tmp_path: Path) -> None:
    """The same edit with the digest set to None: nothing else in verify notices the edit,
    but a run whose writer always writes a digest and has none fails (it used to pass with
    a note)."""
    path = record_run(tmp_path / "t.zst")

    def strip(r: Any) -> Any:
        r = _nudge_probs(r)
        return msgspec.structs.replace(r, digest=None) if isinstance(r, RunEnd) else r

    edited = rewrite(path, tmp_path / "stripped.zst", strip)
    report = al.verify(edited)
    assert not report.ok and [p.kind for p in report.problems] == ["digest"]


def test_a_keyed_run_verifies_only_with_its_key(tmp_path: Path) -> None:
    path = record_run(tmp_path / "t.zst", key="s3cret-key")
    (end,) = [r for r in al.iter_records(path) if isinstance(r, RunEnd)]
    assert end.keyed
    assert b"s3cret-key" not in path.read_bytes()
    assert al.verify(path, key="s3cret-key").ok
    assert al.verify(path, key=b"s3cret-key").checked["digests"] == 1
    assert kinds(path, key="other") == ["digest"]
    unkeyed = al.verify(path)
    assert unkeyed.ok and "keyed digest (record(key=...)) that was not checked" in unkeyed.notes[0]


def test_a_recomputed_plain_digest_does_not_pass_a_keyed_check(tmp_path: Path) -> None:
    """Tampering with a recomputed digest is what the key is for."""
    path = record_run(tmp_path / "t.zst", key="k")
    forged = tmp_path / "forged.zst"
    digest: RunDigest | None = None
    with TraceWriter(forged) as w:
        for r in al.iter_records(path):
            if isinstance(r, RunStart):
                digest = RunDigest(r.run_id)
            if isinstance(r, RunEnd):
                assert digest is not None
                tail = run_end_tail(r.run, r.t_ns, r.status, r.receipt, r.n_windows,
                                    r.n_selections, r.n_continuations, r.dropped, r.error_type)
                r = msgspec.structs.replace(r, digest=digest.finish_bytes(tail), keyed=False,
                                            chain=None)
            elif hasattr(r, "run"):
                if isinstance(r, Score):
                    r = msgspec.structs.replace(r, value=1.0)
                assert digest is not None
                digest.update(msgspec.msgpack.encode(r))
            w.put(r)
    assert al.verify(forged).ok  # without a key a forger who recomputes passes...
    assert kinds(forged, key="k") == ["digest"]  # ...with it, not
    assert "recorded without a key" in al.verify(forged, key="k").problems[0].message


def test_an_empty_or_non_secret_key_is_refused_at_record() -> None:
    with pytest.raises(ValueError, match="`key` is empty"):
        al.record("/tmp/never.zst", key="")
    with pytest.raises(TypeError, match="`key` must be a str or bytes"):
        al.record("/tmp/never.zst", key=123)  # type: ignore[arg-type]


def test_the_golden_v1_trace_verifies_with_a_note_about_its_missing_digest() -> None:
    """Its hashes are placeholders (a format fixture), so verify lists those as before;
    the missing digest is a note, not a problem."""
    report = al.verify(GOLDEN)
    assert "digest" not in {p.kind for p in report.problems}
    assert report.notes == ["1 run(s) have no record digest (written by an older agentlog): "
                            "their hashes, receipts and draws were checked, but an edit of a "
                            "field outside them (a score, a status, the metadata) would go "
                            "unseen"]


def test_runs_sharing_a_file_and_frames_each_get_their_own_digest(tmp_path: Path) -> None:
    path = tmp_path / "shared.zst"
    with al.record(path, seed=1, frame_interval=3600) as outer:
        al.score("outer", 0.1)
        with al.record(path, seed=2, frame_interval=3600):
            al.score("inner", 0.2)
            step(0)
        al.score("outer", 0.3)
    assert outer is not None
    ends = [r for r in al.iter_records(path) if isinstance(r, RunEnd)]
    assert len(ends) == 2 and all(e.digest is not None for e in ends)
    assert len({e.digest for e in ends}) == 2
    report = al.verify(path)
    assert report.ok and report.checked["digests"] == 2
