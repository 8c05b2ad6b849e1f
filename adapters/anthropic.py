"""Record and cache the calls of an ``anthropic.Anthropic`` / ``anthropic.AsyncAnthropic``.

``wrap(client)`` returns a copy of the client (``client.with_options(http_client=...)``)
whose HTTP client records every Messages call at the HTTP seam
(``agentlog.adapters.transport``), whichever SDK route made it (``create``, ``stream()``,
``parse()``, ``with_raw_response``, ``with_streaming_response``), sync or async, as an
``LLMCall`` in the current window and one CLIENT span ``chat {model}``; with
``cache=ModelCache(...)`` calls go through the exact-input cache (a streamed request is
served the stored message as a stream).

The anthropic SDK emits its own CLIENT span per call (``anthropic.messages.create``). Two
spans for one call would double every count in a tracing backend, so ``wrap`` turns the
SDK's spans off on the copy (its public ``open_telemetry`` option); pass
``sdk_spans=True`` to keep both (agentlog's span too).

Anthropic Messages return no logprobs: ``choice_probs`` on a Message raises
``NoLogprobsError`` rather than inventing a vector.

Examples:
    >>> import anthropic, httpx2
    >>> from agentlog.adapters import anthropic as anthropic_adapter
    >>> def handler(request):
    ...     return httpx2.Response(200, json={
    ...         "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
    ...         "content": [{"type": "text", "text": "B"}], "stop_reason": "end_turn",
    ...         "stop_sequence": None, "usage": {"input_tokens": 9, "output_tokens": 1}})
    >>> http = httpx2.Client(transport=httpx2.MockTransport(handler))
    >>> client = anthropic_adapter.wrap(anthropic.Anthropic(api_key="sk-ant-x", http_client=http))
    >>> client.messages.create(model="claude-x", max_tokens=5, messages=[]).content[0].text
    'B'
"""

from __future__ import annotations

from collections.abc import Mapping
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
    sdk_spans: bool = False,
) -> ClientT:
    """A copy of ``client`` that records (and, with ``cache``, serves) every Messages call.

    Args:
        client: an ``anthropic.Anthropic`` or ``anthropic.AsyncAnthropic``; it is not
            modified: use the returned copy.
        cache: an ``agentlog.replay.ModelCache`` every call goes through, the path of its
            SQLite file (opened as ``ModelCache(path)``, read-write), or None.
        channel: the evaluation channel id these calls serve (part of the cache key).
        prices: ``{model: (USD per 1M input tokens, USD per 1M output tokens)}``.
        capture_content: put message content on the spans (off by default).
        sdk_spans: keep the SDK's own ``anthropic.messages.create`` span besides ours.

    Raises:
        agentlog.MissingDependencyError: the ``anthropic`` package is not installed.
        TypeError: ``client`` is not an anthropic client, or ``cache`` is neither a
            ``ModelCache``, a path nor None.
        ValueError: ``cache`` is a path but not of a model cache (a folder, another file).
    """
    sdk = require("anthropic", "anthropic")
    options: dict[str, Any] = {}
    telemetry = getattr(client, "open_telemetry", None)
    if not sdk_spans and isinstance(telemetry, Mapping):
        traces = dict(telemetry.get("traces") or {})
        options["open_telemetry"] = {**telemetry, "traces": {**traces, "enabled": False}}
    wrapped: ClientT = wrap_client(
        client, sync_cls=sdk.Anthropic, async_cls=sdk.AsyncAnthropic,
        expected="anthropic.Anthropic or anthropic.AsyncAnthropic",
        secret_attrs=("api_key", "auth_token"), cache=cache, channel=channel, prices=prices,
        capture_content=capture_content, spans=True if sdk_spans else "auto", **options)
    return wrapped
