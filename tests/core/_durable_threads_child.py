"""Child for tests/core/test_durable_threads.py: windows returned from many threads.

Usage: ``python _durable_threads_child.py OUT SIDE DURABILITY THREADS SEED``. Records the
window ``step`` from THREADS threads in a loop under ``durability=DURABILITY``; after each
window has *returned*, appends ``"<thread>:<i>"`` to SIDE with one unbuffered ``write`` (an
O_APPEND write of a short line is atomic). The parent kills it with SIGKILL at a random
moment: every line in SIDE names a window the durability promised to keep.
"""

from __future__ import annotations

import os
import sys
import threading

import agentlog as al
from agentlog.context import copy_context_executor


@al.window("step")
def step(thread: int, i: int) -> str:
    al.score("i", float(i))
    return f"{thread}:{i}"


def main(out: str, side: str, durability: str, threads: int, seed: int) -> None:
    fd = os.open(side, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    go = threading.Event()

    def work(thread: int) -> None:
        go.wait()
        i = 0
        while True:
            done = step(thread, i)
            os.write(fd, f"{done}\n".encode())
            i += 1

    # A long frame interval: only the windows' own cuts make their frames durable.
    with al.record(out, system="threads", seed=seed, durability=durability,  # type: ignore[arg-type]
                   frame_interval=30.0), copy_context_executor(threads) as pool:
        for t in range(threads):
            pool.submit(work, t)
        print("ready", flush=True)
        go.set()
        threading.Event().wait()  # until killed


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
