"""``verify``: recompute everything a trace claims and list what does not hold.

Checks, per file:

* every Blob's SHA-256, every inline entry/exit artifact against its hash, every
  referenced Blob present;
* the receipt chain of every run, recomputed from its genesis, and the RunEnd head;
* ``after=`` continuity: a window's entry equals its declared predecessor's exit
  (a mismatch or a missing predecessor is a *bypass*);
* every probability vector finite, non-negative, normalised, of the declared size;
  every Gumbel draw equal to its value regenerated from (seed, stream, step, candidate
  id); every choice equal to ``argmax(log p + g)`` of its recorded draws (unless forced
  by a declared steer);
* every continuation's uniform regenerated from (seed, stream, step) and its decision
  equal to ``u < p``;
* structure: runs that never ended, windows that never closed, repeated steps, a
  RunEnd whose counts of windows, selections and continuations differ from its run's
  records, and a truncated tail.

Example:
    >>> import agentlog as al
    >>> with al.record("/tmp/agentlog-verify-doc.zst", mode="w", seed=1):
    ...     _ = al.proceed(0.5, name="stop")
    >>> al.verify("/tmp/agentlog-verify-doc.zst").ok
    True
"""

from __future__ import annotations

import hashlib
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from . import _noise
from ._errors import TraceFormatError
from ._records import (
    Blob,
    Continuation,
    RunEnd,
    RunStart,
    Selection,
    WindowEnter,
    WindowExit,
)
from ._select import SUM_TOLERANCE
from ._state import receipt_genesis, receipt_next


@dataclass(frozen=True)
class Problem:
    """One thing that does not hold. ``record`` is the index of the record in the file."""

    kind: str
    message: str
    run: int | None = None
    record: int | None = None

    def __str__(self) -> str:
        where = []
        if self.run is not None:
            where.append(f"run {self.run}")
        if self.record is not None:
            where.append(f"record {self.record}")
        prefix = f"[{self.kind}]" + (f" ({', '.join(where)})" if where else "")
        return f"{prefix} {self.message}"


@dataclass
class VerifyReport:
    """What ``verify`` found in one trace file."""

    path: str
    problems: list[Problem] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)
    truncated: bool = False
    bytes_dropped: int = 0
    records: int = 0
    runs: int = 0

    @property
    def ok(self) -> bool:
        """True when nothing is wrong (a truncated tail is a problem)."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "ok": self.ok,
            "records": self.records,
            "runs": self.runs,
            "truncated": self.truncated,
            "bytes_dropped": self.bytes_dropped,
            "checked": dict(self.checked),
            "problems": [
                {"kind": p.kind, "message": p.message, "run": p.run, "record": p.record}
                for p in self.problems
            ],
        }


_pool_decoder = msgspec.msgpack.Decoder(list[Any])


def verify(path: str | os.PathLike[str]) -> VerifyReport:
    """Verify one trace file. Raises ``TraceFormatError`` only when it cannot be read."""
    from ._reader import read

    trace = read(path)
    report = VerifyReport(
        path=os.fspath(path),
        truncated=bool(trace.truncated),
        bytes_dropped=int(trace.bytes_dropped),
        records=len(trace.records),
    )
    _Verifier(report).check(trace.records)
    if report.truncated:
        report.problems.append(
            Problem(
                "truncated",
                f"the file ends inside a frame: {report.bytes_dropped} bytes dropped after "
                f"{report.records} records (a crash or an unfinished copy)",
            )
        )
    return report


class _Verifier:
    def __init__(self, report: VerifyReport) -> None:
        self.report = report
        self.blobs: dict[bytes, bytes] = {}
        self.starts: dict[int, RunStart] = {}
        self.receipts: dict[int, bytes] = {}
        self.open_windows: dict[tuple[int, int], tuple[int, WindowEnter]] = {}
        self.steps: dict[tuple[int, str], set[int]] = defaultdict(set)
        self.ended: set[int] = set()
        self.pool_keys: dict[bytes, tuple[int, Any]] = {}
        # run -> records counted in the file: windows closed, selections, continuations
        self.tallies: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])

    def problem(self, kind: str, message: str, run: int | None, index: int | None) -> None:
        self.report.problems.append(Problem(kind, message, run, index))

    def count(self, kind: str) -> None:
        self.report.checked[kind] = self.report.checked.get(kind, 0) + 1

    def check(self, records: list[Any]) -> None:
        # Blobs may follow the records that reference them within a file (they are
        # enqueued first, but several runs share a writer): collect them in a first pass.
        for i, rec in enumerate(records):
            if isinstance(rec, Blob):
                self.count("blobs")
                if hashlib.sha256(rec.data).digest() != rec.hash:
                    self.problem("blob-hash", f"blob {rec.hash.hex()[:16]}… does not hash to "
                                 "its name: its content was altered", None, i)
                else:
                    self.blobs[rec.hash] = rec.data
        for i, rec in enumerate(records):
            if isinstance(rec, RunStart):
                self.run_start(i, rec)
            elif isinstance(rec, WindowEnter):
                self.window_enter(i, rec)
            elif isinstance(rec, WindowExit):
                self.window_exit(i, rec)
            elif isinstance(rec, Selection):
                self.selection(i, rec)
            elif isinstance(rec, Continuation):
                self.continuation(i, rec)
            elif isinstance(rec, RunEnd):
                self.run_end(i, rec)
        for run, start in self.starts.items():
            if run not in self.ended:
                self.problem("run-not-ended", f"run {start.run_id} has no RunEnd record "
                             "(the process stopped before record() exited)", run, None)
        for (run, wid), (i, enter) in self.open_windows.items():
            self.problem("window-not-closed", f"window {enter.name!r} (id {wid}) never "
                         "closed", run, i)
        self.report.runs = len(self.starts)

    def run_start(self, i: int, rec: RunStart) -> None:
        self.count("runs")
        if rec.run in self.starts:
            self.problem("duplicate-run", f"run index {rec.run} started twice", rec.run, i)
        self.starts[rec.run] = rec
        self.receipts[rec.run] = receipt_genesis(rec.run_id)
        if rec.generator != _noise.GENERATOR_ID:
            self.problem("generator", f"run uses noise generator {rec.generator!r}; this "
                         f"agentlog regenerates {_noise.GENERATOR_ID!r} only: upgrade agentlog",
                         rec.run, i)

    def _artifact(self, h: bytes, inline: bytes | None, what: str, run: int, i: int) -> None:
        if inline is not None:
            if hashlib.sha256(inline).digest() != h:
                self.problem("artifact-hash", f"{what} does not hash to its recorded "
                             f"{h.hex()[:16]}…: the sealed artifact was altered", run, i)
        elif h not in self.blobs:
            self.problem("missing-blob", f"{what} is stored as blob {h.hex()[:16]}… which is "
                         "not in the file", run, i)

    def _known_run(self, run: int, i: int) -> bool:
        if run not in self.starts:
            self.problem("orphan-record", f"record refers to run {run}, which never started",
                         run, i)
            return False
        return True

    def window_enter(self, i: int, rec: WindowEnter) -> None:
        self.count("windows")
        if not self._known_run(rec.run, i):
            return
        self._artifact(rec.entry_hash, rec.entry, f"entry of window {rec.name!r}", rec.run, i)
        self.open_windows[(rec.run, rec.window)] = (i, rec)
        if rec.after is not None:
            if rec.expected_hash is None:
                self.problem("bypass", f"window {rec.name!r} declares after={rec.after!r} but "
                             f"no {rec.after!r} window exited before it in this run", rec.run, i)
            elif rec.link_hash != rec.expected_hash:
                self.problem("bypass", f"window {rec.name!r}'s entry "
                             f"{(rec.link_hash or b'').hex()[:16]}… differs from the exit "
                             f"{rec.expected_hash.hex()[:16]}… of its declared predecessor "
                             f"{rec.after!r}", rec.run, i)

    def window_exit(self, i: int, rec: WindowExit) -> None:
        if not self._known_run(rec.run, i):
            return
        opened = self.open_windows.pop((rec.run, rec.window), None)
        if opened is None:
            self.problem("exit-without-enter", f"window {rec.name!r} (id {rec.window}) exits "
                         "without having entered", rec.run, i)
            return
        enter = opened[1]
        self.tallies[rec.run][0] += 1
        self._artifact(rec.exit_hash, rec.exit, f"exit of window {rec.name!r}", rec.run, i)
        expected = receipt_next(self.receipts[rec.run], rec.name, enter.entry_hash,
                                rec.exit_hash)
        self.receipts[rec.run] = rec.receipt  # continue from the recorded one: report once
        if expected != rec.receipt:
            self.problem("receipt", f"receipt of window {rec.name!r} (id {rec.window}) is "
                         f"{rec.receipt.hex()[:16]}…, the chain gives {expected.hex()[:16]}…",
                         rec.run, i)

    def _step(self, run: int, stream: str, step: int, i: int) -> None:
        seen = self.steps[(run, stream)]
        if step in seen:
            self.problem("repeated-step", f"stream {stream!r} step {step} occurs twice", run, i)
        seen.add(step)

    def _pool(self, h: bytes, run: int, i: int) -> tuple[int, Any] | None:
        hit = self.pool_keys.get(h)
        if hit is not None:
            return hit
        data = self.blobs.get(h)
        if data is None:
            self.problem("missing-blob", f"candidate pool {h.hex()[:16]}… is not in the file",
                         run, i)
            return None
        try:
            ids = _pool_decoder.decode(data)
            if not all(isinstance(c, str | int | bytes) for c in ids):
                raise msgspec.DecodeError("candidate ids must be str, int or bytes")
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
            self.problem("pool", f"candidate pool {h.hex()[:16]}… does not decode: {exc}", run,
                         i)
            return None
        keys = np.fromiter((_noise.candidate_key(c) for c in ids), np.uint64, len(ids))
        self.pool_keys[h] = (len(ids), keys)
        return self.pool_keys[h]

    def selection(self, i: int, rec: Selection) -> None:
        self.count("selections")
        if not self._known_run(rec.run, i):
            return
        self.tallies[rec.run][1] += 1
        where = f"select {rec.name!r} step {rec.step}"
        self._step(rec.run, rec.name, rec.step, i)
        if len(rec.probs) != 8 * rec.n or len(rec.draws) != 8 * rec.n:
            self.problem("vector-size", f"{where}: expected {rec.n} float64 probabilities and "
                         f"draws, found {len(rec.probs)} and {len(rec.draws)} bytes", rec.run, i)
            return
        p = np.frombuffer(rec.probs, dtype="<f8")
        g = np.frombuffer(rec.draws, dtype="<f8")
        if not np.isfinite(p).all() or (p < 0).any():
            self.problem("probabilities", f"{where}: vector has non-finite or negative entries",
                         rec.run, i)
            return
        if abs(float(p.sum()) - 1.0) > SUM_TOLERANCE:
            self.problem("probabilities", f"{where}: vector sums to {float(p.sum())!r}, not 1",
                         rec.run, i)
        if not 0 <= rec.choice < rec.n:
            self.problem("choice", f"{where}: choice {rec.choice} outside 0..{rec.n - 1}",
                         rec.run, i)
            return
        pool = self._pool(rec.pool, rec.run, i)
        if pool is not None:
            size, keys = pool
            if size != rec.n:
                self.problem("pool", f"{where}: pool holds {size} ids, vector has {rec.n}",
                             rec.run, i)
            else:
                regenerated = _noise.gumbel(keys, self.starts[rec.run].seed, rec.name, rec.step)
                if not np.array_equal(regenerated, g):
                    bad = int(np.flatnonzero(regenerated != g)[0])
                    self.problem("draws", f"{where}: draw {bad} is {g[bad]!r}, regenerating "
                                 f"from (seed, stream, step, id) gives {regenerated[bad]!r}",
                                 rec.run, i)
        if not rec.forced:
            with np.errstate(divide="ignore"):
                expected = int(np.argmax(np.log(p) + g))
            if expected != rec.choice:
                self.problem("choice", f"{where}: recorded choice {rec.choice}, but "
                             f"argmax(log p + g) is {expected}", rec.run, i)
        elif rec.steer is None:
            self.problem("choice", f"{where}: forced choice without a declared steer", rec.run,
                         i)

    def continuation(self, i: int, rec: Continuation) -> None:
        self.count("continuations")
        if not self._known_run(rec.run, i):
            return
        self.tallies[rec.run][2] += 1
        where = f"proceed {rec.name!r} step {rec.step}"
        self._step(rec.run, rec.name, rec.step, i)
        if not 0.0 <= rec.p <= 1.0:
            self.problem("probabilities", f"{where}: p_continue {rec.p!r} outside [0, 1]",
                         rec.run, i)
            return
        u = _noise.uniform(self.starts[rec.run].seed, rec.name, rec.step)
        if u != rec.u:
            self.problem("draws", f"{where}: u is {rec.u!r}, regenerating from (seed, stream, "
                         f"step) gives {u!r}", rec.run, i)
        if not rec.forced and rec.decision != (rec.u < rec.p):
            self.problem("decision", f"{where}: decision {rec.decision} but u={rec.u!r} and "
                         f"p={rec.p!r}", rec.run, i)
        elif rec.forced and rec.steer is None:
            self.problem("decision", f"{where}: forced decision without a declared steer",
                         rec.run, i)

    def run_end(self, i: int, rec: RunEnd) -> None:
        if not self._known_run(rec.run, i):
            return
        self.ended.add(rec.run)
        if rec.receipt != self.receipts[rec.run]:
            self.problem("receipt", f"RunEnd receipt head {rec.receipt.hex()[:16]}… differs "
                         f"from the chain's {self.receipts[rec.run].hex()[:16]}…", rec.run, i)
        recorded = [rec.n_windows, rec.n_selections, rec.n_continuations]
        if recorded != self.tallies[rec.run]:
            self.problem("counts", "RunEnd counts (windows, selections, continuations) "
                         f"{tuple(recorded)} differ from its run's records in the file "
                         f"{tuple(self.tallies[rec.run])}: records were lost or added",
                         rec.run, i)
        if rec.dropped:
            self.problem("dropped", f"{rec.dropped} records could not be written (I/O errors "
                         "while recording)", rec.run, i)


def verify_many(paths: list[str]) -> list[VerifyReport | TraceFormatError]:
    """Verify several files; an unreadable one yields its ``TraceFormatError``."""
    out: list[VerifyReport | TraceFormatError] = []
    for p in paths:
        try:
            out.append(verify(p))
        except TraceFormatError as exc:
            out.append(exc)
    return out
