"""The HTTP seam: every httpx2-based SDK route recorded and served by one transport."""

from __future__ import annotations

import ast
import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
httpx2 = pytest.importorskip("httpx2")

import agentlog as al  # noqa: E402
from agentlog.adapters import anthropic as anthropic_adapter  # noqa: E402
from agentlog.adapters import (  # noqa: E402
    async_http_client,
    http_client,
    transport,
)
from agentlog.adapters import openai as openai_adapter  # noqa: E402
from agentlog.replay import ModelCache  # noqa: E402
from tests.adapters._providers import (  # noqa: E402
    CANARY,
    FakeProvider,
    anthropic_client,
    openai_client,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "adapters" / "route_adapters.zst"


def _window(fn: Any) -> Any:
    return al.window("agent", entry=lambda *a, **k: 0, exit=lambda r: 0)(fn)


def _embeddings(request: httpx2.Request) -> httpx2.Response:
    body = json.loads(request.content)
    if request.url.path.endswith("/embeddings"):
        return httpx2.Response(200, json={
            "object": "list", "model": body["model"],
            "data": [{"object": "embedding", "index": i, "embedding": [0.25, -0.5, float(i)]}
                     for i, _ in enumerate(body["input"])],
            "usage": {"prompt_tokens": 7, "total_tokens": 7}})
    return httpx2.Response(404, json={"error": {"message": "no such route"}})


def test_an_endpoint_no_adapter_special_cased_is_recorded_and_served(tmp_path: Path) -> None:
    """Embeddings: the SDK route was never rebuilt, the seam records and serves it."""
    count = {"n": 0}

    def handler(request: httpx2.Request) -> httpx2.Response:
        count["n"] += 1
        return _embeddings(request)

    live = openai.OpenAI(api_key=CANARY, max_retries=0,
                         http_client=http_client(base=httpx2.MockTransport(handler)))
    path = tmp_path / "t.zst"

    @_window
    def embed(client: Any) -> list[list[float]]:
        out = client.embeddings.create(model="text-embedding-3-small", input=["a", "b"])
        return [d.embedding for d in out.data]

    with al.record(path, seed=1):
        first = embed(live)
    (call,) = al.read(path).llm_calls()
    assert (call.provider, call.status, call.input_tokens) == ("openai.embeddings", 0, 7)
    assert al.records.decode_artifact(call.request)["request"]["input"] == ["a", "b"]
    assert CANARY.encode() not in path.read_bytes()
    frozen = openai.OpenAI(api_key="sk-other", max_retries=0, http_client=http_client(
        base=httpx2.MockTransport(handler), cache=ModelCache.from_traces([path])))
    before = count["n"]
    with al.record(tmp_path / "replay.zst", seed=1):
        assert embed(frozen) == first
    assert count["n"] == before  # served by the recording: no live call


def test_a_request_to_an_unknown_endpoint_passes_through_counted_and_named(
        tmp_path: Path) -> None:
    seen: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.url.path)
        return httpx2.Response(200, json={"object": "list", "data": []})

    t = transport(base=httpx2.MockTransport(handler))
    client = openai.OpenAI(api_key=CANARY, http_client=httpx2.Client(transport=t))
    assert client.models.list().data == []  # outside a run, no cache: straight through
    with al.record(tmp_path / "t.zst", seed=1), pytest.warns(
            al.InstrumentationWarning, match=r"GET /v1/models passed through agentlog's "
                                             r"transport unrecorded"):
        client.models.list()
    assert seen == ["/v1/models", "/v1/models"]
    assert t.unrecorded == {"GET /v1/models": 1}  # counted where calls are recorded


def test_wrap_keeps_the_clients_own_http_client_and_never_records_twice(
        tmp_path: Path) -> None:
    provider = FakeProvider()
    client = openai_adapter.wrap(openai_adapter.wrap(openai_client(provider)))
    copy = client.with_options(timeout=5)  # the SDK's copies keep the recording client
    path = tmp_path / "t.zst"
    with al.record(path, seed=1):
        _window(lambda: copy.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "q"}]))()
    assert provider.count == 1  # the request went through the client's MockTransport
    assert len(list(al.read(path).llm_calls())) == 1


def test_a_frozen_miss_reaches_the_caller_as_cache_miss_through_either_sdk(
        tmp_path: Path) -> None:
    empty = ModelCache.from_traces([FIXTURE])
    oa = openai_adapter.wrap(openai_client(FakeProvider()), cache=empty)
    an = anthropic_adapter.wrap(anthropic_client(FakeProvider()), cache=empty)
    with al.record(tmp_path / "t.zst", seed=1):
        with pytest.raises(al.CacheMiss, match="not in the read-only model cache"):
            oa.chat.completions.create(model="gpt-4o-mini",
                                       messages=[{"role": "user", "content": "new"}])
        # The anthropic SDK wraps its HTTP client's errors into a retried
        # APIConnectionError, except its own: the miss is raised as both.
        with pytest.raises(al.CacheMiss) as caught:
            an.messages.create(model="claude-opus-4-7", max_tokens=8,
                               messages=[{"role": "user", "content": "new"}])
        assert isinstance(caught.value, anthropic.AnthropicError)
    calls = list(al.read(tmp_path / "t.zst").llm_calls())
    assert [(c.status, c.error_type) for c in calls] == [(1, "CacheMiss")] * 2


def _agent(c: Any, a: Any) -> list[str]:
    """The calls tests/fixtures/adapters/make_route_adapters.py recorded with the adapters that
    rebuilt the SDK routes (before the HTTP transport)."""
    x = c.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Which option? A or B."}],
        temperature=0.0).choices[0].message.content
    with c.chat.completions.create(model="gpt-4o-mini", stream=True, messages=[
            {"role": "user", "content": "Stream it."}]) as s:
        y = "".join(ch.choices[0].delta.content or "" for ch in s if ch.choices)
    z = c.responses.create(model="gpt-4.1-mini", input="q").output_text
    with a.messages.create(model="claude-opus-4-7", max_tokens=64, stream=True,
                           messages=[{"role": "user", "content": "hi"}]) as s:
        w = "".join(getattr(e.delta, "text", "") for e in s if e.type == "content_block_delta")
    return [x, y, z, w]


def test_a_trace_recorded_by_the_route_adapters_still_serves_a_frozen_replay(
        tmp_path: Path) -> None:
    down = FakeProvider(fail=dict.fromkeys(range(1, 10), 500))
    cache = ModelCache.from_traces([FIXTURE])
    c = openai_adapter.wrap(openai_client(down), cache=cache)
    a = anthropic_adapter.wrap(anthropic_client(down), cache=cache)
    with al.record(tmp_path / "replay.zst", seed=1):
        assert _window(_agent)(c, a) == [" answerB", " answerB", " answerB", "B"]
    assert down.count == 0
    calls = list(al.read(tmp_path / "replay.zst").llm_calls())
    assert [c.cache for c in calls] == ["hit"] * 4


def test_fifty_concurrent_identical_calls_through_an_async_client_share_one_upstream(
        tmp_path: Path) -> None:
    calls = 0

    async def handler(request: httpx2.Request) -> httpx2.Response:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        return _embeddings(request)

    async def main(cache: ModelCache) -> list[Any]:
        client = openai.AsyncOpenAI(api_key=CANARY, max_retries=0, http_client=async_http_client(
            base=httpx2.MockTransport(handler), cache=cache))
        async with al.record(tmp_path / "t.zst", seed=1):
            return await asyncio.gather(*(client.embeddings.create(
                model="e", input=["x"]) for _ in range(50)))

    with ModelCache(path=tmp_path / "c.sqlite") as cache:
        out = asyncio.run(main(cache))
    assert calls == 1 and len({o.data[0].embedding[0] for o in out}) == 1
    statuses = sorted(c.cache or "" for c in al.read(tmp_path / "t.zst").llm_calls())
    assert statuses.count("miss") == 1 and statuses.count("hit") == 49


def test_no_adapter_imports_a_private_sdk_name() -> None:
    """The standing check: agentlog reaches the SDKs through their public API only."""
    offenders = []
    for path in sorted((ROOT / "adapters").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                root, *rest = node.module.split(".")
                names = [a.name for a in node.names]
                if root in ("openai", "anthropic") and (
                        any(p.startswith("_") for p in rest)
                        or any(n.startswith("_") for n in names)):
                    offenders.append(f"{path.name}:{node.lineno} from {node.module}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    root, *rest = alias.name.split(".")
                    if root in ("openai", "anthropic") and any(p.startswith("_") for p in rest):
                        offenders.append(f"{path.name}:{node.lineno} import {alias.name}")
    assert offenders == []


def test_an_httpx_v1_client_records_and_serves_as_httpx2_does(tmp_path: Path) -> None:
    """Frameworks on httpx (v1) pass the same kind of client: sync and async."""
    httpx = pytest.importorskip("httpx")
    count = {"n": 0}

    def handler(request: Any) -> Any:
        count["n"] += 1
        return httpx.Response(200, json={
            "object": "list", "model": "e", "usage": {"prompt_tokens": 2, "total_tokens": 2},
            "data": [{"object": "embedding", "index": 0, "embedding": [1.0]}]})

    body = {"model": "e", "input": ["x"]}
    url = "http://127.0.0.1:9/v1/embeddings"
    path = tmp_path / "t.zst"
    with ModelCache(path=tmp_path / "c.sqlite") as cache:
        client = http_client(base=httpx.MockTransport(handler), cache=cache)
        assert isinstance(client, httpx.Client)
        with al.record(path, seed=1):
            first = client.post(url, json=body).json()
            again = client.post(url, json=body).json()

        async def main() -> Any:
            async with async_http_client(base=httpx.MockTransport(handler), http="httpx",
                                         cache=cache) as aclient:
                assert isinstance(aclient, httpx.AsyncClient)
                return (await aclient.post(url, json=body)).json()

        with al.record(tmp_path / "a.zst", seed=1):
            third = asyncio.run(main())
    assert first == again == third and count["n"] == 1
    assert [c.cache for c in al.read(path).llm_calls()] == ["miss", "hit"]


def test_a_framework_client_taking_an_http_client_is_recorded_and_replayed_frozen(
        tmp_path: Path) -> None:
    """LangChain's ChatOpenAI, given the recording client: recorded live, then served by
    the trace with the provider down."""
    lc = pytest.importorskip("langchain_openai")
    path = tmp_path / "t.zst"
    live = FakeProvider()
    llm = lc.ChatOpenAI(model="gpt-4o-mini", api_key=CANARY, max_retries=0,
                        http_client=http_client(base=httpx2.MockTransport(live)))
    with al.record(path, seed=1):
        answer = _window(lambda: llm.invoke("Which option? A or B.").content)()
    (call,) = al.read(path).llm_calls()
    assert call.provider == "openai.chat" and call.status == 0 and live.count == 1
    assert CANARY.encode() not in path.read_bytes()
    down = FakeProvider(fail=dict.fromkeys(range(1, 10), 500))
    frozen = lc.ChatOpenAI(model="gpt-4o-mini", api_key="sk-other", max_retries=0,
                           http_client=http_client(base=httpx2.MockTransport(down),
                                                   cache=ModelCache.from_traces([path])))
    with al.record(tmp_path / "replay.zst", seed=1):
        assert _window(lambda: frozen.invoke("Which option? A or B.").content)() == answer
    assert down.count == 0


def test_a_streamed_legacy_completion_is_recorded_whole_and_a_hit_streams_it_back(
        tmp_path: Path) -> None:
    chunks = [{"id": "cmpl-1", "object": "text_completion", "created": 0, "model": "m",
               "choices": [{"index": 0, "text": piece, "logprobs": None,
                            "finish_reason": "stop" if last else None}]}
              for piece, last in ((" A", False), (" B", True))]
    sse = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    count = {"n": 0}

    def handler(request: httpx2.Request) -> httpx2.Response:
        count["n"] += 1
        return httpx2.Response(200, headers={"content-type": "text/event-stream"},
                               content=sse.encode())

    def text(client: Any) -> str:
        stream = client.completions.create(model="m", prompt="p", stream=True)
        return "".join(c.choices[0].text for c in stream)

    path = tmp_path / "t.zst"
    with ModelCache(path=tmp_path / "c.sqlite") as cache:
        client = openai.OpenAI(api_key=CANARY, max_retries=0, http_client=http_client(
            base=httpx2.MockTransport(handler), cache=cache))
        with al.record(path, seed=1):
            assert text(client) == text(client) == " A B"
    assert count["n"] == 1
    calls = list(al.read(path).llm_calls())
    assert [(c.provider, c.cache) for c in calls] == [("openai.completions", "miss"),
                                                      ("openai.completions", "hit")]
    body = al.records.decode_artifact(calls[0].response)
    assert body["choices"][0]["text"] == " A B" and body["choices"][0]["finish_reason"] == "stop"


def test_spans_off_records_the_call_without_agentlogs_model_span(tmp_path: Path) -> None:
    """For an SDK or framework that traces its own calls to the same backend."""
    from agentlog.testing import capture_spans

    def handler(request: httpx2.Request) -> httpx2.Response:
        return _embeddings(request)

    for spans in (True, False):
        client = openai.OpenAI(api_key=CANARY, max_retries=0, http_client=http_client(
            base=httpx2.MockTransport(handler), spans=spans))
        with capture_spans() as captured, al.record(tmp_path / f"{spans}.zst", seed=1):
            client.embeddings.create(model="e", input=["x"])
        names = [s.name for s in captured.spans]
        assert ("embeddings e" in names) is spans
        assert len(list(al.read(tmp_path / f"{spans}.zst").llm_calls())) == 1
