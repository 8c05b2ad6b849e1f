"""Building ASV faces from channel Score records in traces.

A channel score is an ``al.score(name, value, channel=..., layout=..., wave=...,
transition=<window id>, state_hash=<entry or exit hash>)`` record — what an evaluator writes
at record time (``al.last_window``) and what replay writes later. The corner of a score is
read off its state hash: the transition's entry hash is x⁻, its exit hash x⁺. Layouts are
reduced within channel (mean over the channel's full layout set; a missing layout leaves
the corner incomplete), waves are kept apart.

The output of a channel replay (``agentlog replay --channel ...``, ``agentlog.replay.
replay_channels``) is read the same way: each of its runs is one replayed unit whose meta
``"agentlog.replay"`` names the source transition (source run id and identity, window and
window id, entry and exit hashes), and its run-level ``Score`` records carry the raw score
of one layout and wave. Such a transition joins the source's own when both are read, and
is grouped into the trajectory of its source run, exactly as if the source had been read.
Replayed transitions come after the source's, ordered by trajectory, source run and
window id (the output's unit order depends on scheduling; the estimate must not).

Examples:
    >>> import agentlog as al
    >>> from agentlog.estimators import asv
    >>> @al.window("step")
    ... def step(x: int) -> int:
    ...     return x + 1
    >>> with al.record("agentlog-asv-doc.zst", seed=1, task="t"):
    ...     _ = step(1)
    ...     ref = al.last_window("step")
    ...     for ch, (b, a) in {"direct": (0.1, 0.5), "quote": (0.2, 0.1)}.items():
    ...         al.score("margin", b, channel=ch, transition=ref.id, state_hash=ref.entry_hash)
    ...         al.score("margin", a, channel=ch, transition=ref.id, state_hash=ref.exit_hash)
    >>> data = asv.from_traces("agentlog-asv-doc.zst", channels=("direct", "quote"))
    >>> [round(float(g), 12) for g in data.face().interaction]
    [-0.5]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from agentlog import Trace
from agentlog.deprecation import warn_renamed
from agentlog.records import RunStart, Score, iter_runs

from ._asv import AsvFace, face

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class AsvData:
    """Reduced corners per transition and wave, with trajectory and target labels.

    Transitions are in reading order (a folder's files sorted by path, runs and windows in
    file order); the bootstrap orders its blocks by their sorted trajectory keys.

    ``corners[wave]`` has shape (n_transitions, 4): F_ρ0(x−), F_ρ0(x+), F_ρ1(x−), F_ρ1(x+)
    (NaN where incomplete). ``layouts[channel]`` lists that channel's layout set.
    """

    channels: tuple[str, str]
    transitions: list[tuple[str, int]]  # (run id, window id)
    window_names: list[str]
    trajectory: NDArray[Any]  # trajectory key per transition (see from_traces)
    target: NDArray[Any]  # task per transition
    corners: dict[int, FloatArray]
    layouts: dict[str, tuple[int, ...]]
    per_layout: dict[tuple[int, str, int], FloatArray]  # (wave, channel, layout) -> (n, 2)

    @property
    def waves(self) -> list[int]:
        return sorted(self.corners)

    def face(self, *, wave: int | None = None, complete_only: bool = False) -> AsvFace:
        """The face of one wave (default: the first), see ``asv.face``."""
        if not self.waves:
            raise ValueError(f"no channel scores on the {len(self.transitions)} transitions "
                             f"of windows {sorted(set(self.window_names))}; pick the window "
                             "the channels score (window=)")
        w = self.waves[0] if wave is None else wave
        if w not in self.corners:
            raise ValueError(f"no scores for wave {w}; waves present: {self.waves}")
        c = self.corners[w]
        return face(c[:, 0], c[:, 1], c[:, 2], c[:, 3], complete_only=complete_only)

    def wave_gains(self, channel: str) -> FloatArray:
        """Gains of one channel in every wave, shape (n_transitions, n_waves)."""
        j = self.channels.index(channel) * 2
        return np.column_stack([self.corners[w][:, j + 1] - self.corners[w][:, j]
                                for w in self.waves])


def _run_slot(runs: dict[str, tuple[RunStart, str]], start: RunStart, key: str | None,
              path: Any) -> str:
    """Remember a run and its base block label; return its run id (labelled at the end)."""
    if start.run_id not in runs:
        if key is not None:
            if key not in start.meta:
                present = ", ".join(sorted(map(str, start.meta))) or "none"
                raise ValueError(
                    f"{path}: run {start.run} has no meta key {key!r} for `trajectory_key`; "
                    f"meta keys present: {present}. Record it (al.record(..., meta="
                    f"{{{key!r}: ...}})) or leave `trajectory_key` unset to group by system, "
                    "task and seed")
            base = str(start.meta[key])
        else:
            task = "" if start.task is None else start.task
            base = f"{start.system}/{task}/seed={start.seed}"
        runs[start.run_id] = (start, base)
    return start.run_id


def _canonical(value: Any) -> bytes:
    return msgspec.json.encode(value, order="sorted")


def _trajectory_labels(runs: dict[str, tuple[RunStart, str]], tell_apart: bool
                       ) -> dict[str, str]:
    """Run id → block label, a function of the recorded content only.

    Runs that share ``system/task/seed`` (e.g. the paired rankings of one seed) are told
    apart by the meta entries in which they differ, appended as ``/key=value`` in key
    order; runs equal in all of them form one block. A user-given key is used as is.
    """
    by_base: dict[str, list[RunStart]] = {}
    for start, base in runs.values():
        by_base.setdefault(base, []).append(start)
    labels: dict[str, str] = {}
    for base, starts in by_base.items():
        differing: list[str] = []
        if tell_apart and len(starts) > 1:
            keys = sorted({str(k) for st in starts for k in st.meta})
            differing = [k for k in keys
                         if len({_canonical(st.meta.get(k)) for st in starts}) > 1]
        for st in starts:
            extra = "".join(f"/{k}={_text(st.meta.get(k))}" for k in differing)
            labels[st.run_id] = base + extra
    return labels


def _text(value: Any) -> str:
    return value if isinstance(value, str) else _canonical(value).decode()


# The layout of a channel replay's output (documented in agentlog.replay's
# `_channel_replay` and `_unit_output`): one run per unit, its meta under this key.
REPLAY_META = "agentlog.replay"
CHANNEL_REPLAY_KIND = "agentlog.channel-replay/1"


@dataclass(frozen=True)
class _Replayed:
    """The source transition one replayed unit's run scores."""

    key: tuple[str, int]  # (source run id, window id)
    window: str
    start: RunStart  # the source run's identity, as its RunStart held it
    entry_hash: bytes
    exit_hash: bytes
    source_file: str  # the source trace's file name ("" when not stored)


def _replayed(start: RunStart, path: Any) -> _Replayed | None:
    """The source transition of a channel-replay unit run, or None for any other run."""
    meta = start.meta.get(REPLAY_META) if isinstance(start.meta, dict) else None
    if not isinstance(meta, dict) or meta.get("kind") != CHANNEL_REPLAY_KIND:
        return None
    try:
        source = RunStart(
            run=0, run_id=str(meta["source_run"]), system=str(meta["source_system"]),
            seed=int(meta["source_seed"]), task=meta["source_task"],
            meta=dict(meta["source_meta"]), t_ns=0, generator="", agentlog_version="")
        return _Replayed((source.run_id, int(meta["window_id"])), str(meta["window"]),
                         source, bytes.fromhex(meta["entry_hash"]),
                         bytes.fromhex(meta["exit_hash"]), str(meta.get("source_file") or ""))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: run {start.run} is a channel-replay unit whose provenance "
                         f"is incomplete ({type(exc).__name__}: {exc}); it was not written by "
                         "agentlog replay, or was edited. Replay into a fresh output") from None


def channel_scores(source: Trace | str | os.PathLike[str] | Sequence[Any]
                   ) -> dict[str, dict[str, set[str]]]:
    """``{channel: {window name: {score names}}}`` of the Score records tied to a transition.

    Reads recorded traces and channel replays' outputs alike (a replayed unit's scores
    belong to its source window); the files stream one run at a time. A Parquet dataset
    folder (``agentlog export --format parquet``) is read from its tables. A score whose
    transition is no window of its run is listed under the window name ``"?"``.
    """
    if isinstance(source, str | os.PathLike):
        from agentlog.dataset import is_dataset
        from agentlog.dataset import iter_runs as dataset_runs

        if is_dataset(source):
            return _channel_scores(dataset_runs(source, ("windows", "scores")))
    if not isinstance(source, Trace | str | os.PathLike) and isinstance(source, Iterable):
        source = list(source)
    return _channel_scores(iter_runs(source, name="source"))


def _channel_scores(runs: Iterable[Any]) -> dict[str, dict[str, set[str]]]:
    out: dict[str, dict[str, set[str]]] = {}
    for trace, run in runs:
        names = {w.window: w.name for w in run.windows}
        rep = None if run.start is None else _replayed(run.start, trace.path)
        for rec in run.records:
            if type(rec) is not Score or rec.channel is None or rec.transition is None:
                continue
            if rep is not None:
                window = rep.window if rec.transition == rep.key[1] else "?"
            else:
                window = names.get(rec.transition, "?")
            out.setdefault(rec.channel, {}).setdefault(window, set()).add(rec.name)
    return out


def _default_window(runs: Iterable[Any], channels: tuple[str, str]) -> str | None:
    """The one window whose transitions carry scores on both channels.

    Taking every window instead would mix transitions that only one channel (or no
    channel) scored into the face, which is then incomplete. None when no window is
    scored on both: the caller's own checks then say what is missing.
    """
    cells = _channel_scores(runs)
    both = sorted((set(cells.get(channels[0], {})) & set(cells.get(channels[1], {})))
                  - {"?"})
    if len(both) > 1:
        raise ValueError(f"channels {channels[0]!r} and {channels[1]!r} both score the "
                         f"transitions of windows {both}; pass window= to pick one")
    return both[0] if both else None


def _score_iv(score: str | tuple[str, str] | None, channels: tuple[str, str]
              ) -> dict[str, str] | None:
    """``{channel: score name}`` of ``from_traces``'s ``score=`` (None: every name)."""
    if score is None:
        return None
    if isinstance(score, str):
        return {channels[0]: score, channels[1]: score}
    if (isinstance(score, tuple | list) and len(score) == 2
            and all(isinstance(n, str) and n for n in score)):
        return {channels[0]: score[0], channels[1]: score[1]}
    raise ValueError(f"`score` must be a score name, (name under {channels[0]!r}, name under "
                     f"{channels[1]!r}) or None; found {score!r}")


def from_traces(
    source: Trace | str | os.PathLike[str] | Sequence[Any],
    *,
    channels: tuple[str, str],
    window: str | None = None,
    score: str | tuple[str, str] | None = None,
    target_key: str = "target",
    trajectory_key: str | None = None,
) -> AsvData:
    """Collect the channel scores of every transition into reduced four-corner faces.

    Args:
        source: a Trace, a trace path, a folder (every ``*.zst`` below it), or a list of
            them.
        channels: ``(ρ0, ρ1)``, e.g. ``("direct", "quote")``.
        window: only transitions of windows with this name. Default: the one window
            whose transitions both channels score (what ``agentlog estimate asv`` picks);
            when several are, a ``ValueError`` names them and asks for ``window=``.
        score: only Score records with this name (default: every channel score), or
            ``(name under ρ0, name under ρ1)`` when the channels' scorers name their
            readouts differently (e.g. ``("f1", "judge_f1")``).
        target_key: the run meta key naming the transition's target identity ([ASV]
            weights targets equally under ``weighting="equal-target"``); runs without it
            use their task.
        trajectory_key: the run meta key that names a run's trajectory (its bootstrap
            block). Default: ``system/task/seed=…``, and for runs that share it the run
            meta entries in which they differ (``/ranking=agent``) — a function of what was
            recorded, never of the random run id, so recording the same runs again gives
            bit-identical intervals. Runs equal in all of it form one block.

    Raises:
        ValueError: ``channels`` is not two names, a channel has no scores, a score names a
            state that is neither end of its window, a cell is scored twice, or a run lacks
            the ``trajectory_key`` meta key.
    """
    if not isinstance(source, Trace | str | os.PathLike) and isinstance(source, Iterable):
        source = list(source)  # read twice when the window is found first
    # Runs stream one at a time (a second pass finds the default window first): memory
    # holds a run and the per-transition arrays, whatever the size of the files.
    return _from_runs(lambda: iter_runs(source, name="source"), channels=channels,
                      window=window, score=score, target_key=target_key,
                      trajectory_key=trajectory_key)


def from_dataset(
    dataset: str | os.PathLike[str] | Mapping[str, Any],
    *,
    channels: tuple[str, str],
    window: str | None = None,
    score: str | tuple[str, str] | None = None,
    target_key: str = "target",
    trajectory_key: str | None = None,
) -> AsvData:
    """``from_traces`` of the traces a Parquet dataset was exported from (``agentlog
    export --format parquet``), read from its ``runs``, ``windows`` and ``scores``
    tables: the same ``AsvData``, transitions in the same order, to the bit.

    The runs' windows and scores are rebuilt (``agentlog.dataset.iter_runs``) and put in
    the order ``from_traces`` reads the source files in before the same collection runs
    over them: memory holds the dataset's windows and scores (not its vectors or calls).

    Args:
        dataset: the dataset folder, or its tables already selected (e.g. filtered in
            SQL): ``{"runs": ..., "windows": ..., "scores": ...}`` as pyarrow tables or DuckDB
            relations (``agentlog.dataset.iter_runs`` says which columns).
        channels, window, score, target_key, trajectory_key: as ``from_traces``.

    Raises:
        ValueError: as ``from_traces``; a folder that is not a dataset of this version.
    """
    from agentlog.dataset import iter_runs as dataset_runs
    from agentlog.dataset import run_order

    runs = sorted(dataset_runs(dataset, ("windows", "scores")),
                  key=lambda r: run_order(r.trace.path, r.run.run))
    return _from_runs(lambda: iter(runs), channels=channels, window=window, score=score,
                      target_key=target_key, trajectory_key=trajectory_key)


def _from_runs(
    read_runs: Callable[[], Iterator[Any]], *, channels: tuple[str, str], window: str | None,
    score: str | tuple[str, str] | None, target_key: str, trajectory_key: str | None,
) -> AsvData:
    """The collection over the ``TraceRun``s that ``read_runs()`` gives (called twice when the
    window is found first)."""
    if len(channels) != 2 or channels[0] == channels[1]:
        raise ValueError(f"`channels` must name two different channels; found {channels!r}")
    wanted = _score_iv(score, channels)
    cells: dict[tuple[int, int, str, int, int], float] = {}  # (t, wave, ch, corner, layout)
    transitions: list[tuple[str, int]] = []  # (run id, window id)
    names: list[str] = []
    trajectory: list[str] = []
    target: list[str] = []
    layouts: dict[str, set[int]] = {c: set() for c in channels}
    runs: dict[str, tuple[RunStart, str]] = {}  # run id -> (start, base label)
    seen_channels: set[str] = set()
    if window is None:
        window = _default_window(read_runs(), channels)
    index: dict[tuple[str, int], int] = {}  # (run id, window id) -> transition
    hashes: dict[int, tuple[bytes, bytes | None]] = {}
    replayed_order: dict[int, tuple[str, int, str]] = {}  # transitions first seen replayed

    def add(key: tuple[str, int], name: str, start: RunStart, path: Any,
            entry: bytes, exit_: bytes | None) -> int:
        t = index[key] = len(transitions)
        hashes[t] = (entry, exit_)
        transitions.append(key)
        names.append(name)
        trajectory.append(_run_slot(runs, start, trajectory_key, path))
        label = start.meta.get(target_key, start.task)
        target.append("" if label is None else str(label))
        return t

    for trace, run in read_runs():
        if run.start is None:
            continue
        rep = _replayed(run.start, trace.path)
        if rep is not None:
            if window is not None and rep.window != window:
                continue
            if rep.key not in index:
                t = add(rep.key, rep.window, rep.start, trace.path, rep.entry_hash,
                        rep.exit_hash)
                replayed_order[t] = (rep.source_file, rep.key[1], rep.key[0])
        else:
            for w in run.windows:
                if window is not None and w.name != window:
                    continue
                add((run.start.run_id, w.window), w.name, run.start, trace.path,
                    w.entry_hash, w.exit_hash)
        source_run = rep.key[0] if rep is not None else run.start.run_id
        for rec in run.records:
            if not isinstance(rec, Score) or rec.channel is None:
                continue
            seen_channels.add(rec.channel)
            if rec.channel not in channels or rec.transition is None:
                continue
            if wanted is not None and rec.name != wanted[rec.channel]:
                continue
            if rep is not None and rec.transition != rep.key[1]:
                continue  # a replayed unit scores its own transition only
            t = index.get((source_run, rec.transition), -1)
            if t < 0:
                continue  # a transition of another window
            entry, exit_ = hashes[t]
            if rec.state_hash == entry:
                corner = 0
            elif exit_ is not None and rec.state_hash == exit_:
                corner = 1
            else:
                raise ValueError(
                    f"{trace.path}: score {rec.name!r} (channel {rec.channel!r}) on "
                    f"transition {rec.transition} names state "
                    f"{(rec.state_hash or b'').hex()[:16]}…, which is neither the entry "
                    "nor the exit of that window; score x− with WindowRef.entry_hash and "
                    "x+ with WindowRef.exit_hash")
            layout = 0 if rec.layout is None else rec.layout
            wave = 0 if rec.wave is None else rec.wave
            key = (t, wave, rec.channel, corner, layout)
            if key in cells:
                raise ValueError(
                    f"{trace.path}: transition {rec.transition} is scored twice on channel "
                    f"{rec.channel!r}, {'x+' if corner else 'x−'}, layout {layout}, wave "
                    f"{wave}; give repeated acquisitions distinct waves (a replay's output "
                    "and the record-time scores of the same traces are two acquisitions)")
            cells[key] = float(rec.value)
            layouts[rec.channel].add(layout)
    missing = [c for c in channels if c not in seen_channels]
    if missing:
        raise ValueError(f"no scores on channel(s) {missing}; channels present: "
                         f"{sorted(seen_channels) or 'none'}")
    if not transitions:
        raise ValueError("no transitions" + (f" of window {window!r}" if window else ""))
    labels = _trajectory_labels(runs, trajectory_key is None)
    trajectory = [labels[r] for r in trajectory]
    if replayed_order:
        # Transitions first seen in a replay's output: in an order of what was recorded
        # (trajectory, source file name, window id), not the order its units finished in.
        first = [t for t in range(len(transitions)) if t not in replayed_order]
        perm = first + sorted(replayed_order,
                              key=lambda t: (trajectory[t], *replayed_order[t]))
        new_of = {old: new for new, old in enumerate(perm)}
        transitions = [transitions[t] for t in perm]
        names = [names[t] for t in perm]
        trajectory = [trajectory[t] for t in perm]
        target = [target[t] for t in perm]
        cells = {(new_of[k[0]], *k[1:]): v for k, v in cells.items()}
    n = len(transitions)
    waves = sorted({k[1] for k in cells})
    per_layout: dict[tuple[int, str, int], FloatArray] = {}
    for (t, wave, ch, corner, layout), v in cells.items():
        arr = per_layout.setdefault((wave, ch, layout), np.full((n, 2), np.nan))
        arr[t, corner] = v
    corners: dict[int, FloatArray] = {}
    for wave in waves:
        cols = []
        for ch in channels:
            stack = np.stack([per_layout.get((wave, ch, lay), np.full((n, 2), np.nan))
                              for lay in sorted(layouts[ch])])
            cols.append(stack.mean(axis=0))  # NaN when any layout is missing: incomplete
        corners[wave] = np.column_stack([cols[0], cols[1]])
    return AsvData(
        channels=(channels[0], channels[1]), transitions=transitions, window_names=names,
        trajectory=np.asarray(trajectory), target=np.asarray(target), corners=corners,
        layouts={c: tuple(sorted(v)) for c, v in layouts.items()}, per_layout=per_layout,
    )


def from_trace(source: Trace | str | os.PathLike[str] | Sequence[Any], **kwargs: Any
               ) -> AsvData:
    """Deprecated: ``asv.from_traces`` (same arguments); goes in the next release."""
    warn_renamed("asv.from_trace", "asv.from_traces")
    return from_traces(source, **kwargs)
