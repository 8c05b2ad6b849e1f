"""``al.llm_call``: record one model call made with any client.

The adapters (``agentlog.adapters.openai``, ``.anthropic``, ``.vllm``) record through this
function; call it yourself for a client agentlog has no adapter for. One call writes an
``LLMCall`` record into the current run, counts the call, its tokens and its cost into the
current window, and, when a TracerProvider is configured, emits one span named
``{operation} {model}`` (kind CLIENT, INTERNAL for an in-process engine) under the window's
span with the OpenTelemetry GenAI semantic-convention attributes.

Example:
    >>> import agentlog as al
    >>> @al.window("answer")
    ... def answer(question: str) -> str:
    ...     reply = {"text": "Paris"}  # what your client returned
    ...     al.llm_call("my-llm", "tiny-1", request={"prompt": question}, response=reply,
    ...                 input_tokens=7, output_tokens=1, latency_ns=2_000_000,
    ...                 prices={"tiny-1": (0.5, 1.5)})
    ...     return reply["text"]
    >>> with al.record("doc-llm.zst", seed=1):
    ...     _ = answer("capital of France?")
    >>> call = al.read("doc-llm.zst").llm_calls()[0]
    >>> call.model, call.input_tokens, round(call.cost * 1e6, 3)
    ('tiny-1', 7, 5.0)
"""

from __future__ import annotations

import functools
import json
import math
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from . import _state
from ._encoding import encode
from ._errors import ArtifactEncodingError, InstrumentationWarning
from ._recorder import _redacted
from ._records import LLMCall
from ._scrub import REDACTED, is_credential_name, may_hold_secret, scrub_error, scrub_value
from ._state import Run, WindowState, current_run_var, window_in

__all__ = [
    "GENAI_ATTRIBUTES",
    "exception_text",
    "llm_call",
    "llm_span_attributes",
    "record_exception",
    "scrub_payload",
]

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
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"
AGENTLOG_CACHE = "agentlog.cache"
AGENTLOG_CACHE_KEY = "agentlog.cache_key"

GENAI_ATTRIBUTES: dict[str, str] = {
    "GEN_AI_OPERATION_NAME": GEN_AI_OPERATION_NAME,
    "GEN_AI_PROVIDER_NAME": GEN_AI_PROVIDER_NAME,
    "GEN_AI_REQUEST_MODEL": GEN_AI_REQUEST_MODEL,
    "GEN_AI_REQUEST_TEMPERATURE": GEN_AI_REQUEST_TEMPERATURE,
    "GEN_AI_REQUEST_TOP_P": GEN_AI_REQUEST_TOP_P,
    "GEN_AI_REQUEST_TOP_K": GEN_AI_REQUEST_TOP_K,
    "GEN_AI_REQUEST_MAX_TOKENS": GEN_AI_REQUEST_MAX_TOKENS,
    "GEN_AI_REQUEST_SEED": GEN_AI_REQUEST_SEED,
    "GEN_AI_RESPONSE_MODEL": GEN_AI_RESPONSE_MODEL,
    "GEN_AI_RESPONSE_ID": GEN_AI_RESPONSE_ID,
    "GEN_AI_RESPONSE_FINISH_REASONS": GEN_AI_RESPONSE_FINISH_REASONS,
    "GEN_AI_USAGE_INPUT_TOKENS": GEN_AI_USAGE_INPUT_TOKENS,
    "GEN_AI_USAGE_OUTPUT_TOKENS": GEN_AI_USAGE_OUTPUT_TOKENS,
    "GEN_AI_INPUT_MESSAGES": GEN_AI_INPUT_MESSAGES,
    "GEN_AI_OUTPUT_MESSAGES": GEN_AI_OUTPUT_MESSAGES,
}
"""Our GenAI attribute constants by their semantic-conventions name (tests compare them)."""

# Request fields that map onto gen_ai.request.* (first present name wins).
_REQUEST_PARAMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (GEN_AI_REQUEST_TEMPERATURE, ("temperature",)),
    (GEN_AI_REQUEST_TOP_P, ("top_p",)),
    (GEN_AI_REQUEST_TOP_K, ("top_k",)),
    (GEN_AI_REQUEST_MAX_TOKENS, ("max_tokens", "max_completion_tokens", "max_output_tokens")),
    (GEN_AI_REQUEST_SEED, ("seed",)),
)

Prices = Mapping[str, tuple[float, float]]
"""``{model: (USD per million input tokens, USD per million output tokens)}``."""


def scrub_payload(payload: Any, secrets: Sequence[str] = ()) -> Any:
    """A copy of ``payload`` with credentials removed: the one scrubber model calls pass.

    ``llm_call`` applies it to every request; a response is scrubbed only when its
    encoding contains one of ``secrets`` (it has no credential fields of its own).
    Fields whose names carry credentials (Authorization, x-api-key, api_key, auth_token, ...)
    become ``"<redacted>"`` — but not the token *counts* and token *texts* every model
    response is made of (``prompt_tokens``, ``max_tokens``, a logprob entry's ``token``).
    Every occurrence of a known secret value (the client's API key) inside any string is
    replaced too, so a provider error that echoes the key loses it.
    """
    return _scrub(payload, _secret_values(secrets))


_last_secrets: tuple[Sequence[str] | None, tuple[str, ...]] = (None, ())


def _secret_values(secrets: Sequence[str]) -> tuple[str, ...]:
    global _last_secrets
    if not secrets:
        return ()
    last, values = _last_secrets
    if secrets is last:  # an adapter passes the same tuple on every call
        return values
    values = tuple(s for s in secrets if isinstance(s, str) and len(s) >= 4)
    if values:
        _remember(values)
    _last_secrets = (secrets, values)
    return values


# Secret values (API keys) adapters handed to llm_call, newest last: the window and tool
# failure paths remove them from exception messages (a provider error may echo the key).
_known_secrets: tuple[str, ...] = ()
_MAX_KNOWN_SECRETS = 64


def _remember(values: tuple[str, ...]) -> None:
    global _known_secrets
    new = tuple(v for v in values if v not in _known_secrets)
    if new:
        _known_secrets = (*_known_secrets, *new)[-_MAX_KNOWN_SECRETS:]


def known_secrets() -> tuple[str, ...]:
    """The secret values (API keys) adapters handed to ``llm_call`` so far, newest last."""
    return _known_secrets


def exception_text(exc: BaseException) -> str:
    """``str(exc)`` with every secret value a model call reported replaced."""
    text = str(exc)
    return _scrub(text, _known_secrets) if _known_secrets else text


def record_exception(span: Any, exc: BaseException) -> None:
    """``span.record_exception(exc)`` with known secret values removed from its text."""
    if not _known_secrets:
        span.record_exception(exc)
        return
    import traceback

    stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    span.record_exception(exc, attributes={
        "exception.message": _scrub(str(exc), _known_secrets),
        "exception.stacktrace": _scrub(stack, _known_secrets),
    })


@functools.lru_cache(maxsize=4096)
def _is_credential_field(key: str) -> bool:
    # Cached: a request repeats a handful of keys (role, content, model, ...) every call.
    k = key.lower()
    if k in ("token", "tokens") or k.endswith(("_tokens", "_tokens_details", "token_ids")):
        return False  # usage counts, token texts and ids: content, not credentials
    return is_credential_name(k)


_SCALARS = (int, float, bool, type(None), bytes)


def _scrub(obj: Any, secrets: tuple[str, ...]) -> Any:
    kind = type(obj)
    if kind in _SCALARS:
        return obj  # before the Mapping test: an ABC isinstance check costs a microsecond
    if kind is str:
        for s in secrets:
            if s in obj:
                obj = obj.replace(s, REDACTED)
        return obj
    if kind is dict or isinstance(obj, Mapping):
        return {_scrub(k, secrets): REDACTED if type(k) is str and _is_credential_field(k)
                else _scrub(v, secrets) for k, v in obj.items()}
    if kind is list or kind is tuple:
        return [_scrub(v, secrets) for v in obj]
    return obj


def _has_credential_field(obj: Any) -> bool:
    """Whether ``_scrub`` would replace a field of ``obj`` (a walk that copies nothing)."""
    if type(obj) is dict or (type(obj) not in _SCALARS and type(obj) is not str
                             and isinstance(obj, Mapping)):
        for k, v in obj.items():
            if type(k) is str and _is_credential_field(k):
                return True
            if type(v) not in _SCALARS and type(v) is not str and _has_credential_field(v):
                return True
        return False
    if type(obj) is list or type(obj) is tuple:
        return any(_has_credential_field(v) for v in obj
                   if type(v) not in _SCALARS and type(v) is not str)
    return False


def _contains(data: bytes, values: tuple[str, ...]) -> bool:
    return any(v.encode() in data for v in values) if values else False


def _cost(model: str, input_tokens: int, output_tokens: int, prices: Prices | None) -> float | None:
    if prices is None:
        return None
    price = prices.get(model)
    if price is None:
        return None
    per_in, per_out = price
    return (input_tokens * float(per_in) + output_tokens * float(per_out)) / 1e6


def llm_span_attributes(
    *,
    provider: str,
    model: str,
    operation: str,
    request: Mapping[str, Any],
    input_tokens: int,
    output_tokens: int,
    response_model: str | None = None,
    response_id: str | None = None,
    finish_reasons: Sequence[str] = (),
    cache: str | None = None,
    cache_key: bytes | None = None,
    error_type: str | None = None,
) -> dict[str, Any]:
    """The GenAI attributes of one model call's span (the provider name is the part of
    ``provider`` before the first dot: ``"openai.chat"`` -> ``"openai"``)."""
    attrs: dict[str, Any] = {
        GEN_AI_OPERATION_NAME: operation,
        GEN_AI_PROVIDER_NAME: provider.split(".", 1)[0],
        GEN_AI_REQUEST_MODEL: model,
        GEN_AI_USAGE_INPUT_TOKENS: int(input_tokens),
        GEN_AI_USAGE_OUTPUT_TOKENS: int(output_tokens),
    }
    for attr, names in _REQUEST_PARAMS:
        for name in names:
            value = request.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                if isinstance(value, float) and not math.isfinite(value):
                    break
                attrs[attr] = value
                break
    if response_model is not None:
        attrs[GEN_AI_RESPONSE_MODEL] = response_model
    if response_id is not None:
        attrs[GEN_AI_RESPONSE_ID] = response_id
    if finish_reasons:
        attrs[GEN_AI_RESPONSE_FINISH_REASONS] = [str(r) for r in finish_reasons]
    if cache is not None:
        attrs[AGENTLOG_CACHE] = cache
    if cache_key is not None:
        attrs[AGENTLOG_CACHE_KEY] = cache_key.hex()
    if error_type is not None:
        attrs[ERROR_TYPE] = error_type
    return attrs


def llm_call(
    provider: str,
    model: str,
    *,
    request: Mapping[str, Any],
    response: Any = None,
    operation: str = "chat",
    input_tokens: int = 0,
    output_tokens: int = 0,
    latency_ns: int = 0,
    cost: float | None = None,
    prices: Prices | None = None,
    error: BaseException | None = None,
    response_model: str | None = None,
    response_id: str | None = None,
    finish_reasons: Sequence[str] = (),
    fingerprint: str | None = None,
    cache_key: bytes | None = None,
    cache: Literal["hit", "miss", "off"] | None = None,
    secrets: Sequence[str] = (),
    capture_content: bool = False,
    kind: Literal["client", "internal"] = "client",
    parameters: Mapping[str, Any] | None = None,
) -> None:
    """Record one model call in the current window (no-op outside a run).

    Args:
        provider: who served the call: a GenAI provider name (``"openai"``) or an adapter's
            provider id (``"openai.chat"``); the span's ``gen_ai.provider.name`` is the part
            before the first dot.
        model: the requested model.
        request: the request as a JSON-like mapping; credentials are removed before it is
            encoded (see ``secrets``) and the run's ``redact`` hook runs after that.
        response: the response as a JSON-like value (e.g. ``obj.model_dump(mode="json")``).
        operation: GenAI operation name: ``"chat"``, ``"text_completion"``, ``"embeddings"``.
        input_tokens, output_tokens: usage, counted into the window.
        latency_ns: how long the call took; the span ends now and starts that much earlier.
        cost: the call's cost; when None and ``prices`` names ``model``, it is computed.
        prices: ``{model: (USD per 1M input tokens, USD per 1M output tokens)}``.
        error: the exception the call raised, if it failed (type and message are stored,
            secrets removed; the exception itself is untouched).
        response_model, response_id, finish_reasons: for the span's ``gen_ai.response.*``.
        fingerprint: the serving fingerprint (system_fingerprint, engine version, revision).
        cache_key: the exact-input cache key (32 bytes) the call was served under.
        cache: ``"hit"``, ``"miss"`` or ``"off"``, when the call went through a cache.
        secrets: secret values (API keys) to remove wherever they occur in the request, the
            response or the error message.
        capture_content: also put the request and response content on the span
            (``gen_ai.input.messages`` / ``gen_ai.output.messages``); off by default.
        kind: span kind: ``"client"`` for a remote service, ``"internal"`` in-process.
        parameters: where the span reads ``temperature``, ``top_p``, ``top_k``,
            ``max_tokens`` (or ``max_completion_tokens``/``max_output_tokens``) and ``seed``
            for ``gen_ai.request.*``; default: ``request`` itself.

    Never raises for a recording problem: a payload without a canonical encoding is
    reported as an ``InstrumentationWarning`` and the call is still counted.
    """
    if _state.active_runs == 0:
        return
    run = current_run_var.get()
    if run is None:
        return
    if cost is None:
        cost = _cost(model, input_tokens, output_tokens, prices)
    window = window_in(run)
    end_ns = time.time_ns()
    values = _secret_values(secrets)
    # Scrub only what needs it: the encoded bytes are searched for the secret values (a
    # str is stored as contiguous UTF-8) and the request for credential-named fields (a
    # walk that copies nothing); the copying scrub runs on a find. A response has no
    # credential fields of its own, only maybe an echoed key.
    payload: Any = request
    body = response
    error_message = None if error is None else scrub_error(
        error, {*run.secrets, *values}, run.redact)
    error_type = None if error is None else type(error).__qualname__
    request_bytes = response_bytes = b""
    try:
        if run.redact is not None:
            payload = _redacted(run.redact, _scrub(payload, values))
            body = _redacted(run.redact, _scrub(body, values))
        request_bytes = encode(payload, what=f"{provider} request")
        if _has_credential_field(payload) or _contains(request_bytes, values):
            payload = _scrub(payload, values)
            request_bytes = encode(payload, what=f"{provider} request")
        response_bytes = encode(body, what=f"{provider} response")
        if _contains(response_bytes, values):
            body = _scrub(body, values)
            response_bytes = encode(body, what=f"{provider} response")
        # The core scrubber then sees what the fast pass above cannot in a request: the
        # run's declared secrets, key formats (sk-…, Bearer …) and credentials in URLs, as
        # it does for every window entry (a cheap byte prefilter first). Not on responses:
        # there a field named ``token`` is a logprob entry's text, not a credential.
        if may_hold_secret(request_bytes, run.secrets):
            payload = scrub_value(payload, run.secrets)
            request_bytes = encode(payload, what=f"{provider} request")
    except ArtifactEncodingError as exc:
        warnings.warn(str(exc), InstrumentationWarning, stacklevel=2)
        payload = body = REDACTED
        request_bytes = response_bytes = encode(REDACTED)
    _count(window, input_tokens, output_tokens, cost)
    run.writer.put(
        LLMCall(
            run=run.index,
            window=-1 if window is None else window.id,
            t_ns=run.now_ns(),
            provider=provider,
            model=model,
            request=request_bytes,
            response=response_bytes,
            cache_key=cache_key,
            input_tokens=int(input_tokens),
            output_tokens=int(output_tokens),
            latency_ns=int(latency_ns),
            cost=cost,
            status=0 if error is None else 1,
            error_type=error_type,
            error_message=error_message,
            fingerprint=fingerprint,
        )
    )
    if run.tracer is not None:
        attrs = llm_span_attributes(
            provider=provider, model=model, operation=operation,
            request=parameters if parameters is not None else (
                request if isinstance(request, Mapping) else {}),
            input_tokens=input_tokens, output_tokens=output_tokens,
            response_model=response_model, response_id=response_id,
            finish_reasons=finish_reasons, cache=cache, cache_key=cache_key,
            error_type=error_type,
        )
        if capture_content:
            attrs[GEN_AI_INPUT_MESSAGES] = _json_text(payload)
            attrs[GEN_AI_OUTPUT_MESSAGES] = _json_text(body)
        _emit_span(run, window, f"{operation} {model}", attrs, error_message,
                   start_ns=end_ns - max(int(latency_ns), 0), end_ns=end_ns, kind=kind)


def _count(window: WindowState | None, input_tokens: int, output_tokens: int,
           cost: float | None) -> None:
    if window is not None:
        window.add_usage(llm_calls=1, input_tokens=int(input_tokens),
                         output_tokens=int(output_tokens), cost=cost)


def _emit_span(
    run: Run,
    window: WindowState | None,
    name: str,
    attrs: dict[str, Any],
    error_message: str | None,
    *,
    start_ns: int,
    end_ns: int,
    kind: str,
) -> None:
    try:
        from opentelemetry import trace

        parent = window.span if window is not None else None
        context = trace.set_span_in_context(parent) if parent is not None else None
        span = run.tracer.start_span(
            name,
            context=context,
            kind=trace.SpanKind.CLIENT if kind == "client" else trace.SpanKind.INTERNAL,
            attributes=attrs,
            start_time=start_ns,
        )
        if ERROR_TYPE in attrs:
            span.set_status(trace.Status(trace.StatusCode.ERROR, error_message))
        span.end(end_time=end_ns)
    except Exception as exc:  # a span is a copy: losing it must not break the host
        warnings.warn(f"could not emit the span of a model call: {exc}",
                      InstrumentationWarning, stacklevel=3)


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return REDACTED
