"""A cancelled single-flight leader hands the flight to one waiting caller.

Cancelling the caller that fetched for 49 others used to send all 49 upstream at once
(each fetched for itself); now the first of them to wake fetches in its place and the
other 48 wait for it, in asyncio tasks and threads alike.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from agentlog.replay import ModelCache
from tests.replay.test_cache import Upstream, key_of, run_async


@pytest.fixture
def cache(tmp_path: Path) -> Any:
    with ModelCache(tmp_path / "cache.sqlite3") as c:
        yield c


@run_async
async def test_cancelling_the_leader_of_fifty_async_callers_makes_two_upstream_calls(
        cache: ModelCache) -> None:
    release = asyncio.Event()
    upstream = Upstream()
    fetches = 0

    async def fetch() -> dict[str, Any]:
        nonlocal fetches
        fetches += 1
        await release.wait()
        return upstream()

    tasks = [asyncio.ensure_future(cache.acall(key_of(), fetch)) for _ in range(50)]
    while fetches < 1:
        await asyncio.sleep(0)
    for _ in range(3):
        await asyncio.sleep(0)  # every follower has joined the flight
    tasks[0].cancel()
    while fetches < 2 and not all(t.done() for t in tasks[1:]):
        await asyncio.sleep(0)
    release.set()
    results = await asyncio.gather(*tasks[1:])
    with pytest.raises(asyncio.CancelledError):
        await tasks[0]
    assert fetches == 2 and upstream.calls == 1
    assert cache.stats()["upstream_calls"] == 2
    statuses = [r.status for r in results]
    assert statuses.count("miss") == 1 and statuses.count("hit") == 48
    assert {r.response["id"] for r in results} == {"chatcmpl-1"}


def test_an_interrupted_leader_thread_hands_the_flight_to_one_waiting_thread(
        cache: ModelCache) -> None:
    n = 8
    upstream = Upstream()
    leading = threading.Event()
    followers_in = threading.Event()
    fetches: list[str] = []
    results: list[str] = []

    def interrupted() -> dict[str, Any]:
        fetches.append("leader")
        leading.set()
        followers_in.wait(30)
        raise KeyboardInterrupt  # a BaseException: the leader is gone, not failed

    def fetch() -> dict[str, Any]:
        fetches.append("follower")
        return upstream()

    def leader() -> None:
        with pytest.raises(KeyboardInterrupt):
            cache.call(key_of(), interrupted)

    def follower() -> None:
        results.append(cache.call(key_of(), fetch).status)

    first = threading.Thread(target=leader)
    first.start()
    assert leading.wait(30)
    others = [threading.Thread(target=follower) for _ in range(n - 1)]
    for t in others:
        t.start()
    # Most followers wait on the flight by then; one arriving later finds the next
    # flight or the stored answer: either way exactly one of them fetches.
    threading.Timer(0.2, followers_in.set).start()
    for t in [first, *others]:
        t.join(timeout=60)
    assert fetches.count("leader") == 1 and fetches.count("follower") == 1
    assert sorted(results) == ["hit"] * (n - 2) + ["miss"]
