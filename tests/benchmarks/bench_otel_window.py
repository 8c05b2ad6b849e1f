"""What a window adds to an OpenTelemetry span, in CPU time: the caller's and all threads'.

Run: ``python tests/benchmarks/bench_otel_window.py`` (prints a table; asserts nothing).
``--json`` prints one JSON object instead, for A/B runs of two checkouts
(``PYTHONPATH=<checkout> python tests/benchmarks/bench_otel_window.py --json``: the script
uses only the public API and ``agentlog._spans.tracer.set_provider_override``).

On a shared 2-core machine wall-clock batches measure the scheduler; CPU time does not.
Four calls alternate batch by batch in one process, so they see one load:

* ``bare``: the undecorated function;
* ``window``: the same function under ``@al.window`` inside ``al.record``, no SDK;
* ``raw span``: the undecorated function inside a hand-written SDK span carrying the five
  attributes agentlog puts on every window span (``start_as_current_span`` +
  ``set_attributes``), a ``TracerProvider`` with a ``BatchSpanProcessor``;
* ``window + OTel``: the window with that provider.

Two clocks: the calling thread's CPU (``time.thread_time``: what the agent's thread pays)
and the process's (``time.process_time`` with the writer flushed and the span processor
force-flushed inside the clock: the writer's and the exporter's threads included). The
window's OTel overhead is ``(window + OTel) - (raw span)``, next to the window's own cost
without spans, ``window - bare``, each the median of the differences paired round by round
(with its quartiles); the difference between the two is what the span glue (parent
context, attribute building, the receipt computed on the caller) adds.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _tempdir import bench_dir
from _timing import sink_provider

import agentlog as al
from agentlog._spans import tracer as _otel

FIVE = {"agentlog.window": "bench", "agentlog.run_id": "0" * 32,
        "agentlog.entry_hash": "a" * 64, "agentlog.exit_hash": "b" * 64,
        "agentlog.receipt": "c" * 64}
ROUNDS = 25
NUMBER = 2_000


def bare(q: str) -> str:
    return q


def _batch(fn: Callable[[], object], clock: Callable[[], float],
           settle: Callable[[], object] | None) -> float:
    t0 = clock()
    for _ in range(NUMBER):
        fn()
    if settle is not None:
        settle()
    return (clock() - t0) / NUMBER * 1e6


def measure(folder: str) -> dict[str, dict[str, float]]:
    provider = sink_provider()
    tracer = provider.get_tracer("bench")
    windowed = al.window("bench")(bare)

    def raw_span() -> None:
        with tracer.start_as_current_span("raw") as span:
            bare("q")
            span.set_attributes(FIVE)

    def settle_all() -> None:
        al.flush()
        provider.force_flush()

    samples: dict[str, dict[str, list[float]]] = {
        clock: {k: [] for k in ("bare", "window", "raw span", "window + OTel")}
        for clock in ("caller", "all threads")}
    try:
        for _ in range(ROUNDS):
            for clock_name, clock, settle in (("caller", time.thread_time, None),
                                              ("all threads", time.process_time, settle_all)):
                out = samples[clock_name]
                with al.record(os.path.join(folder, "plain.zst"), seed=1):
                    al.flush()
                    out["bare"].append(_batch(lambda: bare("q"), clock, None))
                    out["window"].append(_batch(lambda: windowed("q"), clock, settle))
                previous = _otel.set_provider_override(provider)
                try:
                    with al.record(os.path.join(folder, "otel.zst"), seed=1):
                        settle_all()
                        out["raw span"].append(_batch(raw_span, clock, settle))
                        out["window + OTel"].append(_batch(lambda: windowed("q"), clock,
                                                           settle))
                finally:
                    _otel.set_provider_override(previous)
    finally:
        provider.shutdown()
    out: dict[str, dict[str, float]] = {}
    for clock, rows in samples.items():
        m = {k: statistics.median(v) for k, v in rows.items()}
        # Paired within each round (the four batches of a round ran back to back), so the
        # load's drift from round to round cancels out of the differences.
        over = [w - r for w, r in zip(rows["window + OTel"], rows["raw span"], strict=True)]
        own = [w - b for w, b in zip(rows["window"], rows["bare"], strict=True)]
        m["over raw (paired median)"] = statistics.median(over)
        m["over raw q25"], _, m["over raw q75"] = statistics.quantiles(over, n=4)
        m["window own (paired median)"] = statistics.median(own)
        out[clock] = m
    return out


def main() -> None:
    with bench_dir("agentlog-bench-otel-window-") as folder:
        result = measure(folder)
    if "--json" in sys.argv:
        print(json.dumps(result))
        return
    print(f"load average {os.getloadavg()[0]:.1f}; medians of {ROUNDS} batches of {NUMBER} "
          "calls, CPU µs per call")
    for clock, m in result.items():
        own = m["window own (paired median)"]
        over = m["over raw (paired median)"]
        print(f"{clock:<12} bare {m['bare']:6.2f}  window {m['window']:6.2f}  raw span "
              f"{m['raw span']:6.2f}  window + OTel {m['window + OTel']:6.2f}")
        print(f"{'':<12} window over a raw span with the same attributes: {over:+6.2f} µs "
              f"(quartiles {m['over raw q25']:+.2f} to {m['over raw q75']:+.2f}; the window "
              f"alone costs {own:+6.2f} µs; span glue {over - own:+6.2f} µs)")


if __name__ == "__main__":
    main()
