"""``agentlog export``: OTLP JSON files, refused endpoints, truncated traces, bad input."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from agentlog.export import otlp_json, to_otlp, to_spans
from tests.cli._cli import invoke
from tests.export.test_export import _model_run, _refused_port


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    _model_run(folder / "a.zst")
    _model_run(folder / "b.zst")
    return folder


def test_otlp_json_writes_every_span_of_every_trace(traces: Path, tmp_path: Path) -> None:
    out = tmp_path / "spans.json"
    result = invoke("export", traces, "--format", "otlp-json", "--out", out,
                    "--project", "demo")
    assert result.exit_code == 0, result.output
    n = sum(len(list(to_spans(p))) for p in traces.glob("*.zst"))
    document = json.loads(out.read_text())
    spans = [s for rs in document["resourceSpans"] for ss in rs["scopeSpans"]
             for s in ss["spans"]]
    assert len(spans) == n
    assert f"{n} spans sent to {out}, 0 failed" in result.output


def test_a_refused_endpoint_exits_1_with_the_reason_and_no_traceback(traces: Path) -> None:
    url = f"http://127.0.0.1:{_refused_port()}/v1/traces"
    result = invoke("export", traces / "a.zst", "--otlp", url, "--timeout", "1")
    assert result.exit_code == 1, result.output
    assert f"0 spans sent to {url}" in result.output
    assert "cannot connect to" in result.output and "connection refused" in result.output
    assert "check that the backend is running" in result.output
    assert "Traceback" not in result.output


def test_retries_is_deprecated_since_the_exporter_retries_itself(traces: Path) -> None:
    url = f"http://127.0.0.1:{_refused_port()}/v1/traces"
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # as a user's shell shows it
        result = invoke("export", traces / "a.zst", "--otlp", url, "--retries", "2",
                        "--timeout", "1")
    assert result.exit_code == 1, result.output
    assert "warning: --retries is deprecated and does nothing" in result.output
    assert "Traceback" not in result.output


def test_a_truncated_trace_is_exported_and_named(traces: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.zst"
    data = (traces / "a.zst").read_bytes()
    cut.write_bytes(data[: len(data) - 7])
    out = tmp_path / "spans.json"
    result = invoke("export", cut, "--format", "otlp-json", "--out", out)
    assert result.exit_code == 0, result.output
    assert f"{cut}: truncated" in result.output and "exported up to its last record" in (
        result.output)


@pytest.mark.parametrize(("args", "message"), [
    (["--otlp", "127.0.0.1:4318"], "expected an OTLP/HTTP traces endpoint"),
    (["--otlp", "http://127.0.0.1:1/v1/traces", "--header", "novalue"], "expected KEY=VALUE"),
    (["--format", "otlp-json"], "needs --out FILE"),
    ([], "pass --otlp URL"),
])
def test_bad_options_exit_2_with_what_to_do(traces: Path, args: list[str], message: str
                                            ) -> None:
    result = invoke("export", traces, *args)
    assert result.exit_code == 2 and message in result.output, result.output


def test_an_otlp_url_without_the_traces_path_says_so_before_connecting(
        traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: it connected, then said "check that the backend is running"."""
    import socket

    def no_connection(*args: object, **kwargs: object) -> None:
        raise AssertionError("connected before the URL was checked")

    monkeypatch.setattr(socket, "create_connection", no_connection)
    result = invoke("export", traces, "--otlp", "http://127.0.0.1:4318", columns=1000)
    assert result.exit_code == 2, result.output
    assert ("--otlp has no path: the OTLP/HTTP traces endpoint ends in /v1/traces; found "
            "http://127.0.0.1:4318 — try http://127.0.0.1:4318/v1/traces") in result.output
    assert "backend is running" not in result.output


def test_a_missing_trace_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "spans.json"
    result = invoke("export", tmp_path / "nope.zst", "--format", "otlp-json", "--out", out)
    assert result.exit_code == 2 and "no such file" in result.output
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_out_exits_2_and_leaves_no_partial_file(traces: Path, tmp_path: Path
                                                              ) -> None:
    out = tmp_path / "missing-folder" / "spans.json"
    result = invoke("export", traces, "--format", "otlp-json", "--out", out)
    assert result.exit_code == 2 and "cannot be written" in result.output, result.output
    assert not out.parent.exists()


def _attribute_keys(out: Path) -> set[str]:
    document = json.loads(out.read_text())
    return {a["key"] for rs in document["resourceSpans"] for ss in rs["scopeSpans"]
            for s in ss["spans"] for a in s["attributes"]}


CONTENT = {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments",
           "gen_ai.tool.call.result"}


def test_capture_content_puts_the_stored_messages_and_tool_io_on_the_spans(
        traces: Path, tmp_path: Path) -> None:
    plain, full = tmp_path / "plain.json", tmp_path / "full.json"
    assert invoke("export", traces / "a.zst", "--format", "otlp-json", "--out", plain
                  ).exit_code == 0
    result = invoke("export", traces / "a.zst", "--format", "otlp-json", "--out", full,
                    "--capture-content")
    assert result.exit_code == 0, result.output
    assert not CONTENT & _attribute_keys(plain)  # off by default, as live spans
    assert _attribute_keys(full) >= CONTENT
    assert "outsideoutside" in full.read_text()  # the tool call's result, as stored
    assert "outsideoutside" not in plain.read_text()
    expected = otlp_json(list(to_spans(traces / "a.zst", capture_content=True)))
    got = json.loads(full.read_text())
    keys = [sorted(a["key"] for a in s["attributes"]) for rs in got["resourceSpans"]
            for ss in rs["scopeSpans"] for s in ss["spans"]]
    want = [sorted(a["key"] for a in s["attributes"]) for rs in expected["resourceSpans"]
            for ss in rs["scopeSpans"] for s in ss["spans"]]
    assert keys == want


def test_to_otlp_passes_capture_content_to_the_spans(traces: Path) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    for capture in (False, True):
        exporter = InMemorySpanExporter()
        result = to_otlp(traces / "a.zst", endpoint="http://unused.invalid/v1/traces",
                         exporter=exporter, capture_content=capture)
        assert result.spans_failed == 0
        keys = {k for s in exporter.get_finished_spans() for k in (s.attributes or {})}
        assert (keys >= CONTENT) is capture and bool(CONTENT & keys) is capture
