"""``dump_body``: an SDK response's JSON body, as pydantic's model_dump gives it."""

from __future__ import annotations

from typing import Any

import pytest

from agentlog.adapters import _recording
from tests.adapters._providers import FakeProvider, anthropic_client, chat_body, openai_client

ASK = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "A or B?"}],
       "logprobs": True, "top_logprobs": 5}


def test_the_sdks_responses_are_read_as_model_dump_reads_them_and_a_mapping_as_a_dict(
) -> None:
    provider = FakeProvider()
    chat = openai_client(provider).chat.completions.create(**ASK)
    responses = openai_client(provider).responses.create(model="gpt-4.1-mini", input="hi")
    message = anthropic_client(provider).messages.create(
        model="claude-opus-4-7", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    for obj in (chat, responses, message):
        assert _recording.dump_body(obj) == obj.model_dump(mode="json", exclude_unset=True)
    assert "_request_id" not in _recording.dump_body(chat)  # in __dict__, not a field
    body = chat_body()
    assert _recording.dump_body(body) == body and type(_recording.dump_body(body)) is dict


def _deep_client(depth: int) -> Any:
    import httpx2
    import openai

    nested: Any = "leaf"
    for _ in range(depth):
        nested = [nested]
    body = {**chat_body(), "nested_extra": nested}
    transport = httpx2.MockTransport(lambda request: httpx2.Response(200, json=body))
    return openai.OpenAI(api_key="sk-x", max_retries=0,
                         http_client=httpx2.Client(transport=transport))


@pytest.mark.parametrize("cached", [False, True])
def test_a_response_pydantic_cannot_dump_still_returns_and_is_recorded_without_body(
        tmp_path: Any, cached: bool) -> None:
    """Before: model_dump's "Maximum serialization depth exceeded" raised into the call,
    after the SDK had returned the response."""
    import agentlog as al
    from agentlog.adapters import openai as adapter
    from agentlog.replay import ModelCache

    with ModelCache(path=tmp_path / "c.sqlite") as cache:
        client = adapter.wrap(_deep_client(300), cache=cache if cached else None)
        with al.record(tmp_path / "t.zst", seed=1), pytest.warns(
                al.InstrumentationWarning, match="could not be read for the record"):
            reply = client.chat.completions.create(**ASK)
        assert reply.choices[0].message.content == chat_body()["choices"][0]["message"]["content"]
        if cached:
            # One upstream call, nothing stored: the next identical call goes upstream again.
            assert cache.stats()["upstream_calls"] == 1 and cache.stats()["hits"] == 0
    (call,) = al.read(tmp_path / "t.zst").llm_calls()
    assert call.status == 0 and call.model == "gpt-4o-mini"
