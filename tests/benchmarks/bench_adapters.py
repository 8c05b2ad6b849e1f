"""Per-call overhead of the openai adapter against the bare client, both over MockTransport.

Run: ``python tests/benchmarks/bench_adapters.py`` (prints a table; asserts nothing).

Every row is measured in interleaved batches against its reference in the same run, so
both see one machine load. The client's own MockTransport round trip costs milliseconds
on a loaded machine and varies by more than the adapter costs, so the adapter's own cost
is measured a second way: the SDK method is replaced by a stub returning a prebuilt
``ChatCompletion`` (what the transport would have produced) and the wrapped stub is timed
against the bare stub. Rows:

* outside any run, no cache: the wrapped call must cost nothing measurable;
* inside a run: the wrapped call records an ``LLMCall`` (cache key = canonical encoding of
  the request, one record); target ≤ 50 µs + the key's canonical encoding, shown on its own
  row (``request_key`` alone) so the remainder is the adapter's own cost;
* inside a run with a cache hit (no upstream request at all) against the bare client's
  MockTransport round trip.
"""

from __future__ import annotations

import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import httpx2
import openai

sys.path.insert(0, str(Path(__file__).parent))
from _tempdir import bench_dir
from _timing import cpu_us_per_call, interleaved, per_call_us, row

import agentlog as al
from agentlog.adapters import openai as adapter
from agentlog.replay import ModelCache, request_key

BODY = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1764547200,
    "model": "gpt-4o-mini-2024-07-18", "system_fingerprint": "fp_1",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "B"},
                 "logprobs": {"content": [{"token": "B", "logprob": -0.1, "bytes": [66],
                                           "top_logprobs": [
                                               {"token": t, "logprob": -1.0 - i, "bytes": None}
                                               for i, t in enumerate("ABCDEFGHIJ")]}]}}],
    "usage": {"prompt_tokens": 900, "completion_tokens": 1, "total_tokens": 901},
}
# A ~4 KB request: a system prompt and a question with four options.
REQUEST = {
    "model": "gpt-4o-mini", "temperature": 0.7, "max_tokens": 1, "logprobs": True,
    "top_logprobs": 10,
    "messages": [{"role": "system", "content": "You are a careful grader. " * 140},
                 {"role": "user", "content": "Which option is right? A) x B) y C) z D) w"}],
}


def client() -> openai.OpenAI:
    transport = httpx2.MockTransport(lambda request: httpx2.Response(200, json=BODY))
    return openai.OpenAI(api_key="sk-bench", max_retries=0,
                         http_client=httpx2.Client(transport=transport))


def main() -> None:
    with bench_dir("agentlog-bench-adapters-") as folder:
        measure(folder)


def measure(folder: str) -> None:
    bare = client()
    wrapped = adapter.wrap(client())
    trace = os.path.join(folder, "bench.zst")
    cache_path = os.path.join(folder, "cache.sqlite")

    def call_bare() -> object:
        return bare.chat.completions.create(**REQUEST)

    def call_wrapped() -> object:
        return wrapped.chat.completions.create(**REQUEST)

    size = len(str(REQUEST))
    print(f"request ≈ {size} characters; bare client over MockTransport as reference\n")
    ref, own = interleaved(call_bare, call_wrapped, number=300)
    print(row("bare client", ref))
    print(row("wrapped, outside any run", own, ref, "bare"))
    print(f"{'':<58} overhead {own[0] - ref[0]:+8.2f} µs (min), "
          f"{own[1] - ref[1]:+8.2f} µs (median)\n")

    prebuilt = bare.chat.completions.create(**REQUEST)
    stubbed = client()
    stubbed.chat.completions.create = lambda **kwargs: prebuilt  # type: ignore[method-assign]
    adapter.wrap(stubbed)

    def stub() -> object:
        return prebuilt

    def call_stubbed() -> object:
        return stubbed.chat.completions.create(**REQUEST)

    ref, own = interleaved(stub, call_stubbed, number=5000)
    print(row("stubbed SDK method (no HTTP), bare", ref))
    print(row("stubbed, wrapped, outside any run", own, ref, "bare"))
    print(f"{'':<58} overhead {own[0] - ref[0]:+8.2f} µs (min)\n")
    with al.record(trace, seed=1):
        ref, own = interleaved(stub, call_stubbed, number=1000, before=al.flush)
    print(row("stubbed, wrapped, inside a run: LLMCall recorded", own, ref, "bare"))

    request = {**REQUEST, "base_url": str(bare.base_url)}
    key_t = per_call_us(lambda: request_key("openai.chat", request), number=2000)
    print(row("request_key alone (canonical encoding + SHA-256)", key_t))
    over = own[0] - ref[0]
    print(f"{'':<58} overhead {over:+8.2f} µs (min) = key {key_t[0]:.2f} µs + "
          f"{over - key_t[0]:.2f} µs adapter (target ≤ 50 µs + key)\n")

    beyond_key_cpu(trace, call_stubbed, stub, lambda: request_key("openai.chat", request))

    key_t = per_call_us(lambda: request_key("openai.chat", request), number=2000)
    print(row("request_key alone (canonical encoding + SHA-256)", key_t))
    with al.record(trace, seed=1):
        ref, own = interleaved(call_bare, call_wrapped, number=300, before=al.flush)
    print(row("bare client over MockTransport (inside a run)", ref))
    print(row("wrapped over MockTransport, inside a run", own, ref, "bare"))
    print()

    with ModelCache(path=cache_path) as cache:
        cached = adapter.wrap(client(), cache=cache)
        cached.chat.completions.create(**REQUEST)  # the one miss
        with al.record(trace, seed=1):
            ref, own = interleaved(call_bare, lambda: cached.chat.completions.create(
                **REQUEST), number=300, before=al.flush)
        print(row("bare client (inside a run)", ref))
        print(row("wrapped + cache hit, inside a run (no request)", own, ref, "bare"))
        print(f"cache stats: {cache.stats()}")


def beyond_key_cpu(trace: str, wrapped: Callable[[], object], bare: Callable[[], object],
                   key: Callable[[], object], rounds: int = 16, number: int = 300) -> None:
    """The adapter's cost beyond the key in the caller's CPU time, paired round by round.

    Wall-clock batches on a shared machine measure the scheduler: each round times the
    wrapped stub, the bare stub and ``request_key`` alone with ``time.thread_time`` one
    after the other, and the round's difference ``wrapped - bare - key`` is one sample.
    """
    samples = []
    with al.record(trace, seed=1):
        for _ in range(rounds):
            al.flush()
            w, b, k = (cpu_us_per_call(fn, number) for fn in (wrapped, bare, key))
            samples.append((w - b - k, w - b, k))
    beyond = sorted(s[0] for s in samples)
    q1, med, q3 = statistics.quantiles(beyond, n=4)
    print(f"{'caller CPU, paired rounds: wrapped - bare, inside a run':<58} median "
          f"{statistics.median(s[1] for s in samples):8.2f} µs, key alone "
          f"{statistics.median(s[2] for s in samples):.2f} µs")
    print(f"{'':<58} beyond the key: min {beyond[0]:.2f}, quartiles {q1:.2f} / {med:.2f} / "
          f"{q3:.2f} µs (target ≤ 50 µs; load {os.getloadavg()[0]:.1f})\n")


if __name__ == "__main__":
    main()
