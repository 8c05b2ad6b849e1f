"""Peak memory of a fresh child process, shared by the benchmark scripts."""

from __future__ import annotations

import subprocess
import sys

# ru_maxrss survives fork and exec on Linux (a child starts with its parent's peak), so
# the child resets its peak (clear_refs 5) and reads VmHWM, its own high-water mark.
PREAMBLE = """
def _reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
def _peak_kb():
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:"))
_reset_peak()
"""


def run_child(body: str, *args: str) -> list[str]:
    """Run ``PREAMBLE + body`` in a fresh interpreter; its stdout, split in words.

    ``body`` ends by printing its results, e.g. ``print(n, seconds, _peak_kb())``.
    """
    out = subprocess.run([sys.executable, "-c", PREAMBLE + body, *args], check=True,
                         capture_output=True, text=True).stdout
    return out.split()
