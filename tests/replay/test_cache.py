"""The exact-input model cache: hits, misses, modes, single flight, failures, processes."""

from __future__ import annotations

import asyncio
import functools
import subprocess
import sys
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.replay import CacheKey, ModelCache, default_cache_path, request_key

MESSAGES = [{"role": "user", "content": "Which option? A) x B) y C) z D) w"}]


def key_of(**changes: Any) -> CacheKey:
    request = {"base_url": "http://127.0.0.1:8000/v1", "model": "tiny", "messages": MESSAGES,
               "temperature": 0.0, **changes}
    draw = request.pop("draw", 0)
    return request_key("openai.chat", request, draw=draw)


class Upstream:
    """A fake provider that counts its calls and answers with the call number."""

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self) -> dict[str, Any]:
        with self.lock:
            self.calls += 1
            n = self.calls
        return {"id": f"chatcmpl-{n}", "system_fingerprint": "fp-1",
                "choices": [{"message": {"content": f"answer {n}"}}]}


def run_async(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test body in a fresh event loop (no async pytest plugin needed)."""

    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return wrapper


@pytest.fixture
def cache(tmp_path: Path) -> Any:
    with ModelCache(tmp_path / "cache.sqlite3") as c:
        yield c


def test_a_miss_is_fetched_once_and_then_served(cache: ModelCache) -> None:
    upstream = Upstream()
    first = cache.call(key_of(), upstream)
    second = cache.call(key_of(), upstream)
    assert (first.status, second.status, upstream.calls) == ("miss", "hit", 1)
    assert second.response == first.response and second.fingerprint == "fp-1"
    assert second.key.hex == first.key.hex
    assert cache.stats() == {"hits": 1, "misses": 1, "upstream_calls": 1, "shared": 0}


def test_every_hit_is_a_fresh_copy(cache: ModelCache) -> None:
    cache.call(key_of(), Upstream())
    hit = cache.call(key_of(), Upstream())
    hit.response["choices"].clear()
    assert cache.call(key_of(), Upstream()).response["choices"] != []


def test_different_draws_are_different_entries(cache: ModelCache) -> None:
    upstream = Upstream()
    answers = [cache.call(key_of(draw=d), upstream).response["id"] for d in range(3)]
    assert answers == ["chatcmpl-1", "chatcmpl-2", "chatcmpl-3"] and len(cache) == 3


def test_entries_survive_reopening_and_keep_request_response_and_fingerprint(
        tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "c.sqlite3"
    with ModelCache(path) as c:
        c.call(key_of(), Upstream())
    with ModelCache(path, mode="read-only") as c:
        assert c.call(key_of(), Upstream()).response["id"] == "chatcmpl-1"
    conn = sqlite3.connect(path)
    canonical, response, fingerprint = conn.execute(
        "SELECT canonical, response, fingerprint FROM entries").fetchone()
    journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    conn.close()
    assert '"temperature":0' in canonical and '"chatcmpl-1"' in response
    assert fingerprint == "fp-1" and journal == "wal"


def test_the_default_path_follows_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    monkeypatch.delenv("AGENTLOG_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_path() == tmp_path / "xdg" / "agentlog" / "model-cache.sqlite3"
    monkeypatch.setenv("AGENTLOG_CACHE", str(tmp_path / "mine.db"))
    with ModelCache() as c:
        c.call(key_of(), Upstream())
        assert c.path == str(tmp_path / "mine.db")
    assert (tmp_path / "mine.db").exists()


# ----------------------------------------------------------------- modes

def test_off_mode_always_calls_upstream_and_stores_nothing(tmp_path: Path) -> None:
    upstream = Upstream()
    with ModelCache(tmp_path / "c.db", mode="off") as c:
        statuses = [c.call(key_of(), upstream).status for _ in range(2)]
        assert statuses == ["off", "off"] and upstream.calls == 2 and len(c) == 0
    assert not (tmp_path / "c.db").exists()


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match=r"`mode` must be one of 'read-write', 'read-only', "
                                         r"'off'; got 'frozen'"):
        ModelCache(":memory:", mode="frozen")  # type: ignore[arg-type]


def test_a_read_only_cache_that_does_not_exist_says_so(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"read-only model cache .*nope.db' does not "
                                                r"exist; record the run with mode='read-write'"):
        ModelCache(tmp_path / "nope.db", mode="read-only")


def test_a_read_only_miss_names_the_field_that_differs(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with ModelCache(path) as c:
        c.call(key_of(), Upstream())
        c.call(key_of(messages=[{"role": "user", "content": "other"}], top_p=0.5), Upstream())
    upstream = Upstream()
    with ModelCache(path, mode="read-only") as c, pytest.raises(
            al.CacheMiss, match=r"openai.chat request for model 'tiny' \(key [0-9a-f]{16}\) is "
                                r"not in the read-only model cache .*differs in 1 field\(s\): "
                                r"request.temperature: 0.7 here, 0 stored\. Record the run "
                                r"again") as info:
        c.call(key_of(temperature=0.7), upstream)
    assert info.value.differences == ("request.temperature",)
    assert info.value.key == key_of(temperature=0.7).hex and upstream.calls == 0


def test_a_read_only_miss_names_a_different_draw_and_an_added_field(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with ModelCache(path) as c:
        c.call(key_of(), Upstream())
    with ModelCache(path, mode="read-only") as c, pytest.raises(al.CacheMiss) as info:
        c.call(key_of(draw=1, seed=3), Upstream())
    assert info.value.differences == ("draw", "request.seed")
    assert "request.seed: 3 here, absent stored" in str(info.value)


def test_a_read_only_miss_without_that_model_lists_the_stored_models(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with ModelCache(path) as c:
        c.call(key_of(), Upstream())
    with ModelCache(path, mode="read-only") as c, pytest.raises(
            al.CacheMiss, match=r"holds no openai.chat request for that model; it holds "
                                r"openai.chat requests for models 'tiny'"):
        c.call(key_of(model="big"), Upstream())


# ----------------------------------------------------------------- failures

def test_a_failure_propagates_unchanged_and_is_never_cached(cache: ModelCache) -> None:
    boom = ConnectionError("429 rate limited")

    def failing() -> dict[str, Any]:
        raise boom

    with pytest.raises(ConnectionError) as info:
        cache.call(key_of(), failing)
    assert info.value is boom and len(cache) == 0
    assert cache.call(key_of(), Upstream()).status == "miss"


@run_async
async def test_an_async_failure_propagates_unchanged_and_is_never_cached(
        cache: ModelCache) -> None:
    boom = TimeoutError("upstream timed out")

    async def failing() -> dict[str, Any]:
        raise boom

    with pytest.raises(TimeoutError) as info:
        await cache.acall(key_of(), failing)
    assert info.value is boom and len(cache) == 0


def test_a_response_that_is_not_json_is_returned_but_not_stored(cache: ModelCache) -> None:
    body = {"id": "x", "raw": object()}
    with pytest.warns(al.InstrumentationWarning, match=r"not JSON-compatible .* returned but "
                                                      r"not stored"):
        result = cache.call(key_of(), lambda: body)
    assert result.response is body and len(cache) == 0


# ----------------------------------------------------------------- single flight

@run_async
async def test_fifty_concurrent_identical_async_calls_share_one_upstream_call(
        cache: ModelCache) -> None:
    release = asyncio.Event()
    upstream = Upstream()

    async def fetch() -> dict[str, Any]:
        await release.wait()
        return upstream()

    async def opener() -> None:
        release.set()  # runs after all 50 callers have joined: tasks start in FIFO order

    results = await asyncio.gather(*(cache.acall(key_of(), fetch) for _ in range(50)),
                                   opener())
    statuses = [r.status for r in results[:50]]  # type: ignore[union-attr]
    assert upstream.calls == 1
    assert statuses.count("miss") == 1 and statuses.count("hit") == 49
    assert {r.response["id"] for r in results[:50]} == {"chatcmpl-1"}  # type: ignore[union-attr]
    assert cache.stats()["shared"] == 49


@run_async
async def test_callers_sharing_a_failed_call_all_get_its_exception(cache: ModelCache) -> None:
    release = asyncio.Event()
    calls = 0

    async def fetch() -> dict[str, Any]:
        nonlocal calls
        calls += 1
        await release.wait()
        raise PermissionError("401 invalid key")

    async def opener() -> None:
        release.set()

    results = await asyncio.gather(*(cache.acall(key_of(), fetch) for _ in range(5)), opener(),
                                   return_exceptions=True)
    assert calls == 1 and all(isinstance(r, PermissionError) for r in results[:5])
    assert len(cache) == 0


@run_async
async def test_a_cancelled_leader_lets_a_waiting_caller_fetch_itself(cache: ModelCache) -> None:
    started = asyncio.Event()
    upstream = Upstream()

    async def hanging() -> dict[str, Any]:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def fetch() -> dict[str, Any]:
        return upstream()

    leader = asyncio.ensure_future(cache.acall(key_of(), hanging))
    await started.wait()
    follower = asyncio.ensure_future(cache.acall(key_of(), fetch))
    await asyncio.sleep(0)
    leader.cancel()
    result = await follower
    assert result.status == "miss" and upstream.calls == 1
    with pytest.raises(asyncio.CancelledError):
        await leader


def test_concurrent_identical_calls_from_threads_share_one_upstream_call(
        cache: ModelCache) -> None:
    n = 8
    arrived = threading.Barrier(n)
    upstream = Upstream()
    results: list[str] = []

    def fetch() -> dict[str, Any]:
        return upstream()

    def worker() -> None:
        arrived.wait(timeout=30)
        results.append(cache.call(key_of(), fetch).status)

    threads = [threading.Thread(target=worker) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    # Whoever comes after the one fetch either waited for it or found it stored.
    assert upstream.calls == 1 and sorted(results) == ["hit"] * (n - 1) + ["miss"]


def test_threads_writing_distinct_keys_all_land(cache: ModelCache) -> None:
    def worker(t: int) -> None:
        for i in range(25):
            cache.call(key_of(seed=t * 100 + i), Upstream())

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(cache) == 200


def test_two_processes_writing_one_cache_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    script = (
        "import sys\n"
        "from agentlog.replay import ModelCache, request_key\n"
        "me = int(sys.argv[2])\n"
        "with ModelCache(sys.argv[1]) as c:\n"
        "    for i in range(60):\n"
        "        seed = i if i < 20 else me * 1000 + i  # 20 keys both write, 40 each alone\n"
        "        k = request_key('openai.chat', {'model': 'm', 'messages': [], 'seed': seed})\n"
        "        c.call(k, lambda: {'writer': me, 'seed': seed})\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path), str(me)])
             for me in (1, 2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    with ModelCache(path, mode="read-only") as c:
        assert len(c) == 20 + 2 * 40
        shared = c.call(request_key("openai.chat", {"model": "m", "messages": [], "seed": 5}),
                        Upstream())
        assert shared.response["writer"] in (1, 2) and shared.response["seed"] == 5


# ----------------------------------------------------------------- traces as a cache

def test_a_recorded_trace_serves_a_frozen_replay(tmp_path: Path) -> None:
    trace = tmp_path / "run.zst"
    upstream = Upstream()
    with ModelCache(":memory:") as live, al.record(trace, seed=1):
        for temperature in (0.0, 0.5):
            key = key_of(temperature=temperature)
            result = live.call(key, upstream)
            al.llm_call("openai.chat", "tiny", request=key.canonical["request"],
                        response=result.response, cache_key=key.digest,
                        cache=result.status, fingerprint=result.fingerprint)
    frozen = ModelCache.from_traces([trace])
    assert frozen.mode == "read-only" and len(frozen) == 2
    served = frozen.call(key_of(temperature=0.5), Upstream())
    assert served.status == "hit" and served.response["id"] == "chatcmpl-2"
    assert served.fingerprint == "fp-1"
    with pytest.raises(al.CacheMiss, match=r"request.temperature: 0.7 here, 0.5 stored") as e:
        frozen.call(key_of(temperature=0.7), Upstream())
    assert e.value.differences == ("request.temperature",)


def test_a_trace_cache_skips_failed_calls_and_calls_without_a_key(tmp_path: Path) -> None:
    trace = tmp_path / "run.zst"
    key = key_of()
    with al.record(trace, seed=1):
        al.llm_call("openai.chat", "tiny", request=key.canonical["request"], response=None,
                    cache_key=key.digest, error=ConnectionError("500"))
        al.llm_call("openai.chat", "tiny", request={"model": "tiny"}, response={"id": "x"})
    frozen = ModelCache.from_traces(str(trace))
    assert len(frozen) == 0
    with pytest.raises(al.CacheMiss):
        frozen.call(key, Upstream())


def test_from_traces_needs_a_trace() -> None:
    with pytest.raises(ValueError, match=r"`paths` must name at least one trace file"):
        ModelCache.from_traces([])
