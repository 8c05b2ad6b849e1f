"""One scrubber for model calls: credential names go at any depth, model content stays."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import agentlog as al
from agentlog._encoding import decode
from agentlog._scrub import REDACTED, scrub_value
from agentlog.testing import capture_spans
from tests.adapters._trace_text import trace_plaintext

CANARY = "Zq7-model-content-canary-5521"

# An OpenAI Chat response with logprobs: every ``token`` here is a token's text.
RESPONSE: dict[str, Any] = {
    "id": "c-1", "model": "gpt-x",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "B"},
                 "logprobs": {"content": [{"token": "B", "logprob": -0.1, "bytes": [66],
                                           "top_logprobs": [
                                               {"token": "A", "logprob": -2.0, "bytes": [65]},
                                               {"token": "B", "logprob": -0.1, "bytes": [66]}]}]}}],
    "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10,
              "completion_tokens_details": {"reasoning_tokens": 0}},
}


def test_logprob_entries_keep_their_token_text_and_nothing_else_changes() -> None:
    assert scrub_value(RESPONSE) is RESPONSE  # unchanged: the very same object back


def test_token_outside_a_logprob_entry_is_a_credential_at_any_depth() -> None:
    nested = {"debug": [{"auth": {"token": CANARY}}], "token": CANARY,
              "logprobs": {"content": [{"token": "B", "logprob": -0.1}]}}
    assert scrub_value(nested) == {
        "debug": [{"auth": REDACTED}], "token": REDACTED,
        "logprobs": {"content": [{"token": "B", "logprob": -0.1}]},
    }
    known: set[str] = set()
    assert scrub_value({"x": [{"token": CANARY, "rank": 1}]}, known) == {
        "x": [{"token": REDACTED, "rank": 1}]}
    assert CANARY in known  # remembered: a later echo of it is removed too


def test_a_key_format_inside_a_logprob_token_is_still_redacted() -> None:
    key = "sk-" + "a1b2c3d4" * 4
    entry = {"token": f"{key}", "logprob": -0.5}
    assert scrub_value(entry) == {"token": REDACTED, "logprob": -0.5}


def test_llm_call_responses_pass_the_core_scrubber_and_keep_model_content(
        tmp_path: Path) -> None:
    """Before: a response was only searched for the client's key values, so a credential
    field the provider echoed (``x-api-key``) reached the trace."""
    path = tmp_path / "t.zst"
    request = {"model": "gpt-x", "max_tokens": 4, "top_logprobs": 2, "logprobs": True,
               "extra_body": {"logprob_token_ids": [10, 11, 12]},
               "messages": [{"role": "user", "content": "A or B?"}]}
    echoing = {**RESPONSE, "debug": {"request_headers": {"x-api-key": CANARY}}}
    with capture_spans() as spans, al.record(path, seed=1):
        al.llm_call("openai.chat", "gpt-x", request=request, response=echoing,
                    input_tokens=9, output_tokens=1, capture_content=True)
    assert CANARY.encode() not in trace_plaintext(path)
    (call,) = al.read(path).llm_calls()
    assert decode(call.request) == request
    assert decode(call.response) == {**RESPONSE,
                                     "debug": {"request_headers": {"x-api-key": REDACTED}}}
    (span,) = spans.by_name("chat gpt-x")
    assert CANARY not in repr(dict(span.attributes or {}))
    # The span's content is the GenAI message list; the logprob tokens stay in the record
    # (checked above), which is where an estimator reads them.
    assert json.loads(span.attributes["gen_ai.output.messages"]) == [
        {"role": "assistant", "finish_reason": "stop",
         "parts": [{"type": "text", "content": "B"}]}]


def test_a_window_secret_echoed_in_a_response_is_removed(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    password = "Zq-resp-password-7781"

    @al.window("ask", secret=("password",))
    def ask(password: str) -> None:
        al.llm_call("openai", "m", request={"messages": []},
                    response={"choices": [{"message": {"content": f"you said {password}"}}]})

    with al.record(path, seed=1):
        ask(password)
    assert password.encode() not in trace_plaintext(path)
    (call,) = al.read(path).llm_calls()
    assert decode(call.response) == {
        "choices": [{"message": {"content": f"you said {REDACTED}"}}]}


def test_may_change_finds_credential_names_at_any_depth_and_spares_logprob_tokens() -> None:
    from agentlog._encoding import encode
    from agentlog._scrub import may_change

    def check(obj: Any) -> bool:
        return may_change(obj, encode(obj))

    assert not check(RESPONSE)
    assert not check({"max_tokens": 5, "top_logprobs": 3, "logprob_token_ids": [1, 2]})
    assert check({"a": [{"b": {"token": "xyz12345"}}]})
    # A logprob entry spares its "token" only: another credential name in it still counts,
    # and sparing it never makes "token" safe elsewhere (asked after RESPONSE, above).
    assert check({"token": "A", "logprob": -1.0, "api_key": "xyz12345"})
    assert check({"text": "bearer abcdefgh12345678 in lower case"})
    assert check({"text": "a key sk-" + "a" * 20})
    assert check({"a": [{"b": {"X-Api-Key": "xyz12345"}}]})
    assert check({"a": {"db_password": "xyz12345"}})
    assert check({"text": "see https://u:pw@host/x"})
    assert check({"text": "Bearer abcdefgh12345678 and more"})
    assert may_change({"text": "the value Zq-known-9 is here"},
                      encode({"text": "the value Zq-known-9 is here"}), {"Zq-known-9"})


def test_may_change_false_guarantees_the_scrubber_changes_nothing() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from agentlog._encoding import encode
    from agentlog._scrub import may_change

    keys = st.sampled_from(["token", "logprob", "max_tokens", "api_key", "Authorization",
                            "x-api-key", "db_password", "content", "model", "tokens",
                            "token_ids", "bytes", "top_logprobs", "auth", "url"])
    texts = st.sampled_from(["plain", "sk-" + "a" * 20, "Bearer abcdefgh12345678",
                             "https://u:p@h/", "?api_key=zz", "a token", "key=v", "x@y",
                             "bearer abcdefgh12345678", "BEARER abcdefgh12345678",
                             "SK-" + "a" * 20, "xsk-" + "b" * 20])
    leaves = st.none() | st.integers(-5, 5) | st.floats(allow_nan=False) | texts
    values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(keys, inner, max_size=4), max_leaves=12)

    @settings(max_examples=400, deadline=None)
    @given(values)
    def prop(obj: Any) -> None:
        if not may_change(obj, encode(obj)):
            assert scrub_value(obj) is obj

    prop()
