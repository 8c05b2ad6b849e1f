"""SIGTERM at random moments: a child recording windows in a tight loop, and one trial.

Child usage: ``python _sigterm_child.py TRACE DURABILITY PROGRESS [in-event-set]``. The
child records windows ``step(0), step(1), ...`` (window id ``i`` for ``step(i)``) and,
after each one returns, writes ``i`` into the 8-byte PROGRESS file with ``pwrite`` (no
pipe that could fill up and block it). With ``in-event-set`` it sends itself SIGTERM
from inside the first ``threading.Event.set()`` its main thread makes (holding that
event's lock), the moment that deadlocked the handler of agentlog 0.x.

``trial()`` (used by ``test_sigterm.py`` and ``tests/benchmarks/bench_sigterm.py``)
runs one child, sends SIGTERM (or SIGKILL) after a seeded random delay and reports
whether it hung and how many returned windows the trace lacks.
"""

from __future__ import annotations

import os
import random
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

CHILD = Path(__file__).resolve()
PACKAGE_ROOT = CHILD.parents[2]


class Trial(NamedTuple):
    hung: bool  # the child did not end within the timeout after SIGTERM
    returncode: int | None
    returned: int  # windows that had returned when the signal came
    lost: int  # of those, windows whose exit is not in the trace
    seconds: float  # from SIGTERM to the child's end


def trial(tmp: Path, durability: str, seed: int, *, in_event_set: bool = False,
          timeout: float = 20.0, sig: int = signal.SIGTERM) -> Trial:
    """One child, one ``sig`` (SIGTERM; or SIGKILL) at a seeded random moment."""
    from agentlog._reader import read  # the parent's agentlog
    from agentlog.records import WindowExit

    rng = random.Random(seed)
    trace, progress = tmp / f"t-{seed}.zst", tmp / f"p-{seed}"
    progress.write_bytes(struct.pack("<q", -1))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    args = [sys.executable, str(CHILD), str(trace), durability, str(progress)]
    proc = subprocess.Popen(args + (["in-event-set"] if in_event_set else []), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while _progress(progress) < 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)  # wait until the child is recording
    time.sleep(rng.random() * 0.2)
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
    returned = _progress(progress) + 1
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if returned <= 0:
        raise RuntimeError(f"the child never recorded a window: {stderr}")
    done = {r.window for r in read(trace).records if type(r) is WindowExit}
    lost = sum(1 for i in range(returned) if i not in done)
    trace.unlink(missing_ok=True)
    progress.unlink(missing_ok=True)
    return Trial(hung, proc.returncode, returned, lost, seconds)


def _progress(path: Path) -> int:
    data = path.read_bytes()
    return struct.unpack("<q", data)[0] if len(data) == 8 else -1


def _signal_inside_event_set() -> None:
    original = threading.Event.set
    armed = [True]

    def set_then_signal(self: threading.Event) -> None:
        if armed[0] and threading.current_thread() is threading.main_thread():
            armed[0] = False
            with self._cond:  # type: ignore[attr-defined]
                os.kill(os.getpid(), signal.SIGTERM)  # the handler runs in here
                self._flag = True  # type: ignore[attr-defined]
                self._cond.notify_all()  # type: ignore[attr-defined]
            return
        original(self)

    threading.Event.set = set_then_signal  # type: ignore[method-assign]


def main() -> None:
    import agentlog as al

    trace, durability, progress = sys.argv[1:4]
    fd = os.open(progress, os.O_WRONLY)

    @al.window("step")
    def step(i: int) -> int:
        al.score("i", float(i))
        return i

    with al.record(trace, durability=durability, mode="w"):  # type: ignore[arg-type]
        step(0)
        os.pwrite(fd, struct.pack("<q", 0), 0)
        if len(sys.argv) > 4:
            _signal_inside_event_set()
        i = 1
        while True:
            step(i)
            os.pwrite(fd, struct.pack("<q", i), 0)  # window i has returned
            i += 1


if __name__ == "__main__":
    main()
