"""anthropic ``messages.parse(output_format=...)`` and ``messages.stream(output_format=...)``
over the real client and MockTransport: recorded, cached, the caller's value and the request
sent the same as without agentlog (sync and async)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pydantic
import pytest

anthropic = pytest.importorskip("anthropic")

import agentlog as al  # noqa: E402
from agentlog._encoding import decode  # noqa: E402
from agentlog.adapters import anthropic as adapter  # noqa: E402
from agentlog.replay import ModelCache  # noqa: E402
from agentlog.testing import capture_spans  # noqa: E402

from ._providers import ANSWER_JSON, CANARY, FakeProvider, anthropic_client  # noqa: E402
from ._route_calls import call, in_run  # noqa: E402
from ._trace_text import trace_plaintext  # noqa: E402

ASK: dict[str, Any] = {"model": "claude-opus-4-7", "max_tokens": 64,
                       "messages": [{"role": "user", "content": "Which option? A or B."}]}


class Answer(pydantic.BaseModel):
    answer: str
    confidence: float


def _parse(client: Any) -> Any:
    return client.messages.parse(**ASK, output_format=Answer)


async def _aparse(client: Any) -> Any:
    return await client.messages.parse(**ASK, output_format=Answer)


def _stream(client: Any) -> Any:
    with client.messages.stream(**ASK, output_format=Answer) as stream:
        kinds = [event.type for event in stream]
        return kinds, stream.get_final_message()


async def _astream(client: Any) -> Any:
    async with client.messages.stream(**ASK, output_format=Answer) as stream:
        kinds = [event.type async for event in stream]
        return kinds, await stream.get_final_message()


def _final(value: Any) -> Any:
    return value[1] if isinstance(value, tuple) else value


ROUTES: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Awaitable[Any]]]] = {
    "parse": (_parse, _aparse), "stream": (_stream, _astream)}


def _call(route: str, client: Any, is_async: bool, times: int = 1) -> list[Any]:
    return call(*ROUTES[route], client, is_async, times)


def _in_run(route: str, client: Any, is_async: bool, path: Path) -> Any:
    return in_run(*ROUTES[route], client, is_async, path)


def _client(provider: FakeProvider, is_async: bool, **wrap: Any) -> Any:
    return adapter.wrap(anthropic_client(provider, is_async=is_async), **wrap)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_recorded_with_the_request_and_value_the_sdk_alone_sends_and_gives(
        route: str, is_async: bool, tmp_path: Path) -> None:
    bare_provider = FakeProvider(text=ANSWER_JSON)
    (bare,) = _call(route, anthropic_client(bare_provider, is_async=is_async), is_async)
    provider = FakeProvider(text=ANSWER_JSON)
    path = tmp_path / "t.zst"
    with capture_spans() as spans:
        value = _in_run(route, _client(provider, is_async), is_async, path)
    assert value == bare
    assert _final(value).parsed_output == Answer(answer="B", confidence=0.75)
    assert provider.bodies == bare_provider.bodies  # the same request, output_config included
    assert provider.requests[0].headers.get("x-stainless-helper-method") == \
        bare_provider.requests[0].headers.get("x-stainless-helper-method")
    (call,) = al.read(path).llm_calls()
    assert (call.provider, call.status, call.input_tokens) == ("anthropic.messages", 0, 25)
    recorded = decode(call.response)
    assert recorded["content"] == [{"type": "text", "text": ANSWER_JSON}]  # no parsed_output
    request = decode(call.request)["request"]
    assert request["max_tokens"] == 64
    schema = request["output_config"]["format"]["schema"]  # the wire body, as sent
    assert set(schema["properties"]) == {"answer", "confidence"}
    (span,) = spans.by_name("chat claude-opus-4-7")
    assert span.attributes["gen_ai.usage.input_tokens"] == 25
    assert CANARY.encode() not in trace_plaintext(path)
    assert CANARY not in repr([dict(s.attributes or {}) for s in spans.spans])


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_second_identical_call_is_a_hit_parsed_again_into_the_callers_class(
        route: str, is_async: bool, tmp_path: Path) -> None:
    provider = FakeProvider(text=ANSWER_JSON)
    with ModelCache(tmp_path / "c.sqlite") as cache:
        first, again = _call(route, _client(provider, is_async, cache=cache), is_async, 2)
        assert cache.stats()["hits"] == 1
    assert provider.count == 1
    assert type(_final(again)) is type(_final(first))
    assert _final(again).parsed_output == _final(first).parsed_output == Answer(
        answer="B", confidence=0.75)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_read_only_miss_raises_cache_miss_and_a_500_is_not_cached(
        route: str, is_async: bool, tmp_path: Path) -> None:
    ModelCache(tmp_path / "empty.sqlite").close()
    with ModelCache(tmp_path / "empty.sqlite", mode="read-only") as frozen, \
            pytest.raises(al.CacheMiss, match=r"anthropic\.messages"):
        _call(route, _client(FakeProvider(), is_async, cache=frozen), is_async)
    provider = FakeProvider(fail={1: 500}, text=ANSWER_JSON)
    with ModelCache(tmp_path / "c.sqlite") as cache:
        client = _client(provider, is_async, cache=cache)
        with pytest.raises(anthropic.InternalServerError, match="Internal server error"):
            _call(route, client, is_async)
        (value,) = _call(route, client, is_async)
        assert cache.stats()["hits"] == 0
    assert provider.count == 2
    assert _final(value).parsed_output.answer == "B"


def test_output_format_given_as_a_dict_is_refused_as_the_sdk_refuses_it() -> None:
    client = _client(FakeProvider(), False)
    with pytest.raises(TypeError, match="`output_format` must be a type"):
        client.messages.stream(**ASK, output_format={"type": "object"})


# ------------------------------------------------------------------ raw and streaming responses
# Before these were wrapped, both routes raised AttributeError inside a run (the SDK built
# them around the wrapped ``create``, which could not read a raw response).


def _text(events: list[Any]) -> str:
    return "".join(e.delta.text for e in events if e.type == "content_block_delta")


def _raw(stream: bool) -> tuple[Any, Any]:
    def sync(client: Any) -> Any:
        raw = client.messages.with_raw_response.create(**ASK, stream=stream)
        parsed = raw.parse()
        if stream:
            with parsed:
                return raw.status_code, _text(list(parsed))
        return raw.status_code, parsed.content[0].text

    async def run_async(client: Any) -> Any:
        raw = await client.messages.with_raw_response.create(**ASK, stream=stream)
        parsed = await raw.parse()
        if stream:
            async with parsed:
                return raw.status_code, _text([e async for e in parsed])
        return raw.status_code, parsed.content[0].text

    return sync, run_async


def _streaming(stream: bool) -> tuple[Any, Any]:
    def sync(client: Any) -> Any:
        with client.messages.with_streaming_response.create(**ASK, stream=stream) as response:
            if stream:
                return response.status_code, _text(list(response.parse()))
            return response.status_code, response.parse().content[0].text

    async def run_async(client: Any) -> Any:
        async with client.messages.with_streaming_response.create(
                **ASK, stream=stream) as response:
            parsed = await response.parse()
            if stream:
                return response.status_code, _text([e async for e in parsed])
            return response.status_code, parsed.content[0].text

    return sync, run_async


PLAIN = {"raw": _raw(False), "raw(stream)": _raw(True), "streaming": _streaming(False),
         "streaming(stream)": _streaming(True)}


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("chunked", [False, True], ids=["whole", "chunked"])
@pytest.mark.parametrize("route", sorted(PLAIN))
def test_raw_and_streaming_responses_are_recorded_and_give_what_the_sdk_gives(
        route: str, chunked: bool, is_async: bool, tmp_path: Path) -> None:
    (bare,) = call(*PLAIN[route], anthropic_client(FakeProvider(chunked=chunked),
                                                   is_async=is_async), is_async)
    path = tmp_path / "t.zst"
    with capture_spans() as spans:
        value = in_run(*PLAIN[route], _client(FakeProvider(chunked=chunked), is_async),
                       is_async, path)
    assert value == bare == (200, "B")
    (call_,) = al.read(path).llm_calls()
    assert (call_.provider, call_.status, call_.input_tokens) == ("anthropic.messages", 0, 25)
    assert decode(call_.response)["content"] == [{"type": "text", "text": "B"}]
    assert len(spans.by_name("chat claude-opus-4-7")) == 1
    assert CANARY.encode() not in trace_plaintext(path)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("route", sorted(PLAIN))
def test_raw_and_streaming_responses_are_cached_and_failures_are_not(
        route: str, is_async: bool, tmp_path: Path) -> None:
    provider = FakeProvider(fail={1: 500})
    with ModelCache(tmp_path / "c.sqlite") as cache:
        client = _client(provider, is_async, cache=cache)
        with pytest.raises(anthropic.InternalServerError, match="Internal server error"):
            call(*PLAIN[route], client, is_async)
        first, again = call(*PLAIN[route], client, is_async, 2)
        assert cache.stats()["hits"] == 1
    assert provider.count == 2 and first == again == (200, "B")
    offline = FakeProvider()
    with ModelCache(tmp_path / "c.sqlite", mode="read-only") as frozen:
        assert call(*PLAIN[route], _client(offline, is_async, cache=frozen), is_async) == [
            (200, "B")]
    assert offline.count == 0
    ModelCache(tmp_path / "empty.sqlite").close()
    with ModelCache(tmp_path / "empty.sqlite", mode="read-only") as frozen, \
            pytest.raises(al.CacheMiss, match=r"anthropic\.messages"):
        call(*PLAIN[route], _client(offline, is_async, cache=frozen), is_async)
