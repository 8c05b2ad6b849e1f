"""Export throughput and live-span overhead, against references measured in the same run.

Run: ``python tests/benchmarks/bench_export.py [--phoenix]`` (prints; asserts nothing).

* Export: spans/s of ``to_spans`` into the SDK's ``InMemorySpanExporter``, the reference
  being the same number of spans built with the SDK's own tracer (start/end with
  attributes); with ``--phoenix`` also ``to_otlp`` to a Phoenix on loopback (started from
  ``.venv-phoenix``, stopped at the end).
* Live overhead: a run (record() open/close), a window and a tool call with an SDK
  provider, each interleaved with a raw SDK span carrying the same attributes.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _tempdir import bench_dir
from _timing import interleaved, per_call_us, row

import agentlog as al
from agentlog import _otel
from agentlog.export import to_otlp, to_spans


@al.tool("lookup")
def lookup(q: str) -> str:
    return q


@al.window("work")
def work(q: str, tools: int) -> str:
    for _ in range(tools):
        lookup(q)
    al.score("f1", 0.5)
    return q


def _record(path: str, windows: int, tools: int) -> None:
    with al.record(path, system="bench", seed=1):
        for i in range(windows):
            work(f"q{i}", tools)


def _export_rates(folder: str) -> list[str]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    path = os.path.join(folder, "t.zst")
    _record(path, windows=2000, tools=2)
    trace = al.read(path)
    n = len(list(to_spans(trace)))
    sink = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(sink))
    tracer = provider.get_tracer("bench")
    attrs = {"agentlog.window": "work", "agentlog.run_id": "0" * 32,
             "agentlog.entry_hash": "a" * 64, "agentlog.exit_hash": "b" * 64,
             "agentlog.receipt": "c" * 64}

    def via_sdk() -> None:
        for _ in range(n):
            tracer.start_span("raw", attributes=attrs).end()
        sink.clear()

    def via_export() -> None:
        sink.export(list(to_spans(trace)))
        sink.clear()

    ref, own = interleaved(via_sdk, via_export, number=1, repeat=5)
    provider.shutdown()
    return [
        f"{n} spans per export ({2000} windows, 2 tools each, a score each)",
        f"{'SDK tracer, same count, 5 attributes (reference)':<58} "
        f"{n / ref[0] * 1e6:12,.0f} spans/s (best)",
        f"{'to_spans -> InMemorySpanExporter':<58} {n / own[0] * 1e6:12,.0f} spans/s (best)"
        f"   {own[0] / ref[0]:.2f}× the reference's time",
    ]


def _phoenix_rate(folder: str) -> str:
    venv = Path(os.environ.get("AGENTLOG_PHOENIX_VENV",
                               Path(__file__).resolve().parents[2] / ".venv-phoenix"))
    if not (venv / "bin" / "phoenix").exists():
        return f"Phoenix: not installed at {venv} (tests/export/setup_phoenix.sh)"
    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    work_dir = os.path.join(folder, "phoenix")  # removed with the benchmark's folder
    os.mkdir(work_dir)
    env = {**os.environ, "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(ports[0]),
           "PHOENIX_GRPC_PORT": str(ports[1]), "PHOENIX_WORKING_DIR": work_dir}
    proc = subprocess.Popen([str(venv / "bin" / "phoenix"), "serve"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{ports[0]}"
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 180:
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=2):
                    break
            except OSError:
                time.sleep(0.5)
        started = time.monotonic() - t0
        path = os.path.join(folder, "p.zst")
        _record(path, windows=1000, tools=2)
        t1 = time.perf_counter()
        result = to_otlp([path], endpoint=f"{base}/v1/traces", batch=512)
        took = time.perf_counter() - t1
        return (f"{'to_otlp -> Phoenix on loopback (batch 512)':<58} "
                f"{result.spans_sent / took:12,.0f} spans/s   ({result.spans_sent} sent, "
                f"{result.spans_failed} failed; Phoenix healthy after {started:.0f} s)")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def _live_overhead(folder: str) -> list[str]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Sink(SpanExporter):
        def export(self, spans):  # type: ignore[no-untyped-def]
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Sink(), max_queue_size=1 << 16))
    tracer = provider.get_tracer("bench")
    run_attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "bench",
                 "gen_ai.conversation.id": "0" * 32, "agentlog.run_id": "0" * 32,
                 "agentlog.seed": 1}
    tool_attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                  "agentlog.run_id": "0" * 32, "agentlog.args_hash": "a" * 64,
                  "agentlog.result_hash": "b" * 64}

    def raw(attrs: dict[str, object]) -> None:
        with tracer.start_as_current_span("raw") as span:
            span.set_attributes(attrs)

    lines = []
    previous = _otel.set_provider_override(provider)
    try:
        path = os.path.join(folder, "live.zst")
        # A run: record() open and close, nested in an open run so that the file's writer
        # stays shared (the writer's start and stop are not the run span's cost).
        outer = al.record(path, seed=1)
        outer.__enter__()

        def one_run() -> None:
            with al.record(path, system="bench", seed=2):
                pass

        def run_with(provider_: object) -> None:
            token = _otel._override.set(provider_)  # read once, when record() opens
            one_run()
            _otel._override.reset(token)

        off, on = interleaved(lambda: run_with(None), lambda: run_with(provider),
                              number=2_000, repeat=7, before=al.flush)
        ref = per_call_us(lambda: raw(run_attrs), number=2_000)
        lines.append(row("record() open+close, no SDK (reference)", off))
        lines.append(row("record() open+close, SDK on (+ run span)", on, off, "no SDK"))
        lines.append(f"{'':<58} the run span costs {on[0] - off[0]:.2f} µs (min); a raw SDK "
                     f"span with 5 attributes {ref[0]:.2f} µs")

        def tool_call() -> None:
            lookup("q")

        @al.window("host")
        def host(q: str) -> None:
            run = al.current_run()
            assert run is not None
            tracer = run.tracer

            def tool_off() -> None:
                run.tracer = None  # this run's tool calls make no span while it is None
                lookup("q")
                run.tracer = tracer

            off_t, on_t = interleaved(tool_off, tool_call, number=5_000, repeat=7,
                                      before=al.flush)
            ref_t = per_call_us(lambda: raw(tool_attrs), number=5_000)
            lines.append(row("@tool call in a window, no tool span (reference)", off_t))
            lines.append(row("@tool call in a window, SDK on (+ tool span)", on_t, off_t,
                             "no span"))
            lines.append(f"{'':<58} the tool span costs {on_t[0] - off_t[0]:.2f} µs (min); "
                         f"a raw SDK span with 5 attributes {ref_t[0]:.2f} µs")

        host("q")
        outer.__exit__(None, None, None)
    finally:
        _otel.set_provider_override(previous)
        provider.shutdown()
    lines.append("window spans: see bench_recording.py (same builder, same attributes)")
    return lines


def main() -> None:
    with bench_dir("agentlog-bench-export-") as folder:
        for text in _export_rates(folder):
            print(text)
        if "--phoenix" in sys.argv:
            print(_phoenix_rate(folder))
        for text in _live_overhead(folder):
            print(text)


if __name__ == "__main__":
    main()
