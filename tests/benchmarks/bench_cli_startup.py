"""Start-up time of ``agentlog --help`` against ``python -c pass`` (issue 16, item 7).

Run: ``python tests/benchmarks/bench_cli_startup.py [--rounds 15]``. Not collected by
pytest. Each round runs, in fresh interpreters and in alternating order, ``python -c pass``
(the reference), ``agentlog --help``, ``agentlog estimate --help`` and ``agentlog inspect
--help`` (a command's own help loads that command); it prints the min and median wall time
of each and the median of the per-round ratios to the reference. Exits non-zero when the
median of ``agentlog --help`` is above ``--target-s`` (default 0.35 s). Writes no files.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CASES = {
    "python -c pass": ["-c", "pass"],
    "agentlog --help": ["-m", "agentlog.cli", "--help"],
    "agentlog estimate --help": ["-m", "agentlog.cli", "estimate", "--help"],
    "agentlog inspect --help": ["-m", "agentlog.cli", "inspect", "--help"],
}


def _wall(args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--target-s", type=float, default=0.35)
    args = parser.parse_args()
    for case in CASES.values():  # warm the file cache and the bytecode
        _wall(case)
    samples: dict[str, list[float]] = {name: [] for name in CASES}
    for i in range(args.rounds):
        order = list(CASES) if i % 2 == 0 else list(reversed(CASES))
        for name in order:
            samples[name].append(_wall(CASES[name]))
    ref = samples["python -c pass"]
    for name, s in samples.items():
        ratio = statistics.median(a / b for a, b in zip(s, ref, strict=True))
        print(f"{name:<28} min {min(s):6.3f} s   median {statistics.median(s):6.3f} s   "
              f"{ratio:5.1f}× python -c pass (median of {args.rounds} paired rounds)")
    median = statistics.median(samples["agentlog --help"])
    ok = median <= args.target_s
    print(f"agentlog --help median {median:.3f} s: {'within' if ok else 'ABOVE'} the "
          f"{args.target_s} s target")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
