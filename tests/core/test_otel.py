"""OpenTelemetry live spans: run, window, tool and model spans, summaries not vectors."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pytest

import agentlog as al
from agentlog._recorder import log_llm_call
from agentlog._spans import tracer as _otel
from agentlog.testing import capture_spans


@al.window("retrieval")
def retrieve(q: str) -> int:
    i = al.select(np.full(1000, 1e-3), candidates=[f"d{j}" for j in range(1000)], name="doc")
    al.proceed(0.5, name="stop")
    return i


@al.window("outer")
def outer(q: str) -> int:
    return retrieve(q)


def test_each_window_is_a_span_with_hashes_and_resources(trace_path: Path) -> None:
    with capture_spans() as spans, al.record(trace_path, seed=3) as run:
        outer("q")
    by_name = {s.name: s for s in spans.spans}
    inner, top = by_name["agentlog.window.retrieval"], by_name["agentlog.window.outer"]
    assert inner.parent is not None and inner.parent.span_id == top.context.span_id
    attrs = dict(inner.attributes or {})
    assert attrs["agentlog.window"] == "retrieval"
    assert attrs["agentlog.run_id"] == run.run_id
    assert len(attrs["agentlog.entry_hash"]) == 64
    assert "agentlog.receipt" not in attrs  # chained by the writer after the span ended
    assert attrs["agentlog.selections"] == 1
    trace = al.read(trace_path)
    exits = {w.name: w for w in trace.windows()}
    assert attrs["agentlog.exit_hash"] == exits["retrieval"].exit.exit_hash.hex()


def test_selections_are_span_events_with_a_summary_never_the_vector(trace_path: Path) -> None:
    with capture_spans() as spans, al.record(trace_path, seed=3):
        outer("q")
    span = spans.by_name("agentlog.window.retrieval")[0]
    select_event, proceed_event = span.events
    attrs = dict(select_event.attributes or {})
    assert attrs["agentlog.n_candidates"] == 1000
    assert abs(attrs["agentlog.entropy"] - np.log(1000)) < 1e-9
    assert attrs["agentlog.chosen_p"] == 1e-3 and len(attrs["agentlog.probs_sha256"]) == 64
    assert all(not isinstance(v, tuple | list) for v in attrs.values())
    assert proceed_event.name == "agentlog.proceed"


@pytest.mark.parametrize("zeros", [0, 3])
def test_the_event_entropy_is_the_vectors_with_or_without_zeros_and_hints(zeros: int) -> None:
    rng = np.random.default_rng(zeros)
    p = rng.dirichlet(np.ones(40))
    p[:zeros] = 0.0
    p /= p.sum()
    positive = p[p > 0]
    truth = float(-sum(x * np.log(x) for x in positive.tolist()))  # H = -sum p log p, p > 0
    strided = np.zeros(80)
    strided[::2] = p
    given = [(p, {}), (p, {"n_zero": zeros}), (strided[::2], {"n_zero": zeros})]
    values = {_otel.selection_event_attributes("doc", 0, "model", v, 5, p.tobytes(),
                                               **hints)["agentlog.entropy"]
              for v, hints in given}
    assert len(values) == 1  # the live path (hints) and export (none) agree bit for bit
    assert abs(values.pop() - truth) < 1e-12


def test_a_failed_window_span_has_error_status_and_the_exception(trace_path: Path) -> None:
    @al.window("boom")
    def boom() -> None:
        raise RuntimeError("x")

    with capture_spans() as spans, al.record(trace_path, seed=1), contextlib.suppress(
        RuntimeError
    ):
        boom()
    (span,) = spans.by_name("agentlog.window.boom")
    assert span.status.status_code.name == "ERROR"
    assert span.events[0].name == "exception"


def test_llm_calls_are_client_spans_under_their_window_per_the_gen_ai_conventions(
    trace_path: Path,
) -> None:
    @al.window("ask")
    def ask() -> None:
        log_llm_call(provider="openai", model="gpt-x", request={"messages": []}, response={},
                     input_tokens=12, output_tokens=3)

    with capture_spans() as spans, al.record(trace_path, seed=1):
        ask()
    (window,) = spans.by_name("agentlog.window.ask")
    # Usage is counted once in a backend: on the model span, not again on the window.
    assert window.attributes["agentlog.input_tokens"] == 12
    assert "gen_ai.usage.input_tokens" not in window.attributes
    assert window.attributes["openinference.span.kind"] == "CHAIN"
    assert window.attributes["agentlog.llm_calls"] == 1
    assert window.events == ()  # the model call is a span of its own, not an event
    (model,) = spans.by_name("chat gpt-x")
    assert model.kind.name == "CLIENT"
    assert model.parent is not None and model.parent.span_id == window.context.span_id
    attrs = dict(model.attributes or {})
    assert attrs["gen_ai.operation.name"] == "chat" and attrs["gen_ai.request.model"] == "gpt-x"
    assert attrs["gen_ai.provider.name"] == "openai" and "gen_ai.system" not in attrs


def test_a_run_is_the_root_span_of_its_windows_and_nested_runs_nest(tmp_path: Path) -> None:
    @al.window("inner_task")
    def inner_task() -> int:
        with al.record(tmp_path / "inner.zst", system="helper", seed=2):
            return retrieve("x")

    with capture_spans() as spans, al.record(tmp_path / "outer.zst", system="boss",
                                             seed=1) as run:
        outer("q")
        inner_task()
    (root,) = spans.by_name("invoke_agent boss")
    assert root.parent is None and root.kind.name == "INTERNAL"  # an in-process agent
    attributes = dict(root.attributes or {})
    assert attributes["gen_ai.conversation.id"] == run.run_id
    # Required on invoke_agent by the GenAI conventions.
    assert attributes["gen_ai.provider.name"] == "agentlog"
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert {s.context.trace_id for s in spans.spans} == {root.context.trace_id}
    (top,) = spans.by_name("agentlog.window.outer")
    assert top.parent is not None and top.parent.span_id == root.context.span_id
    (helper,) = spans.by_name("invoke_agent helper")
    (task,) = spans.by_name("agentlog.window.inner_task")
    assert helper.parent is not None and helper.parent.span_id == task.context.span_id


def test_tool_calls_are_spans_and_scores_are_evaluation_events(trace_path: Path) -> None:
    @al.tool("search")
    def search(q: str) -> str:
        return q

    @al.window("look")
    def look() -> None:
        search("x")
        al.score("f1", 0.5, channel="quote", wave=2)

    with capture_spans() as spans, al.record(trace_path, seed=1):
        look()
    (window,) = spans.by_name("agentlog.window.look")
    (tool,) = spans.by_name("execute_tool search")
    assert tool.parent is not None and tool.parent.span_id == window.context.span_id
    assert dict(tool.attributes or {})["gen_ai.tool.name"] == "search"
    (event,) = window.events
    assert event.name == "gen_ai.evaluation.result"
    assert dict(event.attributes or {}) == {
        "gen_ai.evaluation.name": "f1", "gen_ai.evaluation.score.value": 0.5,
        "agentlog.channel": "quote", "agentlog.wave": 2}


def test_attribute_names_are_the_semantic_conventions_gen_ai_names(trace_path: Path) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # moved upstream, names unchanged
        from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as g
    known = {getattr(g, n) for n in dir(g) if n.startswith("GEN_AI_")}
    assert {g.GEN_AI_PROVIDER_NAME, g.GEN_AI_TOOL_NAME, g.GEN_AI_EVALUATION_NAME,
            g.GEN_AI_EVALUATION_SCORE_VALUE, g.GEN_AI_CONVERSATION_ID} <= known
    from agentlog.export import to_spans

    @al.tool("search")
    def search(q: str) -> str:
        return q

    @al.window("ask")
    def ask() -> None:
        search("x")
        al.score("f1", 0.5)
        log_llm_call(provider="openai", model="gpt-x",
                     request={"messages": [], "temperature": 0.1},
                     response={"id": "r", "model": "gpt-x", "choices": [
                         {"finish_reason": "stop"}]}, input_tokens=1, output_tokens=1)

    with al.record(trace_path, system="s", seed=1):
        ask()
    used: set[str] = set()
    for span in to_spans(trace_path):
        used |= set(span.attributes or {})
        for e in span.events:
            used |= set(e.attributes or {})
    gen_ai = {name for name in used if name.startswith("gen_ai.")}
    assert len(gen_ai) > 12
    assert gen_ai <= known, gen_ai - known


def test_capture_spans_is_isolated_between_threads(trace_path: Path) -> None:
    import threading

    barrier = threading.Barrier(2, timeout=10)
    seen: dict[str, list[str]] = {}

    def worker(system: str, path: Path) -> None:
        with capture_spans() as spans:
            barrier.wait()  # both overrides are in place before either run starts
            with al.record(path, system=system, seed=1):
                outer("q")
            barrier.wait()
            seen[system] = sorted({s.name for s in spans.spans if s.name.startswith("inv")})

    threads = [threading.Thread(target=worker, args=(n, trace_path.with_name(f"{n}.zst")))
               for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert seen == {"a": ["invoke_agent a"], "b": ["invoke_agent b"]}
    assert _otel.tracer() is None  # and nothing leaked into this thread


def test_without_an_sdk_no_tracer_is_used_at_all(trace_path: Path) -> None:
    assert _otel.tracer() is None  # the API's proxy provider only
    with al.record(trace_path, seed=1) as run:
        outer("q")
    assert run.tracer is None


def test_the_sdks_record_exception_is_never_called_and_the_event_is_scrubbed(
    trace_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """span.record_exception copies str(exc) unscrubbed: agentlog writes its own event."""
    from opentelemetry.sdk.trace import Span

    calls: list[BaseException] = []
    monkeypatch.setattr(Span, "record_exception",
                        lambda self, exc, *a, **k: calls.append(exc))

    @al.window("call")
    def call(api_key: str) -> None:
        raise PermissionError(f"401: Incorrect API key provided: {api_key}")

    with capture_spans() as spans, al.record(trace_path), pytest.raises(PermissionError):
        call("Zq-otel-canary-0042")
    assert calls == []
    (span,) = spans.by_name("agentlog.window.call")
    (event,) = [e for e in span.events if e.name == "exception"]
    attributes = dict(event.attributes or {})
    assert attributes["exception.type"] == "PermissionError"
    assert attributes["exception.message"] == "401: Incorrect API key provided: <redacted>"
    assert "Zq-otel-canary-0042" not in repr(attributes)


def test_one_tracer_per_provider_is_kept_and_a_dropped_provider_is_not_held() -> None:
    # get_tracer costs ~15 µs in the SDK; every record() asks for one.
    import gc
    import weakref

    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider(shutdown_on_exit=False)  # no atexit hook holding it
    previous = _otel.set_provider_override(provider)
    try:
        first = _otel.tracer()
        assert first is not None and _otel.tracer() is first
    finally:
        _otel.set_provider_override(previous)
    ref = weakref.ref(provider)
    del provider, first
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("n", [1, 10, 200, 256, 257, 1000])
def test_a_live_selection_events_entropy_is_the_exported_ones_bit_for_bit(
        n: int, trace_path: Path) -> None:
    """select's event and export compute the entropy by one function (``vector_entropy``),
    from the live vector and from its stored copy. With and without zeros, at every size,
    the two agree exactly."""
    from agentlog.export import to_spans

    rng = np.random.default_rng(n)
    vectors = [rng.dirichlet(np.ones(n))]
    if n > 1:
        with_zeros = rng.dirichlet(np.ones(n))
        with_zeros[: n // 3 + 1] = 0.0
        vectors.append(with_zeros / with_zeros.sum())

    @al.window("pick")
    def pick(q: str) -> list[int]:
        return [al.select(v, candidates=[f"c{i}" for i in range(n)], name="c")
                for v in vectors]

    with capture_spans() as spans, al.record(trace_path, seed=5):
        pick("q")
    live = [dict(e.attributes or {}) for e in spans.by_name("agentlog.window.pick")[0].events]
    exported = [dict(e.attributes or {}) for s in to_spans(al.read(trace_path))
                if s.name == "agentlog.window.pick" for e in s.events]
    assert [a["agentlog.entropy"] for a in live] == [a["agentlog.entropy"] for a in exported]
    for attrs, v in zip(live, vectors, strict=True):
        positive = v[v > 0]
        assert abs(attrs["agentlog.entropy"] - float(-(positive * np.log(positive)).sum())) < 1e-12


def test_a_strided_vectors_event_entropy_is_its_stored_copys(trace_path: Path) -> None:
    """Before: a non-contiguous vector took the C library's log (numpy's SIMD log serves
    contiguous arrays) and its event's entropy differed from the exported one in the last
    bit. It is computed as export computes it, over the stored, contiguous copy."""
    from agentlog.export import to_spans

    wide = np.zeros(40)
    wide[::2] = np.random.default_rng(2).dirichlet(np.ones(20))

    @al.window("pick")
    def pick(q: str) -> int:
        return al.select(wide[::2], name="c")

    with capture_spans() as spans, al.record(trace_path, seed=5):
        pick("q")
    live = spans.by_name("agentlog.window.pick")[0].events[0].attributes["agentlog.entropy"]
    exported = [e.attributes["agentlog.entropy"] for s in to_spans(al.read(trace_path))
                if s.name == "agentlog.window.pick" for e in s.events]
    assert exported == [live]


def _model_spans(tmp_path: Path, current: dict[str, object] | None,
                 span: bool | str = "auto") -> list[str]:
    """The scopes of the model-call spans of one ``al.llm_call`` made while another
    instrumentation's span (its attributes ``current``) is the current one."""
    with capture_spans() as captured, al.record(tmp_path / "t.zst", seed=1, mode="w"):
        context = (captured.provider.get_tracer("openinference.instrumentation.fw")
                   .start_as_current_span("framework call", attributes=current)
                   if current is not None else contextlib.nullcontext())
        with context:
            al.llm_call("openai", "m", request={"messages": []}, input_tokens=3,
                        span=span)  # type: ignore[arg-type]
    assert len(al.read(tmp_path / "t.zst").llm_calls()) == 1  # recorded either way
    return sorted(s.instrumentation_scope.name for s in captured.spans
                  if s.instrumentation_scope is not None
                  and (s.attributes or {}).get("gen_ai.request.model") == "m")


@pytest.mark.parametrize(("current", "span", "expected"), [
    (None, "auto", ["agentlog"]),
    ({"openinference.span.kind": "LLM"}, "auto", []),          # the framework's span shows it
    ({"gen_ai.operation.name": "chat", "gen_ai.request.model": "x"}, "auto", []),
    ({"openinference.span.kind": "CHAIN"}, "auto", ["agentlog"]),  # not a model call's span
    ({"openinference.span.kind": "LLM"}, True, ["agentlog"]),  # forced: both
    (None, False, []),
])
def test_a_model_call_another_instrumentation_traces_gets_no_second_span(
        tmp_path: Path, current: dict[str, object] | None, span: bool | str,
        expected: list[str]) -> None:
    assert _model_spans(tmp_path, current, span) == expected
