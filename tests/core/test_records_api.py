"""Every value of a trace comes back through public names: ``agentlog.records``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import agentlog as al
import agentlog.records as rec
from agentlog._writer import TraceWriter

EXPECTED = [
    "ABSENT", "EXIT_CLOSED", "EXIT_FAILED", "EXIT_OK", "RECORD_TYPES", "Blob",
    "BlobNotFoundError", "Continuation", "Frame", "FrameIterator", "LLMCall", "Record",
    "RunEnd", "RunStart", "RunView", "Score", "Selection", "ToolCall", "TraceRun",
    "Transition", "WindowEnter", "WindowExit", "WindowView", "artifact_differences",
    "decode_artifact", "decode_pool", "draws", "encode_artifact", "iter_runs",
    "parse_chain_head", "policy_probs", "probs", "raw_probs", "trace_files", "trace_sha256",
]


def test_records_all_is_sorted_and_fixed() -> None:
    assert rec.__all__ == sorted(rec.__all__, key=lambda n: (not n.isupper(), n)) == EXPECTED
    for name in rec.__all__:
        assert getattr(rec, name) is not None


@al.window("retrieval")
def retrieve(question: str, budget: int) -> dict[str, object]:
    i = al.select([0.1, 0.2, 0.7], candidates=["d1", "d2", "d3"], name="doc", top_k=2)
    return {"doc": ["d1", "d2", "d3"][i], "vec": np.arange(3.0)}


@pytest.fixture
def trace(tmp_path: Path) -> al.Trace:
    path = tmp_path / "t.zst"
    with al.record(path, seed=4):
        retrieve("what?", 3)
    return al.read(path)


def test_a_selection_gives_back_its_vectors_candidates_and_chosen_id(trace: al.Trace) -> None:
    (sel,) = trace.selections()
    assert isinstance(sel, rec.Selection)
    p = rec.probs(sel)
    assert p.dtype == np.float64 and not p.flags.writeable and p.shape == (sel.n,)
    assert rec.draws(sel).shape == (sel.n,)
    raw = rec.raw_probs(sel)
    assert raw is not None and raw.tolist() == [0.1, 0.2, 0.7]  # before top_k=2
    assert rec.policy_probs(sel) is None  # no steer
    ids = trace.candidates(sel)
    assert sorted(ids) == ["d1", "d2", "d3"] and len(ids) == sel.n
    assert trace.chosen(sel) == ids[sel.choice]
    assert trace.chosen(sel) == trace.windows()[0].exit_value()["doc"]


def test_a_window_gives_back_its_decoded_entry_and_exit(trace: al.Trace) -> None:
    (w,) = trace.windows()
    assert isinstance(w, rec.WindowView) and w.status == rec.EXIT_OK
    assert w.entry_value() == {"question": "what?", "budget": 3}
    out = w.exit_value()
    assert out["vec"].tolist() == [0.0, 1.0, 2.0]
    again = rec.decode_artifact(w.exit_bytes)
    assert again["doc"] == out["doc"] and again["vec"].tolist() == [0.0, 1.0, 2.0]
    assert rec.encode_artifact(again) == w.exit_bytes  # canonical: what the hash covers
    args, kwargs = al.decode_arguments(retrieve, w.entry_bytes)
    assert (args, kwargs) == (("what?", 3), {})


def test_a_window_that_never_exited_has_no_exit_value(tmp_path: Path) -> None:
    path = tmp_path / "open.zst"
    with TraceWriter(path) as w:
        for r in al.iter_records(_one_window(tmp_path)):
            if not isinstance(r, rec.WindowExit):
                w.put(r)
    (window,) = al.read(path).windows()
    with pytest.raises(ValueError, match="never exited: it has no exit value"):
        window.exit_value()


def _one_window(tmp_path: Path) -> Path:
    path = tmp_path / "one.zst"
    with al.record(path, seed=1):
        retrieve("q", 1)
    return path


def test_pools_decode_while_streaming(tmp_path: Path) -> None:
    path = _one_window(tmp_path)
    pools = {r.hash: rec.decode_pool(r.data) for r in al.iter_records(path)
             if isinstance(r, rec.Blob) and r.kind == "pool"}
    (sel,) = [r for r in al.iter_records(path) if isinstance(r, rec.Selection)]
    assert pools[sel.pool] == al.read(path).candidates(sel)


def test_a_pool_that_is_not_a_list_of_ids_is_a_format_error() -> None:
    import msgspec

    with pytest.raises(al.TraceFormatError, match=r"list of candidate ids .* holds a float"):
        rec.decode_pool(msgspec.msgpack.encode(["a", 1.5]))
    with pytest.raises(al.TraceFormatError, match="it does not decode"):
        rec.decode_pool(b"\xc1")


def test_a_missing_pool_blob_names_the_hash(trace: al.Trace, tmp_path: Path) -> None:
    path = tmp_path / "nopool.zst"
    with TraceWriter(path) as w:
        for r in trace.records:
            if not (isinstance(r, rec.Blob) and r.kind == "pool"):
                w.put(r)
    cut = al.read(path)
    (sel,) = cut.selections()
    with pytest.raises(rec.BlobNotFoundError, match=f"no Blob with hash {sel.pool.hex()}"):
        cut.chosen(sel)
