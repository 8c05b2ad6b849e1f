"""Identity-keyed, counter-based random numbers for ``select`` and ``proceed``.

The Gumbel draw of a candidate is a pure function of (run seed, stream name, step,
candidate id); the uniform draw of a stop decision a pure function of (run seed,
stream, step). Nothing depends on the position of a candidate in the pool, so a
replay or a paired branch that reaches the same step sees the same noise for the
same document even when the ranking is reversed or the pool reordered: common
random numbers ([SSC] §3.1 and Appendix D; [DMC] §4.5 keys its draws by
``sha256(seed:step)`` for the same reason).

Construction (generator id ``GENERATOR_ID``):

* candidate key ``k(c)``: the first 8 bytes (little-endian) of BLAKE2b-64 over the
  canonical msgpack encoding of the id (so ``1`` and ``"1"`` differ). Computed once
  per id and cached.
* stream key ``s``: BLAKE2b-64 of the UTF-8 stream name; step base
  ``b = fmix(fmix(seed ⊕ s) ⊕ fmix(step + φ))`` with MurmurHash3's 64-bit finaliser
  ``fmix`` and φ the golden-ratio constant. Keeping the step inside the hashed key
  (not in a counter word) avoids the overlapping streams that
  ``numpy.random.Philox(counter=[step, 0, 0, 0])`` would give across steps.
* per-candidate bits ``z = fmix(k(c) ⊕ b)``, one vectorised numpy pass over uint64;
  ``u = ((z >> 11) + ½) · 2⁻⁵³ ∈ (0, 1)``; Gumbel ``g = −log(−log u)``.
* continuation uniform: the same with the fixed key ``k = CONTINUATION_KEY``.

Every value is reproducible in any process, on any platform with IEEE doubles.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
from numpy.typing import NDArray

GENERATOR_ID = "fmix64-gumbel/1"

_M64 = (1 << 64) - 1
_PHI = 0x9E3779B97F4A7C15
_C1 = 0xFF51AFD7ED558CCD
_C2 = 0xC4CEB9FE1A85EC53
_C1_U = np.uint64(_C1)
_C2_U = np.uint64(_C2)
_S33 = np.uint64(33)
_S11 = np.uint64(11)
_TWO_M53 = 2.0**-53
CONTINUATION_KEY = 0xC0_FFEE_5DEE_CE66  # any fixed 64-bit word distinct from candidate keys

_id_encoder = msgspec.msgpack.Encoder()


def fmix64(x: int) -> int:
    """MurmurHash3's 64-bit finaliser on a Python int (a bijection of 64-bit words)."""
    x &= _M64
    x ^= x >> 33
    x = (x * _C1) & _M64
    x ^= x >> 33
    x = (x * _C2) & _M64
    x ^= x >> 33
    return x


def _fmix64_array(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    # In place on a fresh array: uint64 multiplication wraps modulo 2^64 as intended.
    x ^= x >> _S33
    x *= _C1_U
    x ^= x >> _S33
    x *= _C2_U
    x ^= x >> _S33
    return x


def _blake64(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


_stream_cache: dict[str, int] = {}


def stream_key(stream: str) -> int:
    """The 64-bit key of a stream name (cached)."""
    key = _stream_cache.get(stream)
    if key is None:
        key = _blake64(stream.encode("utf-8"))
        if len(_stream_cache) > 65536:
            _stream_cache.clear()
        _stream_cache[stream] = key
    return key


_seed_stream_cache: dict[tuple[int, str], int] = {}


def step_base(seed: int, stream: str, step: int) -> int:
    """The per-(seed, stream, step) base word mixed into every candidate key.

    ``b = fmix(fmix(seed ⊕ s) ⊕ fmix(step + φ))``; the first factor is cached per
    (seed, stream) and ``fmix`` is written out inline because this runs on every
    ``select``/``proceed``.
    """
    ss = _seed_stream_cache.get((seed, stream))
    if ss is None:
        ss = fmix64((seed & _M64) ^ stream_key(stream))
        if len(_seed_stream_cache) > 65536:
            _seed_stream_cache.clear()
        _seed_stream_cache[(seed, stream)] = ss
    x = (step + _PHI) & _M64
    x ^= x >> 33
    x = (x * _C1) & _M64
    x ^= x >> 33
    x = (x * _C2) & _M64
    x ^= x >> 33
    x ^= ss
    x ^= x >> 33
    x = (x * _C1) & _M64
    x ^= x >> 33
    x = (x * _C2) & _M64
    return x ^ (x >> 33)


_key_cache: dict[Any, int] = {}


def candidate_key(candidate: Hashable) -> int:
    """The stable 64-bit key of one candidate id (cached)."""
    # The type is part of the cache key because 1 == 1.0 == True in a dict.
    ck = (type(candidate), candidate)
    key = _key_cache.get(ck)
    if key is None:
        key = _blake64(_id_encoder.encode(candidate))
        if len(_key_cache) > 1_000_000:
            _key_cache.clear()
        _key_cache[ck] = key
    return key


@dataclass(frozen=True, slots=True)
class Pool:
    """A candidate pool prepared for drawing: ids, their keys, and the pool's content hash."""

    ids: tuple[Any, ...]
    keys: NDArray[np.uint64]
    encoded: bytes  # canonical msgpack list of the ids (stored once as a Blob)
    hash: bytes  # sha256(encoded)


_pool_cache: dict[Any, Pool] = {}
_POOL_CACHE_SIZE = 512
_LIST_CACHE_SIZE = 64
# Taken on a cache *miss* only (lookups are single atomic dict operations): two threads
# evicting at once would otherwise both pick the same oldest key (KeyError from ``pop``)
# or iterate a dict the other is resizing (RuntimeError), straight into ``al.select``.
_cache_lock = threading.Lock()


def _insert(cache: dict[Any, Any], key: Any, value: Any, size: int) -> None:
    """Insert into a FIFO-bounded cache (oldest entries evicted first), under the lock."""
    with _cache_lock:
        while len(cache) >= size:
            del cache[next(iter(cache))]
        cache[key] = value


def _check_ids(ids: tuple[Any, ...]) -> None:
    for c in ids:
        if not isinstance(c, (str, int, bytes)) or isinstance(c, bool):
            raise TypeError(
                f"`candidates` must hold str, int or bytes ids; found {type(c).__name__} "
                f"({c!r:.60}). Pass stable identifiers (document ids), not objects."
            )
    if len(set(ids)) != len(ids):
        seen: set[Any] = set()
        dup = next(c for c in ids if c in seen or seen.add(c))  # type: ignore[func-returns-value]
        raise ValueError(
            f"`candidates` must be unique ids; {dup!r} appears more than once. Identity-keyed "
            "draws need one id per candidate."
        )


# Agents usually pass the same list object step after step. Remember the last few lists by
# identity with a private copy; a list that was mutated since compares unequal and misses.
_list_cache: dict[int, tuple[list[Any], Pool]] = {}


def pool(candidates: Sequence[Any] | NDArray[Any] | None, n: int) -> Pool:
    """Prepare (and cache) a pool of ``n`` candidate ids; ``None`` means ids ``0..n-1``."""
    if type(candidates) is list:
        seen = _list_cache.get(id(candidates))
        if seen is not None and seen[0] == candidates:
            return seen[1]
        result = _pool_uncached(candidates, n)
        _insert(_list_cache, id(candidates), (list(candidates), result), _LIST_CACHE_SIZE)
        return result
    return _pool_uncached(candidates, n)


def _pool_uncached(candidates: Sequence[Any] | NDArray[Any] | None, n: int) -> Pool:
    if candidates is None:
        cache_key: Any = n
    elif isinstance(candidates, tuple):
        cache_key = candidates
    elif isinstance(candidates, np.ndarray):
        if candidates.dtype.kind not in "iu":
            candidates = candidates.tolist()
            cache_key = tuple(candidates)
        else:
            cache_key = (candidates.dtype.str, candidates.tobytes())
    else:
        cache_key = tuple(candidates)
    hit = _pool_cache.get(cache_key)
    if hit is not None:
        return hit
    if candidates is None:
        ids: tuple[Any, ...] = tuple(range(n))
    elif isinstance(candidates, np.ndarray):
        ids = tuple(candidates.tolist())
    else:
        ids = tuple(candidates)
    _check_ids(ids)
    keys = np.fromiter((candidate_key(c) for c in ids), dtype=np.uint64, count=len(ids))
    encoded = _id_encoder.encode(list(ids))
    result = Pool(ids=ids, keys=keys, encoded=encoded, hash=hashlib.sha256(encoded).digest())
    _insert(_pool_cache, cache_key, result, _POOL_CACHE_SIZE)
    return result


def uniforms(keys: NDArray[np.uint64], base: int) -> NDArray[np.float64]:
    """Uniform(0, 1) draws, one per key, for the given step base."""
    z = _fmix64_array(keys ^ np.uint64(base))
    return ((z >> _S11).astype(np.float64) + 0.5) * _TWO_M53


def gumbel(keys: NDArray[np.uint64], seed: int, stream: str, step: int) -> NDArray[np.float64]:
    """Standard Gumbel draws for the candidates with these keys at (seed, stream, step)."""
    u = uniforms(keys, step_base(seed, stream, step))
    return -np.log(-np.log(u))


def uniform(seed: int, stream: str, step: int) -> float:
    """The continuation uniform at (seed, stream, step), in (0, 1)."""
    x = CONTINUATION_KEY ^ step_base(seed, stream, step)
    x ^= x >> 33
    x = (x * _C1) & _M64
    x ^= x >> 33
    x = (x * _C2) & _M64
    x ^= x >> 33
    return ((x >> 11) + 0.5) * _TWO_M53
