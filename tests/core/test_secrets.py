"""Secrets never reach a trace file or a span."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import agentlog as al
from agentlog._recorder import log_llm_call
from agentlog.testing import capture_spans

CANARY = "sk-CANARY-7f3a9c1e5b"


def _span_text(spans: Any) -> str:
    parts = []
    for s in spans.spans:
        parts.append(repr(dict(s.attributes or {})))
        parts.extend(repr(dict(e.attributes or {})) for e in s.events)
    return "\n".join(parts)


def test_a_parameter_declared_secret_is_never_written(trace_path: Path) -> None:
    @al.window("call", secret=("api_key",))
    def call(prompt: str, api_key: str) -> str:
        return prompt.upper()

    @al.window("call2")
    def call2(prompt: str, api_key: Annotated[str, al.Secret]) -> str:
        return prompt

    @al.tool("fetch", secret=("token",))
    def fetch(url: str, token: str) -> str:
        return url

    with capture_spans() as spans, al.record(trace_path, seed=1):
        assert call("hi", CANARY) == "HI"
        assert call2("hi", api_key=CANARY) == "hi"
        assert call2("hi", CANARY) == "hi"
        fetch("u", CANARY)
    assert CANARY.encode() not in trace_path.read_bytes()
    assert CANARY not in _span_text(spans)
    assert al.verify(trace_path).ok


def test_auth_headers_and_key_fields_of_model_calls_are_dropped(trace_path: Path) -> None:
    @al.window("ask")
    def ask() -> None:
        log_llm_call(
            provider="openai",
            model="m",
            request={"messages": [{"role": "user", "content": "hi"}], "api_key": CANARY},
            headers={"Authorization": f"Bearer {CANARY}", "X-Api-Key": CANARY,
                     "User-Agent": "x"},
            response={"choices": [], "echo_authorization": CANARY},
        )

    with capture_spans() as spans, al.record(trace_path, seed=1):
        ask()
    data = trace_path.read_bytes()
    assert CANARY.encode() not in data
    assert CANARY not in _span_text(spans)
    call = al.read(trace_path).llm_calls()[0]
    assert al._encoding.decode(call.request)["headers"]["User-Agent"] == "x"


def test_the_redact_hook_runs_before_encoding(trace_path: Path) -> None:
    seen: list[Any] = []

    def redact(payload: Any) -> Any:
        seen.append(payload)
        if isinstance(payload, dict):
            return {k: ("<email>" if isinstance(v, str) and "@" in v else v)
                    for k, v in payload.items()}
        return "<email>" if isinstance(payload, str) and "@" in payload else payload

    @al.window("lookup")
    def lookup(email: str) -> str:
        return email

    with al.record(trace_path, seed=1, redact=redact, meta={"owner": "a@b.org"}):
        assert lookup("jane@example.org") == "jane@example.org"
    data = trace_path.read_bytes()
    assert b"jane@example.org" not in data and b"a@b.org" not in data
    assert seen  # the hook saw the payloads
    assert al.verify(trace_path).ok


def test_a_failing_redact_hook_writes_a_marker_not_the_payload(trace_path: Path) -> None:
    import pytest

    def redact(payload: Any) -> Any:
        raise RuntimeError("hook bug")

    @al.window("lookup")
    def lookup(secret_text: str) -> str:
        return "ok"

    with pytest.warns(al.InstrumentationWarning, match="raised RuntimeError"), al.record(
        trace_path, seed=1, redact=redact
    ):
        assert lookup(CANARY) == "ok"
    assert CANARY.encode() not in trace_path.read_bytes()


# ---------------------------------------------------------------- the scrubber's rules

from agentlog import _scrub  # noqa: E402
from agentlog._encoding import encode  # noqa: E402


def test_credential_names_are_matched_exactly_not_as_substrings() -> None:
    for name in ("api_key", "API_KEY", "Authorization", "X-Api-Key", "token", "password",
                 "openai_api_key", "db_password", "client_secret", "Cookie", "bearer"):
        assert _scrub.is_credential_name(name), name
    for name in ("max_tokens", "max_completion_tokens", "max_new_tokens", "top_logprobs",
                 "prompt_tokens", "completion_tokens", "total_tokens", "input_tokens",
                 "output_tokens", "cached_tokens", "reasoning_tokens", "eos_token_id",
                 "pad_token", "skip_special_tokens", "tokenizer", "key", "keywords",
                 "passage", "secretary", "author"):
        assert not _scrub.is_credential_name(name), name


def test_the_byte_prefilter_sees_every_credential_name_in_any_case() -> None:
    names = set(_scrub.CREDENTIAL_NAMES) | {"my" + s for s in _scrub.CREDENTIAL_SUFFIXES}
    for name in names:
        for variant in (name, name.upper(), name.title(), name.replace("_", "-")):
            assert _scrub.may_hold_secret(encode({variant: "abcd"})), variant
    for text in ("sk-" + "a" * 20, "Bearer abcdefghij", "https://u:pw@h", "x?key=abcd"):
        assert _scrub.may_hold_secret(encode([text])), text
        assert _scrub.scrub_value([text]) != [text], text
    # the shortest payloads that can hold a credential are scanned, shorter ones are not
    assert _scrub.may_hold_secret(encode({"auth": "abcd"}))
    assert not _scrub.may_hold_secret(encode(3)) and not _scrub.may_hold_secret(b"")
    assert _scrub.may_hold_secret(encode("pin4"), {"pin4"})  # known values, any length


def test_the_prefilter_finds_each_stem_in_short_and_long_payloads() -> None:
    assert not _scrub.may_hold_secret(encode({"text": "the quick brown fox " * 40}))
    assert not _scrub.may_hold_secret(encode("x" * 64))  # its length byte is "@"
    assert not _scrub.may_hold_secret(encode("write to jane@example.org"))
    for needle in _scrub._NEEDLES:
        needle = needle.replace("://@", "://u:v@")
        short = encode({"text": "x" * 20 + needle})
        long = encode({"text": "x" * 400 + needle.upper()})
        assert _scrub.may_hold_secret(short) and _scrub.may_hold_secret(long), needle


def test_messages_are_also_scrubbed_of_other_provider_key_formats() -> None:
    for key in ("ghp_" + "a" * 36, "github_pat_" + "b" * 30, "hf_" + "c" * 30,
                "AKIA" + "D" * 16, "AIza" + "e" * 35, "xoxb-1234567890-abc",
                "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4f"):
        assert key not in _scrub.scrub_text(f"refused credential {key} (401)"), key


def test_a_payload_without_credentials_comes_back_as_the_same_object() -> None:
    payload = {"q": "what is the key idea?", "docs": [("d1", 0.5)], "max_tokens": 16,
               "email": "jane@example.org"}
    assert _scrub.scrub_value(payload) is payload  # same bytes, same hash


def test_known_secrets_are_scrubbed_from_text_and_short_ones_are_not_remembered() -> None:
    known: set[str] = set()
    _scrub.scrub_value({"headers": {"Authorization": "Bearer s3cr3t-value-123"}}, known)
    assert "s3cr3t-value-123" in known
    _scrub.remember(known, "abc")  # too short to scrub everywhere
    assert "abc" not in known
    _scrub.remember(known, "pin4", declared=True)  # declared: the user's word
    assert _scrub.scrub_text("rejected s3cr3t-value-123 and pin4 and abc", known) == (
        "rejected <redacted> and <redacted> and abc"
    )


def test_scrub_text_redacts_formats_userinfo_and_credential_assignments() -> None:
    text = ("401: key sk-abcdefghijklmnopqrstuv refused; url https://bob:pw9@h.example/x"
            "?api_key=XYZ123&page=2; config {'api_key': 'k-123', 'max_tokens': 64}; "
            "Authorization: Bearer abcdefgh12345678; db_password=hunter22")
    out = _scrub.scrub_text(text)
    for leaked in ("abcdefghijklmnopqrstuv", "pw9", "XYZ123", "k-123", "abcdefgh12345678",
                   "hunter22"):
        assert leaked not in out
    assert "'max_tokens': 64" in out and "page=2" in out and "https://<redacted>@h.example" in out


def test_the_redact_hook_sees_exception_messages(trace_path: Path) -> None:
    import pytest

    seen: list[Any] = []

    def redact(payload: Any) -> Any:
        seen.append(payload)
        return payload.replace("jane", "<name>") if isinstance(payload, str) else payload

    @al.window("w")
    def w(q: str) -> None:
        raise LookupError("no record for jane")

    with al.record(trace_path, redact=redact), pytest.raises(LookupError, match="jane"):
        w("q")
    (view,) = al.read(trace_path).windows("w")
    assert view.exit is not None and view.exit.error_message == "no record for <name>"
    assert "no record for jane" in seen


def test_a_failing_redact_hook_on_a_message_writes_a_marker(trace_path: Path) -> None:
    import pytest

    def redact(payload: Any) -> Any:
        if isinstance(payload, str) and "boom" in payload:
            raise RuntimeError("hook bug")
        return payload

    @al.window("w")
    def w(q: str) -> None:
        raise ValueError(f"boom {CANARY}")

    with pytest.warns(al.InstrumentationWarning, match="on an exception message"), \
            al.record(trace_path, redact=redact), pytest.raises(ValueError):
        w("q")
    (view,) = al.read(trace_path).windows("w")
    assert view.exit is not None and view.exit.error_message == "<redacted>"


def test_an_exception_whose_str_raises_is_recorded_and_reraised_untouched(
    trace_path: Path,
) -> None:
    import pytest

    class Weird(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no str for you")

    @al.window("w")
    def w() -> None:
        raise Weird()

    with capture_spans() as spans, al.record(trace_path), pytest.raises(Weird):
        w()
    (view,) = al.read(trace_path).windows("w")
    assert view.exit is not None
    assert view.exit.error_message == "<str() of Weird raised RuntimeError>"
    (event,) = [e for s in spans.spans for e in s.events if e.name == "exception"]
    assert event.attributes is not None and event.attributes["exception.type"] == "Weird"


def test_span_exception_events_carry_the_scrubbed_message_and_stack(trace_path: Path) -> None:
    import pytest

    @al.window("w", secret=("passcode",))
    def w(passcode: str) -> None:
        raise PermissionError(f"passcode {passcode} rejected")

    with capture_spans() as spans, al.record(trace_path), pytest.raises(PermissionError):
        w("Zq-local-passcode-1")
    (event,) = [e for s in spans.spans for e in s.events if e.name == "exception"]
    attributes = dict(event.attributes or {})
    assert attributes["exception.message"] == "passcode <redacted> rejected"
    assert "PermissionError: passcode <redacted> rejected" in attributes["exception.stacktrace"]
    assert "Zq-local-passcode-1" not in repr(attributes)


def test_known_secrets_in_non_ascii_payloads_are_found_by_the_prefilter() -> None:
    secret = "clé-secrète-ü"
    assert _scrub.may_hold_secret(encode({"note": f"voici {secret}"}), {secret})
    assert _scrub.scrub_value({"note": f"voici {secret}"}, {secret}) == {
        "note": "voici <redacted>"}


def test_secrets_remembered_from_many_threads_never_break_scrubbing(trace_path: Path) -> None:
    """Threads adding secrets while others scrub must not raise into the agent."""
    import sys

    from agentlog.context import copy_context_executor

    @al.window("w", secret=("passcode",))
    def w(passcode: str, note: str) -> str:
        return note

    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with al.record(trace_path), copy_context_executor(8) as pool:
            # each exit echoes its own secret, remembered at its entry
            notes = list(pool.map(
                lambda i: w(f"code-{i:06d}-x", f"note {i} for code-{i:06d}-x"), range(400)
            ))
    finally:
        sys.setswitchinterval(previous)
    assert notes == [f"note {i} for code-{i:06d}-x" for i in range(400)]
    from tests.core.test_secret_routes import decompressed

    assert b"code-0" not in decompressed(trace_path)


def test_credential_name_verdicts_are_cached_for_exact_short_names_only() -> None:
    """White-box test of ``agentlog._scrub``'s verdict cache (``_name_verdicts``): a str
    subclass or a long name is never answered from it."""
    from agentlog import _scrub

    class Odd(str):
        def lower(self) -> str:  # a subclass that lowers itself its own way
            return "api_key"

    assert _scrub.is_credential_name("plain_field") is False
    assert _scrub._name_verdicts["plain_field"] is False
    assert _scrub.is_credential_name(Odd("plain_field")) is True  # not the cached verdict
    long_name = "x" * 65 + "_api_key"
    assert _scrub.is_credential_name(long_name) and long_name not in _scrub._name_verdicts
    for name in ("API-Key", "Authorization", "max_tokens", "db_password"):
        first = _scrub.is_credential_name(name)
        assert _scrub.is_credential_name(name) is first is (name != "max_tokens")
