"""Identity-keyed, counter-based random numbers for ``select`` and ``proceed``.

The Gumbel draw of a candidate is a pure function of (noise seed, stream name, step,
candidate id); the uniform draw of a stop decision a pure function of (noise seed,
stream, step). The noise seed is the run's seed with its task folded in
(``noise_seed``), so two tasks recorded under one seed draw independent noise, while
two systems (or a replay) running the same task under the same seed draw the same
noise. Nothing depends on the position of a candidate in the pool, so a replay or a
paired branch that reaches the same step sees the same noise for the same document
even when the ranking is reversed or the pool reordered: common random numbers ([SSC]
§3.1 and Appendix D; [DMC] §4.5 keys its draws by ``sha256(seed:step)`` for the same
reason).

Construction (generator id ``GENERATOR_ID`` = ``"fmix64-gumbel/3"``):

* noise seed ``σ``: for a run with a task, ``σ = fmix(seed ⊕ fmix(T))`` with ``T`` the
  first 8 bytes (little-endian) of BLAKE2b-64 over ``b"agentlog-task\\0"`` followed by
  the task's UTF-8, the seed taken modulo 2**64; for a run without a task, ``σ = seed``.
  Everything below reads ``σ`` where it says ``seed``. Pairing is by (seed, task): a
  replay re-enters with the source's seed, task and generator (``RunStart``).
* generator ``"fmix64-gumbel/2"`` (traces recorded before /3; still verified and
  reproduced with ``record(generator=...)``): the same in every respect except
  ``σ = seed``, so every task recorded under one seed drew the same noise (the same
  stop uniforms, and the same Gumbel draw for an id the pools share).
* candidate key ``k(c)``: the id's bytes ``b`` (UTF-8 of a str, the bytes themselves,
  an int as its 8-byte little-endian two's complement, or unsigned from 2**63 on) are
  read as little-endian 64-bit words ``w_j``, zero-padded; ``k = fmix(fmix(L ⊕ t) ⊕
  ⊕_j m(w_j · K_j))`` with ``L = len(b)``, ``t`` a tag per type and sign (so ``1``,
  ``"1"`` and ``b"1"`` differ), ``K_j = (2j + 1) · φ`` and ``m(x) = (x ⊕ x >> 29) · C1``
  (all mod 2**64). A zero word contributes nothing, so a pool's padding does not
  change a key, and a whole pool is keyed in a few numpy passes over its bytes
  (``pool_keys``; str ids read straight from their NUL-joined UTF-8) instead of one hash
  call per id. Pools are prepared and
  cached in ``agentlog._pools``.
* generator ``"fmix64-gumbel/1"`` (traces recorded before /2; still verified and
  reproduced with ``record(generator=...)``): ``σ = seed`` as in /2, and ``k(c)`` = the
  first 8 bytes (little-endian) of BLAKE2b-64 over the canonical msgpack encoding of the
  id, computed once per id and cached (``candidate_key``).
* stream key ``s``: BLAKE2b-64 of the UTF-8 stream name; step base
  ``b = fmix(fmix(seed ⊕ s) ⊕ fmix(step + φ))`` with MurmurHash3's 64-bit finaliser
  ``fmix`` and φ the golden-ratio constant. Keeping the step inside the hashed key
  (not in a counter word) avoids the overlapping streams that
  ``numpy.random.Philox(counter=[step, 0, 0, 0])`` would give across steps.
* per-candidate bits ``z = fmix(k(c) ⊕ b)``, one vectorised numpy pass over uint64;
  ``u = ((z >> 11) + ½) · 2⁻⁵³ ∈ (0, 1)``; Gumbel ``g = −log(−log u)`` with numpy's
  ``log`` (``gumbel``, the one function every draw goes through).
* continuation uniform: the same with the fixed key ``k = CONTINUATION_KEY``.

Every key, base word and uniform is reproducible bit for bit in any process, on any
platform with IEEE doubles; the Gumbel draws are too on one machine, but they take
numpy's ``log``, which numpy computes with SIMD code on some CPUs (AVX-512) and with the C
library's elsewhere, and the two differ in the last bit for about one value in 300.
Generators /1 and /2 differ only in the candidate keys, /2 and /3 only in the noise seed;
the rest is shared.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections.abc import Hashable, Sequence
from typing import Any

import msgspec
import numpy as np
from numpy.typing import NDArray

GENERATOR_V1 = "fmix64-gumbel/1"
GENERATOR_V2 = "fmix64-gumbel/2"
GENERATOR_ID = "fmix64-gumbel/3"  # what new runs record
GENERATORS = (GENERATOR_V1, GENERATOR_V2, GENERATOR_ID)  # what this agentlog regenerates
TASK_FOLDING = (GENERATOR_ID,)  # the generators whose noise seed folds in the run's task

_M64 = (1 << 64) - 1
_PHI = 0x9E3779B97F4A7C15
_C1 = 0xFF51AFD7ED558CCD
_C2 = 0xC4CEB9FE1A85EC53
_C1_U = np.uint64(_C1)
_TWO_M53 = 2.0**-53
_log = np.log
_negative = np.negative
_multiply = np.multiply
_right_shift = np.right_shift
# The operands of the per-select passes as 0-d arrays, not numpy scalars: a ufunc resolves
# a scalar operand's type on every call, ~0.2 µs each at N = 200 (bench_select).
_S33_0 = np.array(33, dtype=np.uint64)
_S10_0 = np.array(10, dtype=np.uint64)
_C1_0 = np.array(_C1, dtype=np.uint64)
_C2_0 = np.array(_C2, dtype=np.uint64)
_ONE_0 = np.array(1, dtype=np.uint64)
_TWO_M54_0 = np.array(2.0**-54)
CONTINUATION_KEY = 0xC0_FFEE_5DEE_CE66  # any fixed 64-bit word distinct from candidate keys


def _plain_id(obj: Any) -> Any:
    """A subclass of str, int or bytes is keyed as its plain value: encode it as one too."""
    if isinstance(obj, str):
        return str(obj)
    if isinstance(obj, bytes):
        return bytes(obj)
    if isinstance(obj, int):
        return int(obj)
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


_id_encoder = msgspec.msgpack.Encoder(enc_hook=_plain_id)


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
    # In place on a fresh array (of any shape): uint64 multiplication wraps modulo 2^64 as
    # intended. One temporary for the three shifts, and 0-d operands (see _S33_0).
    t = x >> _S33_0
    x ^= t
    x *= _C1_0
    _right_shift(x, _S33_0, out=t)
    x ^= t
    x *= _C2_0
    _right_shift(x, _S33_0, out=t)
    x ^= t
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


# fmix(step + φ) of the first steps, filled in order under a lock as runs reach them:
# readers index only below its length, and an entry never changes once appended.
_step_words: list[int] = []
_STEP_WORDS = 1 << 16
_step_lock = threading.Lock()


def _step_word(step: int) -> int:
    """``fmix(step + φ)``; steps below ``_STEP_WORDS`` are remembered in ``_step_words``."""
    if not 0 <= step < _STEP_WORDS:
        return fmix64(step + _PHI)
    with _step_lock:
        while len(_step_words) <= step:
            _step_words.append(fmix64(len(_step_words) + _PHI))
    return _step_words[step]


_TASK_PREFIX = b"agentlog-task\0"  # keeps a task's key apart from a stream's of one name
_task_cache: dict[str, int] = {}


def _task_word(task: str) -> int:
    """``fmix(T)``, T = BLAKE2b-64 of ``b"agentlog-task\\0"`` + the task's UTF-8 (cached)."""
    word = _task_cache.get(task)
    if word is None:
        word = fmix64(_blake64(_TASK_PREFIX + task.encode("utf-8")))
        if len(_task_cache) > 65536:
            _task_cache.clear()
        _task_cache[task] = word
    return word


def noise_seed(seed: int, task: str | None, generator: str) -> int:
    """The seed that keys a run's draws: ``seed`` with ``task`` folded in under /3.

    Under ``"fmix64-gumbel/3"`` a run with a task draws with ``fmix(seed ⊕ fmix(T))``
    (``seed`` modulo 2**64, ``T`` the task's key, see the module docstring), so tasks
    recorded under one seed draw independent noise and the same (seed, task) draws the
    same noise in any system or replay; without a task it is ``seed``. Generators /1 and
    /2 draw with ``seed`` itself. Every draw and every regeneration of a draw goes
    through this function.

    Raises:
        ValueError: ``generator`` is not one of ``GENERATORS``.
        TypeError: ``task`` is neither a str nor None.
    """
    if generator not in GENERATORS:
        raise ValueError(f"`generator` must be one of {', '.join(map(repr, GENERATORS))}; "
                         f"found {generator!r}")
    if task is None or generator not in TASK_FOLDING:
        return seed
    if not isinstance(task, str):
        raise TypeError(f"`task` must be a str or None; found {type(task).__name__}")
    return fmix64((seed & _M64) ^ _task_word(task))


_seed_stream_cache: dict[tuple[int, str], int] = {}


def seed_stream_word(seed: int, stream: str) -> int:
    """``fmix(seed ⊕ s)``, the first factor of every step base of (seed, stream) (cached)."""
    ss = _seed_stream_cache.get((seed, stream))
    if ss is None:
        ss = fmix64((seed & _M64) ^ stream_key(stream))
        if len(_seed_stream_cache) > 65536:
            _seed_stream_cache.clear()
        _seed_stream_cache[(seed, stream)] = ss
    return ss


def step_base(seed: int, stream: str, step: int) -> int:
    """The per-(seed, stream, step) base word mixed into every candidate key.

    ``b = fmix(fmix(seed ⊕ s) ⊕ fmix(step + φ))``; the first factor is cached per
    (seed, stream), the second per step (the first 65,536), and the outer ``fmix`` is
    written out inline because this runs on every ``select``/``proceed``.
    """
    ss = _seed_stream_cache.get((seed, stream))
    if ss is None:
        ss = seed_stream_word(seed, stream)
    x = (_step_words[step] if 0 <= step < len(_step_words) else _step_word(step)) ^ ss
    x ^= x >> 33
    x = (x * _C1) & _M64
    x ^= x >> 33
    x = (x * _C2) & _M64
    return x ^ (x >> 33)


_key_cache: dict[Any, int] = {}
_key_cache_bytes = [0]  # about what the cached ids keep alive (their encodings + 100 each)
_KEY_CACHE_BYTES = 64 << 20


def candidate_key(candidate: Hashable) -> int:
    """The stable 64-bit key of one candidate id under generator /1 (cached)."""
    # The type is part of the cache key because 1 == 1.0 == True in a dict.
    ck = (type(candidate), candidate)
    key = _key_cache.get(ck)
    if key is None:
        encoded = _id_encoder.encode(candidate)
        key = _blake64(encoded)
        # Bounded in bytes too: a million long ids (replaying old traces of documents
        # named by their URLs) would otherwise stay cached.
        if len(_key_cache) > 1_000_000 or _key_cache_bytes[0] > _KEY_CACHE_BYTES:
            _key_cache.clear()
            _key_cache_bytes[0] = 0
        _key_cache[ck] = key
        _key_cache_bytes[0] += len(encoded) + 100
    return key


# ----------------------------------------------------------------- keys of generator /2

_M29 = np.uint64(29)
_TAG_STR = 0x5354_5200_0000_0001  # one word per type (and sign): 1, "1" and b"1" differ
_TAG_BYTES = 0x4259_5400_0000_0002
_TAG_INT = 0x494E_5400_0000_0003
_TAG_NEG = 0x4E45_4700_0000_0004
_PLAIN_ID_TYPES = frozenset((str, int, bytes))
_LENGTH_WORDS: dict[tuple[int, int], int] = {}


def _position_constants(words: int) -> NDArray[np.uint64]:
    """``K_j = (2j + 1) · φ mod 2**64`` for j < ``words`` (odd, so ``w · K_j`` is a bijection)."""
    j = np.arange(words, dtype=np.uint64)
    return (j * np.uint64(2) + np.uint64(1)) * np.uint64(_PHI)


_K = _position_constants(64)  # ids up to 512 bytes without recomputing; longer ones extend


def _length_word(length: int, tag: int) -> int:
    """``fmix(L ⊕ t)``, cached: pools repeat a handful of lengths."""
    word = _LENGTH_WORDS.get((length, tag))
    if word is None:
        word = fmix64(length ^ tag)
        if len(_LENGTH_WORDS) < 65536:
            _LENGTH_WORDS[(length, tag)] = word
    return word


def _id_bytes(candidate: Any) -> tuple[bytes, int]:
    """The bytes and type tag that key ``candidate`` under generator /2."""
    if isinstance(candidate, str):
        return candidate.encode("utf-8"), _TAG_STR
    if isinstance(candidate, bytes):
        return bytes(candidate), _TAG_BYTES
    if isinstance(candidate, int) and not isinstance(candidate, bool):
        if -(2**63) <= candidate < 0:
            return (candidate & _M64).to_bytes(8, "little"), _TAG_NEG
        if 0 <= candidate < 2**64:
            return int(candidate).to_bytes(8, "little"), _TAG_INT
        raise OverflowError(
            f"candidate id {candidate} is outside [-2**63, 2**64): ids must fit 64 bits"
        )
    raise TypeError(
        f"`candidates` must hold str, int or bytes ids; found {type(candidate).__name__}"
    )


def candidate_key_v2(candidate: Hashable) -> int:
    """The 64-bit key of one candidate id under generator /2 (the reference for ``pool_keys``).

    ``k = fmix(fmix(L ⊕ t) ⊕ ⊕_j m(w_j · K_j))``: see the module docstring.
    """
    data, tag = _id_bytes(candidate)
    h = 0
    padded = data + b"\0" * (-len(data) % 8)
    for j in range(len(padded) // 8):
        x = (int.from_bytes(padded[8 * j: 8 * j + 8], "little") * ((2 * j + 1) * _PHI)) & _M64
        h ^= ((x ^ (x >> 29)) * _C1) & _M64
    return fmix64(h ^ _length_word(len(data), tag))


def _matrix_keys(rows: bytes, lengths: list[int], width: int, tag: int
                 ) -> NDArray[np.uint64]:
    """Keys of ids laid out as rows of ``width`` zero-padded bytes (``width % 8 == 0``)."""
    n = len(lengths)
    words = np.frombuffer(rows, dtype="<u8").reshape(n, width // 8)
    k = _K if words.shape[1] <= _K.shape[0] else _position_constants(words.shape[1])
    t = words * k[: words.shape[1]]
    t ^= t >> _M29
    t *= _C1_U
    h = np.bitwise_xor.reduce(t, axis=1)
    first = lengths[0]
    if lengths.count(first) == n:  # one length (generated ids): one word for all
        h ^= np.uint64(_length_word(first, tag))
    else:
        h ^= _fmix64_array(np.array(lengths, dtype=np.uint64) ^ np.uint64(tag))
    return _fmix64_array(h)


_STR_LENGTH_WORDS = np.array([fmix64(length ^ _TAG_STR) for length in range(256)],
                             dtype=np.uint64)  # fmix(L ⊕ t) of a str id of L < 256 bytes


def _row_width(lengths: list[int]) -> int:
    longest = max(lengths, default=0)
    return max(8, -(-longest // 8) * 8)


# Bytes 0..r of a little-endian word, r = 0..8: a word read past its id's end keeps its id's.
_BYTE_MASKS = np.array([(1 << (8 * r)) - 1 for r in range(9)], dtype=np.uint64)
_NUL = "\0"


def nul_joined(ids: Sequence[Any]) -> str | None:
    """``"\\0".join(ids)`` when every id is a str free of NUL (then it names the pool one to
    one), else None. One C pass, and the type check of such a pool."""
    try:
        joined = _NUL.join(ids)
    except TypeError:
        return None
    return joined if joined.count(_NUL) == len(ids) - 1 else None


# Bytes of ids keyed per set of numpy passes (about 64K ids when they are short): the
# passes' temporaries stay under a few MB however large the pool, so that verify keys a
# pool Blob of a million ids within its memory bound.
_KEY_BLOCK_BYTES = 1 << 17


def _joined_keys(joined: str, n: int) -> NDArray[np.uint64]:
    """Keys of the ``n`` str ids of ``joined = nul_joined(ids)``, without a loop over ids.

    The NULs of the UTF-8 bytes (never inside a multi-byte character) end the ids; the ids
    are keyed by ``_block_keys``, in blocks of whole ids of about ``_KEY_BLOCK_BYTES``.
    """
    body = (joined + _NUL).encode("utf-8")
    keys = np.empty(n, dtype=np.uint64)
    a = first = 0  # the block's first id and its first byte
    while first < len(body):
        last = body.rfind(b"\0", first, first + _KEY_BLOCK_BYTES)  # the block's last NUL
        if last < 0:  # an id longer than a block: the block ends with it
            last = body.index(b"\0", first)
        block = body[first:last + 1]
        ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 0)
        keys[a:a + ends.shape[0]] = _block_keys(block, ends)
        a += ends.shape[0]
        first = last + 1
    return keys


def _block_keys(body: bytes, ends: NDArray[np.intp]) -> NDArray[np.uint64]:
    """Keys of the str ids in ``body``, each followed by the NUL at its offset in ``ends``.

    Word ``j`` of an id is the 8 bytes at its start + 8 j, read unaligned from one buffer
    and masked to the id's own bytes, so no row is padded or copied.
    """
    n = ends.shape[0]
    starts = np.empty(n, dtype=np.intp)
    starts[0] = 0
    np.add(ends[:-1], 1, out=starts[1:])
    lengths = ends - starts
    longest, shortest = int(lengths.max()), int(lengths.min())
    nw = max(1, -(-longest // 8))
    # Every 8-byte window of the buffer (stride 1); NULs past the end keep every read inside.
    windows = np.ndarray((len(body) + 8 * nw - 7,), dtype="<u8", buffer=body + bytes(8 * nw),
                         strides=(1,))
    if nw == 1:  # ids of at most 8 bytes: one word each, no reduction
        t = windows.take(starts)
        if shortest < 8:
            t &= _BYTE_MASKS.take(lengths)
        t *= _K[0]
        t ^= t >> _M29
        t *= _C1_U
        h = t
    else:  # word j of every id in row j: the reduction runs down whole rows
        offsets = np.arange(0, 8 * nw, 8, dtype=np.intp)[:, None]
        words = windows.take(offsets + starts)  # take: cheaper than fancy indexing
        rem = lengths - offsets  # the id's bytes left at word j, clipped to 0..8 below
        np.maximum(rem, 0, out=rem)
        np.minimum(rem, 8, out=rem)  # two ufuncs: np.clip's Python wrapper costs more
        words &= _BYTE_MASKS.take(rem)
        k = _K if nw <= _K.shape[0] else _position_constants(nw)
        words *= k[:nw, None]
        words ^= words >> _M29
        words *= _C1_U
        h = np.bitwise_xor.reduce(words, axis=0)
    if shortest == longest:  # one length (generated ids): one word for all
        h ^= np.uint64(_length_word(longest, _TAG_STR))
    elif longest < _STR_LENGTH_WORDS.shape[0]:
        h ^= _STR_LENGTH_WORDS.take(lengths)
    else:
        h ^= _fmix64_array(lengths.astype(np.uint64) ^ np.uint64(_TAG_STR))
    return _fmix64_array(h)


def _str_keys(ids: tuple[str, ...]) -> NDArray[np.uint64]:
    nul_free = nul_joined(ids)
    if nul_free is not None:
        return _joined_keys(nul_free, len(ids))
    # An id holds a NUL (the join would not tell the ids apart): rows padded one by one.
    return _bytes_keys(tuple(map(str.encode, ids)), _TAG_STR)


def _bytes_keys(ids: tuple[bytes, ...], tag: int = _TAG_BYTES) -> NDArray[np.uint64]:
    lengths = list(map(len, ids))
    width = _row_width(lengths)
    n = len(ids)
    padded = b"".join(map(bytes.ljust, ids, itertools.repeat(width, n),
                          itertools.repeat(b"\0", n)))
    return _matrix_keys(padded, lengths, width, tag)


def _int_keys(values: NDArray[Any]) -> NDArray[np.uint64]:
    """Keys of int64 or uint64 ids: one word each, ``L = 8``, the tag by sign."""
    words = values.astype("<u8", copy=False) if values.dtype.kind == "u" else (
        values.astype(np.int64, copy=False).view(np.uint64))
    t = words * _K[0]
    t ^= t >> _M29
    t *= _C1_U
    pos = np.uint64(_length_word(8, _TAG_INT))
    if values.dtype.kind == "u":
        t ^= pos
    else:
        t ^= np.where(values < 0, np.uint64(_length_word(8, _TAG_NEG)), pos)
    return _fmix64_array(t)


def pool_keys(ids: tuple[Any, ...], array: NDArray[Any] | None = None,
              kinds: set[type] | None = None) -> NDArray[np.uint64]:
    """Generator-/2 keys of a checked pool of ids, in bulk (``array``: the ids as given).

    Equal to ``[candidate_key_v2(c) for c in ids]`` (a test holds every path to it); a
    pool of one plain type is keyed in numpy passes over a byte matrix, other pools one id
    at a time. ``kinds``: the set of the ids' types, when the caller has it already.
    """
    n = len(ids)
    if array is not None and array.dtype.kind in "iu" and array.dtype.itemsize <= 8:
        return _int_keys(array.reshape(n))
    if kinds is None:
        kinds = set(map(type, ids))
    if kinds == {str}:
        return _str_keys(ids)
    if kinds == {bytes}:
        return _bytes_keys(ids)
    if kinds == {int}:
        try:
            return _int_keys(np.array(ids, dtype=np.int64))
        except OverflowError:
            if min(ids) >= 0:
                return _int_keys(np.array(ids, dtype=np.uint64))
    return np.fromiter(map(candidate_key_v2, ids), dtype=np.uint64, count=n)




def uniforms(keys: NDArray[np.uint64], base: int) -> NDArray[np.float64]:
    """Uniform(0, 1) draws, one per key, for the given step base."""
    return _to_uniforms(keys ^ np.uint64(base))




def _to_uniforms(x: NDArray[np.uint64]) -> NDArray[np.float64]:
    """The uniforms of ``x = k ^ b`` (a fresh array of any shape), computed in its memory."""
    # z = fmix(k ^ b), then ((z >> 11) + ½) · 2⁻⁵³ as float((z >> 10) | 1) · 2⁻⁵⁴: the odd
    # integer 2 (z >> 11) + 1 rounds to float as 2 ((z >> 11) + ½) does (scaling by two
    # commutes with rounding), and the product casts it inside the ufunc.
    # The same bits as the definition in fewer passes: this runs on every select.
    _fmix64_array(x)
    _right_shift(x, _S10_0, out=x)
    x |= _ONE_0
    u: NDArray[np.float64] = x.view(np.float64)
    _multiply(x, _TWO_M54_0, out=u)  # in place: each float lands where its integer was
    return u


def _to_gumbel(g: NDArray[np.float64]) -> NDArray[np.float64]:
    _log(g, out=g)  # g = -log(-log u), computed in place
    _negative(g, out=g)
    _log(g, out=g)
    _negative(g, out=g)
    return g


def gumbel(keys: NDArray[np.uint64], seed: int, stream: str, step: int) -> NDArray[np.float64]:
    """Standard Gumbel draws for the candidates with these keys at (seed, stream, step).

    ``seed`` here and in every draw function below is the noise seed (``noise_seed``).
    """
    return _to_gumbel(uniforms(keys, step_base(seed, stream, step)))



def uniform(seed: int, stream: str, step: int) -> float:
    """The continuation uniform at (seed, stream, step), in (0, 1); ``seed``: the noise
    seed (``noise_seed``)."""
    x = CONTINUATION_KEY ^ step_base(seed, stream, step)
    x ^= x >> 33
    x = (x * _C1) & _M64
    x ^= x >> 33
    x = (x * _C2) & _M64
    x ^= x >> 33
    return ((x >> 11) + 0.5) * _TWO_M53
