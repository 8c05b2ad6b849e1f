"""``al.llm_call`` records a model call of any client into the current window."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog._encoding import decode
from agentlog.testing import capture_spans

from ._trace_text import trace_plaintext

CANARY = "sk-canary-1234567890abcdef"  # not the providers module one: a fresh value


def test_outside_a_run_it_records_nothing_and_returns_none() -> None:
    assert al.llm_call("x", "m", request={"q": 1}, response={"a": 2}) is None


def test_it_writes_an_llm_call_record_and_fills_the_window_counters(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"

    @al.window("ask")
    def ask() -> None:
        al.llm_call("my-llm", "tiny", request={"prompt": "hi"}, response={"text": "yo"},
                    input_tokens=10, output_tokens=4, latency_ns=1_500,
                    prices={"tiny": (2.0, 8.0)}, fingerprint="fp-1", cache_key=b"k" * 32)
        al.llm_call("my-llm", "tiny", request={"prompt": "again"}, response={"text": "ok"},
                    input_tokens=1, output_tokens=1, cost=0.25)

    with al.record(path, seed=1):
        ask()
    trace = al.read(path)
    first, second = trace.llm_calls()
    assert (first.provider, first.model, first.input_tokens, first.output_tokens) == (
        "my-llm", "tiny", 10, 4)
    assert first.cost == pytest.approx((10 * 2.0 + 4 * 8.0) / 1e6)
    assert (first.latency_ns, first.fingerprint, first.cache_key) == (1_500, "fp-1", b"k" * 32)
    assert decode(first.request) == {"prompt": "hi"}
    assert decode(first.response) == {"text": "yo"}
    assert second.cost == 0.25
    (exit_,) = [r for r in trace.records if type(r).__name__ == "WindowExit"]
    assert (exit_.llm_calls, exit_.input_tokens, exit_.output_tokens) == (2, 11, 5)
    assert exit_.cost == pytest.approx(0.25 + 52 / 1e6)


def test_every_field_of_the_record_holds_the_value_it_was_given(tmp_path: Path) -> None:
    """The record is built positionally (for speed): each field checked by name."""
    path = tmp_path / "t.zst"
    with al.record(path, seed=1):
        al.llm_call("prov.x", "model-x", request={"q": 1}, response={"a": 2},
                    operation="text_completion", input_tokens=11, output_tokens=7,
                    latency_ns=123, cost=0.5, error=RuntimeError("boom"),
                    response_model="model-x-2026", response_id="resp-9",
                    finish_reasons=("stop", "length"), fingerprint="fp-9",
                    cache_key=b"c" * 32, cache="miss", kind="internal")
    (rec,) = al.read(path).llm_calls()
    assert (rec.run, rec.window, rec.provider, rec.model) == (0, -1, "prov.x", "model-x")
    assert (decode(rec.request), decode(rec.response)) == ({"q": 1}, {"a": 2})
    assert (rec.cache_key, rec.input_tokens, rec.output_tokens) == (b"c" * 32, 11, 7)
    assert (rec.latency_ns, rec.cost, rec.status) == (123, 0.5, 1)
    assert (rec.error_type, rec.error_message) == ("RuntimeError", "boom")
    assert (rec.fingerprint, rec.operation, rec.in_process, rec.cache) == (
        "fp-9", "text_completion", True, "miss")
    assert (rec.response_model, rec.response_id, rec.finish_reasons) == (
        "model-x-2026", "resp-9", ["stop", "length"])
    assert rec.t_ns > 0


def test_a_model_missing_from_the_price_table_has_no_cost(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, seed=1):
        al.llm_call("p", "other", request={}, input_tokens=5, prices={"tiny": (1.0, 1.0)})
    assert al.read(path).llm_calls()[0].cost is None


def test_a_failed_call_stores_its_error_with_the_secret_value_removed(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    error = PermissionError(f"Incorrect API key provided: {CANARY}")
    with capture_spans() as spans, al.record(path, seed=1):
        al.llm_call("openai", "gpt-x", request={"api_key": CANARY, "note": f"k={CANARY}"},
                    error=error, secrets=[CANARY])
    assert CANARY.encode() not in trace_plaintext(path)
    (call,) = al.read(path).llm_calls()
    assert (call.status, call.error_type) == (1, "PermissionError")
    assert call.error_message == "Incorrect API key provided: <redacted>"
    assert decode(call.request) == {"api_key": "<redacted>", "note": "k=<redacted>"}
    (span,) = spans.by_name("chat gpt-x")
    assert span.status.status_code.name == "ERROR"
    assert CANARY not in str(span.status.description)
    assert span.attributes["error.type"] == "PermissionError"
    assert str(error) == f"Incorrect API key provided: {CANARY}"  # the caller's error untouched


def test_each_call_is_a_client_span_under_its_window_span(tmp_path: Path) -> None:
    @al.window("ask")
    def ask() -> None:
        al.llm_call("openai.chat", "gpt-x", request={"temperature": 0.3, "max_tokens": 9,
                                                      "top_p": 0.9, "seed": 4},
                    input_tokens=12, output_tokens=3, latency_ns=2_000_000,
                    response_model="gpt-x-2", response_id="r-1", finish_reasons=["stop"],
                    cache="miss", cache_key=bytes(range(32)))

    with capture_spans() as spans, al.record(tmp_path / "t.zst", seed=1) as run:
        ask()
    (call,) = spans.by_name("chat gpt-x")
    (window,) = spans.by_name("agentlog.window.ask")
    assert call.kind.name == "CLIENT"
    assert call.parent is not None and call.parent.span_id == window.context.span_id
    assert call.end_time - call.start_time == 2_000_000
    assert dict(call.attributes or {}) == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-x", "gen_ai.request.temperature": 0.3,
        "gen_ai.request.top_p": 0.9, "gen_ai.request.max_tokens": 9,
        "gen_ai.request.seed": 4, "gen_ai.response.model": "gpt-x-2",
        "gen_ai.response.id": "r-1", "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 3,
        "agentlog.cache": "miss", "agentlog.cache_key": bytes(range(32)).hex(),
        "agentlog.run_id": run.run_id,
    }
    assert "gen_ai.system" not in (call.attributes or {})
    assert window.attributes["agentlog.llm_calls"] == 1


def test_message_content_reaches_the_span_only_when_asked(tmp_path: Path) -> None:
    request: dict[str, Any] = {"messages": [{"role": "user", "content": "secret plan"}]}
    with capture_spans() as spans, al.record(tmp_path / "t.zst", seed=1):
        al.llm_call("openai", "m", request=request, response={"text": "ok"})
        al.llm_call("openai", "m", request=request, response={"text": "ok"},
                    capture_content=True)
    plain, with_content = spans.by_name("chat m")
    assert "gen_ai.input.messages" not in (plain.attributes or {})
    assert "secret plan" in with_content.attributes["gen_ai.input.messages"]
    assert '"ok"' in with_content.attributes["gen_ai.output.messages"]


def test_the_redact_hook_runs_on_the_request_and_the_response(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"

    def redact(payload: Any) -> Any:
        return {k: "<pii>" if k == "email" else v for k, v in payload.items()}

    with al.record(path, seed=1, redact=redact):
        al.llm_call("p", "m", request={"email": "a@b.c", "q": 1}, response={"email": "x@y"})
    (call,) = al.read(path).llm_calls()
    assert decode(call.request) == {"email": "<pii>", "q": 1}
    assert decode(call.response) == {"email": "<pii>"}


def test_an_unencodable_payload_warns_and_the_call_is_still_counted(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"

    @al.window("ask")
    def ask() -> None:
        with pytest.warns(al.InstrumentationWarning, match="cannot seal a value of type"):
            al.llm_call("p", "m", request={"f": object()}, input_tokens=3)

    with al.record(path, seed=1):
        ask()
    (call,) = al.read(path).llm_calls()
    assert decode(call.request) == "<redacted>" and call.input_tokens == 3




def test_a_response_that_echoes_a_secret_value_loses_it_and_keeps_its_usage(
        tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    response = {"usage": {"prompt_tokens": 3}, "choices": [{"text": f"your key is {CANARY}"}],
                "logprobs": [{"token": "x", "logprob": -0.5}]}
    with al.record(path, seed=1):
        al.llm_call("p", "m", request={"max_tokens": 5}, response=response, secrets=[CANARY])
        al.llm_call("p", "m", request={}, response={"text": "clean"}, secrets=[CANARY])
    assert CANARY.encode() not in trace_plaintext(path)
    echoed, clean = al.read(path).llm_calls()
    assert decode(echoed.response) == {"usage": {"prompt_tokens": 3},
                                       "choices": [{"text": "your key is <redacted>"}],
                                       "logprobs": [{"token": "x", "logprob": -0.5}]}
    assert decode(echoed.request) == {"max_tokens": 5}
    assert decode(clean.response) == {"text": "clean"}


def test_window_and_tool_failures_lose_a_secret_value_a_model_call_reported(
        tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    secret = "sk-canary-tool-99887766"

    @al.tool("fetch")
    def fetch() -> None:
        raise RuntimeError(f"proxy said: bad key {secret}")

    @al.window("ask")
    def ask() -> None:
        al.llm_call("p", "m", request={}, error=RuntimeError("401"), secrets=[secret])
        fetch()

    with capture_spans() as spans, al.record(path, seed=1), pytest.raises(
            RuntimeError, match=secret):
        ask()
    assert secret.encode() not in trace_plaintext(path)
    (tool,) = [r for r in al.read(path).records if type(r).__name__ == "ToolCall"]
    assert tool.error_message == "proxy said: bad key <redacted>"
    events = [dict(e.attributes or {}) for s in spans.spans for e in s.events]
    assert events and secret not in repr(events)


def test_credential_fields_are_found_at_any_depth_and_nothing_else_changes(
        tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    request = {"model": "m", "max_tokens": 3, "extra_body": {"proxy": [{"x-api-key": "k1"}]},
               "messages": [{"role": "user", "content": "what is a token?"}]}
    with al.record(path, seed=1):
        al.llm_call("p", "m", request=request, response={})
        al.llm_call("p", "m", request={"messages": request["messages"]}, response={})
    scrubbed, untouched = (decode(c.request) for c in al.read(path).llm_calls())
    assert scrubbed == {**request, "extra_body": {"proxy": [{"x-api-key": "<redacted>"}]}}
    assert untouched == {"messages": request["messages"]}
    assert request["extra_body"] == {"proxy": [{"x-api-key": "k1"}]}  # the caller's dict


def test_a_request_holding_a_secret_the_run_knows_loses_it_and_keeps_its_parameters(
        tmp_path: Path) -> None:
    """A window's declared secret that the agent pastes into a prompt (or a key in a
    format the scrubber knows) never reaches the stored request, and a failure message
    goes through the same scrubber; sampling parameters are untouched."""
    path = tmp_path / "t.zst"
    password = "Zq-llm-password-0042"

    @al.window("ask", secret=("password",))
    def ask(question: str, password: str) -> None:
        al.llm_call("openai", "gpt-x",
                    request={"messages": [{"role": "user", "content": f"{question} {password}"}],
                             "max_tokens": 16, "temperature": 0.5},
                    response={"text": "ok"}, error=RuntimeError(f"rejected {password}"))

    with al.record(path, seed=1):
        ask("log in with", password)
    assert password.encode() not in trace_plaintext(path)
    (call,) = al.read(path).llm_calls()
    request = decode(call.request)
    assert request["messages"][0]["content"] == "log in with <redacted>"
    assert (request["max_tokens"], request["temperature"]) == (16, 0.5)
    assert call.error_message == "rejected <redacted>"


def test_a_checked_request_still_loses_the_runs_known_secrets_and_meets_its_redact_hook(
        tmp_path: Path) -> None:
    """``request_checked=True`` skips only the rules the request already passed (an
    adapter's clean cache key): a secret value the run knows and the run's redact hook
    still apply; an unchecked request with a key format is scrubbed as before."""
    path = tmp_path / "t.zst"
    secret = "Zq-checked-secret-0077"

    @al.window("ask", secret=("password",))
    def ask(password: str) -> None:
        al.llm_call("openai", "m", request={"messages": [{"content": f"pw {password}"}]},
                    response={"text": "ok"}, request_checked=True)
        al.llm_call("openai", "m", request={"messages": [{"content": "plain"}]},
                    response={"text": "ok"}, request_checked=True)
        al.llm_call("openai", "m", request={"messages": [{"content": f"key {CANARY}"}]},
                    response={"text": "ok"})

    with al.record(path, seed=1):
        ask(secret)
    assert secret.encode() not in trace_plaintext(path)
    known, plain, unchecked = (decode(c.request) for c in al.read(path).llm_calls())
    assert known == {"messages": [{"content": "pw <redacted>"}]}
    assert plain == {"messages": [{"content": "plain"}]}
    assert unchecked == {"messages": [{"content": "key <redacted>"}]}

    redacted = tmp_path / "r.zst"
    with al.record(redacted, seed=1, redact=lambda p: {**p, "note": f"added {CANARY}"}):
        al.llm_call("openai", "m", request={"q": 1}, response={}, request_checked=True)
    (call,) = al.read(redacted).llm_calls()
    assert decode(call.request) == {"q": 1, "note": "added <redacted>"}
