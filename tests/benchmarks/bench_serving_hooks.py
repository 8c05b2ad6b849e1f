"""What the two replay-serving hooks cost a call when they are not set, and when they are.

Run: ``python tests/benchmarks/bench_serving_hooks.py`` (prints a table; asserts nothing).

* ``@al.tool``: the unset hook is one ``ContextVar.get`` and a comparison per recorded tool
  call (nothing outside a run). It is timed on its own against an empty lambda, beside
  the whole recorded tool call it is part of; then a call served from a recording
  (``serving_tools``) against the same call made live.
* the adapters' ``override_cache``: the wrapped call reads the override (one
  ``ContextVar.get`` and a comparison) before anything else; timed on its own, beside
  the whole wrapped call on a stubbed SDK method (no HTTP) outside and inside a run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import httpx2

sys.path.insert(0, str(Path(__file__).parent))
from _tempdir import bench_dir
from _timing import interleaved, row

import agentlog as al
from agentlog import _tool
from agentlog.adapters import _recording, transport
from agentlog.reentry import serving_tools

BODY = {"id": "c1", "object": "chat.completion", "created": 1764547200,
        "model": "gpt-4o-mini", "choices": [{"index": 0, "finish_reason": "stop",
                                             "message": {"role": "assistant", "content": "B"}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}}
REQUEST: dict[str, Any] = {"model": "gpt-4o-mini", "temperature": 0.7, "max_tokens": 1,
                           "messages": [{"role": "user", "content": "Which option?"}]}


@al.tool("bench_lookup")
def lookup(query: str, k: int = 3) -> list[int]:
    return [k]


def tools(folder: str) -> None:
    var = _tool._serving_var
    ref, own = interleaved(lambda: None, lambda: var.get() is not None, number=200_000)
    print(row("empty lambda (reference)", ref))
    print(row("the unset tool hook: ContextVar.get + compare", own, ref, "empty"))
    print(f"{'':<58} hook cost {own[0] - ref[0]:+8.3f} µs (min)")
    src = os.path.join(folder, "tools.zst")
    with al.record(src, seed=1, mode="w"):
        live = interleaved(lambda: None, lambda: lookup("q"), number=20_000, before=al.flush)[1]
    print(row("@al.tool call inside a run (args + result sealed)", live))
    print(f"{'':<58} the unset hook is {100 * (own[0] - ref[0]) / live[0]:.2f} % of it")
    recorded = al.read(src)
    with al.record(os.path.join(folder, "served.zst"), seed=1, mode="w"), \
            serving_tools(recorded) as serving:
        def served() -> object:
            return lookup("q")

        def live_call() -> object:
            serving.live = True
            try:
                return lookup("q")
            finally:
                serving.live = False

        ref, own = interleaved(live_call, served, number=10_000, before=al.flush)
    print(row("  same, live (hook set, live=True) (reference)", ref))
    print(row("  same, served from the recording", own, ref, "live"))
    print()


def adapters(folder: str) -> None:
    """The unset cache override against the whole recording transport it sits in."""
    var = _recording._override
    ref, hook = interleaved(lambda: None, lambda: var.get() is None, number=200_000)
    print(row("the unset override: ContextVar.get + compare", hook, ref, "empty"))
    cost = hook[0] - ref[0]
    print(f"{'':<58} hook cost {cost:+8.3f} µs (min)")
    request = httpx2.Request("POST", "http://bench/v1/chat/completions", json=REQUEST)
    mock = httpx2.MockTransport(lambda r: httpx2.Response(200, json=BODY))
    seam = transport(base=mock)

    def bare() -> object:
        return mock.handle_request(request).read()

    def through() -> object:
        return seam.handle_request(request).read()

    ref, own = interleaved(bare, through, number=5_000)
    print(row("recording transport, outside any run (pass through)", own, ref, "mock"))
    print(f"{'':<58} the unset hook is {100 * cost / own[0]:.2f} % of it")
    with al.record(os.path.join(folder, "llm.zst"), seed=1, mode="w"):
        ref, own = interleaved(bare, through, number=1_000, before=al.flush)
    print(row("recording transport, inside a run (LLMCall recorded)", own, ref, "mock"))
    print(f"{'':<58} the unset hook is {100 * cost / own[0]:.3f} % of it")


def main() -> None:
    with bench_dir("agentlog-bench-serving-") as folder:
        tools(folder)
        adapters(folder)


if __name__ == "__main__":
    main()
