"""``verify`` against plain reading (``iter_records``) on large, realistic traces (issue 30.3).

Run: ``python tests/benchmarks/bench_verify_speed.py [--runs 2000] [--small 1000000]
[--repeat 3] [--before DIR]``. Not collected by pytest. For each file it prints the CPU
seconds of a pass of ``al.iter_records`` and of ``al.verify`` (minimum over ``--repeat``,
in a fresh child process) and their ratio, and exits non-zero when a ratio is above
``--target`` (default 2.0).

The files: ``--runs`` runs recorded with ``al.record`` into one file (8 tasks, a seed
each): each run opens six ``step`` windows; each window selects a document from a pool of
10 to 200 candidates (a few pools shared by every run, most made fresh per run), re-ranks
the same pool at the next two steps, decides whether to go on (``proceed``) and scores the
window; so the file holds what an agent's traces hold (pool Blobs, selections over pools
of varied sizes, continuations, scores, windows, one RunEnd per run). ``--small``: one run
of small records, 9 scores to 1 continuation (``bench_verify_rss.py``'s file).
``--runs-in-one-frame N`` times ``verify`` of one frame holding ``N`` runs that all end
inside it (written with the frame encoder), which used to be quadratic.

``--before DIR`` also measures another agentlog, in alternation with this one so both see
the same load: DIR holds its ``agentlog`` package laid out as installed (``cli``,
``replay``, ``estimators``, ``adapters`` inside it), e.g. ``git archive`` of an older
commit, rearranged.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).parent))
import numpy as np
from _tempdir import bench_dir

import agentlog as al

SIZES = (10, 20, 50, 100, 200)

CHILD = """
import sys, time
import agentlog as al
path, repeat = sys.argv[1], int(sys.argv[2])
def cpu(fn):
    t0 = time.thread_time()
    fn()
    return time.thread_time() - t0
report = al.verify(path)
read = min(cpu(lambda: sum(1 for _ in al.iter_records(path))) for _ in range(repeat))
check = min(cpu(lambda: al.verify(path)) for _ in range(repeat))
print(read, check, report.records, int(report.ok))
"""


@al.window("step")
def step(pool: list[str], probs: np.ndarray, k: int) -> str:
    i = al.select(probs, candidates=pool, name="doc")
    for _ in range(2):  # re-rank the same pool at the next steps
        al.select(probs[::-1].copy(), candidates=pool, name="doc")
    al.proceed(0.9, name="stop")
    al.score("f1", (i + k) % 7 / 7)
    return pool[i]


def write_agent_trace(path: Path, runs: int) -> None:
    rng = np.random.default_rng(0)
    shared = [[f"doc-{n}-{j}" for j in range(n)] for n in SIZES]
    for r in range(runs):
        with al.record(path, seed=r, task=f"q-{r % 8}", system="bench",
                       frame_interval=3600):
            for k in range(6):
                n = SIZES[(r + k) % len(SIZES)]
                pool = (shared[(r + k) % len(SIZES)] if k % 3 == 0
                        else [f"r{r}-w{k}-{j}" for j in range(n)])
                step(pool, rng.dirichlet(np.ones(n)), k)
    al.flush()


def measure(path: Path, repeat: int, before: str | None) -> tuple[float, float, int, bool]:
    """(iter_records s, verify s, records, ok) of a fresh child; ``before``: its
    PYTHONPATH."""
    env = dict(os.environ)
    if before is not None:
        env["PYTHONPATH"] = before
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), str(repeat)], env=env,
                         cwd=before or None, check=True, capture_output=True,
                         text=True).stdout.split()
    return float(out[0]), float(out[1]), int(out[2]), out[3] == "1"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--small", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2, help="alternations with --before")
    ap.add_argument("--target", type=float, default=2.0)
    ap.add_argument("--before", default=None)
    ap.add_argument("--runs-in-one-frame", type=int, default=0)
    args = ap.parse_args()
    missed = []
    with bench_dir(prefix="agentlog-verify-speed-") as d:
        if args.runs_in_one_frame:
            sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
            from test_verify_scaling import write_runs_in_one_frame

            path = write_runs_in_one_frame(Path(d) / "frame.zst", args.runs_in_one_frame)
            t0 = time.thread_time()
            report = al.verify(path)
            print(f"verify of {args.runs_in_one_frame:,} runs ending in one frame: "
                  f"{time.thread_time() - t0:.2f} s CPU ({report.records:,} records, "
                  f"ok={report.ok})")
            return 0 if report.ok else 1
        files = {}
        if args.runs:
            files[f"{args.runs:,} agent runs"] = path = Path(d) / "agent.zst"
            write_agent_trace(path, args.runs)
        if args.small:
            from bench_verify_rss import write_trace

            files[f"{args.small:,} small records"] = path = Path(d) / "small.zst"
            write_trace(path, args.small)
        for label, path in files.items():
            print(f"{label}: {path.stat().st_size / 1e6:.1f} MB on disk")
            variants = {"this": None} if args.before is None else {
                "before": args.before, "this": None}
            best: dict[str, list[float]] = {}
            for _ in range(args.rounds if args.before else 1):
                for name, pythonpath in variants.items():
                    read, check, n, ok = measure(path, args.repeat, pythonpath)
                    assert ok, (name, label)
                    got = best.setdefault(name, [read, check])
                    got[:] = [min(got[0], read), min(got[1], check)]
            for name, (read, check) in best.items():
                ratio = check / read
                on_target = ratio <= args.target
                print(f"  {name:<6} iter_records {read:6.3f} s ({n / read / 1e6:4.2f} M "
                      f"records/s)  verify {check:6.3f} s ({check / n * 1e6:5.2f} µs/record)"
                      f"  ratio {ratio:5.2f}" + ("" if name == "before" else
                      f"  target <= {args.target:g} {'ok' if on_target else 'MISSED'}"))
                if name == "this" and not on_target:
                    missed.append(label)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
