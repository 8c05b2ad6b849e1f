"""Window call shapes against a positional sync window, interleaved in one recording.

Run: ``python tests/benchmarks/bench_window_paths.py`` (prints a table; asserts nothing).
``--json`` prints one JSON object, for A/B runs of two checkouts
(``PYTHONPATH=<checkout> python tests/benchmarks/bench_window_paths.py --json``: the
script uses only the public API).

Rows (tight loops, the writer thread's share included): a positional call, a keyword
call, and a coroutine window awaited in a running event loop, each against its own
undecorated twin measured in alternating batches.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _timing import interleaved, measured

import agentlog as al


def bare(q: str, k: int = 3) -> int:
    return k


async def abare(q: str, k: int = 3) -> int:
    return k


windowed = al.window("bench")(bare)
awindowed = al.window("abench")(abare)


def _async_batch(fn: Callable[..., Coroutine[Any, Any, int]], number: int) -> float:
    async def loop() -> float:
        t0 = time.perf_counter()
        for _ in range(number):
            await fn("q", k=4)
        return (time.perf_counter() - t0) / number * 1e6

    return asyncio.run(loop())


def _async_interleaved(number: int, repeat: int = 9) -> tuple[list[float], list[float]]:
    ref, own = [], []
    for _ in range(repeat):
        al.flush()
        ref.append(_async_batch(abare, number))
        al.flush()
        own.append(_async_batch(awindowed, number))
    return ref, own


def measure(folder: str) -> dict[str, list[float]]:
    """{row: [min µs, median µs, reference min µs, reference median µs]}."""
    number = 20_000
    out: dict[str, list[float]] = {}
    with al.record(os.path.join(folder, "w.zst"), seed=1):
        ref, own = interleaved(lambda: bare("q", 4), lambda: windowed("q", 4), number=number,
                               before=al.flush)
        out["sync window, positional call"] = [*own, *ref]
        ref, own = interleaved(lambda: bare("q", k=4), lambda: windowed("q", k=4),
                               number=number, before=al.flush)
        out["sync window, keyword call"] = [*own, *ref]
        aref, aown = _async_interleaved(number)
        out["async window (keyword call), awaited in a loop"] = [
            min(aown), statistics.median(aown), min(aref), statistics.median(aref)]
    return out


def main() -> None:
    result = measured(measure, "agentlog-bench-paths-")
    if result is None:
        return
    positional = result["sync window, positional call"]
    for label, (mn, med, rmn, _) in result.items():
        print(f"{label:<48} min {mn:7.2f} µs  median {med:7.2f} µs  overhead over the "
              f"undecorated call {mn - rmn:6.2f} µs "
              f"({(mn - rmn) / (positional[0] - positional[2]):.2f}× the positional window's)")


if __name__ == "__main__":
    main()
