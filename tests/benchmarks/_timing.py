"""Timing helpers shared by the benchmark scripts (min and median over repetitions)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def _batch_us(fn: Callable[[], object], number: int) -> float:
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number * 1e6


def cpu_us_per_call(fn: Callable[[], object], number: int) -> float:
    """Microseconds of this thread's CPU (``time.thread_time``) per call over ``number`` calls.

    On a shared machine wall-clock batches measure the scheduler; the caller's CPU does not.
    """
    t0 = time.thread_time()
    for _ in range(number):
        fn()
    return (time.thread_time() - t0) / number * 1e6


def per_call_us(fn: Callable[[], object], *, number: int, repeat: int = 7,
                before: Callable[[], object] | None = None) -> tuple[float, float]:
    """(min, median) microseconds per call of ``fn`` over ``repeat`` runs of ``number`` calls.

    ``before`` runs ahead of each batch, outside the clock (e.g. draining a writer).
    """
    samples = []
    for _ in range(repeat):
        if before is not None:
            before()
        samples.append(_batch_us(fn, number))
    return min(samples), statistics.median(samples)


def interleaved(reference: Callable[[], object], fn: Callable[[], object], *, number: int,
                repeat: int = 9, before: Callable[[], object] | None = None,
                ) -> tuple[tuple[float, float], tuple[float, float]]:
    """Like ``per_call_us`` for two functions, batches alternating so both see one load."""
    ref, own = [], []
    for _ in range(repeat):
        for fn_, out in ((reference, ref), (fn, own)):
            if before is not None:
                before()
            out.append(_batch_us(fn_, number))
    return (min(ref), statistics.median(ref)), (min(own), statistics.median(own))


def row(label: str, timing: tuple[float, float], reference: tuple[float, float] | None = None,
        ref_label: str = "") -> str:
    text = f"{label:<58} min {timing[0]:8.3f} µs   median {timing[1]:8.3f} µs"
    if reference is not None:
        text += f"   {timing[0] / reference[0]:6.2f}× {ref_label}"
    return text


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(min, median) seconds per call over ``repeat`` calls after one warm-up call."""
    fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return min(samples), statistics.median(samples)


def line(label: str, t: tuple[float, float], target: float | None = None,
         ref: tuple[float, float] | None = None, ref_label: str = "", *, width: int = 58,
         unit: str = "s") -> bool:
    """Print one timing row (seconds in, shown in ``unit``: "s" or "ms"); True if on target."""
    scale = 1e3 if unit == "ms" else 1.0
    ok = target is None or t[0] <= target
    text = (f"{label:<{width}} min {t[0] * scale:9.3f} {unit:<2}  median "
            f"{t[1] * scale:9.3f} {unit}")
    if target is not None:
        text += f"   target ≤ {target:g} s {'ok' if ok else 'MISSED'}"
    if ref is not None:
        text += f"   {t[0] / ref[0]:6.2f}× {ref_label}"
    print(text)
    return ok


def measured(measure: Callable[[str], dict[str, list[float]]],
             prefix: str) -> dict[str, list[float]] | None:
    """Run ``measure(folder)`` in a temporary folder that is removed afterwards.

    With ``--json`` on the command line, print ``{"load": ..., "rows": ...}`` (for A/B runs
    of two checkouts) and return None; otherwise print the load average and return the rows.
    """
    import json
    import os
    import sys

    from _tempdir import bench_dir

    with bench_dir(prefix) as folder:
        result = measure(folder)
    if "--json" in sys.argv:
        print(json.dumps({"load": os.getloadavg()[0], "rows": result}))
        return None
    print(f"load average {os.getloadavg()[0]:.2f}")
    return result


def sink_provider() -> Any:
    """An OpenTelemetry SDK ``TracerProvider`` whose ``BatchSpanProcessor`` exports to a sink
    that keeps nothing: the span path's own cost, with no exporter's."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class Sink(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Sink(), max_queue_size=1 << 16))
    return provider
