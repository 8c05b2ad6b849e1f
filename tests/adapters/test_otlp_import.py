"""``agentlog.adapters.otlp`` and ``agentlog import otlp``: spans made by the real
OpenTelemetry SDK (a ``TracerProvider`` into an ``InMemorySpanExporter``), encoded by the
real OTLP encoder (``encode_spans``, then protobuf's JSON mapping), read back as agentlog
traces, one run per trace id.

Two encodings of the same protobuf message are written: protobuf's own JSON mapping
(base64 ids, pretty-printed: one document) and OTLP/JSON as the Collector's file exporter
writes it (hex ids, one request a line).
"""

from __future__ import annotations

import base64
import doctest
import gc
import hashlib
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import zstandard
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode, Tracer, set_span_in_context

import agentlog as al
import agentlog.adapters.otlp
from agentlog.adapters.otlp import NO_REPLAY, ImportResult, import_spans
from agentlog.cli import _app
from agentlog.export import to_otlp_json
from agentlog.records import LLMCall, Score, ToolCall, decode_artifact, iter_runs
from tests.cli._cli import invoke

SECRET = "sk-test-OTLP1234567890abcdefXYZ"  # an OpenAI-format key: scrubbed by its form
TOKEN = "ghs-plain-token-0123456789"  # no known form: removed because of its key's name
MESSAGES_IN = [{"role": "user", "parts": [{"type": "text", "content": "what is 1 + 2?"}]}]
MESSAGES_OUT = [{"role": "assistant", "parts": [{"type": "text", "content": "3"}],
                 "finish_reason": "stop"}]


# ----------------------------------------------------------------------------- the spans


def sdk_tracer(service: str, **resource: Any) -> tuple[Tracer, InMemorySpanExporter]:
    """A tracer of a fresh ``TracerProvider`` whose spans end in the returned exporter."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service, **resource}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("tests.otlp"), exporter


def otlp_request(spans: tuple[ReadableSpan, ...] | list[ReadableSpan], *,
                 hex_ids: bool = False) -> dict[str, Any]:
    """The ``ExportTraceServiceRequest`` of ``spans`` in protobuf's JSON mapping (base64
    ids), or with ``hex_ids`` as OTLP/JSON writes it (what the Collector writes)."""
    request: dict[str, Any] = MessageToDict(encode_spans(spans))
    if hex_ids:
        for resource_spans in request["resourceSpans"]:
            for scope_spans in resource_spans["scopeSpans"]:
                for span in scope_spans["spans"]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in span:
                            span[key] = base64.b64decode(span[key]).hex()
    return request


def trace_hex(span: ReadableSpan) -> str:
    assert span.context is not None
    return format(span.context.trace_id, "032x")


def genai_spans() -> tuple[ReadableSpan, ...]:
    """Three agent runs of a travel agent, traced with the GenAI semantic conventions.

    ``conv-1``: a model call, a tool call (``add``), a second model call, evaluated 0.75.
    ``conv-2``: the tool fails, the model call fails echoing the key, evaluated 0.25.
    The third run (no conversation id) uses older forms: no operation name,
    ``gen_ai.system``, flattened ``gen_ai.prompt.N``, message events, and an evaluation
    with a label and no value.
    """
    tracer, exporter = sdk_tracer("travel-agent", **{
        "deployment.environment": "test", "openai.api_key": SECRET, "service.token": TOKEN,
        "url.full": f"https://proxy.example/v1?api_key={TOKEN}&region=eu"})
    for conversation, fail, score in (("conv-1", False, 0.75), ("conv-2", True, 0.25)):
        with tracer.start_as_current_span("invoke_agent planner") as agent:
            agent.set_attributes({"gen_ai.operation.name": "invoke_agent",
                                  "gen_ai.agent.name": "planner",
                                  "gen_ai.conversation.id": conversation})
            with tracer.start_as_current_span("chat gpt-4o-mini") as chat:
                chat.set_attributes({
                    "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "gpt-4o-mini", "gen_ai.request.temperature": 0.2,
                    "gen_ai.request.max_tokens": 64, "gen_ai.request.top_p": 0.9,
                    "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                    "gen_ai.response.id": f"chatcmpl-{conversation}",
                    "gen_ai.response.finish_reasons": ["tool_calls"],
                    "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 5,
                    "gen_ai.input.messages": json.dumps(MESSAGES_IN),
                    "http.request.header.authorization": [f"Bearer {TOKEN}"],
                    "server.address": "api.openai.com"})
            with tracer.start_as_current_span("execute_tool add") as tool:
                tool.set_attributes({"gen_ai.operation.name": "execute_tool",
                                     "gen_ai.tool.name": "add",
                                     "gen_ai.tool.call.arguments": '{"x": 1, "y": 2}'})
                if fail:
                    tool.set_attribute("error.type", "ZeroDivisionError")
                    tool.set_status(Status(StatusCode.ERROR, "division by zero"))
                else:
                    tool.set_attribute("gen_ai.tool.call.result", "3")
            with tracer.start_as_current_span("chat gpt-4o-mini") as chat:
                chat.set_attributes({
                    "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": 20,
                    "gen_ai.usage.output_tokens": 1 if not fail else 0,
                    "gen_ai.output.messages": json.dumps(MESSAGES_OUT)})
                if fail:
                    chat.set_attribute("error.type", "AuthenticationError")
                    chat.set_status(Status(StatusCode.ERROR,
                                           f"Incorrect API key provided: {SECRET}"))
            agent.add_event("gen_ai.evaluation.result", {
                "gen_ai.evaluation.name": "relevance", "gen_ai.evaluation.score.value": score})
    with tracer.start_as_current_span("workflow") as root:
        with tracer.start_as_current_span("anthropic.chat") as chat:
            chat.set_attributes({
                "gen_ai.system": "anthropic", "gen_ai.request.model": "claude-haiku",
                "gen_ai.usage.prompt_tokens": 7, "gen_ai.usage.completion_tokens": 2,
                "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "be brief",
                "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "hi",
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": "hello"})
        with tracer.start_as_current_span("chat claude-haiku") as chat:
            chat.set_attributes({"gen_ai.operation.name": "chat",
                                 "gen_ai.provider.name": "anthropic",
                                 "gen_ai.request.model": "claude-haiku"})
            chat.add_event("gen_ai.user.message",
                           {"gen_ai.event.content": json.dumps({"content": "and you?"})})
            chat.add_event("gen_ai.choice", {"gen_ai.event.content": json.dumps(
                {"index": 0, "finish_reason": "stop", "message": {"content": "fine"}})})
        root.add_event("gen_ai.evaluation.result", {
            "gen_ai.evaluation.name": "relevance", "gen_ai.evaluation.score.label": "pass"})
    return exporter.get_finished_spans()


def openinference_spans() -> tuple[ReadableSpan, ...]:
    """Two sessions of an app traced with OpenInference (as Arize Phoenix's instrumentors
    write it): a CHAIN around an AGENT, an LLM call that asks for a tool, the TOOL."""
    tracer, exporter = sdk_tracer("phoenix-app")
    for session in ("sess-1", "sess-2"):
        with tracer.start_as_current_span("RunnableSequence") as chain:
            chain.set_attributes({"openinference.span.kind": "CHAIN", "session.id": session,
                                  "input.value": "what is 2 * 3?"})
            with tracer.start_as_current_span("agent") as agent:
                agent.set_attribute("openinference.span.kind", "AGENT")
                with tracer.start_as_current_span("ChatOpenAI") as llm:
                    llm.set_attributes({
                        "openinference.span.kind": "LLM", "llm.model_name": "gpt-4.1-nano",
                        "llm.provider": "openai", "llm.token_count.prompt": 30,
                        "llm.token_count.completion": 8,
                        "llm.invocation_parameters": json.dumps(
                            {"temperature": 0.0, "api_key": TOKEN}),
                        "llm.input_messages.0.message.role": "user",
                        "llm.input_messages.0.message.content": "what is 2 * 3?",
                        "llm.output_messages.0.message.role": "assistant",
                        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name":
                            "multiply",
                        "llm.output_messages.0.message.tool_calls.0.tool_call.function."
                        "arguments": '{"a": 2, "b": 3}',
                        "llm.tools.0.tool.json_schema": json.dumps(
                            {"type": "function", "function": {"name": "multiply"}})})
                with tracer.start_as_current_span("multiply") as tool:
                    tool.set_attributes({
                        "openinference.span.kind": "TOOL", "tool.name": "multiply",
                        "tool.parameters": '{"type": "object"}',
                        "input.value": '{"a": 2, "b": 3}', "input.mime_type": "application/json",
                        "output.value": "6", "output.mime_type": "text/plain"})
    return exporter.get_finished_spans()


def write_json_lines(path: Path, spans: tuple[ReadableSpan, ...], per_line: int) -> Path:
    """The spans as the Collector's file exporter writes them: a request a line (hex ids),
    ``per_line`` spans each, so a trace's spans spread over lines."""
    with path.open("w") as f:
        for i in range(0, len(spans), per_line):
            f.write(json.dumps(otlp_request(spans[i:i + per_line], hex_ids=True)) + "\n")
    return path


@pytest.fixture(scope="module")
def genai(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[ReadableSpan, ...]]:
    spans = genai_spans()
    path = tmp_path_factory.mktemp("genai") / "travel.json"
    path.write_text(json.dumps(otlp_request(spans), indent=2))  # one document, base64 ids
    return path, spans


@pytest.fixture(scope="module")
def openinference(tmp_path_factory: pytest.TempPathFactory
                  ) -> tuple[Path, tuple[ReadableSpan, ...]]:
    spans = openinference_spans()
    return write_json_lines(tmp_path_factory.mktemp("oi") / "phoenix.jsonl", spans, 3), spans


@pytest.fixture(scope="module")
def imported(genai: tuple[Path, Any], openinference: tuple[Path, Any],
             tmp_path_factory: pytest.TempPathFactory) -> ImportResult:
    return import_spans([genai[0], openinference[0]], tmp_path_factory.mktemp("out") / "traces")


def runs_of(trace: Path) -> list[Any]:
    return [r.run for r in iter_runs(trace)]


def of(run: Any, kind: type) -> list[Any]:
    return [r for r in run.records if type(r) is kind]


def trace_bytes(trace: Path) -> bytes:
    with trace.open("rb") as f:
        return zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True).read()


# ----------------------------------------------------------------------------- the mapping


def test_each_trace_id_is_one_run_with_the_service_as_system_and_the_session_as_task(
        imported: ImportResult, genai: tuple[Path, Any], openinference: tuple[Path, Any]
        ) -> None:
    assert [f.name for f in imported.files] == ["travel.zst", "phoenix.zst"]
    assert (imported.runs, imported.spans) == (3 + 2, len(genai[1]) + len(openinference[1]))
    travel, phoenix = (runs_of(f) for f in imported.files)
    third = next(trace_hex(s) for s in genai[1] if s.name == "workflow")
    assert [(r.start.system, r.start.task, r.start.seed) for r in travel] == [
        ("travel-agent", "conv-1", 0), ("travel-agent", "conv-2", 0), ("travel-agent", third, 0)]
    assert [(r.start.system, r.start.task) for r in phoenix] == [
        ("phoenix-app", "sess-1"), ("phoenix-app", "sess-2")]


def test_run_meta_is_the_provenance_of_the_file(imported: ImportResult,
                                                genai: tuple[Path, Any]) -> None:
    path, spans = genai
    roots = {trace_hex(s): s.name for s in spans if s.parent is None}
    travel = runs_of(imported.files[0])
    for run in travel:
        meta = run.start.meta
        assert (meta["source"], meta["otlp_file"]) == ("otlp", "travel.json")
        assert meta["otlp_file_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert meta["root_span"] == roots[meta["trace_id"]]
        assert meta["convention"] == "gen_ai"
        assert meta["resource"]["service.name"] == "travel-agent"
        assert meta["resource"]["deployment.environment"] == "test"
        assert "openai.api_key" not in meta["resource"]
        assert "service.token" not in meta["resource"]
        assert TOKEN not in meta["resource"]["url.full"]
        assert meta["resource"]["url.full"].endswith("&region=eu")
    assert [r.start.meta.get("model") for r in travel] == ["gpt-4o-mini", "gpt-4o-mini",
                                                           "claude-haiku"]
    assert [r.start.meta.get("agent") for r in travel] == ["planner", "planner", None]
    phoenix = runs_of(imported.files[1])
    assert {r.start.meta["convention"] for r in phoenix} == {"openinference"}


def test_genai_model_spans_are_llm_calls_with_tokens_request_and_response(
        imported: ImportResult) -> None:
    first, second, _ = runs_of(imported.files[0])
    ask, answer = of(first, LLMCall)
    assert (ask.provider, ask.model, ask.operation) == ("openai", "gpt-4o-mini", "chat")
    assert (ask.input_tokens, ask.output_tokens, ask.status) == (12, 5, 0)
    assert (ask.response_model, ask.response_id) == ("gpt-4o-mini-2024-07-18", "chatcmpl-conv-1")
    assert list(ask.finish_reasons) == ["tool_calls"]
    assert ask.latency_ns > 0 and ask.window == -1
    assert decode_artifact(ask.request) == {"temperature": 0.2, "max_tokens": 64,
                                            "top_p": 0.9, "messages": MESSAGES_IN}
    assert decode_artifact(ask.response) is None  # the span captured no output
    assert decode_artifact(answer.response) == {"messages": MESSAGES_OUT}
    failed = of(second, LLMCall)[1]
    assert (failed.status, failed.error_type) == (1, "OtlpSpanError")
    assert failed.error_message.startswith("AuthenticationError: Incorrect API key provided:")
    assert SECRET not in failed.error_message


def test_genai_tool_spans_are_tool_calls_and_an_error_status_fails_them(
        imported: ImportResult) -> None:
    first, second, third = runs_of(imported.files[0])
    (added,) = of(first, ToolCall)
    assert (added.name, added.status) == ("add", 0)
    assert decode_artifact(added.args) == {"x": 1, "y": 2}
    assert decode_artifact(added.result) == 3
    (broken,) = of(second, ToolCall)
    assert (broken.status, broken.error_type) == (1, "OtlpSpanError")
    assert broken.error_message == "ZeroDivisionError: division by zero"
    assert of(third, ToolCall) == []
    assert imported.tool_calls == 2 + 2


def test_older_genai_forms_are_read_flattened_prompts_and_message_events(
        imported: ImportResult) -> None:
    third = runs_of(imported.files[0])[2]
    flattened, evented = of(third, LLMCall)
    assert (flattened.provider, flattened.model) == ("anthropic", "claude-haiku")
    assert (flattened.input_tokens, flattened.output_tokens) == (7, 2)
    assert decode_artifact(flattened.request) == {"messages": [
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]}
    assert decode_artifact(flattened.response) == {"messages": [
        {"role": "assistant", "content": "hello"}]}
    assert decode_artifact(evented.request) == {"messages": [
        {"role": "user", "content": "and you?"}]}
    assert decode_artifact(evented.response) == {"messages": [
        {"index": 0, "finish_reason": "stop", "message": {"content": "fine"}}]}


def test_openinference_llm_and_tool_spans_read_from_json_lines(imported: ImportResult) -> None:
    for run in runs_of(imported.files[1]):
        (llm,) = of(run, LLMCall)
        assert (llm.provider, llm.model, llm.input_tokens, llm.output_tokens) == (
            "openai", "gpt-4.1-nano", 30, 8)
        request = decode_artifact(llm.request)
        assert request == {
            "temperature": 0.0, "api_key": "<redacted>",
            "tools": [{"type": "function", "function": {"name": "multiply"}}],
            "messages": [{"role": "user", "content": "what is 2 * 3?"}]}
        assert decode_artifact(llm.response) == {"messages": [{
            "role": "assistant",
            "tool_calls": [{"function": {"name": "multiply", "arguments": '{"a": 2, "b": 3}'}}],
        }]}
        (tool,) = of(run, ToolCall)  # the CHAIN and the AGENT span record nothing
        assert (tool.name, decode_artifact(tool.args), decode_artifact(tool.result)) == (
            "multiply", {"a": 2, "b": 3}, "6")  # text/plain: text
        assert not run.windows


def test_evaluation_results_are_run_level_scores_and_a_label_alone_is_skipped(
        imported: ImportResult) -> None:
    travel = runs_of(imported.files[0])
    assert [[(s.name, s.value, s.channel, s.window) for s in of(r, Score)] for r in travel] == [
        [("relevance", 0.75, "relevance", -1)], [("relevance", 0.25, "relevance", -1)], []]
    assert imported.scores == 2
    assert imported.skipped == 1
    assert ("travel.json: 1 evaluation result(s) without a finite score value, left out "
            "(e.g. 'relevance': label 'pass')") in imported.notes
    assert imported.notes[-1] == NO_REPLAY and "not replayed" in NO_REPLAY


def test_no_secret_reaches_a_trace_file(imported: ImportResult, genai: tuple[Path, Any],
                                        openinference: tuple[Path, Any]) -> None:
    assert SECRET in genai[0].read_text() and TOKEN in genai[0].read_text()  # the spans hold them
    assert TOKEN in openinference[0].read_text()
    for trace in imported.files:
        data = trace_bytes(trace)
        assert SECRET.encode() not in data and SECRET[:14].encode() not in data
        assert TOKEN.encode() not in data


def test_every_imported_trace_verifies_and_no_partial_file_is_left(
        imported: ImportResult) -> None:
    for trace in imported.files:
        assert al.verify(trace).ok, trace
    assert not list(imported.files[0].parent.glob(".*"))


def test_calls_come_depth_first_with_children_by_start_time(tmp_path: Path) -> None:
    """A child that ends first, or is exported first, still comes in start order, and a
    sub-agent's calls come before its later siblings."""
    tracer, exporter = sdk_tracer("order")
    t0 = 1_700_000_000_000_000_000
    root = tracer.start_span("invoke_agent root", start_time=t0,
                             attributes={"gen_ai.operation.name": "invoke_agent"})
    parent = set_span_in_context(root)

    def call(name: str, start: int, end: int, context: Any = parent) -> Any:
        span = tracer.start_span(name, context=context, start_time=t0 + start, attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name})
        span.end(end_time=t0 + end)
        return span

    call("third", 50, 60)
    sub = tracer.start_span("invoke_agent sub", context=parent, start_time=t0 + 20,
                            attributes={"gen_ai.operation.name": "invoke_agent"})
    inner = set_span_in_context(sub)
    call("second-b", 30, 40, inner)
    call("second-a", 25, 45, inner)
    sub.end(end_time=t0 + 46)
    call("first", 10, 15)
    root.end(end_time=t0 + 100)
    path = tmp_path / "order.json"
    path.write_text(json.dumps(otlp_request(exporter.get_finished_spans())))
    (run,) = runs_of(import_spans(path, tmp_path / "out").files[0])
    assert [c.name for c in of(run, ToolCall)] == ["first", "second-a", "second-b", "third"]
    assert run.start.meta["root_span"] == "invoke_agent root"


def test_json_lines_give_the_runs_of_one_document_in_the_order_their_traces_end(
        genai: tuple[Path, Any], imported: ImportResult, tmp_path: Path) -> None:
    """A span a line, the spans in reverse: each trace ends where its first span was."""
    lines = write_json_lines(tmp_path / "lines.json", genai[1][::-1], 1)
    from_lines = import_spans(lines, tmp_path / "a")
    by_task = {r.start.task: r for r in runs_of(imported.files[0])}
    third = next(task for task in by_task if task.startswith("conv") is False)
    runs = runs_of(from_lines.files[0])
    assert [r.start.task for r in runs] == [third, "conv-2", "conv-1"]
    for run in runs:
        assert summary(run) == summary(by_task[run.start.task])


def summary(run: Any) -> list[tuple[Any, ...]]:
    """A run's calls and scores, without their times."""
    return [(r.model, r.input_tokens, r.status, r.request) if type(r) is LLMCall
            else (r.name, r.status, r.args, r.result) if type(r) is ToolCall
            else (r.name, r.value) for r in run.records if type(r) in (LLMCall, ToolCall, Score)]


def test_progress_counts_the_traces(genai: tuple[Path, Any], openinference: tuple[Path, Any],
                                    tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    import_spans([genai[0], openinference[0]], tmp_path,
                 progress=lambda done, total: calls.append((done, total)))
    assert calls == [(n, 5) for n in range(1, 6)]


def test_system_overrides_the_service_name(openinference: tuple[Path, Any],
                                           tmp_path: Path) -> None:
    result = import_spans(openinference[0], tmp_path, system="phoenix/gpt-4.1-nano")
    assert {r.start.system for r in runs_of(result.files[0])} == {"phoenix/gpt-4.1-nano"}
    with pytest.raises(ValueError, match=r"`system` must be a non-empty string or None"):
        import_spans(openinference[0], tmp_path / "x", system=" ")


def test_an_import_inside_a_recorded_run_writes_runs_of_their_own(
        openinference: tuple[Path, Any], tmp_path: Path) -> None:
    with al.record(tmp_path / "outer.zst", task="outer"):
        result = import_spans(openinference[0], tmp_path / "out")
    assert [r.start.parent_run for r in runs_of(result.files[0])] == [None, None]
    assert len(al.read(tmp_path / "outer.zst").runs) == 1


def test_agentlogs_own_otlp_export_imports_back(tmp_path: Path) -> None:
    """Record runs, export them (``agentlog export --format otlp-json``), import them."""
    for seed in (1, 2):
        with al.record(tmp_path / "recorded.zst", system="demo", seed=seed, mode="a"):
            al.llm_call("openai", "gpt-4o-mini", request={"messages": [
                {"role": "user", "content": f"q{seed}"}]}, input_tokens=3 * seed,
                output_tokens=seed, latency_ns=1_000_000)
            al.tool_call("lookup", {"q": seed}, lambda: {"hits": seed})  # noqa: B023
            al.score("accuracy", seed / 4)
    al.flush()
    to_otlp_json(tmp_path / "recorded.zst", tmp_path / "export.json", capture_content=True)
    result = import_spans(tmp_path / "export.json", tmp_path / "back")
    originals = {r.start.run_id: r for r in runs_of(tmp_path / "recorded.zst")}
    assert (result.runs, result.llm_calls, result.tool_calls, result.scores) == (2, 2, 2, 2)
    for run in runs_of(result.files[0]):
        original = originals[run.start.task]  # the conversation id is the run id
        assert run.start.system == "demo"
        assert run.start.meta["convention"] == "gen_ai+openinference"
        ((call,), (was,)) = of(run, LLMCall), of(original, LLMCall)
        assert (call.provider, call.model, call.input_tokens, call.output_tokens,
                call.latency_ns) == ("openai", "gpt-4o-mini", was.input_tokens,
                                     was.output_tokens, was.latency_ns)
        ((tool,), (ran,)) = of(run, ToolCall), of(original, ToolCall)
        assert (tool.name, decode_artifact(tool.args), decode_artifact(tool.result)) == (
            "lookup", decode_artifact(ran.args), decode_artifact(ran.result))
        assert [(s.name, s.value) for s in of(run, Score)] == [
            (s.name, s.value) for s in of(original, Score)]


# ----------------------------------------------------------------------------- bad input


def damaged(genai: tuple[Path, Any], tmp_path: Path) -> Path:
    """The GenAI spans as JSON Lines with spans and lines an importer must survive."""
    request = otlp_request(genai[1], hex_ids=True)
    spans = request["resourceSpans"][0]["scopeSpans"][0]["spans"]
    chat = next(i for i, s in enumerate(spans) if s["name"] == "anthropic.chat")
    spans.append(dict(spans[0]))  # repeated, as an exporter that retried writes it
    spans.append({**spans[1], "traceId": ""})
    spans.append({**spans[1], "traceId": "00" * 16})
    spans.append({**spans[1], "spanId": "xyz"})
    spans.append({**spans[1], "startTimeUnixNano": "soon"})
    spans.append("not a span")
    del spans[chat]["traceId"]
    path = tmp_path / "damaged.json"
    text = json.dumps(request)
    path.write_text(f"{text}\n\n{{\"resourceLogs\": []}}\n{text[:50]}\n")
    return path


def test_malformed_spans_and_lines_are_counted_and_reported_never_fatal(
        genai: tuple[Path, Any], tmp_path: Path) -> None:
    result = import_spans(damaged(genai, tmp_path), tmp_path / "out")
    assert result.runs == 3
    assert result.llm_calls == 6 - 1  # the anthropic.chat span has no trace id
    notes = "\n".join(result.notes)
    for line in ("damaged.json: 3 span(s) with no valid trace id, left out (e.g. span ",
                 "damaged.json: 1 span(s) with no valid span id, left out",
                 "damaged.json: 1 span(s) with a start or end time that is no count of "
                 "nanoseconds, left out",
                 "damaged.json: 1 span(s) with no JSON object, left out (e.g. span None)",
                 "damaged.json: 1 span(s) repeated (a span id seen twice), left out",
                 "damaged.json: 1 line(s) of JSON Lines that are no OTLP trace request, left "
                 "out (e.g. line 3: OTLP logs (resourceLogs))",
                 "damaged.json: 1 line(s) of JSON Lines that are not JSON, left out (e.g. "
                 "line 4: "):
        assert line in notes, notes
    assert result.skipped == 3 + 1 + 1 + 1 + 1 + 1 + 1 + 1  # and the label-only evaluation


HOSTILE_VALUES = [
    {"intValue": str(2 ** 80)},  # no int64
    {"doubleValue": "NaN"}, {"doubleValue": "1e999"},
    {"stringValue": "\ud800"},  # a lone surrogate: JSON allows its escape, text does not
    {"stringValue": '{"n": 123456789012345678901234567890, "s": "\\udfff"}'},
    {"arrayValue": {"values": [{"stringValue": "LLM"}]}},  # a list where a kind should be
    {"kvlistValue": {"values": [{"key": 1}, {"key": "api_key", "value": {"stringValue": TOKEN}}]}},
    {"arrayValue": {"values": "no list"}}, {"boolValue": "yes"}, {},
]


@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_hostile_attribute_values_never_break_an_import(value: dict[str, Any],
                                                        genai: tuple[Path, Any],
                                                        tmp_path: Path) -> None:
    """Every attribute, event attribute and resource attribute of every span set to one
    hostile value: the import finishes (no warning, which fails here), the trace verifies."""
    request = otlp_request(genai[1])
    for resource_spans in request["resourceSpans"]:
        for pair in resource_spans["resource"]["attributes"]:
            pair["value"] = value
        for span in resource_spans["scopeSpans"][0]["spans"]:
            for holder in (span, *span.get("events", ())):
                for pair in holder.get("attributes", ()):
                    if pair["key"] not in ("gen_ai.operation.name", "gen_ai.evaluation.name"):
                        pair["value"] = value
    path = tmp_path / "hostile.json"
    path.write_bytes(json.dumps(request).encode("utf-8", "surrogatepass"))
    result = import_spans(path, tmp_path / "out")
    assert result.runs == 3 and al.verify(result.files[0]).ok
    assert TOKEN.encode() not in trace_bytes(result.files[0])


@pytest.mark.parametrize(("content", "found"), [
    (b"", "found an empty file"),
    (b"  \n\n", "found an empty file"),
    (b"this is not a trace\n", r"found text that is not JSON \(Expecting value: line 1"),
    (b"[1, 2]", r"found a JSON array, not an object \(line 1\)"),
    (b'{"hello": 1}\n', r"found an object with the keys 'hello' \(line 1\)"),
    (b'{\n  "resourceMetrics": []\n}', r"found OTLP metrics \(resourceMetrics\);"),
    (b'{"resourceSpans": {}}', "found \"resourceSpans\" that is not a list"),
])
def test_a_file_that_is_not_otlp_json_is_a_value_error_saying_what_was_expected(
        content: bytes, found: str, tmp_path: Path) -> None:
    (tmp_path / "spans.json").write_bytes(content)
    with pytest.raises(ValueError, match=r"spans\.json: not OTLP JSON: expected an "
                                         r"ExportTraceServiceRequest .*" + found):
        import_spans(tmp_path / "spans.json", tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written for a bad input


def test_bad_paths_and_files_without_spans_say_what_to_do(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (tmp_path / "none.json").write_text('{"resourceSpans": []}')
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("hi")
    with pytest.raises(ValueError, match=r"missing\.json: no such file or folder; pass OTLP "
                                         r"JSON files"):
        import_spans([tmp_path / "missing.json"], out)
    with pytest.raises(ValueError, match=r"none\.json: holds no span with a trace id"):
        import_spans(tmp_path / "none.json", out)
    with pytest.raises(ValueError, match=r"empty: a folder without OTLP JSON files"):
        import_spans(tmp_path / "empty", out)
    with pytest.raises(ValueError, match=r"no OTLP JSON files given"):
        import_spans([], out)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=r"file: is a file; `out` must be a folder"):
        import_spans(tmp_path / "none.json", tmp_path / "file")
    assert not out.exists()


def test_an_existing_trace_is_replaced_only_with_overwrite(openinference: tuple[Path, Any],
                                                           tmp_path: Path) -> None:
    (trace,) = import_spans(openinference[0], tmp_path).files
    before = trace.read_bytes()
    with pytest.raises(al.TracePathError, match=r"exists; an import never replaces a trace "
                                                r"silently: pass overwrite=True \(agentlog "
                                                r"import otlp --overwrite\)"):
        import_spans(openinference[0], tmp_path)
    assert trace.read_bytes() == before
    again = import_spans(openinference[0], tmp_path, overwrite=True)
    assert again.files == (trace,) and len(al.read(trace).runs) == 2  # replaced, not appended


def test_a_failed_import_leaves_no_trace_and_no_partial_file(
        openinference: tuple[Path, Any], tmp_path: Path) -> None:
    def stop(done: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        import_spans(openinference[0], tmp_path, progress=stop)
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------- the CLI


def test_the_cli_imports_and_prints_what_it_wrote(genai: tuple[Path, Any],
                                                  openinference: tuple[Path, Any],
                                                  tmp_path: Path) -> None:
    out = tmp_path / "traces"
    result = invoke("import", "otlp", genai[0], openinference[0], "--out", out)
    assert result.exit_code == 0, result.output
    assert "2 trace(s) written to" in result.stdout
    assert "5 runs (one per trace id, 19 spans), 8 model calls, 4 tool calls, 2 scores" in (
        result.stdout)
    assert "! 1 span(s), line(s) or evaluation(s) left out" in result.stdout
    assert "not replayed" in result.stdout
    assert sorted(p.name for p in out.glob("*.zst")) == ["phoenix.zst", "travel.zst"]
    again = invoke("import", "otlp", openinference[0], "--out", out, "--overwrite",
                   "--system", "oi")
    assert again.exit_code == 0, again.output
    assert {r.start.system for r in runs_of(out / "phoenix.zst")} == {"oi"}


def test_the_cli_refuses_bad_input_with_exit_2(openinference: tuple[Path, Any],
                                               tmp_path: Path) -> None:
    missing = invoke("import", "otlp", tmp_path / "nope.json", "--out", tmp_path / "o")
    assert missing.exit_code == 2 and "nope.json: no such file or folder" in missing.stderr
    (tmp_path / "junk.json").write_text("junk")
    junk = invoke("import", "otlp", tmp_path / "junk.json", "--out", tmp_path / "o")
    assert junk.exit_code == 2 and "junk.json: not OTLP JSON: expected" in junk.stderr
    assert invoke("import", "otlp", openinference[0], "--out", tmp_path / "o").exit_code == 0
    again = invoke("import", "otlp", openinference[0], "--out", tmp_path / "o")
    assert again.exit_code == 2
    assert "pass overwrite=True (agentlog import otlp --overwrite)" in again.stderr
    assert "Traceback" not in again.output + junk.output + missing.output


def test_the_import_groups_help_names_otlp_with_its_docstring_summary() -> None:
    module, attribute, line = _app.IMPORT_COMMANDS["otlp"]
    command = _app.load_command("otlp", module, attribute)
    assert " ".join((command.help or "").split("\n\n")[0].split()).startswith(line)
    assert "otlp" in invoke("import", "--help").stdout


def test_reliability_runs_on_the_imported_traces(imported: ImportResult) -> None:
    result = invoke("estimate", "reliability", imported.files[0], "--score", "relevance",
                    "--by", "task", "--json")
    assert result.exit_code == 0, result.output
    groups = {g["labels"]["task"]: g for g in json.loads(result.stdout)["groups"]}
    assert {task: g["mean"] for task, g in groups.items()} == {"conv-1": 0.75, "conv-2": 0.25}


def test_the_modules_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = doctest.testmod(agentlog.adapters.otlp, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
    assert not list(tmp_path.iterdir())


# ----------------------------------------------------------------------------- memory


def many_traces(path: Path, n: int) -> Path:
    """``n`` traces of fat model spans, a trace a line, ids as the SDK draws them."""
    tracer, exporter = sdk_tracer("bulk")
    text = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "x" * 12000}]}])
    with path.open("w") as f:
        for i in range(n):
            with tracer.start_as_current_span("invoke_agent bulk"):
                for _ in range(3):
                    with tracer.start_as_current_span("chat m") as chat:
                        chat.set_attributes({"gen_ai.operation.name": "chat",
                                             "gen_ai.request.model": "m",
                                             "gen_ai.input.messages": text,
                                             "gen_ai.usage.input_tokens": i})
            f.write(json.dumps(otlp_request(exporter.get_finished_spans(), hex_ids=True)))
            f.write("\n")
            exporter.clear()
    return path


def streaming_peak(path: Path, out: Path) -> tuple[int, ImportResult]:
    def progress(done: int, total: int) -> None:
        if done == 1:  # from the first run on: the scan's index is the same for both
            tracemalloc.reset_peak()

    gc.collect()
    tracemalloc.start()
    try:
        result = import_spans(path, out, progress=progress)
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


@pytest.mark.slow
def test_json_lines_are_imported_in_memory_that_does_not_grow_with_the_file(
        tmp_path: Path) -> None:
    """A run is written once its trace's last line is read: 4x the traces do not take ~4x
    the memory, and importing holds far less than the file's bytes.

    Both files are past what an import lets wait for the writer (``QUEUE_BYTES`` of
    encoded records, however fast the machine): 100 such traces stay below it. The large
    file is ~20x that bound, so a quarter of it is far above the bound whatever the timing.
    """
    small = many_traces(tmp_path / "small.jsonl", 500)
    large = many_traces(tmp_path / "large.jsonl", 2000)
    import_spans(small, tmp_path / "warm-up")  # one-time costs (lazy imports) first
    peak_small, result_small = streaming_peak(small, tmp_path / "out-small")
    peak_large, result_large = streaming_peak(large, tmp_path / "out-large")
    assert (result_small.runs, result_large.runs) == (500, 2000)
    held = len(large.read_bytes())
    assert peak_large < 2 * peak_small, (peak_small, peak_large)
    assert peak_large < held / 4, (peak_large, held)

