"""Carrying a run's context across threads.

Run and window state live in ``contextvars``. asyncio tasks inherit them automatically.
Threads do not: a function submitted to a plain ``ThreadPoolExecutor`` runs with an empty
context and records nothing. Use ``copy_context_executor()`` (or ``wrap``) so the work
stays in the run and window it was submitted from.

A thread that only works for the program (a writer, a hash beside an estimate) should
leave asynchronous signals to the main thread: ``block_async_signals()`` at its start.

Processes do not share memory, so a run never crosses a process boundary: a child
process (multiprocessing, Ray, a subprocess) that should record must open its own
``al.record(...)`` to its own file, e.g. with the parent's ``run_id`` in ``meta`` so the
files can be joined later.

Examples:
    >>> import agentlog as al
    >>> from agentlog.context import copy_context_executor
    >>> with copy_context_executor(max_workers=2) as pool:
    ...     pool.submit(lambda: al.current_run()).result() is None
    True
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import signal
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

__all__ = ["ASYNC_SIGNALS", "ContextThreadPoolExecutor", "block_async_signals",
           "copy_context_executor", "wrap"]

#: The process-directed signals a worker thread leaves to the main thread.
ASYNC_SIGNALS: frozenset[int] = frozenset(
    getattr(signal, name) for name in (
        "SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGCHLD",
        "SIGWINCH")
    if hasattr(signal, name))


def block_async_signals() -> None:
    """Block ``ASYNC_SIGNALS`` in the calling thread; call it first in a worker thread.

    Linux may hand a process-directed signal (a SIGTERM, a Ctrl-C) to any thread that does
    not block it, and Python runs the handler only on the main thread, the next time that
    thread runs bytecode: a SIGTERM that lands on a worker while the main thread sleeps or
    waits is handled only when the wait ends. Blocked in every worker, it reaches the main
    thread and interrupts the wait. Synchronous faults (SIGSEGV, SIGFPE) are never blocked.
    A no-op where threads have no signal mask (Windows).
    """
    if hasattr(signal, "pthread_sigmask"):
        with contextlib.suppress(OSError, ValueError):
            signal.pthread_sigmask(signal.SIG_BLOCK, ASYNC_SIGNALS)


def wrap(fn: Callable[P, R]) -> Callable[P, R]:
    """Bind ``fn`` to a copy of the *current* context (call this in the submitting thread)."""
    ctx = contextvars.copy_context()

    @functools.wraps(fn)
    def run_in_context(*args: P.args, **kwargs: P.kwargs) -> R:
        return ctx.run(fn, *args, **kwargs)

    return run_in_context


class ContextThreadPoolExecutor(ThreadPoolExecutor):
    """A ThreadPoolExecutor whose tasks run in a copy of the submitter's context."""

    def submit(
        self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs
    ) -> Future[R]:
        ctx = contextvars.copy_context()
        return super().submit(functools.partial(ctx.run, fn, *args, **kwargs))

    def map(self, fn: Callable[..., R], *iterables: Any, timeout: float | None = None,
            chunksize: int = 1) -> Any:
        ctx = contextvars.copy_context()
        # one fresh copy per call: Context.run is not re-entrant across threads
        return super().map(lambda *a: ctx.copy().run(fn, *a), *iterables, timeout=timeout,
                           chunksize=chunksize)


def copy_context_executor(
    max_workers: int | None = None, **kwargs: Any
) -> ContextThreadPoolExecutor:
    """A thread pool whose submitted work stays in the submitter's run and window."""
    return ContextThreadPoolExecutor(max_workers=max_workers, **kwargs)
