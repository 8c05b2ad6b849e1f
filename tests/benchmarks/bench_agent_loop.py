"""What recording costs in a realistic agent loop, against the same loop undecorated.

Run: ``python tests/benchmarks/bench_agent_loop.py`` (prints a table; asserts nothing).
Options: ``--rounds R`` (default 5), ``--runs N`` (default 100), ``--work cpu`` or
``--work sleep`` (only that half of the rows; default both), ``--peers`` (also the
peers' per-call costs, each in its own process; see below), ``--peers-only``, ``--peer
NAME`` (one peer, in this process: what ``--peers`` runs).

The loop: ``N`` runs × 10 windows; each window does 1 ms of agent work (a CPU spin, or a
sleep) and 5 selections over 200 candidates, from one fixed list of ids or from a fresh
pool of new ids per window. Variants of the same code:

* ``undecorated``: plain functions, numpy's Gumbel-max for the selections (the reference);
* ``no recorder``: ``@al.window`` and ``al.select``, no ``record()`` open;
* ``record``: each run inside ``al.record(...)`` (one trace file per variant and round);
* ``record + OTel SDK``: the same with an OpenTelemetry ``TracerProvider`` and a
  ``BatchSpanProcessor`` exporting to an in-memory sink;
* ``raw OTel spans only``: the undecorated loop with hand-written spans (a run span, a
  window span carrying five attributes, an event per selection), the same provider.

Each round runs every variant once, in an order rotated round by round, and divides its
wall time, and the process's CPU time (the writer's threads included; the CPU work is a
fixed amount of work calibrated to 1 ms, not a deadline), by the undecorated loop's of
the same round; the table shows the medians of those ratios and their ranges, so that
load drifting during a run cancels. On a loaded machine read the CPU ratios: wall time
then measures the scheduler. With a sleep as the work, CPU time is mostly the
recording's, so its CPU ratio is large by construction; read its wall ratio.

Peers (``--peers``): the per-call cost of a decorated function that returns at once, for
Logfire's ``@logfire.instrument`` (``send_to_logfire=False, console=False``), Langfuse's
``@observe`` (pointed at a closed loopback port), and ``mlflow.trace`` (a local sqlite
store), each against the bare call in alternating batches, one peer per process, next to
``@al.window`` inside a ``record()`` measured the same way. A peer that is not importable
is skipped and named. The peers are not agentlog dependencies: install them in a
separate environment (``pip install logfire langfuse mlflow-skinny``) and run this script
with that environment's Python and ``PYTHONPATH`` set to this checkout.
"""

from __future__ import annotations

import itertools
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _tempdir import bench_dir
from _timing import interleaved

import agentlog as al
from agentlog import _otel

WINDOWS = 10
SELECTIONS = 5
CANDIDATES = 200
WORK_S = 0.001
FIXED_IDS = [f"doc-{i:05d}" for i in range(CANDIDATES)]
_fresh = itertools.count()
_rng = np.random.default_rng(0)
PROBS = _rng.dirichlet(np.ones(CANDIDATES))


def _calibrate() -> int:
    """Iterations of ``work_cpu``'s loop that take about 1 ms of this thread's CPU."""
    n = 20_000
    while True:
        t0 = time.thread_time()
        sum(range(n))
        used = time.thread_time() - t0
        if used > 0.02:
            return max(1, int(n * WORK_S / used))
        n *= 2


_ITERATIONS = 0


def spin(seconds: float) -> None:
    # A fixed amount of work, not a deadline on the clock: under load a deadline would
    # burn whatever CPU the scheduler grants, and CPU-time ratios would mean nothing.
    sum(range(_ITERATIONS))


def fresh_ids() -> list[str]:
    k = next(_fresh) * CANDIDATES
    return [f"d{k + i}" for i in range(CANDIDATES)]


def numpy_select(p: np.ndarray, candidates: list[str], name: str) -> int:
    return int(np.argmax(np.log(p) + _rng.gumbel(size=p.shape[0])))


def make_step(select: Callable[..., int], work: Callable[[float], None],
              fresh: bool) -> Callable[[str], int]:
    def step(question: str) -> int:
        work(WORK_S)
        ids = fresh_ids() if fresh else FIXED_IDS
        total = 0
        for _ in range(SELECTIONS):
            total += select(PROBS, candidates=ids, name="doc")
        return total

    return step


class Loop:
    """One variant of the agent loop: ``run_all(folder, tag)`` returns its wall time."""

    def __init__(self, variant: str, work: Callable[[float], None], fresh: bool,
                 provider: Any) -> None:
        self.variant = variant
        self.provider = provider
        self.tracer = provider.get_tracer("bench")
        if variant in ("undecorated", "raw OTel spans only"):
            self.step = make_step(numpy_select, work, fresh)
        else:
            self.step = al.window("step")(make_step(al.select, work, fresh))

    def _windows(self) -> None:
        for w in range(WINDOWS):
            self.step(f"q{w}")

    def _raw_windows(self) -> None:
        tracer = self.tracer
        with tracer.start_as_current_span("run"):
            for w in range(WINDOWS):
                with tracer.start_as_current_span("step") as span:
                    self.step(f"q{w}")
                    for s in range(SELECTIONS):
                        span.add_event("select", {"name": "doc", "step": s, "choice": 1})
                    span.set_attributes(FIVE)

    def run_all(self, folder: str, tag: str, runs: int) -> tuple[float, float]:
        """(wall seconds, CPU seconds of the whole process, the writer's threads included)."""
        path = os.path.join(folder, f"{tag}.zst")
        previous = None
        if self.variant == "record + OTel SDK":
            previous = _otel.set_provider_override(self.provider)
        c0 = time.process_time()
        t0 = time.perf_counter()
        if self.variant in ("record", "record + OTel SDK"):
            for r in range(runs):
                with al.record(path, seed=r, task=f"t{r}"):
                    self._windows()
        elif self.variant == "raw OTel spans only":
            for _ in range(runs):
                self._raw_windows()
        else:
            for _ in range(runs):
                self._windows()
        if self.variant in ("record", "record + OTel SDK"):
            al.flush()  # the writer's work on these runs belongs to this variant
        if self.variant in ("record + OTel SDK", "raw OTel spans only"):
            self.provider.force_flush()
        elapsed = time.perf_counter() - t0, time.process_time() - c0
        if self.variant == "record + OTel SDK":
            _otel.set_provider_override(previous)
        return elapsed


# The five attributes agentlog puts on a window span, with values of their sizes.
FIVE = {"agentlog.window": "step", "agentlog.run_id": "0" * 32,
        "agentlog.entry_hash": "a" * 64, "agentlog.exit_hash": "b" * 64,
        "agentlog.receipt": "c" * 64}
VARIANTS = ("undecorated", "no recorder", "record", "record + OTel SDK",
            "raw OTel spans only")


def end_to_end(folder: str, rounds: int, runs: int) -> None:
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
    global _ITERATIONS
    _ITERATIONS = _calibrate()
    print(f"{'loop':<34} {'variant':<22} {'wall ratio':>10} {'range':>13}  {'CPU ratio':>9} "
          f"{'range':>13}   (medians over {rounds} rounds)")
    works = [(n, w) for n, w in (("CPU work", spin), ("sleep", time.sleep))
             if _WORK in ("both", n.split()[0].lower())]
    for work_name, work in works:
        for fresh in (False, True):
            loops = [Loop(v, work, fresh, provider) for v in VARIANTS]
            wall: dict[str, list[float]] = {v: [] for v in VARIANTS[1:]}
            cpu: dict[str, list[float]] = {v: [] for v in VARIANTS[1:]}
            load = []
            for r in range(rounds):
                order = loops[r % len(loops):] + loops[:r % len(loops)]
                times = {}
                for loop in order:
                    al.flush()
                    times[loop.variant] = loop.run_all(
                        folder, f"{work_name[:3]}-{fresh}-{loop.variant[:6]}-{r}", runs)
                for v in VARIANTS[1:]:
                    wall[v].append(times[v][0] / times["undecorated"][0])
                    cpu[v].append(times[v][1] / times["undecorated"][1])
                load.append(os.getloadavg()[0])
            label = f"{work_name}, {'fresh pool per window' if fresh else 'fixed pool'}"
            for v in VARIANTS[1:]:
                w, c = wall[v], cpu[v]
                print(f"{label:<34} {v:<22} {statistics.median(w):9.3f}× {min(w):6.3f}–"
                      f"{max(w):.3f}  {statistics.median(c):8.3f}× {min(c):6.3f}–{max(c):.3f}"
                      f"   (load {min(load):.1f}–{max(load):.1f})")
                label = ""
            sys.stdout.flush()
    provider.shutdown()


# ------------------------------------------------------------------------------- peers


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the with block ends


def _peer_decorator(peer: str, folder: str) -> Callable[[Callable[..., Any]], Any]:
    if peer == "logfire":
        import logfire

        logfire.configure(send_to_logfire=False, console=False)
        return logfire.instrument("bench")  # type: ignore[no-any-return]
    if peer == "langfuse":
        os.environ.update(LANGFUSE_HOST=f"http://127.0.0.1:{_closed_port()}",
                          LANGFUSE_PUBLIC_KEY="pk-lf-bench", LANGFUSE_SECRET_KEY="sk-lf-bench")
        from langfuse import observe

        return observe()  # type: ignore[no-any-return]
    if peer == "mlflow":
        import mlflow

        mlflow.set_tracking_uri(f"sqlite:///{os.path.join(folder, 'mlflow.db')}")
        return mlflow.trace  # type: ignore[no-any-return]
    raise SystemExit(f"unknown peer {peer!r}; known: logfire, langfuse, mlflow")


PEERS = ("logfire", "langfuse", "mlflow")
_PEER_MODULES = {"logfire": "logfire", "langfuse": "langfuse", "mlflow": "mlflow"}


def one_peer(peer: str, folder: str) -> None:
    def bare(q: str) -> str:
        return q

    if peer == "agentlog":
        decorated = al.window("bench")(bare)
        with al.record(os.path.join(folder, "peer.zst"), seed=1):
            ref, own = interleaved(lambda: bare("q"), lambda: decorated("q"), number=2_000,
                                   before=al.flush)
    else:
        decorated = _peer_decorator(peer, folder)(bare)
        ref, own = interleaved(lambda: bare("q"), lambda: decorated("q"), number=2_000)
    print(f"{peer:<10} per call: min {own[0] - ref[0]:9.2f} µs, median {own[1] - ref[1]:9.2f} µs "
          f"over the bare call (load {os.getloadavg()[0]:.1f})")


def peers() -> None:
    import importlib.util

    for peer in ("agentlog", *PEERS):
        if peer != "agentlog" and importlib.util.find_spec(_PEER_MODULES[peer]) is None:
            print(f"{peer:<10} skipped: not importable here (pip install it in a separate "
                  "environment; see this script's docstring)")
            continue
        done = subprocess.run([sys.executable, __file__, "--peer", peer], text=True,
                              capture_output=True, timeout=600)
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith(peer)]
        print(lines[-1] if lines and done.returncode == 0 else
              f"{peer:<10} failed (exit {done.returncode}): {done.stderr.strip()[-300:]}")


def _option(name: str, default: int) -> int:
    if name in sys.argv:
        return int(sys.argv[sys.argv.index(name) + 1])
    return default


# --work cpu / --work sleep: only the rows of that kind of work (default: both).
_WORK = sys.argv[sys.argv.index("--work") + 1] if "--work" in sys.argv else "both"
if _WORK not in ("both", "cpu", "sleep"):
    raise SystemExit(f"--work must be cpu, sleep or both; found {_WORK!r}")


def main() -> None:
    with bench_dir("agentlog-bench-loop-") as folder:
        if "--peer" in sys.argv:
            one_peer(sys.argv[sys.argv.index("--peer") + 1], folder)
            return
        if "--peers-only" not in sys.argv:
            print(f"load average {os.getloadavg()[0]:.2f}; {_option('--runs', 100)} runs × "
                  f"{WINDOWS} windows × {SELECTIONS} selections over {CANDIDATES} "
                  f"candidates, {WORK_S * 1e3:g} ms of work per window")
            end_to_end(folder, _option("--rounds", 5), _option("--runs", 100))
        if "--peers" in sys.argv or "--peers-only" in sys.argv:
            peers()


if __name__ == "__main__":
    main()
