"""A credential anywhere in a model request never reaches the cache key or the SQLite store."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import msgspec
import pytest

from agentlog.replay import ModelCache, request_key

CANARY = "sk-canary-0d5f3c9e1b7a4e2f"
PLAIN_CANARY = "hunter2-canary-7f1c"  # no key format: only its field name gives it away

BASE: dict[str, Any] = {
    "base_url": "https://api.openai.com/v1",
    "model": "gpt-4o-mini",
    "messages": [{"role": "user", "content": "Which option? A or B."}],
    "max_tokens": 4,
}


def key(**changes: Any) -> Any:
    return request_key("openai.chat", {**BASE, **changes})


def assert_clean(k: Any) -> None:
    for canary in (CANARY, PLAIN_CANARY):
        assert canary.encode() not in k.encoded
        assert canary not in repr(k.canonical)


@pytest.mark.parametrize("field, value", [
    ("extra_body", {"api_key": PLAIN_CANARY}),
    ("extra_body", {"Authorization": f"Bearer {PLAIN_CANARY}"}),
    ("extra_query", {"api-key": PLAIN_CANARY}),
    ("extra_headers", {"x-api-key": PLAIN_CANARY}),
    ("extra_body", {"routing": {"upstream": {"client_secret": PLAIN_CANARY}}}),
    ("extra_body", {"upstream": [{"password": PLAIN_CANARY}]}),
    ("auth_token", PLAIN_CANARY),
    ("my_service_api_key", PLAIN_CANARY),
])
def test_a_credential_named_field_is_excluded_from_the_key(field: str, value: Any) -> None:
    with_secret = key(**{field: value})
    assert_clean(with_secret)
    # Excluded, not merely masked: another credential value gives the same key, and the
    # field itself is gone (nothing but the empty containers that held it is left).
    other = key(**{field: msgspec.json.decode(
        msgspec.json.encode(value).replace(PLAIN_CANARY.encode(), b"another-secret-9"))})
    assert other.hex == with_secret.hex
    assert "<redacted>" not in with_secret.encoded.decode()


def test_a_key_shaped_value_in_an_ordinary_field_is_redacted() -> None:
    k = key(extra_body={"note": f"use {CANARY} for the proxy"},
            messages=[{"role": "user", "content": f"my key is {CANARY}"}])
    assert_clean(k)
    assert k.canonical["request"]["extra_body"] == {"note": "use <redacted> for the proxy"}
    assert k.canonical["request"]["messages"][0]["content"] == "my key is <redacted>"


def test_url_userinfo_in_base_url_is_redacted_and_does_not_split_the_key() -> None:
    a = key(base_url=f"https://bob:{PLAIN_CANARY}@proxy.example/v1")
    b = key(base_url="https://bob:another-password@proxy.example/v1")
    assert_clean(a)
    assert a.canonical["request"]["base_url"] == "https://<redacted>@proxy.example/v1"
    assert a.hex == b.hex
    assert a.hex != key(base_url="https://proxy.example/v1").hex  # the host still counts


def test_the_content_fields_around_a_credential_stay_in_the_key() -> None:
    k = key(extra_body={"api_key": PLAIN_CANARY, "top_k": 5, "logprob_token_ids": [1, 2]})
    assert k.canonical["request"]["extra_body"] == {"top_k": 5, "logprob_token_ids": [1, 2]}
    assert k.canonical["request"]["max_tokens"] == 4
    assert k.hex != key(extra_body={"api_key": PLAIN_CANARY, "top_k": 6,
                                    "logprob_token_ids": [1, 2]}).hex


def test_a_tool_parameter_named_like_a_credential_keeps_its_schema() -> None:
    def tool(kind: str) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {"name": "login", "parameters": {
            "type": "object", "properties": {"password": {"type": kind}}}}}]

    k = key(tools=tool("string"))
    schema = k.canonical["request"]["tools"][0]["function"]["parameters"]
    assert schema["properties"] == {"password": {"type": "string"}}
    assert k.hex != key(tools=tool("integer")).hex


def test_a_schema_definition_named_like_a_credential_keeps_its_schema() -> None:
    def fmt(kind: str) -> dict[str, Any]:
        return {"type": "json_schema", "json_schema": {"name": "login", "schema": {
            "$defs": {"Credentials": {"type": "object",
                                      "properties": {"token": {"type": kind}}}},
            "properties": {"auth": {"$ref": "#/$defs/Credentials"}}}}}

    k = key(response_format=fmt("string"))
    schema = k.canonical["request"]["response_format"]["json_schema"]["schema"]
    assert schema["$defs"]["Credentials"]["properties"] == {"token": {"type": "string"}}
    assert schema["properties"] == {"auth": {"$ref": "#/$defs/Credentials"}}
    assert k.hex != key(response_format=fmt("integer")).hex


def test_a_request_without_credentials_keeps_its_exact_encoding() -> None:
    # Keys stored before credentials were scrubbed must still serve: a clean request is
    # hashed exactly as the canonical sorted-key JSON of its kept fields.
    canonical = {"provider": "openai.chat", "version": 1, "draw": 0, "channel": None,
                 "request": {**BASE, "temperature": 0.5}}
    k = key(temperature=0.5, timeout=30)
    expected = msgspec.json.Encoder(order="sorted").encode(canonical)
    assert k.encoded == expected
    assert k.hex == hashlib.sha256(expected).hexdigest()


def _file_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(path.parent.glob(path.name + "*")))


def test_the_sqlite_file_holds_no_canary(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite3"
    keys = [
        key(extra_body={"api_key": PLAIN_CANARY, "x": {"token": PLAIN_CANARY}}),
        key(extra_headers={"Authorization": f"Bearer {CANARY}"}),
        key(base_url=f"https://u:{PLAIN_CANARY}@proxy.example/v1"),
        key(messages=[{"role": "user", "content": f"key {CANARY}"}]),
    ]
    with ModelCache(path) as cache:
        for k in keys:
            assert cache.call(k, lambda: {"id": "r", "choices": []}).status == "miss"
        assert cache.call(keys[0], lambda: {"id": "other"}).status == "hit"
    data = _file_bytes(path)
    assert b"proxy.example" in data  # the store was written and read back
    assert CANARY.encode() not in data and PLAIN_CANARY.encode() not in data


def test_the_packages_scrub_with_the_core_scrubber_itself() -> None:
    # agentlog.scrubbing is a public face, not a second scrubber: one set of rules.
    from agentlog import _scrub, scrubbing

    assert scrubbing.__all__ == sorted(scrubbing.__all__)
    for name in scrubbing.__all__:
        assert getattr(scrubbing, name) is getattr(_scrub, name), name


def test_clean_says_whether_the_scrubber_had_anything_to_remove() -> None:
    """``CacheKey.clean`` lets a recorder store the canonical request without scrubbing it
    again: True only when every value passed the scrubber's prefilter unchanged."""
    assert key().clean
    assert key(temperature=0.5, tools=[{"type": "function", "function": {"name": "f"}}]).clean
    # A key-shaped value, a credential-named field anywhere, a URL with userinfo, a schema
    # property named like a credential (kept in the key, redacted by the core scrubber):
    assert not key(messages=[{"role": "user", "content": f"my key is {CANARY}"}]).clean
    assert not key(extra_body={"routing": {"client_secret": PLAIN_CANARY}}).clean
    assert not key(base_url="https://user:pw@proxy.example/v1").clean
    assert not key(tools=[{"type": "function", "function": {"name": "login", "parameters": {
        "type": "object", "properties": {"password": {"type": "string"}}}}}]).clean
    # The channel is part of the key as given; one that looks like a credential is not clean.
    assert request_key("openai.chat", BASE, channel="direct").clean
    assert not request_key("openai.chat", BASE, channel=f"ch-{CANARY}").clean


def test_a_clean_key_is_what_the_core_scrubber_leaves_unchanged() -> None:
    """The property ``clean`` promises, on requests that exercise every branch above."""
    from agentlog.scrubbing import scrub_value

    for k in (key(), key(temperature=0.25, n=2, stop=["\n"], seed=7),
              key(messages=[{"role": "user", "content": "the token budget is 5; key = pitch"}])):
        assert k.clean
        assert scrub_value(k.canonical) == k.canonical
