"""The openai adapter over the real openai client and ``httpx2.MockTransport``."""

from __future__ import annotations

import asyncio
import gc
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest

openai = pytest.importorskip("openai")

import agentlog as al  # noqa: E402
from agentlog._encoding import decode  # noqa: E402
from agentlog.adapters import StreamClosedError, call_options, choice_probs  # noqa: E402
from agentlog.adapters import openai as adapter  # noqa: E402
from agentlog.adapters._recording import drain_finalisers  # noqa: E402
from agentlog.replay import ModelCache, request_key  # noqa: E402
from agentlog.testing import capture_spans  # noqa: E402

from ._providers import (  # noqa: E402
    CANARY,
    FakeProvider,
    chat_body,
    openai_client,
)
from ._trace_text import trace_plaintext  # noqa: E402

MESSAGES = [{"role": "user", "content": "Which option? Answer A, B, C or D."}]
ASK: dict[str, Any] = {"model": "gpt-4o-mini", "messages": MESSAGES, "logprobs": True,
                       "top_logprobs": 5, "temperature": 0.7, "max_tokens": 4}


def _window(fn: Any) -> Any:
    return al.window("ask", entry=lambda *a, **k: 0)(fn)


def test_wrap_returns_a_copy_and_outside_a_run_the_call_is_untouched() -> None:
    provider = FakeProvider()
    original = openai_client(provider)
    client = adapter.wrap(original)
    assert client is not original and type(client) is type(original)
    assert client.api_key == original.api_key and client.base_url == original.base_url
    result = client.chat.completions.create(**ASK)
    assert type(result) is openai.types.chat.ChatCompletion
    assert result.model_dump(mode="json", exclude_unset=True) == chat_body()
    assert result._request_id is None or isinstance(result._request_id, str)


def test_a_chat_call_is_one_llm_call_record_with_usage_cost_and_fingerprint(
        tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    client = adapter.wrap(openai_client(FakeProvider()), prices={"gpt-4o-mini": (0.15, 0.6)})

    @_window
    def ask() -> str:
        return str(client.chat.completions.create(**ASK).choices[0].message.content)

    with al.record(path, seed=1):
        assert ask() == " answerB"
    trace = al.read(path)
    (call,) = trace.llm_calls()
    assert (call.provider, call.model, call.status) == ("openai.chat", "gpt-4o-mini", 0)
    assert (call.input_tokens, call.output_tokens) == (31, 2)
    assert call.cost == pytest.approx((31 * 0.15 + 2 * 0.6) / 1e6)
    assert call.fingerprint == "fp_44709d6fcb"
    request = {**ASK, "base_url": "https://api.openai.com/v1/"}
    key = request_key("openai.chat", request)
    assert call.cache_key == key.digest
    assert decode(call.request) == key.canonical
    assert decode(call.response) == chat_body()
    assert call.latency_ns > 0
    (exit_,) = [r for r in trace.records if type(r).__name__ == "WindowExit"]
    assert (exit_.llm_calls, exit_.input_tokens, exit_.output_tokens) == (1, 31, 2)
    assert exit_.cost == pytest.approx(call.cost)


def test_each_call_is_a_client_span_under_the_window_with_gen_ai_attributes(
        tmp_path: Path) -> None:
    client = adapter.wrap(openai_client(FakeProvider()))

    @_window
    def ask() -> None:
        client.chat.completions.create(**ASK, seed=3, top_p=0.5)

    with capture_spans() as spans, al.record(tmp_path / "t.zst", seed=1):
        ask()
    (span,) = spans.by_name("chat gpt-4o-mini")
    (window,) = spans.by_name("agentlog.window.ask")
    assert span.kind.name == "CLIENT" and span.parent.span_id == window.context.span_id
    attrs = dict(span.attributes or {})
    assert attrs["gen_ai.provider.name"] == "openai"
    assert (attrs["gen_ai.request.temperature"], attrs["gen_ai.request.top_p"],
            attrs["gen_ai.request.max_tokens"], attrs["gen_ai.request.seed"]) == (0.7, 0.5, 4, 3)
    assert attrs["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18"
    assert attrs["gen_ai.response.id"] == "chatcmpl-AbC123"
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (31, 2)
    assert "agentlog.cache" not in attrs and len(attrs["agentlog.cache_key"]) == 64
    assert "gen_ai.input.messages" not in attrs


@pytest.mark.parametrize("status, error", [(401, "AuthenticationError"),
                                           (429, "RateLimitError"),
                                           (500, "InternalServerError")])
def test_provider_errors_are_recorded_and_re_raised_unchanged_without_the_key(
        tmp_path: Path, status: int, error: str) -> None:
    path = tmp_path / "t.zst"
    client = adapter.wrap(openai_client(FakeProvider(fail={1: status})))

    @_window
    def ask() -> None:
        client.chat.completions.create(**ASK)

    with capture_spans() as spans, al.record(path, seed=1), pytest.raises(
            openai.APIStatusError) as caught:
        ask()
    assert type(caught.value).__name__ == error and caught.value.status_code == status
    if status == 401:
        assert CANARY in str(caught.value)  # the caller's exception is untouched
    assert CANARY.encode() not in trace_plaintext(path)
    text = repr([(s.name, dict(s.attributes or {}), s.status.description,
                  [dict(e.attributes or {}) for e in s.events]) for s in spans.spans])
    assert CANARY not in text
    (call,) = al.read(path).llm_calls()
    # The seam sees the HTTP answer; the SDK makes its own exception of the same response.
    assert (call.status, call.error_type) == (1, "ModelHTTPError")
    assert f"HTTP {status}" in (call.error_message or "")


def test_a_stream_is_passed_through_unchanged_and_recorded_at_its_end(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    plain = openai_client(FakeProvider())
    expected = [c.model_dump() for c in plain.chat.completions.create(**ASK, stream=True)]
    client = adapter.wrap(openai_client(FakeProvider()))

    @_window
    def ask() -> list[dict[str, Any]]:
        stream = client.chat.completions.create(**ASK, stream=True,
                                                stream_options={"include_usage": True})
        assert type(stream) is openai.Stream
        with stream:
            return [c.model_dump() for c in stream]

    with al.record(path, seed=1):
        assert ask() == expected
    (call,) = al.read(path).llm_calls()
    body = decode(call.response)
    assert call.status == 0 and (call.input_tokens, call.output_tokens) == (31, 2)
    assert body["choices"][0]["message"]["content"] == " answerB"
    assert body["choices"][0]["logprobs"]["content"] == chat_body()["choices"][0][
        "logprobs"]["content"]
    assert choice_probs(body, ["A", "B"]).probs == pytest.approx(
        choice_probs(chat_body(), ["A", "B"]).probs)


def test_a_stream_closed_early_is_recorded_as_closed(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    client = adapter.wrap(openai_client(FakeProvider(chunked=True)))

    @_window
    def ask() -> None:
        with client.chat.completions.create(**ASK, stream=True) as stream:
            next(iter(stream))

    with al.record(path, seed=1):
        ask()
    (call,) = al.read(path).llm_calls()
    assert (call.status, call.error_type) == (1, StreamClosedError.__qualname__)
    assert "event(s), before its end" in (call.error_message or "")


def test_a_stream_dropped_unclosed_is_recorded_by_a_finaliser(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    client = adapter.wrap(openai_client(FakeProvider(chunked=True)))

    @_window
    def ask() -> None:
        stream = client.chat.completions.create(**ASK, stream=True)
        next(iter(stream))
        del stream

    with al.record(path, seed=1):
        ask()
        gc.collect()
        assert drain_finalisers()
    (call,) = al.read(path).llm_calls()
    assert call.error_type == StreamClosedError.__qualname__


def test_the_responses_api_is_recorded_with_its_logprobs_streamed_or_not(
        tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    client = adapter.wrap(openai_client(FakeProvider()))
    ask_r: dict[str, Any] = {"model": "gpt-4.1-mini", "input": "Which option?",
                             "include": ["message.output_text.logprobs"], "top_logprobs": 5}

    @_window
    def ask() -> tuple[Any, list[str]]:
        response = client.responses.create(**ask_r)
        events = [e.type for e in client.responses.create(**ask_r, stream=True)]
        return response, events

    with al.record(path, seed=1):
        response, events = ask()
    assert events[0] == "response.created" and events[-1] == "response.completed"
    plain, streamed = al.read(path).llm_calls()
    assert {plain.provider, streamed.provider} == {"openai.responses"}
    assert (plain.input_tokens, plain.output_tokens) == (36, 2) == (
        streamed.input_tokens, streamed.output_tokens)
    assert decode(plain.response) == decode(streamed.response)
    assert choice_probs(decode(streamed.response), ["A", "B"]).probs == pytest.approx(
        choice_probs(response, ["A", "B"]).probs)


def test_a_cache_serves_the_second_identical_call_without_an_upstream_request(
        tmp_path: Path) -> None:
    provider = FakeProvider()
    path = tmp_path / "t.zst"
    with ModelCache(path=tmp_path / "c.sqlite") as cache:
        client = adapter.wrap(openai_client(provider), cache=cache)

        @_window
        def ask() -> tuple[Any, Any]:
            return client.chat.completions.create(**ASK), client.chat.completions.create(**ASK)

        with capture_spans() as spans, al.record(path, seed=1):
            first, second = ask()
    assert provider.count == 1
    assert second.model_dump(mode="json", exclude_unset=True) == first.model_dump(
        mode="json", exclude_unset=True)
    assert type(second) is openai.types.chat.ChatCompletion
    miss, hit = al.read(path).llm_calls()
    assert miss.cache_key == hit.cache_key and decode(miss.response) == decode(hit.response)
    assert [s.attributes["agentlog.cache"] for s in spans.spans if s.name.startswith("chat")
            ] == ["miss", "hit"]


def test_a_cached_call_replays_as_a_stream_to_a_caller_that_asks_for_one(
        tmp_path: Path) -> None:
    provider = FakeProvider()
    with ModelCache(path=tmp_path / "c.sqlite") as cache:
        client = adapter.wrap(openai_client(provider), cache=cache)
        whole = client.chat.completions.create(**ASK)
        stream = client.chat.completions.create(**ASK, stream=True)
        assert type(stream) is openai.Stream
        chunks = list(stream)
    assert provider.count == 1
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
        whole.choices[0].message.content)
    tokens = [t.token for c in chunks if c.choices and c.choices[0].logprobs
              for t in c.choices[0].logprobs.content]
    assert tokens == [t.token for t in whole.choices[0].logprobs.content]
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == 31


def test_draw_and_channel_make_separate_entries(tmp_path: Path) -> None:
    provider = FakeProvider()
    with ModelCache(path=tmp_path / "c.sqlite") as cache:
        client = adapter.wrap(openai_client(provider), cache=cache)
        for draw in (0, 1, 2, 0, 1):
            with call_options(draw=draw):
                client.chat.completions.create(**ASK)
        with call_options(channel="quote"):
            client.chat.completions.create(**ASK)
        assert provider.count == 4 and len(cache) == 4


def test_failures_are_never_cached(tmp_path: Path) -> None:
    provider = FakeProvider(fail={1: 500, 2: 429})
    with ModelCache(path=tmp_path / "c.sqlite") as cache:
        client = adapter.wrap(openai_client(provider), cache=cache)
        for _ in range(2):
            with pytest.raises(openai.APIStatusError):
                client.chat.completions.create(**ASK)
        assert len(cache) == 0
        client.chat.completions.create(**ASK)
        client.chat.completions.create(**ASK)
    assert provider.count == 3


def test_a_read_only_miss_names_the_field_that_differs(tmp_path: Path) -> None:
    store = tmp_path / "c.sqlite"
    with ModelCache(path=store) as cache:
        adapter.wrap(openai_client(FakeProvider()), cache=cache).chat.completions.create(**ASK)
    provider = FakeProvider()
    with ModelCache(path=store, mode="read-only") as frozen:
        client = adapter.wrap(openai_client(provider), cache=frozen)
        client.chat.completions.create(**ASK)
        with pytest.raises(al.CacheMiss, match="temperature"):
            client.chat.completions.create(**{**ASK, "temperature": 0.2})
    assert provider.count == 0


def test_a_recorded_trace_serves_a_frozen_replay_with_the_server_down(tmp_path: Path) -> None:
    original = tmp_path / "run.zst"
    client = adapter.wrap(openai_client(FakeProvider()))

    @_window
    def agent(c: Any) -> list[str]:
        a = c.chat.completions.create(**ASK).choices[0].message.content
        with c.chat.completions.create(**{**ASK, "temperature": 0.0}, stream=True) as s:
            b = "".join(x.choices[0].delta.content or "" for x in s if x.choices)
        r = c.responses.create(model="gpt-4.1-mini", input="q")
        return [a, b, r.output[0].content[0].text]

    with al.record(original, seed=1):
        live = agent(client)
    down = FakeProvider(fail=dict.fromkeys(range(1, 10), 500))
    replayed = adapter.wrap(openai_client(down), cache=ModelCache.from_traces([original]))
    with al.record(tmp_path / "replay.zst", seed=1):
        assert agent(replayed) == live
    assert down.count == 0


def test_fifty_concurrent_identical_async_calls_share_one_upstream_call(
        tmp_path: Path) -> None:
    calls = 0

    async def handler(request: httpx2.Request) -> httpx2.Response:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)  # keep the flight open while the others arrive
        return httpx2.Response(200, json=chat_body())

    async def main(cache: ModelCache) -> list[Any]:
        client = adapter.wrap(openai.AsyncOpenAI(
            api_key=CANARY, max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler))),
            cache=cache)
        async with al.record(tmp_path / "t.zst", seed=1):
            return await asyncio.gather(
                *(client.chat.completions.create(**ASK) for _ in range(50)))

    with ModelCache(path=tmp_path / "c.sqlite") as cache:
        results = asyncio.run(main(cache))
    assert calls == 1
    assert len({r.choices[0].message.content for r in results}) == 1
    statuses = [c.status for c in al.read(tmp_path / "t.zst").llm_calls()]
    assert statuses == [0] * 50


def test_async_calls_and_async_streams_are_recorded(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"

    async def main() -> list[str]:
        client = adapter.wrap(openai_client(FakeProvider(), is_async=True))
        async with al.record(path, seed=1):
            whole = await client.chat.completions.create(**ASK)
            stream = await client.chat.completions.create(**ASK, stream=True)
            assert type(stream) is openai.AsyncStream
            parts = [c.choices[0].delta.content async for c in stream if c.choices]
        return [whole.choices[0].message.content, "".join(p or "" for p in parts)]

    assert asyncio.run(main()) == [" answerB", " answerB"]
    whole, streamed = al.read(path).llm_calls()
    assert decode(streamed.response)["choices"][0]["message"]["content"] == " answerB"
    assert whole.cache_key == streamed.cache_key  # `stream` is not part of the key


def test_an_async_cache_hit_replays_an_async_stream(tmp_path: Path) -> None:
    provider = FakeProvider()

    async def main(cache: ModelCache) -> str:
        client = adapter.wrap(openai_client(provider, is_async=True), cache=cache)
        await client.chat.completions.create(**ASK)
        stream = await client.chat.completions.create(**ASK, stream=True)
        assert type(stream) is openai.AsyncStream
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    with ModelCache(path=tmp_path / "c.sqlite") as cache:
        assert asyncio.run(main(cache)) == " answerB"
    assert provider.count == 1


def test_wrapping_twice_records_each_call_once(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    client = adapter.wrap(adapter.wrap(openai_client(FakeProvider())))
    with al.record(path, seed=1):
        client.chat.completions.create(**ASK)
    assert len(al.read(path).llm_calls()) == 1


def test_a_client_that_is_not_openai_is_refused() -> None:
    with pytest.raises(TypeError, match=r"must be an openai.OpenAI or openai.AsyncOpenAI"):
        adapter.wrap(object())


def test_without_the_sdk_wrap_names_the_pip_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(al.MissingDependencyError,
                       match=r"pip install 'agentlog\[openai\]'"):
        adapter.wrap(object())


def test_importing_the_adapters_does_not_import_the_sdks() -> None:
    import subprocess

    code = ("import sys, agentlog.adapters, agentlog.adapters.openai, "
            "agentlog.adapters.anthropic; "
            "print(sorted({'openai', 'anthropic', 'vllm'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_credentials_in_headers_never_reach_the_trace_or_content_spans(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    provider = FakeProvider()
    client = adapter.wrap(openai_client(provider), capture_content=True)

    @_window
    def ask() -> None:
        client.chat.completions.create(**ASK, extra_headers={
            "Authorization": f"Bearer {CANARY}", "X-Trace": "t-1"})
        with client.chat.completions.create(**ASK, stream=True) as stream:
            list(stream)

    with capture_spans() as spans, al.record(path, seed=1):
        ask()
    assert provider.requests[0].headers["authorization"] == f"Bearer {CANARY}"  # sent as asked
    assert CANARY.encode() not in trace_plaintext(path)
    content = [s.attributes["gen_ai.input.messages"] for s in spans.spans
               if s.name.startswith("chat")]
    assert len(content) == 2 and all("Which option?" in c and CANARY not in c for c in content)


def test_an_async_stream_closed_early_is_recorded_as_closed(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"

    async def main() -> None:
        client = adapter.wrap(openai_client(FakeProvider(chunked=True), is_async=True))
        async with al.record(path, seed=1):
            stream = await client.chat.completions.create(**ASK, stream=True)
            async with stream:
                async for _ in stream:
                    break

    asyncio.run(main())
    (call,) = al.read(path).llm_calls()
    assert (call.status, call.error_type) == (1, StreamClosedError.__qualname__)


def test_copies_made_with_with_options_are_recorded_too(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    client = adapter.wrap(openai_client(FakeProvider()))
    with al.record(path, seed=1):
        client.with_options(timeout=5).chat.completions.create(**ASK)
        client.copy(max_retries=0).with_options(timeout=7).responses.create(
            model="gpt-4.1-mini", input="q")
    assert [c.provider for c in al.read(path).llm_calls()] == ["openai.chat",
                                                               "openai.responses"]


def test_the_module_example_runs() -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module("agentlog.adapters.openai"))
    assert result.attempted > 0 and result.failed == 0


def test_messages_given_as_a_generator_are_keyed_recorded_and_still_sent(
        tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    provider = FakeProvider()
    with ModelCache(path=tmp_path / "c.sqlite") as cache:
        client = adapter.wrap(openai_client(provider), cache=cache)
        with al.record(path, seed=1):
            client.chat.completions.create(**{**ASK, "messages": (m for m in MESSAGES)})
            client.chat.completions.create(**ASK)
    assert provider.count == 1 and provider.bodies[0]["messages"] == MESSAGES
    first, second = al.read(path).llm_calls()
    assert first.cache_key == second.cache_key
    assert decode(first.request)["request"]["messages"] == MESSAGES


def test_an_api_key_in_no_known_format_pasted_into_a_prompt_stays_out_of_the_trace(
        tmp_path: Path) -> None:
    """The cache key's rules do not know such a key (the key is ``clean``), so the stored
    request skips their second pass; the client's own key is a known secret of the run,
    searched for in it all the same."""
    plain_key = "plainkey-0d5f3c9e1b7a4e2f-canary"
    path = tmp_path / "t.zst"
    provider = FakeProvider()
    client = adapter.wrap(openai_client(provider, key=plain_key))
    leaked = [{"role": "user", "content": f"my key is {plain_key}; which option?"}]
    assert request_key("openai.chat", {**ASK, "messages": leaked}).clean

    @_window
    def ask() -> None:
        client.chat.completions.create(**{**ASK, "messages": leaked})

    with al.record(path, seed=1):
        ask()
    assert plain_key.encode() not in trace_plaintext(path)
    (call,) = al.read(path).llm_calls()
    assert decode(call.request)["request"]["messages"][0]["content"] == (
        "my key is <redacted>; which option?")


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads Linux's /proc")
def test_the_finaliser_thread_leaves_sigterm_and_ctrl_c_to_the_main_thread() -> None:
    import signal
    import threading

    from tests.conftest import blocked_signals

    assert drain_finalisers()  # the worker exists once it has run a job
    (worker,) = [t for t in threading.enumerate() if t.name == "agentlog-finaliser"]
    assert {signal.SIGTERM, signal.SIGINT} <= blocked_signals(worker)


def test_a_request_holding_itself_fails_as_the_bare_client_fails(tmp_path: Path) -> None:
    """The SDK cannot encode the request, so nothing reaches the HTTP seam: the caller
    gets the SDK's own error, as from the bare client, and no call is recorded."""
    loop: dict[str, Any] = {"note": "x"}
    loop["self"] = loop
    with pytest.raises(Exception) as bare:
        openai_client(FakeProvider()).chat.completions.create(**ASK, extra_body={"x": loop})
    provider = FakeProvider()
    client = adapter.wrap(openai_client(provider))
    with al.record(tmp_path / "t.zst", seed=1), pytest.raises(type(bare.value)) as wrapped:
        client.chat.completions.create(**ASK, extra_body={"x": loop})
    assert str(wrapped.value) == str(bare.value)
    assert provider.count == 0 and list(al.read(tmp_path / "t.zst").llm_calls()) == []
