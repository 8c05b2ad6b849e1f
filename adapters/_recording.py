"""The call path every adapter shares: cache key, exact-input cache, recording, streams.

An adapter describes one endpoint with an ``Endpoint`` (how its response becomes a JSON
body and back, where usage and the serving fingerprint are, how a stream accumulates and
how a cached body is replayed as a stream); ``wrap_method`` replaces the bound method on
the client's resource object with a recording one, so the caller keeps the same client.

Costs: outside any run and without a cache a wrapped call is the original call behind one
context-variable lookup. Inside a run, a call costs the canonical encoding of its request
(the cache key, recorded so that the trace itself can serve a frozen replay) and one record.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import os
import queue
import threading
import time
import warnings
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import agentlog as al
from agentlog import InstrumentationWarning, MissingDependencyError, StreamClosedError
from agentlog.context import block_async_signals

from ._client_secrets import client_secrets, stored_body
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

    Example:
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

    Example:
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


def _unkeyed_miss(endpoint: Endpoint) -> al.CacheMiss:
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
    base_url: str | None = None

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


@dataclass
class Meta:
    """What a response body says about the call (for the record and the span)."""

    input_tokens: int = 0
    output_tokens: int = 0
    response_model: str | None = None
    response_id: str | None = None
    finish_reasons: Sequence[str] = ()
    fingerprint: str | None = None


class Accumulator:
    """Collects the items of a stream into the body a non-streamed call would return."""

    def add(self, item: Any) -> None:
        raise NotImplementedError

    def body(self) -> dict[str, Any]:
        raise NotImplementedError


@dataclass
class Endpoint:
    """One wrapped SDK method."""

    provider: str  # provider id of the cache-key rules, e.g. "openai.chat"
    operation: str  # GenAI operation name
    to_body: Callable[[Any], dict[str, Any]]
    from_body: Callable[[dict[str, Any]], Any]
    meta: Callable[[dict[str, Any]], Meta]
    accumulator: Callable[[Mapping[str, Any]], Accumulator]
    replay_stream: Callable[[dict[str, Any], Any, bool], Any]  # (body, client, is_async)
    kind: Literal["client", "internal"] = "client"
    extra: dict[str, Any] = field(default_factory=dict)


def client_config(client: Any, sync_cls: Any, async_cls: Any, *, expected: str,
                  secret_attrs: Sequence[str], cache: Any, channel: str | None,
                  prices: Prices | None, capture_content: bool) -> tuple[Config, bool]:
    """``(Config, is_async)`` for a client of ``sync_cls``/``async_cls``, else TypeError."""
    if isinstance(client, async_cls):
        is_async = True
    elif isinstance(client, sync_cls):
        is_async = False
    else:
        raise TypeError(f"`client` must be an {expected}; found {type(client).__qualname__}")
    config = Config(cache=cache, channel=channel, prices=prices,
                    capture_content=capture_content,
                    secrets=client_secrets(client, secret_attrs),
                    base_url=str(client.base_url))
    return config, is_async


def wrap_copies(client: Any, rewrap: Callable[[Any], Any]) -> None:
    """Make ``client.copy()`` / ``client.with_options()`` return wrapped copies too.

    The SDKs build a fresh client (and fresh resources) for every copy, so without this a
    call through ``client.with_options(timeout=5)`` would escape the recording.
    """
    original = getattr(type(client), "copy", None)
    if original is None:
        return

    def copy(*args: Any, **kwargs: Any) -> Any:
        return rewrap(original(client, *args, **kwargs))

    functools.update_wrapper(copy, original)
    client.copy = copy
    client.with_options = copy


def _model_of(kwargs: Mapping[str, Any]) -> str:
    model = kwargs.get("model")
    return model if isinstance(model, str) else str(model)


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


_NOT_ITERATORS = frozenset({str, int, float, bool, type(None), list, dict, tuple, bytes})


class _Call:
    """One call in flight: its request, key and clock; records itself exactly once."""

    __slots__ = ("cache", "config", "endpoint", "key", "kwargs", "request", "t0")

    def __init__(self, endpoint: Endpoint, config: Config, kwargs: dict[str, Any],
                 cache: Any) -> None:
        self.endpoint = endpoint
        self.config = config
        self.cache = cache
        # The exact types first, in one C pass: an ABC isinstance check costs ~0.5 µs per
        # argument, and a Python loop over the arguments ~1 µs per call.
        if not _NOT_ITERATORS.issuperset(map(type, kwargs.values())):
            for name, value in list(kwargs.items()):
                if type(value) not in _NOT_ITERATORS and isinstance(value, Iterator):
                    # A generator (the SDKs accept any Iterable of messages) could be read
                    # only once: the SDK gets the same items as a list, and the key and
                    # record see them.
                    kwargs[name] = list(value)
        self.kwargs = kwargs
        request = dict(kwargs)
        if config.base_url is not None:
            request["base_url"] = config.base_url
        self.request = request
        options = _options.get() or _NO_OPTIONS
        channel = options.channel if options.channel is not None else config.channel
        self.key: Any = None
        try:
            self.key = _request_key()(endpoint.provider, request, draw=options.draw,
                                      channel=channel)
        except ValueError as exc:
            warnings.warn(
                f"{endpoint.provider}: this request has no cache key, so it is neither cached "
                f"nor replayable: {exc}", InstrumentationWarning, stacklevel=4)
        self.t0 = time.perf_counter_ns()

    @property
    def cached(self) -> bool:
        cache = self.cache
        if cache is None or cache.mode == "off":
            return False
        if self.key is None:
            if cache.mode == "read-only":
                raise _unkeyed_miss(self.endpoint)
            return False
        return True

    def record(self, body: dict[str, Any] | None, *, status: str | None,
               error: BaseException | None = None) -> None:
        seen = _observed.get()
        in_run = al.current_run() is not None
        if seen is None and not in_run:
            return
        latency = time.perf_counter_ns() - self.t0
        meta = Meta() if body is None else _safe_meta(self.endpoint, body)
        model = _model_of(self.kwargs)
        if seen is not None:
            seen.add(self.endpoint.provider, model, meta.response_model,
                     meta.fingerprint, hit=status == "hit", failed=error is not None)
        if not in_run:
            return
        if status is None and self.cache is not None:
            status = "off"
        al.llm_call(
            self.endpoint.provider,
            model,
            request=self.key.canonical if self.key is not None else _plain_request(self.request),
            response=body,
            operation=self.endpoint.operation,
            input_tokens=meta.input_tokens,
            output_tokens=meta.output_tokens,
            latency_ns=latency,
            prices=self.config.prices,
            error=error,
            response_model=meta.response_model,
            response_id=meta.response_id,
            finish_reasons=meta.finish_reasons,
            fingerprint=meta.fingerprint,
            cache_key=None if self.key is None else self.key.digest,
            cache=status,  # type: ignore[arg-type]
            secrets=self.config.secrets,
            capture_content=self.config.capture_content,
            kind=self.endpoint.kind,
            # The key's request already passed the scrubber's rules (its known secret
            # values and the run's redact hook are still applied).
            request_checked=self.key is not None and self.key.clean,
        )


def _safe_meta(endpoint: Endpoint, body: dict[str, Any]) -> Meta:
    try:
        return endpoint.meta(body)
    except Exception:  # an unexpected body shape costs the usage numbers, never the call
        return Meta()


def _plain_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """The request without values that have no canonical encoding (SDK sentinels, clients)."""
    out: dict[str, Any] = {}
    for k, v in request.items():
        if type(v).__name__ in ("NotGiven", "Omit"):
            continue
        out[k] = v if isinstance(v, str | int | float | bool | list | dict | tuple | None) \
            else repr(type(v).__name__)
    return out


def dump_body(obj: Any) -> dict[str, Any]:
    """The JSON body of an SDK response object (the fields the server sent):
    ``obj.model_dump(mode="json", exclude_unset=True)``, or a mapping as a dict."""
    # A pydantic model first: the Mapping ABC's isinstance test costs more than this one.
    if not hasattr(type(obj), "__pydantic_serializer__") and isinstance(obj, Mapping):
        return dict(obj)
    body: dict[str, Any] = obj.model_dump(mode="json", exclude_unset=True)
    return body


def sse_bytes(events: list[tuple[str | None, dict[str, Any]]], done: bool) -> bytes:
    """Server-sent-event bytes of ``(event name or None, data)`` pairs."""
    parts = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        parts.append(f"{head}data: {json.dumps(data)}\n\n")
    if done:
        parts.append("data: [DONE]\n\n")
    return "".join(parts).encode()


def sse_stream(sdk: Any, client: Any, cast_to: Any, data: bytes, is_async: bool) -> Any:
    """The SDK's own ``Stream``/``AsyncStream`` reading ``data`` (a cached stream replayed)."""
    import httpx2  # type: ignore[import-not-found,unused-ignore]

    response = httpx2.Response(
        200, headers={"content-type": "text/event-stream"}, content=data,
        request=httpx2.Request("POST", str(client.base_url)),
    )
    cls = sdk.AsyncStream if is_async else sdk.Stream
    return cls(cast_to=cast_to, response=response, client=client)


# --------------------------------------------------------------------------- sync / async


def wrap_method(resource: Any, name: str, endpoint: Endpoint, config: Config, *,
                client: Any, is_async: bool) -> None:
    """Replace ``resource.<name>`` (a bound SDK method) by a recording, caching one."""
    original = getattr(resource, name)
    if getattr(original, "__agentlog_endpoint__", None) is not None:
        original = original.__wrapped__  # wrapping twice re-configures, never stacks
    wrapper: Any = (_async_wrapper if is_async else _sync_wrapper)(original, endpoint, config,
                                                                   client)
    functools.update_wrapper(wrapper, original)
    wrapper.__agentlog_endpoint__ = endpoint
    setattr(resource, name, wrapper)


def _sync_wrapper(original: Callable[..., Any], endpoint: Endpoint, config: Config,
                  client: Any) -> Callable[..., Any]:
    def create(*args: Any, **kwargs: Any) -> Any:
        override = _override.get()  # the one lookup an unset override costs
        cache = config.cache if override is None else override.cache
        if bypassed(cache):
            return original(*args, **kwargs)
        call = _Call(endpoint, config, kwargs, cache)
        stream = bool(kwargs.get("stream"))
        try:
            cached = call.cached
        except al.CacheMiss as exc:
            call.record(None, status="miss", error=exc)
            raise
        if cached:
            kept: list[Any] = []

            def fetch() -> dict[str, Any]:
                result = original(*args, **kwargs)
                if stream:
                    return stored_body(_drain(endpoint, kwargs, result), config.secrets)
                kept.append(result)
                return stored_body(endpoint.to_body(result), config.secrets)

            try:
                served = cache.call(call.key, fetch)
            except BaseException as exc:
                if kept and isinstance(exc, Exception):  # the call returned: ours failed
                    return _unrecorded_body(call, kept[0], exc)
                call.record(None, status="miss", error=exc)
                raise
            call.record(served.response, status=served.status)
            if stream:
                return endpoint.replay_stream(served.response, client, False)
            return kept[0] if kept else endpoint.from_body(served.response)
        try:
            result = original(*args, **kwargs)
        except BaseException as exc:
            call.record(None, status=None, error=exc)
            raise
        if stream:
            return _instrument_stream(result, call, is_async=False)
        call.record(_recorded_body(call, result), status=None)
        return result

    return create


def _async_wrapper(original: Callable[..., Awaitable[Any]], endpoint: Endpoint, config: Config,
                   client: Any) -> Callable[..., Awaitable[Any]]:
    async def create(*args: Any, **kwargs: Any) -> Any:
        override = _override.get()  # the one lookup an unset override costs
        cache = config.cache if override is None else override.cache
        if bypassed(cache):
            return await original(*args, **kwargs)
        call = _Call(endpoint, config, kwargs, cache)
        stream = bool(kwargs.get("stream"))
        try:
            cached = call.cached
        except al.CacheMiss as exc:
            call.record(None, status="miss", error=exc)
            raise
        if cached:
            kept: list[Any] = []

            async def afetch() -> dict[str, Any]:
                result = await original(*args, **kwargs)
                if stream:
                    return stored_body(await _adrain(endpoint, kwargs, result),
                                       config.secrets)
                kept.append(result)
                return stored_body(endpoint.to_body(result), config.secrets)

            try:
                served = await cache.acall(call.key, afetch)
            except BaseException as exc:
                if kept and isinstance(exc, Exception):  # the call returned: ours failed
                    return _unrecorded_body(call, kept[0], exc)
                call.record(None, status="miss", error=exc)
                raise
            call.record(served.response, status=served.status)
            if stream:
                return endpoint.replay_stream(served.response, client, True)
            return kept[0] if kept else endpoint.from_body(served.response)
        try:
            result = await original(*args, **kwargs)
        except BaseException as exc:
            call.record(None, status=None, error=exc)
            raise
        if stream:
            return _instrument_stream(result, call, is_async=True)
        call.record(_recorded_body(call, result), status=None)
        return result

    return create


def _recorded_body(call: _Call, result: Any) -> dict[str, Any] | None:
    """``to_body(result)`` for the record; None and a warning when it fails (a response
    nested past pydantic's serialization depth): the call returned, and its result goes
    back to the caller whatever happens to the recording."""
    try:
        return call.endpoint.to_body(result)
    except Exception as exc:
        _warn_unread(call, exc)
        return None


def _unrecorded_body(call: _Call, result: Any, exc: Exception) -> Any:
    """The result of a cached call whose body could not be read or stored: returned all
    the same, recorded without a body (and not cached)."""
    _warn_unread(call, exc)
    call.record(None, status="miss")
    return result


def _warn_unread(call: _Call, exc: Exception) -> None:
    warnings.warn(
        f"{call.endpoint.provider}: the response could not be read for the record or the "
        f"cache ({type(exc).__qualname__}); the call returned and is recorded without its "
        "body", InstrumentationWarning, stacklevel=5)


def _drain(endpoint: Endpoint, request: Mapping[str, Any], stream: Any) -> dict[str, Any]:
    acc = endpoint.accumulator(request)
    with stream:
        for item in stream:
            acc.add(item)
    return acc.body()


async def _adrain(endpoint: Endpoint, request: Mapping[str, Any], stream: Any
                  ) -> dict[str, Any]:
    acc = endpoint.accumulator(request)
    async with stream:
        async for item in stream:
            acc.add(item)
    return acc.body()


# --------------------------------------------------------------------------- live streams


class _StreamRecording:
    """Records a live stream once: at its end, on its error, or when it is closed/dropped."""

    def __init__(self, call: _Call) -> None:
        self.call = call
        self.acc = call.endpoint.accumulator(call.kwargs)
        self.items = 0
        self._once = threading.Lock()
        self.context = contextvars.copy_context()

    def finish(self, error: BaseException | None = None) -> None:
        if not self._once.acquire(blocking=False):
            return
        body: dict[str, Any] | None
        try:
            body = self.acc.body()
        except Exception:
            body = None
        self.call.record(body, status=None, error=error)

    def closed_early(self) -> None:
        self.finish(StreamClosedError(
            f"the caller closed the stream after {self.items} item(s), before its end"))

    def dropped(self) -> None:
        # Runs inside the garbage collector, possibly while this thread holds a lock that
        # recording takes: hand the work to a worker thread instead of doing it here.
        if self._once.locked():
            return
        _deferred().put(lambda: self.context.run(self.closed_early))


def _instrument_stream(stream: Any, call: _Call, *, is_async: bool) -> Any:
    """Record ``stream`` as it is consumed; the caller gets the same object, same items.

    The SDK stream's item iterator (``_iterator``, the attribute both the openai and the
    anthropic ``Stream`` classes read items from) is replaced by a generator that passes
    each item through and accumulates it; ``close()`` is wrapped so that a stream closed
    early is recorded as such; a stream dropped unclosed is recorded from a finaliser.
    """
    recording = _StreamRecording(call)
    inner = stream._iterator
    if is_async:
        stream._iterator = _arecorded(inner, recording)
    else:
        stream._iterator = _recorded(inner, recording)
    original_close = stream.close

    if is_async and _is_coroutine_function(original_close):
        async def aclose() -> None:
            try:
                await original_close()
            finally:
                recording.closed_early()

        stream.close = aclose
    else:
        def close() -> None:
            try:
                original_close()
            finally:
                recording.closed_early()

        stream.close = close
    weakref.finalize(stream, recording.dropped)
    return stream


def _is_coroutine_function(fn: Any) -> bool:
    import inspect

    return inspect.iscoroutinefunction(fn)


def _recorded(inner: Iterator[Any], recording: _StreamRecording) -> Iterator[Any]:
    try:
        for item in inner:
            recording.acc.add(item)
            recording.items += 1
            yield item
    except GeneratorExit:
        raise  # dropped: the finaliser records it, outside the collector
    except BaseException as exc:
        recording.finish(exc)
        raise
    recording.finish()


async def _arecorded(inner: AsyncIterator[Any], recording: _StreamRecording
                     ) -> AsyncIterator[Any]:
    try:
        async for item in inner:
            recording.acc.add(item)
            recording.items += 1
            yield item
    except GeneratorExit:
        raise
    except BaseException as exc:
        recording.finish(exc)
        raise
    recording.finish()


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
