"""Per-call overhead of the recording HTTP transport against the bare client (issue 32).

Run: ``python tests/benchmarks/bench_adapters.py`` (prints a table; asserts nothing).

Every row is measured in interleaved batches against its reference in the same run, so
both see one machine load. Rows:

* the wrapped client (``openai.wrap``: the recording transport in front of the client's
  own) against the bare client, both over ``MockTransport``: outside any run (pass
  through), inside a run (one ``LLMCall`` recorded, its key the canonical encoding of the
  request, shown on its own row);
* the transport alone serving a cache hit for a ~4 KB request (target ≤ 200 µs), against
  ``MockTransport`` answering the same request, and the whole client call on a hit.

The share of a real loopback vLLM call is measured by ``bench_agent_loop.py --vllm``
where the vLLM environment exists.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import httpx2
import openai

sys.path.insert(0, str(Path(__file__).parent))
from _tempdir import bench_dir
from _timing import interleaved, per_call_us, row

import agentlog as al
from agentlog.adapters import openai as adapter
from agentlog.adapters import transport
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

    size = len(json.dumps(REQUEST))
    print(f"request: {size} bytes of JSON; bare client over MockTransport as reference\n")
    ref, own = interleaved(call_bare, call_wrapped, number=300)
    print(row("bare client", ref))
    print(row("wrapped, outside any run", own, ref, "bare"))
    print(f"{'':<58} overhead {own[0] - ref[0]:+8.2f} µs (min), "
          f"{own[1] - ref[1]:+8.2f} µs (median)\n")

    request = {**REQUEST, "base_url": str(bare.base_url)}
    key_t = per_call_us(lambda: request_key("openai.chat", request), number=2000)
    print(row("request_key alone (canonical encoding + SHA-256)", key_t))
    with al.record(trace, seed=1):
        ref, own = interleaved(call_bare, call_wrapped, number=300, before=al.flush)
    print(row("bare client over MockTransport (inside a run)", ref))
    print(row("wrapped over MockTransport, inside a run", own, ref, "bare"))
    print(f"{'':<58} overhead {own[0] - ref[0]:+8.2f} µs (min) = key {key_t[0]:.2f} µs + "
          f"{own[0] - ref[0] - key_t[0]:.2f} µs recording\n")

    http_request = httpx2.Request("POST", "https://api.openai.com/v1/chat/completions",
                                  json=REQUEST, headers={"authorization": "Bearer sk-bench"})
    mock = httpx2.MockTransport(lambda request: httpx2.Response(200, json=BODY))
    with ModelCache(path=cache_path) as cache:
        seam = transport(base=mock, cache=cache)
        seam.handle_request(http_request).read()  # the one miss
        cached = adapter.wrap(client(), cache=cache)

        def mock_once() -> object:
            return mock.handle_request(http_request).read()

        def hit_once() -> object:
            return seam.handle_request(http_request).read()

        with al.record(trace, seed=1):
            ref, own = interleaved(mock_once, hit_once, number=500, before=al.flush)
            print(row("MockTransport answering the request (no client)", ref))
            print(row("recording transport, cache hit (target ≤ 200 µs)", own, ref, "mock"))
            ref, own = interleaved(call_bare, lambda: cached.chat.completions.create(
                **REQUEST), number=300, before=al.flush)
        print(row("bare client (inside a run)", ref))
        print(row("wrapped + cache hit, inside a run (no request)", own, ref, "bare"))
        print(f"cache stats: {cache.stats()}")


if __name__ == "__main__":
    main()
