"""Every credential a wrapped client was built with stays out of traces, spans and the cache.

A provider or a proxy that refuses a call often quotes what it was sent. Before, only the
client's ``api_key`` was a known secret: an ``X-Api-Key`` default header, or the
``Authorization: Basic`` header that the HTTP client makes from a ``base_url`` with
``user:password@``, reached the trace through the 401's message (the real openai and
anthropic clients over ``httpx2.MockTransport``, the real OpenTelemetry SDK).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

import agentlog as al
from agentlog.adapters._client_secrets import client_secrets
from agentlog.replay import ModelCache
from agentlog.testing import capture_spans

from ._providers import FakeProvider, anthropic_client, openai_client
from ._trace_text import trace_plaintext

HEADER_CANARY = "hdr-canary-7f3a9c1e5b2d"
USER = "proxyuser"
PASSWORD = "pw/canary@4e8b:1d6a"  # characters a URL must percent-encode
BASE = f"https://{USER}:{quote(PASSWORD, safe='')}@proxy.example"


def _canaries(provider: FakeProvider) -> list[str]:
    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    sent = [r.headers.get("authorization", "") for r in provider.requests]
    tokens = [h.partition(" ")[2] for h in sent if h.lower().startswith("basic ")]
    assert tokens, "the HTTP client sent no Basic auth: the test would prove nothing"
    return [HEADER_CANARY, PASSWORD, quote(PASSWORD, safe=""), basic, *tokens]


def _spans_text(spans: Any) -> str:
    return repr([(dict(s.attributes or {}), s.status.description,
                  [dict(e.attributes or {}) for e in s.events]) for s in spans.spans])


def _sqlite_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(path.parent.glob(path.name + "*")))


def _check(tmp_path: Path, provider: FakeProvider, make: Any, ask: Any,
           refused: type[BaseException]) -> None:
    store, trace = tmp_path / "cache.sqlite3", tmp_path / "t.zst"
    with capture_spans() as spans, ModelCache(store) as cache:
        client = make(cache)

        @al.window("ask", entry=lambda: 0)
        def call() -> None:
            with pytest.raises(refused):
                ask(client)  # the 401 quotes the header and the Basic token
            ask(client)  # the answer echoes the header: stored, recorded, scrubbed

        with al.record(trace, seed=1):
            call()
        span_text = _spans_text(spans)
    assert provider.count == 2
    assert al.flush()  # the run's last frame, before the file's bytes are read directly
    data, stored = trace_plaintext(trace), _sqlite_bytes(store)
    assert b"proxy.example" in stored  # the cache holds the call, without its secrets
    for canary in _canaries(provider):
        assert canary.encode() not in data, canary
        assert canary not in span_text, canary
        assert canary.encode() not in stored, canary
    (failed, ok) = al.read(trace).llm_calls()
    assert failed.status == 1 and "<redacted>" in (failed.error_message or "")
    assert ok.status == 0


def test_openai_default_header_and_base_url_password_never_reach_the_trace(
        tmp_path: Path) -> None:
    pytest.importorskip("openai")
    import openai

    from agentlog.adapters import openai as adapter

    provider = FakeProvider(fail={1: 401}, echo=("x-api-key", "authorization"),
                            text=f"you sent {HEADER_CANARY}")

    def make(cache: ModelCache) -> Any:
        client = openai_client(provider)
        client = client.with_options(base_url=f"{BASE}/v1",
                                     default_headers={"X-Api-Key": HEADER_CANARY})
        return adapter.wrap(client, cache=cache)

    def ask(client: Any) -> None:
        client.chat.completions.create(model="gpt-4o-mini",
                                       messages=[{"role": "user", "content": "A or B?"}])

    _check(tmp_path, provider, make, ask, openai.AuthenticationError)


def test_anthropic_default_header_and_base_url_password_never_reach_the_trace(
        tmp_path: Path) -> None:
    pytest.importorskip("anthropic")
    import anthropic

    from agentlog.adapters import anthropic as adapter

    provider = FakeProvider(fail={1: 401}, echo=("x-proxy-token", "authorization"),
                            text=f"you sent {HEADER_CANARY}")

    def make(cache: ModelCache) -> Any:
        client = anthropic_client(provider, base_url=BASE,
                                  default_headers={"X-Proxy-Token": HEADER_CANARY})
        return adapter.wrap(client, cache=cache)

    def ask(client: Any) -> None:
        client.messages.create(model="claude-opus-4-7", max_tokens=4,
                               messages=[{"role": "user", "content": "A or B?"}])

    _check(tmp_path, provider, make, ask, anthropic.AuthenticationError)


def test_a_clients_secrets_are_listed_in_every_form_a_server_may_echo() -> None:
    class Client:
        def __init__(self) -> None:
            self.api_key = "sk-canary-0d5f3c9e1b7a4e2f"
            self.base_url = BASE + "/v1/"
            self.default_headers = {
                "User-Agent": "OpenAI/Python 3.60.0", "X-Api-Key": HEADER_CANARY,
                "Authorization": "Basic " + base64.b64encode(b"ann:s3cret-x").decode(),
                "X-Stainless-Lang": "python"}

    found = client_secrets(Client(), ("api_key",))
    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    for form in ("sk-canary-0d5f3c9e1b7a4e2f", HEADER_CANARY, "ann:s3cret-x", "s3cret-x",
                 PASSWORD, quote(PASSWORD, safe=""), basic, basic.rstrip("=")):
        assert form in found, form
    assert "python" not in found and "OpenAI/Python 3.60.0" not in found
    assert USER not in found  # a user name with a password is not itself a secret
