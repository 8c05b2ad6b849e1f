"""Live and exported spans have the same parents: the rule is agentlog's own structure.

A window's span is the child of its enclosing window's span, else of its run's span; a
nested run's span is the child of the window it was opened in (else of the enclosing
run's span) and joins the outermost run's trace, whichever file each run is stored in.
"""

from __future__ import annotations

import contextvars
import threading
from pathlib import Path
from typing import Any

from opentelemetry import context as otel_context

import agentlog as al
from agentlog.export import to_spans
from agentlog.testing import capture_spans
from tests.export._spans import signatures


@al.tool("fetch")
def fetch(x: str) -> str:
    return x + "!"


@al.window("leaf")
def leaf(x: str) -> str:
    return fetch(x)


def _by_name(spans: list[Any], name: str) -> Any:
    (span,) = [s for s in spans if s.name == name]
    return span


def test_a_window_in_a_thread_without_the_otel_context_is_a_child_of_its_run(
        tmp_path: Path) -> None:
    """Before: the span started in the thread's (empty) context became a root of a new
    trace, while the export made it the run span's child."""
    path = tmp_path / "t.zst"

    def worker() -> None:
        token = otel_context.attach(otel_context.Context())  # the run, but no OTel context
        try:
            leaf("in-thread")
        finally:
            otel_context.detach(token)

    with capture_spans() as captured, al.record(path, system="threads", seed=1):
        thread = threading.Thread(target=contextvars.copy_context().run, args=(worker,))
        thread.start()
        thread.join()
    live = captured.spans
    exported = list(to_spans(path))
    assert signatures(live) == signatures(exported)
    root = _by_name(live, "invoke_agent threads")
    window = _by_name(live, "agentlog.window.leaf")
    assert window.parent is not None and window.parent.span_id == root.context.span_id
    assert {s.context.trace_id for s in live} == {root.context.trace_id}


def test_a_users_span_current_inside_a_run_does_not_change_a_windows_parent(
        tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with capture_spans() as captured, al.record(path, system="mine", seed=1):
        from agentlog._spans import tracer as _otel

        tracer = _otel.tracer()
        assert tracer is not None
        with tracer.start_as_current_span("user-span"):
            leaf("x")
    live = [s for s in captured.spans if s.name != "user-span"]
    assert signatures(live) == signatures(to_spans(path))


@al.window("delegate")
def delegate(folder: str, x: str) -> str:
    with al.record(Path(folder) / "inner.zst", system="helper", seed=2):
        leaf(x)
        return leaf(x + "?")


def test_nested_runs_in_separate_files_export_into_one_tree_like_the_live_one(
        tmp_path: Path) -> None:
    """Before: the inner file exported as a trace of its own, without a parent."""
    outer = tmp_path / "outer.zst"
    with capture_spans() as captured, al.record(outer, system="boss", seed=1):
        leaf("a")
        delegate(str(tmp_path), "b")
        with al.record(tmp_path / "side.zst", system="side", seed=3):  # outside any window
            leaf("c")
    live = captured.spans
    exported = [*to_spans(outer), *to_spans(tmp_path / "inner.zst"),
                *to_spans(tmp_path / "side.zst")]
    assert len(live) == len(exported)
    assert signatures(live) == signatures(exported)
    assert len({s.context.trace_id for s in exported}) == 1
    # The same spans, ids included: exporting the three files after tracing live adds none.
    assert sorted((s.context.trace_id, s.context.span_id) for s in live) == sorted(
        (s.context.trace_id, s.context.span_id) for s in exported)
    helper = _by_name(exported, "invoke_agent helper")
    task = _by_name(exported, "agentlog.window.delegate")
    assert helper.parent.span_id == task.context.span_id
    side = _by_name(exported, "invoke_agent side")
    assert side.parent.span_id == _by_name(exported, "invoke_agent boss").context.span_id
    # The inner file alone still names its parent (and exporting it twice, the same ids).
    alone = list(to_spans(tmp_path / "inner.zst"))
    assert [s.parent.span_id for s in alone if s.name == "invoke_agent helper"] == [
        task.context.span_id]
