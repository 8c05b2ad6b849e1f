"""``agentlog.context.block_async_signals``: worker threads leave asynchronous signals to
the main thread, where Python runs signal handlers (see also test_crash's pool threads)."""

from __future__ import annotations

import signal
import threading

import pytest

from agentlog.context import ASYNC_SIGNALS, block_async_signals

pytestmark = pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"),
                                reason="no thread signal masks")


def test_a_worker_that_calls_it_blocks_the_async_signals_and_no_fault() -> None:
    masks: list[set[int]] = []

    def work() -> None:
        block_async_signals()
        masks.append(set(signal.pthread_sigmask(signal.SIG_BLOCK, [])))

    worker = threading.Thread(target=work)
    worker.start()
    worker.join(10)
    (mask,) = masks
    assert {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD} <= ASYNC_SIGNALS
    assert mask >= ASYNC_SIGNALS
    # Synchronous faults stay deliverable: blocking them would hang or kill silently.
    assert not {signal.SIGSEGV, signal.SIGFPE, signal.SIGBUS, signal.SIGILL} & mask
    # Only the calling thread's mask changes.
    assert signal.SIGTERM not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
