"""The checks ``verify`` makes, record by record, in one pass over a file (``_Verifier``)."""

from __future__ import annotations

import bisect
import hashlib
import itertools
import operator
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any, cast

import msgspec
import numpy as np
from numpy.typing import NDArray

from agentlog import _noise
from agentlog._digest import KeyedChain, RunDigest, chain_link, run_end_tail
from agentlog._draw_match import first_draw_disagreement, first_posterior_disagreement
from agentlog._frames import RECORD_VIEWS
from agentlog._posterior import posterior_keyed
from agentlog._records import (
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
from agentlog._select import SUM_TOLERANCE
from agentlog._state import receipt_genesis, receipt_next
from agentlog._verify.batch import CHUNK, Batch, Pools, chunked_choice_agrees, chunks
from agentlog._verify.report import Problem, VerifyReport

MAX_PROBLEMS_PER_KIND = 100  # listed per kind; the rest are counted (bounded memory)
WAITING_DRAWS_BYTES = 4 << 20  # draws kept for selections whose pool Blob has not come
MAX_OFFSETS_BYTES = 64 << 10  # of a window's stream offsets (WindowEnter.steps) decoded
_offsets_decoder = msgspec.msgpack.Decoder(dict[str, int] | None)
# Problems waiting to be listed in record order while selections wait in the batch.
PENDING_PROBLEMS = 1024
# Noise generators agentlog adopted after run digests (2026-12-01): a run recorded with one
# came from a writer that always writes a digest, so a missing digest was removed.
DIGEST_ERA_GENERATORS = (_noise.GENERATOR_V2, _noise.GENERATOR_ID)
# verify reads records as their views (agentlog._frames.RECORD_VIEWS: bytes fields are
# memoryviews of the frame, so a frame's data is held once); these are their types.
_BLOB, _RUN_START, _RUN_END, _SELECTION, _CONTINUATION, _WINDOW_ENTER, _WINDOW_EXIT = (
    RECORD_VIEWS[t] for t in (Blob, RunStart, RunEnd, Selection, Continuation, WindowEnter,
                              WindowExit))
_SCORE, _LLM_CALL, _TOOL_CALL = (RECORD_VIEWS[t] for t in (Score, LLMCall, ToolCall))
# What VerifyReport.checked counts, by record type (runs are counted at their RunStart).
_COUNTED: dict[type, str] = {
    _BLOB: "blobs", _WINDOW_ENTER: "windows", _SELECTION: "selections",
    _CONTINUATION: "continuations", _SCORE: "scores", _LLM_CALL: "llm_calls",
    _TOOL_CALL: "tool_calls",
}
_COUNTED_ONLY: tuple[type, ...] = (_SCORE, _LLM_CALL)  # checked by the run digest alone
_LOOKED_AT = frozenset(RECORD_VIEWS.values()).difference(_COUNTED_ONLY)
_RUN_BOUNDS = frozenset((_RUN_START, _RUN_END))
_run_of = operator.attrgetter("run")


class _Seen:
    """A set of ints (a stream's steps, the runs ended) as intervals: O(1) memory and time
    for increasing values, O(gaps) after a value was skipped (a record dropped).

    ``[lo, hi)`` is the last interval; ``los``/``his`` the closed ones before it (in
    order); ``other`` the values that came below ``lo`` and in no interval.
    """

    __slots__ = ("hi", "his", "lo", "los", "other")

    def __init__(self, value: int) -> None:
        self.lo, self.hi = value, value + 1
        self.los: list[int] = []
        self.his: list[int] = []
        self.other: set[int] = set()

    def add(self, value: int) -> bool:
        """Add ``value``; False when it was there already."""
        if value == self.hi:
            self.hi = value + 1
            return True
        if value > self.hi:
            self.los.append(self.lo)
            self.his.append(self.hi)
            self.lo, self.hi = value, value + 1
            return True
        if value in self:
            return False
        self.other.add(value)
        return True

    def __contains__(self, value: int) -> bool:
        if self.lo <= value < self.hi or value in self.other:
            return True
        j = bisect.bisect_right(self.los, value) - 1
        return j >= 0 and value < self.his[j]

    def gaps(self) -> int:
        """Values missing between the lowest and the highest."""
        los, his = [*self.los, self.lo], [*self.his, self.hi]
        covered = sum(h - lo for lo, h in zip(los, his, strict=True)) + len(self.other)
        least = min(los[0], min(self.other, default=los[0]))
        return max(his[-1] - 1, max(self.other, default=0)) - least + 1 - covered


class _Run:
    """What verify keeps of a run while it is open."""

    __slots__ = ("counts", "digest", "era", "generator", "keyed", "receipt", "run_id", "seed",
                 "seeds", "streams", "task", "windows")

    def __init__(self, rec: RunStart, key: bytes | None) -> None:
        self.run_id = rec.run_id
        self.seed = rec.seed
        self.task = rec.task
        self.generator = rec.generator
        self.receipt = receipt_genesis(rec.run_id)
        self.digest = RunDigest(rec.run_id)
        self.keyed = RunDigest(rec.run_id, key) if key is not None else None
        self.counts = [0, 0, 0]  # windows closed, selections, continuations
        self.streams: dict[str, _Seen] = {}
        self.seeds: dict[str, int] = {}
        # open window id -> (record index, name, entry hash, WindowEnter.steps when it
        # records re-entry seams, else None)
        self.windows: dict[int, tuple[int, str, bytes, dict[str, int] | None]] = {}
        # How the trace shows that this run's writer always wrote a digest (or "").
        self.era = (f"its RunStart names noise generator {rec.generator!r}, which agentlog "
                    "adopted after run digests" if rec.generator in DIGEST_ERA_GENERATORS
                    else "")

    def noise_seed(self, generator: str) -> int:
        """The run's noise seed under ``generator`` (one this agentlog regenerates)."""
        seed = self.seeds.get(generator)
        if seed is None:
            seed = self.seeds[generator] = _noise.noise_seed(self.seed, self.task, generator)
        return seed


class _Verifier:
    def __init__(self, report: VerifyReport, key: bytes | None, pools: Pools,
                 expect_head: tuple[int, bytes] | None = None) -> None:
        self.report = report
        self.key = key
        self.chain = KeyedChain()
        self.expect_head = expect_head
        self.head_seen: bytes | None = None  # the digest at expect_head's position
        self.pools = pools
        self.index = 0  # of the next record in the file
        self.frame_no = 0
        self.blob_hashes: set[bytes] = set()
        # hash -> (what, owner, name, run, record index) of references whose Blob has not
        # come yet
        self.waiting: dict[bytes, list[tuple[str, str, str, int, int]]] = defaultdict(list)
        # pool hash -> selections waiting for it: (index, run, name, step, generator, seed,
        # draws, or None past WAITING_DRAWS_BYTES)
        self.waiting_selections: dict[bytes, list[tuple[Any, ...]]] = defaultdict(list)
        self.waiting_bytes = 0
        self.runs: dict[int, _Run] = {}  # open runs
        self.ended: _Seen | None = None
        self.n_runs = 0
        self.generator = _noise.GENERATOR_ID  # of the last run started: what pools are for
        self.unclosed: list[tuple[int, int, int, str]] = []  # windows of ended runs
        self.listed: dict[str, int] = defaultdict(int)
        self.omitted: dict[str, int] = defaultdict(int)
        # Problems found while selections wait in the batch, listed once it is checked
        # (in record order); None once the file has been read.
        self.pending: dict[str, list[tuple[int, str, str, int | None]]] | None = {}
        self.n_pending = 0
        self.batch = Batch(self._check, self._stop)
        self.empty_frames = 0
        self.without_digest = 0
        self.keyed_unchecked = 0

    def problem(self, kind: str, message: str, run: int | None, index: int | None) -> None:
        if self.pending is not None:  # listed in record order once the batch is checked
            waiting = self.pending.setdefault(kind, [])
            waiting.append((-1 if index is None else index, kind, message, run))
            self.n_pending += 1
            if len(waiting) > 2 * MAX_PROBLEMS_PER_KIND:  # only the first ones can be listed
                self._keep_first(kind, waiting)
            return
        listed = self.listed[kind]
        if listed >= MAX_PROBLEMS_PER_KIND:
            self.omitted[kind] += 1
            return
        self.listed[kind] = listed + 1
        self.report.problems.append(Problem(kind, message, run, index))

    def count(self, kind: str, n: int = 1) -> None:
        if n:
            self.report.checked[kind] = self.report.checked.get(kind, 0) + n

    def _ended(self, run: int) -> bool:
        return self.ended is not None and run in self.ended

    # -- the stream

    def frame(self, records: list[Any], raws: list[msgspec.Raw], payload: bytes,
              offset: int) -> None:
        self.frame_no += 1
        runs = self.runs
        batch = self.batch
        index = self.index
        kinds = list(map(type, records))
        held = (self.frame_no, sum(map(len, raws)))  # the frame, and its bytes
        present = (set(map(_run_of, records)) if _BLOB not in kinds  # runs with a record here
                   else {r.run for r in records if type(r) is not _BLOB})
        counts = dict.fromkeys(RECORD_VIEWS.values(), 0)
        todo: Iterable[int] = range(len(records))
        if present <= runs.keys() and not _RUN_BOUNDS.intersection(kinds):
            # Every run of the frame is open throughout it: records that only count
            # (scores, model calls) need no look, which is most of an agent's records.
            for kind in _COUNTED_ONLY:
                counts[kind] = kinds.count(kind)
            todo = list(itertools.compress(range(len(kinds)), map(_LOOKED_AT.__contains__,
                                                                   kinds)))
        # run -> positions in this frame of its records: a RunEnd's digest takes those
        # before it. Made at the frame's first RunEnd (the writer puts one first in its
        # frame), then kept up.
        positions: dict[int, list[int]] | None = None
        for k in todo:
            rec = records[k]
            t = kinds[k]
            i = index + k
            counts[t] += 1
            if t is _BLOB:
                self.blob(i, rec, offset)
                continue
            run = rec.run
            if positions is not None:
                positions.setdefault(run, []).append(k)
            if t is _RUN_START:
                self.run_start(i, rec)
                continue
            st = runs.get(run)
            if st is None:
                counts[t] -= 1  # a record outside any run is not checked
                self._orphan(run, i)
            elif t is _SELECTION:
                self.selection(i, rec, st, batch, held)
            elif t is _CONTINUATION:
                self.continuation(i, rec, st, batch)
            elif t is _WINDOW_ENTER:
                self.window_enter(i, rec, st)
            elif t is _WINDOW_EXIT:
                self.window_exit(i, rec, st)
            elif t is _TOOL_CALL:
                self.tool_call(i, rec)
            elif t is _RUN_END:
                if positions is None:
                    positions = defaultdict(list)
                    for j, r in enumerate(records[:k + 1]):
                        if type(r) is not _BLOB:
                            positions[r.run].append(j)
                self.run_end(i, rec, st, [raws[j] for j in positions[run][:-1]])
        self.index = index + len(records)
        for kind, name in _COUNTED.items():
            self.count(name, counts[kind])
        # A run's digest takes the payload of every frame holding a record of it, up to
        # the frame of its RunEnd (agentlog._digest); runs that ended here are done.
        for run in present:
            st = runs.get(run)
            if st is not None:
                st.digest.update(payload)
                if st.keyed is not None:
                    st.keyed.update(payload)
        if not batch or self.n_pending > PENDING_PROBLEMS or batch.holds_too_much():
            self._list_pending()

    def _list_pending(self, *, last: bool = False) -> None:
        """Check the batch, then list the problems found so far in record order."""
        self.batch.check()
        pending = []
        for kind, waiting in (self.pending or {}).items():
            self._keep_first(kind, waiting)
            pending += waiting
        self.pending, self.n_pending = None, 0
        pending.sort(key=lambda p: p[0])  # stable: a record's problems in checking order
        for i, kind, message, run in pending:
            self.problem(kind, message, run, None if i < 0 else i)
        self.pending = None if last else {}

    def _keep_first(self, kind: str, waiting: list[tuple[int, str, str, int | None]]) -> None:
        """Keep the problems of ``kind`` that can still be listed (the first in record
        order), and count the others."""
        room = max(MAX_PROBLEMS_PER_KIND - self.listed[kind], 0)
        if len(waiting) > room:
            waiting.sort(key=lambda p: p[0])
            self.omitted[kind] += len(waiting) - room
            del waiting[room:]

    def finish(self, *, header_only: bool) -> None:
        self._list_pending(last=True)
        for h, refs in self.waiting.items():
            for what, owner, name, run, i in refs:
                self.problem("missing-blob", f"{what} of {owner} {name!r} is stored as blob "
                             f"{h.hex()[:16]}… which is not in the file", run, i)
        for h, sels in self.waiting_selections.items():
            for i, run, name, step, *_ in sels:
                self.problem("missing-blob", f"candidate pool {h.hex()[:16]}… of select "
                             f"{name!r} step {step} is not in the file", run, i)
        for run, st in self.runs.items():
            self.problem("run-not-ended", self._why_not_ended(st), run, None)
        unclosed = self.unclosed + [(run, wid, i, name) for run, st in self.runs.items()
                                    for wid, (i, name, _, _) in st.windows.items()]
        for run, wid, i, name in unclosed:
            self.problem("window-not-closed", f"window {name!r} (id {wid}) never closed", run,
                         i)
        if not self.n_runs:
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
        self._finish_chain()
        self.report.runs = self.n_runs

    def _finish_chain(self) -> None:
        chain = self.chain
        self.report.keyed_runs = chain.count
        if chain.count:
            self.report.chain_head = f"{chain.count}:{chain.head.hex()}"
        if self.expect_head is None:
            if chain.count and self.key is not None:
                self.report.notes.append(
                    f"the chain of keyed runs ends at {self.report.chain_head}: it proves "
                    "that no keyed run before the last was removed, reordered or altered; "
                    "keyed runs cut from the end leave a shorter chain that also verifies, "
                    "so store this head and pass it back (expect_head=, --expect-head)")
            return
        position, digest = self.expect_head
        if chain.count < position:
            self.problem("chain", f"the stored head names keyed run {position}, but the file's "
                         f"chain ends at keyed run {chain.count}: {position - chain.count} "
                         "keyed run(s) were cut from the end of the file (or the head is of "
                         "another file)", None, None)
        elif self.head_seen != digest:
            self.problem("chain", f"keyed run {position} is not the one the stored head names: "
                         "the file's keyed runs up to it were replaced (or the head is of "
                         "another file)", None, None)

    def _why_not_ended(self, st: _Run) -> str:
        """What the trace says about why a run has no RunEnd."""
        head = f"run {st.run_id} has no RunEnd record"
        gaps = sum(s.gaps() for s in st.streams.values())
        missing = f"{gaps} step(s) of its streams are missing between recorded ones"
        if gaps:
            return (f"{head}, and {missing}: records of it were dropped before they reached "
                    "the file, most likely its RunEnd too, because the writer's queue was "
                    "full (backpressure: on_full='drop', or a put waiting full_timeout); a "
                    "crash or a full disk cuts the end of a run, never records inside it")
        return (f"{head}: recording stopped before record() exited, because the process was "
                "killed or crashed, or because the writer could not write any more (a full "
                "disk or an I/O error, about which the program was warned with an "
                "InstrumentationWarning)")

    # -- records

    def blob(self, i: int, rec: Blob, offset: int) -> None:
        h = bytes(rec.hash)  # a copy: the record is a view of its frame (see .batch)
        if hashlib.sha256(rec.data).digest() != h:
            self.problem("blob-hash", f"blob {rec.hash.hex()[:16]}… does not hash to its name: "
                         "its content was altered", None, i)
            return
        self.blob_hashes.add(h)
        # Only pools are kept: a selection needs their ids; other blobs need their hash.
        if rec.kind == "pool" or h in self.waiting_selections:
            self.pools.add(h, bytes(rec.data), offset)
        if rec.kind == "pool":  # keyed now, while no larger frame than its own is held
            self.pools.keys_of(h, self.generator)
        self.waiting.pop(h, None)
        for waiting in self.waiting_selections.pop(h, []):
            self._late_pool(h, *waiting)

    def run_start(self, i: int, rec: RunStart) -> None:
        self.count("runs")
        if rec.run in self.runs or self._ended(rec.run):
            self.problem("duplicate-run", f"run index {rec.run} started twice", rec.run, i)
        else:
            self.n_runs += 1
        if not self._ended(rec.run):  # records after its RunEnd stay outside the run
            self.runs[rec.run] = _Run(rec, self.key)
        if rec.generator in _noise.GENERATORS:
            self.generator = rec.generator
        else:
            self.problem("generator", f"run uses noise generator {rec.generator!r}; this "
                         f"agentlog regenerates {', '.join(map(repr, _noise.GENERATORS))} "
                         "only: upgrade agentlog", rec.run, i)

    def _artifact(self, h: bytes, inline: bytes | None, what: str, owner: str, name: str,
                  run: int, i: int) -> None:
        """``what`` of ``owner`` ``name`` (e.g. the entry of window 'w'): its inline bytes
        hash to ``h``, or a Blob named ``h`` is in the file."""
        h = bytes(h)  # never hash or compare a view: hashing one hashes its whole frame
        if inline is not None:
            if hashlib.sha256(inline).digest() != h:
                self.problem("artifact-hash", f"{what} of {owner} {name!r} does not hash to "
                             f"its recorded {h.hex()[:16]}…: the sealed artifact was altered",
                             run, i)
        elif h not in self.blob_hashes:  # its Blob may come later
            self.waiting[h].append((what, owner, name, run, i))

    def _orphan(self, run: int, i: int) -> None:
        if self._ended(run):
            self.problem("orphan-record", f"record of run {run} comes after the run's RunEnd: "
                         "it lies outside the run", run, i)
        else:
            self.problem("orphan-record", f"record refers to run {run}, which never started: "
                         "it lies outside any run", run, i)

    def tool_call(self, i: int, rec: ToolCall) -> None:
        # A frozen replay serves these bytes; older traces kept small ones as hashes only,
        # so only stored bytes are checked.
        for h, inline, what in ((rec.args_hash, rec.args, "arguments"),
                                (rec.result_hash, rec.result, "result")):
            if h is not None and inline is not None:
                self._artifact(h, inline, what, "tool", rec.name, rec.run, i)

    def _draw_in_window(self, i: int, st: _Run, run: int, window: int, stream: str, step: int
                        ) -> None:
        """A draw inside a window comes at or after the step its entry recorded for the
        stream: what a replay starts the stream at (``WindowEnter.steps``)."""
        opened = st.windows.get(window)
        if opened is None or opened[3] is None:  # older traces record no offsets
            return
        start = opened[3].get(stream, 0)
        if step < start:
            self.problem("stream-offset", f"{stream!r} step {step} is drawn inside window "
                         f"{opened[1]!r} (id {window}), whose entry recorded the stream "
                         f"at step {start}: a replay would start it there", run, i)

    def window_enter(self, i: int, rec: WindowEnter, st: _Run) -> None:
        self._artifact(rec.entry_hash, rec.entry, "entry", "window", rec.name, rec.run, i)
        if rec.args_hash is not None:  # the argument map of an entry= projection (a Blob)
            self._artifact(rec.args_hash, None, "arguments", "window", rec.name, rec.run, i)
        seams = rec.function is not None
        if seams and not st.era:
            st.era = ("its windows record re-entry seams (WindowEnter.function), which "
                      "agentlog wrote only after run digests")
        st.windows[rec.window] = (i, rec.name, bytes(rec.entry_hash),
                                  self._offsets(i, rec) if seams else None)
        if rec.after is not None:
            if rec.expected_hash is None:
                self.problem("bypass", f"window {rec.name!r} declares after={rec.after!r} but "
                             f"no {rec.after!r} window exited before it in this run", rec.run, i)
            elif bytes(rec.link_hash or b"") != bytes(rec.expected_hash):
                self.problem("bypass", f"window {rec.name!r}'s entry "
                             f"{(rec.link_hash or b'').hex()[:16]}… differs from the exit "
                             f"{rec.expected_hash.hex()[:16]}… of its declared predecessor "
                             f"{rec.after!r}", rec.run, i)

    def _offsets(self, i: int, rec: WindowEnter) -> dict[str, int]:
        """``rec.steps`` (undecoded in a view), decoded when it is the size of real offsets
        (a few bytes per stream): a window that claims thousands of streams is reported."""
        raw = cast(msgspec.Raw, rec.steps)  # what a view holds (agentlog._frames)
        if len(raw) > MAX_OFFSETS_BYTES:
            self.problem("stream-offset", f"window {rec.name!r} (id {rec.window}) records "
                         f"{len(raw)} bytes of stream offsets, over the {MAX_OFFSETS_BYTES} "
                         "bytes of a window with a thousand streams: its draws' offsets were "
                         "not checked", rec.run, i)
            return {}
        try:
            steps: dict[str, int] | None = _offsets_decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.problem("stream-offset", f"window {rec.name!r} (id {rec.window}): its stream "
                         f"offsets do not decode ({exc})", rec.run, i)
            return {}
        return steps or {}

    def window_exit(self, i: int, rec: WindowExit, st: _Run) -> None:
        opened = st.windows.pop(rec.window, None)
        if opened is None:
            self.problem("exit-without-enter", f"window {rec.name!r} (id {rec.window}) exits "
                         "without having entered", rec.run, i)
            return
        st.counts[0] += 1
        self._artifact(rec.exit_hash, rec.exit, "exit", "window", rec.name, rec.run, i)
        expected = receipt_next(st.receipt, rec.name, opened[2], rec.exit_hash)
        st.receipt = bytes(rec.receipt)  # continue from the recorded one: report once
        if expected != st.receipt:
            self.problem("receipt", f"receipt of window {rec.name!r} (id {rec.window}) is "
                         f"{rec.receipt.hex()[:16]}…, the chain gives {expected.hex()[:16]}…",
                         rec.run, i)

    def _step(self, st: _Run, run: int, stream: str, step: int, i: int) -> None:
        seen = st.streams.get(stream)
        if seen is None:
            st.streams[stream] = _Seen(step)
        elif step == seen.hi:  # the usual next step
            seen.hi = step + 1
        elif not seen.add(step):
            self.problem("repeated-step", f"stream {stream!r} step {step} occurs twice", run, i)

    def selection(self, i: int, rec: Selection, st: _Run, batch: Batch,
                  held: tuple[int, int]) -> None:
        """``held``: the frame the record is a view of, and its size (see ``_Batch``)."""
        st.counts[1] += 1
        self._step(st, rec.run, rec.name, rec.step, i)
        self._draw_in_window(i, st, rec.run, rec.window, rec.name, rec.step)
        n = rec.n
        if len(rec.probs) != 8 * n or len(rec.draws) != 8 * n:
            self.problem("vector-size", f"select {rec.name!r} step {rec.step}: expected {n} "
                         f"float64 probabilities and draws, found {len(rec.probs)} and "
                         f"{len(rec.draws)} bytes", rec.run, i)
            return
        # The usual selection is checked with the others of its frame (_Batch); anything
        # unusual, and every selection the batch finds a problem in, one by one (_check).
        generator = rec.generator
        if (0 < n <= CHUNK and 0 <= rec.choice < n and generator in _noise.GENERATORS
                and (not rec.forced or rec.steer is not None) and rec.observed is None):
            keys = self.pools.usable(rec.pool, generator, self.blob_hashes)
            if keys is not None and keys.shape[0] == n:
                batch.add(i, rec, st.noise_seed(generator), keys, held)
                return
        self._check(i, rec, st.noise_seed)

    def _check(self, i: int, rec: Selection, seed_of: Callable[[str], int]) -> None:
        """Every check of one selection's vectors, in CHUNK-sized passes. ``seed_of``: the
        run's noise seed under a generator (one this agentlog regenerates)."""
        where = f"select {rec.name!r} step {rec.step}"
        p = np.frombuffer(rec.probs, dtype="<f8")
        g = np.frombuffer(rec.draws, dtype="<f8")
        if not all(np.isfinite(c).all() and not (c < 0).any() for c in chunks(p)):
            self.problem("probabilities", f"{where}: vector has non-finite or negative entries",
                         rec.run, i)
            return
        total = float(p.sum())
        if abs(total - 1.0) > SUM_TOLERANCE:
            self.problem("probabilities", f"{where}: vector sums to {total!r}, not 1",
                         rec.run, i)
        if not 0 <= rec.choice < rec.n:
            self.problem("choice", f"{where}: choice {rec.choice} outside 0..{rec.n - 1}",
                         rec.run, i)
            return
        pool = bytes(rec.pool)
        if rec.observed is not None:
            self._posterior(i, rec, pool, seed_of, g)
        elif pool in self.blob_hashes:
            self._draws(i, rec.run, rec.name, rec.step, rec.generator, pool,
                        lambda: seed_of(rec.generator), g)
        else:  # its Blob may come later in the file: keep what the check needs
            keep = self.waiting_bytes + len(rec.draws) <= WAITING_DRAWS_BYTES
            self.waiting_bytes += len(rec.draws) if keep else 0
            seed = seed_of(rec.generator) if rec.generator in _noise.GENERATORS else 0
            self.waiting_selections[pool].append(
                (i, rec.run, rec.name, rec.step, rec.generator, seed,
                 bytes(rec.draws) if keep else None))
        if not rec.forced:
            agrees, best = chunked_choice_agrees(p, g, rec.choice)
            if not agrees:
                self.problem("choice", f"{where}: recorded choice {rec.choice}, but "
                             f"argmax(log p + g) is {best}", rec.run, i)
        elif rec.steer is None:
            self.problem("choice", f"{where}: forced choice without a declared steer", rec.run,
                         i)

    def _posterior(self, i: int, rec: Selection, pool: bytes,
                   seed_of: Callable[[str], int], g: NDArray[np.float64]) -> None:
        """The draws of ``select(..., observed=)``: the posterior noise regenerated from the
        agent's vector and the observed choice; with no steer, the choice is the observed."""
        where = f"select {rec.name!r} step {rec.step}"
        agent = np.frombuffer(rec.policy_probs if rec.policy_probs is not None
                              else rec.probs, dtype="<f8")
        k = rec.observed
        if k is None or not 0 <= k < rec.n or agent.shape[0] != rec.n or not agent[k] > 0:
            self.problem("choice", f"{where}: observed choice {k} is not a candidate of "
                         "positive probability under the agent's vector", rec.run, i)
            return
        if rec.policy_probs is None and not rec.forced and rec.choice != k:
            self.problem("choice", f"{where}: recorded choice {rec.choice}, but the observed "
                         f"choice is {k} and no steer acted", rec.run, i)
        if rec.generator not in _noise.GENERATORS:
            self.problem("generator", f"{where}: noise generator {rec.generator!r} is not "
                         "one this agentlog regenerates: upgrade agentlog", rec.run, i)
            return
        keys = (self.pools.keys_of(pool, rec.generator) if pool in self.blob_hashes
                else "its candidate pool comes after it in the file (agentlog writes a pool "
                     "before the first selection of it), so its draws were not checked")
        if isinstance(keys, str):
            self.problem("pool", f"{where}: {keys}", rec.run, i)
            return
        regenerated = posterior_keyed(agent, k, keys, seed_of(rec.generator), rec.name,
                                      rec.step)
        bad = first_posterior_disagreement(g, regenerated, agent)
        if bad is not None:
            self.problem("draws", f"{where}: draw {bad} is {g[bad]!r}, the posterior noise "
                         f"given the observed choice {k}, regenerated from (seed, task, "
                         f"stream, step, id), is {regenerated[bad]!r}", rec.run, i)

    def _late_pool(self, h: bytes, i: int, run: int, name: str, step: int, generator: str,
                   seed: int, draws: bytes | None) -> None:
        if draws is None:
            self.problem("pool", f"select {name!r} step {step}: its candidate pool "
                         f"{h.hex()[:16]}… comes after it in the file, past the "
                         f"{WAITING_DRAWS_BYTES} bytes of draws verify keeps waiting for their "
                         "pool, so its draws were not checked (agentlog writes a pool before "
                         "the first selection of it)", run, i)
            return
        self.waiting_bytes -= len(draws)
        self._draws(i, run, name, step, generator, h, lambda: seed,
                    np.frombuffer(draws, dtype="<f8"))

    def _draws(self, i: int, run: int, name: str, step: int, generator: str, h: bytes,
               seed: Callable[[], int], g: NDArray[np.float64]) -> None:
        where = f"select {name!r} step {step}"
        if generator not in _noise.GENERATORS:
            self.problem("generator", f"{where}: noise generator {generator!r} is not "
                         "one this agentlog regenerates: upgrade agentlog", run, i)
            return
        keys = self.pools.keys_of(h, generator)
        if isinstance(keys, str):
            self.problem("pool", keys, run, i)
            return
        if keys.shape[0] != g.shape[0]:
            self.problem("pool", f"{where}: pool holds {keys.shape[0]} ids, vector has "
                         f"{g.shape[0]}", run, i)
            return
        # The generator that keyed the pool decides whether the run's task is in the seed.
        noise_seed = seed()
        for a in range(0, g.shape[0], CHUNK):
            regenerated = _noise.gumbel(keys[a:a + CHUNK], noise_seed, name, step)
            bad = first_draw_disagreement(g[a:a + CHUNK], regenerated)  # within the CPUs'
            if bad is not None:  # rounding of log
                self.problem("draws", f"{where}: draw {a + bad} is {g[a + bad]!r}, "
                             "regenerating from (seed, task, stream, step, id) gives "
                             f"{regenerated[bad]!r}", run, i)
                return

    def continuation(self, i: int, rec: Continuation, st: _Run, batch: Batch) -> None:
        st.counts[2] += 1
        self._step(st, rec.run, rec.name, rec.step, i)
        self._draw_in_window(i, st, rec.run, rec.window, rec.name, rec.step)
        if st.generator not in _noise.GENERATORS:  # reported at the RunStart
            self._stop(i, rec, None)
        elif 0.0 <= rec.p <= 1.0 and (not rec.forced or rec.steer is not None):
            batch.add_stop(i, rec, st.noise_seed(st.generator))
        else:
            self._stop(i, rec, st.noise_seed(st.generator))

    def _stop(self, i: int, rec: Continuation, seed: int | None) -> None:
        """Every check of one continuation; ``seed``: the run's noise seed (None: unknown
        generator, the uniform is not regenerated)."""
        where = f"proceed {rec.name!r} step {rec.step}"
        if not 0.0 <= rec.p <= 1.0:
            self.problem("probabilities", f"{where}: p_continue {rec.p!r} outside [0, 1]",
                         rec.run, i)
            return
        if seed is not None:
            u = _noise.uniform(seed, rec.name, rec.step)
            if u != rec.u:
                self.problem("draws", f"{where}: u is {rec.u!r}, regenerating from (seed, "
                             f"task, stream, step) gives {u!r}", rec.run, i)
        if not rec.forced and rec.decision != (rec.u < rec.p):
            self.problem("decision", f"{where}: decision {rec.decision} but u={rec.u!r} and "
                         f"p={rec.p!r}", rec.run, i)
        elif rec.forced and rec.steer is None:
            self.problem("decision", f"{where}: forced decision without a declared steer",
                         rec.run, i)

    def run_end(self, i: int, rec: RunEnd, st: _Run, own: list[msgspec.Raw]) -> None:
        """``own``: the raw records of the run in this frame before its RunEnd."""
        run = rec.run
        del self.runs[run]
        self.unclosed.extend((run, wid, j, name) for wid, (j, name, _, _) in st.windows.items())
        if self.ended is None:
            self.ended = _Seen(run)
        else:
            self.ended.add(run)
        if bytes(rec.receipt) != st.receipt:
            self.problem("receipt", f"RunEnd receipt head {rec.receipt.hex()[:16]}… differs "
                         f"from the chain's {st.receipt.hex()[:16]}…", run, i)
        recorded = [rec.n_windows, rec.n_selections, rec.n_continuations]
        if recorded != st.counts:
            cause = (f"the writer counted records it then could not write (RunEnd.dropped = "
                     f"{rec.dropped}: a record that could not be encoded, or over the frame "
                     "limit)" if rec.dropped else "records were lost or added")
            self.problem("counts", "RunEnd counts (windows, selections, continuations) "
                         f"{tuple(recorded)} differ from its run's records in the file "
                         f"{tuple(st.counts)}: {cause}", run, i)
        if rec.dropped:
            self.problem("dropped", f"{rec.dropped} record(s) were dropped while the run was "
                         "recorded and are not in the file (RunEnd.dropped): "
                         + ("the writer's queue was full (backpressure: on_full='drop', or a "
                            "put waiting full_timeout) or a record could not be encoded"
                            if recorded == st.counts else "records the writer could not "
                            "encode or fit in a frame")
                         + ". The writer was still writing when the run ended (its RunEnd is "
                         "here), so no crash and no full disk cut the run; estimates from it "
                         "miss those records", run, i)
        self._digest(i, rec, st, own)

    def _digest(self, i: int, rec: RunEnd, st: _Run, own: list[msgspec.Raw]) -> None:
        for d in (st.digest, st.keyed):
            if d is not None:
                for raw in own:  # the run's records in its RunEnd's frame, before it
                    d.update(raw)
        if rec.digest is None:
            era = st.era or ("its RunEnd says the run was keyed (record(key=...)), which only "
                             "a digest can be" if rec.keyed else "")
            if era:
                self.problem("digest", f"run {st.run_id} has no digest, but it was written by "
                             f"an agentlog that always writes one ({era}): the digest was "
                             "removed, so an edit of any of its records would go unseen; do "
                             "not use the run (re-record it)", rec.run, i)
                return
            self.without_digest += 1
            if self.key is not None:
                self.problem("digest", "the run has no digest, so the key proves nothing about "
                             "it (it was recorded without record(key=...))", rec.run, i)
            return
        tail = run_end_tail(rec.run, rec.t_ns, rec.status, rec.receipt, rec.n_windows,
                            rec.n_selections, rec.n_continuations, rec.dropped, rec.error_type)
        if rec.keyed:
            if rec.chain is not None:
                tail += self._link(i, rec, st)
            if st.keyed is None:
                self.keyed_unchecked += 1
                return
            self.count("digests")
            if st.keyed.finish_bytes(tail) != bytes(rec.digest):
                self.problem("digest", "the run's keyed digest (HMAC) does not match its "
                             "records"
                             + (" or its place in the chain of keyed runs" if rec.chain else "")
                             + ": a record of the run was altered, added or removed"
                             + (", a keyed run before it was removed, reordered or altered"
                                if rec.chain else "")
                             + ", or the key is not the one it was recorded with", rec.run, i)
            return
        if rec.chain is not None:
            self.problem("chain", f"run {st.run_id} claims place {rec.chain} in the chain of "
                         "keyed runs but has no keyed digest: the record was edited", rec.run, i)
        if self.key is not None:
            self.problem("digest", "the run was recorded without a key: its digest proves "
                         "nothing about who wrote it (record it with record(key=...))",
                         rec.run, i)
        self.count("digests")
        if st.digest.finish_bytes(tail) != bytes(rec.digest):
            self.problem("digest", "the run's digest does not match its records: a field of "
                         "a record of the run (e.g. a probability, a score, a status) was "
                         "altered, or a record was added or removed", rec.run, i)


    def _link(self, i: int, rec: RunEnd, st: _Run) -> bytes:
        """What a chained keyed run's HMAC covers of its place; moves the chain past it."""
        chain = self.chain
        position = int(rec.chain)  # type: ignore[arg-type]
        if position != chain.count + 1:
            self.problem("chain", f"run {st.run_id} is keyed run {position} of the file, but "
                         f"{chain.count} keyed run(s) come before it: keyed runs were removed, "
                         "reordered or duplicated", rec.run, i)
        link = chain_link(position, chain.head)
        chain.follow(rec)
        if self.expect_head is not None and position == self.expect_head[0]:
            self.head_seen = chain.head
        return link
