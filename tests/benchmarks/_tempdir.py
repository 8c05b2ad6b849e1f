"""The temporary folder every benchmark writes under, removed however the run ends.

``with bench_dir("agentlog-bench-x-") as folder:`` creates the folder and removes it on a
normal exit, on an exception, on Ctrl-C and on SIGTERM or SIGHUP (``timeout``, a closed
terminal): inside the block those signals raise ``SystemExit(128 + signum)``, so the
``finally`` runs (agentlog's own SIGTERM handler, installed by ``al.record``, writes the
queued records and then calls this one). Before removing the folder it waits (bounded) for
agentlog's writers, so no file appears in it while it is removed; a folder that cannot be
removed is reported on stderr, never silently left. Only SIGKILL leaves it behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from types import FrameType

SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def bench_dir(prefix: str = "agentlog-bench-") -> Iterator[str]:
    """A fresh temporary folder (its path), removed when the block ends in any way."""
    folder = tempfile.mkdtemp(prefix=prefix)

    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    installed = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, stop) for sig in SIGNALS} if installed else {}
    try:
        yield folder
    finally:
        for sig, handler in previous.items():
            if signal.getsignal(sig) is stop:  # a handler chained after ours stays
                signal.signal(sig, handler)
        remove(folder)


def remove(folder: str) -> None:
    """Remove ``folder`` after agentlog's writers have written what they hold."""
    agentlog = sys.modules.get("agentlog")
    if agentlog is not None:
        with contextlib.suppress(Exception):  # cleanup must not hide the run's own error
            agentlog.flush(timeout=10)
    for _ in range(3):  # a file created while the tree was listed: list it again
        shutil.rmtree(folder, ignore_errors=True)
        if not os.path.exists(folder):
            return
    print(f"warning: could not remove the benchmark folder {folder}; delete it by hand",
          file=sys.stderr)
