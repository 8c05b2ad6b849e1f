"""A trace is only ever read from a regular file: a pipe or a device is refused at once.

Each test is bounded by a hang guard (``pytest.mark.timeout``), not a wall-clock assertion:
before, a FIFO blocked forever and a device never ended.

``agentlog certify`` hashed each input before the reader's checks: it hung forever on a
FIFO and read ``/dev/zero`` or ``/dev/urandom`` without end. Every reader and every
input hash now goes through one opener that refuses them, and a hash checks the header
before reading on.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import agentlog as al
import agentlog._frames
from agentlog._trace_format import FILE_HEADER_SIZE
from agentlog.records import trace_sha256


@pytest.mark.timeout(60)
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_a_device_is_refused_by_every_entry_point(device: str) -> None:
    if not os.path.exists(device):
        pytest.skip(f"{device} does not exist here")
    for call in (al.read, trace_sha256, al.verify):
        with pytest.raises(al.TraceFormatError, match=r"expected a trace file, found a "
                                                       r"character device"):
            call(device)


@pytest.mark.timeout(60)
def test_a_fifo_nobody_writes_to_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.zst"
    os.mkfifo(fifo)
    with pytest.raises(al.TraceFormatError, match=r"found a named pipe"):
        trace_sha256(fifo)


def test_a_file_that_is_not_a_trace_is_refused_before_it_is_hashed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sparse = tmp_path / "sparse.zst"
    with open(sparse, "wb") as f:
        f.truncate(2 << 30)  # 2 GiB of zeros, no disk: hashing it whole took 8.4 s
    read: list[int] = []
    opener = agentlog._frames._open_for_reading

    class Counting:  # the file as trace_sha256 reads it, counting the bytes it asks for
        def __init__(self, path: str) -> None:
            self.f = opener(path)

        def __enter__(self) -> Counting:
            return self

        def __exit__(self, *exc: object) -> None:
            self.f.close()

        def read(self, n: int = -1) -> bytes:
            data = self.f.read(n)
            read.append(len(data))
            return data

    monkeypatch.setattr(agentlog._frames, "_open_for_reading", Counting)
    with pytest.raises(al.TraceFormatError, match="not an agentlog trace"):
        trace_sha256(sparse)
    assert sum(read) <= FILE_HEADER_SIZE  # refused on its header, nothing else read


@pytest.mark.timeout(120)
def test_certify_on_a_fifo_and_a_device_exits_2_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "runs.zst"
    os.mkfifo(fifo)
    plan = tmp_path / "plan.toml"
    from importlib import resources

    plan.write_bytes(resources.files("agentlog.examples").joinpath(
        "plans", "deep_research.toml").read_bytes())
    for target in (fifo, Path("/dev/zero")):
        done = subprocess.run([sys.executable, "-m", "agentlog.cli", "certify", str(target),
                               "--plan", str(plan)], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
