"""A real tracing backend: the demo's traces exported to Phoenix and read back.

The server is the session fixture ``phoenix`` (``tests/_phoenix.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentlog.export import to_spans
from tests._phoenix import read_back
from tests.cli._cli import invoke

# Starts a Phoenix server.
pytestmark = pytest.mark.slow


def test_the_demo_traces_read_back_from_phoenix_as_exported_once(
    phoenix: str, tmp_path: Path
) -> None:
    from agentlog.examples.deep_research import run_study, task_ids

    paths = run_study(tmp_path / "runs", tasks=task_ids(2), seeds=range(1), budget=2,
                      n_candidates=8)
    url = f"{phoenix}/v1/traces"
    for _ in range(2):  # twice: deterministic ids, so Phoenix keeps one copy
        result = invoke("export", tmp_path / "runs", "--otlp", url, "--project", "agentlog-t",
                        "--batch", "7")
        assert result.exit_code == 0, result.output
    project = {"openinference.project.name": "agentlog-t"}  # what --project sets
    expected = {format(s.context.span_id, "016x"): s for p in paths
                for s in to_spans(p, resource_attributes=project)}
    got = read_back(phoenix, "agentlog-t", len(expected))
    assert len(got) == len(expected)  # no duplicate from the second export
    assert {g["span_id"] for g in got} == set(expected)
    for g in got:
        span = expected[g["span_id"]]
        assert g["name"] == span.name
        assert g["trace_id"] == format(span.context.trace_id, "032x")
        assert g["parent_id"] == (None if span.parent is None
                                  else format(span.parent.span_id, "016x"))
        # Phoenix stores microseconds (rounded): the original times to within 1 µs.
        assert abs(g["start_us"] - span.start_time / 1000) <= 1  # type: ignore[operator]
        assert abs(g["end_us"] - span.end_time / 1000) <= 1  # type: ignore[operator]
        assert g["events"] == [e.name for e in span.events]
        attrs = dict(span.attributes or {})
        if span.name.startswith("agentlog.window."):
            assert g["agentlog"]["receipt"] == attrs["agentlog.receipt"]
        # Phoenix re-files some gen_ai.* keys under its own names; agentlog.* come back as is.
        assert g["agentlog"]["run_id"] == attrs["agentlog.run_id"]
    names = {g["name"] for g in got}
    assert {"invoke_agent deep-research", "agentlog.window.retrieval",
            "execute_tool open_document"} <= names
    # Re-exported with content: spans of their own, which Phoenix keeps (before, it kept
    # none of them while the CLI said they were sent).
    result = invoke("export", tmp_path / "runs", "--otlp", url, "--project", "agentlog-t",
                    "--capture-content")
    assert result.exit_code == 0, result.output
    assert len(read_back(phoenix, "agentlog-t", 2 * len(expected))) == 2 * len(expected)
