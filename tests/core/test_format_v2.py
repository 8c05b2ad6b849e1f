"""Format version 2: a trace file is a valid zstd stream that any zstd tool opens.

Before, a ``.zst`` trace was not a zstd stream (16-byte frame headers sat between the
frames) and ``zstd -dc trace.zst`` failed. Now the file header and each frame header
are zstd skippable frames: decoders skip them and print the frames' contents, one
msgpack array of records per frame. Version-1 files stay readable, verifiable and
appendable (in their own layout).
"""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import msgpack  # type: ignore[import-untyped]
import msgspec
import pytest
import zstandard

import agentlog as al
from agentlog._trace_format import FILE_HEADER
from agentlog.records import RunStart, Score, Selection

FIXTURES = Path(__file__).parents[1] / "fixtures" / "traces"


def record_two_runs(path: Path) -> Path:
    for seed in (1, 2):
        with al.record(path, seed=seed, task=f"t{seed}", mode="a"):
            al.select([0.2, 0.8], candidates=["a", "b"], name="pick")
            al.score("f1", seed / 4)
    assert al.flush()
    return path


@pytest.mark.skipif(shutil.which("zstd") is None, reason="needs the zstd command-line tool "
                    "(Debian package zstd)")
def test_zstd_dc_prints_one_msgpack_array_of_records_per_frame(tmp_path: Path) -> None:
    path = record_two_runs(tmp_path / "t.zst")
    out = subprocess.run(["zstd", "-dc", str(path)], capture_output=True, check=True,
                         timeout=60).stdout
    arrays = list(msgpack.Unpacker(io.BytesIO(out), raw=False))
    records = [r for frame in arrays for r in frame]
    assert len(arrays) == al.read(path).frames
    assert records == [msgpack.unpackb(msgspec.msgpack.encode(r)) for r in al.iter_records(path)]
    tags = [r[0] for r in records]
    assert tags.count(RunStart.__struct_config__.tag) == 2
    assert tags.count(Score.__struct_config__.tag) == 2
    subprocess.run(["zstd", "-t", "-q", str(path)], check=True, timeout=60)  # zstd's own test


def test_zstandards_plain_stream_reader_reads_the_same_content(tmp_path: Path) -> None:
    path = record_two_runs(tmp_path / "t.zst")
    with path.open("rb") as f:
        content = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True).read()
    expected = b"".join(msgspec.msgpack.encode(frame.records) for frame in al.iter_frames(path))
    assert content == expected and path.read_bytes().startswith(FILE_HEADER)


def test_a_version_1_file_is_appended_to_in_version_1_and_verifies(tmp_path: Path) -> None:
    path = tmp_path / "old.zst"
    shutil.copyfile(FIXTURES / "generator2" / "selections.zst", path)
    before = al.read(path)
    assert before.format_version == 1
    with al.record(path, seed=5, mode="a"):
        al.select([0.5, 0.5], candidates=["x", "y"], name="pick")
    assert al.flush()
    after = al.read(path)
    assert after.format_version == 1 and not after.truncated
    assert after.records[: len(before.records)] == before.records
    assert len([r for r in after.records if isinstance(r, Selection)]) == len(
        [r for r in before.records if isinstance(r, Selection)]) + 1
    report = al.verify(path)
    assert not {p.kind for p in report.problems} - {p.kind for p in al.verify(
        FIXTURES / "generator2" / "selections.zst").problems}


@pytest.mark.parametrize("fixture", sorted(p.relative_to(FIXTURES).as_posix()
                                           for p in FIXTURES.glob("*/*.zst")))
def test_every_committed_fixture_reads_as_the_version_it_was_written_in(fixture: str) -> None:
    """Every fixture was written by a version-1 writer, except the version-2 golden
    fixture (``v2/``, written by today's)."""
    trace = al.read(FIXTURES / fixture)
    version = 2 if fixture.startswith("v2/") else 1
    assert trace.format_version == version and not trace.truncated and trace.records
