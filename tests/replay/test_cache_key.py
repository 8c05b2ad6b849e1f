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
    ("anthropic.messages", 1): "2f734a48238a8517191abaf1060a288c1495da048a6f8850bc1edd599f687121",
    ("openai.chat", 1): "0a549f866d24151cb52185a1ef4d4d494a6f2569b98b193faad09ffa70e4a385",
    ("openai.completions", 1):
        "bb6820d7de2060c8a9fc5e1c1a2708ab6193685286c9399de66026e3d3b54e67",
    ("openai.embeddings", 1):
        "b66ade17895d03e38ba837c5f4dbc93a397daae860c77f208b02da3f7dada74e",
    ("openai.responses", 1): "cccf1df6cc0101e2d7731db9cfcfad6247a59dc4a21901a61682dd3067017a6e",
    ("vllm.chat", 1): "c0082036ec90806f87c220e2518c02f265f2cdb59dee0347193ee6edfca8b353",
    ("vllm.generate", 1): "d24c5c102558f42b323a36a49c774ab6d0e0c2d17a96a5ac57535154370fc446",
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
             if r.provider.split(".")[0] in ("openai", "anthropic", "vllm")}
    assert found == PINNED  # a new built-in list is pinned here too


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
                                         r"openai.chat, openai.completions"):
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
    assert raw == key.encoded
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


def test_a_key_is_immutable_and_equal_keys_compare_equal() -> None:
    a, b = request_key("openai.chat", BASE_CHAT), request_key("openai.chat", dict(BASE_CHAT))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    with pytest.raises(AttributeError, match=r"CacheKey is immutable; cannot set 'hex'"):
        a.hex = "0"  # type: ignore[misc]


def test_a_message_value_without_json_form_names_its_field() -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "user", "content": object()}]
    with pytest.raises(ValueError, match=r"request field `messages\[1\].content` has a value "
                                         r"of type object"):
        request_key("openai.chat", {**BASE_CHAT, "messages": messages})


def test_pydantic_message_parts_are_keyed_by_their_json() -> None:
    import pydantic

    class Part(pydantic.BaseModel):
        type: str = "text"
        text: str

    as_model = [{"role": "user", "content": [Part(text="hi")]}]
    as_dict = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert chat_key(messages=as_model) == chat_key(messages=as_dict)


def test_a_request_nested_too_deep_or_holding_itself_has_no_key_and_says_so() -> None:
    """Before: the RecursionError of the encoder (or of the field walk) escaped, and a
    wrapped client raised it into the agent's call instead of recording it without a key."""
    loop: dict[str, Any] = {"type": "text"}
    loop["self"] = loop
    deep: Any = "x"
    for _ in range(50_000):
        deep = [deep]
    for request in ({"model": "m", "messages": [{"role": "user", "content": [loop]}]},
                    {"model": "m", "messages": [], "extra_body": loop},
                    {"model": "m", "messages": [{"role": "user", "content": deep}]}):
        with pytest.raises(ValueError, match=r"openai.chat request: a field is nested too "
                           r"deep or holds itself"):
            request_key("openai.chat", request)
