"""Units of replay work: what a job receives, what it returns, and what the summary counts.

A ``Unit`` is the smallest piece of replay work that is resumed as a whole: its ``key`` is
the resume identity (the caller builds it, e.g. the SHA-256 hex of a canonical
``(transition, channel, layout, wave)`` tuple), its ``payload`` is plain msgpack data that
crosses to a worker process as bytes, and its ``provenance`` is stored verbatim with its
output. A *job* is a function ``job(unit, ctx) -> Sequence[UnitScore]`` (sync or async)
named by ``"module:qualname"``, so a worker imports it and nothing is pickled by agentlog.

Examples:
    >>> from agentlog.replay import Unit, UnitScore
    >>> unit = Unit("u-1", payload={"x": 2.0}, provenance={"source_run": "r1"})
    >>> score = UnitScore("margin", unit.payload["x"] ** 2, channel="quote", layout=0)
    >>> score.value, score.channel, score.transition
    (4.0, 'quote', None)
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from agentlog.adapters import observing
from agentlog.registry import resolve

if TYPE_CHECKING:
    from agentlog.adapters import CacheKey, CacheResult, ModelCache

__all__ = [
    "Job",
    "RunSummary",
    "Unit",
    "UnitContext",
    "UnitFailure",
    "UnitScore",
    "resolve_job",
]

_JOB_ID = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_KEY_MAX = 256  # a key is an identity, not data: long keys are a caller's mistake

# Meta keys the engine writes beside a unit's provenance (see the output layout in
# agentlog.replay._unit_output); provenance may not use them.
RESERVED_PROVENANCE = ("attempts", "job", "status", "unit")


@dataclass(frozen=True)
class Unit:
    """One resumable piece of replay work.

    Attributes:
        key: the resume identity, a short stable string (at most 256 characters): a
            re-run skips every unit whose key is sealed in the output.
        payload: what the job needs, as plain msgpack data (str, int, float, bool, None,
            bytes, lists and str-keyed maps): no callables, no objects. The job receives
            it decoded from its msgpack bytes, whichever executor runs it, so tuples
            arrive as lists.
        provenance: stored verbatim in the unit's output run (source trace hash, source
            run id, window id, channel name and hash, ...); plain data as ``payload``.
    """

    key: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    provenance: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class UnitScore:
    """One output score of a unit, written as a ``Score`` record of the unit's output run.

    ``value`` must be a finite real number; the other fields say what was scored, so an
    estimator can join the output with the source (``transition`` is the source window
    id, ``state_hash`` the sealed hash of the scored state).
    """

    name: str
    value: float
    channel: str | None = None
    layout: int | None = None
    wave: int | None = None
    transition: int | None = None
    state_hash: bytes | None = None


@dataclass(frozen=True)
class UnitFailure:
    """A unit whose last attempt raised: recorded in the output and retried by a re-run.

    Attributes:
        key: the unit's key.
        error_type: the exception's qualified class name (e.g. ``"RateLimitError"``).
        message: the exception's message as it was written to the output (scrubbed of
            credentials by the recording core).
        attempts: how many attempts were made.
        transient: the error was classified as transient (rate limit, 5xx, timeout,
            connection error) and the attempts ran out; False for a permanent error.
    """

    key: str
    error_type: str
    message: str
    attempts: int
    transient: bool = False


class UnitContext:
    """What a job may use besides its unit: the model cache and the call counters.

    Attributes:
        key: the unit's key.
        attempt: the attempt number, from 1.
        cache: the exact-input model cache of this replay (``ModelCache``), or None. It is
            read-only when the replay is frozen: a miss raises ``agentlog.CacheMiss`` and
            fails the unit (never retried).
        frozen: whether the replay is frozen.
        live_calls: model calls this attempt made without the cache; a job that calls a
            model directly adds to it (``ctx.live_calls += 1``) so the summary counts it.
            Calls through ``cache`` (directly or through an adapter) are counted by the
            cache itself.
    """

    __slots__ = ("attempt", "cache", "frozen", "key", "live_calls")

    def __init__(self, key: str, attempt: int, cache: ModelCache | None, *,
                 frozen: bool = False) -> None:
        self.key = key
        self.attempt = attempt
        self.cache = cache
        self.frozen = frozen
        self.live_calls = 0

    def cached(self, key: CacheKey, fetch: Callable[[], dict[str, Any]]) -> CacheResult:
        """``cache.call(key, fetch)``, or ``fetch()`` counted as a live call without a cache.

        Raises:
            agentlog.CacheMiss: the replay is frozen and ``key`` is not in the cache.
        """
        try:
            result = (self._uncached(key, fetch()) if self.cache is None
                      else self.cache.call(key, fetch))
        except BaseException:
            _observe(key, None, failed=True)
            raise
        _observe(key, result)
        return result

    async def acached(self, key: CacheKey,
                      afetch: Callable[[], Awaitable[dict[str, Any]]]) -> CacheResult:
        """The async twin of ``cached``."""
        try:
            result = (self._uncached(key, await afetch()) if self.cache is None
                      else await self.cache.acall(key, afetch))
        except BaseException:
            _observe(key, None, failed=True)
            raise
        _observe(key, result)
        return result

    def _uncached(self, key: CacheKey, response: dict[str, Any]) -> CacheResult:
        from agentlog.adapters import CacheResult

        self.live_calls += 1
        return CacheResult(response, "off", key, None)

    def __repr__(self) -> str:
        return f"UnitContext(key={self.key!r}, attempt={self.attempt}, frozen={self.frozen})"


def _observe(key: CacheKey, result: CacheResult | None, *, failed: bool = False) -> None:
    """Count a call made through ``UnitContext.cached`` where wrapped clients' calls go."""
    seen = observing()
    if seen is not None:
        seen.add(key.provider, key.model or "", None,
                 None if result is None else result.fingerprint,
                 hit=result is not None and result.status == "hit", failed=failed)


class Job(Protocol):
    """What a unit does: ``job(unit, ctx)`` returns the unit's scores (or awaits them)."""

    def __call__(self, unit: Unit, ctx: UnitContext
                 ) -> Sequence[UnitScore] | Awaitable[Sequence[UnitScore]]: ...


@dataclass(frozen=True)
class RunSummary:
    """What a replay did.

    Attributes:
        total: units asked for.
        skipped: units already sealed in the output (not run again).
        done: units run to completion and written in this call.
        failed: units whose last attempt failed (written as failures, retried by a re-run).
        failures: one ``UnitFailure`` per failed unit.
        cache_hits: model calls served from the cache.
        cache_misses: model calls the cache did not hold (each became a live call, or a
            ``CacheMiss`` when frozen).
        live_calls: model calls that went upstream.
        wall_s: seconds this call took.
        retries: attempts beyond each unit's first.
        interrupted: the call was interrupted (Ctrl-C, cancellation) before every unit
            ran; the units written so far are sealed, a re-run does the rest.
    """

    total: int
    skipped: int
    done: int
    failed: int
    failures: list[UnitFailure]
    cache_hits: int
    cache_misses: int
    live_calls: int
    wall_s: float
    retries: int = 0
    interrupted: bool = False

    @property
    def pending(self) -> int:
        """Units neither skipped nor finished (left by an interruption)."""
        return self.total - self.skipped - self.done - self.failed

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``: every attribute, failures as maps."""
        return {
            "total": self.total,
            "skipped": self.skipped,
            "done": self.done,
            "failed": self.failed,
            "pending": self.pending,
            "failures": [
                {"key": f.key, "error_type": f.error_type, "message": f.message,
                 "attempts": f.attempts, "transient": f.transient}
                for f in self.failures
            ],
            "cache_hits": self.cache_hits,
            "cache_misses": self.cache_misses,
            "live_calls": self.live_calls,
            "retries": self.retries,
            "interrupted": self.interrupted,
            "wall_s": self.wall_s,
        }


# ---------------------------------------------------------------------------- jobs


def resolve_job(job: str | Callable[..., Any]) -> tuple[Callable[..., Any], str | None]:
    """The job function and its ``"module:qualname"`` id (None when it has none).

    A string is imported (the user named it, a trace never does); a callable is used as
    given, and its id is kept only when importing the id gives back the same object, so a
    worker process can find it.

    Raises:
        ValueError: a string that is not ``"module:qualname"``.
        ImportError: the module cannot be imported.
        AttributeError: the module has no such attribute.
        TypeError: the object is not callable.
    """
    if isinstance(job, str):
        job = LEGACY_JOBS.get(job, job)
        if not _JOB_ID.match(job):
            raise ValueError(
                f"`job` must be 'module:qualname' (e.g. 'mypkg.jobs:score_unit'); "
                f"found {job!r}")
        fn = resolve(job, what="job")
        if not callable(fn):
            raise TypeError(f"`job` {job!r} names a {type(fn).__name__}, not a function")
        return fn, job
    if not callable(job):
        raise TypeError(f"`job` must be 'module:qualname' or a callable; found "
                        f"{type(job).__name__}")
    module = getattr(job, "__module__", None)
    qualname = getattr(job, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        return job, None
    job_id = f"{module}:{qualname}"
    if not _JOB_ID.match(job_id):
        return job, None  # a lambda or a function defined inside another one
    try:
        same = resolve(job_id, what="job") is job
    except (ImportError, AttributeError):
        same = False
    return job, job_id if same else None


# The private module paths older agentlogs wrote as job ids -> the jobs' public names.
LEGACY_JOBS = {
    "agentlog.replay._channel_replay:score_channel_unit": "agentlog.replay:score_channel_unit",
    "agentlog.replay._channel_replay:ascore_channel_unit": "agentlog.replay:ascore_channel_unit",
    "agentlog.replay._intervene:reenter_job": "agentlog.replay:reenter_job",
}


def is_async_job(fn: Callable[..., Any]) -> bool:
    """A coroutine function, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None))  # noqa: B004 - callable() cannot tell async


# ---------------------------------------------------------------------------- data checks

_msgpack_enc = msgspec.msgpack.Encoder()
_msgpack_dec = msgspec.msgpack.Decoder()


def encode_unit(unit: Unit, index: int) -> bytes:
    """The unit's wire form, ``msgpack([key, payload, provenance])``, checked.

    Raises:
        TypeError: not a ``Unit``, a key that is not a short str, or a payload or
            provenance that is not plain msgpack data (named by unit key).
        ValueError: an empty key, or provenance using a key the engine writes itself.
    """
    if not isinstance(unit, Unit):
        raise TypeError(f"`units` must hold agentlog.replay.Unit objects; item {index} is a "
                        f"{type(unit).__name__}")
    key = unit.key
    if not isinstance(key, str) or not key or len(key) > _KEY_MAX:
        shown = repr(key)[:80]
        raise (TypeError if not isinstance(key, str) else ValueError)(
            f"unit {index}: `key` must be a non-empty str of at most {_KEY_MAX} characters "
            f"(e.g. the sha256 hex of the unit's identity); found {shown}")
    for what, value in (("payload", unit.payload), ("provenance", unit.provenance)):
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise TypeError(f"unit {key!r}: `{what}` must be a mapping with str keys; found "
                            f"{type(value).__name__}")
    clash = sorted(set(unit.provenance) & set(RESERVED_PROVENANCE))
    if clash:
        raise ValueError(f"unit {key!r}: `provenance` may not use the key(s) {clash}, which "
                         f"the replay engine writes itself; rename them")
    try:
        return _msgpack_enc.encode([key, dict(unit.payload), dict(unit.provenance)])
    except (TypeError, OverflowError) as exc:
        raise TypeError(
            f"unit {key!r}: `payload` and `provenance` must be plain msgpack data (str, int, "
            f"float, bool, None, bytes, lists, str-keyed maps); {exc}. Pass ids and values, "
            "not objects: the job rebuilds what it needs from them") from None


def decode_unit(data: bytes) -> Unit:
    """The unit a job receives: decoded from its wire form (what every executor does)."""
    key, payload, provenance = _msgpack_dec.decode(data)
    return Unit(key, payload, provenance)


ScoreTuple = tuple[str, float, str | None, int | None, int | None, int | None, bytes | None]


def check_scores(result: Any, key: str) -> list[ScoreTuple]:
    """A job's result as plain tuples, or a ``TypeError``/``ValueError`` that fails the unit."""
    if isinstance(result, UnitScore):
        result = [result]
    if not isinstance(result, Sequence) or isinstance(result, str | bytes):
        raise TypeError(f"job of unit {key!r} must return a sequence of UnitScore; returned "
                        f"{type(result).__name__}")
    out: list[ScoreTuple] = []
    for i, s in enumerate(result):
        if not isinstance(s, UnitScore):
            raise TypeError(f"job of unit {key!r}: item {i} of its result is a "
                            f"{type(s).__name__}, not a UnitScore")
        if not isinstance(s.name, str) or not s.name:
            raise TypeError(f"job of unit {key!r}: score {i} needs a non-empty str `name`")
        if isinstance(s.value, bool) or not isinstance(s.value, int | float):
            raise TypeError(f"job of unit {key!r}: score {s.name!r} must have a real `value`;"
                            f" found {type(s.value).__name__}")
        if not math.isfinite(s.value):
            raise ValueError(f"job of unit {key!r}: score {s.name!r} is {s.value}; a NaN or "
                             "infinite score would make every estimate over it NaN")
        for attr in ("layout", "wave", "transition"):
            v = getattr(s, attr)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise TypeError(f"job of unit {key!r}: score {s.name!r} `{attr}` must be an "
                                f"int or None; found {type(v).__name__}")
        if s.channel is not None and not isinstance(s.channel, str):
            raise TypeError(f"job of unit {key!r}: score {s.name!r} `channel` must be a str "
                            f"or None; found {type(s.channel).__name__}")
        if s.state_hash is not None and not isinstance(s.state_hash, bytes):
            raise TypeError(f"job of unit {key!r}: score {s.name!r} `state_hash` must be "
                            f"bytes or None; found {type(s.state_hash).__name__}")
        out.append((s.name, float(s.value), s.channel, s.layout, s.wave, s.transition,
                    s.state_hash))
    return out


def score_of(t: Sequence[Any]) -> UnitScore:
    """A ``UnitScore`` from its plain tuple."""
    return UnitScore(t[0], t[1], t[2], t[3], t[4], t[5], t[6])
