"""``agentlog export``: OTLP JSON files, refused endpoints, truncated traces, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentlog.export import to_spans
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
    result = invoke("export", traces / "a.zst", "--otlp", url, "--retries", "0",
                    "--timeout", "1")
    assert result.exit_code == 1, result.output
    assert f"0 spans sent to {url}" in result.output
    assert "not accepted by" in result.output and "check that the backend is running" in (
        result.output)
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
