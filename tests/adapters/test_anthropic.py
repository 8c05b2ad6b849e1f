"""The anthropic adapter over the real anthropic client and ``httpx2.MockTransport``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")

import agentlog as al  # noqa: E402
from agentlog._encoding import decode  # noqa: E402
from agentlog._spans import tracer as _otel  # noqa: E402
from agentlog.adapters import NoLogprobsError, choice_probs  # noqa: E402
from agentlog.adapters import anthropic as adapter  # noqa: E402
from agentlog.replay import ModelCache  # noqa: E402

from ._providers import CANARY, FakeProvider, anthropic_client, message_body  # noqa: E402
from ._trace_text import trace_plaintext  # noqa: E402

ASK: dict[str, Any] = {"model": "claude-opus-4-7", "max_tokens": 16,
                       "system": "Answer with one letter.",
                       "messages": [{"role": "user", "content": "A, B, C or D?"}]}


def _window(fn: Any) -> Any:
    return al.window("ask", entry=lambda *a, **k: 0)(fn)


class _Spans:
    """One SDK TracerProvider shared by agentlog and the anthropic client under test."""

    def __init__(self) -> None:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def __enter__(self) -> _Spans:
        self._previous = _otel.set_provider_override(self.provider)
        return self

    def __exit__(self, *exc: object) -> None:
        _otel.set_provider_override(self._previous)
        self.provider.shutdown()

    def names(self) -> list[str]:
        return [s.name for s in self.exporter.get_finished_spans()]


def test_a_messages_call_is_recorded_with_usage_and_one_span(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with _Spans() as spans:
        client = adapter.wrap(anthropic_client(
            FakeProvider(), open_telemetry={"tracer_provider": spans.provider}),
            prices={"claude-opus-4-7": (3.0, 15.0)})

        @_window
        def ask() -> str:
            return str(client.messages.create(**ASK).content[0].text)

        with al.record(path, seed=1):
            assert ask() == "B"
        assert spans.names() == ["chat claude-opus-4-7", "agentlog.window.ask",
                                 "invoke_agent agent"]
        (span,) = [s for s in spans.exporter.get_finished_spans() if s.name.startswith("chat")]
        assert span.attributes["gen_ai.provider.name"] == "anthropic"
        assert span.attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
        assert span.attributes["gen_ai.request.max_tokens"] == 16
    (call,) = al.read(path).llm_calls()
    assert (call.provider, call.input_tokens, call.output_tokens) == (
        "anthropic.messages", 25, 1)
    assert call.cost == pytest.approx((25 * 3.0 + 15.0) / 1e6)
    assert decode(call.response) == message_body()
    assert decode(call.request)["request"]["system"] == "Answer with one letter."


def test_the_sdk_span_is_kept_only_when_asked(tmp_path: Path) -> None:
    with _Spans() as spans:
        client = adapter.wrap(anthropic_client(
            FakeProvider(), open_telemetry={"tracer_provider": spans.provider}),
            sdk_spans=True)
        with al.record(tmp_path / "t.zst", seed=1):
            client.messages.create(**ASK)
        assert sorted(spans.names()) == ["anthropic.messages.create", "chat claude-opus-4-7",
                                         "invoke_agent agent"]


def test_a_stream_is_passed_through_and_recorded_as_the_message(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    plain = [e.type for e in anthropic_client(FakeProvider()).messages.create(
        **ASK, stream=True)]
    client = adapter.wrap(anthropic_client(FakeProvider()))
    with al.record(path, seed=1):
        stream = client.messages.create(**ASK, stream=True)
        assert type(stream) is anthropic.Stream
        assert [e.type for e in stream] == plain
    (call,) = al.read(path).llm_calls()
    body = decode(call.response)
    assert body["content"] == [{"type": "text", "text": "B"}]
    assert (body["stop_reason"], call.input_tokens, call.output_tokens) == ("end_turn", 25, 1)


def test_a_cached_message_replays_as_a_stream_of_the_sdk_type(tmp_path: Path) -> None:
    provider = FakeProvider()
    with ModelCache(path=tmp_path / "c.sqlite") as cache:
        client = adapter.wrap(anthropic_client(provider), cache=cache)
        whole = client.messages.create(**ASK)
        again = client.messages.create(**ASK)
        stream = client.messages.create(**ASK, stream=True)
        assert type(stream) is anthropic.Stream
        text = "".join(e.delta.text for e in stream if e.type == "content_block_delta")
    assert provider.count == 1
    assert again.model_dump() == whole.model_dump() and text == "B"


def test_a_401_that_echoes_the_key_leaves_no_trace_of_it(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with _Spans() as spans:
        client = adapter.wrap(anthropic_client(FakeProvider(fail={1: 401})))

        @_window
        def ask() -> None:
            client.messages.create(**ASK)

        with al.record(path, seed=1), pytest.raises(anthropic.AuthenticationError):
            ask()
        text = repr([(dict(s.attributes or {}), s.status.description,
                      [dict(e.attributes or {}) for e in s.events])
                     for s in spans.exporter.get_finished_spans()])
    assert CANARY not in text
    assert CANARY.encode() not in trace_plaintext(path)
    (call,) = al.read(path).llm_calls()
    assert (call.status, call.error_type) == (1, "ModelHTTPError")


def test_async_messages_are_recorded(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"

    async def main() -> list[str]:
        client = adapter.wrap(anthropic_client(FakeProvider(), is_async=True))
        async with al.record(path, seed=1):
            whole = await client.messages.create(**ASK)
            stream = await client.messages.create(**ASK, stream=True)
            types = [e.type async for e in stream]
        return [whole.content[0].text, types[-1]]

    assert asyncio.run(main()) == ["B", "message_stop"]
    assert [c.output_tokens for c in al.read(path).llm_calls()] == [1, 1]


def test_choice_probs_refuses_to_invent_a_vector_for_a_message() -> None:
    message = anthropic_client(FakeProvider()).messages.create(**ASK)
    with pytest.raises(NoLogprobsError, match="anthropic Messages responses carry no logprobs"):
        choice_probs(message, ["A", "B", "C", "D"])


def test_a_client_that_is_not_anthropic_is_refused() -> None:
    with pytest.raises(TypeError, match=r"must be an anthropic.Anthropic"):
        adapter.wrap(object())


def test_copies_made_with_with_options_are_recorded_too(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    client = adapter.wrap(anthropic_client(FakeProvider()))
    with al.record(path, seed=1):
        client.with_options(timeout=5).messages.create(**ASK)
    assert [c.provider for c in al.read(path).llm_calls()] == ["anthropic.messages"]


def test_the_module_example_runs() -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module("agentlog.adapters.anthropic"))
    assert result.attempted > 0 and result.failed == 0
