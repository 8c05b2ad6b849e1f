"""The one span builder: names, kinds, attributes and events, computed from stored records.

Both paths use it: the live path (``_live``) hands it the records it has just written, and
``agentlog.export`` hands it the records read back from a trace file, so a stored trace
exports exactly the spans a live run produced. It never sees a live window object.

Spans follow the OpenTelemetry GenAI semantic conventions: a run is an agent span
(``invoke_agent {system}``), a tool call ``execute_tool {name}``, a model call
``{operation} {model}`` (CLIENT, with ``gen_ai.provider.name``, not the deprecated
``gen_ai.system``), a score the event ``gen_ai.evaluation.result`` on the scored
window's span. Probability vectors never go into a span (hash and summary only), and
neither do secrets: meta keys that name credentials are dropped, model requests
contribute only their scalar parameters.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from agentlog._encoding import decode, is_secret_key
from agentlog._records import (
    EXIT_CLOSED,
    Continuation,
    LLMCall,
    RunEnd,
    RunStart,
    Score,
    Selection,
    ToolCall,
    WindowExit,
)
from agentlog._spans.messages import input_messages, output_messages
from agentlog._spans.tracer import continuation_event_attributes, selection_event_attributes

__all__ = [
    "GENAI_ATTRIBUTES",
    "META_VALUE_MAX",
    "continuation_event",
    "model_span",
    "operation_of",
    "response_meta",
    "run_end_attributes",
    "run_span",
    "score_event",
    "selection_event",
    "span_id",
    "tool_call_id",
    "tool_span",
    "trace_id",
    "window_attributes",
    "window_span_name",
]

META_VALUE_MAX = 256  # characters of a string meta value kept on a run span
SCORE_EVENT = "gen_ai.evaluation.result"

# OpenTelemetry GenAI semantic-convention attribute names. The semantic-conventions package
# deprecated its gen_ai module (moved to a separate project) with the names unchanged, so we
# keep our own copies; a test compares them with the package's.
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P = "gen_ai.request.top_p"
GEN_AI_REQUEST_TOP_K = "gen_ai.request.top_k"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_SEED = "gen_ai.request.seed"
GEN_AI_REQUEST_FREQUENCY_PENALTY = "gen_ai.request.frequency_penalty"
GEN_AI_REQUEST_PRESENCE_PENALTY = "gen_ai.request.presence_penalty"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"
AGENTLOG_CACHE = "agentlog.cache"
AGENTLOG_CACHE_KEY = "agentlog.cache_key"

GENAI_ATTRIBUTES: dict[str, str] = {
    name: value for name, value in globals().items()
    if name.startswith("GEN_AI_") and isinstance(value, str)
}
"""Our GenAI attribute constants by their semantic-conventions name (tests compare them)."""

# Request fields that map onto gen_ai.request.* (first present name wins).
_REQUEST_PARAMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (GEN_AI_REQUEST_TEMPERATURE, ("temperature",)),
    (GEN_AI_REQUEST_TOP_P, ("top_p",)),
    (GEN_AI_REQUEST_TOP_K, ("top_k",)),
    (GEN_AI_REQUEST_MAX_TOKENS, ("max_tokens", "max_completion_tokens", "max_output_tokens")),
    (GEN_AI_REQUEST_SEED, ("seed",)),
    (GEN_AI_REQUEST_FREQUENCY_PENALTY, ("frequency_penalty",)),
    (GEN_AI_REQUEST_PRESENCE_PENALTY, ("presence_penalty",)),
)


def _hash64(*parts: str) -> bytes:
    return hashlib.sha256("\0".join(parts).encode()).digest()


def trace_id(run_id: str, variant: str = "") -> int:
    """The deterministic 128-bit trace id of a run (never 0): exporting twice dedupes.

    ``variant`` names what else an export puts in its spans (content, resource): the
    default ``""`` gives the ids of the run's live spans; another variant gives a copy of
    its own, which a backend keeps beside the first instead of dropping it as a duplicate.
    """
    parts = ("agentlog-trace", run_id) if not variant else ("agentlog-trace", run_id, variant)
    return int.from_bytes(_hash64(*parts)[:16], "big") or 1


def span_id(run_id: str, key: str, variant: str = "") -> int:
    """The deterministic 64-bit span id of ``key`` ("run", "w3", a ``call_key``) in a run
    (``variant``: as for ``trace_id``)."""
    parts = ("agentlog-span", run_id, key) if not variant else (
        "agentlog-span", run_id, key, variant)
    return int.from_bytes(_hash64(*parts)[:8], "big") or 1


def id_variant(*, capture_content: bool, service_name: str | None,
               resource_attributes: Mapping[str, Any] | None) -> str:
    """The id ``variant`` of an export with these options: ``""`` for the defaults (the
    ids live spans have), else a canonical text of the options."""
    if not capture_content and service_name is None and not resource_attributes:
        return ""
    return json.dumps({"content": capture_content, "service": service_name,
                       "resource": {str(k): str(v) for k, v in
                                    sorted((resource_attributes or {}).items())}},
                      sort_keys=True)


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x


def _safe_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in meta.items():
        if not isinstance(key, str) or is_secret_key(key):
            continue
        if isinstance(value, bool | int | float):
            if isinstance(value, float) and not math.isfinite(value):
                continue
            out[f"agentlog.meta.{key}"] = value
        elif isinstance(value, str):
            out[f"agentlog.meta.{key}"] = value[:META_VALUE_MAX]
    return out


def run_span(start: RunStart) -> tuple[str, dict[str, Any]]:
    """The run's root span: ``invoke_agent {system}`` (INTERNAL: an in-process agent)."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        # Required on invoke_agent: the agent runs in process, recorded by agentlog; the
        # model providers it calls are on the model spans.
        "gen_ai.provider.name": "agentlog",
        "openinference.span.kind": "AGENT",
        "gen_ai.agent.name": start.system,
        "gen_ai.conversation.id": start.run_id,
        "agentlog.run_id": start.run_id,
        "agentlog.seed": start.seed,
    }
    if start.task is not None:
        attributes["agentlog.task"] = start.task
    if start.parent_run is not None:
        attributes["agentlog.parent_run_id"] = start.parent_run
    attributes.update(_safe_meta(start.meta))
    return f"invoke_agent {start.system}", attributes


def run_end_attributes(end: RunEnd) -> dict[str, Any]:
    """Set at the run's end: only what the recorder knows then (the writer fills counts)."""
    if end.status == 0:
        return {}
    attributes: dict[str, Any] = {"agentlog.status": "failed"}
    if end.error_type is not None:
        attributes["error.type"] = end.error_type
    return attributes


def window_span_name(name: str) -> str:
    return f"agentlog.window.{name}"


def window_attributes(run_id: str, entry_hash: bytes, exit: WindowExit) -> dict[str, Any]:
    """A window span's attributes, all known at its exit (set in one call: cheaper).

    ``agentlog.receipt`` is read from the record, never recomputed: the writer thread
    chains it (the one place it is computed), after a live span has ended, so only a span
    exported from the stored trace carries it (the one attribute a live span lacks).
    """
    attributes: dict[str, Any] = {
        # A backend that draws OpenInference kinds shows a window as a step of a chain.
        "openinference.span.kind": "CHAIN",
        "agentlog.window": exit.name,
        "agentlog.run_id": run_id,
        "agentlog.entry_hash": entry_hash.hex(),
        "agentlog.exit_hash": exit.exit_hash.hex(),
    }
    if exit.receipt:
        attributes["agentlog.receipt"] = exit.receipt.hex()
    if exit.status == EXIT_CLOSED:
        attributes["agentlog.status"] = "closed"
    # Zero counters are left out (an absent counter reads as 0); wall time is the span's
    # own duration.
    if exit.tool_calls or exit.llm_calls or exit.input_tokens or exit.output_tokens or (
        exit.selections
    ):
        for key, value in (
            ("agentlog.tool_calls", exit.tool_calls),
            ("agentlog.llm_calls", exit.llm_calls),
            # Not gen_ai.usage.*: a backend that sums tokens over spans would count the
            # model spans' usage again in every window around them.
            ("agentlog.input_tokens", exit.input_tokens),
            ("agentlog.output_tokens", exit.output_tokens),
            ("agentlog.selections", exit.selections),
        ):
            if value:
                attributes[key] = value
    if exit.cost is not None:
        attributes["agentlog.cost"] = exit.cost
    return attributes


_TOOL_STATUS = {1: "failed", 2: "refused"}


def call_key(call: ToolCall | LLMCall) -> str:
    """The ``span_id`` key of a tool or model call, read from its record alone (window,
    name or provider and model, end time, duration): a live span and every export of the
    stored trace get the same span id, whatever thread recorded the call."""
    if isinstance(call, ToolCall):
        return f"t{call.window}\0{call.name}\0{call.t_ns}\0{call.wall_ns}"
    return f"m{call.window}\0{call.provider}\0{call.model}\0{call.t_ns}\0{call.latency_ns}"


def tool_call_id(run_id: str, call: ToolCall) -> str:
    """The deterministic ``gen_ai.tool.call.id`` of a tool call, from its stored record.

    A hash of the run id and the record's window, name, end time and duration: the same
    for the live span and for every export of the trace, distinct for distinct calls.
    """
    return hashlib.sha256(
        f"agentlog-tool\0{run_id}\0{call.window}\0{call.name}\0{call.t_ns}\0{call.wall_ns}"
        .encode()).hexdigest()[:32]


def tool_span(run_id: str, call: ToolCall, *, capture_content: bool = False
              ) -> tuple[str, dict[str, Any]]:
    """``execute_tool {name}`` (INTERNAL); arguments and result by hash only, unless
    ``capture_content`` (opt-in) adds them as ``gen_ai.tool.call.arguments`` /
    ``.result``: the stored, scrubbed canonical values as JSON, where the record holds
    them inline (an artifact stored as a Blob is left out, live and exported alike)."""
    attributes: dict[str, Any] = {
        GEN_AI_OPERATION_NAME: "execute_tool",
        GEN_AI_TOOL_NAME: call.name,
        GEN_AI_TOOL_CALL_ID: tool_call_id(run_id, call),
        "agentlog.run_id": run_id,
    }
    if call.args_hash is not None:
        attributes["agentlog.args_hash"] = call.args_hash.hex()
    if call.result_hash is not None:
        attributes["agentlog.result_hash"] = call.result_hash.hex()
    if call.status in _TOOL_STATUS:
        attributes["agentlog.status"] = _TOOL_STATUS[call.status]
        if call.error_type is not None:
            attributes[ERROR_TYPE] = call.error_type
    if capture_content:
        if call.args is not None:
            attributes[GEN_AI_TOOL_CALL_ARGUMENTS] = _json_text(call.args)
        if call.result is not None:
            attributes[GEN_AI_TOOL_CALL_RESULT] = _json_text(call.result)
    return f"execute_tool {call.name}", attributes


def operation_of(request: Any) -> str:
    """The GenAI operation a request's fields suggest (``chat`` unless it says otherwise)."""
    if isinstance(request, Mapping):
        if "messages" in request:
            return "chat"
        if "prompt" in request:
            return "text_completion"
        if "input" in request:
            return "embeddings"
    return "chat"


def _parameters(request: Any) -> Mapping[str, Any]:
    """Where a stored request keeps its sampling parameters.

    At the top level (a request passed to ``al.llm_call``), under ``request`` (an
    adapter's canonical request: provider, version, draw, channel, request), and under
    ``sampling_params`` (vLLM); the innermost wins.
    """
    if not isinstance(request, Mapping):
        return {}
    params: Mapping[str, Any] = request
    inner = params.get("request")
    if isinstance(inner, Mapping) and "provider" in params and "version" in params:
        params = inner
    sampling = params.get("sampling_params")
    if isinstance(sampling, Mapping):
        return {**params, **sampling}
    return params


def _content(data: bytes, messages: Any) -> str:
    """Stored content as the GenAI message list where its shape is known (``messages``
    reads it), else as the stored JSON."""
    try:
        value = decode(data)
        listed = messages(value)
        return json.dumps(value if listed is None else listed, sort_keys=True, default=str)
    except Exception:  # a damaged artifact: no content, never an exception in the host
        return ""


def _json_text(data: bytes) -> str:
    try:
        return json.dumps(decode(data), sort_keys=True, default=str)
    except Exception:  # a damaged artifact: no content, never an exception in the host
        return ""


def model_span(run_id: str, call: LLMCall, *, capture_content: bool = False
               ) -> tuple[str, dict[str, Any]]:
    """``{operation} {model}`` (CLIENT, INTERNAL when ``call.in_process``) with the current
    GenAI attributes.

    Only scalar request parameters and response identifiers are copied: no prompt, no
    completion, no header (the stored request is already scrubbed; this adds a second
    guard by never copying a mapping or a string other than the ids below), unless
    ``capture_content`` asks for the stored request and response as
    ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (opt-in, live and exported).
    The operation and the response identifiers come from the record; a record written
    before they were stored has them inferred from its request and response.
    """
    try:
        request = decode(call.request)
    except Exception:  # a damaged artifact still exports its span, without parameters
        request = None
    operation = call.operation or operation_of(_parameters(request))
    attributes: dict[str, Any] = {
        GEN_AI_OPERATION_NAME: operation,
        GEN_AI_PROVIDER_NAME: call.provider.split(".", 1)[0],
        GEN_AI_REQUEST_MODEL: call.model,
        "agentlog.run_id": run_id,
    }
    params = _parameters(request)
    for attr, names in _REQUEST_PARAMS:
        for key in names:
            value = params.get(key)
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if _finite(float(value)) is not None:
                attributes[attr] = value
            break
    response_model, response_id = call.response_model, call.response_id
    reasons = list(call.finish_reasons or ())
    if call.operation is None:  # an older record: read what the response says
        response_model, response_id, reasons = _response_meta(call.response)
    if response_model is not None:
        attributes[GEN_AI_RESPONSE_MODEL] = response_model[:META_VALUE_MAX]
    if response_id is not None:
        attributes[GEN_AI_RESPONSE_ID] = response_id[:META_VALUE_MAX]
    if reasons:
        attributes[GEN_AI_RESPONSE_FINISH_REASONS] = tuple(reasons)
    if call.input_tokens:
        attributes[GEN_AI_USAGE_INPUT_TOKENS] = call.input_tokens
    if call.output_tokens:
        attributes[GEN_AI_USAGE_OUTPUT_TOKENS] = call.output_tokens
    if call.cost is not None and _finite(call.cost) is not None:
        attributes["agentlog.cost"] = call.cost
    if call.cache is not None:
        attributes[AGENTLOG_CACHE] = call.cache
    if call.cache_key is not None:
        attributes[AGENTLOG_CACHE_KEY] = call.cache_key.hex()
    if call.fingerprint is not None:
        attributes["agentlog.fingerprint"] = call.fingerprint[:META_VALUE_MAX]
    if call.status != 0:
        attributes[ERROR_TYPE] = call.error_type or "error"
    if capture_content:
        attributes[GEN_AI_INPUT_MESSAGES] = _content(call.request, input_messages)
        attributes[GEN_AI_OUTPUT_MESSAGES] = _content(call.response, output_messages)
    return f"{operation} {call.model}", attributes


def _response_meta(data: bytes) -> tuple[str | None, str | None, list[str]]:
    try:
        response = decode(data)
    except Exception:
        return None, None, []
    return response_meta(response)


def response_meta(response: Any) -> tuple[str | None, str | None, list[str]]:
    """``(model, id, finish reasons)`` of an OpenAI-shaped response body, where present."""
    if not isinstance(response, Mapping):
        return None, None, []
    model = response.get("model")
    rid = response.get("id")
    choices = response.get("choices")
    reasons = [
        c["finish_reason"] for c in choices
        if isinstance(c, Mapping) and isinstance(c.get("finish_reason"), str)
    ] if isinstance(choices, list) else []
    return (model if isinstance(model, str) else None, rid if isinstance(rid, str) else None,
            reasons)


def score_event(score: Score) -> tuple[str, dict[str, Any]]:
    """``gen_ai.evaluation.result`` for the scored window's (or run's) span."""
    attributes: dict[str, Any] = {"gen_ai.evaluation.name": score.name}
    value = _finite(score.value)
    if value is not None:
        attributes["gen_ai.evaluation.score.value"] = value
    else:
        attributes["gen_ai.evaluation.score.label"] = repr(score.value)
    for key, extra in (
        ("agentlog.channel", score.channel),
        ("agentlog.layout", score.layout),
        ("agentlog.wave", score.wave),
        ("agentlog.transition", score.transition),
    ):
        if extra is not None:
            attributes[key] = extra
    if score.state_hash is not None:
        attributes["agentlog.state_hash"] = score.state_hash.hex()
    return SCORE_EVENT, attributes


def selection_event(sel: Selection, chosen_id: Any) -> tuple[str, dict[str, Any]]:
    """``agentlog.select``: the vector's hash and summary, and the chosen candidate's id."""
    probs = np.frombuffer(sel.probs, dtype="<f8")
    return "agentlog.select", selection_event_attributes(
        sel.name, sel.step, sel.owner, probs, sel.choice, sel.probs, chosen_id, sel.n_zero
    )


def continuation_event(c: Continuation) -> tuple[str, dict[str, Any]]:
    return "agentlog.proceed", continuation_event_attributes(
        c.name, c.step, c.p, c.u, c.decision
    )
