"""The cache key changes exactly with what can change a model's answer."""

from __future__ import annotations

from typing import Any

import pytest

from agentlog.replay import (
    RequestFields,
    register_request_fields,
    registered_request_fields,
    request_fields,
    request_key,
)

# (provider, version) -> fingerprint of its field list. Editing a list without bumping its
# version fails here: entries stored under the old rules would answer a different question.
PINNED = {
    ("anthropic.messages", 1): "bd35e964d5d3d4f62cfc69e09fb9232be97e00ce6e8cd188e84c2afb50814350",
    ("openai.chat", 1): "e0787293b094d7404e19771c02162f3fd1d8d79f4b081991ee4fbdd44d8f2ff2",
    ("openai.responses", 1): "609d8130539d87163744595f6659b6aa41d008396a92239f18c8af9e74d9a7d9",
    ("vllm.chat", 1): "4bfb84651649a6fdb144a5b02669bd01496f9b5c8feecf55a0e0abdf6259e061",
    ("vllm.generate", 1): "b5491ebaa1da1543af1ca2ede76e5c07b2dc16403628b26d504cfbb865bc6dc4",
}

BASE_CHAT: dict[str, Any] = {
    "base_url": "https://api.openai.com/v1/",
    "model": "gpt-4o-mini",
    "messages": [{"role": "system", "content": "Answer A-D."},
                 {"role": "user", "content": "Which? A) x B) y"}],
}


def chat_key(**changes: Any) -> str:
    return request_key("openai.chat", {**BASE_CHAT, **changes}).hex


def test_every_registered_field_list_matches_its_pinned_fingerprint() -> None:
    found = {(r.provider, r.version): r.fingerprint for r in registered_request_fields()
             if (r.provider, r.version) in PINNED}
    assert found == PINNED


def test_changing_a_field_list_changes_its_fingerprint() -> None:
    rules = request_fields("openai.chat")
    edited = RequestFields(provider=rules.provider, version=rules.version,
                           include=rules.include, exclude=(*rules.exclude[:-1],),
                           reasons=rules.reasons)
    assert edited.fingerprint != rules.fingerprint


def test_registering_changed_rules_under_an_existing_version_is_refused() -> None:
    rules = request_fields("openai.chat")
    edited = RequestFields(provider=rules.provider, version=rules.version,
                           include=(*rules.include, "new_param"), exclude=rules.exclude,
                           reasons=rules.reasons)
    with pytest.raises(ValueError, match=r"openai.chat v1 are already registered .* "
                                         r"register them as version 2"):
        register_request_fields(edited)
    assert register_request_fields(rules) is rules  # the same rules again: a no-op


def test_a_newer_version_becomes_the_default_and_changes_the_key() -> None:
    base = RequestFields(provider="test.provider", version=1, include=("model",), exclude=())
    register_request_fields(base)
    before = request_key("test.provider", {"model": "m"})
    register_request_fields(RequestFields(provider="test.provider", version=2,
                                          include=("model", "prompt"), exclude=()))
    after = request_key("test.provider", {"model": "m"})
    assert (before.version, after.version) == (1, 2)
    assert before.hex != after.hex
    assert request_fields("test.provider", 1) is base


def test_an_excluded_field_needs_a_reason() -> None:
    with pytest.raises(ValueError, match=r"excluded fields \['timeout'\] have no reason"):
        RequestFields(provider="p", version=1, include=(), exclude=("timeout",))


def test_a_field_cannot_be_both_included_and_excluded() -> None:
    with pytest.raises(ValueError, match=r"fields \['seed'\] are both included and excluded"):
        RequestFields(provider="p", version=1, include=("seed",), exclude=("seed",),
                      reasons={"seed": "x"})


def test_an_unknown_provider_names_the_registered_ones() -> None:
    with pytest.raises(ValueError, match=r"no request fields registered for 'openai.chats'.*"
                                         r"openai.chat, openai.responses"):
        request_key("openai.chats", {})


@pytest.mark.parametrize("draw", [-1, 1.0, True, "0"])
def test_a_draw_must_be_a_non_negative_int(draw: Any) -> None:
    with pytest.raises(ValueError, match=r"`draw` must be a non-negative int"):
        request_key("openai.chat", BASE_CHAT, draw=draw)


def test_a_value_without_json_form_names_its_field() -> None:
    with pytest.raises(ValueError, match=r"request field `tools\[0\]` has a value of type "
                                         r"object"):
        request_key("openai.chat", {**BASE_CHAT, "tools": [object()]})


def test_a_nan_sampling_parameter_is_refused() -> None:
    with pytest.raises(ValueError, match=r"`temperature` is nan; a cache key needs finite"):
        request_key("openai.chat", {**BASE_CHAT, "temperature": float("nan")})


def test_the_key_is_a_sha256_of_the_canonical_request() -> None:
    import hashlib

    import msgspec

    key = request_key("openai.chat", BASE_CHAT, draw=2, channel="quote")
    raw = msgspec.json.Encoder(order="sorted").encode(key.canonical)
    assert key.digest == hashlib.sha256(raw).digest() and key.hex == key.digest.hex()
    assert key.canonical["draw"] == 2 and key.canonical["channel"] == "quote"
    assert key.canonical["request"]["base_url"] == "https://api.openai.com/v1"
    assert (key.provider, key.version, key.model) == ("openai.chat", 1, "gpt-4o-mini")


def test_dict_order_tuples_and_integral_floats_do_not_change_the_key() -> None:
    reordered = dict(reversed(list(BASE_CHAT.items())))
    assert request_key("openai.chat", reordered).hex == chat_key()
    assert chat_key(messages=tuple(BASE_CHAT["messages"])) == chat_key()
    assert chat_key(temperature=1) == chat_key(temperature=1.0)


def test_none_and_not_given_count_as_absent_at_the_top_level() -> None:
    class NotGiven:  # the openai and anthropic SDKs' sentinel class name
        pass

    assert chat_key(temperature=None) == chat_key() == chat_key(temperature=NotGiven())


def test_a_nested_none_is_content() -> None:
    with_none = [{"role": "assistant", "content": None, "tool_calls": []}]
    assert chat_key(messages=with_none) != chat_key(messages=[{"role": "assistant",
                                                               "tool_calls": []}])


# ----------------------------------------------------------------- exclusions, one each

@pytest.mark.parametrize(("field", "a", "b"), [
    ("timeout", 5.0, 600),
    ("max_retries", 0, 5),
    ("api_key", "sk-canary-1", "sk-canary-2"),
    ("extra_headers", {"Authorization": "Bearer a"}, {"X-Trace": "b"}),
    ("headers", {"x-api-key": "a"}, {"x-api-key": "b"}),
    ("organization", "org-1", "org-2"),
    ("user", "alice", "bob"),
    ("metadata", {"run": "1"}, {"run": "2"}),
    ("safety_identifier", "u1", "u2"),
    ("prompt_cache_key", "a", "b"),
    ("store", True, False),
    ("stream", True, False),
    ("stream_options", {"include_usage": True}, {"include_usage": False}),
    ("idempotency_key", "k1", "k2"),
])
def test_an_excluded_field_does_not_change_the_key(field: str, a: Any, b: Any) -> None:
    assert chat_key(**{field: a}) == chat_key(**{field: b}) == chat_key()


def test_message_ids_do_not_change_the_key() -> None:
    items = [{"type": "message", "role": "user", "content": "hi", "id": "msg_1"}]
    other = [{"type": "message", "role": "user", "content": "hi", "id": "msg_2"}]
    key = request_key("openai.responses", {"model": "m", "input": items})
    assert key.hex == request_key("openai.responses", {"model": "m", "input": other}).hex
    assert "id" not in key.canonical["request"]["input"][0]
    with_id = [{**BASE_CHAT["messages"][0], "id": "m-7"}, BASE_CHAT["messages"][1]]
    assert chat_key(messages=with_id) == chat_key()


@pytest.mark.parametrize("provider", ["anthropic.messages", "openai.responses"])
@pytest.mark.parametrize(("field", "a", "b"), [
    ("timeout", 5.0, 600), ("max_retries", 0, 5), ("api_key", "a", "b"),
    ("extra_headers", {"anthropic-version": "x"}, {}), ("metadata", {"user_id": "u1"}, {}),
    ("stream", True, False),
])
def test_other_providers_exclude_the_same_transport_auth_and_tag_fields(
        provider: str, field: str, a: Any, b: Any) -> None:
    base = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
    assert (request_key(provider, {**base, field: a}).hex
            == request_key(provider, {**base, field: b}).hex
            == request_key(provider, base).hex)


@pytest.mark.parametrize("provider", ["vllm.generate", "vllm.chat"])
def test_vllm_progress_display_and_priority_do_not_change_the_key(provider: str) -> None:
    base = {"model": "tiny", "prompts": ["hi"], "sampling_params": {"temperature": 0.0}}
    assert (request_key(provider, {**base, "use_tqdm": True, "priority": 3}).hex
            == request_key(provider, base).hex)


# ----------------------------------------------------------------- inclusions, one each

@pytest.mark.parametrize(("field", "a", "b"), [
    ("model", "gpt-4o-mini", "gpt-4o"),
    ("base_url", "https://api.openai.com/v1", "http://127.0.0.1:8000/v1"),
    ("messages", [{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]),
    ("temperature", 0.0, 0.7),
    ("top_p", 1.0, 0.9),
    ("n", 1, 2),
    ("max_tokens", 16, 32),
    ("max_completion_tokens", 16, 32),
    ("seed", 1, 2),
    ("stop", ["\n"], ["."]),
    ("presence_penalty", 0.0, 0.5),
    ("frequency_penalty", 0.0, 0.5),
    ("logit_bias", {"32": 1}, {"32": 2}),
    ("logprobs", True, False),
    ("top_logprobs", 5, 20),
    ("tools", [{"type": "function", "function": {"name": "f"}}],
     [{"type": "function", "function": {"name": "g"}}]),
    ("tool_choice", "auto", "none"),
    ("parallel_tool_calls", True, False),
    ("response_format", {"type": "json_object"}, {"type": "text"}),
    ("reasoning_effort", "low", "high"),
    ("service_tier", "default", "flex"),
    ("extra_body", {"logprob_token_ids": [32, 33]}, {"logprob_token_ids": [34]}),
    ("some_future_parameter", 1, 2),  # unknown fields are kept: fail-safe
])
def test_an_included_field_changes_the_key(field: str, a: Any, b: Any) -> None:
    assert len({chat_key(**{field: a}), chat_key(**{field: b})}) == 2


def test_the_channel_and_the_draw_index_change_the_key() -> None:
    keys = {request_key("openai.chat", BASE_CHAT).hex,
            request_key("openai.chat", BASE_CHAT, draw=1).hex,
            request_key("openai.chat", BASE_CHAT, channel="quote").hex,
            request_key("openai.chat", BASE_CHAT, channel="generated").hex}
    assert len(keys) == 4


def test_the_same_request_to_two_providers_has_two_keys() -> None:
    base = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert request_key("openai.chat", base).hex != request_key("anthropic.messages", base).hex


@pytest.mark.parametrize(("field", "a", "b"), [
    ("system", "be brief", "be long"), ("top_k", 1, 5), ("stop_sequences", ["x"], ["y"]),
    ("thinking", {"type": "enabled", "budget_tokens": 1024}, {"type": "disabled"}),
])
def test_anthropic_system_prompt_and_sampling_parameters_change_the_key(
        field: str, a: Any, b: Any) -> None:
    base = {"model": "claude", "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 8}
    assert (request_key("anthropic.messages", {**base, field: a}).hex
            != request_key("anthropic.messages", {**base, field: b}).hex)


@pytest.mark.parametrize(("field", "a", "b"), [
    ("instructions", "x", "y"), ("include", ["message.output_text.logprobs"], []),
    ("top_logprobs", 0, 5), ("text", {"format": {"type": "text"}}, None),
    ("previous_response_id", "resp_1", "resp_2"),
])
def test_responses_api_fields_change_the_key(field: str, a: Any, b: Any) -> None:
    base = {"model": "m", "input": "hi"}
    assert (request_key("openai.responses", {**base, field: a}).hex
            != request_key("openai.responses", {**base, field: b}).hex)


@pytest.mark.parametrize(("field", "a", "b"), [
    ("revision", "abc", "def"),
    ("sampling_params", {"temperature": 0.0, "logprobs": 5},
     {"temperature": 0.0, "logprobs": 20}),
    ("sampling_params", {"seed": 1}, {"seed": 2}),
])
def test_vllm_revision_and_sampling_params_change_the_key(field: str, a: Any, b: Any) -> None:
    base = {"model": "tiny", "prompts": ["hi"]}
    assert (request_key("vllm.generate", {**base, field: a}).hex
            != request_key("vllm.generate", {**base, field: b}).hex)


def test_a_pydantic_response_format_class_is_keyed_by_its_schema() -> None:
    import pydantic

    class Answer(pydantic.BaseModel):
        option: str

    class Other(pydantic.BaseModel):
        choice: int

    key = request_key("openai.chat", {**BASE_CHAT, "response_format": Answer})
    assert "pydantic_schema" in key.canonical["request"]["response_format"]
    assert key.hex != chat_key(response_format=Other)
