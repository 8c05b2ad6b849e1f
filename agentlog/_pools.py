"""Candidate pools prepared for drawing: ids checked, keyed and hashed once, then cached.

``select`` asks ``pool(candidates, n)`` for every draw. A pool is its ids as a
tuple, their generator-/2 keys (``agentlog._noise``), their canonical msgpack list (stored
once per trace as the pool's Blob) and its SHA-256 (the name a Selection record gives the
pool). Two caches, each bounded in entries and in bytes (``agentlog._bounded_cache``),
keep them: the list cache, by the identity of the list an agent passes step after step;
and the pool cache, by the ids themselves (the NUL-joined ids of a str pool, an int pool's
array bytes, or the tuple of a mixed pool).
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from ._bounded_cache import BoundedCache as _Cache
from ._bounded_cache import insert as _insert
from ._noise import (
    _PLAIN_ID_TYPES,
    GENERATOR_ID,
    GENERATOR_V1,
    GENERATOR_V2,
    GENERATORS,
    _id_encoder,
    _joined_keys,
    candidate_key,
    nul_joined,
    pool_keys,
)


def keys_for(pool: Pool, generator: str) -> NDArray[np.uint64]:
    """The pool's candidate keys under ``generator`` (one of ``GENERATORS``)."""
    if generator in (GENERATOR_ID, GENERATOR_V2):  # /3 keys ids as /2 does
        return pool.keys
    if generator != GENERATOR_V1:
        raise ValueError(f"unknown noise generator {generator!r}; this agentlog regenerates "
                         f"{', '.join(GENERATORS)}")
    keys = _v1_pool_keys.get(pool.hash)
    if keys is None:
        keys = np.fromiter(map(candidate_key, pool.ids), dtype=np.uint64, count=len(pool.ids))
        _insert(_v1_pool_keys, pool.hash, keys, _POOL_CACHE_SIZE, keys.nbytes)
    return keys


class Pool(msgspec.Struct, frozen=True):
    """A candidate pool prepared for drawing: ids, their keys, and the pool's content hash.

    A Struct, not a dataclass: a fresh pool makes one per ``select``, 0.14 µs against a
    frozen dataclass's 1.0 µs.
    """

    ids: tuple[Any, ...]
    keys: NDArray[np.uint64]
    encoded: bytes  # canonical msgpack list of the ids (stored once as a Blob)
    hash: bytes  # sha256(encoded)


_CACHE_BYTES = 64 << 20  # each of the pool, list and version-1 key caches
_POOL_CACHE_SIZE = 512
_LIST_CACHE_SIZE = 64
# An agent with a new pool of 100,000 ids every step held 512 of them, ~7 GB, in the pool
# cache before its entries were counted in bytes (_pool_bytes estimates what one keeps).
_pool_cache: dict[Any, Pool] = _Cache(_CACHE_BYTES)
_v1_pool_keys: dict[bytes, NDArray[np.uint64]] = _Cache(_CACHE_BYTES)


def _pool_bytes(pool: Pool, cache_key: Any) -> int:
    """About what a cached pool keeps alive: its ids (objects and tuple), keys, encoding
    and the cache key (the NUL-joined ids of a str pool, an int pool's array bytes)."""
    extra = len(cache_key) if isinstance(cache_key, str) else (
        len(cache_key[1]) if type(cache_key) is tuple and len(cache_key) == 2
        and isinstance(cache_key[1], bytes) else 0)
    return len(pool.encoded) + pool.keys.nbytes + 72 * len(pool.ids) + extra


def _check_ids(ids: tuple[Any, ...]) -> set[type]:
    """Refuse ids that are not str, int or bytes; return the set of their types."""
    kinds = set(map(type, ids))  # one C-level pass: a pool of plain ids skips the loop
    if len(kinds) == 1 and kinds <= _PLAIN_ID_TYPES:
        return kinds
    for c in ids:
        if not isinstance(c, (str, int, bytes)) or isinstance(c, bool):
            raise TypeError(
                f"`candidates` must hold str, int or bytes ids; found {type(c).__name__} "
                f"({c!r:.60}). Pass stable identifiers (document ids), not objects."
            )
    return kinds


def _check_unique(ids: tuple[Any, ...], keys: NDArray[np.uint64]) -> None:
    """Refuse repeated ids. Distinct keys prove distinct ids, so the set of ids (the slow
    check) is built only when two keys are equal: a repeated id, or a 64-bit collision."""
    ordered = np.sort(keys)
    if not (ordered[1:] == ordered[:-1]).any():
        return
    _refuse_repeats(ids)


def _refuse_repeats(ids: tuple[Any, ...]) -> None:
    """Raise for the first repeated id; return if there is none (two keys were equal by a
    64-bit collision of distinct ids)."""
    if len(set(ids)) == len(ids):
        return
    seen: set[Any] = set()
    dup = next(c for c in ids if c in seen or seen.add(c))  # type: ignore[func-returns-value]
    raise ValueError(
        f"`candidates` must be unique ids; {dup!r} appears more than once. Identity-keyed "
        "draws need one id per candidate."
    )


# Agents usually pass the same list object step after step. Remember the last few lists by
# identity, with their pools: a list still holding exactly the objects of its pool's ids
# (compared by identity, which the pool's tuple keeps valid: its objects stay alive) is that
# pool; a list changed since misses, and is prepared again. No private copy of the list.
_list_cache: dict[int, Pool] = _Cache(_CACHE_BYTES)


def _same_items(ids: list[Any], pool_ids: tuple[Any, ...]) -> bool:
    return len(ids) == len(pool_ids) and all(map(operator.is_, ids, pool_ids))


def pool(candidates: Sequence[Any] | NDArray[Any] | None, n: int) -> Pool:
    """Prepare (and cache) a pool of ``n`` candidate ids; ``None`` means ids ``0..n-1``."""
    if type(candidates) is list:
        seen = _list_cache.get(id(candidates))
        if seen is not None and _same_items(candidates, seen.ids):
            return seen
        result, known = _pool_uncached(candidates, n)
        # A list gets an entry once its pool is drawn from a second time (found in the
        # pool cache): not for a pool drawn once, whose entry would only push out others.
        if known:
            _insert(_list_cache, id(candidates), result, _LIST_CACHE_SIZE,
                    _pool_bytes(result, None))
        return result
    return _pool_uncached(candidates, n)[0]


def _pool_uncached(candidates: Sequence[Any] | NDArray[Any] | None, n: int
                   ) -> tuple[Pool, bool]:
    """The pool of these ids, and whether the pool caches held it already."""
    joined: str | None = None
    array: NDArray[Any] | None = None
    if isinstance(candidates, np.ndarray):
        if candidates.dtype.kind in "iu":
            array = candidates
        else:
            candidates = candidates.tolist()
    if candidates is None:
        cache_key: Any = n
    elif array is not None:
        cache_key = (array.dtype.str, array.tobytes())
    else:
        # A pool of str ids is named by its NUL-joined ids: one string to hash, where a tuple
        # would hash each new id; the join is also the pool's type check and key input.
        joined = nul_joined(candidates)  # type: ignore[arg-type]
        if joined is not None:
            cache_key = joined
        else:
            cache_key = candidates if isinstance(candidates, tuple) else tuple(candidates)
    try:
        hit = _pool_cache.get(cache_key)
    except TypeError:  # an unhashable id (a list, a dict): say what ids may be
        _check_ids(cache_key)
        raise
    if hit is not None:
        return hit, True
    if candidates is None:
        ids: tuple[Any, ...] = tuple(range(n))
    elif array is not None:
        ids = tuple(array.tolist())
    elif joined is not None:
        ids = tuple(candidates)
    else:
        ids = cache_key  # the tuple of the candidates, made above
    try:
        keys = (_joined_keys(joined, n) if joined is not None
                else pool_keys(ids, array, _check_ids(ids)))
    except UnicodeEncodeError:  # a lone surrogate (from surrogateescape, or a bad slice)
        raise _not_utf8(ids) from None
    _check_unique(ids, keys)
    encoded = _id_encoder.encode(ids)  # a tuple is a msgpack array, as a list is
    result = Pool(ids, keys, encoded, hashlib.sha256(encoded).digest())
    _insert(_pool_cache, cache_key, result, _POOL_CACHE_SIZE, _pool_bytes(result, cache_key))
    return result, False


def _not_utf8(ids: tuple[Any, ...]) -> ValueError:
    """The error for a pool holding a str id that has no UTF-8 encoding."""
    for i, c in enumerate(ids):
        if isinstance(c, str):
            try:
                c.encode("utf-8")
            except UnicodeEncodeError as exc:
                return ValueError(
                    f"`candidates` must hold str ids with a UTF-8 encoding; id {i} ({c!r:.60}) "
                    f"holds {c[exc.start]!r} at {exc.start}, a lone surrogate. Decode ids "
                    "with errors='replace' (not 'surrogateescape'), or pass them as bytes.")
    return ValueError("`candidates` must hold str ids with a UTF-8 encoding")
