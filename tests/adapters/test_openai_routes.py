"""The openai SDK's other routes to a model call, over the real client and MockTransport:
``responses.parse()``, ``with_raw_response.create(stream=True)``, ``with_raw_response.parse()``
and ``with_streaming_response.create()`` (chat and Responses, sync and async).

Each route is one ``Case``: how the caller uses it, reduced to a comparable value. Every case
is run through the same checks: recorded (request, response, usage, status) with the value
the caller gets equal to what the unwrapped client gives; a second identical call a cache
hit without an upstream request; a read-only miss raising ``CacheMiss``; a 500 not cached;
the client's key absent from the trace bytes and the spans.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic
import pytest

openai = pytest.importorskip("openai")

import agentlog as al  # noqa: E402
from agentlog._encoding import decode  # noqa: E402
from agentlog.adapters import StreamClosedError  # noqa: E402
from agentlog.adapters import openai as adapter  # noqa: E402
from agentlog.replay import ModelCache  # noqa: E402
from agentlog.testing import capture_spans  # noqa: E402

from ._providers import ANSWER_JSON, CANARY, FakeProvider, openai_client  # noqa: E402
from ._route_calls import call, in_run  # noqa: E402
from ._trace_text import trace_plaintext  # noqa: E402

CHAT: dict[str, Any] = {"model": "gpt-4o-mini", "logprobs": True, "top_logprobs": 5,
                        "messages": [{"role": "user", "content": "Which option? A or B."}]}
RESP: dict[str, Any] = {"model": "gpt-4.1-mini", "input": "Which option? A or B."}


class Answer(pydantic.BaseModel):
    answer: str
    confidence: float


def _events(stream: Any) -> list[Any]:
    with stream:
        return list(stream)


async def _aevents(stream: Any) -> list[Any]:
    async with stream:
        return [event async for event in stream]


@dataclass(frozen=True)
class Case:
    """One route: how a caller uses it (sync and async), and what it records."""

    id: str
    provider: str
    sync: Callable[[Any], Any]
    run_async: Callable[[Any], Awaitable[Any]]
    text: Callable[[Any], str]  # the answer text in the caller's value
    recorded_text: Callable[[dict[str, Any]], str]  # the answer text in the recorded body
    input_tokens: int
    answer: str | None = None  # the provider's answer text (None: its default)


def _chat_text(body: dict[str, Any]) -> str:
    return str(body["choices"][0]["message"]["content"])


def _resp_text(body: dict[str, Any]) -> str:
    return "".join(part["text"] for item in body["output"] for part in item["content"])


def _delta_text(events: list[Any]) -> str:
    """The text of a chat or Responses event list."""
    out = []
    for event in events:
        if getattr(event, "choices", None):
            out.append(event.choices[0].delta.content or "")
        elif getattr(event, "type", None) == "response.output_text.delta":
            out.append(event.delta)
    return "".join(out)


# ------------------------------------------------------------------ the routes


def _responses_parse(client: Any) -> Any:
    return client.responses.parse(**RESP, text_format=Answer)


async def _aresponses_parse(client: Any) -> Any:
    return await client.responses.parse(**RESP, text_format=Answer)


def _raw_stream(where: str, ask: dict[str, Any]) -> tuple[Any, Any]:
    def sync(client: Any) -> Any:
        raw = _resource(client, where).with_raw_response.create(**ask, stream=True)
        return (raw.status_code, _events(raw.parse()))

    async def run_async(client: Any) -> Any:
        raw = await _resource(client, where).with_raw_response.create(**ask, stream=True)
        return (raw.status_code, await _aevents(raw.parse()))

    return sync, run_async


def _raw_parse(where: str, ask: dict[str, Any], fmt: str) -> tuple[Any, Any]:
    def sync(client: Any) -> Any:
        raw = _resource(client, where).with_raw_response.parse(**ask, **{fmt: Answer})
        return (raw.status_code, raw.parse())

    async def run_async(client: Any) -> Any:
        raw = await _resource(client, where).with_raw_response.parse(**ask, **{fmt: Answer})
        return (raw.status_code, raw.parse())

    return sync, run_async


def _streaming(where: str, ask: dict[str, Any], how: str, method: str = "create"
               ) -> tuple[Any, Any]:
    """``with_streaming_response.<method>``, its body read by ``how``."""
    def sync(client: Any) -> Any:
        routes = _resource(client, where).with_streaming_response
        with getattr(routes, method)(**ask) as response:
            if how == "parse":
                parsed = response.parse()
                return _events(parsed) if ask.get("stream") else parsed
            if how == "read":
                return response.read()
            return list(response.iter_lines())

    async def run_async(client: Any) -> Any:
        routes = _resource(client, where).with_streaming_response
        async with getattr(routes, method)(**ask) as response:
            if how == "parse":
                parsed = await response.parse()
                return await _aevents(parsed) if ask.get("stream") else parsed
            if how == "read":
                return await response.read()
            return [line async for line in response.iter_lines()]

    return sync, run_async


def _resource(client: Any, where: str) -> Any:
    return client.chat.completions if where == "chat" else client.responses


def _lines_text(lines: list[str]) -> str:
    """The answer text in SSE lines of a chat or Responses stream."""
    import json

    events = [json.loads(line[6:]) for line in lines
              if line.startswith("data: ") and line != "data: [DONE]"]
    out = []
    for event in events:
        if event.get("choices"):
            out.append(event["choices"][0]["delta"].get("content") or "")
        elif event.get("type") == "response.output_text.delta":
            out.append(event["delta"])
    return "".join(out)


def _bytes_text(data: bytes) -> str:
    import json

    body = json.loads(data)
    return _chat_text(body) if "choices" in body else _resp_text(body)


CASES = [
    Case("responses.parse", "openai.responses", _responses_parse, _aresponses_parse,
         text=lambda r: r.output_parsed.answer + r.output_text, recorded_text=_resp_text,
         input_tokens=36, answer=ANSWER_JSON),
    Case("chat.raw.create(stream)", "openai.chat", *_raw_stream("chat", CHAT),
         text=lambda v: _delta_text(v[1]), recorded_text=_chat_text, input_tokens=31),
    Case("responses.raw.create(stream)", "openai.responses", *_raw_stream("responses", RESP),
         text=lambda v: _delta_text(v[1]), recorded_text=_resp_text, input_tokens=36),
    Case("chat.raw.parse", "openai.chat", *_raw_parse("chat", CHAT, "response_format"),
         text=lambda v: v[1].choices[0].message.parsed.answer
         + v[1].choices[0].message.content,
         recorded_text=_chat_text, input_tokens=31, answer=ANSWER_JSON),
    Case("responses.raw.parse", "openai.responses",
         *_raw_parse("responses", RESP, "text_format"),
         text=lambda v: v[1].output_parsed.answer + v[1].output_text,
         recorded_text=_resp_text, input_tokens=36, answer=ANSWER_JSON),
    Case("chat.streaming.create(parse)", "openai.chat", *_streaming("chat", CHAT, "parse"),
         text=lambda v: str(v.choices[0].message.content), recorded_text=_chat_text,
         input_tokens=31),
    Case("chat.streaming.parse", "openai.chat",
         *_streaming("chat", {**CHAT, "response_format": Answer}, "parse", "parse"),
         text=lambda v: v.choices[0].message.parsed.answer + v.choices[0].message.content,
         recorded_text=_chat_text, input_tokens=31, answer=ANSWER_JSON),
    Case("chat.streaming.create(stream, parse)", "openai.chat",
         *_streaming("chat", {**CHAT, "stream": True}, "parse"),
         text=_delta_text, recorded_text=_chat_text, input_tokens=31),
    Case("chat.streaming.create(stream, iter_lines)", "openai.chat",
         *_streaming("chat", {**CHAT, "stream": True}, "lines"),
         text=_lines_text, recorded_text=_chat_text, input_tokens=31),
    Case("responses.streaming.create(read)", "openai.responses",
         *_streaming("responses", RESP, "read"),
         text=_bytes_text, recorded_text=_resp_text, input_tokens=36),
    Case("responses.streaming.create(stream, parse)", "openai.responses",
         *_streaming("responses", {**RESP, "stream": True}, "parse"),
         text=_delta_text, recorded_text=_resp_text, input_tokens=36),
]
IDS = [case.id for case in CASES]


def _call(case: Case, client: Any, is_async: bool, times: int = 1) -> list[Any]:
    return call(case.sync, case.run_async, client, is_async, times)


def _in_run(case: Case, client: Any, is_async: bool, path: Path) -> Any:
    return in_run(case.sync, case.run_async, client, is_async, path)


def _client(provider: FakeProvider, is_async: bool, **wrap: Any) -> Any:
    return adapter.wrap(openai_client(provider, is_async=is_async), **wrap)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("chunked", [False, True], ids=["whole", "chunked"])
def test_recorded_in_the_window_and_the_caller_gets_what_the_bare_client_gives(
        case: Case, is_async: bool, chunked: bool, tmp_path: Path) -> None:
    (bare,) = _call(case, openai_client(FakeProvider(text=case.answer, chunked=chunked),
                                        is_async=is_async), is_async)
    provider = FakeProvider(text=case.answer, chunked=chunked)
    path = tmp_path / "t.zst"
    with capture_spans() as spans:
        value = _in_run(case, _client(provider, is_async), is_async, path)
    assert value == bare
    assert case.text(value) == (f"B{case.answer}" if case.answer else " answerB")
    (call,) = al.read(path).llm_calls()
    assert (call.provider, call.status, call.input_tokens) == (case.provider, 0, case.input_tokens)
    assert case.recorded_text(decode(call.response)) == (case.answer or " answerB")
    request = decode(call.request)["request"]
    assert request["model"] == provider.bodies[0]["model"] and "extra_headers" not in request
    assert provider.count == 1
    (span,) = spans.by_name(f"chat {provider.bodies[0]['model']}")
    assert span.attributes["gen_ai.usage.input_tokens"] == case.input_tokens
    assert CANARY.encode() not in trace_plaintext(path)
    assert CANARY not in repr([dict(s.attributes or {}) for s in spans.spans])


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_second_identical_call_is_a_cache_hit_without_an_upstream_request(
        case: Case, is_async: bool, tmp_path: Path) -> None:
    provider = FakeProvider(text=case.answer)
    with ModelCache(tmp_path / "c.sqlite") as cache:
        first, again = _call(case, _client(provider, is_async, cache=cache), is_async, 2)
        assert cache.stats()["hits"] == 1
    assert provider.count == 1
    assert case.text(again) == case.text(first)
    with ModelCache(tmp_path / "c.sqlite", mode="read-only") as frozen:
        (replayed,) = _call(case, _client(FakeProvider(), is_async, cache=frozen), is_async)
    assert case.text(replayed) == case.text(first)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_read_only_miss_raises_cache_miss_and_a_500_is_not_cached(
        case: Case, is_async: bool, tmp_path: Path) -> None:
    ModelCache(tmp_path / "empty.sqlite").close()
    with ModelCache(tmp_path / "empty.sqlite", mode="read-only") as frozen, \
            pytest.raises(al.CacheMiss, match=re.escape(case.provider)):
        _call(case, _client(FakeProvider(), is_async, cache=frozen), is_async)
    provider = FakeProvider(fail={1: 500}, text=case.answer)
    with ModelCache(tmp_path / "c.sqlite") as cache:
        client = _client(provider, is_async, cache=cache)
        with pytest.raises(openai.InternalServerError, match="server had an error"):
            _call(case, client, is_async)
        (value,) = _call(case, client, is_async)
        assert cache.stats()["hits"] == 0
    assert provider.count == 2
    assert case.text(value)


def test_a_failed_call_is_recorded_with_its_error_and_without_the_key(tmp_path: Path) -> None:
    provider = FakeProvider(fail={1: 401})
    path = tmp_path / "t.zst"
    case = CASES[IDS.index("chat.streaming.create(stream, parse)")]
    with pytest.raises(openai.AuthenticationError, match="Incorrect API key"):
        _in_run(case, _client(provider, False), False, path)
    (call,) = al.read(path).llm_calls()
    assert (call.status, call.error_type) == (1, "ModelHTTPError")
    assert CANARY.encode() not in trace_plaintext(path)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_streaming_response_left_before_its_end_records_what_was_read(
        is_async: bool, tmp_path: Path) -> None:
    ask = {**CHAT, "stream": True}

    def sync(client: Any) -> Any:
        with client.chat.completions.with_streaming_response.create(**ask) as response:
            return next(iter(response.iter_lines()))

    async def run_async(client: Any) -> Any:
        async with client.chat.completions.with_streaming_response.create(**ask) as response:
            async for line in response.iter_lines():
                return line

    case = Case("early", "openai.chat", sync, run_async, text=str, recorded_text=_chat_text,
                input_tokens=31)
    path = tmp_path / "t.zst"
    first = _in_run(case, _client(FakeProvider(chunked=True), is_async), is_async, path)
    assert first.startswith("data: {")
    (call,) = al.read(path).llm_calls()
    assert (call.status, call.error_type) == (1, StreamClosedError.__qualname__)
    assert "event(s), before its end" in (call.error_message or "")


def test_a_raw_stream_closed_early_is_recorded_as_closed(tmp_path: Path) -> None:
    def sync(client: Any) -> Any:
        raw = client.chat.completions.with_raw_response.create(**CHAT, stream=True)
        with raw.parse() as stream:
            return next(iter(stream)).id

    case = Case("early", "openai.chat", sync, sync, text=str, recorded_text=_chat_text,
                input_tokens=31)
    path = tmp_path / "t.zst"
    provider = FakeProvider(chunked=True)
    assert _in_run(case, _client(provider, False), False, path) == "chatcmpl-AbC123"
    (call,) = al.read(path).llm_calls()
    assert (call.status, call.error_type) == (1, StreamClosedError.__qualname__)


def test_outside_a_run_and_without_a_cache_the_routes_are_the_sdks_own(tmp_path: Path) -> None:
    provider = FakeProvider()
    client = _client(provider, False)
    manager = client.chat.completions.with_streaming_response.create(**CHAT)
    with manager as response:
        assert type(response).__name__ == "APIResponse"
        assert response.parse().choices[0].message.content == " answerB"
    raw = client.responses.with_raw_response.create(**RESP, stream=True)
    assert type(raw).__name__ == "LegacyAPIResponse"
    assert _delta_text(_events(raw.parse())) == " answerB"
    assert provider.count == 2


def test_a_hit_of_a_streaming_response_reads_like_the_sdks(tmp_path: Path) -> None:
    """A hit serves an APIResponse over the stored body: parse, read, json, iter_lines."""
    with ModelCache(tmp_path / "c.sqlite") as cache:
        client = _client(FakeProvider(), False, cache=cache)
        client.chat.completions.create(**CHAT)  # stored by create, served to the route
        with client.chat.completions.with_streaming_response.create(**CHAT) as response:
            assert response.status_code == 200 and not response.headers.get("x-request-id")
            assert response.json()["choices"][0]["message"]["content"] == " answerB"
            assert response.parse().choices[0].logprobs.content[1].token == "B"
            assert [line for line in response.iter_lines() if line]
        with client.chat.completions.with_streaming_response.create(
                **CHAT, stream=True) as response:
            assert _lines_text(list(response.iter_lines())) == " answerB"
        assert cache.stats()["hits"] == 2


@pytest.mark.parametrize("case", [c for c in CASES if c.id in (
    "responses.parse", "chat.raw.create(stream)", "chat.raw.parse",
    "chat.streaming.create(stream, parse)")], ids=lambda c: c.id)
def test_wrapping_twice_and_copies_record_each_route_call_once(case: Case,
                                                              tmp_path: Path) -> None:
    provider = FakeProvider(text=case.answer)
    twice = adapter.wrap(adapter.wrap(openai_client(provider)))
    copy = twice.with_options(timeout=30)
    path = tmp_path / "t.zst"

    def both(_: Any) -> Any:
        return case.sync(twice), case.sync(copy)

    first, second = _in_run(Case("both", case.provider, both, both, text=str,
                                 recorded_text=case.recorded_text, input_tokens=0),
                            None, False, path)
    assert case.text(first) == case.text(second)
    assert provider.count == 2
    assert len(list(al.read(path).llm_calls())) == 2


def test_concurrent_async_raw_streams_each_get_their_own_recorded_stream(
        tmp_path: Path) -> None:
    provider = FakeProvider(chunked=True)
    client = _client(provider, True)
    asks = [{**CHAT, "seed": i} for i in range(20)]

    async def one(ask: dict[str, Any]) -> Any:
        raw = await client.chat.completions.with_raw_response.create(**ask, stream=True)
        return raw, _delta_text(await _aevents(raw.parse()))

    async def main() -> list[Any]:
        with al.record(tmp_path / "t.zst", seed=1):
            @al.window("ask", entry=lambda *a, **k: 0, exit=lambda r: 0)
            async def ask() -> list[Any]:
                return list(await asyncio.gather(*(one(a) for a in asks)))
            return await ask()

    results = asyncio.run(main())
    assert [text for _, text in results] == [" answerB"] * 20
    assert len({id(raw) for raw, _ in results}) == 20
    calls = list(al.read(tmp_path / "t.zst").llm_calls())
    assert sorted(decode(c.request)["request"]["seed"] for c in calls) == list(range(20))
    assert all(c.status == 0 and c.input_tokens == 31 for c in calls)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_trace_of_the_routes_serves_a_frozen_replay_with_the_server_down(
        is_async: bool, tmp_path: Path) -> None:
    """Every route's record is a cache entry: the trace alone replays them all."""
    def run_all(client: Any) -> list[str]:
        return [case.text(case.sync(client)) for case in CASES if case.answer is None]

    async def arun_all(client: Any) -> list[str]:
        return [case.text(await case.run_async(client)) for case in CASES
                if case.answer is None]

    both = Case("all", "openai.chat", run_all, arun_all, text=str, recorded_text=_chat_text,
                input_tokens=0)
    original = tmp_path / "run.zst"
    live = _in_run(both, _client(FakeProvider(chunked=True), is_async), is_async, original)
    assert len(list(al.read(original).llm_calls())) == len(live) == 7
    down = FakeProvider(fail=dict.fromkeys(range(1, 20), 500))
    frozen = ModelCache.from_traces([original])
    replayed = _in_run(both, _client(down, is_async, cache=frozen), is_async,
                       tmp_path / "replay.zst")
    assert replayed == live and down.count == 0
