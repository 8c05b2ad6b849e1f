"""The exact-input model cache: every adapter call goes through it; it makes replay frozen.

Entries live in SQLite (stdlib ``sqlite3``, WAL journal) keyed by the 32-byte digest of a
``CacheKey``; each keeps the canonical request, the JSON response body and the serving
fingerprint. Nothing is pickled: bodies are JSON text. One connection per thread and
process; writes are single ``INSERT OR IGNORE`` statements, so two processes writing the
same key agree on the first answer, and every lock wait is bounded by ``busy_timeout``.

Concurrent identical requests share one upstream call (threads and asyncio tasks alike):
the first caller fetches, the others wait for its answer (at most ``flight_timeout``
seconds, then they fetch themselves). Failures are never stored; the fetching caller's
exception propagates unchanged and the callers that shared the call get the same one. A
fetching caller that is cancelled or interrupted hands the flight over: one of the
callers waiting for it fetches in its place and the others wait for that one.

Examples:
    >>> from agentlog.adapters import ModelCache, request_key
    >>> cache = ModelCache(path=":memory:")
    >>> key = request_key("openai.chat", {"model": "m", "messages": [{"role": "user",
    ...                                   "content": "hi"}]})
    >>> cache.call(key, lambda: {"choices": []}).status
    'miss'
    >>> cache.call(key, lambda: {"choices": []}).status
    'hit'
    >>> cache.close()
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import sqlite3
import threading
import time
import warnings
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec

from agentlog import CacheMiss, InstrumentationWarning, Trace
from agentlog import read as read_trace
from agentlog.records import ABSENT
from agentlog.records import artifact_differences as differences

from ._request_fields import CacheKey, request_fields, request_key

__all__ = ["CacheMode", "CacheResult", "CacheStatus", "ModelCache", "default_cache_path"]

CacheMode = Literal["read-write", "read-only", "off"]
CacheStatus = Literal["hit", "miss", "off"]
_MODES = ("read-write", "read-only", "off")
_SCHEMA_VERSION = "1"
_NEAREST_LIMIT = 2000  # stored requests compared on a miss: bounded work per miss

_json_enc = msgspec.json.Encoder(order="sorted")
_json_dec = msgspec.json.Decoder()

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    key BLOB PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT,
    version INTEGER NOT NULL,
    canonical TEXT NOT NULL,
    response TEXT NOT NULL,
    fingerprint TEXT,
    created_ns INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_provider_model ON entries (provider, model, created_ns);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def default_cache_path() -> Path:
    """Where ``ModelCache(path=None)`` keeps its entries.

    ``$AGENTLOG_CACHE`` if set, else ``$XDG_CACHE_HOME/agentlog/model-cache.sqlite3``, else
    ``~/.cache/agentlog/model-cache.sqlite3``.
    """
    env = os.environ.get("AGENTLOG_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "agentlog" / "model-cache.sqlite3"


@dataclass(frozen=True, slots=True)
class CacheResult:
    """What ``ModelCache.call`` returns.

    Attributes:
        response: the JSON-compatible response body (a fresh copy on every hit).
        status: ``"hit"`` (served without an upstream call of this caller), ``"miss"``
            (fetched upstream and stored) or ``"off"`` (the cache is off).
        key: the request's key.
        fingerprint: the serving fingerprint stored with the entry (e.g. the
            ``system_fingerprint``), when known.
    """

    response: dict[str, Any]
    status: CacheStatus
    key: CacheKey
    fingerprint: str | None


@dataclass(frozen=True, slots=True)
class _Entry:
    response: bytes  # JSON text of the body
    fingerprint: str | None


class _LeaderGone(Exception):
    """The caller that fetched for everyone was cancelled: one of the others takes over."""


class _Unshared(Exception):
    """The leader's answer cannot be stored, so it cannot be shared: each caller fetches."""


def _fingerprint_of(response: Mapping[str, Any]) -> str | None:
    value = response.get("system_fingerprint")
    return value if isinstance(value, str) else None


class _SqliteStore:
    def __init__(self, path: str, *, read_only: bool, busy_timeout_s: float) -> None:
        self.path = path
        self._read_only = read_only
        self._busy_ms = int(busy_timeout_s * 1000)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[sqlite3.Connection] = []
        self._memory = path == ":memory:"
        if self._memory:
            # One shared connection: each new ":memory:" connection would be another database.
            self._shared: sqlite3.Connection | None = self._open()
        else:
            self._shared = None
            if os.path.isdir(path):
                raise ValueError(f"model cache {path!r} is a folder; a model cache is a SQLite "
                                 "file path, e.g. 'runs/cache.sqlite' (created when missing)")
            try:
                # Fail now, with the path in the message, not at the first call; a read-only
                # connection opens lazily, so ask it for the table every lookup reads.
                tables = _tables(self._conn())
            except sqlite3.Error as exc:
                self.close()
                raise _open_error(path, exc, read_only=read_only) from exc
            if "entries" not in tables:
                self.close()
                raise _not_a_cache(path, tables)

    def _open(self) -> sqlite3.Connection:
        if self._read_only:
            if not self._memory and not os.path.exists(self.path):
                raise FileNotFoundError(
                    f"read-only model cache {self.path!r} does not exist; record the run with "
                    "mode='read-write' first, or pass the path of an existing cache")
            uri = "file::memory:" if self._memory else f"{Path(self.path).resolve().as_uri()}"
            conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, isolation_level=None,
                                   check_same_thread=False, timeout=self._busy_ms / 1000)
        else:
            if not self._memory:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                   timeout=self._busy_ms / 1000)
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            tables = _tables(conn)
            if tables and "entries" not in tables:  # another program's database: leave it be
                conn.close()
                raise _not_a_cache(self.path, tables)
            if not self._memory:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
            conn.executescript(_SCHEMA)
            conn.execute("INSERT OR IGNORE INTO meta (name, value) VALUES ('schema', ?)",
                         (_SCHEMA_VERSION,))
        with self._lock:
            self._all.append(conn)
        return conn

    def _conn(self) -> sqlite3.Connection:
        if self._shared is not None:
            return self._shared
        local = self._local
        conn: sqlite3.Connection | None = getattr(local, "conn", None)
        if conn is None or local.pid != os.getpid():
            # A forked child must not share its parent's connection.
            conn = self._open()
            local.conn, local.pid = conn, os.getpid()
        return conn

    def _rows(self, sql: str, args: tuple[Any, ...], *, one: bool = False) -> Any:
        if self._shared is not None:
            with self._lock:
                cur = self._shared.execute(sql, args)
                return cur.fetchone() if one else cur.fetchall()
        cur = self._conn().execute(sql, args)
        return cur.fetchone() if one else cur.fetchall()

    def get(self, digest: bytes) -> _Entry | None:
        row = self._rows("SELECT response, fingerprint FROM entries WHERE key = ?", (digest,),
                         one=True)
        return None if row is None else _Entry(row[0].encode(), row[1])

    def put(self, key: CacheKey, body: bytes, fingerprint: str | None) -> None:
        self._rows("INSERT OR IGNORE INTO entries (key, provider, model, version, canonical, "
                   "response, fingerprint, created_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                   (key.digest, key.provider, key.model, key.version,
                    _json_enc.encode(key.canonical).decode(), body.decode(), fingerprint,
                    time.time_ns()))

    def stored_requests(self, provider: str, model: str | None) -> Iterator[dict[str, Any]]:
        rows = self._rows("SELECT canonical FROM entries WHERE provider = ? AND model IS ? "
                          "ORDER BY created_ns DESC LIMIT ?", (provider, model, _NEAREST_LIMIT))
        for (text,) in rows:
            yield _json_dec.decode(text)

    def models(self, provider: str) -> list[str | None]:
        rows = self._rows("SELECT DISTINCT model FROM entries WHERE provider = ? LIMIT 20",
                          (provider,))
        return [row[0] for row in rows]

    def __len__(self) -> int:
        return int(self._rows("SELECT count(*) FROM entries", (), one=True)[0])

    def close(self) -> None:
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()


def _open_error(path: str, exc: sqlite3.Error, *, read_only: bool) -> Exception:
    """What opening the model cache at ``path`` failed with, in words (not SQLite's)."""
    text = str(exc)
    if not isinstance(exc, sqlite3.OperationalError) or "not a database" in text:
        return ValueError(f"model cache {path!r} is not a SQLite file ({text}); a model cache "
                          "is a SQLite file path: pass the path of a cache a ModelCache wrote, "
                          "or a new file name, e.g. 'runs/cache.sqlite'")
    access = "read" if read_only else "read and write"
    return OSError(f"model cache {path!r} cannot be opened ({text}); check that it names a "
                   f"file you may {access}, in a folder you may write")


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _not_a_cache(path: str, tables: set[str]) -> ValueError:
    held = f"its tables: {', '.join(sorted(tables))}" if tables else "it holds no table"
    return ValueError(f"model cache {path!r} is a SQLite file but not an agentlog model cache "
                      f"({held}); pass the path of a cache a ModelCache wrote, or a new file "
                      "name, e.g. 'runs/cache.sqlite'")


class _MemoryStore:
    """Entries served from recorded traces (read-only)."""

    def __init__(self, source: str) -> None:
        self.path = source
        self.entries: dict[bytes, _Entry] = {}
        self.requests: dict[tuple[str, str | None], list[dict[str, Any]]] = {}

    def add(self, digest: bytes, canonical: dict[str, Any] | None, provider: str,
            model: str | None, body: bytes, fingerprint: str | None) -> None:
        if digest in self.entries:
            return  # the first recording of a request is the one replay reproduces
        self.entries[digest] = _Entry(body, fingerprint)
        if canonical is not None:
            self.requests.setdefault((provider, model), []).append(canonical)

    def get(self, digest: bytes) -> _Entry | None:
        return self.entries.get(digest)

    def put(self, key: CacheKey, body: bytes, fingerprint: str | None) -> None:
        raise AssertionError("a cache served from traces is read-only")  # pragma: no cover

    def stored_requests(self, provider: str, model: str | None) -> Iterator[dict[str, Any]]:
        yield from reversed(self.requests.get((provider, model), [])[-_NEAREST_LIMIT:])

    def models(self, provider: str) -> list[str | None]:
        return sorted({m for p, m in self.requests if p == provider}, key=str)[:20]

    def __len__(self) -> int:
        return len(self.entries)

    def close(self) -> None:
        return None


def _short(value: Any) -> str:
    if value is ABSENT:
        return "absent"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class ModelCache:
    """The exact-input cache of model calls.

    Args:
        path: SQLite file; ``None`` means ``default_cache_path()``; ``":memory:"`` keeps
            entries in this process only.
        mode: ``"read-write"`` (serve hits, store misses), ``"read-only"`` (a miss raises
            ``agentlog.CacheMiss``) or ``"off"`` (every call goes upstream, nothing stored).
        flight_timeout: seconds a caller waits for an identical in-flight call before it
            fetches itself.
        busy_timeout: seconds SQLite waits for another writer's lock.

    Raises:
        ValueError: an unknown ``mode`` or a non-positive timeout; ``path`` is a folder, or
            a file that is not a model cache (not SQLite, or another SQLite database).
        FileNotFoundError: ``mode="read-only"`` and the file does not exist.
        OSError: the file (or its folder) cannot be opened as the mode needs.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 mode: CacheMode = "read-write", flight_timeout: float = 300.0,
                 busy_timeout: float = 30.0) -> None:
        _cache_iv(mode, flight_timeout, busy_timeout)
        target = str(default_cache_path() if path is None else os.fspath(path))
        store = None if mode == "off" else _SqliteStore(
            target, read_only=mode == "read-only", busy_timeout_s=busy_timeout)
        if store is not None:
            # A cache nobody closes (one an adapter opened from a path given to wrap())
            # closes its connections when it is collected, or at exit.
            weakref.finalize(self, store.close)
        self._setup(store, mode=mode, path=target, flight_timeout=flight_timeout)

    def _setup(self, store: _SqliteStore | _MemoryStore | None, *, mode: CacheMode, path: str,
               flight_timeout: float) -> None:
        self.mode: CacheMode = mode
        self.path = path
        self.flight_timeout = flight_timeout
        self._store = store
        self._lock = threading.Lock()
        self._flights: dict[bytes, concurrent.futures.Future[_Entry]] = {}
        self._stats = {"hits": 0, "misses": 0, "upstream_calls": 0, "shared": 0}

    @classmethod
    def from_traces(cls, paths: Iterable[str | os.PathLike[str] | Trace] | str
                    | os.PathLike[str] | Trace) -> ModelCache:
        """A read-only cache serving the successful ``LLMCall`` records of recorded traces.

        Records without a ``cache_key`` (recorded without the cache) and failed calls are
        skipped; of two records with one key, the first recorded is served.

        Raises:
            TraceFormatError, OSError: as ``agentlog.read``.
            ValueError: ``paths`` is empty.
        """
        items = [paths] if isinstance(paths, str | os.PathLike | Trace) else list(paths)
        if not items:
            raise ValueError("`paths` must name at least one trace file; got none")
        store = _MemoryStore(", ".join(p.path if isinstance(p, Trace) else os.fspath(p)
                                       for p in items))
        for item in items:
            trace = item if isinstance(item, Trace) else read_trace(item)
            for call in trace.llm_calls():
                if call.status != 0 or call.cache_key is None:
                    continue
                try:
                    body = msgspec.msgpack.decode(call.response)
                    request = msgspec.msgpack.decode(call.request)
                except msgspec.DecodeError:
                    continue
                canonical = _canonical_of(call.provider, request)
                model = call.model if canonical is None else canonical["request"].get("model")
                store.add(call.cache_key, canonical, call.provider, model,
                          _json_enc.encode(body), call.fingerprint)
        cache = cls.__new__(cls)
        cache._setup(store, mode="read-only", path=store.path, flight_timeout=300.0)
        return cache

    # ------------------------------------------------------------------ serving

    def call(self, key: CacheKey, fetch: Callable[[], dict[str, Any]]) -> CacheResult:
        """Serve ``key`` from the cache, or call ``fetch()`` once and store its answer.

        Raises:
            agentlog.CacheMiss: read-only mode and ``key`` is not stored (the message names
                the fields that differ from the nearest stored request).
            Exception: whatever ``fetch`` raised, unchanged (nothing is stored).
        """
        if self._store is None:
            return self._off(key, fetch())
        found = self._lookup(key)
        if found is not None:
            return found
        while True:
            future, leader = self._join(key.digest)
            if leader:
                break
            try:
                entry = future.result(timeout=self.flight_timeout)
            except _LeaderGone:
                continue  # the leader was cancelled: the first of us to rejoin leads
            except (concurrent.futures.TimeoutError, _Unshared):
                return self._fetch_alone(key, fetch)
            return self._shared(key, entry)
        try:
            found = self._recheck(key, future)
            if found is not None:
                return found
            self._count("upstream_calls")
            # Stored before the flight ends, so a caller arriving later finds the entry.
            return self._store_result(key, fetch(), future)
        except BaseException as exc:
            _fail(future, exc)
            raise
        finally:
            self._leave(key.digest, future)

    async def acall(self, key: CacheKey,
                    afetch: Callable[[], Awaitable[dict[str, Any]]]) -> CacheResult:
        """The async twin of ``call``: ``afetch()`` is awaited at most once per flight."""
        if self._store is None:
            return self._off(key, await afetch())
        found = self._lookup(key)
        if found is not None:
            return found
        while True:
            future, leader = self._join(key.digest)
            if leader:
                break
            try:
                entry = await asyncio.wait_for(
                    asyncio.shield(asyncio.wrap_future(future)), self.flight_timeout)
            except _LeaderGone:
                continue  # the leader was cancelled: the first of us to rejoin leads
            except (TimeoutError, _Unshared):
                self._count("upstream_calls")
                return self._store_result(key, await afetch(), None)
            return self._shared(key, entry)
        try:
            found = self._recheck(key, future)
            if found is not None:
                return found
            self._count("upstream_calls")
            return self._store_result(key, await afetch(), future)
        except BaseException as exc:
            _fail(future, exc)
            raise
        finally:
            self._leave(key.digest, future)

    # ------------------------------------------------------------------ helpers

    def _off(self, key: CacheKey, response: dict[str, Any]) -> CacheResult:
        return CacheResult(response, "off", key, _fingerprint_of(response))

    def _count(self, *names: str) -> None:
        with self._lock:
            for name in names:
                self._stats[name] += 1

    def _lookup(self, key: CacheKey) -> CacheResult | None:
        assert self._store is not None
        entry = self._store.get(key.digest)
        if entry is None:
            if self.mode == "read-only":
                self._count("misses")
                raise self._miss(key)
            return None
        self._count("hits")
        return CacheResult(_json_dec.decode(entry.response), "hit", key, entry.fingerprint)

    def _recheck(self, key: CacheKey, future: concurrent.futures.Future[_Entry]
                 ) -> CacheResult | None:
        # Another process, or a flight that ended just before this one began, may have
        # stored the entry since the first lookup.
        found = self._lookup(key)
        if found is not None:
            future.set_result(_Entry(_json_enc.encode(found.response), found.fingerprint))
        return found

    def _join(self, digest: bytes) -> tuple[concurrent.futures.Future[_Entry], bool]:
        """The flight of ``digest`` and whether the caller leads it (a new flight).

        A flight whose leader has finished (a thread woken by it may rejoin before the
        leader has left) is replaced: the caller leads the next one.
        """
        with self._lock:
            future = self._flights.get(digest)
            if future is not None and not future.done():
                return future, False
            future = concurrent.futures.Future()
            self._flights[digest] = future
            return future, True

    def _leave(self, digest: bytes, future: concurrent.futures.Future[_Entry]) -> None:
        with self._lock:
            if self._flights.get(digest) is future:  # not a successor's flight
                del self._flights[digest]

    def _shared(self, key: CacheKey, entry: _Entry) -> CacheResult:
        self._count("hits", "shared")
        return CacheResult(_json_dec.decode(entry.response), "hit", key, entry.fingerprint)

    def _fetch_alone(self, key: CacheKey, fetch: Callable[[], dict[str, Any]]) -> CacheResult:
        self._count("upstream_calls")
        return self._store_result(key, fetch(), None)

    def _store_result(self, key: CacheKey, response: dict[str, Any],
                      future: concurrent.futures.Future[_Entry] | None) -> CacheResult:
        fingerprint = _fingerprint_of(response) if isinstance(response, Mapping) else None
        try:
            body = _json_enc.encode(response)
        except (TypeError, ValueError) as exc:
            # The caller still gets its answer; the cache just cannot keep it.
            warnings.warn(f"model cache: the {key.provider} response (key {key.hex[:12]}) is "
                          f"not JSON-compatible ({exc}); it was returned but not stored",
                          InstrumentationWarning, stacklevel=3)
            if future is not None:
                future.set_exception(_Unshared())
            self._count("misses")
            return CacheResult(response, "miss", key, fingerprint)
        assert self._store is not None
        try:
            self._store.put(key, body, fingerprint)
        except sqlite3.Error as exc:
            warnings.warn(f"model cache {self.path!r}: could not store key {key.hex[:12]} "
                          f"({exc}); the response was returned but not stored",
                          InstrumentationWarning, stacklevel=3)
        if future is not None:
            future.set_result(_Entry(body, fingerprint))
        self._count("misses")
        return CacheResult(response, "miss", key, fingerprint)

    def _miss(self, key: CacheKey) -> CacheMiss:
        assert self._store is not None
        model = key.model
        best: dict[str, tuple[Any, Any]] | None = None
        for stored in self._store.stored_requests(key.provider, model):
            diff = differences(key.canonical, stored)
            if best is None or len(diff) < len(best):
                best = diff
        what = f"{key.provider} request for model {model!r} (key {key.hex[:16]})"
        where = f"read-only model cache {self.path}"
        fix = ("Record the run again with a read-write cache, or make the request match "
               "the recording.")
        if best is None:
            models = [m for m in self._store.models(key.provider) if m != model]
            others = (f"; it holds {key.provider} requests for models "
                      f"{', '.join(repr(m) for m in models)}" if models else "")
            return CacheMiss(f"{what} is not in the {where}, which holds no {key.provider} "
                             f"request for that model{others}. {fix}", key=key.hex)
        shown = "; ".join(f"{path}: {_short(mine)} here, {_short(theirs)} stored"
                          for path, (mine, theirs) in list(best.items())[:8])
        more = f" (and {len(best) - 8} more)" if len(best) > 8 else ""
        return CacheMiss(f"{what} is not in the {where}; the nearest stored request with the "
                         f"same provider and model differs in {len(best)} field(s): "
                         f"{shown}{more}. {fix}", key=key.hex, differences=tuple(best))

    # ------------------------------------------------------------------ lifecycle

    def stats(self) -> dict[str, int]:
        """Counts since creation: ``hits``, ``misses``, ``upstream_calls``, ``shared``."""
        with self._lock:
            return dict(self._stats)

    def __len__(self) -> int:
        return 0 if self._store is None else len(self._store)

    def __repr__(self) -> str:
        return f"ModelCache(path={self.path!r}, mode={self.mode!r})"

    def close(self) -> None:
        """Close the SQLite connections of every thread."""
        if self._store is not None:
            self._store.close()

    def __enter__(self) -> ModelCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _fail(future: concurrent.futures.Future[_Entry], exc: BaseException) -> None:
    # Callers sharing the flight get the same exception; a cancelled or interrupted leader
    # (a BaseException) lets them fetch themselves instead.
    if not future.done():
        future.set_exception(exc if isinstance(exc, Exception) else _LeaderGone())


def _canonical_of(provider: str, request: Any) -> dict[str, Any] | None:
    """The canonical request of a recorded call, for the differences a miss reports."""
    if not isinstance(request, dict):
        return None
    if {"provider", "version", "draw", "channel", "request"} <= request.keys():
        return request
    inner = request.get("canonical")
    if isinstance(inner, dict) and "request" in inner:
        return inner
    try:
        request_fields(provider)
        return request_key(provider, request).canonical
    except ValueError:
        return None


def _cache_iv(mode: str, flight_timeout: float, busy_timeout: float) -> None:
    if mode not in _MODES:
        raise ValueError(f"`mode` must be one of {', '.join(map(repr, _MODES))}; got {mode!r}")
    for name, value in (("flight_timeout", flight_timeout), ("busy_timeout", busy_timeout)):
        if not (isinstance(value, int | float) and value > 0):
            raise ValueError(f"`{name}` must be a positive number of seconds; got {value!r}")
