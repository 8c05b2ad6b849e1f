"""Retry of transient failures: exponential backoff with full jitter, classified errors.

One policy for everything agentlog retries: replay units (``agentlog.replay.run_units``)
and export batches sent through an exporter of your own (``agentlog.export.to_otlp``;
the OTLP exporter retries transient failures itself, so agentlog adds no retries to it).

An attempt that raises is retried only when the error can go away by waiting: a rate
limit (HTTP 429), a server error (5xx), 408 (request timeout) and 409 (conflict, which
providers use for "busy"), a timeout or a connection error. Every other 4xx, a
``CacheMiss`` and a programming error fail the unit at once: asking again would give the
same answer.

The classification reads the exception's HTTP status (``status_code``, ``status`` or
``response.status_code``, as the openai, anthropic, httpx and requests exceptions carry
it) and, for errors without one, its class and base-class names (``RateLimitError``,
``APITimeoutError``, ``APIConnectionError``, httpx's ``TimeoutException`` and
``TransportError``...) or the builtin ``TimeoutError``/``ConnectionError``, so that no SDK
has to be imported to classify its errors.

The delay before attempt ``k + 1`` is drawn uniformly from ``[0, min(cap, base · 2^(k-1))]``
("full jitter": clients that failed together do not retry together), and is at least the
server's ``Retry-After`` when it sent one (never above ``cap``).

Examples:
    >>> import random
    >>> from agentlog.retry import RetryPolicy, is_transient
    >>> policy = RetryPolicy(max_attempts=4, base=0.5, cap=8.0)
    >>> [policy.ceiling(k) for k in (1, 2, 3, 4, 5, 6)]
    [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    >>> 0.0 <= policy.delay(3, rng=random.Random(1)) <= 2.0
    True
    >>> is_transient(TimeoutError("read timed out")), is_transient(KeyError("x"))
    (True, False)
"""

from __future__ import annotations

import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agentlog._errors import CacheMiss

__all__ = ["RetryPolicy", "is_transient", "retry_after"]

_TRANSIENT_STATUS = frozenset({408, 409, 429})
# Class names (anywhere in the MRO) of SDK errors that mean "try again later" but carry no
# status: connection and timeout errors of openai, anthropic, httpx, requests, aiohttp.
_TRANSIENT_NAMES = frozenset({
    "APIConnectionError", "APITimeoutError", "RateLimitError", "InternalServerError",
    "ServiceUnavailableError", "OverloadedError", "TimeoutException", "TransportError",
    "NetworkError", "ConnectError", "ConnectTimeout", "ReadTimeout", "WriteTimeout",
    "PoolTimeout", "ReadError", "WriteError", "RemoteProtocolError",
    "ServerDisconnectedError", "ClientConnectionError", "ConnectionError", "Timeout",
})


def _status_of(exc: BaseException) -> int | None:
    for holder in (exc, getattr(exc, "response", None)):
        if holder is None:
            continue
        for attr in ("status_code", "status"):
            value = getattr(holder, attr, None)
            if isinstance(value, int) and not isinstance(value, bool) and 100 <= value < 600:
                return value
    return None


def is_transient(exc: BaseException) -> bool:
    """Whether waiting and asking again can succeed (see the module docstring)."""
    if isinstance(exc, CacheMiss):
        return False
    status = _status_of(exc)
    if status is not None:
        return status in _TRANSIENT_STATUS or status >= 500
    if isinstance(exc, TimeoutError | ConnectionError):
        return True
    return any(cls.__name__ in _TRANSIENT_NAMES for cls in type(exc).__mro__)


def retry_after(exc: BaseException) -> float | None:
    """The seconds a server asked to wait (a ``Retry-After`` header in seconds), or None."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        value = headers.get("retry-after")
    except Exception:  # a headers object of an unknown kind: no hint, not a failure
        return None
    if value is None:
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None  # an HTTP date: rare from model APIs, and the backoff covers it
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry a unit whose attempt failed transiently.

    Args:
        max_attempts: attempts per unit, the first included (1: never retry).
        base: ceiling of the first delay, in seconds; it doubles per attempt.
        cap: the largest delay, in seconds (also bounds a server's ``Retry-After``).
        seed: seed of the jitter's random numbers (None: fresh entropy).
        sleep: ``await sleep(seconds)`` used between attempts; default ``asyncio.sleep``.
            A test passes a fake clock here. Not sent to Ray workers, which use the
            default.

    Raises:
        ValueError: ``max_attempts < 1``, a negative or non-finite ``base``/``cap``, or
            ``cap < base``.
    """

    max_attempts: int = 4
    base: float = 0.5
    cap: float = 30.0
    seed: int | None = None
    sleep: Callable[[float], Awaitable[Any]] | None = field(default=None, compare=False,
                                                             repr=False)

    def __post_init__(self) -> None:
        if (isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int)
                or self.max_attempts < 1):
            raise ValueError(f"`max_attempts` must be an int >= 1; found {self.max_attempts!r}")
        for name in ("base", "cap"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not (
                    math.isfinite(v) and v >= 0):
                raise ValueError(f"`{name}` must be a finite number of seconds >= 0; "
                                 f"found {v!r}")
        if self.cap < self.base:
            raise ValueError(f"`cap` ({self.cap}) must be >= `base` ({self.base})")

    def ceiling(self, attempt: int) -> float:
        """The largest delay after failed attempt ``k`` (from 1): ``min(cap, base·2^(k-1))``."""
        return min(self.cap, self.base * 2.0 ** min(attempt - 1, 1024))

    def delay(self, attempt: int, *, rng: random.Random,
              retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt ``attempt``: full jitter, >= ``retry_after``."""
        wait = rng.uniform(0.0, self.ceiling(attempt))
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.cap))
        return wait

    def to_wire(self) -> tuple[int, float, float, int | None]:
        """Plain data for a worker process (the ``sleep`` hook stays here)."""
        return (self.max_attempts, float(self.base), float(self.cap), self.seed)
