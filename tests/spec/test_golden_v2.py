"""The format-version-2 golden fixture, tests/fixtures/traces/v2/golden.zst.

It was written by the current recorder (tests/fixtures/traces/v2/make_golden.py), so unlike
v1/golden.zst it verifies clean. The file must stay a plain zstd stream of msgpack arrays
(section 1.1 of docs/spec/trace-format.md), the independent reader (tests/spec/reader.py)
must read it as agentlog does and recompute every hash, receipt and draw, its verifier
(tests/spec/verifier.py) every digest and posterior draw too, and the pinned values below
(counts, run ids, frames, draws, a receipt) fail when a writer change changes the format:
such a change gets a new format version and a new golden folder, not a regenerated file.
"""

from __future__ import annotations

import collections
import io
import shutil
import subprocess
import sys
from pathlib import Path

import msgpack
import msgspec
import pytest
import zstandard

import agentlog as al

sys.path.insert(0, str(Path(__file__).parent))
import reader  # the spec's minimal reader, beside this test (no agentlog import)
import verifier  # the rest of verify's checks, built on reader (no agentlog import)

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "tests" / "fixtures" / "traces" / "v2"
GOLDEN = FOLDER / "golden.zst"
RUN_IDS = ["0123456789abcdef0123456789abcd01", "0123456789abcdef0123456789abcd02"]
COUNTS = {"RunStart": 2, "WindowEnter": 7, "WindowExit": 7, "Selection": 12, "Continuation": 2,
          "LLMCall": 2, "ToolCall": 2, "Score": 3, "Blob": 10, "RunEnd": 2}
FRAMES = [26, 1, 21, 1]  # records per frame: a run's records, then its RunEnd
FIRST_DRAWS = [-1.1447587903857117, 0.8574069155026908, 0.5129882957874046, 2.9479975341922056]
ANSWER_RECEIPT = "406a596d4ab0c91793e207be773c74c67c41fa19502703f8b6a6e35ba9f11c6e"


def _arrays(content: bytes) -> list[list[object]]:
    return list(msgpack.Unpacker(io.BytesIO(content), raw=False, strict_map_key=False))


def _stable(records: list[dict]) -> list[dict]:
    """The records less what make_golden.py cannot fix: the agentlog version string and
    the run digests (they cover the compressed bytes, which a zstd release may change)."""
    drop = {"agentlog_version", "digest"}
    return [{k: v for k, v in r.items() if k not in drop} for r in records]


def test_the_fixture_verifies_clean() -> None:
    report = al.verify(GOLDEN)
    assert report.problems == [] and not report.truncated
    assert (report.runs, report.frames, report.records) == (2, 4, sum(COUNTS.values()))
    assert report.checked["digests"] == 2


@pytest.mark.parametrize("how", ["zstd-cli", "zstandard"])
def test_a_plain_zstd_decompressor_gives_the_record_arrays(how: str) -> None:
    """`zstd -dc` and zstandard's stream reader skip the headers (skippable frames) and
    give one msgpack array of records per frame, back to back."""
    if how == "zstd-cli":
        zstd = shutil.which("zstd")
        if zstd is None:
            pytest.skip("the zstd command-line tool is not on PATH (Debian: apt install zstd)")
        content = subprocess.run([zstd, "-dc", str(GOLDEN)], capture_output=True,
                                 check=True).stdout
    else:
        with GOLDEN.open("rb") as f:
            content = zstandard.ZstdDecompressor().stream_reader(
                f, read_across_frames=True).read()
    arrays = _arrays(content)
    assert [len(a) for a in arrays] == FRAMES
    records = [reader.decode_record(r) for a in arrays for r in a]
    assert records == reader.read(str(GOLDEN))["records"]


def test_the_reader_reads_and_recomputes_it_as_agentlog() -> None:
    alone, ours, theirs = reader.read(str(GOLDEN)), verifier.read(str(GOLDEN)), al.read(GOLDEN)
    assert (alone["version"], alone["frames"]) == (2, 4)
    assert (ours["version"], ours["frames"], ours["truncated"]) == (2, 4, False)
    assert alone["records"] == ours["records"] == [
        {"type": type(r).__name__, **msgspec.structs.asdict(r)} for r in theirs.records]
    assert alone["problems"] == ours["problems"] == []
    posterior = sum(r["n"] for r in alone["records"] if r["type"] == "Selection"
                    and r["observed"] is not None)
    assert alone["checked"] == {"receipts": 7, "draws": 40 - posterior}
    assert ours["checked"] == {"receipts": 7, "digests": 2, "draws": 40, "uniforms": 2}


def test_pinned_values_guard_the_format() -> None:
    records = reader.read(str(GOLDEN))["records"]
    by = collections.defaultdict(list)
    for r in records:
        by[r["type"]].append(r)
    assert {t: len(rs) for t, rs in by.items()} == COUNTS
    assert [r["run_id"] for r in by["RunStart"]] == RUN_IDS
    assert {r["generator"] for r in by["RunStart"]} == {"fmix64-gumbel/3"}
    assert [(r["status"], r["error_type"]) for r in by["RunEnd"]] == [(0, None),
                                                                       (1, "ValueError")]
    first = by["Selection"][0]
    assert (first["name"], first["step"], first["choice"]) == ("doc", 0, 3)
    draws = reader.floats(first["draws"])
    assert all(abs(x - y) <= 1e-15 for x, y in zip(draws, FIRST_DRAWS, strict=True))
    answer = next(r for r in by["WindowExit"] if (r["run"], r["name"]) == (0, "answer"))
    assert answer["receipt"].hex() == ANSWER_RECEIPT and answer["exit"] is None  # a Blob
    # nesting, a raised window, with and without replacement, a posterior draw
    enters = {(r["run"], r["name"]): r for r in by["WindowEnter"]}
    assert enters[0, "retrieval"]["parent"] == enters[0, "answer"]["window"]
    assert enters[0, "check"]["after"] == "answer"
    assert [(r["name"], r["status"]) for r in by["WindowExit"] if r["run"] == 1][-1] == (
        "answer", 1)
    for run in (0, 1):
        doc = [reader.floats(r["probs"]) for r in by["Selection"]
               if (r["run"], r["name"]) == (run, "doc")]
        assert doc[0] == doc[1]
        opened = [r for r in by["Selection"] if (r["run"], r["name"]) == (run, "open")]
        assert reader.floats(opened[1]["probs"])[opened[0]["choice"]] == 0.0
    token = [r for r in by["Selection"] if r["name"] == "token"]
    assert [(r["observed"], r["choice"]) for r in token] == [(1, 1), (1, 1)]


def test_make_golden_regenerates_the_same_records(tmp_path: Path) -> None:
    out = tmp_path / "golden.zst"
    subprocess.run([sys.executable, str(FOLDER / "make_golden.py"), str(out)], check=True,
                   capture_output=True, cwd=tmp_path, timeout=300)
    ours, committed = reader.read(str(out)), reader.read(str(GOLDEN))
    assert ours["frames"] == committed["frames"] and ours["problems"] == []
    assert _stable(ours["records"]) == _stable(committed["records"])
