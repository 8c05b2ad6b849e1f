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

from ._app import (
    APP_ENV,
    AppImportError,
    AppNotGivenError,
    app_from_pyproject,
    recorded_modules,
    resolve_app,
)
from ._cache import CacheMode, CacheResult, CacheStatus, ModelCache, default_cache_path
from ._channels import (
    Channel,
    ScoreContext,
    Scorer,
    channel,
    get_channel,
    get_scorer,
    registry,
    scorer,
)
from ._reentry import (
    reenter_arguments,
    resume_streams,
    stream_offsets,
    tool_result,
    window_function,
)
from ._registry import (
    NotRegisteredError,
    Registered,
    Registry,
    RegistryCollisionWarning,
    object_id,
)
from ._request_fields import (
    CacheKey,
    RequestFields,
    register_request_fields,
    registered_request_fields,
    request_fields,
    request_key,
)
from ._states import (
    FrozenTransition,
    State,
    StateDecodeError,
    WindowNotFoundError,
    frozen_transitions,
    trace_file_hash,
)

__all__ = [
    "APP_ENV",
    "AppImportError",
    "AppNotGivenError",
    "CacheKey",
    "CacheMode",
    "CacheResult",
    "CacheStatus",
    "Channel",
    "FrozenTransition",
    "ModelCache",
    "NotRegisteredError",
    "Registered",
    "Registry",
    "RegistryCollisionWarning",
    "RequestFields",
    "ScoreContext",
    "Scorer",
    "State",
    "StateDecodeError",
    "WindowNotFoundError",
    "app_from_pyproject",
    "channel",
    "default_cache_path",
    "frozen_transitions",
    "get_channel",
    "get_scorer",
    "object_id",
    "recorded_modules",
    "reenter_arguments",
    "register_request_fields",
    "registered_request_fields",
    "registry",
    "request_fields",
    "request_key",
    "resolve_app",
    "resume_streams",
    "scorer",
    "stream_offsets",
    "tool_result",
    "trace_file_hash",
    "window_function",
]
