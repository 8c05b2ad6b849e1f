"""``messages.stream()`` of the real anthropic client over MockTransport: the caller sees the
SDK's own stream manager with the same events; the call is recorded and cached."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")

import agentlog as al  # noqa: E402
from agentlog._encoding import decode  # noqa: E402
from agentlog.adapters import StreamClosedError  # noqa: E402
from agentlog.adapters import anthropic as adapter  # noqa: E402
from agentlog.adapters._recording import drain_finalisers  # noqa: E402
from agentlog.replay import ModelCache  # noqa: E402

from ._providers import FakeProvider, anthropic_client, message_body  # noqa: E402

ASK: dict[str, Any] = {"model": "claude-opus-4-7", "max_tokens": 8,
                       "messages": [{"role": "user", "content": "Which option? A or B."}]}


def _window(fn: Any) -> Any:
    return al.window("ask", entry=lambda *a, **k: 0, exit=lambda r: 0)(fn)


def _events(client: Any) -> tuple[list[str], str, dict[str, Any]]:
    with client.messages.stream(**ASK) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    return kinds, final.content[0].text, final.model_dump(mode="json", exclude_unset=True)


def test_the_caller_sees_the_same_events_and_final_message_as_without_agentlog(
        tmp_path: Path) -> None:
    bare_provider, provider = FakeProvider(), FakeProvider()
    expected = _events(anthropic_client(bare_provider))
    client = adapter.wrap(anthropic_client(provider))
    seen: list[Any] = []
    with al.record(tmp_path / "t.zst", seed=1):
        _window(lambda: seen.append(_events(client)))()
    assert seen == [expected]
    assert expected[1] == "B"
    sent = provider.requests[0]
    assert sent.headers["x-stainless-helper-method"] == "stream"
    assert sent.headers["x-stainless-stream-helper"] == "messages"
    (call,) = al.read(tmp_path / "t.zst").llm_calls()
    assert (call.provider, call.status, call.input_tokens, call.output_tokens) == (
        "anthropic.messages", 0, 25, 1)
    assert decode(call.response) == message_body()


def test_a_stream_closed_early_records_what_was_received_marked_closed(
        tmp_path: Path) -> None:
    client = adapter.wrap(anthropic_client(FakeProvider(chunked=True)))

    @_window
    def ask() -> None:
        with client.messages.stream(**ASK) as stream:
            next(iter(stream))  # message_start only

    with al.record(tmp_path / "t.zst", seed=1):
        ask()
    (call,) = al.read(tmp_path / "t.zst").llm_calls()
    assert (call.status, call.error_type) == (1, StreamClosedError.__qualname__)
    assert "event(s), before its end" in (call.error_message or "")
    assert decode(call.response)["id"] == message_body()["id"]


def test_an_abandoned_stream_is_recorded_by_the_finaliser(tmp_path: Path) -> None:
    client = adapter.wrap(anthropic_client(FakeProvider(chunked=True)))

    @_window
    def ask() -> None:
        manager = client.messages.stream(**ASK)
        stream = manager.__enter__()
        next(iter(stream))
        del stream, manager

    with al.record(tmp_path / "t.zst", seed=1):
        ask()
        gc.collect()
        assert drain_finalisers()
    (call,) = al.read(tmp_path / "t.zst").llm_calls()
    assert call.error_type == StreamClosedError.__qualname__


def test_under_a_cache_a_hit_replays_the_stored_message_as_a_stream(tmp_path: Path) -> None:
    provider = FakeProvider()
    with ModelCache(tmp_path / "c.sqlite") as cache:
        client = adapter.wrap(anthropic_client(provider), cache=cache)
        first, again = _events(client), _events(client)
        assert cache.stats()["hits"] == 1
    assert provider.count == 1
    assert again[1:] == first[1:]  # same text, same final message
    assert again[0][0] == "message_start" and again[0][-1] == "message_stop"


def test_async_messages_stream_is_recorded(tmp_path: Path) -> None:
    client = adapter.wrap(anthropic_client(FakeProvider(), is_async=True))

    async def main() -> str:
        with al.record(tmp_path / "t.zst", seed=1):
            @al.window("ask", entry=lambda *a, **k: 0)
            async def ask() -> str:
                async with client.messages.stream(**ASK) as stream:
                    text = "".join([t async for t in stream.text_stream])
                    await stream.get_final_message()
                return text
            return await ask()

    assert asyncio.run(main()) == "B"
    (call,) = al.read(tmp_path / "t.zst").llm_calls()
    assert call.status == 0 and decode(call.response) == message_body()


def test_wrapping_twice_records_a_stream_once(tmp_path: Path) -> None:
    client = adapter.wrap(adapter.wrap(anthropic_client(FakeProvider())))
    with al.record(tmp_path / "t.zst", seed=1):
        _window(lambda: _events(client))()
    assert len(list(al.read(tmp_path / "t.zst").llm_calls())) == 1
