"""What the re-entry seams add to the hot paths, A/B in one process, interleaved batches.

Run: ``python tests/benchmarks/bench_reentry_seams.py`` (prints a table; asserts nothing).

The seams record, per window entry, the stream steps (``Run.stream_steps``: a snapshot
of a small dict, shared by entries while nothing is drawn, None before the first draw)
and the function id, and per ``select``/``proceed``
the stream's next step (one dict store in ``Run.next_step``). Variant "without" swaps
those pieces for the previous behaviour (no steps, no function id, the previous
``next_step``) in the same process, so both variants see the same machine load; batches
alternate, and the table gives min and median per call and the ratio of the minima.
"""

from __future__ import annotations

import itertools
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _tempdir import bench_dir
from _timing import row

import agentlog as al
from agentlog._state import Run


def bare(q, k=3):  # type: ignore[no-untyped-def]
    return k


windowed = al.window("bench_seams")(bare)
SPEC = windowed.__agentlog_window__  # type: ignore[attr-defined]
FUNCTION_ID = SPEC.function_id
WITH_STEPS = Run.stream_steps
WITH_NEXT = Run.next_step


def previous_next_step(self: Run, stream: str) -> int:  # the code before the seams
    counter = self._steps.get(stream)
    if counter is None:
        with self.lock:
            counter = self._steps.setdefault(stream, itertools.count())
    return next(counter)


def seams(on: bool) -> None:
    Run.stream_steps = WITH_STEPS if on else (lambda self: None)  # type: ignore[method-assign]
    Run.next_step = WITH_NEXT if on else previous_next_step  # type: ignore[method-assign]
    SPEC.function_id = FUNCTION_ID if on else None


def ab(fn: Callable[[], object], number: int, repeat: int = 11,
       before: Callable[[], object] | None = None) -> tuple[tuple[float, float], ...]:
    samples: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(repeat):
        for on in (False, True):
            seams(on)
            if before is not None:
                before()
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            samples[on].append((time.perf_counter() - t0) / number * 1e6)
    seams(True)
    return tuple((min(samples[k]), statistics.median(samples[k])) for k in (False, True))


def main() -> None:
    with bench_dir("agentlog-bench-seams-") as folder:  # removed on any exit, SIGTERM too
        path = os.path.join(folder, "t.zst")
        with al.record(path, seed=1):
            off, on = ab(lambda: windowed("q"), 20_000, before=al.flush)
            print(row("@window, no draw yet in the run: without seams", off))
            print(row("  with seams", on, off, "without"))
            al.select([0.5, 0.5], name="doc")
            al.proceed(0.5, name="stop")
            off, on = ab(lambda: windowed("q"), 20_000, before=al.flush)
            print(row("@window, two streams drawn: without seams", off))
            print(row("  with seams (one shared steps snapshot)", on, off, "without"))


            def draw_then_window() -> None:  # an agent's round: a decision, then a window
                al.proceed(0.5, name="stop")
                windowed("q")

            off, on = ab(draw_then_window, 20_000, before=al.flush)
            print(row("proceed + @window (new steps per entry): without seams", off))
            print(row("  with seams", on, off, "without"))
            probs = [1 / 1000] * 1000
            ids = list(range(1000))
            off, on = ab(lambda: al.select(probs, candidates=ids, name="doc"), 500,
                         before=al.flush)
            print(row("select over 1,000 candidates: without seams", off))
            print(row("  with seams", on, off, "without"))
            off, on = ab(lambda: al.proceed(0.5, name="stop"), 20_000, before=al.flush)
            print(row("proceed: without seams", off))
            print(row("  with seams", on, off, "without"))


if __name__ == "__main__":
    main()
