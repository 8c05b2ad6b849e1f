"""Frozen transitions: the sealed before and after states of every window instance.

A transition of window ``W`` is one completed instance of it in a recorded run. Its before
state x⁻ is the window's decoded entry (the bound arguments, or what ``entry=`` projected),
its after state x⁺ the decoded exit (the return value), both exactly as sealed: they are
read from the trace's canonical bytes through the public decoders
(``agentlog.records.decode_artifact``, what ``WindowView.entry_value()`` uses), never
recomputed by running the agent again ([ASV] §4: a transition pairs the pre-step state
with the post-step state). A state that cannot be decoded (a missing Blob, corrupt bytes)
is a ``StateDecodeError`` of that transition alone.

Examples:
    >>> import agentlog as al
    >>> from agentlog.replay.lowlevel import frozen_transitions
    >>> @al.window("states-doc-step")
    ... def step(x: int) -> int:
    ...     return x + 1
    >>> with al.record("agentlog-states-doc.zst", seed=1, task="t"):
    ...     _ = step(41)
    >>> (t,) = frozen_transitions("agentlog-states-doc.zst", window="states-doc-step")
    >>> t.before().value, t.after().value, t.after().entry
    ({'x': 41}, 42, {'x': 41})
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agentlog import StateDecodeError, Trace, WindowNotFoundError, settle
from agentlog.records import (
    EXIT_OK,
    BlobNotFoundError,
    TraceRun,
    decode_artifact,
    iter_runs,
    trace_sha256,
)

__all__ = [
    "FrozenTransition",
    "State",
    "StateDecodeError",
    "WindowNotFoundError",
    "frozen_transitions",
    "trace_file_hash",
]

Side = Literal["before", "after"]


@dataclass(frozen=True)
class State:
    """One sealed state a channel views and a scorer scores.

    Attributes:
        side: ``"before"`` (x⁻, the window's entry) or ``"after"`` (x⁺, its exit).
        value: the decoded state: the entry for x⁻, the exit for x⁺.
        entry: the decoded entry of the same window instance (for x⁻ it is ``value``):
            the question and candidate contract an after state is scored against.
        hash: the sealed hash of ``value`` (``WindowEnter.entry_hash`` or
            ``WindowExit.exit_hash``), what the replayed ``Score`` names.
        window: the window name.
        task: the source run's task.
        system: the source run's system.
        seed: the source run's seed.
        meta: the source run's meta (e.g. the reviewed target).
    """

    side: Side
    value: Any
    entry: Any
    hash: bytes
    window: str
    task: str | None = None
    system: str = ""
    seed: int = 0
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def before(self) -> bool:
        """Whether this is x⁻."""
        return self.side == "before"


def _decode(data: bytes | None, problem: str | None, what: str) -> Any:
    if data is None:
        raise StateDecodeError(f"{what} cannot be read: {problem or 'its bytes are missing'}; "
                               "the trace is incomplete there (agentlog verify says where)")
    try:
        return decode_artifact(data)
    except Exception as exc:
        raise StateDecodeError(f"{what} does not decode ({type(exc).__name__}: {exc}); the "
                               "trace is corrupt there (agentlog verify says where)") from None


@dataclass(frozen=True)
class FrozenTransition:
    """A completed window instance with both sealed states, as bytes until decoded.

    Attributes:
        source: the trace file it was read from (None for an in-memory ``Trace``).
        trace_hash: hex SHA-256 of that file's bytes ("" for an in-memory ``Trace``).
        run_id: the source run's id.
        window_id: the window instance's id in its run.
        window: the window name.
        system, task, seed, meta: the source run's identity.
        entry_hash, exit_hash: the sealed hashes of x⁻ and x⁺.
        entry, exit: their canonical bytes (None when they cannot be read: see
            ``entry_problem`` / ``exit_problem``).
    """

    source: Path | None
    trace_hash: str
    run_id: str
    window_id: int
    window: str
    system: str
    task: str | None
    seed: int
    meta: Mapping[str, Any]
    entry_hash: bytes
    exit_hash: bytes
    entry: bytes | None
    exit: bytes | None
    entry_problem: str | None = None
    exit_problem: str | None = None

    def _where(self) -> str:
        place = f"{self.source}: " if self.source is not None else ""
        return f"{place}run {self.run_id}, window {self.window!r} id {self.window_id}"

    def decoded_entry(self) -> Any:
        """The decoded entry (x⁻'s value). Raises ``StateDecodeError``."""
        return _decode(self.entry, self.entry_problem, f"{self._where()}: the entry (x⁻)")

    def decoded_exit(self) -> Any:
        """The decoded exit (x⁺'s value). Raises ``StateDecodeError``."""
        return _decode(self.exit, self.exit_problem, f"{self._where()}: the exit (x⁺)")

    def state(self, side: Side) -> State:
        """x⁻ (``"before"``) or x⁺ (``"after"``), decoded. Raises ``StateDecodeError``."""
        entry = self.decoded_entry()
        value = entry if side == "before" else self.decoded_exit()
        return State(side=side, value=value, entry=entry,
                     hash=self.entry_hash if side == "before" else self.exit_hash,
                     window=self.window, task=self.task, system=self.system, seed=self.seed,
                     meta=self.meta)

    def before(self) -> State:
        """x⁻, the decoded entry."""
        return self.state("before")

    def after(self) -> State:
        """x⁺, the decoded exit."""
        return self.state("after")


def trace_file_hash(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a trace file's bytes (streamed): the source hash in provenance.

    Through the readers' own opener (``agentlog.records.trace_sha256``): a pipe, a device
    or a file that is not a trace is refused before a byte is hashed."""
    settle(path)  # a run this process just left may still be in its writer's queue
    return trace_sha256(path)


def _resolve(view_bytes: Any, label: str) -> tuple[bytes | None, str | None]:
    try:
        data = view_bytes()
    except BlobNotFoundError as exc:
        return None, f"{label} Blob is missing ({exc})"
    except Exception as exc:  # a truncated or hostile file: this transition alone fails
        return None, f"{label} could not be read ({type(exc).__name__}: {exc})"
    if data is None:
        return None, f"{label} is missing"
    return bytes(data), None


def frozen_transitions(
    traces: Trace | str | os.PathLike[str] | Sequence[Any], *, window: str,
    include_failed: bool = False,
) -> Iterator[FrozenTransition]:
    """Every completed instance of ``window`` in ``traces``, in reading order, streamed.

    Args:
        traces: a ``Trace``, a trace file, a folder (every ``*.zst`` below it) or a list
            of them.
        window: the window name.
        include_failed: also the instances whose exit is a failure (status ``⊥``) or an
            early close; by default only normal exits, as ``Trace.transitions``.

    Raises:
        WindowNotFoundError: no instance of ``window`` is in the traces (after reading all
            of them); the message lists the windows present.
    """
    hashes: dict[str, str] = {}
    present: set[str] = set()
    found = False
    source: Any = traces if isinstance(traces, Trace | str | os.PathLike) else list(traces)
    for trace, run in iter_runs(source, name="traces"):
        if run.start is None:
            continue
        path = Path(trace.path) if trace.path else None
        key = str(path) if path is not None else ""
        if path is not None and key not in hashes:
            hashes[key] = trace_file_hash(path)
        for t in _run_transitions(TraceRun(trace, run), window, include_failed, present):
            found = True
            yield FrozenTransition(source=path, trace_hash=hashes.get(key, ""), **t)
    if not found:
        names = sorted(present)
        raise WindowNotFoundError(
            f"no completed instance of window {window!r} in the traces; windows present: "
            f"{', '.join(names) if names else 'none'}. Pass one of them (--window NAME)",
            window=window, present=names)


def _run_transitions(tr: TraceRun, window: str, include_failed: bool,
                     present: set[str]) -> Iterator[dict[str, Any]]:
    start = tr.run.start
    assert start is not None
    meta = dict(start.meta) if isinstance(start.meta, dict) else {}
    for w in tr.run.windows:
        present.add(w.name)
        if w.name != window or w.exit is None:
            continue
        if w.exit.status != EXIT_OK and not include_failed:
            continue
        entry, entry_problem = _resolve(lambda w=w: w.entry_bytes, "the entry")
        exit_, exit_problem = _resolve(lambda w=w: w.exit_bytes, "the exit")
        yield {
            "run_id": start.run_id, "window_id": w.window, "window": w.name,
            "system": start.system, "task": start.task, "seed": start.seed, "meta": meta,
            "entry_hash": w.enter.entry_hash, "exit_hash": w.exit.exit_hash,
            "entry": entry, "exit": exit_, "entry_problem": entry_problem,
            "exit_problem": exit_problem,
        }
