"""Model-client adapters: every model call recorded, cached and replayable.

``transport()``, ``http_client()`` and ``async_http_client()`` record model calls at the
HTTP seam: pass the client to any SDK or framework that takes an ``httpx2``/``httpx``
client. ``agentlog.adapters.openai.wrap(client)`` and
``agentlog.adapters.anthropic.wrap(client)`` return a copy of an SDK client that does so.
Every call is an ``LLMCall`` record in the current window (through ``agentlog.llm_call``)
and, given ``cache=ModelCache(...)``, is served through the exact-input cache.
``choice_probs(response, labels)`` turns option-token logprobs into the candidate vector
``agentlog.select`` takes. ``observe_calls()`` counts a block's
model calls by who served them (provider, model, serving fingerprint): replays store that
with each unit's scores. The SDKs are imported only when used.

Frameworks have a module each, imported only when used (the ``pip install
'agentlog[<framework>]'`` line on a miss): ``openai_agents``, ``langchain``,
``pydantic_ai``, ``smolagents``, ``dspy``, and ``otel_bridge`` for any framework traced
with OpenTelemetry GenAI or OpenInference spans.

Examples:
    >>> from agentlog.adapters import ChoiceProbs, choice_probs
    >>> body = {"choices": [{"logprobs": {"content": [{"token": "B", "logprob": -0.1,
    ...     "top_logprobs": [{"token": "B", "logprob": -0.1}, {"token": "A", "logprob": -2.5}]}]}}]}
    >>> probs = choice_probs(body, ["A", "B", "C"])
    >>> [round(float(p), 3) for p in probs.probs], probs.missing
    ([0.083, 0.917, 0.0], ('C',))
"""

from agentlog import StreamClosedError

from ._cache import CacheMode, CacheResult, CacheStatus, ModelCache, default_cache_path
from ._choice import ChoiceProbs, NoLogprobsError, choice_probs
from ._observed import ObservedCalls, ServedBy, observe_calls, observing
from ._recording import CacheOverride, CallOptions, call_options, override_cache
from ._request_fields import (
    CacheKey,
    RequestFields,
    register_request_fields,
    registered_request_fields,
    request_fields,
    request_key,
)
from ._transport import async_http_client, http_client, transport

__all__ = [
    "CacheKey",
    "CacheMode",
    "CacheOverride",
    "CacheResult",
    "CacheStatus",
    "CallOptions",
    "ChoiceProbs",
    "ModelCache",
    "NoLogprobsError",
    "ObservedCalls",
    "RequestFields",
    "ServedBy",
    "StreamClosedError",
    "async_http_client",
    "call_options",
    "choice_probs",
    "default_cache_path",
    "http_client",
    "observe_calls",
    "observing",
    "override_cache",
    "register_request_fields",
    "registered_request_fields",
    "request_fields",
    "request_key",
    "transport",
]
