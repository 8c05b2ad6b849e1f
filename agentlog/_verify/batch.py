"""``verify``'s checks of vectors and draws in batches, and the candidate pools it keeps.

A selection is checked with the others waiting in a ``Batch`` (they span frames: a frame
of an agent's run holds a few dozen), in numpy passes over all of their candidates: the
pass finds which selections may hold a problem, and those are checked one by one by the
verifier, which says what the problem is. Continuations are batched the same way. A
``Pools`` cache keeps the keys of the candidate pools within a byte bound and reads a pool
back from the file when it no longer holds it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, BinaryIO

import msgspec
import numpy as np
from numpy.typing import NDArray

from agentlog import _noise
from agentlog._bounded_cache import BoundedCache, insert
from agentlog._draw_match import DRAW_TOLERANCE
from agentlog._errors import TraceFormatError
from agentlog._frames import _open_for_reading, read_frame
from agentlog._records import Blob, Continuation, Selection
from agentlog._select import SUM_TOLERANCE
from agentlog._trace_format import ReadLimits
from agentlog._vectors import decode_pool

__all__ = ["CHUNK", "Batch", "Pools", "chunked_choice_agrees", "chunks"]

# Candidates per numpy pass: what bounds the temporaries of the vector checks, and the
# most candidates of the selections checked together (arrays of 64 KB: malloc serves them
# from its heap, where larger ones cost a page fault per 4 KB, every batch).
CHUNK = 1 << 13
BATCH_SELECTIONS = 4096  # selections (and continuations) waiting at most
BATCH_HELD_BYTES = 4 << 20  # of frames the selections waiting in the batch keep alive
POOL_KEYS_BYTES = 24 << 20  # candidate keys cached between the selections that use them
POOL_DATA_BYTES = 8 << 20  # pool Blobs whose keys were not made yet
_ENTRY_OVERHEAD = 200  # bytes of Python objects per cached pool, beside its arrays
_PHI = np.array(0x9E3779B97F4A7C15, dtype=np.uint64)  # _noise's step offset (golden ratio)
_CONTINUATION_KEY = np.array(_noise.CONTINUATION_KEY, dtype=np.uint64)


_str_ids = msgspec.msgpack.Decoder(list[str])


class Pools:
    """Candidate pools: their keys cached within a byte bound, read back from the file when
    the cache no longer holds them (a pool reused far apart in a long file)."""

    def __init__(self, path: str, limits: ReadLimits) -> None:
        self.path = path
        self.limits = limits
        self.where: dict[bytes, int] = {}  # pool hash -> offset of its Blob's frame
        self.data: BoundedCache = BoundedCache(POOL_DATA_BYTES)
        self.keys: BoundedCache = BoundedCache(POOL_KEYS_BYTES)
        self.file: BinaryIO | None = None
        self.last: tuple[bytes, str, NDArray[np.uint64] | None] = (b"", "", None)

    def add(self, h: bytes, data: bytes, offset: int) -> None:
        self.where[h] = offset
        insert(self.data, h, data, 1 << 30, len(data) + _ENTRY_OVERHEAD)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None

    def usable(self, h: bytes, generator: str, present: set[bytes]
               ) -> NDArray[np.uint64] | None:
        """The keys of pool ``h`` when its Blob came (is in ``present``) and is a valid
        pool, else None. The pool of the last call is remembered: agents select from one
        pool several times in a row."""
        h = bytes(h)  # of a view: 32 bytes copied, then compared and hashed as bytes
        if h == self.last[0] and generator == self.last[1]:
            return self.last[2]
        keys = self.keys_of(h, generator) if h in present else None
        if isinstance(keys, str):
            keys = None
        self.last = (h, generator, keys)
        return keys

    def keys_of(self, h: bytes, generator: str) -> NDArray[np.uint64] | str:
        """The keys of pool ``h`` under ``generator``, or what is wrong with the pool."""
        ck = (h, generator == _noise.GENERATOR_V1)
        hit: NDArray[np.uint64] | str | None = self.keys.get(ck)
        if hit is not None:
            return hit
        h = bytes(h)  # kept as a cache key: never a view of a frame
        ck = (h, ck[1])
        name = f"candidate pool {h.hex()[:16]}…"
        data = self._data(h)
        if data is None:
            return f"{name} is stored as a Blob that is not of kind 'pool'"
        try:  # the usual pool, of str ids, type-checked by msgspec in one C pass
            ids: list[Any] = _str_ids.decode(data)
            kinds: set[type] | None = {str} if ids else None
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            try:
                ids, kinds = decode_pool(data, where=name), None
            except TraceFormatError as exc:
                return self._keep(ck, str(exc))
        joined = None if ck[1] or kinds is None else _noise.nul_joined(ids)
        if joined is not None:  # keyed from the joined ids: the list and its str objects go
            n = len(ids)
            del ids
            return self._keep(ck, _noise._joined_keys(joined, n))
        if ck[1]:
            return self._keep(ck, np.fromiter((_noise.candidate_key(c) for c in ids),
                                              np.uint64, len(ids)))
        try:
            return self._keep(ck, _noise.pool_keys(tuple(ids), kinds=kinds))
        except (TypeError, OverflowError) as exc:  # e.g. a bool id written by hand
            return self._keep(ck, f"{name}: {exc}")

    def _keep(self, ck: tuple[bytes, bool], out: NDArray[np.uint64] | str
              ) -> NDArray[np.uint64] | str:
        size = out.nbytes if isinstance(out, np.ndarray) else len(out)
        insert(self.keys, ck, out, 1 << 30, size + _ENTRY_OVERHEAD)
        return out

    def _data(self, h: bytes) -> bytes | None:
        data: bytes | None = self.data.get(h)
        if data is not None or h not in self.where:
            return data
        if self.file is None:
            self.file = _open_for_reading(self.path)  # as every reader opens a trace
        records = read_frame(self.file, self.where[h], path=self.path, limits=self.limits)
        data = next((r.data for r in records if type(r) is Blob and r.hash == h), None)
        if data is not None:
            insert(self.data, h, data, 1 << 30, len(data) + _ENTRY_OVERHEAD)
        return data


def chunks(v: NDArray[np.float64]) -> list[NDArray[np.float64]]:
    """``v`` in views of ``CHUNK`` values."""
    return [v[a:a + CHUNK] for a in range(0, v.shape[0], CHUNK)]


def chunked_choice_agrees(p: NDArray[np.float64], g: NDArray[np.float64], choice: int
                          ) -> tuple[bool, int]:
    """``(agrees, best)``: ``_draw_match.choice_agrees`` and ``argmax(log p + g)``, in
    CHUNK-sized passes (so a huge selection needs no vector-sized temporaries)."""
    best, top = -1, 0.0
    lp_best = g_best = lp_choice = g_choice = s_choice = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        for a in range(0, p.shape[0], CHUNK):
            lp = np.log(p[a:a + CHUNK])
            gc = g[a:a + CHUNK]
            s = lp + gc
            j = int(np.argmax(s))
            if best < 0 or s[j] > top or (np.isnan(s[j]) and not np.isnan(top)):
                best, top, lp_best, g_best = a + j, float(s[j]), float(lp[j]), float(gc[j])
            if a <= choice < a + CHUNK:
                c = choice - a
                lp_choice, g_choice, s_choice = float(lp[c]), float(gc[c]), float(s[c])
    if best == choice:
        return True, best
    if not np.isfinite(s_choice):
        return False, best
    # Each score carries the rounding of its two logs: a tie within it is a tie.
    slack = DRAW_TOLERANCE * (2.0 + abs(lp_best) + abs(g_best) + abs(lp_choice)
                              + abs(g_choice))
    return bool(top - s_choice <= slack), best


class Batch:
    """Usual selections (pool known, choice in range), checked in numpy passes
    over all of their candidates at once: a pass finds which selections may hold a problem,
    and those are checked one by one (``_Verifier._check``), which says what it is."""

    __slots__ = ("check_selection", "check_stop", "entries", "held_bytes", "held_frame", "size",
                 "stops")

    def __init__(self, check_selection: Callable[[int, Selection, Callable[[str], int]], None],
                 check_stop: Callable[[int, Continuation, int], None]) -> None:
        """``check_selection(index, selection, seed_of)`` and ``check_stop(index,
        continuation, seed)``: every check of one record, for those a pass found."""
        self.check_selection = check_selection
        self.check_stop = check_stop
        self.entries: list[tuple[int, Selection, int, NDArray[np.uint64]]] = []
        self.size = 0
        self.stops: list[tuple[int, Continuation, int]] = []
        # A selection is a view of its frame, which it keeps alive while it waits: the
        # bytes of the frames kept so (the batch is checked past BATCH_HELD_BYTES).
        self.held_frame, self.held_bytes = -1, 0

    def __bool__(self) -> bool:
        return bool(self.entries or self.stops)

    def holds_too_much(self) -> bool:
        """Whether the waiting selections keep frames of over ``BATCH_HELD_BYTES`` alive:
        check the batch before the next frame is read."""
        return self.held_bytes > BATCH_HELD_BYTES

    def add(self, i: int, rec: Selection, seed: int, keys: NDArray[np.uint64],
            held: tuple[int, int]) -> None:
        if self.size + rec.n > CHUNK or len(self.entries) >= BATCH_SELECTIONS:
            self.check()
        if held[0] != self.held_frame:
            self.held_frame = held[0]
            self.held_bytes += held[1]
        self.entries.append((i, rec, seed, keys))
        self.size += rec.n

    def add_stop(self, i: int, rec: Continuation, seed: int) -> None:
        """A continuation whose p is in [0, 1] and whose decision is free or steered."""
        if len(self.stops) >= BATCH_SELECTIONS:
            self.check()
        self.stops.append((i, rec, seed))

    def check(self) -> None:
        if self.stops:
            self._check_stops()
        entries = self.entries
        if not entries:
            return
        self.entries, self.size = [], 0
        self.held_frame, self.held_bytes = -1, 0
        recs = [e[1] for e in entries]
        m = len(recs)
        ns = np.fromiter((r.n for r in recs), np.intp, m)
        starts = np.zeros(m, dtype=np.intp)
        np.cumsum(ns[:-1], out=starts[1:])
        p = np.frombuffer(b"".join([r.probs for r in recs]), dtype="<f8")
        g = np.frombuffer(b"".join([r.draws for r in recs]), dtype="<f8")
        # _noise.gumbel(keys, seed, stream, step) of every selection: its keys mixed with
        # its step base into one array (no batch-sized temporary), then the uniforms and
        # the logs in numpy passes over the whole batch.
        x = np.empty(p.shape[0], dtype=np.uint64)
        for (_, rec, seed, keys), a in zip(entries, starts.tolist(), strict=True):
            np.bitwise_xor(keys, np.uint64(_noise.step_base(seed, rec.name, rec.step)),
                           out=x[a:a + rec.n])
        regenerated = _noise._to_gumbel(_noise._to_uniforms(x))
        choices = starts + np.fromiter((r.choice for r in recs), np.intp, m)
        free = np.fromiter((not r.forced for r in recs), bool, m)
        suspects = _suspects(p, g, regenerated, starts, choices, free)
        for j in np.flatnonzero(suspects).tolist():
            i, rec, seed, _ = entries[j]
            self.check_selection(i, rec, _constant(seed))


    def _check_stops(self) -> None:
        """``_noise.uniform`` of every continuation in numpy passes (the same integer
        operations, so the same bits), against the recorded ``u`` and decision."""
        stops, self.stops = self.stops, []
        m = len(stops)
        recs = [e[1] for e in stops]
        try:
            steps = np.fromiter((r.step for r in recs), np.int64, m).view(np.uint64)
        except OverflowError:  # a step past 2**63 (never recorded): one by one
            suspects: list[int] = list(range(m))
        else:
            # step base fmix(fmix(seed ^ stream) ^ fmix(step + phi)) (_noise.step_base)
            np.add(steps, _PHI, out=steps)
            x = _noise._fmix64_array(steps)
            x ^= np.fromiter((_noise.seed_stream_word(e[2], r.name)
                              for e, r in zip(stops, recs, strict=True)), np.uint64, m)
            x = _noise._fmix64_array(x)
            x ^= _CONTINUATION_KEY
            u = _noise._to_uniforms(x)
            recorded = np.fromiter((r.u for r in recs), np.float64, m)
            bad = u != recorded
            decided = recorded < np.fromiter((r.p for r in recs), np.float64, m)
            decided ^= np.fromiter((r.decision for r in recs), bool, m)  # True: disagree
            decided &= ~np.fromiter((r.forced for r in recs), bool, m)
            bad |= decided
            suspects = np.flatnonzero(bad).tolist()
        for j in suspects:
            i, rec, seed = stops[j]
            self.check_stop(i, rec, seed)


def _constant(seed: int) -> Callable[[str], int]:
    """The seed a batched selection drew with, whatever the generator (its run may have
    ended in the frame)."""
    return lambda _: seed


def _suspects(p: NDArray[np.float64], g: NDArray[np.float64], regenerated: NDArray[np.float64],
              starts: NDArray[np.intp], choices: NDArray[np.intp], free: NDArray[np.bool_]
              ) -> NDArray[np.bool_]:
    """Which selections (segments of ``p``, ``g`` from ``starts``) may hold a problem: a
    probability that is not finite and non-negative, a sum not within ``SUM_TOLERANCE``
    of 1 (half of it: the one-by-one check decides), a free choice that is not a
    maximum of ``log p + g``, a draw off its regenerated value."""
    with np.errstate(divide="ignore", invalid="ignore"):
        bad = ~(p >= 0)  # NaN and negatives
        bad |= p == np.inf
        out = np.logical_or.reduceat(bad, starts)
        sums = np.add.reduceat(p, starts)
        out |= ~(np.abs(sums - 1.0) <= 0.5 * SUM_TOLERANCE)
        scores = np.log(p)
        scores += g
        top = np.maximum.reduceat(scores, starts)
        chosen = scores[choices]
        out |= free & ~((chosen == top) & np.isfinite(chosen))
        if not np.array_equal(g, regenerated):
            far = ~(np.abs(g - regenerated) <= DRAW_TOLERANCE * (1.0 + np.abs(g)))
            out |= np.logical_or.reduceat(far, starts)
    return out
