"""Frozen transitions: x⁻ is the decoded sealed entry, x⁺ the decoded sealed exit."""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path

import pytest

import agentlog as al
from agentlog.records import decode_artifact
from agentlog.replay import FrozenTransition, StateDecodeError, WindowNotFoundError
from agentlog.replay.lowlevel import frozen_transitions, trace_file_hash


@al.window("states-test-step")
def step(x: int, label: str) -> dict[str, int]:
    if x < 0:
        raise ValueError("negative")
    return {"y": x * 2}


@al.window("states-test-other")
def other(x: int) -> int:
    return x


def _record(path: Path, xs: list[int], *, task: str = "t") -> Path:
    with al.record(path, seed=5, task=task, system="sys", meta={"target": "supports"}):
        for x in xs:
            with contextlib.suppress(ValueError):
                step(x, label=f"l{x}")
        other(1)
    return path


def test_before_and_after_are_the_decoded_entry_and_exit_with_their_sealed_hashes(
        tmp_path: Path) -> None:
    path = _record(tmp_path / "a.zst", [1, 2])
    trace = al.read(path)
    windows = [w for w in trace.windows() if w.name == "states-test-step"]
    got = list(frozen_transitions(path, window="states-test-step"))
    assert [t.window_id for t in got] == [w.window for w in windows]
    for t, w in zip(got, windows, strict=True):
        before, after = t.before(), t.after()
        assert before.value == w.entry_value() == {"x": before.value["x"], "label":
                                                   f"l{before.value['x']}"}
        assert after.value == w.exit_value() == {"y": 2 * before.value["x"]}
        assert before.hash == w.enter.entry_hash and after.hash == w.exit.exit_hash
        assert after.entry == before.value and before.before and not after.before
        assert (after.task, after.system, after.seed, dict(after.meta)) == (
            "t", "sys", 5, {"target": "supports"})
        assert t.run_id == trace.runs[0].start.run_id
        assert hashlib.sha256(t.entry or b"").digest() == t.entry_hash


def test_failed_instances_are_left_out_unless_asked_for(tmp_path: Path) -> None:
    path = _record(tmp_path / "a.zst", [1, -1, 2])
    assert len(list(frozen_transitions(path, window="states-test-step"))) == 2
    every = list(frozen_transitions(path, window="states-test-step", include_failed=True))
    assert len(every) == 3


def test_a_folder_is_read_in_sorted_order_with_each_files_hash(tmp_path: Path) -> None:
    b = _record(tmp_path / "b.zst", [3], task="tb")
    a = _record(tmp_path / "a.zst", [4], task="ta")
    got = list(frozen_transitions(tmp_path, window="states-test-step"))
    assert [(t.task, t.source) for t in got] == [("ta", a), ("tb", b)]
    assert [t.trace_hash for t in got] == [hashlib.sha256(a.read_bytes()).hexdigest(),
                                           hashlib.sha256(b.read_bytes()).hexdigest()]
    assert trace_file_hash(a) == got[0].trace_hash


def test_a_window_not_in_the_traces_names_the_windows_present(tmp_path: Path) -> None:
    path = _record(tmp_path / "a.zst", [1])
    with pytest.raises(WindowNotFoundError,
                       match=r"no completed instance of window 'retrieval' in the traces; "
                             r"windows present: states-test-other, states-test-step\. Pass "
                             r"one of them \(--window NAME\)") as info:
        list(frozen_transitions(path, window="retrieval"))
    assert info.value.present == ("states-test-other", "states-test-step")
    assert isinstance(info.value, ValueError)


def _copy(t: FrozenTransition, **change: object) -> FrozenTransition:
    import dataclasses

    return dataclasses.replace(t, **change)  # type: ignore[arg-type]


def test_an_undecodable_state_is_a_state_decode_error_naming_the_transition(
        tmp_path: Path) -> None:
    path = _record(tmp_path / "a.zst", [1])
    (t,) = frozen_transitions(path, window="states-test-step")
    corrupt = _copy(t, exit=b"\xc1")  # 0xc1 is never valid msgpack
    assert corrupt.before().value == {"x": 1, "label": "l1"}  # x⁻ alone still reads
    with pytest.raises(StateDecodeError,
                       match=r"a\.zst: run [0-9a-f]+, window 'states-test-step' id \d+: the "
                             r"exit \(x⁺\) does not decode .*the trace is corrupt there"):
        corrupt.after()
    missing = _copy(t, entry=None, entry_problem="the entry Blob is missing (no Blob ...)")
    with pytest.raises(StateDecodeError, match=r"the entry \(x⁻\) cannot be read: the entry "
                                               r"Blob is missing"):
        missing.before()


def test_a_large_entry_stored_as_a_blob_is_resolved(tmp_path: Path) -> None:
    big = "x" * 100_000

    @al.window("states-test-big")
    def big_step(text: str) -> int:
        return len(text)

    with al.record(tmp_path / "big.zst", seed=1):
        big_step(big)
    (t,) = frozen_transitions(tmp_path / "big.zst", window="states-test-big")
    assert t.before().value == {"text": big} and t.after().value == 100_000
    assert decode_artifact(t.entry or b"") == {"text": big}
