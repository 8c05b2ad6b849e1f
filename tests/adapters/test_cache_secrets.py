"""End to end: a credential passed in a request's extra fields reaches the provider as asked,
but neither the cache's SQLite file nor the trace (openai and anthropic clients, real SDKs
over ``httpx2.MockTransport``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.replay import ModelCache

from ._providers import FakeProvider, anthropic_client, openai_client
from ._trace_text import trace_plaintext

SECRET = "proxy-pass-5e2b9a1c"  # no key format: only the field name marks it
KEY_SHAPED = "sk-proj-canary00112233445566"


def _sqlite_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(path.parent.glob(path.name + "*")))


def _run(tmp_path: Path, call: Any) -> tuple[bytes, bytes, ModelCache]:
    store, trace = tmp_path / "cache.sqlite3", tmp_path / "t.zst"
    cache = ModelCache(store)

    @al.window("ask", entry=lambda *a, **k: 0)
    def ask() -> None:
        call(cache)
        call(cache)  # the second is a hit: the key matched without the secret

    with al.record(trace, seed=1):
        ask()
    stats = cache.stats()
    cache.close()
    assert (stats["misses"], stats["hits"]) == (1, 1)
    return _sqlite_bytes(store), trace_plaintext(trace), cache


def test_openai_extra_body_query_and_headers(tmp_path: Path) -> None:
    pytest.importorskip("openai")
    from agentlog.adapters import openai as adapter

    provider = FakeProvider()

    def call(cache: ModelCache) -> None:
        client = adapter.wrap(openai_client(provider), cache=cache)
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "A or B?"}],
            extra_body={"api_key": SECRET, "upstream": {"password": SECRET}, "top_k": 2,
                        "note": f"billing {KEY_SHAPED}"},
            extra_query={"api-key": SECRET}, extra_headers={"X-Api-Key": SECRET})

    store, trace, _ = _run(tmp_path, call)
    sent = provider.requests[0]
    assert json.loads(sent.content)["api_key"] == SECRET  # the provider got what was asked
    assert sent.url.params["api-key"] == SECRET and sent.headers["x-api-key"] == SECRET
    assert b"top_k" in store and b"gpt-4o-mini" in store
    for blob in (store, trace):
        assert SECRET.encode() not in blob and KEY_SHAPED.encode() not in blob


def test_anthropic_extra_body_and_userinfo_in_base_url(tmp_path: Path) -> None:
    pytest.importorskip("anthropic")
    from agentlog.adapters import anthropic as adapter

    provider = FakeProvider()

    def call(cache: ModelCache) -> None:
        client = adapter.wrap(anthropic_client(
            provider, base_url=f"https://bob:{SECRET}@proxy.example"), cache=cache)
        client.messages.create(model="claude-opus-4-7", max_tokens=4,
                               messages=[{"role": "user", "content": "A or B?"}],
                               extra_body={"auth": {"token": SECRET}, "temperature": 0.0})

    store, trace, _ = _run(tmp_path, call)
    assert provider.count == 1
    assert b"proxy.example" in store and b"temperature" in store
    for blob in (store, trace):
        assert SECRET.encode() not in blob
