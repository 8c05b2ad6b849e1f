"""What recording costs in a realistic agent loop, against the same loop undecorated.

Run: ``python tests/benchmarks/bench_agent_loop.py`` (prints a table; asserts nothing).
Options: ``--rounds R`` (default 5), ``--runs N`` (default 100), ``--paired P`` (instead
of rounds: ``P`` pairs of one undecorated run and one run of the variant, for a VM whose
speed drifts; see ``paired``; with ``--only V1,V2`` only those variants, and
``--iterations K``, here or with rounds, a fixed amount of work instead of one
calibrated to 1 ms, so that two checkouts measured in separate processes do the same
work), ``--work cpu`` or
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
  window span carrying five attributes, an event per selection), the same provider;
* ``raw spans, agentlog's attrs``: the same, each selection's event carrying the nine
  attributes agentlog's ``agentlog.select`` event carries, computed the way a user would
  (the vector's SHA-256, its entropy, the chosen index, probability and id): the
  like-for-like reference for ``record + OTel SDK``, whose events carry those.

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

import hashlib
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
from opentelemetry import trace

sys.path.insert(0, str(Path(__file__).parent))
from _tempdir import bench_dir
from _timing import interleaved, sink_provider

import agentlog as al
from agentlog._spans import tracer as _otel

WINDOWS = 10
SELECTIONS = 5
CANDIDATES = 200
WORK_S = 0.001
FIXED_IDS = [f"doc-{i:05d}" for i in range(CANDIDATES)]
_fresh = itertools.count()
_rng = np.random.default_rng(0)
PROBS = _rng.dirichlet(np.ones(CANDIDATES))


def _calibrate() -> int:
    """Iterations of ``work_cpu``'s loop that take about 1 ms of this thread's CPU.

    The median of 11 timings of ~20 ms: one timing can land in a slow moment of this VM
    (a third fewer iterations, measured), and every ratio would then count less work.
    """
    n = 20_000
    while True:
        t0 = time.thread_time()
        sum(range(n))
        used = time.thread_time() - t0
        if used > 0.02:
            break
        n *= 2
    timings = []
    for _ in range(11):
        t0 = time.thread_time()
        sum(range(n))
        timings.append(time.thread_time() - t0)
    return max(1, int(n * WORK_S / statistics.median(timings)))


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


_steps: dict[str, int] = {}


def numpy_select_event(p: np.ndarray, candidates: list[str], name: str) -> int:
    """``numpy_select`` plus a hand-written event with agentlog's nine attributes."""
    log_p = np.log(p)
    choice = int(np.argmax(log_p + _rng.gumbel(size=p.shape[0])))
    step = _steps[name] = _steps.get(name, -1) + 1
    trace.get_current_span().add_event("select", {
        "agentlog.stream": name, "agentlog.step": step, "agentlog.owner": "model",
        "agentlog.n_candidates": int(p.shape[0]), "agentlog.entropy": -float(np.dot(p, log_p)),
        "agentlog.chosen_index": choice, "agentlog.chosen_p": float(p[choice]),
        "agentlog.probs_sha256": hashlib.sha256(p.tobytes()).hexdigest(),
        "agentlog.chosen_id": str(candidates[choice])[:128],
    })
    return choice


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
        elif variant == RAW_FULL:
            self.step = make_step(numpy_select_event, work, fresh)
        else:
            self.step = al.window("step")(make_step(al.select, work, fresh))

    def _windows(self) -> None:
        for w in range(WINDOWS):
            self.step(f"q{w}")

    def _raw_windows(self) -> None:
        # RAW_FULL's step adds its events itself (numpy_select_event); the other adds
        # three-attribute events after the step.
        tracer = self.tracer
        small_events = self.variant != RAW_FULL
        with tracer.start_as_current_span("run"):
            for w in range(WINDOWS):
                with tracer.start_as_current_span("step") as span:
                    self.step(f"q{w}")
                    for s in range(SELECTIONS if small_events else 0):
                        span.add_event("select", {"name": "doc", "step": s, "choice": 1})
                    span.set_attributes(FIVE)

    def _run(self, path: str, seed: int, mode: str) -> None:
        """One run of the variant (a recorded one into ``path``)."""
        if self.variant in ("record", "record + OTel SDK"):
            with al.record(path, seed=seed, task=f"t{seed}", mode=mode):  # type: ignore[arg-type]
                self._windows()
        elif self.variant in ("raw OTel spans only", RAW_FULL):
            self._raw_windows()
        else:
            self._windows()

    def run_one(self, path: str) -> tuple[float, float]:
        """One run (``--paired``): (wall seconds, this thread's CPU seconds)."""
        previous = None
        if self.variant == "record + OTel SDK":
            previous = _otel.set_provider_override(self.provider)
        c0 = time.thread_time()
        t0 = time.perf_counter()
        self._run(path, next(_fresh), "a")
        elapsed = time.perf_counter() - t0, time.thread_time() - c0
        if self.variant == "record + OTel SDK":
            _otel.set_provider_override(previous)
        return elapsed

    def run_all(self, folder: str, tag: str, runs: int) -> tuple[float, float]:
        """(wall seconds, CPU seconds of the whole process, the writer's threads included)."""
        path = os.path.join(folder, f"{tag}.zst")
        previous = None
        if self.variant == "record + OTel SDK":
            previous = _otel.set_provider_override(self.provider)
        c0 = time.process_time()
        t0 = time.perf_counter()
        for r in range(runs):
            self._run(path, r, "x")  # the default: this process appends to its own file
        if self.variant in ("record", "record + OTel SDK"):
            al.flush()  # the writer's work on these runs belongs to this variant
        if self.variant in ("record + OTel SDK", "raw OTel spans only", RAW_FULL):
            self.provider.force_flush()
        elapsed = time.perf_counter() - t0, time.process_time() - c0
        if self.variant == "record + OTel SDK":
            _otel.set_provider_override(previous)
        return elapsed


# The five attributes agentlog puts on a window span, with values of their sizes.
FIVE = {"agentlog.window": "step", "agentlog.run_id": "0" * 32,
        "agentlog.entry_hash": "a" * 64, "agentlog.exit_hash": "b" * 64,
        "agentlog.receipt": "c" * 64}
RAW_FULL = "raw spans, agentlog's attrs"
VARIANTS = ("undecorated", "no recorder", "record", "record + OTel SDK",
            "raw OTel spans only", RAW_FULL)


def _prepare() -> tuple[Any, list[tuple[str, Callable[[float], None]]]]:
    """The span provider, the work per window (calibrated, or ``--iterations``) and the
    kinds of work to run."""
    global _ITERATIONS
    _ITERATIONS = _option("--iterations", 0) or _calibrate()
    print(f"work: sum(range({_ITERATIONS})) per window")
    works = [(n, w) for n, w in (("CPU work", spin), ("sleep", time.sleep))
             if _WORK in ("both", n.split()[0].lower())]
    return sink_provider(), works


def end_to_end(folder: str, rounds: int, runs: int) -> None:
    provider, works = _prepare()
    print(f"{'loop':<34} {'variant':<27} {'wall ratio':>10} {'range':>13}  {'CPU ratio':>9} "
          f"{'range':>13}   (medians over {rounds} rounds)")
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
                print(f"{label:<34} {v:<27} {statistics.median(w):9.3f}× {min(w):6.3f}–"
                      f"{max(w):.3f}  {statistics.median(c):8.3f}× {min(c):6.3f}–{max(c):.3f}"
                      f"   (load {min(load):.1f}–{max(load):.1f})")
                label = ""
            sys.stdout.flush()
    provider.shutdown()


def paired(folder: str, pairs: int) -> None:
    """``--paired N``: each variant against the undecorated loop one run at a time.

    On this VM the CPU's speed drifts by ±15 % from one second to the next, so the rounds
    of ``end_to_end`` (each variant ~1 s in turn) compare moments of different speed. Here a
    pair is one undecorated run (10 windows, ~10 ms) next to one run of the variant, the
    order alternating pair by pair, so both halves see the same speed. Nothing is flushed
    between runs: the writer and the span processor work as in an agent's loop.

    * CPU: the median over the pairs of the main thread's CPU ratio, plus the CPU the
      other threads (the writer's, the span processor's: only the variant has any) spent
      over the variant's whole block, a final flush included, divided by the undecorated
      runs' total CPU. The same sum as the process CPU of ``end_to_end``, split so that
      the drift cancels in the part measured pair by pair.
    * wall: the median of the pairs' wall ratios. The writer's work on a run may spill
      into the undecorated run after it (it then shares two cores with it): read the CPU.
    """
    provider, works = _prepare()
    print(f"{'loop (paired runs)':<34} {'variant':<27} {'wall ratio':>10} {'quartiles':>13}  "
          f"{'CPU ratio':>9} {'quartiles':>13}   (medians over {pairs} pairs)")
    for work_name, work in works:
        for fresh in (False, True):
            label = f"{work_name}, {'fresh pool per window' if fresh else 'fixed pool'}"
            base = Loop("undecorated", work, fresh, provider)
            for variant in VARIANTS[1:]:
                if _ONLY and variant not in _ONLY:
                    continue
                loop = Loop(variant, work, fresh, provider)
                path = os.path.join(folder, f"p-{work_name[:3]}-{fresh}-{variant[:6]}.zst")
                wall, main, base_cpu = [], [], 0.0
                load0 = os.getloadavg()[0]
                for _ in range(2):  # warm-up, not counted
                    base.run_one(path)
                    loop.run_one(path)
                al.flush()
                self_cpu, proc_cpu = time.thread_time(), time.process_time()
                for i in range(pairs):
                    times = {}
                    for which in ((base, loop) if i % 2 else (loop, base)):
                        times[which is loop] = which.run_one(path)
                    wall.append(times[True][0] / times[False][0])
                    main.append(times[True][1] / times[False][1])
                    base_cpu += times[False][1]
                al.flush()
                provider.force_flush()
                others = ((time.process_time() - proc_cpu) - (time.thread_time() - self_cpu))
                share = others / base_cpu
                qw, qm = statistics.quantiles(wall, n=4), statistics.quantiles(main, n=4)
                print(f"{label:<34} {variant:<27} {qw[1]:9.3f}× {qw[0]:6.3f}–{qw[2]:.3f}  "
                      f"{qm[1] + share:8.3f}× {qm[0] + share:6.3f}–{qm[2] + share:.3f}   "
                      f"(other threads +{share:.3f}; load {load0:.1f}–"
                      f"{os.getloadavg()[0]:.1f})")
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


# --only "record,record + OTel SDK": only these variants' rows (with --paired).
_ONLY = (set(sys.argv[sys.argv.index("--only") + 1].split(",")) if "--only" in sys.argv
         else set())


def main() -> None:
    with bench_dir("agentlog-bench-loop-") as folder:
        if "--peer" in sys.argv:
            one_peer(sys.argv[sys.argv.index("--peer") + 1], folder)
            return
        if "--peers-only" not in sys.argv:
            print(f"load average {os.getloadavg()[0]:.2f}; {_option('--runs', 100)} runs × "
                  f"{WINDOWS} windows × {SELECTIONS} selections over {CANDIDATES} "
                  f"candidates, {WORK_S * 1e3:g} ms of work per window")
            if "--paired" in sys.argv:
                paired(folder, _option("--paired", 200))
            else:
                end_to_end(folder, _option("--rounds", 5), _option("--runs", 100))
        if "--peers" in sys.argv or "--peers-only" in sys.argv:
            peers()


if __name__ == "__main__":
    main()
