"""The run digest: one hash over every field of every record of a run.

The receipt chain ([LBC] Appendix B) covers window names and entry/exit hashes only;
an estimator also reads probability vectors, draws, continuation probabilities,
scores, statuses and metadata. The run digest brings all of them under one hash::

    digest = H(b"agentlog-digest/1" ‖ u32 len(run_id) ‖ run_id
               ‖ the compressed payload of every frame, in file order, that holds a
                 record of the run (a Blob is nobody's record), before the frame of
                 its RunEnd
               ‖ the exact msgpack bytes of the run's records in that frame before
                 the RunEnd (none in files agentlog writes: its writer ends a frame
                 before each RunEnd)
               ‖ msgpack([run, t_ns, status, receipt, n_windows, n_selections,
                          n_continuations, dropped, error_type]) of the RunEnd)

A payload decompresses to exactly one content, so hashing the compressed bytes covers
every record in it at well under half the cost of hashing the content (small records
compress ~2.5x) and needs no second encoding. ``H`` is SHA-256, or
HMAC-SHA256 under a key when the run was recorded with ``record(..., key=...)``. The
writer stores it in ``RunEnd.digest``; ``verify`` recomputes it. Blobs are named by
their own SHA-256, which the records that use them carry.

The keyed chain. A keyed run's digest (``record(..., key=...)``) also covers its place
among the file's keyed runs: ``RunEnd.chain`` is its position (1, 2, ... in file order,
over every keyed run the file holds) and the HMAC goes on over::

    ‖ b"agentlog-chain/1" ‖ u64 chain ‖ the digest of the keyed run before it
                                          (32 zero bytes for the first)

so removing, reordering or duplicating a keyed run breaks the MAC of the keyed run
after it, and nobody without the key can mend it. Removing the *last* runs leaves a
shorter chain that is intact: only a stored head (the last run's position and digest,
which ``verify`` reports) tells the difference. Keyed runs written before the chain
(``chain`` None) are checked one by one, as before.

Threat model: without a key the digest catches any edit of a record made without
recomputing the digest (a tool, a script, a hand edit of a number); someone who
rewrites a trace on purpose can recompute it. With a key, only a holder of the key
can produce a digest that verifies, or a chain of them.

Examples:
    >>> from agentlog._digest import RunDigest
    >>> d = RunDigest("0" * 32)
    >>> d.update(b"\\x92\\x08\\x00")
    >>> len(d.finish_bytes(b"")), d.keyed
    (32, False)
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Sequence
from typing import Any

import msgspec

from agentlog._records import RunEnd

__all__ = [
    "CHAIN_DOMAIN", "CHAIN_START", "DIGEST_DOMAIN", "KeyedChain", "RunDigest",
    "advance_frame", "chain_link", "key_bytes", "run_end_tail", "seal_run_end",
]

DIGEST_DOMAIN = b"agentlog-digest/1"
CHAIN_DOMAIN = b"agentlog-chain/1"
CHAIN_START = bytes(32)  # what the first keyed run of a file links to
_tail_encoder = msgspec.msgpack.Encoder()


def key_bytes(key: str | bytes | None, *, what: str = "key") -> bytes | None:
    """The HMAC key as bytes: ``str`` is UTF-8 encoded, ``bytes`` used as given.

    Raises:
        TypeError: ``key`` is neither str nor bytes.
        ValueError: ``key`` is empty.
    """
    if key is None:
        return None
    if isinstance(key, str):
        out = key.encode()
    elif isinstance(key, bytes | bytearray):
        out = bytes(key)
    else:
        raise TypeError(f"`{what}` must be a str or bytes (a secret); found {type(key).__name__}")
    if not out:
        raise ValueError(f"`{what}` is empty; pass a non-empty secret, or no key")
    return out


class RunDigest:
    """The running digest of one run (SHA-256, or HMAC-SHA256 with ``key``)."""

    __slots__ = ("_h", "keyed")

    def __init__(self, run_id: str, key: bytes | None = None) -> None:
        self.keyed = key is not None
        self._h: Any = (hmac.new(key, digestmod=hashlib.sha256) if key is not None
                        else hashlib.sha256())
        rid = run_id.encode()
        self._h.update(DIGEST_DOMAIN + struct.pack("<I", len(rid)) + rid)

    def update(self, data: bytes | memoryview | msgspec.Raw) -> None:
        self._h.update(data)

    def finish_bytes(self, tail: bytes) -> bytes:
        """Hash the RunEnd's ``tail`` (``run_end_tail``) and return the digest."""
        self._h.update(tail)
        digest: bytes = self._h.digest()
        return digest


def run_end_tail(run: int, t_ns: int, status: int, receipt: bytes, n_windows: int,
                 n_selections: int, n_continuations: int, dropped: int,
                 error_type: str | None) -> bytes:
    """The canonical bytes of the RunEnd fields the digest covers."""
    return _tail_encoder.encode([run, t_ns, status, receipt, n_windows, n_selections,
                                 n_continuations, dropped, error_type])


def chain_link(position: int, previous: bytes) -> bytes:
    """The bytes a keyed run's HMAC goes on over after its tail: its place in the chain."""
    return CHAIN_DOMAIN + struct.pack("<Q", position) + previous


class KeyedChain:
    """A file's chain of keyed runs so far: how many (``count``), the last one's digest."""

    __slots__ = ("count", "head")

    def __init__(self, count: int = 0, head: bytes = CHAIN_START) -> None:
        self.count = count
        self.head = head

    def follow(self, end: Any) -> None:
        """Move past a RunEnd read from a file (one that is not in the chain is ignored)."""
        if end.keyed and end.chain is not None and end.digest is not None:
            self.count, self.head = end.chain, bytes(end.digest)


def advance_frame(digests: dict[int, RunDigest], single: RunDigest | None,
                  records: Sequence[Any], payload: bytes) -> None:
    """Advance the digests of the runs holding a record of this frame by its ``payload``.

    ``single``: the writer knows every record of the frame belongs to this run (or to
    no digest) and that the frame holds no Blob, so no record needs looking at.
    Runs already ended (their RunEnd sealed by ``seal_run_end``) are not advanced.
    """
    if single is not None:
        single.update(payload)
        return
    for run in {getattr(r, "run", None) for r in records}:
        d = digests.get(run)  # type: ignore[arg-type]
        if d is not None:
            d.update(payload)


def seal_run_end(digests: dict[int, RunDigest], end: RunEnd, chain: KeyedChain) -> RunEnd:
    """``end`` with its run's digest filled in (unchanged for a run never started here).

    A keyed run takes the next place in ``chain`` (in file order: the writer seals RunEnds
    in the order it writes them).
    """
    d = digests.pop(end.run, None)
    if d is None or end.digest is not None:
        return end
    tail = run_end_tail(end.run, end.t_ns, end.status, end.receipt, end.n_windows,
                        end.n_selections, end.n_continuations, end.dropped, end.error_type)
    if not d.keyed:
        return msgspec.structs.replace(end, digest=d.finish_bytes(tail))
    position = chain.count + 1
    digest = d.finish_bytes(tail + chain_link(position, chain.head))
    chain.count, chain.head = position, digest
    return msgspec.structs.replace(end, digest=digest, keyed=True, chain=position)
