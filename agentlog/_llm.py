"""``al.llm_call``: record one model call made with any client.

The adapters (``agentlog.adapters.openai``, ``.anthropic``, ``.vllm``) record through this
function; call it yourself for a client agentlog has no adapter for. One call writes an
``LLMCall`` record into the current run, counts the call, its tokens and its cost into the
current window, and, when a TracerProvider is configured, emits one span named
``{operation} {model}`` (kind CLIENT, INTERNAL for an in-process engine) under the window's
span with the OpenTelemetry GenAI semantic-convention attributes.

Examples:
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

import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from . import _state
from ._encoding import encode
from ._errors import ArtifactEncodingError, InstrumentationWarning
from ._recorder import _redacted
from ._records import LLMCall
from ._scrub import REDACTED, holds_known, may_change, remember, scrub_error, scrub_value
from ._spans import live as _live
from ._spans.builder import GENAI_ATTRIBUTES
from ._state import Run, current_run_var, window_in

__all__ = ["GENAI_ATTRIBUTES", "known_secrets", "llm_call"]

Prices = Mapping[str, tuple[float, float]]
"""``{model: (USD per million input tokens, USD per million output tokens)}``."""

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
# failure paths of any run remove them from exception messages (a provider error may echo
# the key after the run that made the call has ended).
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


def _cost(model: str, input_tokens: int, output_tokens: int, prices: Prices | None) -> float | None:
    if prices is None:
        return None
    price = prices.get(model)
    if price is None:
        return None
    per_in, per_out = price
    return (input_tokens * float(per_in) + output_tokens * float(per_out)) / 1e6


def _sealed(run: Run, payload: Any, provider: str, part: str, checked: bool = False) -> bytes:
    """The canonical bytes of a request, response or error payload as it may be written.

    The run's ``redact`` hook, then the core scrubber (credential names at any depth, key
    formats, URL credentials, the run's known secrets, with its model-content exemption
    for logprob entries); ``may_change`` skips the copying walk when nothing can match,
    so a clean payload is encoded once. ``checked``: the payload already passed the
    scrubber's rules unchanged (a clean cache key's request), so without a redact hook
    only the run's known secret values are searched for.
    """
    if run.redact is not None:
        payload = _redacted(run.redact, payload)
        checked = False  # the hook's output is the user's: it gets every rule
    data = encode(payload, what=f"{provider} {part}")
    if checked and not (run.secrets and holds_known(data, run.secrets)):
        return data
    if may_change(payload, data, run.secrets):
        clean = scrub_value(payload, run.secrets)
        if clean is not payload:
            data = encode(clean, what=f"{provider} {part}")
    return data


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
    request_checked: bool = False,
    span: bool | Literal["auto"] = "auto",
) -> None:
    """Record one model call in the current window (no-op outside a run).

    This is the one recording path of model calls: the adapters call it, and so does
    the private ``log_llm_call``. The span, when a TracerProvider is configured, is built
    from the written ``LLMCall`` record by the same code ``agentlog export`` runs on a
    stored trace, so a model span is identical live and exported.

    Args:
        provider: who served the call: a GenAI provider name (``"openai"``) or an adapter's
            provider id (``"openai.chat"``); the span's ``gen_ai.provider.name`` is the part
            before the first dot.
        model: the requested model.
        request: the request as a JSON-like mapping; the run's ``redact`` hook runs on it,
            then the credential scrubber (see ``secrets``). The span's
            ``gen_ai.request.*`` attributes are read from it: ``temperature``, ``top_p``,
            ``top_k``, ``max_tokens`` (or ``max_completion_tokens``/``max_output_tokens``),
            ``seed``, ``frequency_penalty``, ``presence_penalty``, at its top level, under
            ``request`` (an adapter's canonical request) or under ``sampling_params``.
        response: the response as a JSON-like value (e.g. ``obj.model_dump(mode="json")``);
            it passes the same scrubber, whose model-content exemption keeps logprob
            entries' ``token`` texts.
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
            response or the error message; they join the run's known secrets.
        capture_content: also put the stored (scrubbed) request and response on the span
            (``gen_ai.input.messages`` / ``gen_ai.output.messages``); off by default.
        kind: span kind: ``"client"`` for a remote service, ``"internal"`` in-process.
        request_checked: ``request`` already passed the core credential scrubber unchanged
            (an adapter passes a ``CacheKey``'s canonical request when ``key.clean``):
            without a ``redact`` hook only the known secret values are then searched for.
            Leave it False for any other request.
        span: emit the call's span (when a TracerProvider is configured). ``"auto"``
            (default): unless the span current in this context is another
            instrumentation's span of a model call (an OpenInference ``LLM`` span, a
            GenAI ``chat`` span of a framework's instrumentor), which already shows this
            call, so a backend shows it once; True: always; False: never (the OTel bridge,
            which records calls from the framework's spans).

    Never raises for a recording problem: a payload without a canonical encoding is
    reported as an ``InstrumentationWarning`` and the call is still counted.
    """
    if _state.active_runs == 0:
        return
    run = current_run_var.get()
    if run is None:
        return
    values = _secret_values(secrets)
    known = run.secrets
    for value in values:
        if value not in known:
            remember(known, value, declared=True)
    if cost is None:
        cost = _cost(model, input_tokens, output_tokens, prices)
    window = window_in(run)
    try:
        request_bytes = _sealed(run, request, provider, "request", request_checked)
        response_bytes = _sealed(run, response, provider, "response")
    except ArtifactEncodingError as exc:
        warnings.warn(str(exc), InstrumentationWarning, stacklevel=2)
        request_bytes = response_bytes = encode(REDACTED)
    # After the payloads: a value they held under a credential name is known by now, so a
    # provider error that echoes it loses it too.
    error_message = None if error is None else scrub_error(error, known, run.redact)
    error_type = None if error is None else type(error).__qualname__
    if window is not None:
        window.add_usage(llm_calls=1, input_tokens=int(input_tokens),
                         output_tokens=int(output_tokens), cost=cost)
    rec = LLMCall(
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
        latency_ns=max(int(latency_ns), 0),
        cost=cost,
        status=0 if error is None else 1,
        error_type=error_type,
        error_message=error_message,
        fingerprint=fingerprint,
        operation=operation,
        in_process=kind == "internal",
        cache=cache,
        response_model=response_model,
        response_id=response_id,
        finish_reasons=list(map(str, finish_reasons)) or None,
    )
    run.writer.put(rec)
    if run.tracer is not None and (span is True
                                   or (span == "auto" and not _live.traced_elsewhere())):
        _live.model(run, window, rec, capture_content=capture_content)
