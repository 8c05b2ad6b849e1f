"""Export: a stored trace gives exactly the spans its live run produced, with stable ids."""

from __future__ import annotations

import contextlib
import json
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agentlog as al
import agentlog.export as export_module
from agentlog import export
from agentlog._recorder import log_llm_call
from agentlog.export import to_otlp, to_otlp_json, to_spans
from agentlog.records import WindowExit
from agentlog.testing import capture_spans
from tests.export._spans import signatures


def _bundled(path: Path) -> None:
    from agentlog.examples.deep_research import run_agent

    run_agent("q0", ranking="agent", seed=5, budget=2, n_candidates=8, path=path)


@al.window("ask")
def ask(question: str) -> str:
    log_llm_call(provider="openai", model="gpt-x",
                 request={"messages": [{"role": "user", "content": question}],
                          "temperature": 0.2, "top_p": 0.9},
                 response={"id": "r-1", "model": "gpt-x-2026", "choices": [
                     {"finish_reason": "stop", "message": {"content": "ok"}}]},
                 input_tokens=12, output_tokens=3, latency_ns=2_000_000)
    return question


@al.tool("lookup")
def lookup(key: str) -> str:
    return key * 2


@al.window("plan")
def plan(question: str) -> str:
    i = al.select(np.array([0.25, 0.75]), candidates=["alpha", "beta"], name="doc")
    al.proceed(0.5, name="stop")
    lookup(question)
    al.score("f1", 0.8, channel="direct", layout=1, wave=0)
    return ask(question) + str(i)


@al.window("boom")
def boom() -> None:
    raise RuntimeError("no luck")


def _model_run(path: Path, durability: Any = "frame") -> None:
    with al.record(path, system="planner", seed=2, task="t-1", meta={"backbone": "m-1"},
                   durability=durability):
        plan("q")
        lookup("outside")
        al.score("accuracy", 1.0)
        with contextlib.suppress(RuntimeError):
            boom()


def _adapter_run(path: Path) -> None:
    """Calls through wrapped openai and anthropic clients (real SDKs, in-process fake
    transport): chat, the Responses API, a stream, a cache hit and a 401."""
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    from agentlog.adapters import anthropic as anthropic_adapter
    from agentlog.adapters import openai as openai_adapter
    from agentlog.replay import ModelCache
    from tests.adapters._providers import FakeProvider, anthropic_client, openai_client

    provider = FakeProvider(fail={5: 401})  # the second anthropic call
    messages = [{"role": "user", "content": "A or B?"}]
    with ModelCache(path=path.with_suffix(".sqlite")) as cache:
        oai = openai_adapter.wrap(openai_client(provider), cache=cache)
        claude = anthropic_adapter.wrap(anthropic_client(provider))

        @al.window("ask")
        def ask(question: str) -> None:
            for _ in range(2):  # a miss, then a hit
                oai.chat.completions.create(model="gpt-4o-mini", messages=messages,
                                            temperature=0.5, max_tokens=4, logprobs=True,
                                            top_logprobs=2, seed=7)
            oai.responses.create(model="gpt-4.1-mini", input=question, max_output_tokens=8)
            stream = oai.chat.completions.create(model="gpt-4o-mini", messages=messages,
                                                 stream=True, top_p=0.9)
            for _ in stream:
                pass
            claude.messages.create(model="claude-opus-4-7", max_tokens=16, messages=messages)
            with contextlib.suppress(Exception):
                claude.messages.create(model="claude-opus-4-7", max_tokens=17,
                                       messages=messages)

        with al.record(path, system="adapters", seed=3):
            ask("q")


@pytest.mark.parametrize("agent", [_bundled, _model_run, _adapter_run],
                         ids=["bundled-agent", "model-calls", "adapter-calls"])
def test_live_spans_equal_the_spans_exported_from_the_stored_trace(
    agent: Any, trace_path: Path
) -> None:
    with capture_spans() as captured:
        agent(trace_path)
    live = captured.spans
    exported = list(to_spans(al.read(trace_path)))
    assert len(live) == len(exported) > 3
    assert signatures(live) == signatures(exported)
    # One trace per run: every live span shares the root's trace id.
    assert len({s.context.trace_id for s in live}) == 1
    # Live and exported spans are the same spans: exporting a run traced live adds none.
    assert sorted((s.context.trace_id, s.context.span_id) for s in live) == sorted(
        (s.context.trace_id, s.context.span_id) for s in exported)
    assert sorted((s.context.span_id, None if s.parent is None else s.parent.span_id)
                  for s in live) == sorted(
        (s.context.span_id, None if s.parent is None else s.parent.span_id)
        for s in exported)
    # Tool and model spans carry their records' own times, live and exported alike.
    live_times = sorted((s.name, s.start_time, s.end_time) for s in live
                        if s.name.startswith(("execute_tool", "chat")))
    exported_times = sorted((s.name, s.start_time, s.end_time) for s in exported
                            if s.name.startswith(("execute_tool", "chat")))
    assert live_times == exported_times and live_times
    if agent is _adapter_run:  # the model spans carry the conventions' attributes
        chat = [dict(s.attributes or {}) for s in live if s.name == "chat gpt-4o-mini"]
        assert sorted(a["agentlog.cache"] for a in chat) == ["hit", "miss", "miss"]
        assert {a.get("gen_ai.request.temperature") for a in chat} == {0.5, None}
        assert [s.kind.name for s in live if s.name.startswith("chat claude")] == [
            "CLIENT", "CLIENT"]
        assert sum(s.status.status_code.name == "ERROR" for s in live) == 1
    # The one difference: an exported window span carries its stored receipt, which the
    # writer chained after the live span had ended.
    exits = {(r.name, r.exit_hash.hex()): r.receipt.hex() for r in al.iter_records(trace_path)
             if isinstance(r, WindowExit)}
    windows = [s for s in exported if s.name.startswith("agentlog.window.")]
    assert windows and all(
        dict(s.attributes or {})["agentlog.receipt"] == exits[
            (s.attributes["agentlog.window"], s.attributes["agentlog.exit_hash"])]
        for s in windows)
    assert all("agentlog.receipt" not in dict(s.attributes or {}) for s in live)


def test_the_model_run_has_the_spans_and_events_the_conventions_name(trace_path: Path) -> None:
    _model_run(trace_path)
    spans = {s.name: s for s in to_spans(trace_path)}
    run = spans["invoke_agent planner"]
    assert run.parent is None and run.kind.name == "INTERNAL"
    attrs = dict(run.attributes or {})
    assert attrs["gen_ai.agent.name"] == "planner"
    assert attrs["gen_ai.conversation.id"] == attrs["agentlog.run_id"]
    assert attrs["agentlog.task"] == "t-1" and attrs["agentlog.meta.backbone"] == "m-1"
    window = spans["agentlog.window.plan"]
    assert window.parent is not None and window.parent.span_id == run.context.span_id
    model = spans["chat gpt-x"]
    assert model.kind.name == "CLIENT"
    assert model.parent is not None and model.parent.span_id == (
        spans["agentlog.window.ask"].context.span_id)
    m = dict(model.attributes or {})
    assert m["gen_ai.provider.name"] == "openai" and "gen_ai.system" not in m
    assert m["gen_ai.request.temperature"] == 0.2 and m["gen_ai.request.top_p"] == 0.9
    assert m["gen_ai.response.finish_reasons"] == ("stop",)
    assert m["gen_ai.response.id"] == "r-1" and m["gen_ai.usage.input_tokens"] == 12
    assert model.end_time - model.start_time == 2_000_000  # type: ignore[operator]
    tools = [s for s in to_spans(trace_path) if s.name == "execute_tool lookup"]
    assert sorted(t.parent.span_id for t in tools) == sorted(  # type: ignore[union-attr]
        [window.context.span_id, run.context.span_id])
    select, proceed, evaluation = window.events
    assert dict(select.attributes or {})["agentlog.chosen_id"] in ("alpha", "beta")
    assert proceed.name == "agentlog.proceed"
    assert evaluation.name == "gen_ai.evaluation.result"
    ev = dict(evaluation.attributes or {})
    assert ev["gen_ai.evaluation.name"] == "f1" and ev["gen_ai.evaluation.score.value"] == 0.8
    assert ev["agentlog.channel"] == "direct" and ev["agentlog.layout"] == 1
    assert [e.name for e in run.events] == ["gen_ai.evaluation.result"]
    failed = spans["agentlog.window.boom"]
    assert failed.status.status_code.name == "ERROR"
    assert dict(failed.events[0].attributes or {})["exception.message"] == "no luck"


def test_no_probability_vector_or_prompt_goes_into_a_span(trace_path: Path) -> None:
    _model_run(trace_path)
    for span in to_spans(trace_path):
        values = [*dict(span.attributes or {}).values()]
        for event in span.events:
            values += dict(event.attributes or {}).values()
        assert all(not isinstance(v, tuple) or len(v) < 4 for v in values)
        assert all(v != "q" or span.name.startswith("agentlog") for v in values)
        assert "content" not in json.dumps([str(v) for v in values])


def test_exporting_twice_gives_the_same_ids_and_different_runs_different_ones(
    tmp_path: Path,
) -> None:
    a, b = tmp_path / "a.zst", tmp_path / "b.zst"
    _model_run(a)
    _model_run(b)

    def ids(path: Path) -> list[tuple[int, int, int | None]]:
        return sorted((s.context.trace_id, s.context.span_id,
                       None if s.parent is None else s.parent.span_id) for s in to_spans(path))

    first = ids(a)
    assert first == ids(a)
    assert len({span for _, span, _ in first}) == len(first)
    assert not {t for t, _, _ in first} & {t for t, _, _ in ids(b)}


def test_the_otlp_json_file_holds_every_span_with_hex_ids(tmp_path: Path) -> None:
    """Also: ids depend on what is exported, so a re-export to another project or with
    content arrives instead of being dropped as a copy of the first."""
    trace = tmp_path / "a.zst"
    _model_run(trace)
    out = tmp_path / "spans.json"
    result = to_otlp_json([trace], out, resource_attributes={"openinference.project.name": "p"})
    document = json.loads(out.read_text())
    spans = [s for rs in document["resourceSpans"] for ss in rs["scopeSpans"]
             for s in ss["spans"]]
    assert result.spans_sent == len(spans) == len(list(to_spans(trace)))
    same = to_spans(trace, resource_attributes={"openinference.project.name": "p"})
    expected = {format(s.context.span_id, "016x") for s in same}
    assert {s["spanId"] for s in spans} == expected
    # Another project: a copy with ids of its own, which a backend keeps beside the first.
    plain = {format(s.context.span_id, "016x") for s in to_spans(trace)}
    assert plain.isdisjoint(expected) and len(plain) == len(expected)
    resource = {a["key"]: a["value"] for a in document["resourceSpans"][0]["resource"][
        "attributes"]}
    assert resource["service.name"] == {"stringValue": "planner"}
    assert resource["openinference.project.name"] == {"stringValue": "p"}


def _refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again: nothing listens there


def _count_exports(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the OTLP exporter's ``export`` calls (each still runs)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    calls: list[int] = []
    real = OTLPSpanExporter.export

    def counted(self: Any, spans: Any) -> Any:
        calls.append(len(spans))
        return real(self, spans)

    monkeypatch.setattr(OTLPSpanExporter, "export", counted)
    return calls


def test_a_refused_port_is_reported_before_any_batch(trace_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the first batch waited out the OTLP exporter's retries (~30 s), then stopped."""
    _model_run(trace_path)
    calls = _count_exports(monkeypatch)
    port = _refused_port()
    url = f"http://127.0.0.1:{port}/v1/traces"
    done: list[int] = []
    result = to_otlp([trace_path], endpoint=url, batch=2, retries=1, backoff_s=0.0,
                     timeout_s=2.0, progress=done.append)
    n = len(list(to_spans(trace_path)))
    assert n > 4  # several batches, none sent
    assert calls == [] and result.batches == 0
    assert result.spans_sent == 0 and result.spans_failed == n == sum(done)
    assert result.errors == [
        f"cannot connect to {url} (nothing listens on port {port} of 127.0.0.1: connection "
        f"refused), so the {-(-n // 2)} batches left ({n} spans) were not sent"]


def test_a_refused_port_is_named_even_with_nothing_to_send(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    calls = _count_exports(monkeypatch)
    port = _refused_port()
    result = to_otlp([], endpoint=f"http://127.0.0.1:{port}/v1/traces")
    assert calls == [] and result.spans_failed == 0
    assert result.errors == [f"cannot connect to http://127.0.0.1:{port}/v1/traces (nothing "
                             f"listens on port {port} of 127.0.0.1: connection refused), so "
                             "the 0 batches left (0 spans) were not sent"]


def test_a_port_out_of_range_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_exports(monkeypatch)
    result = to_otlp([], endpoint="http://127.0.0.1:99999/v1/traces")
    assert calls == [] and len(result.errors) == 1
    assert result.errors[0].startswith("cannot connect to http://127.0.0.1:99999/v1/traces "
                                       "(Port out of range 0-65535)")


@contextlib.contextmanager
def _answering(status: int) -> Any:
    """A loopback HTTP server answering every POST with ``status``; yields its port."""
    import http.server
    import threading

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # the http.server hook
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_an_endpoint_that_accepts_no_batch_stops_the_export_after_its_first(
        trace_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: every batch waited out its retries in turn. Userinfo stays out of errors."""
    _model_run(trace_path)
    calls = _count_exports(monkeypatch)
    n = len(list(to_spans(trace_path)))
    with _answering(401) as port:  # a wrong credential: not retried by the exporter
        url = f"http://user:s3cret-pw@127.0.0.1:{port}/v1/traces"
        done: list[int] = []
        result = to_otlp([trace_path], endpoint=url, batch=2, retries=1, backoff_s=0.0,
                         timeout_s=2.0, progress=done.append)
    shown = f"http://<redacted>@127.0.0.1:{port}/v1/traces"
    # The first batch once: the OTLP exporter does not retry a 401, and agentlog adds no
    # retries on top of the exporter's own (retries= is for an exporter of your own).
    assert calls == [2]
    assert result.spans_sent == 0 and result.spans_failed == n == sum(done)
    assert result.batches == 1 and len(result.errors) == 2
    assert result.errors[0].startswith(f"batch 1 (2 spans) was not accepted by {shown} "
                                       "after 1 attempt")
    left = -(-n // 2) - 1
    assert result.errors[1] == (f"stopped: {shown} accepted no batch, so the {left} batches "
                                f"left ({n - 2} spans) were not sent")
    assert "s3cret" not in "".join(result.errors)


def test_behind_a_proxy_the_export_does_not_test_the_connection_itself(
        trace_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The proxy is what the exporter reaches: a direct connection proves nothing."""
    _model_run(trace_path)
    calls = _count_exports(monkeypatch)
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{_refused_port()}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    result = to_otlp([trace_path], endpoint="http://192.0.2.1:4318/v1/traces", batch=1000,
                     retries=0, timeout_s=0.5)
    assert calls == [len(list(to_spans(trace_path)))]  # sent (to the refused proxy)
    assert result.spans_sent == 0 and result.errors[0].startswith("batch 1 ")


class _FlakyExporter:
    """Accepts batches except those whose numbers (from 1) are in ``refuse``."""

    def __init__(self, refuse: set[int]) -> None:
        self.refuse = refuse
        self.calls = 0
        self.accepted: list[int] = []

    def export(self, spans: object) -> object:
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.calls += 1
        if self.calls in self.refuse:
            return SpanExportResult.FAILURE
        self.accepted.append(self.calls)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def test_a_batch_refused_after_others_were_accepted_does_not_stop_the_export(
        trace_path: Path) -> None:
    _model_run(trace_path)
    n = len(list(to_spans(trace_path)))
    flaky = _FlakyExporter(refuse={2})  # batch 1 accepted, batch 2 refused (no retries)
    result = to_otlp([trace_path], endpoint="http://unused", batch=2, retries=0,
                     exporter=flaky)  # type: ignore[arg-type]
    batches = -(-n // 2)
    assert batches >= 3
    assert result.batches == batches == flaky.calls and len(result.errors) == 1
    assert result.spans_failed == 2 and result.spans_sent == n - 2
    first_refused = _FlakyExporter(refuse={1})  # nothing accepted yet: the export stops
    result = to_otlp([trace_path], endpoint="http://unused", batch=2, retries=0,
                     exporter=first_refused)  # type: ignore[arg-type]
    assert first_refused.calls == 1 and result.spans_failed == n and result.spans_sent == 0


def test_an_exporter_of_your_own_is_retried_under_the_shared_policy(
        trace_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _model_run(trace_path)
    n = len(list(to_spans(trace_path)))
    waits: list[float] = []
    monkeypatch.setattr(export_module.time, "sleep", waits.append)
    flaky = _FlakyExporter(refuse={1, 2})  # batch 1 refused twice, accepted at the third
    result = to_otlp([trace_path], endpoint="http://unused", batch=2, retries=2,
                     backoff_s=0.25, exporter=flaky)  # type: ignore[arg-type]
    assert result.spans_sent == n and result.errors == [] and flaky.accepted[0] == 3
    # Full jitter: each wait is drawn from [0, backoff_s * 2^(k-1)] (agentlog.retry).
    assert len(waits) == 2 and 0 <= waits[0] <= 0.25 and 0 <= waits[1] <= 0.5
    with pytest.raises(ValueError, match="`retries` must be an int >= 0"):
        to_otlp([trace_path], endpoint="http://unused", retries=-1,
                exporter=flaky)  # type: ignore[arg-type]


def test_a_truncated_trace_exports_what_it_has_and_says_so(tmp_path: Path) -> None:
    whole = tmp_path / "whole.zst"
    _model_run(whole, durability="window")  # a frame per window: a cut keeps the first ones
    data = whole.read_bytes()
    cut = tmp_path / "cut.zst"
    n_whole = len(list(to_spans(whole)))
    for size in range(len(data) - 1, 8, -1):  # the longest prefix that loses the run's end
        cut.write_bytes(data[:size])
        if al.read(cut).runs and al.read(cut).runs[0].end is None:
            break
    incomplete: list[str] = []
    spans = list(to_spans(cut, incomplete=incomplete))
    assert 0 < len(spans) <= n_whole
    assert incomplete[0].startswith(f"{cut}: truncated")
    assert any("never ended" in line for line in incomplete)
    (run,) = [s for s in spans if s.name == "invoke_agent planner"]
    assert dict(run.attributes or {})["agentlog.incomplete"] is True


def test_bad_batch_size_is_refused() -> None:
    with pytest.raises(ValueError, match="`batch` must be at least 1; found 0"):
        to_otlp([], endpoint="http://127.0.0.1:1/v1/traces", batch=0)


@pytest.mark.parametrize(("endpoint", "message"), [
    ("http://127.0.0.1:4318", r"`endpoint` has no path: the OTLP/HTTP traces endpoint ends in "
                              r"/v1/traces; found http://127\.0\.0\.1:4318 — try "
                              r"http://127\.0\.0\.1:4318/v1/traces"),
    ("https://user:pw@otel.example:4318/", r"found https://<redacted>@otel\.example:4318/ — "
                                           r"try https://<redacted>@otel\.example:4318/v1/"),
    ("http://127.0.0.1:4318/v1/metrics", r"another signal's endpoint.* try "
                                         r"http://127\.0\.0\.1:4318/v1/traces"),
    ("127.0.0.1:4318", r"`endpoint` '127\.0\.0\.1:4318': expected an OTLP/HTTP traces "
                       r"endpoint such as http://127\.0\.0\.1:4318/v1/traces"),
])
def test_an_endpoint_without_the_traces_path_is_refused_before_any_connection(
        trace_path: Path, monkeypatch: pytest.MonkeyPatch, endpoint: str, message: str) -> None:
    """Before: a connection, then "check that the backend is running"."""
    _model_run(trace_path)

    def no_connection(*args: object, **kwargs: object) -> None:
        raise AssertionError("connected before the endpoint was checked")

    monkeypatch.setattr(socket, "create_connection", no_connection)
    with pytest.raises(ValueError, match=message):
        to_otlp([trace_path], endpoint=endpoint)


def test_a_gateways_own_traces_path_is_kept() -> None:
    assert export.endpoint_problem("https://gw.example/api/public/otel/v1/traces") is None


def test_public_names_of_the_export_module() -> None:
    assert export.__all__ == sorted(export.__all__) == [
        "ExportResult", "endpoint_problem", "to_otlp", "to_otlp_json", "to_parquet",
        "to_spans"]


def test_meta_keys_that_name_credentials_never_reach_the_run_span(trace_path: Path) -> None:
    canary = "sk-canary-7f3a"
    with capture_spans() as captured, al.record(
        trace_path, seed=1, meta={"api_key": canary, "auth_token": canary, "note": "kept"}
    ):
        pass
    for spans in (captured.spans, list(to_spans(trace_path))):
        (run,) = spans
        attrs = dict(run.attributes or {})
        assert canary not in repr(attrs)
        assert attrs["agentlog.meta.note"] == "kept"


def test_the_export_module_docstring_example_runs() -> None:
    import doctest

    result = doctest.testmod(export, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_the_committed_golden_trace_exports(tmp_path: Path) -> None:
    golden = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "v1" / "golden.zst"
    trace = al.read(golden)
    spans = list(to_spans(trace))
    enters = trace.windows()
    assert sum(s.name.startswith("agentlog.window.") for s in spans) == len(enters) > 0
    assert sum(s.name.startswith("invoke_agent ") for s in spans) == len(trace.runs)
    ids = [s.context.span_id for s in spans]
    assert len(set(ids)) == len(ids)
    out = tmp_path / "golden.json"
    assert to_otlp_json([golden], out).spans_sent == len(spans)


def test_a_re_export_with_content_gets_new_ids_and_a_plain_one_the_live_ids(
        trace_path: Path) -> None:
    with capture_spans() as captured:
        _model_run(trace_path)
    live = {(s.context.trace_id, s.context.span_id) for s in captured.spans}
    plain = {(s.context.trace_id, s.context.span_id) for s in to_spans(trace_path)}
    content = {(s.context.trace_id, s.context.span_id)
               for s in to_spans(trace_path, capture_content=True)}
    assert plain == live  # exporting a live-traced run adds nothing
    assert content.isdisjoint(live) and len(content) == len(live)
