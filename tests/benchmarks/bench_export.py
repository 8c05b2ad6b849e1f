"""Export throughput, memory and live-span overhead, against references measured in the same run.

Run: ``python tests/benchmarks/bench_export.py [--phoenix] [--runs 1000,10000,100000]``
(prints; exits non-zero when a hostile file misses its target).

* Export: spans/s of ``to_spans`` into the SDK's ``InMemorySpanExporter``, the reference
  being the same number of spans built with the SDK's own tracer (start/end with
  attributes); with ``--phoenix`` also ``to_otlp`` to a Phoenix on loopback (started from
  ``.venv-phoenix``, stopped at the end).
* Scaling: traces of 1k, 10k and 100k runs (two windows, a tool call and a score each),
  each exported in a fresh child process to an OTLP/JSON file (``to_otlp_json``) and to an
  OTLP/HTTP sink on loopback (``to_otlp``, a server that reads each request and answers
  200); the child reports the export's time and its own peak RSS (imports excluded: it
  first exports a one-run trace, then resets its peak). Target: peak RSS independent of
  the number of runs.
* Hostile files: ``bench_hostile_files.py``'s files, and two of export's own (a file of
  records outside any run, as dense as the reader allows; 20,000 one-run frames, whose
  runs end or never do), through ``agentlog export --format otlp-json``, each in a fresh
  child process. Target: within 2 s and 256 MB, or, for the many-run files, peak RSS
  within 32 MB of a one-run trace's (their time is their 20,000 spans').
* Live overhead: a run (record() open/close), a window and a tool call with an SDK
  provider, each interleaved with a raw SDK span carrying the same attributes.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).parent))
import msgspec
from _rss import run_child
from _tempdir import bench_dir
from _timing import interleaved, per_call_us, row
from bench_hostile_files import FILES, frame

import agentlog as al
from agentlog._spans import tracer as _otel
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


def _record_runs(path: str, runs: int) -> None:
    """``runs`` runs of two windows (a tool call and a score each) in one file."""
    for r in range(runs):
        with al.record(path, system="bench", seed=r):
            for i in range(2):
                work(f"q{i}", 1)
    al.flush()  # the file complete and closed before a child reads it


EXPORT_CHILD = """
import sys, time
from agentlog.export import to_otlp, to_otlp_json
how, warmup, path, target = sys.argv[1:]
def export(p):
    if how == "json":
        return to_otlp_json([p], target)
    return to_otlp([p], endpoint=target, batch=512, retries=0)
export(warmup)  # imports and the exporter's first use, outside the measure
_reset_peak()
t0 = time.perf_counter()
result = export(path)
print(result.spans_sent, result.spans_failed, time.perf_counter() - t0, _peak_kb())
"""


@contextlib.contextmanager
def _otlp_sink() -> Iterator[str]:
    """An OTLP/HTTP endpoint on loopback that reads every request and answers 200."""

    class Sink(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # the http.server hook
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _scaling(folder: str, sizes: list[int]) -> list[str]:
    warmup = os.path.join(folder, "warmup.zst")
    _record_runs(warmup, 1)
    lines = [f"{'export (fresh child; imports excluded)':<44} {'runs':>8} {'spans':>9} "
             f"{'time':>8} {'spans/s':>9} {'peak RSS':>9}"]
    with _otlp_sink() as url:
        for runs in sizes:
            path = os.path.join(folder, f"runs-{runs}.zst")
            _record_runs(path, runs)
            for how, target, label in (
                ("json", os.path.join(folder, "spans.json"), "to_otlp_json -> file"),
                ("otlp", url, "to_otlp -> OTLP/HTTP sink on loopback"),
            ):
                sent, failed, took, peak_kb = run_child(EXPORT_CHILD, how, warmup, path,
                                                        target)
                note = f"  ({failed} failed)" if int(failed) else ""
                lines.append(f"{label:<44} {runs:>8,} {int(sent):>9,} {float(took):7.2f}s "
                             f"{int(sent) / float(took):>9,.0f} {int(peak_kb) / 1024:7.1f} MB"
                             f"{note}")
            os.remove(path)
    return lines


HOSTILE_CHILD = """
import contextlib, io, sys, time
from agentlog.cli import app
warmup, path, out = sys.argv[1:]
def run(argv):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            app(argv)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else 1
    return 0
run(["export", warmup, "--format", "otlp-json", "--out", out])  # imports, outside the measure
_reset_peak()
t0 = time.perf_counter()
code = run(["export", path, "--format", "otlp-json", "--out", out])
print(code, time.perf_counter() - t0, _peak_kb())
"""
HOSTILE_TIME_S = 2.0
HOSTILE_RSS_MB = 256.0


def _dense_orphans(n: int) -> bytes:
    """``n`` scores of a run whose start is nowhere, about as dense as the reader accepts
    (one record per compressed byte): frames of 200,000 records, each with 16 random
    bits so that they do not compress further."""
    rng = random.Random(1)
    out = []
    for first in range(0, n, 200_000):
        k = min(200_000, n - first)
        content = b"\xdd" + k.to_bytes(4, "big") + b"".join(
            msgspec.msgpack.encode([8, 3, 0, "f1", rng.getrandbits(16) / 65536])
            for _ in range(k))
        out.append(frame(content, k, level=19))
    return b"".join(out)


def _one_run_frames(n: int, *, ended: bool = True) -> bytes:
    """``n`` frames of one run each (a start, and an end if ``ended``): ``n`` runs of one
    span, all open at once when they never end."""
    out = []
    for i in range(n):
        records = [[1, i, f"{i:032x}", "s", 0, None, {}, i, "splitmix64-gumbel/1", "0"]]
        if ended:
            records.append([10, i, i + 1, 0, b"", 0, 0, 0])
        out.append(frame(bytes([0x90 + len(records)]) + b"".join(
            msgspec.msgpack.encode(r) for r in records), len(records), level=19))
    return b"".join(out)


def _hostile(folder: str) -> tuple[list[str], bool]:
    from agentlog._trace_format import FILE_HEADER

    files = dict(FILES)
    files["800,000 records outside any run, 1 per byte"] = lambda: _dense_orphans(800_000)
    many = ("20,000 frames of one run each", "20,000 frames of a run that never ends")
    files[many[0]] = lambda: _one_run_frames(20_000)
    files[many[1]] = lambda: _one_run_frames(20_000, ended=False)
    warmup = Path(folder) / "warmup.zst"
    warmup.write_bytes(FILE_HEADER + frame(b"\x91" + msgspec.msgpack.encode(
        [1, 0, "0" * 32, "s", 0, None, {}, 0, "splitmix64-gumbel/1", "0"]), 1))
    out = os.path.join(folder, "hostile.json")
    _, _, small_kb = run_child(HOSTILE_CHILD, str(warmup), str(warmup), out)
    lines = [f"{'agentlog export --format otlp-json':<52} {'size':>10}  exit  {'time':>7}  "
             f"{'peak RSS':>9}"]
    ok = True
    for i, (label, build) in enumerate(files.items()):
        p = Path(folder) / f"h{i}.zst"
        p.write_bytes(FILE_HEADER + build())
        code, took, peak_kb = run_child(HOSTILE_CHILD, str(warmup), str(p), out)
        rss = int(peak_kb) / 1024
        if label in many:  # their time is their 20,000 spans'; their memory a small trace's
            fine = rss <= int(small_kb) / 1024 + 32
        else:
            fine = float(took) <= HOSTILE_TIME_S and rss <= HOSTILE_RSS_MB
        ok &= fine and int(code) in (0, 1, 2)
        lines.append(f"{label:<52} {p.stat().st_size:>10,}  {int(code):>4}  "
                     f"{float(took):6.2f}s  {rss:7.1f} MB  {'ok' if fine else 'MISSED'}")
        p.unlink()
    lines.append(f"target: within {HOSTILE_TIME_S:g} s and {HOSTILE_RSS_MB:g} MB (the "
                 f"many-run files: within 32 MB of a one-run trace's "
                 f"{int(small_kb) / 1024:.1f} MB); " + ("all ok" if ok else "missed"))
    return lines, ok


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


def main() -> int:
    sizes = [1_000, 10_000, 100_000]
    if "--runs" in sys.argv:
        sizes = [int(n) for n in sys.argv[sys.argv.index("--runs") + 1].split(",")]
    with bench_dir("agentlog-bench-export-") as folder:
        for text in _export_rates(folder):
            print(text)
        if "--phoenix" in sys.argv:
            print(_phoenix_rate(folder))
        for text in _scaling(folder, sizes):
            print(text)
        lines, ok = _hostile(folder)
        for text in lines:
            print(text)
        for text in _live_overhead(folder):
            print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
