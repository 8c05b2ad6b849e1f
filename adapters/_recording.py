"""What every recorded model call shares: the per-call cache-key options, the per-context
cache override, the client's cache argument and agentlog's finaliser thread.

The HTTP transport (``_transport``) and the vLLM offline wrapper (``vllm``) record through
these. Outside any run and without a cache a call is the original call behind one
context-variable lookup (``bypassed``).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import agentlog as al
from agentlog import MissingDependencyError
from agentlog.context import block_async_signals

from ._observed import _observed

Prices = Mapping[str, tuple[float, float]]


def require(module: str, extra: str) -> Any:
    """Import an optional SDK, or fail with the exact ``pip install`` line."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"this adapter needs the `{module}` package, which is not installed; install it "
            f"with: pip install 'agentlog[{extra}]'"
        ) from exc


@dataclass(frozen=True)
class CallOptions:
    """Per-call cache-key options: which sample of a request this is, and its channel."""

    draw: int = 0
    channel: str | None = None


_options: contextvars.ContextVar[CallOptions | None] = contextvars.ContextVar(
    "agentlog_adapter_options", default=None
)


@contextlib.contextmanager
def call_options(*, draw: int = 0, channel: str | None = None) -> Iterator[CallOptions]:
    """Model calls made inside the block use this draw index and channel in their cache key.

    ``draw`` tells k samples of one prompt apart (k draws are k cache entries, not one);
    ``channel`` names the evaluation channel the calls serve.

    Examples:
        >>> from agentlog.adapters import call_options
        >>> with call_options(draw=2, channel="quote") as options:
        ...     options.draw
        2
    """
    if isinstance(draw, bool) or not isinstance(draw, int) or draw < 0:
        raise ValueError(f"`draw` must be a non-negative int; found {draw!r}")
    options = CallOptions(draw=draw, channel=channel)
    token = _options.set(options)
    try:
        yield options
    finally:
        _options.reset(token)


class CacheOverride:
    """The model cache of wrapped clients in one context (``override_cache``).

    Shared by the contexts copied from the one it was set in, so a replay can change it
    for all of them at once (``branch``: ``override.cache = None`` after its first changed
    decision sends the later calls live).

    Attributes:
        cache: the ``ModelCache`` (or any object with its ``mode``/``call``/``acall``)
            that serves every call instead of the client's own; ``None``: no cache, every
            call live (still recorded inside a run).
    """

    __slots__ = ("cache",)

    def __init__(self, cache: Any) -> None:
        self.cache = cache


_override: contextvars.ContextVar[CacheOverride | None] = contextvars.ContextVar(
    "agentlog_adapter_cache", default=None
)


@contextlib.contextmanager
def override_cache(cache: Any) -> Iterator[CacheOverride]:
    """Model calls of every wrapped client made in this context use ``cache`` instead.

    The client's own ``cache=`` (fixed when it was wrapped) and its mode are replaced for
    calls in this context and in contexts copied from it (``copy_context_executor``,
    asyncio tasks); elsewhere nothing changes. A frozen replay passes a read-only
    ``ModelCache.from_traces(sources)``, so a call the recording does not hold raises
    ``agentlog.CacheMiss`` naming the differing field, and none runs live. Under a
    read-only cache, a request that has no cache key raises ``CacheMiss`` too.

    Examples:
        >>> from agentlog.adapters import override_cache
        >>> with override_cache(None) as override:
        ...     override.cache is None
        True
    """
    override = CacheOverride(cache)
    token = _override.set(override)
    try:
        yield override
    finally:
        _override.reset(token)


def _unkeyed_miss(endpoint: Any) -> al.CacheMiss:
    return al.CacheMiss(
        f"{endpoint.provider}: this request has no cache key (see the warning above), so "
        "the read-only model cache cannot serve it and a frozen replay refuses to call it "
        "live; make the request encodable or replay with mode='rerun'")


@dataclass
class Config:
    """What one ``wrap(client, ...)`` call configured (``cache`` as ``model_cache`` gives
    it: a path given to ``wrap`` is opened here, once, and shared by the client's copies)."""

    cache: Any = None  # agentlog.replay.ModelCache | None
    channel: str | None = None
    prices: Prices | None = None
    capture_content: bool = False
    secrets: tuple[str, ...] = ()
    # agentlog's model span: "auto" (unless another instrumentation's span of the call is
    # current), True (always), False (never: the framework's own is there)
    spans: bool | Literal["auto"] = "auto"

    def __post_init__(self) -> None:
        self.cache = model_cache(self.cache)


def model_cache(cache: Any) -> Any:
    """The model cache ``wrap(..., cache=)`` was given: None, a ``ModelCache`` (or any
    object with its ``mode``/``call``/``acall``), or the path of its SQLite file, opened
    as ``agentlog.replay.ModelCache(path)`` (read-write).

    Raises:
        TypeError: anything else (the mistake used to surface at the first call).
        ValueError, OSError: as ``ModelCache(path)`` (a folder, a file that is not a cache).
    """
    if cache is None:
        return None
    if isinstance(cache, str | os.PathLike):
        from ._cache import ModelCache  # imported when used: it opens SQLite

        return ModelCache(cache)
    if all(callable(getattr(cache, name, None)) for name in ("call", "acall")) and hasattr(
            cache, "mode"):
        return cache
    raise TypeError(
        f"`cache` must be an agentlog.replay.ModelCache, e.g. ModelCache(path), the path of "
        f"its SQLite file (e.g. 'runs/cache.sqlite'), or None; found "
        f"{type(cache).__qualname__} {cache!r:.80}")


def bypassed(cache: Any) -> bool:
    """Whether a call goes straight to the SDK: no cache, no run, nobody observing."""
    return cache is None and al.current_run() is None and _observed.get() is None


_NO_OPTIONS = CallOptions()
_key_function: list[Callable[..., Any]] = []


def _request_key() -> Callable[..., Any]:
    """``request_key``, imported on the first keyed call, not on each."""
    if not _key_function:
        from ._request_fields import request_key

        _key_function.append(request_key)
    return _key_function[0]


# --------------------------------------------------------------------------- sync / async


# --------------------------------------------------------------------------- live streams


_worker_queue: queue.SimpleQueue[Callable[[], None]] | None = None
_worker_lock = threading.Lock()


def _deferred() -> queue.SimpleQueue[Callable[[], None]]:
    """The queue of agentlog's finaliser worker (``SimpleQueue.put`` is reentrant-safe)."""
    global _worker_queue
    if _worker_queue is None:
        with _worker_lock:
            if _worker_queue is None:
                q: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()

                def work() -> None:
                    # As agentlog's writer threads do: a process-directed SIGTERM or Ctrl-C
                    # must reach the main thread, whose handler runs only there.
                    block_async_signals()
                    while True:
                        job = q.get()
                        # Instrumentation must never kill its worker.
                        with contextlib.suppress(Exception):
                            job()

                threading.Thread(target=work, name="agentlog-finaliser", daemon=True).start()
                _worker_queue = q
    return _worker_queue


def drain_finalisers(timeout: float = 5.0) -> bool:
    """Wait until the finaliser worker has recorded every stream dropped so far (tests)."""
    done = threading.Event()
    _deferred().put(done.set)
    return done.wait(timeout)
