"""Child process for tests/core/test_crash.py: writes a deterministic record sequence.

Usage: ``python _crash_child.py OUT MODE [SEED]``

MODE:
  kill        write forever in bursts, flush every so often and print the number of
              records flushed so far; the parent kills it with SIGKILL.
  term        put N records (no flush), print N, sleep; the parent sends SIGTERM.
  term-chain  like ``term``, with a Python SIGTERM handler installed before the
              writer (it prints "chained" and exits with status 7).
  exit        put N records, print N and return without closing the writer.

Record ``i`` of the sequence is ``record(i)``; the parent imports this file to
rebuild the expected sequence.

Uses only ``agentlog._writer.TraceWriter``.
"""

from __future__ import annotations

import hashlib
import random
import signal
import sys
import time
from typing import Any

from agentlog._writer import TraceWriter
from agentlog.records import Blob, Continuation, Score, Selection, WindowEnter, WindowExit

N_TERM = 5000
MAX_RECORDS = 30_000  # a kill test child stops writing here and waits to be killed


def record(i: int) -> Any:
    """Record ``i`` of the deterministic sequence (a mix of types and sizes)."""
    h = hashlib.sha256(i.to_bytes(8, "little")).digest()
    k = i % 7
    if k == 0:
        return WindowEnter(run=0, window=i, name="step", parent=-1, t_ns=i, entry_hash=h,
                           entry=h * (i % 3))
    if k == 1:
        return Continuation(run=0, window=i - 1, name="stop", step=i, p=1 / (i + 1),
                            u=(i * 0.618033988749895) % 1.0, decision=i % 2 == 0, t_ns=i)
    if k == 2:
        n = 1 + i % 50
        return Selection(run=0, window=i - 2, name="doc", step=i, owner="model", pool=h, n=n,
                         probs=bytes(8 * n), draws=h[:8] * n, choice=i % n, n_zero=n,
                         generator="test/1", t_ns=i)
    if k == 3:
        return Score(run=0, window=i - 3, name="f1", value=i / 7, channel="c", t_ns=i)
    if k == 4:
        # Now and then a 256 KB blob: frames of very different sizes.
        return Blob(hash=h, data=h * (8192 if i % 301 == 4 else 1 + i % 200), kind="artifact")
    if k == 5:
        return WindowExit(run=0, window=i - 5, name="step", t_ns=i, status=0, exit_hash=h,
                          exit=None, receipt=h, wall_ns=i)
    return Score(run=0, window=-1, name=f"s{i % 13}", value=float(i), t_ns=i)


def _kill_mode(out: str, seed: int) -> None:
    rng = random.Random(seed)
    w = TraceWriter(out, frame_records=rng.choice([16, 64, 256, 4096]), frame_interval=0.01)
    i = 0
    flushed_at = 0
    while True:
        if i < MAX_RECORDS:
            for _ in range(rng.randint(1, 200)):
                w.put(record(i))
                i += 1
        if i - flushed_at >= rng.randint(50, 2000) or i >= MAX_RECORDS:
            w.flush()
            flushed_at = i
            print(i, flush=True)
        if rng.random() < 0.3:
            time.sleep(rng.random() * 0.005)


def _put_and_wait(out: str) -> None:
    w = TraceWriter(out, frame_records=10**6, frame_interval=3600)
    for i in range(N_TERM):
        w.put(record(i))
    print(N_TERM, flush=True)
    time.sleep(60)


def main(argv: list[str]) -> None:
    out, mode = argv[1], argv[2]
    seed = int(argv[3]) if len(argv) > 3 else 0
    if mode == "kill":
        _kill_mode(out, seed)
    elif mode == "term":
        _put_and_wait(out)
    elif mode == "term-chain":
        def on_term(signum: int, frame: object) -> None:
            print("chained", flush=True)
            sys.exit(7)

        signal.signal(signal.SIGTERM, on_term)
        _put_and_wait(out)
    elif mode == "exit":
        w = TraceWriter(out, frame_records=10**6, frame_interval=3600)
        for i in range(N_TERM):
            w.put(record(i))
        print(N_TERM, flush=True)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv)
