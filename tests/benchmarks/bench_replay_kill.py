"""Kill safety of the replay engine over many trials: SIGINT, SIGTERM and SIGKILL at random
moments.

Run: ``python tests/benchmarks/bench_replay_kill.py [--trials 20] [--units 200]``
(prints a table; exits 1 if any trial broke a claim; its temp files are removed).

Per trial, a child process replays ``--units`` units (a sync job sleeping 10 ms, 8 at
once) into a fresh output and is sent SIGINT, SIGTERM or SIGKILL at a random moment: one
trial in five during the start (before any output), the others while the output is being
written. Then:

* after SIGINT the output, if any, must pass ``agentlog verify`` (Ctrl-C leaves a valid
  trace);
* after any of them, re-running the replay (a child without a signal) must finish with
  every unit sealed and exactly the scores of an uninterrupted run, the output must then
  pass ``agentlog verify`` (the re-run sets aside a run a kill cut short, and a torn
  frame), and a third run must do nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import agentlog as al  # noqa: E402
from agentlog.replay import read_units  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _tempdir import bench_dir  # noqa: E402

SLEEP = 0.01
CONCURRENCY = 8


def _child(out: Path, n: int, sleep: float) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.replay._replay_child", str(out), str(n), str(sleep),
         str(CONCURRENCY)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def _scores(out: Path) -> dict[str, list[tuple[Any, ...]]]:
    return {k: [(s.name, s.value, s.channel, s.layout, s.wave, s.transition, s.state_hash)
                for s in u.scores] for k, u in read_units(out).items() if u.status == "ok"}


def _complete(out: Path, n: int) -> dict[str, Any]:
    child = _child(out, n, 0.0)
    stdout, stderr = child.communicate(timeout=300)
    if child.returncode != 0:
        raise RuntimeError(f"re-run failed (rc {child.returncode}): {stderr[-2000:]}")
    return dict(json.loads(stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--units", type=int, default=400)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args()
    n = args.units
    rng = random.Random(args.seed)
    broken: list[str] = []
    with bench_dir("agentlog-bench-replay-kill-") as folder:
        tmp = Path(folder)
        ref = tmp / "ref.zst"
        t0 = time.perf_counter()
        first = _child(ref, n, SLEEP)
        while first.poll() is None and not ref.exists():
            time.sleep(0.005)
        appears = time.perf_counter() - t0
        first.communicate(timeout=300)
        expected = time.perf_counter() - t0
        reference = _scores(ref)
        assert len(reference) == n
        print(f"{n} units, uninterrupted child run {expected:.2f} s (with interpreter start; "
              f"first output after {appears:.2f} s); "
              f"{args.trials} trials per signal, load {os.getloadavg()[0]:.2f}")
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            sealed_at_kill: list[int] = []
            no_output = 0
            cut = 0
            for trial in range(args.trials):
                out = tmp / f"{sig.name}-{trial}.zst"
                child = _child(out, n, SLEEP)
                # One trial in five during the start (before any output), the others
                # while the output is being written (waiting for the file, not a clock,
                # to tell when writing began: the machine's load varies).
                if trial % 5 == 0:
                    time.sleep(rng.uniform(0.0, appears))
                else:
                    while child.poll() is None and not out.exists():
                        time.sleep(0.002)
                    time.sleep(rng.uniform(0.0, 0.8 * (expected - appears)))
                child.send_signal(sig)
                child.communicate(timeout=120)
                if out.exists() and out.stat().st_size > 0:
                    if sig == signal.SIGINT:
                        report = al.verify(out)
                        if not report.ok:
                            broken.append(f"{sig.name} trial {trial}: verify: "
                                          f"{report.problems[:2]}")
                    sealed_at_kill.append(len(read_units(out)))
                    killed = al.verify(out)
                    cut += any(p.kind in ("run-not-ended", "truncated")
                               for p in killed.problems)
                else:
                    no_output += 1
                summary = _complete(out, n)
                if summary["failed"] or summary["done"] + summary["skipped"] != n:
                    broken.append(f"{sig.name} trial {trial}: re-run summary {summary}")
                resumed = al.verify(out)
                if not resumed.ok:
                    broken.append(f"{sig.name} trial {trial}: verify after the re-run: "
                                  f"{resumed.problems[:2]}")
                if _scores(out) != reference:
                    broken.append(f"{sig.name} trial {trial}: scores differ from the "
                                  "uninterrupted run")
                again = _complete(out, n)
                if again["done"] != 0 or again["skipped"] != n:
                    broken.append(f"{sig.name} trial {trial}: third run did work: {again}")
                out.unlink(missing_ok=True)
            mid = [s for s in sealed_at_kill if 0 < s < n]
            print(f"  {sig.name:<8} {args.trials} trials: killed before any output "
                  f"{no_output}, mid-way {len(mid)} (units sealed at the kill: min "
                  f"{min(mid, default=0)}, max {max(mid, default=0)}), after the end "
                  f"{sum(1 for s in sealed_at_kill if s == n)}, with nothing sealed "
                  f"{sum(1 for s in sealed_at_kill if s == 0)}; left a cut run or torn "
                  f"frame {cut}")
        print(f"claims broken: {len(broken)}")
        for line in broken:
            print("  " + line)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
