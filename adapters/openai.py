"""Record and cache the calls of an ``openai.OpenAI`` / ``openai.AsyncOpenAI`` client.

``wrap(client)`` returns a copy of the client (``client.with_options(http_client=...)``)
whose HTTP client records every model call at the HTTP seam (``agentlog.adapters.transport``):
Chat Completions, Responses, Completions and Embeddings, whichever SDK route made them
(``create``, ``parse``, ``stream``, ``with_raw_response``, ``with_streaming_response``).
Each call becomes an ``LLMCall`` in the current window (the request without credentials,
the response, usage, latency, logprobs, ``system_fingerprint``), counted into the window
and emitted as a CLIENT span ``chat {model}``. Streams pass through unchanged and are
recorded when they end, fail, or are closed or dropped early.

With ``cache=ModelCache(...)`` every call goes through the exact-input cache; a hit is
served as the bytes a live response carries (a streamed request gets the stored body as a
stream), so the SDK parses it exactly as a live one.

Works against any OpenAI-compatible server (vLLM, llama.cpp) through ``base_url``.

Examples:
    >>> import httpx2, openai
    >>> from agentlog.adapters import openai as openai_adapter
    >>> def handler(request):
    ...     return httpx2.Response(200, json={
    ...         "id": "c1", "object": "chat.completion", "created": 0, "model": "m",
    ...         "choices": [{"index": 0, "finish_reason": "stop",
    ...                      "message": {"role": "assistant", "content": "B"}}],
    ...         "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}})
    >>> client = openai_adapter.wrap(openai.OpenAI(
    ...     api_key="sk-test", http_client=httpx2.Client(transport=httpx2.MockTransport(handler))))
    >>> client.chat.completions.create(model="m", messages=[]).choices[0].message.content
    'B'
"""

from __future__ import annotations

from typing import Any, TypeVar

from ._recording import Prices, require
from ._transport import wrap_client

__all__ = ["wrap"]

ClientT = TypeVar("ClientT")


def wrap(
    client: ClientT,
    *,
    cache: Any = None,
    channel: str | None = None,
    prices: Prices | None = None,
    capture_content: bool = False,
) -> ClientT:
    """A copy of ``client`` that records (and, with ``cache``, serves) every model call.

    Args:
        client: an ``openai.OpenAI`` or ``openai.AsyncOpenAI`` (or a subclass such as
            ``AzureOpenAI``); it is not modified: use the returned copy.
        cache: an ``agentlog.replay.ModelCache`` every call goes through, the path of its
            SQLite file (opened as ``ModelCache(path)``, read-write), or None.
        channel: the evaluation channel id these calls serve (part of the cache key);
            ``agentlog.adapters.call_options`` overrides it per call.
        prices: ``{model: (USD per 1M input tokens, USD per 1M output tokens)}``; the cost
            of each call is counted into its window.
        capture_content: put message content on the spans (off by default).

    Raises:
        agentlog.MissingDependencyError: the ``openai`` package is not installed.
        TypeError: ``client`` is not an openai client, or ``cache`` is neither a
            ``ModelCache``, a path nor None.
        ValueError: ``cache`` is a path but not of a model cache (a folder, another file).
    """
    sdk = require("openai", "openai")
    wrapped: ClientT = wrap_client(
        client, sync_cls=sdk.OpenAI, async_cls=sdk.AsyncOpenAI,
        expected="openai.OpenAI or openai.AsyncOpenAI", secret_attrs=("api_key",),
        cache=cache, channel=channel, prices=prices, capture_content=capture_content)
    return wrapped
