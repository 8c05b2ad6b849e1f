"""Run one way of calling a model (a sync and an async function of the client) in the route
tests: outside any run, or once in a window of a recorded run."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import agentlog as al

Sync = Callable[[Any], Any]
Async = Callable[[Any], Awaitable[Any]]


def call(sync: Sync, run_async: Async, client: Any, is_async: bool,
         times: int = 1) -> list[Any]:
    """``times`` calls, outside any run (one event loop for the async ones)."""
    if not is_async:
        return [sync(client) for _ in range(times)]

    async def main() -> list[Any]:
        return [await run_async(client) for _ in range(times)]

    return asyncio.run(main())


def in_run(sync: Sync, run_async: Async, client: Any, is_async: bool, path: Path) -> Any:
    """One call in a window of a run recorded to ``path``; what the caller got."""
    if is_async:
        async def main() -> Any:
            with al.record(path, seed=1):
                @al.window("ask", entry=lambda *a, **k: 0, exit=lambda r: 0)
                async def ask() -> Any:
                    return await run_async(client)
                return await ask()

        return asyncio.run(main())
    with al.record(path, seed=1):
        return al.window("ask", entry=lambda *a, **k: 0, exit=lambda r: 0)(
            lambda: sync(client))()
