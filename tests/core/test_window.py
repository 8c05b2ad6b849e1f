"""Windows: sealed entries and exits, receipts, continuity, sealing, failures, resources."""

from __future__ import annotations

import asyncio
import gc
import hashlib
from pathlib import Path
from typing import Annotated, Any

import pytest

import agentlog as al
from agentlog._encoding import encode
from agentlog._state import receipt_genesis, receipt_next
from agentlog.records import EXIT_CLOSED, EXIT_FAILED, EXIT_OK, ToolCall, WindowEnter, WindowExit
from tests.conftest import of_type


def sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


@al.window("retrieval")
def retrieve(question: str, budget: int = 2) -> list[str]:
    return [f"{question}-{i}" for i in range(budget)]


@al.window("synthesis", after="retrieval")
def synthesize(docs: list[str]) -> str:
    return " + ".join(docs)


def test_without_a_recorder_a_window_is_just_the_call() -> None:
    assert retrieve("q") == ["q-0", "q-1"]
    assert al.current_run() is None and al.current_window() is None


def test_entry_and_exit_are_sealed_with_sha256_of_their_canonical_encoding(
    trace_path: Path,
) -> None:
    with al.record(trace_path, system="s", seed=1, task="t"):
        retrieve("q")
    trace = al.read(trace_path)
    (enter,) = of_type(trace, WindowEnter)
    (exit_,) = of_type(trace, WindowExit)
    assert enter.entry == encode({"question": "q", "budget": 2})
    assert enter.entry_hash == sha(enter.entry)
    assert exit_.exit == encode(["q-0", "q-1"]) and exit_.exit_hash == sha(exit_.exit)
    assert exit_.status == EXIT_OK and exit_.wall_ns > 0


def test_receipt_chain_links_every_exit_and_ends_in_the_run_footer(trace_path: Path) -> None:
    with al.record(trace_path, seed=1) as run:
        synthesize(retrieve("q"))
        synthesize(retrieve("r", 3))
    trace = al.read(trace_path)
    enters = {e.window: e for e in of_type(trace, WindowEnter)}
    receipt = receipt_genesis(run.run_id)
    for ex in of_type(trace, WindowExit):
        receipt = receipt_next(receipt, ex.name, enters[ex.window].entry_hash, ex.exit_hash)
        assert ex.receipt == receipt
    assert trace.records[-1].receipt == receipt
    assert al.verify(trace_path).ok


def test_after_holds_when_the_entry_is_the_predecessors_exit(trace_path: Path) -> None:
    with al.record(trace_path, seed=1):
        synthesize(retrieve("q"))
    enter = next(e for e in of_type(al.read(trace_path), WindowEnter) if e.name == "synthesis")
    assert enter.link_hash == enter.expected_hash is not None
    assert al.verify(trace_path).ok


def test_a_bypass_of_the_declared_predecessor_is_recorded_and_reported(
    trace_path: Path,
) -> None:
    with al.record(trace_path, seed=1):
        retrieve("q")
        synthesize(["forged"])  # does not consume retrieval's exit
        pass
    report = al.verify(trace_path)
    assert [p.kind for p in report.problems] == ["bypass"]
    assert "differs from the exit" in report.problems[0].message


def test_a_missing_predecessor_is_a_bypass(trace_path: Path) -> None:
    with al.record(trace_path, seed=1):
        synthesize(["x"])
    assert [p.kind for p in al.verify(trace_path).problems] == ["bypass"]


def test_entry_projection_is_sealed_and_arguments_are_kept_for_replay(
    trace_path: Path,
) -> None:
    class Bundle:
        def __init__(self, ids: list[str]) -> None:
            self.ids = ids

    @al.window("synth2", entry=lambda bundle: bundle.ids, after="retrieval")
    def synth2(bundle: Bundle) -> int:
        return len(bundle.ids)

    with al.record(trace_path, seed=1):
        synth2(Bundle(retrieve("q")))
    trace = al.read(trace_path)
    enter = next(e for e in of_type(trace, WindowEnter) if e.name == "synth2")
    assert enter.entry == encode(["q-0", "q-1"])
    assert enter.args_hash is None  # a Bundle has no canonical encoding: nothing to re-invoke
    assert al.verify(trace_path).ok


def test_entry_decodes_back_into_arguments_that_reinvoke_the_window(trace_path: Path) -> None:
    with al.record(trace_path, seed=1):
        first = retrieve("q", 3)
    enter = of_type(al.read(trace_path), WindowEnter)[0]
    args, kwargs = al.decode_arguments(retrieve, enter.entry)
    assert retrieve(*args, **kwargs) == first


def test_an_exception_is_a_declared_failure_exit_and_is_reraised_untouched(
    trace_path: Path,
) -> None:
    boom = KeyError("missing doc")

    @al.window("fragile")
    def fragile() -> None:
        raise boom

    with al.record(trace_path, seed=1), pytest.raises(KeyError) as info:
        fragile()
    assert info.value is boom
    (ex,) = of_type(al.read(trace_path), WindowExit)
    assert ex.status == EXIT_FAILED and ex.error_type == "KeyError"
    assert ex.error_message == "'missing doc'"
    assert ex.exit_hash == sha(encode({"⊥": "KeyError"}))


def test_nested_windows_record_their_parent_and_inclusive_resources(trace_path: Path) -> None:
    @al.tool("search")
    def search(q: str) -> list[str]:
        return [q]

    @al.window("inner")
    def inner() -> None:
        search("a")
        search("b")

    @al.window("outer")
    def outer() -> None:
        search("c")
        inner()

    with al.record(trace_path, seed=1):
        outer()
    trace = al.read(trace_path)
    enters = {e.name: e for e in of_type(trace, WindowEnter)}
    exits = {e.name: e for e in of_type(trace, WindowExit)}
    assert enters["inner"].parent == enters["outer"].window and enters["outer"].parent == -1
    assert exits["inner"].tool_calls == 2 and exits["outer"].tool_calls == 3
    assert len(of_type(trace, ToolCall)) == 3


def test_a_forbidden_tool_raises_inside_the_sealed_window_and_its_children(
    trace_path: Path,
) -> None:
    @al.tool("search")
    def search(q: str) -> str:
        return q

    @al.window("child")
    def child() -> str:
        return search("x")

    @al.window("sealed", forbid=("search",))
    def sealed() -> str:
        return child()

    with al.record(trace_path, seed=1):
        with pytest.raises(al.SealedWindowError, match="tool 'search' was called inside window "
                           "'child', which is sealed against it"):
            sealed()
        assert search("free") == "free"
    calls = of_type(al.read(trace_path), ToolCall)
    assert [c.status for c in calls] == [2, 0]


def test_async_windows_record_and_keep_their_own_context(trace_path: Path) -> None:
    @al.window("fetch")
    async def fetch(i: int) -> int:
        await asyncio.sleep(0)
        assert al.current_window() is not None and al.current_window().name == "fetch"
        return i * 2

    async def main() -> list[int]:
        return list(await asyncio.gather(*(fetch(i) for i in range(5))))

    with al.record(trace_path, seed=1):
        assert asyncio.run(main()) == [0, 2, 4, 6, 8]
    exits = of_type(al.read(trace_path), WindowExit)
    assert sorted(e.exit for e in exits) == sorted(encode(i * 2) for i in range(5))


def test_generator_window_stays_open_across_yields_without_leaking_context(
    trace_path: Path,
) -> None:
    seen: list[Any] = []

    @al.window("stream")
    def stream(n: int):  # type: ignore[no-untyped-def]
        for i in range(n):
            seen.append(al.current_window().name)  # type: ignore[union-attr]
            yield i
        return "done"

    with al.record(trace_path, seed=1):
        gen = stream(3)
        assert next(gen) == 0
        assert al.current_window() is None  # the caller's context is untouched
        assert list(gen) == [1, 2]
    assert seen == ["stream"] * 3
    (ex,) = of_type(al.read(trace_path), WindowExit)
    assert ex.status == EXIT_OK and ex.exit == encode({"yields": [0, 1, 2], "return": "done"})


def test_generator_window_closes_on_close_and_on_garbage_collection(trace_path: Path) -> None:
    @al.window("stream")
    def stream():  # type: ignore[no-untyped-def]
        yield from range(10)

    with al.record(trace_path, seed=1):
        g = stream()
        next(g)
        g.close()
        g2 = stream()
        next(g2)
        next(g2)
        del g2
        gc.collect()
    exits = of_type(al.read(trace_path), WindowExit)
    assert [e.status for e in exits] == [EXIT_CLOSED, EXIT_CLOSED]
    assert exits[1].exit == encode({"yields": [0, 1], "closed": True})


def test_generator_window_records_an_exception_thrown_in(trace_path: Path) -> None:
    @al.window("stream")
    def stream():  # type: ignore[no-untyped-def]
        yield 1
        yield 2

    with al.record(trace_path, seed=1):
        g = stream()
        next(g)
        with pytest.raises(ValueError, match="stop"):
            g.throw(ValueError("stop"))
    (ex,) = of_type(al.read(trace_path), WindowExit)
    assert ex.status == EXIT_FAILED and ex.error_type == "ValueError"


def test_async_generator_window_records_its_yields(trace_path: Path) -> None:
    @al.window("astream")
    async def astream(n: int):  # type: ignore[no-untyped-def]
        for i in range(n):
            await asyncio.sleep(0)
            yield i

    async def main() -> list[int]:
        return [i async for i in astream(3)]

    with al.record(trace_path, seed=1):
        assert asyncio.run(main()) == [0, 1, 2]
    (ex,) = of_type(al.read(trace_path), WindowExit)
    assert ex.exit == encode({"yields": [0, 1, 2], "return": None})


def test_unsealable_arguments_fail_before_the_call_naming_the_argument_when_strict(
    trace_path: Path,
) -> None:
    called = []

    @al.window("w")
    def w(conn: object) -> None:
        called.append(conn)

    with al.record(trace_path, seed=1, strict=True), pytest.raises(al.ArtifactEncodingError,
                                                      match=r"window 'w', argument `conn`.*entry="):
        w(object())
    assert called == []


def test_large_artifacts_are_stored_once_as_content_addressed_blobs(trace_path: Path) -> None:
    from agentlog.records import Blob

    big = "x" * 10_000

    @al.window("echo")
    def echo(text: str) -> str:
        return text

    with al.record(trace_path, seed=1):
        echo(big)
        echo(big)
    trace = al.read(trace_path)
    blobs = of_type(trace, Blob)
    assert len(blobs) == 2  # entry {"text": big} and exit big, each once
    enters = of_type(trace, WindowEnter)
    assert all(e.entry is None for e in enters)
    assert {b.hash for b in blobs} >= {e.entry_hash for e in enters}
    assert al.verify(trace_path).ok


def test_durability_window_cuts_a_frame_at_every_window_exit(tmp_path: Path) -> None:
    path = tmp_path / "w.zst"
    with al.record(path, seed=1, durability="window"):
        for i in range(5):
            retrieve(str(i))
    assert al.read(path).frames >= 5


def test_last_window_refers_to_the_latest_successful_exit(trace_path: Path) -> None:
    assert al.last_window("retrieval") is None  # no run
    with al.record(trace_path, seed=1):
        assert al.last_window("retrieval") is None
        retrieve("q")
        ref = al.last_window("retrieval")
        al.score("margin", 0.5, channel="direct", transition=ref.id, state_hash=ref.exit_hash)
    (enter,) = of_type(al.read(trace_path), WindowEnter)
    (exit_,) = of_type(al.read(trace_path), WindowExit)
    assert ref == al.WindowRef(enter.window, "retrieval", enter.entry_hash, exit_.exit_hash)
    (score,) = al.read(trace_path).scores()
    assert (score.transition, score.state_hash) == (enter.window, exit_.exit_hash)


def _chain_of(trace: Any, run_id: str) -> list[bytes]:
    """Every receipt of a run, recomputed from its genesis over the exits in file order."""
    enters = {e.window: e for e in of_type(trace, WindowEnter)}
    receipt, out = receipt_genesis(run_id), []
    for ex in of_type(trace, WindowExit):
        receipt = receipt_next(receipt, ex.name, enters[ex.window].entry_hash, ex.exit_hash)
        out.append(receipt)
    return out


def test_threads_sharing_one_run_get_one_chain_in_file_order(trace_path: Path) -> None:
    # The writer thread advances the chain in queue order: no caller-side lock is needed
    # for the file's receipts to chain, however the threads interleave.
    from agentlog.context import copy_context_executor

    @al.window("leaf")
    def leaf(i: int) -> int:
        return i * i

    def work(k: int) -> None:
        for i in range(200):
            leaf(k * 1000 + i)

    with al.record(trace_path, seed=1) as run, copy_context_executor(max_workers=8) as pool:
        list(pool.map(work, range(8)))
    trace = al.read(trace_path)
    exits = of_type(trace, WindowExit)
    assert len(exits) == 1600
    assert [ex.receipt for ex in exits] == _chain_of(trace, run.run_id)
    end = trace.records[-1]
    assert end.receipt == exits[-1].receipt and end.n_windows == 1600
    assert al.verify(trace_path).ok


@al.window("boom")
def boom() -> None:
    raise ValueError("x")


def test_span_hashes_are_the_ones_in_the_file_and_the_writer_alone_chains_receipts(
    trace_path: Path,
) -> None:
    # With spans on, the exits are still put without a receipt and the writer thread
    # chains them (the one place a receipt is computed); a span carries its window's
    # hashes, not its receipt, which is known only once the writer has chained the exit.
    from agentlog.testing import capture_spans

    with capture_spans() as spans, al.record(trace_path, seed=1) as run:
        synthesize(retrieve("q"))
        synthesize(retrieve("r", 3))
        with pytest.raises(ValueError):
            boom()
    trace = al.read(trace_path)
    enters = {e.window: e for e in of_type(trace, WindowEnter)}
    exits = of_type(trace, WindowExit)
    assert [ex.receipt for ex in exits] == _chain_of(trace, run.run_id)
    windows = [s for s in spans.spans if s.name.startswith("agentlog.window.")]
    assert len(windows) == len(exits) == 5
    by_exit = {ex.exit_hash.hex(): ex for ex in exits}
    assert len(by_exit) == 5  # each span names its exit unambiguously
    for span in windows:
        attrs = dict(span.attributes or {})
        assert "agentlog.receipt" not in attrs
        ex = by_exit[attrs["agentlog.exit_hash"]]
        assert span.name == f"agentlog.window.{ex.name}"
        assert attrs["agentlog.window"] == ex.name
        assert attrs["agentlog.entry_hash"] == enters[ex.window].entry_hash.hex()
        assert attrs["agentlog.run_id"] == run.run_id
    assert trace.records[-1].receipt == exits[-1].receipt
    assert al.verify(trace_path).ok


def test_a_writer_leaves_a_receipt_it_cannot_chain_empty_and_verify_reports_it(
    tmp_path: Path,
) -> None:
    # Records of a run whose RunStart the writer never saw cannot be chained: the writer
    # writes them as they are rather than inventing a genesis.
    from agentlog._writer import TraceWriter

    path = tmp_path / "orphan.zst"
    w = TraceWriter(path)
    h = sha(b"e")
    w.put(WindowEnter(0, 0, "w", -1, 1, h, b"e", None, None, None, None, 0))
    w.put(WindowExit(0, 0, "w", 2, EXIT_OK, h, b"e", b"", 1))
    w.close()
    (ex,) = of_type(al.read(path), WindowExit)
    assert ex.receipt == b""
    report = al.verify(path)
    assert {p.kind for p in report.problems} == {"orphan-record", "no-runs"}


def test_verify_reports_a_run_end_whose_counts_differ_from_the_records(tmp_path: Path) -> None:
    from agentlog._noise import GENERATOR_ID
    from agentlog._writer import TraceWriter
    from agentlog.records import RunEnd, RunStart

    path = tmp_path / "counts.zst"
    w = TraceWriter(path)
    w.put(RunStart(0, "r0", "s", 1, None, {}, 1, GENERATOR_ID, "x"))
    h = sha(b"e")
    w.put(WindowEnter(0, 0, "w", -1, 1, h, b"e", None, None, None, None, 0))
    w.put(WindowExit(0, 0, "w", 2, EXIT_OK, h, b"e", b"", 1))
    w.put(RunEnd(0, 3, 0, b"", 0, 0, 0))  # the writer fills the head and the counts
    w.close()
    assert al.verify(path).ok
    end = al.read(path).records[-1]
    assert (end.n_windows, end.n_selections, end.n_continuations) == (1, 0, 0)

    forged = tmp_path / "forged.zst"
    w = TraceWriter(forged)
    for rec in al.read(path).records[:-1]:
        w.put(rec)
    w.put(RunEnd(0, 3, 0, end.receipt, 1, 5, 0))  # a receipt given: written as it is
    w.close()
    report = al.verify(forged)
    # the forged RunEnd also lacks the digest its writer always writes: a failure too
    assert [p.kind for p in report.problems] == ["counts", "digest"]
    assert "(1, 5, 0)" in report.problems[0].message


# ------------------------------------------- newcomer traps: the after= link, bare forms


@al.window("plan")
def plan(question: str) -> list[str]:
    return [question, f"{question} (history)"]


@al.window("retrieve_many", after="plan")
def retrieve_many(queries: list[str], budget: int = 4) -> list[str]:
    return [f"{q}#{i}" for q in queries for i in range(budget)]


def test_a_multi_parameter_window_links_its_first_argument_and_verifies(
    trace_path: Path,
) -> None:
    with al.record(trace_path, seed=1):
        retrieve_many(plan("q"), budget=2)  # budget does not take part in the link
        retrieve_many(plan("r"), 3)
    enters = [e for e in of_type(al.read(trace_path), WindowEnter) if e.after == "plan"]
    assert len(enters) == 2
    assert all(e.link_hash == e.expected_hash is not None for e in enters)
    assert enters[0].link_hash == sha(encode(["q", "q (history)"]))
    assert al.verify(trace_path).ok


def test_a_multi_parameter_window_whose_first_argument_is_not_the_exit_is_a_bypass(
    trace_path: Path,
) -> None:
    with al.record(trace_path, seed=1):
        plan("q")
        retrieve_many(["forged"], budget=2)
    assert [p.kind for p in al.verify(trace_path).problems] == ["bypass"]


def test_a_link_that_could_never_hold_is_refused_at_decoration_with_the_fix() -> None:
    def nothing() -> None:
        pass

    with pytest.raises(TypeError, match=r"takes no argument.*entry=lambda"):
        al.window("w", after="plan")(nothing)

    def login(token: Annotated[str, al.Secret], user: str) -> None:
        pass

    with pytest.raises(TypeError, match=r"first parameter, 'token', which is secret.*"
                       r"entry=lambda token, user:"):
        al.window("w", after="plan")(login)
    al.window("w", after="plan", entry=lambda token, user: user)(login)  # the fix works


def test_help_of_window_states_the_link_rule() -> None:
    doc = al.window.__doc__ or ""
    assert "first parameter" in doc and "list of" in doc and "yields" in doc


def test_the_link_holds_under_a_redact_hook(trace_path: Path) -> None:
    def redact(payload: Any) -> Any:
        return payload  # a hook that rewrites nothing must not break the link

    with al.record(trace_path, seed=1, redact=redact):
        synthesize(retrieve("q"))
        retrieve_many(plan("q"), 2)
    assert al.verify(trace_path).ok


def test_a_generator_predecessor_links_by_the_list_of_its_yields(trace_path: Path) -> None:
    @al.window("gen_plan")
    def gen_plan(question: str):  # type: ignore[no-untyped-def]
        yield question
        yield f"{question}!"
        return "planned"

    @al.window("after_gen", after="gen_plan")
    def after_gen(queries: list[str], budget: int = 1) -> int:
        return len(queries) * budget

    @al.window("agen_plan")
    async def agen_plan(question: str):  # type: ignore[no-untyped-def]
        yield question

    @al.window("after_agen", after="agen_plan")
    def after_agen(queries: list[str]) -> int:
        return len(queries)

    async def consume() -> list[str]:
        return [q async for q in agen_plan("a")]

    with al.record(trace_path, seed=1):
        after_gen(list(gen_plan("q")))
        after_agen(asyncio.run(consume()))
    trace = al.read(trace_path)
    exits = {e.name: e for e in of_type(trace, WindowExit)}
    # the sealed exit keeps the documented shape; only the link reads the yields
    assert exits["gen_plan"].exit == encode({"return": "planned", "yields": ["q", "q!"]})
    assert al.verify(trace_path).ok

    with al.record(trace_path, seed=1):
        after_gen(list(gen_plan("q"))[:1])  # a consumer that drops a yield bypasses
    assert [p.kind for p in al.verify(trace_path).problems] == ["bypass"]


def test_a_generator_predecessor_with_an_exit_projection_links_by_the_projection(
    trace_path: Path,
) -> None:
    @al.window("gen_last", exit=lambda r: r["yields"][-1])
    def gen_last():  # type: ignore[no-untyped-def]
        yield "a"
        yield "b"

    @al.window("takes_last", after="gen_last")
    def takes_last(item: str) -> str:
        return item

    with al.record(trace_path, seed=1):
        takes_last(list(gen_last())[-1])
    assert al.verify(trace_path).ok


def test_bare_tool_and_bare_window_are_named_after_the_function(trace_path: Path) -> None:
    @al.tool
    def lookup(q: str) -> str:
        return q.upper()

    @al.window
    def research(q: str) -> str:
        return lookup(q)

    assert research("x") == "X"  # without a recorder: the plain calls
    with al.record(trace_path, seed=1):
        assert research("q") == "Q"
    trace = al.read(trace_path)
    assert [e.name for e in of_type(trace, WindowEnter)] == ["research"]
    (call,) = of_type(trace, ToolCall)
    assert call.name == "lookup" and call.status == 0
    with pytest.raises(ValueError, match="non-empty str; found ''"):
        al.tool("")


def test_a_plain_thread_pool_inside_a_run_warns_once_and_the_copying_executor_does_not(
    trace_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from agentlog import _state
    from agentlog.context import copy_context_executor

    monkeypatch.setattr(_state, "_thread_warned", False)

    @al.tool("fetch")
    def fetch(i: int) -> int:
        return i

    with al.record(trace_path, seed=1):
        with copy_context_executor(max_workers=2) as pool:
            assert list(pool.map(fetch, range(3))) == [0, 1, 2]  # recorded, no warning
        with ThreadPoolExecutor(max_workers=1) as plain:
            with pytest.warns(al.InstrumentationWarning,
                              match=r"tool 'fetch' ran in thread .*copy_context_executor"):
                assert plain.submit(fetch, 7).result() == 7
            # once per process: further calls (tools or selects) stay silent
            assert plain.submit(fetch, 8).result() == 8
            assert plain.submit(al.select, [1.0], name="doc").result() == 0
    assert len(of_type(al.read(trace_path), ToolCall)) == 3


def test_a_select_in_a_plain_thread_inside_a_run_warns(
    trace_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from agentlog import _state

    monkeypatch.setattr(_state, "_thread_warned", False)
    with (
        al.record(trace_path, seed=1),
        ThreadPoolExecutor(max_workers=1) as plain,
        pytest.warns(al.InstrumentationWarning, match=r"select 'doc' ran in thread"),
    ):
        plain.submit(al.select, [0.5, 0.5], name="doc").result()
    with ThreadPoolExecutor(max_workers=1) as plain:  # no run anywhere: nothing to warn
        monkeypatch.setattr(_state, "_thread_warned", False)
        plain.submit(al.select, [0.5, 0.5], name="doc").result()
