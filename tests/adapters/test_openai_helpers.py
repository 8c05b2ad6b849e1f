"""The openai SDK's helpers around ``create``: ``with_raw_response``, ``chat.completions.stream``
and ``responses.stream`` are recorded and cached like ``create`` (real client, MockTransport)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx2
import pydantic
import pytest

openai = pytest.importorskip("openai")

import agentlog as al  # noqa: E402
from agentlog._encoding import decode  # noqa: E402
from agentlog.adapters import openai as adapter  # noqa: E402
from agentlog.replay import ModelCache  # noqa: E402

from ._providers import FakeProvider, chat_body, openai_client, responses_body  # noqa: E402

ASK: dict[str, Any] = {"model": "gpt-4o-mini", "logprobs": True, "top_logprobs": 5,
                       "messages": [{"role": "user", "content": "Which option? A or B."}]}


def _recorded(path: Path, fn: Any) -> tuple[Any, list[Any]]:
    with al.record(path, seed=1):
        out = al.window("ask", entry=lambda *a, **k: 0, exit=lambda r: 0)(fn)()
    return out, list(al.read(path).llm_calls())


def test_with_raw_response_returns_the_raw_response_and_records_its_parsed_body(
        tmp_path: Path) -> None:
    client = adapter.wrap(openai_client(FakeProvider()))

    def ask() -> Any:
        return client.chat.completions.with_raw_response.create(**ASK)

    raw, calls = _recorded(tmp_path / "t.zst", ask)
    assert isinstance(raw, openai._legacy_response.LegacyAPIResponse)
    assert raw.http_response.status_code == 200 and raw.headers["content-type"]
    completion = raw.parse()
    assert type(completion) is openai.types.chat.ChatCompletion
    assert completion.model_dump(mode="json", exclude_unset=True) == chat_body()
    (call,) = calls
    assert (call.provider, call.status, call.input_tokens) == ("openai.chat", 0, 31)
    assert decode(call.response) == chat_body()


def test_with_raw_response_under_a_cache_serves_a_raw_response_on_a_hit(
        tmp_path: Path) -> None:
    provider = FakeProvider()
    with ModelCache(tmp_path / "c.sqlite") as cache:
        client = adapter.wrap(openai_client(provider), cache=cache)
        first = client.chat.completions.with_raw_response.create(**ASK)
        again = client.chat.completions.with_raw_response.create(**ASK)
        plain = client.chat.completions.create(**ASK)  # the same request: the same entry
    assert provider.count == 1
    assert first.http_response is not again.http_response
    assert again.parse().model_dump(mode="json", exclude_unset=True) == chat_body()
    assert again.http_response.status_code == 200
    assert plain.choices[0].message.content == first.parse().choices[0].message.content


def test_async_with_raw_response_is_recorded(tmp_path: Path) -> None:
    client = adapter.wrap(openai_client(FakeProvider(), is_async=True))

    async def main() -> Any:
        with al.record(tmp_path / "t.zst", seed=1):
            @al.window("ask", entry=lambda *a, **k: 0, exit=lambda r: 0)
            async def ask() -> Any:
                return await client.responses.with_raw_response.create(
                    model="gpt-4.1-mini", input="A or B?")
            return await ask()

    raw = asyncio.run(main())
    assert raw.parse().model_dump(mode="json", exclude_unset=True) == responses_body()
    (call,) = al.read(tmp_path / "t.zst").llm_calls()
    assert call.provider == "openai.responses" and decode(call.response) == responses_body()


def test_chat_completions_stream_is_recorded_and_a_hit_replays_the_same_events(
        tmp_path: Path) -> None:
    provider = FakeProvider()
    with ModelCache(tmp_path / "c.sqlite") as cache:
        client = adapter.wrap(openai_client(provider), cache=cache)

        def ask() -> list[Any]:
            finals = []
            for _ in range(2):
                with client.chat.completions.stream(**ASK) as stream:
                    text = "".join(e.delta for e in stream if e.type == "content.delta")
                    finals.append((text, stream.get_final_completion()))
            return finals

        finals, calls = _recorded(tmp_path / "t.zst", ask)
    assert provider.count == 1 and cache.stats()["hits"] == 1
    assert len(calls) == 2 and calls[0].cache_key == calls[1].cache_key
    (text1, final1), (text2, final2) = finals
    assert text1 == text2 == " answerB"
    assert final1.choices[0].logprobs == final2.choices[0].logprobs
    assert decode(calls[0].response)["choices"][0]["message"]["content"] == " answerB"


def test_responses_stream_is_recorded_with_its_final_response(tmp_path: Path) -> None:
    client = adapter.wrap(openai_client(FakeProvider()))

    def ask() -> Any:
        with client.responses.stream(model="gpt-4.1-mini", input="A or B?") as stream:
            for _ in stream:
                pass
            return stream.get_final_response()

    final, calls = _recorded(tmp_path / "t.zst", ask)
    assert final.output_text == " answerB"
    (call,) = calls
    assert call.provider == "openai.responses" and decode(call.response) == responses_body()


def test_async_chat_completions_stream_is_recorded(tmp_path: Path) -> None:
    client = adapter.wrap(openai_client(FakeProvider(), is_async=True))

    async def main() -> str:
        with al.record(tmp_path / "t.zst", seed=1):
            @al.window("ask", entry=lambda *a, **k: 0, exit=lambda r: 0)
            async def ask() -> str:
                async with client.chat.completions.stream(**ASK) as stream:
                    return "".join([e.delta async for e in stream if e.type == "content.delta"])
            return await ask()

    assert asyncio.run(main()) == " answerB"
    (call,) = al.read(tmp_path / "t.zst").llm_calls()
    assert call.status == 0 and call.output_tokens == 2


class Answer(pydantic.BaseModel):
    answer: str
    confidence: float


def _json_provider() -> Any:
    """A FakeProvider whose chat answers are the JSON a ``response_format`` asks for."""
    provider = FakeProvider()
    plain = provider.__call__

    def handler(request: httpx2.Request) -> httpx2.Response:
        reply = plain(request)
        if reply.status_code != 200 or not request.url.path.endswith("/chat/completions"):
            return reply
        body = reply.json()
        body["choices"][0]["message"]["content"] = '{"answer": "B", "confidence": 0.75}'
        return httpx2.Response(200, json=body)

    handler.provider = provider  # type: ignore[attr-defined]
    return handler


def _json_client(handler: Any, **kwargs: Any) -> Any:
    return openai.OpenAI(api_key="sk-test", max_retries=0, http_client=httpx2.Client(
        transport=httpx2.MockTransport(handler)), **kwargs)


def test_parse_is_recorded_with_its_wire_body_and_returns_the_parsed_object(
        tmp_path: Path) -> None:
    handler = _json_provider()
    client = adapter.wrap(_json_client(handler))

    def ask() -> Any:
        return client.chat.completions.parse(**ASK, response_format=Answer)

    result, calls = _recorded(tmp_path / "t.zst", ask)
    bare = _json_client(_json_provider()).chat.completions.parse(**ASK, response_format=Answer)
    assert type(result) is type(bare) and result == bare  # what the SDK alone returns
    assert result.choices[0].message.parsed == Answer(answer="B", confidence=0.75)
    (call,) = calls
    assert (call.provider, call.status, call.input_tokens) == ("openai.chat", 0, 31)
    message = decode(call.response)["choices"][0]["message"]
    assert "parsed" not in message and message["content"].startswith('{"answer"')
    schema = decode(call.request)["request"]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["confidence"]["type"] == "number"


def test_a_parse_cache_hit_is_parsed_again_into_the_callers_class(tmp_path: Path) -> None:
    handler = _json_provider()
    with ModelCache(tmp_path / "c.sqlite") as cache:
        client = adapter.wrap(_json_client(handler), cache=cache)
        first = client.chat.completions.parse(**ASK, response_format=Answer)
        again = client.chat.completions.parse(**ASK, response_format=Answer)
        assert cache.stats()["hits"] == 1
    assert handler.provider.count == 1
    assert first is not again and type(again) is type(first)
    assert again.choices[0].message.parsed == first.choices[0].message.parsed
    assert again.choices[0].logprobs == first.choices[0].logprobs


def test_async_parse_is_recorded_and_wrapping_twice_records_it_once(tmp_path: Path) -> None:
    handler = _json_provider()
    client = adapter.wrap(adapter.wrap(openai.AsyncOpenAI(
        api_key="sk-test", max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)))))

    async def main() -> Any:
        with al.record(tmp_path / "t.zst", seed=1):
            @al.window("ask", entry=lambda *a, **k: 0, exit=lambda r: 0)
            async def ask() -> Any:
                return await client.chat.completions.parse(**ASK, response_format=Answer)
            return await ask()

    result = asyncio.run(main())
    assert result.choices[0].message.parsed.answer == "B"
    (call,) = al.read(tmp_path / "t.zst").llm_calls()
    assert call.status == 0
