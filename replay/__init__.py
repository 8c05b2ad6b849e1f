"""Replay of recorded runs, and the exact-input model cache that makes a replay frozen.

Every adapter call goes through a ``ModelCache``: the key is the SHA-256 of the canonical
encoding of a registered, versioned field list per provider (``request_key``), the store
is SQLite, and a recorded trace is itself a cache (``ModelCache.from_traces``).

Example:
    >>> from agentlog.replay import ModelCache, request_key
    >>> key = request_key("openai.chat", {"model": "m", "messages": [], "temperature": 0})
    >>> with ModelCache(path=":memory:") as cache:
    ...     first = cache.call(key, lambda: {"id": "r1"})
    ...     again = cache.call(key, lambda: {"id": "r2"})
    >>> first.status, again.status, again.response
    ('miss', 'hit', {'id': 'r1'})

Re-entering a sealed window (``reenter_arguments``, ``stream_offsets``, ``resume_streams``,
``window_function``, ``tool_result``) and the interventions a re-entry runs under
(``agentlog.replay.interventions``) are documented in their modules.
"""

from ._cache import CacheMode, CacheResult, CacheStatus, ModelCache, default_cache_path
from ._reentry import (
    reenter_arguments,
    resume_streams,
    stream_offsets,
    tool_result,
    window_function,
)
from ._request_fields import (
    CacheKey,
    RequestFields,
    register_request_fields,
    registered_request_fields,
    request_fields,
    request_key,
)

__all__ = [
    "CacheKey",
    "CacheMode",
    "CacheResult",
    "CacheStatus",
    "ModelCache",
    "RequestFields",
    "default_cache_path",
    "reenter_arguments",
    "register_request_fields",
    "registered_request_fields",
    "request_fields",
    "request_key",
    "resume_streams",
    "stream_offsets",
    "tool_result",
    "window_function",
]
