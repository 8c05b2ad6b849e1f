"""The exact-input model cache: key, hit latency and 8-thread throughput, against references
measured in the same run.

Run: ``python tests/benchmarks/bench_cache.py`` (prints a table; asserts nothing; its temp
files are removed at the end).

Targets (issue 12): a hit for a 4 KB request in ≤ 200 µs (key + lookup + decoding the
response); throughput with 8 threads. References: ``hashlib.sha256`` of the request's JSON
(``json.dumps(sort_keys=True)``, the obvious hand-rolled key) and a bare primary-key
``SELECT`` on the same SQLite file.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _tempdir import bench_dir
from _timing import interleaved, row

from agentlog.replay import ModelCache, request_key


def request_of(size: int, salt: int = 0) -> dict[str, Any]:
    """A chat request of about ``size`` bytes of JSON: a system prompt, a few turns."""
    turn = "Which of the options is supported by the retrieved evidence? " * 3
    messages = [{"role": "system", "content": "You are a careful reviewer. Answer A-D."}]
    while len(json.dumps(messages)) < size - 300:
        messages.append({"role": "user" if len(messages) % 2 else "assistant",
                         "content": f"{turn} ({salt}, {len(messages)})"})
    return {"base_url": "https://api.openai.com/v1", "model": "gpt-4o-mini",
            "messages": messages, "temperature": 0.0, "max_tokens": 1, "logprobs": True,
            "top_logprobs": 20, "timeout": 30, "seed": salt}


def response_of(size: int) -> dict[str, Any]:
    top = [{"token": t, "logprob": -1.0 - i / 10, "bytes": list(t.encode())}
           for i, t in enumerate("ABCDEFGHIJKLMNOPQRST")]
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-4o",
            "system_fingerprint": "fp_1", "usage": {"prompt_tokens": size // 4,
                                                    "completion_tokens": 1},
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "B"},
                         "logprobs": {"content": [{"token": "B", "logprob": -0.2,
                                                   "bytes": [66], "top_logprobs": top}]}}]}


def main() -> None:
    with bench_dir("agentlog-bench-cache-") as tmp:
        run(Path(tmp))


def run(tmp: Path) -> None:
    path = tmp / "cache.sqlite3"
    cache = ModelCache(path)
    request = request_of(4096)
    body = response_of(4096)
    print(f"request: {len(json.dumps(request))} bytes of JSON; response: "
          f"{len(json.dumps(body))} bytes; SQLite WAL at {path}")
    for salt in range(2000):  # a store that is not trivially small
        cache.call(request_key("openai.chat", request_of(4096, salt + 1)), lambda: body)
    key = request_key("openai.chat", request)
    cache.call(key, lambda: body)

    def hand_key() -> bytes:
        return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).digest()

    def our_key() -> object:
        return request_key("openai.chat", request)

    ref, own = interleaved(hand_key, our_key, number=2000)
    print(row("request_key (4 KB chat request)", own, ref, "sha256(json.dumps)"))
    print(row("  reference: sha256(json.dumps(sort_keys=True))", ref))

    conn = sqlite3.connect(path)

    def bare_select() -> object:
        return conn.execute("SELECT response FROM entries WHERE key = ?",
                            (key.digest,)).fetchone()

    def hit_only() -> object:
        return cache.call(key, lambda: body)

    def hit_with_key() -> object:
        return cache.call(request_key("openai.chat", request), lambda: body)

    ref, own = interleaved(bare_select, hit_only, number=2000)
    print(row("cache.call hit, key given (lookup + JSON decode)", own, ref, "bare SELECT"))
    ref2, own2 = interleaved(bare_select, hit_with_key, number=2000)
    verdict = "ok" if own2[1] <= 200 else "MISSED"
    print(row("cache.call hit incl. request_key (target ≤ 200 µs)", own2, ref2, "bare SELECT")
          + f"   {verdict}")
    print(row("  reference: bare primary-key SELECT", ref))
    conn.close()

    # Throughput: 8 threads, each serving hits of its own keys (plus one shared hot key).
    keys = [request_key("openai.chat", request_of(4096, s + 1)) for s in range(64)]
    for threads in (1, 8):
        rates = []
        for _ in range(5):
            rates.append(throughput(cache, keys, body, threads=threads, per_thread=800))
        print(f"{'hits/s with ' + str(threads) + ' thread(s) (key given)':<58} "
              f"median {statistics.median(rates):10.0f}/s   max {max(rates):10.0f}/s")
    miss_rate = misses_per_s(tmp, body)
    print(f"{'misses/s with 8 threads (fetch + INSERT, distinct keys)':<58} "
          f"median {miss_rate:10.0f}/s")
    cache.close()


def timed_threads(works: list[Any]) -> float:
    """Seconds from a common start until every thread of ``works`` (callables) is done."""
    start = threading.Barrier(len(works) + 1)

    def run_one(work: Any) -> None:
        start.wait()
        work()

    pool = [threading.Thread(target=run_one, args=(w,)) for w in works]
    for t in pool:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in pool:
        t.join()
    return time.perf_counter() - t0


def throughput(cache: ModelCache, keys: list[Any], body: dict[str, Any], *, threads: int,
               per_thread: int) -> float:
    def work(offset: int) -> None:
        for i in range(per_thread):
            cache.call(keys[(offset + i) % len(keys)], lambda: body)

    works = [lambda t=t: work(t * 8) for t in range(threads)]
    return threads * per_thread / timed_threads(works)


def misses_per_s(tmp: Path, body: dict[str, Any]) -> float:
    rates = []
    for rep in range(3):
        cache = ModelCache(tmp / f"misses-{rep}.sqlite3")
        keys = [request_key("openai.chat", {"model": "m", "messages": [], "seed": i})
                for i in range(8 * 200)]

        def work(t: int, cache: ModelCache = cache, keys: list[Any] = keys) -> None:
            for k in keys[t * 200:(t + 1) * 200]:
                cache.call(k, lambda: body)

        rates.append(len(keys) / timed_threads([lambda t=t: work(t) for t in range(8)]))
        cache.close()
    return statistics.median(rates)


if __name__ == "__main__":
    main()
