"""``select`` against numpy's Gumbel-max of the same size, interleaved in one process.

Run: ``python tests/benchmarks/bench_select.py`` (prints a table; asserts nothing).
``--json`` prints one JSON object instead and ``--quick`` measures the cached pools only,
with fewer calls: for A/B runs of two checkouts against each other
(``PYTHONPATH=<checkout> python tests/benchmarks/bench_select.py --json``: the script
uses only the public API).

Rows: a cached pool (the same list object every step) at N = 10, N = 32, N = 200 (an
agent loop's pool, bench_agent_loop) and N = 1,000, and a fresh pool (new ids every call)
at N = 1,000. The reference is
``argmax(log p + rng.gumbel(size=N))``, batches alternating with the measured call.
"""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _timing import interleaved, measured, row

import agentlog as al


def measure(folder: str) -> dict[str, tuple[float, float, float, float]]:
    """{row: (min µs, median µs, reference min µs, reference median µs)}."""
    rng = np.random.default_rng(0)
    out: dict[str, tuple[float, float, float, float]] = {}
    fresh = itertools.count()
    with al.record(os.path.join(folder, "s.zst"), seed=1):
        quick = "--quick" in sys.argv  # A/B rounds: fewer calls, no fresh-pool row
        for n, number in ((10, 5_000 if quick else 20_000), (32, 5_000 if quick else 10_000),
                          (200, 2_000 if quick else 5_000), (1000, 1_000 if quick else 3_000)):
            ids = [f"doc-{i:04d}" for i in range(n)]
            p = rng.dirichlet(np.ones(n))

            def numpy_ref(p: np.ndarray = p, n: int = n) -> int:
                return int(np.argmax(np.log(p) + rng.gumbel(size=n)))

            ref, own = interleaved(numpy_ref,
                                   lambda p=p, ids=ids: al.select(p, candidates=ids, name="d"),
                                   number=number, before=al.flush)
            out[f"select, cached pool, N = {n}"] = (*own, *ref)
        if quick:
            return out
        n = 1000
        p = rng.dirichlet(np.ones(n))

        def fresh_select() -> int:
            k = next(fresh) * n
            return al.select(p, candidates=[f"d{k + i}" for i in range(n)], name="f")

        def fresh_ref() -> int:
            # Builds the id list too, so that only the keying differs.
            k = next(fresh) * n
            [f"d{k + i}" for i in range(n)]
            return int(np.argmax(np.log(p) + rng.gumbel(size=n)))

        ref, own = interleaved(fresh_ref, fresh_select, number=300, before=al.flush)
        out[f"select, fresh pool, N = {n} (ids built in both)"] = (*own, *ref)
    return out


def main() -> None:
    result = measured(measure, "agentlog-bench-select-")
    if result is None:
        return
    for label, (mn, med, rmn, rmed) in result.items():
        print(row(label, (mn, med), (rmn, rmed), "numpy Gumbel-max"))


if __name__ == "__main__":
    main()
