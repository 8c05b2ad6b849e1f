"""SIGTERM under threaded load: a child recording windows from many threads, and one trial.

Child usage: ``python _sigterm_threads_child.py TRACE SIDE DURABILITY THREADS [BOUND]``
(BOUND: the signal handler's flush bound in seconds instead of ``SIGNAL_FLUSH_TIMEOUT``).
Records
the window ``step`` from THREADS threads in a loop (one run, the default frame interval);
after each window has *returned*, appends ``"<thread>:<i>"`` to SIDE with one unbuffered
``write`` (an O_APPEND write of a short line is atomic), so every line names a window the
program saw return.

``trial()`` (used by ``test_sigterm_threads.py`` and
``tests/benchmarks/bench_sigterm.py --threads N``) runs one child, sends SIGTERM at a
seeded random moment and reports how long the child took to end and which returned
windows the trace lacks.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

CHILD = Path(__file__).resolve()
PACKAGE_ROOT = CHILD.parents[2]


class Trial(NamedTuple):
    hung: bool  # the child did not end within the timeout after the signal
    returncode: int | None
    returned: int  # windows the child saw return before it ended
    lost: int  # of those, windows whose exit is not in the trace
    seconds: float  # from the signal to the child's end


def trial(tmp: Path, durability: str, seed: int, *, threads: int = 16,
          timeout: float = 30.0, sig: int = signal.SIGTERM,
          flush_bound: float | None = None) -> Trial:
    """One child recording from ``threads`` threads, one ``sig`` at a seeded moment;
    ``flush_bound`` replaces the child's ``SIGNAL_FLUSH_TIMEOUT``."""
    import agentlog as al  # the parent's agentlog

    trace, side = tmp / f"t-{seed}.zst", tmp / f"s-{seed}"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_ROOT), *filter(None, [
        env.get("PYTHONPATH")])])
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(trace), str(side), durability, str(threads),
         *([] if flush_bound is None else [str(flush_bound)])],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        raise RuntimeError(f"the child did not start: {proc.communicate()[1][-2000:]}")
    time.sleep(random.Random(seed).uniform(0.2, 0.6))  # recording from every thread
    sent = time.monotonic()
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
        hung = False
    except subprocess.TimeoutExpired:
        hung = True
        proc.kill()
        proc.wait()
    seconds = time.monotonic() - sent
    proc.communicate()
    returned = {line for line in side.read_text().splitlines() if line}
    kept = {str(v.exit_value()) for v in al.read(trace).windows("step") if v.exit is not None}
    trace.unlink(missing_ok=True)
    side.unlink(missing_ok=True)
    return Trial(hung, proc.returncode, len(returned), len(returned - kept), seconds)


def main(out: str, side: str, durability: str, threads: int,
         flush_bound: float | None = None) -> None:
    import agentlog as al
    from agentlog.context import copy_context_executor

    if flush_bound is not None:
        from agentlog._writer import pool as _writer_pool

        _writer_pool.SIGNAL_FLUSH_TIMEOUT = flush_bound  # read by the handler when it runs

    @al.window("step")
    def step(thread: int, i: int) -> str:
        al.score("i", float(i))
        return f"{thread}:{i}"

    fd = os.open(side, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    go = threading.Event()

    def work(thread: int) -> None:
        go.wait()
        i = 0
        while True:
            done = step(thread, i)
            os.write(fd, f"{done}\n".encode())
            i += 1

    with al.record(out, system="threads", durability=durability,  # type: ignore[arg-type]
                   mode="w"), copy_context_executor(threads) as pool:
        for t in range(threads):
            pool.submit(work, t)
        print("ready", flush=True)
        go.set()
        threading.Event().wait()  # until the signal


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]),
         float(sys.argv[5]) if len(sys.argv) > 5 else None)
