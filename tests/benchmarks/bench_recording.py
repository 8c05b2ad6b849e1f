"""Hot paths of the recording core, against references measured in the same run.

Run: ``python tests/benchmarks/bench_recording.py`` (prints a table; asserts nothing).

References: a bare call, a no-op decorator (``functools.wraps`` pass-through), and a raw
OpenTelemetry SDK span with a ``BatchSpanProcessor`` (exporting to an in-memory sink).
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _tempdir import bench_dir
from _timing import interleaved, per_call_us, row

import agentlog as al
from agentlog._spans import tracer as _otel


def noop_decorator(fn):  # type: ignore[no-untyped-def]
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        return fn(*args, **kwargs)

    return wrapper


def bare(q, k=3):  # type: ignore[no-untyped-def]
    return k


noop = noop_decorator(bare)
windowed = al.window("bench")(bare)


def main() -> None:
    with bench_dir("agentlog-bench-recording-") as folder:  # the traces add up to ~330 MB
        if "--run-close-only" in sys.argv:
            run_open_close(folder)
            return
        measure(folder)
        run_open_close(folder)


def run_open_close(folder: str) -> None:
    """An empty ``with al.record(path): pass``, the caller's cost, per durability mode.

    One run per batch, the two modes' batches alternating. ``"window"`` closes the run by
    waiting until the file is written and closed: the reference for a close that only
    enqueues (the target for the default ``"frame"``, ≤ 50 µs). ``"frame"`` is measured
    twice: as the first run of a file (``al.flush()`` before each batch closes the file,
    so the run opens it) and as the next run of a file whose writer was kept open
    (``al.settle`` before each batch writes the previous run outside the clock).
    """
    counter = iter(range(10**9))
    frame_path = os.path.join(folder, "rc-frame.zst")

    def opened(durability: str) -> None:
        path = os.path.join(folder, f"rc-{durability}.zst")
        with al.record(path, seed=next(counter), mode="a", durability=durability):  # type: ignore[arg-type]
            pass

    def drain() -> None:
        al.flush(timeout=10)

    def settle() -> None:
        al.settle(frame_path)

    waiting, first = interleaved(lambda: opened("window"), lambda: opened("frame"), number=1,
                                 repeat=301, before=drain)
    waiting2, kept = interleaved(lambda: opened("window"), lambda: opened("frame"), number=1,
                                 repeat=301, before=settle)
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(row("run open+close, durability='window' (waits: reference)", waiting))
    print(row("run open+close, 'frame', first run of the file", first, waiting, "waiting"))
    print(row("run open+close, 'frame', next run (writer kept open)", kept, waiting2,
              "waiting"))
    # Back to back on one file, nothing drained between: the writer's work on the queued
    # runs (another thread) shares the GIL with the caller.
    b2b = per_call_us(lambda: opened("frame"), number=50, repeat=7)
    print(row("  same, runs back to back on one file (no drain between)", b2b, waiting,
              "waiting"))
    drain()


def measure(folder: str) -> None:
    n = 200_000
    ref_bare = per_call_us(lambda: bare("q"), number=n)
    ref_noop = per_call_us(lambda: noop("q"), number=n)
    print(row("bare call", ref_bare))
    print(row("no-op decorator (reference)", ref_noop, ref_bare, "bare"))
    off = per_call_us(lambda: windowed("q"), number=n)
    print(row("@window, no active recorder", off, ref_noop, "no-op decorator"))

    # Two views of the same window. "Sustained": a tight loop of 50,000 calls, so the
    # writer thread's share (encoding, compression, the receipt chain) competes with the
    # caller for the GIL. "Caller": batches of 1,000 calls (fewer records than a frame),
    # the writer drained between batches outside the clock: the latency a call adds on
    # the agent's own path, which is what an agent waiting on model calls sees.
    with al.record(os.path.join(folder, "w.zst"), seed=1):
        on = per_call_us(lambda: windowed("q"), number=n // 4)
        caller = per_call_us(lambda: windowed("q"), number=1_000, repeat=50, before=al.flush)
    print(row("@window, recorder, no OTel SDK (entry+exit sealed)", on, ref_bare, "bare"))
    print(row("  same, caller's latency (writer drained between batches)", caller, ref_bare,
              "bare"))
    # durability="window": each window's return waits until its frame is handed to the OS
    # (a pool thread wakes, encodes, writes); "fsync" also waits for the disk.
    for durability, number in (("window", 5_000), ("fsync", 300)):
        with al.record(os.path.join(folder, f"d-{durability}.zst"), seed=1,
                       durability=durability):  # type: ignore[arg-type]
            cost = per_call_us(lambda: windowed("q"), number=number, repeat=3)
        print(row(f"@window, durability={durability!r} (returns once written)", cost, on,
                  "frame"))

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Sink(SpanExporter):
        def export(self, spans):  # type: ignore[no-untyped-def]
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Sink(), max_queue_size=1 << 16))
    tracer = provider.get_tracer("bench")

    def raw_span() -> None:
        with tracer.start_as_current_span("raw"):
            bare("q")

    # The five attributes agentlog puts on every window span, with values of their sizes:
    # what the SDK itself charges for them, separately from what agentlog adds.
    five = {"agentlog.window": "bench", "agentlog.run_id": "0" * 32,
            "agentlog.entry_hash": "a" * 64, "agentlog.exit_hash": "b" * 64,
            "agentlog.receipt": "c" * 64}

    def raw_span_five() -> None:
        with tracer.start_as_current_span("raw") as span:
            bare("q")
            span.set_attributes(five)

    # Interleaved (raw, window, raw, window, ...) inside one recording, so that both see
    # the same machine load; the load on this box drifts by a few µs over a minute.
    previous = _otel.set_provider_override(provider)
    with al.record(os.path.join(folder, "o.zst"), seed=1):
        raw, with_otel = interleaved(raw_span, lambda: windowed("q"), number=n // 8)
        raw_c, otel_c = interleaved(raw_span, lambda: windowed("q"), number=1_000, repeat=30,
                                    before=al.flush)
        raw5, with_otel5 = interleaved(raw_span_five, lambda: windowed("q"), number=n // 8)
    _otel.set_provider_override(previous)
    print(row("raw OTel SDK span + BatchSpanProcessor (reference)", raw))
    print(row("@window, recorder + OTel SDK + BatchSpanProcessor", with_otel, raw, "raw span"))
    print(f"{'':<58} overhead over the raw span: {with_otel[0] - raw[0]:.2f} µs (min)")
    print(row("  same, caller's latency (writer drained between batches)", otel_c, raw_c,
              "raw span"))
    print(f"{'':<58} overhead over the raw span: {otel_c[0] - raw_c[0]:.2f} µs (min)")
    print(row("raw SDK span + the same five attributes (reference)", raw5))
    print(row("@window + OTel SDK (interleaved with the row above)", with_otel5, raw5,
              "raw + 5 attributes"))
    print(f"{'':<58} overhead over that span: {with_otel5[0] - raw5[0]:.2f} µs (min)")
    provider.shutdown()

    ids = [f"doc-{i:04d}" for i in range(1000)]
    p = np.random.default_rng(0).dirichlet(np.ones(1000))
    with al.record(os.path.join(folder, "s.zst"), seed=1):
        sel = per_call_us(lambda: al.select(p, candidates=ids, name="doc"), number=5_000)
        pro = per_call_us(lambda: al.proceed(0.7, name="stop"), number=n // 4)
    print(row("select over 1,000 candidates (draws, argmax, enqueue)", sel))
    print(row("proceed", pro))
    argmax_ref = per_call_us(lambda: int(np.argmax(np.log(p) + np.random.gumbel(size=1000))),
                             number=5_000)
    print(row("reference: numpy Gumbel-max over 1,000 (no logging)", argmax_ref))
    print(row("select vs the plain numpy Gumbel-max", sel, argmax_ref, "numpy"))


if __name__ == "__main__":
    main()
