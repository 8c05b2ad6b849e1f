"""Timing helpers shared by the benchmark scripts (min and median over repetitions)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def per_call_us(fn: Callable[[], object], *, number: int, repeat: int = 7) -> tuple[float, float]:
    """(min, median) microseconds per call of ``fn`` over ``repeat`` runs of ``number`` calls."""
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) / number * 1e6)
    return min(samples), statistics.median(samples)


def row(label: str, timing: tuple[float, float], reference: tuple[float, float] | None = None,
        ref_label: str = "") -> str:
    text = f"{label:<58} min {timing[0]:8.3f} µs   median {timing[1]:8.3f} µs"
    if reference is not None:
        text += f"   {timing[0] / reference[0]:6.2f}× {ref_label}"
    return text
