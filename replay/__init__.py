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

Channel replay, paired interventions and the frozen/branch/rerun modes are not implemented
yet; the seams they will use exist in the core (``agentlog.decode_arguments``).
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
from ._design import Arm, Design, parse_design, replicate_seed
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

__all__ = [
    "APP_ENV",
    "AppImportError",
    "AppNotGivenError",
    "Arm",
    "CacheKey",
    "CacheMode",
    "CacheResult",
    "CacheStatus",
    "Design",
    "ModelCache",
    "NotRegisteredError",
    "Registered",
    "Registry",
    "RegistryCollisionWarning",
    "RequestFields",
    "app_from_pyproject",
    "default_cache_path",
    "object_id",
    "parse_design",
    "recorded_modules",
    "register_request_fields",
    "registered_request_fields",
    "replicate_seed",
    "request_fields",
    "request_key",
    "resolve_app",
]
