"""Which files a recorder may write, and how runs of many invocations share one file.

FIFOs, devices and directories are refused; one writer per file (a lock, writers keyed
by device and inode); an existing trace is never replaced or extended silently
(``mode="x"``), appending (``mode="a"``) checks the file first.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import agentlog as al
import agentlog._writer.frames as frames_mod
import agentlog._writer.writer as writer_mod
from agentlog._reader import read
from agentlog._trace_format import encode_frame
from agentlog._writer import TraceWriter
from agentlog.records import RunStart, Score
from tests.conftest import of_type

PACKAGE_ROOT = Path(writer_mod.__file__).parents[1]


def _python(code: str, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def record_elsewhere(path: Path, task: str = "old") -> None:
    """Record one run into ``path`` from another process (an earlier invocation)."""
    proc = _python("""
        import sys, agentlog as al
        with al.record(sys.argv[1], task=sys.argv[2], mode="a"):
            al.score("f1", 0.5)
    """, str(path), task)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


def tasks(path: Path) -> list[str | None]:
    return [r.task for r in of_type(read(path), RunStart)]


# -- not a regular file -------------------------------------------------------------------


def test_a_fifo_is_refused_up_front_instead_of_blocking_forever(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.zst"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def enter() -> None:
        try:
            with al.record(fifo):
                pass
            outcome.append(None)
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)

    t = threading.Thread(target=enter, daemon=True)  # an old agentlog hangs in open()
    t.start()
    t.join(10)
    assert not t.is_alive(), "record() blocked on a FIFO with no reader"
    assert isinstance(outcome[0], al.TracePathError)
    assert "expected a regular file (or a path that does not exist yet), found a FIFO" in str(
        outcome[0])


def test_a_path_holding_a_nul_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    """Before: a bare ValueError("embedded null byte") from os.stat."""
    with (
        pytest.raises(al.TracePathError, match=r"holds a NUL character"),
        al.record(str(tmp_path / "bad\0name.zst")),
    ):
        pass
    assert list(tmp_path.iterdir()) == []


def test_a_directory_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    with (
        pytest.raises(al.TracePathError, match=r"expected a regular file .*found a directory"),
        al.record(tmp_path),
    ):
        pass


# -- modes ----------------------------------------------------------------------------------


def test_by_default_a_trace_from_an_earlier_invocation_is_refused_and_untouched(
    trace_path: Path,
) -> None:
    record_elsewhere(trace_path)
    before = trace_path.read_bytes()
    with (
        pytest.raises(al.TracePathError, match=r"already holds \d+ bytes .*mode='a' to add"),
        al.record(trace_path),
    ):
        pass
    assert trace_path.read_bytes() == before


def test_mode_a_appends_runs_to_an_earlier_trace_with_fresh_run_indices(
    trace_path: Path,
) -> None:
    record_elsewhere(trace_path, "first")
    record_elsewhere(trace_path, "second")  # another invocation appends too
    with al.record(trace_path, task="third", mode="a") as run:
        al.score("f1", 1.0)
    assert run.index == 2
    assert tasks(trace_path) == ["first", "second", "third"]
    trace = read(trace_path)
    assert [r.run for r in of_type(trace, RunStart)] == [0, 1, 2]
    assert al.verify(trace_path).ok


def test_mode_w_replaces_an_earlier_trace(trace_path: Path) -> None:
    record_elsewhere(trace_path)
    with al.record(trace_path, task="new", mode="w"):
        pass
    assert tasks(trace_path) == ["new"]


def test_runs_of_one_process_go_into_one_file_one_after_another(trace_path: Path) -> None:
    for task in ("a", "b", "c"):
        with al.record(trace_path, task=task):  # the default mode, every time
            al.score("f1", 0.5)
    assert tasks(trace_path) == ["a", "b", "c"]
    assert [r.run for r in of_type(read(trace_path), RunStart)] == [0, 1, 2]
    assert al.verify(trace_path).ok


def test_appending_to_a_trace_torn_by_a_crash_cuts_the_torn_frame_off_with_a_warning(
    trace_path: Path,
) -> None:
    record_elsewhere(trace_path, "complete")
    good = trace_path.stat().st_size
    frame = encode_frame([Score(run=0, window=-1, name="lost", value=0.0)] * 50)
    with trace_path.open("ab") as f:  # the first part of a frame that a kill tore
        f.write(frame[: len(frame) // 2])
    with (
        pytest.warns(al.InstrumentationWarning, match=rf"torn by a crash \(bytes {good} to"),
        al.record(trace_path, task="resumed", mode="a"),
    ):
        pass
    trace = read(trace_path)
    assert not trace.truncated and tasks(trace_path) == ["complete", "resumed"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"GIF89a not a trace at all", r"cannot append to .*not an agentlog trace"),
        (b"AGNTLOG\x01" + b"\x00" * 64, r"cannot append to .*corrupted at offset 8"),
    ],
)
def test_appending_to_something_that_is_not_a_clean_trace_is_refused(
    trace_path: Path, content: bytes, message: str
) -> None:
    trace_path.write_bytes(content)
    with (
        pytest.raises(al.TracePathError, match=message),
        al.record(trace_path, mode="a"),
    ):
        pass
    assert trace_path.read_bytes() == content


def test_record_validates_mode(trace_path: Path) -> None:
    with pytest.raises(ValueError, match=r"`mode` must be 'x' \(new trace\), 'a' .*found 'r\+'"):
        al.record(trace_path, mode="r+")  # type: ignore[arg-type]


# -- one writer per file ----------------------------------------------------------------------


def test_a_second_process_on_the_same_file_gets_a_clear_error(trace_path: Path) -> None:
    holder = _python("""
        import sys, agentlog as al
        with al.record(sys.argv[1]):
            print("open", flush=True)
            sys.stdin.readline()
    """, str(trace_path))
    assert holder.stdout is not None and holder.stdin is not None
    assert holder.stdout.readline().strip() == "open"
    try:
        with (
            pytest.raises(al.TracePathError, match=r"another process is writing it"),
            al.record(trace_path, mode="a"),
        ):
            pass
    finally:
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.communicate(timeout=60)
    assert holder.returncode == 0
    assert len(tasks(trace_path)) == 1 and al.verify(trace_path).ok


def test_two_hard_links_to_one_file_share_one_writer(tmp_path: Path) -> None:
    a, b = tmp_path / "a.zst", tmp_path / "b.zst"
    with al.record(a, task="via a"):
        os.link(a, b)
        with al.record(b, task="via b"):
            al.score("f1", 1.0)
    assert tasks(a) == ["via a", "via b"]
    assert al.verify(a).ok


def test_a_run_opening_while_the_last_run_on_its_file_is_closing_loses_nothing(
    trace_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = frames_mod._writev
    in_close = threading.Event()
    armed = threading.Event()

    def slow_last_write(fd: int, parts: list[bytes]) -> int:
        if armed.is_set():
            in_close.set()
            time.sleep(0.3)  # the closing writer is mid-write when the next run opens
        return real(fd, parts)

    monkeypatch.setattr(frames_mod, "_writev", slow_last_write)

    def first() -> None:
        with al.record(trace_path, task="first"):
            al.score("f1", 1.0)
            armed.set()

    t = threading.Thread(target=first)
    t.start()
    assert in_close.wait(10)
    armed.clear()
    with al.record(trace_path, task="second"):
        al.score("f1", 2.0)
    t.join(10)
    trace = read(trace_path)
    assert not trace.truncated and sorted(map(str, tasks(trace_path))) == ["first", "second"]
    assert al.verify(trace_path).ok


def test_a_forked_childs_writer_does_not_take_over_the_parents_file(trace_path: Path) -> None:
    w = TraceWriter(trace_path, frame_interval=3600)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            TraceWriter(trace_path, mode="a")
            code = 3
        except al.TracePathError:
            code = 0
        except BaseException:
            code = 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    w.close()
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.parametrize("reader", ["read", "verify", "iter_records"])
def test_reading_a_fifo_is_refused_at_once_instead_of_waiting_for_a_writer(
        tmp_path: Path, reader: str) -> None:
    """Before: ``open(path, "rb")`` of a FIFO nobody writes to blocked forever (the CLI's
    ``verify`` and ``inspect`` hung on one)."""
    fifo = tmp_path / "pipe.zst"
    os.mkfifo(fifo)
    outcome: list[BaseException | object] = []

    def call() -> None:
        try:
            result = getattr(al, reader)(fifo)
            outcome.append(list(result) if reader == "iter_records" else result)
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), f"{reader} blocked on a FIFO with no writer"
    (got,) = outcome
    assert isinstance(got, al.TraceFormatError) and "found a named pipe" in str(got)


def test_reading_a_directory_names_the_directory(tmp_path: Path) -> None:
    """The non-blocking open of readers must keep open()'s message: the path, not the
    file descriptor ("Is a directory: 3")."""
    with pytest.raises(IsADirectoryError) as raised:
        al.read(tmp_path)
    assert str(tmp_path) in str(raised.value)
