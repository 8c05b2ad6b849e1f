"""Receipt chains, advanced by a trace writer's pool thread over each batch it writes.

receipt_k = sha256(receipt_{k-1} ‖ window ‖ entry_hash ‖ exit_hash) (DESIGN §5,
[LBC] Appendix B), in queue order, which is the order of the file: the caller needs
neither a lock nor a hash for it. ``TraceWriter`` (``agentlog._writer``) inherits
``RunSealer``; its ``_write_batch`` seals a batch, then seals each run's digest at its
``RunEnd`` (``agentlog._digest``).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import msgspec

from agentlog import _digest
from agentlog._records import (
    Blob,
    Continuation,
    RunEnd,
    RunStart,
    Selection,
    WindowEnter,
    WindowExit,
)
from agentlog._state import receipt_genesis, receipt_key

__all__ = ["RunSealer"]

_SEALED_TYPES = frozenset(
    (WindowEnter, WindowExit, RunStart, RunEnd, Selection, Continuation, Blob)
)
# Positions in a run's chain state: [head, windows closed, selections, continuations].
_HEAD, _WINDOWS, _SELECTIONS, _CONTINUATIONS = 0, 1, 2, 3
_TALLIED: dict[type, int] = {Selection: _SELECTIONS, Continuation: _CONTINUATIONS}
_sha256 = hashlib.sha256
_replace = msgspec.structs.replace


class RunSealer:
    """The receipt-chain state of a writer and the pass that advances it (pool thread)."""

    def _init_sealing(self) -> None:
        # Receipt chains, advanced by the pool thread in queue order (see _seal): run
        # index -> [head, windows closed, selections, continuations]; (run, window id) ->
        # entry hash while the window is open.
        self._chains: dict[int, list[Any]] = {}
        self._open_entries: dict[tuple[int, int], bytes] = {}
        self._receipt_keys: dict[str, bytes] = {}
        # Run digests (agentlog._digest), advanced frame by frame in file order; a
        # recorder puts a run's HMAC key in run_keys before its RunStart.
        self._digests: dict[int, _digest.RunDigest] = {}
        self.run_keys: dict[int, bytes] = {}
        # The file's chain of keyed runs (agentlog._digest); continued from the file's
        # last keyed run when appending.
        self._keyed_chain = _digest.KeyedChain()
        self._run_ends: list[int] = []  # positions of RunEnds in the batch being sealed
        self._batch_blobs = False  # the batch being sealed holds a Blob

    if TYPE_CHECKING:  # pragma: no cover - defined by TraceWriter
        def _note_problem(self, message: str) -> None: ...

    def _seal(self, batch: list[Any]) -> None:
        """Advance each run's receipt chain over ``batch`` and fill the receipts left empty.

        receipt_k = sha256(receipt_{k-1} ‖ window ‖ entry_hash ‖ exit_hash) (DESIGN §5,
        [LBC] Appendix B). The chain runs in queue order, which is the order of the
        file, so the caller needs neither a lock nor a hash for it: a ``WindowExit`` put
        with ``receipt=b""`` gets its receipt here, and a ``RunEnd`` put with
        ``receipt=b""`` gets the head and the run's counts (windows closed, selections,
        continuations: what the file holds, however many threads recorded them). This is
        the one place a receipt is computed; a record made by hand with its receipt set
        (a rewritten trace) is kept and continued from.
        """
        chains = self._chains
        entries = self._open_entries
        for i, record in enumerate(batch):
            kind = type(record)
            if kind not in _SEALED_TYPES:
                continue
            try:
                tally = _TALLIED.get(kind)
                if tally is not None:  # a selection or continuation: counted into its run
                    chain = chains.get(record.run)
                    if chain is not None:
                        chain[tally] += 1
                    continue
                self._seal_one(batch, i, kind, record, chains, entries)
            except Exception as exc:  # a malformed record: written as it is, never fatal
                self._note_problem(f"could not advance the receipt chain over a "
                                   f"{kind.__name__} record ({type(exc).__name__}: {exc})")

    def _seal_one(self, batch: list[Any], i: int, kind: type, record: Any,
                  chains: dict[int, list[Any]], entries: dict[tuple[int, int], bytes]) -> None:
        if kind is WindowEnter:
            entries[(record.run, record.window)] = record.entry_hash
            return
        if kind is Blob:
            self._batch_blobs = True
            return
        if kind is RunStart:
            chains[record.run] = [receipt_genesis(record.run_id), 0, 0, 0]
            self._digests[record.run] = _digest.RunDigest(record.run_id,
                                                          self.run_keys.pop(record.run, None))
            return
        if kind is RunEnd:
            if record.receipt:  # a RunEnd made by hand, not by a recorder: keep it as it is
                self._digests.pop(record.run, None)
            else:
                self._run_ends.append(i)  # _write_batch seals its digest
        chain = chains.get(record.run)
        if chain is None:  # records of a run whose RunStart this writer never saw
            if kind is WindowExit:
                entries.pop((record.run, record.window), None)
            return
        if kind is WindowExit:
            entry = entries.pop((record.run, record.window), None)
            chain[_WINDOWS] += 1
            if record.receipt:
                chain[_HEAD] = record.receipt
            elif entry is not None:
                key = self._receipt_keys.get(record.name)
                if key is None:
                    key = self._receipt_keys.setdefault(record.name, receipt_key(record.name))
                chain[_HEAD] = _sha256(chain[_HEAD] + key + entry + record.exit_hash).digest()
                batch[i] = _replace(record, receipt=chain[_HEAD])
        else:  # RunEnd
            del chains[record.run]
            if not record.receipt:
                batch[i] = _replace(record, receipt=chain[_HEAD], n_windows=chain[_WINDOWS],
                                    n_selections=chain[_SELECTIONS],
                                    n_continuations=chain[_CONTINUATIONS])
