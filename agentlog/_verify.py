"""``verify``: recompute everything a trace claims and list what does not hold.

Checks, per file:

* every Blob's SHA-256, every inline entry/exit artifact against its hash, every
  referenced Blob present;
* the receipt chain of every run, recomputed from its genesis, and the RunEnd head;
* ``after=`` continuity: a window's entry equals its declared predecessor's exit
  (a mismatch or a missing predecessor is a *bypass*);
* every probability vector finite, non-negative, normalised, of the declared size;
  every Gumbel draw equal to its value regenerated from (seed, task, stream, step,
  candidate id) under the run's noise generator (the task counts from ``fmix64-gumbel/3``
  on); every choice equal to ``argmax(log p + g)`` of its recorded draws (unless forced
  by a declared steer);
* every continuation's uniform regenerated from (seed, task, stream, step) and its
  decision equal to ``u < p``;
* structure: runs that never ended, windows that never closed, repeated steps, a
  RunEnd whose counts of windows, selections and continuations differ from its run's
  records, a file without a run, records outside any run, empty frames and a
  truncated tail;
* the run digest (``RunEnd.digest``): SHA-256, or HMAC-SHA256 under the run's key,
  over the exact bytes of every record of the run, so that an edit of any field an
  estimator reads (a probability, a score, a status, the metadata) is detected.
  Traces written before the digest existed verify without it, with a note.

``verify`` streams the file: its memory is one frame plus per-run state (open windows,
each stream's steps, the candidate pools), whatever the size of the file. At most
``MAX_PROBLEMS_PER_KIND`` problems of each kind are listed; the rest are counted.

Example:
    >>> import agentlog as al
    >>> with al.record("agentlog-verify-doc.zst", seed=1):
    ...     _ = al.proceed(0.5, name="stop")
    >>> al.verify("agentlog-verify-doc.zst").ok
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
from ._digest import RunDigest, key_bytes, run_end_tail
from ._draw_match import choice_agrees, first_draw_disagreement
from ._errors import TraceFormatError
from ._frames import iter_frames
from ._records import (
    Blob,
    Continuation,
    LLMCall,
    RunEnd,
    RunStart,
    Score,
    Selection,
    ToolCall,
    WindowEnter,
    WindowExit,
)
from ._select import SUM_TOLERANCE
from ._state import receipt_genesis, receipt_next
from ._trace_format import ReadLimits
from ._vectors import decode_pool

MAX_PROBLEMS_PER_KIND = 100  # listed per kind; the rest are counted (bounded memory)


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
    """What ``verify`` found in one trace file.

    Attributes:
        path: the file.
        problems: what does not hold (at most ``MAX_PROBLEMS_PER_KIND`` of each kind,
            then one line counting the rest).
        checked: how many of each thing were checked.
        truncated, bytes_dropped: whether the file ends inside a frame, and how many
            bytes follow its last complete frame.
        records, runs, frames: what the file holds.
        notes: what could not be checked and why (not problems), e.g. a trace written
            before run digests existed.
    """

    path: str
    problems: list[Problem] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)
    truncated: bool = False
    bytes_dropped: int = 0
    records: int = 0
    runs: int = 0
    frames: int = 0
    notes: list[str] = field(default_factory=list)

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
            "frames": self.frames,
            "truncated": self.truncated,
            "bytes_dropped": self.bytes_dropped,
            "checked": dict(self.checked),
            "notes": list(self.notes),
            "problems": [
                {"kind": p.kind, "message": p.message, "run": p.run, "record": p.record}
                for p in self.problems
            ],
        }


def verify(
    path: str | os.PathLike[str],
    *,
    key: str | bytes | None = None,
    limits: ReadLimits | None = None,
) -> VerifyReport:
    """Verify one trace file, streaming it (memory: one frame plus per-run state).

    Args:
        path: the trace file.
        key: the secret the runs were recorded with (``record(..., key=...)``): their
            digests are then checked as HMACs, which nobody without the key can forge.
            Without it, a keyed digest is not checked (a note says so).
        limits: the reader's bounds (``ReadLimits``).

    Raises:
        TraceFormatError: only when the file cannot be read (not a trace, corrupted
            before its tail, hostile sizes).
        OSError: the file cannot be opened.
    """

    secret = key_bytes(key)
    report = VerifyReport(path=os.fspath(path))
    checker = _Verifier(report, secret)
    with iter_frames(path, limits=limits, raw=True) as frames:
        for frame in frames:
            if frame.raws:
                assert frame.payload is not None
                checker.frame(frame.records, frame.raws, frame.payload)
            else:
                checker.empty_frames += 1
    report.truncated = bool(frames.truncated)
    report.bytes_dropped = int(frames.bytes_dropped)
    report.records = frames.records
    report.frames = frames.frames
    checker.finish(header_only=frames.format_version is not None and not frames.frames)
    if report.truncated:
        report.problems.append(
            Problem(
                "truncated",
                f"the file ends inside a frame: {report.bytes_dropped} bytes dropped after "
                f"{report.records} records (a crash or an unfinished copy)",
            )
        )
    return report


class _Steps:
    """The steps seen in one stream, in memory bounded for the usual increasing steps."""

    __slots__ = ("above", "low")

    def __init__(self) -> None:
        self.low = 0  # every step below it was seen
        self.above: set[int] = set()

    def add(self, step: int) -> bool:
        """Record ``step``; False when it was seen before."""
        if step < self.low or step in self.above:
            return False
        if step == self.low:
            self.low += 1
            above = self.above
            while self.low in above:
                above.discard(self.low)
                self.low += 1
        else:
            self.above.add(step)
        return True


class _Verifier:
    def __init__(self, report: VerifyReport, key: bytes | None) -> None:
        self.report = report
        self.key = key
        self.index = 0  # of the next record in the file
        self.blob_hashes: set[bytes] = set()
        self.pool_data: dict[bytes, bytes] = {}
        self.pool_keys: dict[tuple[bytes, str], tuple[int, Any]] = {}
        # hash -> (what, run, record index) of references whose Blob has not come yet
        self.waiting: dict[bytes, list[tuple[str, int, int]]] = defaultdict(list)
        self.waiting_selections: dict[bytes, list[tuple[int, Selection]]] = defaultdict(list)
        self.starts: dict[int, RunStart] = {}
        self.receipts: dict[int, bytes] = {}
        self.digests: dict[int, RunDigest] = {}
        self.keyed_digests: dict[int, RunDigest] = {}
        self.open_windows: dict[tuple[int, int], tuple[int, WindowEnter]] = {}
        self.steps: dict[tuple[int, str], _Steps] = defaultdict(_Steps)
        self.ended: set[int] = set()
        self.listed: dict[str, int] = defaultdict(int)
        self.omitted: dict[str, int] = defaultdict(int)
        self.empty_frames = 0
        self.without_digest = 0
        self.keyed_unchecked = 0
        # run -> records counted in the file: windows closed, selections, continuations
        self.tallies: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])

    def problem(self, kind: str, message: str, run: int | None, index: int | None) -> None:
        listed = self.listed[kind]
        if listed >= MAX_PROBLEMS_PER_KIND:
            self.omitted[kind] += 1
            return
        self.listed[kind] = listed + 1
        self.report.problems.append(Problem(kind, message, run, index))

    def count(self, kind: str) -> None:
        self.report.checked[kind] = self.report.checked.get(kind, 0) + 1

    # -- the stream

    def frame(self, records: list[Any], raws: list[msgspec.Raw], payload: bytes) -> None:
        present: set[int] = set()  # runs holding a record of this frame
        for k, rec in enumerate(records):
            i = self.index
            self.index += 1
            t = type(rec)
            if t is Blob:
                self.blob(i, rec)
                continue
            if t is RunStart:
                self.run_start(i, rec)
            elif t is RunEnd:
                self.run_end(i, rec, records, raws, k)
                continue
            elif not self._known_run(rec.run, i):
                continue
            elif t is WindowEnter:
                self.window_enter(i, rec)
            elif t is WindowExit:
                self.window_exit(i, rec)
            elif t is Selection:
                self.selection(i, rec)
            elif t is Continuation:
                self.continuation(i, rec)
            elif t is Score or t is LLMCall or t is ToolCall:
                self.count("scores" if t is Score else "llm_calls" if t is LLMCall
                           else "tool_calls")
                if t is ToolCall:
                    self.tool_call(i, rec)
            present.add(rec.run)
        # A run's digest takes the payload of every frame holding a record of it, up to
        # the frame of its RunEnd (agentlog._digest); runs that ended here are done.
        for run in present:
            d = self.digests.get(run)
            if d is not None:
                d.update(payload)
                k2 = self.keyed_digests.get(run)
                if k2 is not None:
                    k2.update(payload)

    def finish(self, *, header_only: bool) -> None:
        for h, refs in self.waiting.items():
            for what, run, i in refs:
                self.problem("missing-blob", f"{what} is stored as blob {h.hex()[:16]}… which "
                             "is not in the file", run, i)
        for h, sels in self.waiting_selections.items():
            for i, rec in sels:
                self.problem("missing-blob", f"candidate pool {h.hex()[:16]}… of select "
                             f"{rec.name!r} step {rec.step} is not in the file", rec.run, i)
        for run, start in self.starts.items():
            if run not in self.ended:
                self.problem("run-not-ended", f"run {start.run_id} has no RunEnd record "
                             "(the process stopped before record() exited)", run, None)
        for (run, wid), (i, enter) in self.open_windows.items():
            self.problem("window-not-closed", f"window {enter.name!r} (id {wid}) never "
                         "closed", run, i)
        if not self.starts:
            what = ("holds the file header only (a process killed right after record() "
                    "opened it)" if header_only else f"holds {self.index} records but no run")
            self.problem("no-runs", f"the file {what}: no RunStart record, so nothing in it "
                         "can be attributed or checked; re-record the run", None, None)
        if self.empty_frames:
            self.problem("empty-frames", f"{self.empty_frames} frame(s) hold no record; "
                         "agentlog never writes an empty frame (the file was made or edited "
                         "by something else)", None, None)
        for kind, n in self.omitted.items():
            self.report.problems.append(Problem(kind, f"… and {n} more {kind!r} problems "
                                        f"(only the first {MAX_PROBLEMS_PER_KIND} are listed)"))
        if self.without_digest:
            self.report.notes.append(
                f"{self.without_digest} run(s) have no record digest (written by an older "
                "agentlog): their hashes, receipts and draws were checked, but an edit of a "
                "field outside them (a score, a status, the metadata) would go unseen")
        if self.keyed_unchecked:
            self.report.notes.append(
                f"{self.keyed_unchecked} run(s) carry a keyed digest (record(key=...)) that was "
                "not checked: pass the key (verify(path, key=...), agentlog verify --key-file)")
        self.report.runs = len(self.starts)

    # -- records

    def blob(self, i: int, rec: Blob) -> None:
        self.count("blobs")
        if hashlib.sha256(rec.data).digest() != rec.hash:
            self.problem("blob-hash", f"blob {rec.hash.hex()[:16]}… does not hash to its name: "
                         "its content was altered", None, i)
            return
        self.blob_hashes.add(rec.hash)
        # Only pools are kept: a selection needs their ids; other blobs need their hash.
        if rec.kind == "pool" or rec.hash in self.waiting_selections:
            self.pool_data[rec.hash] = rec.data
        self.waiting.pop(rec.hash, None)
        for j, sel in self.waiting_selections.pop(rec.hash, []):
            self._pool_checks(j, sel)

    def run_start(self, i: int, rec: RunStart) -> None:
        self.count("runs")
        if rec.run in self.starts:
            self.problem("duplicate-run", f"run index {rec.run} started twice", rec.run, i)
        self.starts[rec.run] = rec
        self.receipts[rec.run] = receipt_genesis(rec.run_id)
        self.digests[rec.run] = RunDigest(rec.run_id)
        if self.key is not None:
            self.keyed_digests[rec.run] = RunDigest(rec.run_id, self.key)
        if rec.generator not in _noise.GENERATORS:
            self.problem("generator", f"run uses noise generator {rec.generator!r}; this "
                         f"agentlog regenerates {', '.join(map(repr, _noise.GENERATORS))} "
                         "only: upgrade agentlog", rec.run, i)

    def _artifact(self, h: bytes, inline: bytes | None, what: str, run: int, i: int) -> None:
        if inline is not None:
            if hashlib.sha256(inline).digest() != h:
                self.problem("artifact-hash", f"{what} does not hash to its recorded "
                             f"{h.hex()[:16]}…: the sealed artifact was altered", run, i)
        elif h not in self.blob_hashes:
            self.waiting[h].append((what, run, i))  # its Blob may come later in the file

    def _known_run(self, run: int, i: int) -> bool:
        if run not in self.starts:
            self.problem("orphan-record", f"record refers to run {run}, which never started: "
                         "it lies outside any run", run, i)
            return False
        if run in self.ended:
            self.problem("orphan-record", f"record of run {run} comes after the run's RunEnd: "
                         "it lies outside the run", run, i)
            return False
        return True

    def tool_call(self, i: int, rec: ToolCall) -> None:
        # A frozen replay serves these bytes; older traces kept small ones as hashes only,
        # so only stored bytes are checked.
        for h, inline, what in ((rec.args_hash, rec.args, "arguments"),
                                (rec.result_hash, rec.result, "result")):
            if h is not None and inline is not None:
                self._artifact(h, inline, f"{what} of tool {rec.name!r}", rec.run, i)

    def _draw_in_window(self, i: int, run: int, window: int, stream: str, step: int) -> None:
        """A draw inside a window comes at or after the step its entry recorded for the
        stream: what a replay starts the stream at (``WindowEnter.steps``)."""
        opened = self.open_windows.get((run, window))
        if opened is None or opened[1].function is None:  # older traces record no offsets
            return
        start = (opened[1].steps or {}).get(stream, 0)
        if step < start:
            self.problem("stream-offset", f"{stream!r} step {step} is drawn inside window "
                         f"{opened[1].name!r} (id {window}), whose entry recorded the stream "
                         f"at step {start}: a replay would start it there", run, i)

    def window_enter(self, i: int, rec: WindowEnter) -> None:
        self.count("windows")
        self._artifact(rec.entry_hash, rec.entry, f"entry of window {rec.name!r}", rec.run, i)
        if rec.args_hash is not None:  # the argument map of an entry= projection (a Blob)
            self._artifact(rec.args_hash, None, f"arguments of window {rec.name!r}", rec.run,
                           i)
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
        if not self.steps[(run, stream)].add(step):
            self.problem("repeated-step", f"stream {stream!r} step {step} occurs twice", run, i)

    def _pool(self, h: bytes, generator: str, run: int, i: int) -> tuple[int, Any] | None:
        hit = self.pool_keys.get((h, generator))
        if hit is not None:
            return hit
        data = self.pool_data.get(h)
        if data is None:
            self.problem("pool", f"candidate pool {h.hex()[:16]}… is stored as a Blob that is "
                         "not of kind 'pool'", run, i)
            return None
        try:
            ids = decode_pool(data, where=f"candidate pool {h.hex()[:16]}…")
        except TraceFormatError as exc:
            self.problem("pool", str(exc), run, i)
            return None
        if generator == _noise.GENERATOR_V1:
            keys = np.fromiter((_noise.candidate_key(c) for c in ids), np.uint64, len(ids))
        else:
            try:
                keys = _noise.pool_keys(tuple(ids))
            except (TypeError, OverflowError) as exc:  # e.g. a bool id written by hand
                self.problem("pool", f"candidate pool {h.hex()[:16]}…: {exc}", run, i)
                return None
        self.pool_keys[(h, generator)] = (len(ids), keys)
        return self.pool_keys[(h, generator)]

    def selection(self, i: int, rec: Selection) -> None:
        self.count("selections")
        self.tallies[rec.run][1] += 1
        where = f"select {rec.name!r} step {rec.step}"
        self._step(rec.run, rec.name, rec.step, i)
        self._draw_in_window(i, rec.run, rec.window, rec.name, rec.step)
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
        if rec.pool in self.blob_hashes:
            self._pool_checks(i, rec)
        else:  # its Blob may come later in the file
            self.waiting_selections[rec.pool].append((i, rec))
        if not rec.forced:
            with np.errstate(divide="ignore"):
                log_p = np.log(p)
            if not choice_agrees(log_p, g, rec.choice):
                expected = int(np.argmax(log_p + g))
                self.problem("choice", f"{where}: recorded choice {rec.choice}, but "
                             f"argmax(log p + g) is {expected}", rec.run, i)
        elif rec.steer is None:
            self.problem("choice", f"{where}: forced choice without a declared steer", rec.run,
                         i)

    def _pool_checks(self, i: int, rec: Selection) -> None:
        where = f"select {rec.name!r} step {rec.step}"
        if rec.generator not in _noise.GENERATORS:
            self.problem("generator", f"{where}: noise generator {rec.generator!r} is not "
                         "one this agentlog regenerates: upgrade agentlog", rec.run, i)
            return
        pool = self._pool(rec.pool, rec.generator, rec.run, i)
        if pool is None:
            return
        size, keys = pool
        if size != rec.n:
            self.problem("pool", f"{where}: pool holds {size} ids, vector has {rec.n}",
                         rec.run, i)
            return
        g = np.frombuffer(rec.draws, dtype="<f8")
        start = self.starts[rec.run]
        # The generator that keyed the pool decides whether the run's task is in the seed.
        seed = _noise.noise_seed(start.seed, start.task, rec.generator)
        regenerated = _noise.gumbel(keys, seed, rec.name, rec.step)
        bad = first_draw_disagreement(g, regenerated)  # within the CPUs' rounding of log
        if bad is not None:
            self.problem("draws", f"{where}: draw {bad} is {g[bad]!r}, regenerating "
                         f"from (seed, task, stream, step, id) gives {regenerated[bad]!r}",
                         rec.run, i)

    def continuation(self, i: int, rec: Continuation) -> None:
        self.count("continuations")
        self.tallies[rec.run][2] += 1
        where = f"proceed {rec.name!r} step {rec.step}"
        self._step(rec.run, rec.name, rec.step, i)
        self._draw_in_window(i, rec.run, rec.window, rec.name, rec.step)
        if not 0.0 <= rec.p <= 1.0:
            self.problem("probabilities", f"{where}: p_continue {rec.p!r} outside [0, 1]",
                         rec.run, i)
            return
        start = self.starts[rec.run]
        if start.generator in _noise.GENERATORS:  # else reported at the RunStart
            u = _noise.uniform(_noise.noise_seed(start.seed, start.task, start.generator),
                               rec.name, rec.step)
            if u != rec.u:
                self.problem("draws", f"{where}: u is {rec.u!r}, regenerating from (seed, "
                             f"task, stream, step) gives {u!r}", rec.run, i)
        if not rec.forced and rec.decision != (rec.u < rec.p):
            self.problem("decision", f"{where}: decision {rec.decision} but u={rec.u!r} and "
                         f"p={rec.p!r}", rec.run, i)
        elif rec.forced and rec.steer is None:
            self.problem("decision", f"{where}: forced decision without a declared steer",
                         rec.run, i)

    def run_end(self, i: int, rec: RunEnd, records: list[Any], raws: list[msgspec.Raw],
                k: int) -> None:
        """``rec`` is ``records[k]`` of its frame."""
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
        self._digest(i, rec, [raws[j] for j in range(k) if type(records[j]) is not Blob
                              and records[j].run == rec.run])

    def _digest(self, i: int, rec: RunEnd, own: list[msgspec.Raw]) -> None:
        plain = self.digests.pop(rec.run, None)
        keyed = self.keyed_digests.pop(rec.run, None)
        for d in (plain, keyed):
            if d is not None:
                for raw in own:  # the run's records in its RunEnd's frame, before it
                    d.update(raw)
        if rec.digest is None:
            self.without_digest += 1
            if self.key is not None:
                self.problem("digest", "the run has no digest, so the key proves nothing about "
                             "it (it was recorded without record(key=...))", rec.run, i)
            return
        tail = run_end_tail(rec.run, rec.t_ns, rec.status, rec.receipt, rec.n_windows,
                            rec.n_selections, rec.n_continuations, rec.dropped, rec.error_type)
        if rec.keyed:
            if keyed is None:
                self.keyed_unchecked += 1
                return
            self.count("digests")
            if keyed.finish_bytes(tail) != rec.digest:
                self.problem("digest", "the run's keyed digest (HMAC) does not match its "
                             "records: a record of the run was altered, added or removed, or "
                             "the key is not the one it was recorded with", rec.run, i)
            return
        if self.key is not None:
            self.problem("digest", "the run was recorded without a key: its digest proves "
                         "nothing about who wrote it (record it with record(key=...))",
                         rec.run, i)
        assert plain is not None
        self.count("digests")
        if plain.finish_bytes(tail) != rec.digest:
            self.problem("digest", "the run's digest does not match its records: a field of "
                         "a record of the run (e.g. a probability, a score, a status) was "
                         "altered, or a record was added or removed", rec.run, i)


def verify_many(paths: list[str]) -> list[VerifyReport | TraceFormatError]:
    """Verify several files; an unreadable one yields its ``TraceFormatError``."""
    out: list[VerifyReport | TraceFormatError] = []
    for p in paths:
        try:
            out.append(verify(p))
        except TraceFormatError as exc:
            out.append(exc)
    return out
