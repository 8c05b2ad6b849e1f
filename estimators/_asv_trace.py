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
of one layout and wave. Such a transition joins the source's own when both are read
(whichever is read first: it takes its source's place), and is grouped into the trajectory
of its source run, exactly as if the source had been read. Transitions whose source is not
read come after the others, ordered by trajectory, source file and window id (the output's
unit order depends on scheduling; the estimate must not).

``from_dataset`` reads an exported dataset: each run reduced on its own (``_reduce``,
locally or on Ray Data), then the collection of ``from_traces`` (``_Collection``) over the
reduced runs in the traces' order, which places the replayed scores on their sources.

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

import collections
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgspec
import numpy as np
from numpy.typing import NDArray

from agentlog import Trace
from agentlog.deprecation import warn_renamed
from agentlog.records import RunStart, Score, iter_runs

from ._asv import AsvFace, face
from ._executor import Executor, check_dataset, check_executor

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


_NO_META: dict[str, Any] = {}  # read only


def _run_slot(runs: dict[str, tuple[str, dict[str, Any]]], start: RunStart, key: str | None,
              path: Any) -> str:
    """Remember a run's base block label and meta (what its label is made of); return its
    run id (labelled at the end)."""
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
        runs[start.run_id] = (base, start.meta or _NO_META)  # one object for every empty meta
    return start.run_id


def _canonical(value: Any) -> bytes:
    return msgspec.json.encode(value, order="sorted")


def _trajectory_labels(runs: dict[str, tuple[str, dict[str, Any]]], tell_apart: bool
                       ) -> dict[str, str]:
    """Run id → block label of the runs whose base label another run shares (a run alone
    with its base is labelled by it), a function of the recorded content only.

    Runs that share ``system/task/seed`` (e.g. the paired rankings of one seed) are told
    apart by the meta entries in which they differ, appended as ``/key=value`` in key
    order; runs equal in all of them form one block. A user-given key is used as is.
    Only shared bases are listed: at 10⁷ runs a list and a label per run are gigabytes.
    """
    shared = {base for base, n in collections.Counter(b for b, _ in runs.values()).items()
              if n > 1}
    by_base: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for run_id, (base, meta) in runs.items():
        if base in shared:
            by_base.setdefault(base, []).append((run_id, meta))
    labels: dict[str, str] = {}
    for base, metas in by_base.items():
        differing: list[str] = []
        if tell_apart:
            keys = sorted({str(k) for _, meta in metas for k in meta})
            differing = [k for k in keys
                         if len({_canonical(meta.get(k)) for _, meta in metas}) > 1]
        for run_id, meta in metas:
            labels[run_id] = base + "".join(f"/{k}={_text(meta.get(k))}" for k in differing)
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


def channel_scores(source: Trace | str | os.PathLike[str] | Sequence[Any], *,
                   executor: Executor = "local") -> dict[str, dict[str, set[str]]]:
    """``{channel: {window name: {score names}}}`` of the Score records tied to a transition.

    Reads recorded traces and channel replays' outputs alike (a replayed unit's scores
    belong to its source window); the files stream one run at a time. A Parquet dataset
    folder (``agentlog export --format parquet``) is read from its ``runs``, ``windows``
    and ``scores`` tables, by the per-run stage of ``from_dataset`` (``executor="ray"``: on
    Ray Data; ``source`` must then be the dataset folder). A score whose transition is no
    window of its run is listed under the window name ``"?"``.

    Raises:
        ValueError: a channel-replay unit whose provenance is incomplete (the first in the
            order the runs are read); ``executor`` names no executor.
    """
    how = check_executor(executor)
    if isinstance(source, str | os.PathLike):
        from agentlog.dataset import is_dataset

        if how == "ray" or is_dataset(source):
            from ._asv_dataset import per_run_stage, stage_cells

            return stage_cells(per_run_stage(source, channels=(), wanted=None, window=None,
                                             cells=True, executor=how))
    check_dataset(source, how)
    if not isinstance(source, Trace | str | os.PathLike) and isinstance(source, Iterable):
        source = list(source)
    return _channel_scores(iter_runs(source, name="source"))


def _run_cells(path: Any, run: Any) -> set[tuple[str, str, str]]:
    """``(channel, window name, score name)`` of one run's Score records tied to a
    transition (``"?"``: no window of the run, or not a replayed unit's own)."""
    names = {w.window: w.name for w in run.windows}
    rep = None if run.start is None else _replayed(run.start, path)
    out: set[tuple[str, str, str]] = set()
    for rec in run.records:
        if type(rec) is not Score or rec.channel is None or rec.transition is None:
            continue
        if rep is not None:
            window = rep.window if rec.transition == rep.key[1] else "?"
        else:
            window = names.get(rec.transition, "?")
        out.add((rec.channel, window, rec.name))
    return out


def _add_cells(out: dict[str, dict[str, set[str]]],
               cells: Iterable[tuple[str, str, str]]) -> dict[str, dict[str, set[str]]]:
    for channel, window, name in cells:
        out.setdefault(channel, {}).setdefault(window, set()).add(name)
    return out


def _channel_scores(runs: Iterable[Any]) -> dict[str, dict[str, set[str]]]:
    out: dict[str, dict[str, set[str]]] = {}
    for trace, run in runs:
        _add_cells(out, _run_cells(trace.path, run))
    return out


def _default_window(cells: Mapping[str, Mapping[str, set[str]]], channels: tuple[str, str]
                    ) -> str | None:
    """The one window whose transitions carry scores on both channels (``cells``: as
    ``channel_scores`` gives them).

    Taking every window instead would mix transitions that only one channel (or no
    channel) scored into the face, which is then incomplete. None when no window is
    scored on both: the caller's own checks then say what is missing.
    """
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
    wanted = _check_collection(channels, score)
    # Runs stream one at a time (a second pass finds the default window first): memory
    # holds a run and the per-transition arrays, whatever the size of the files.
    if window is None:
        window = _default_window(_channel_scores(iter_runs(source, name="source")), channels)
    collect = _Collection(channels, window, target_key, trajectory_key)
    for trace, run in iter_runs(source, name="source"):
        collect.add(_reduce(trace.path, run, channels=channels, wanted=wanted, window=window))
    return collect.data()


def from_dataset(
    dataset: str | os.PathLike[str] | Mapping[str, Any],
    *,
    channels: tuple[str, str],
    window: str | None = None,
    score: str | tuple[str, str] | None = None,
    target_key: str = "target",
    trajectory_key: str | None = None,
    executor: Executor = "local",
) -> AsvData:
    """``from_traces`` of the traces a Parquet dataset was exported from (``agentlog
    export --format parquet``), read from its ``runs``, ``windows`` and ``scores``
    tables: the same ``AsvData``, transitions in the same order, to the bit, and the same
    first error.

    The per-run stage is a group-by on ``run_id``: each run's windows and scores, rebuilt
    from its rows (``agentlog.dataset.iter_runs``), reduced to what the collection takes
    from a run alone (its windows of ``window``, the scores of ``channels`` and ``score``,
    its channels, a replayed unit's source transition read off its provenance), over Arrow
    tables in this process (``executor="local"``; a chunk of runs' records at a time), or
    on Ray Data (``"ray"``). A channel replay's scores belong to transitions of other runs
    (their sources), so what joins runs stays on the driver: the reduced runs, put in the
    order ``from_traces`` reads the source files in, go through the collection of
    ``from_traces`` (each replayed score placed on its source transition's corner, the
    checks, the first error, the arrays), holding what the result holds. The bootstrap
    (``asv.summarize``) is a function of the face, not of the runs, and stays local.

    Args:
        dataset: the dataset folder, or its tables already selected (e.g. filtered in
            SQL): ``{"runs": ..., "windows": ..., "scores": ...}`` as pyarrow tables or DuckDB
            relations (``agentlog.dataset.iter_runs`` says which columns).
        channels, window, score, target_key, trajectory_key: as ``from_traces``.
        executor: ``"local"``, or ``"ray"`` to run the per-run stage on Ray Data
            (``dataset`` must then be a folder every node reads, or an ``s3://`` URI).
            The same ``AsvData`` either way, bit for bit.

    Raises:
        ValueError: as ``from_traces``; a folder that is not a dataset of this version.
        MissingDependencyError: pyarrow is not installed, or ``executor="ray"`` without
            Ray (``pip install 'agentlog[ray]'``).
    """
    how = check_executor(executor)
    check_dataset(dataset, how)
    wanted = _check_collection(channels, score)
    from ._asv_dataset import per_run_stage, replayed_keys, stage_cells, stage_parts

    stage = per_run_stage(dataset, channels=channels, wanted=wanted, window=window,
                          cells=window is None, executor=how)
    if window is None:
        window = _default_window(stage_cells(stage), channels)
        stage = stage.drop_columns(["cells"])
    collect = _Collection(channels, window, target_key, trajectory_key,
                          named=replayed_keys(stage))
    parts = stage_parts(stage)
    del stage  # the parts hold it until they are read: the arrays are built without it
    for part in parts:
        collect.add(part)
    del parts
    return collect.data()


def _check_collection(channels: tuple[str, str], score: str | tuple[str, str] | None
                      ) -> dict[str, str] | None:
    """``{channel: score name}`` of ``score`` (None: every name), after checking
    ``channels``."""
    if len(channels) != 2 or channels[0] == channels[1]:
        raise ValueError(f"`channels` must name two different channels; found {channels!r}")
    return _score_iv(score, channels)


class _Placed(NamedTuple):
    """One score the collection may place, its corner read within its run (``_reduce``):
    ``corner`` 0 (x−) or 1 (x+), or -1 when the state it names is neither end of its
    window, ``problem`` then saying so (raised if its transition is collected)."""

    transition: int  # window id
    corner: int
    value: float
    channel: str
    layout: int
    wave: int
    problem: str | None = None


@dataclass(frozen=True)
class _RunPart:
    """What the collection takes from one run, a function of that run alone (``_reduce``).

    ``start`` labels the run's transitions: its own ``RunStart``, a replayed unit's source's
    (``rep.start``); None for a run without one (left out). ``windows``: ``(window id, name,
    entry hash, exit hash)`` of a recorded run's windows of the collected window.
    ``channels``: every channel its Score records name. ``scores``: those the collection
    may place (of the two channels, of the score names asked, on one of ``windows``; a
    replayed unit's on its own transition only), each with the corner its state hash names.
    """

    path: str
    start: RunStart | None
    rep: _Replayed | None = None
    windows: tuple[tuple[int, str, bytes, bytes | None], ...] = ()
    channels: frozenset[str] = frozenset()
    scores: tuple[_Placed, ...] = ()


def _reduce(path: Any, run: Any, *, channels: tuple[str, ...],
            wanted: Mapping[str, str] | None, window: str | None) -> _RunPart:
    """One run's ``_RunPart``; ``ValueError`` for a replayed unit's incomplete provenance.

    A score's corner is read here, against the ends of its own window (a replayed unit's:
    those its provenance names), so the collection keeps no state hash per transition."""
    start = run.start
    if start is None:
        return _RunPart(path, None)
    rep = _replayed(start, path)
    if rep is not None and window is not None and rep.window != window:
        return _RunPart(path, rep.start, rep)  # another window's unit: passed over
    windows = () if rep is not None else tuple(
        (w.window, w.name, w.entry_hash, w.exit_hash) for w in run.windows
        if window is None or w.name == window)
    ends: dict[int, tuple[bytes, bytes | None]] = (
        {rep.key[1]: (rep.entry_hash, rep.exit_hash)} if rep is not None  # its own only
        else {w: (a, b) for w, _, a, b in windows})
    seen: set[str] = set()
    scores = []
    for rec in run.records:
        if not isinstance(rec, Score) or rec.channel is None:
            continue
        seen.add(rec.channel)
        if rec.channel not in channels or rec.transition is None:
            continue
        if wanted is not None and rec.name != wanted[rec.channel]:
            continue
        end = ends.get(rec.transition)
        if end is not None:  # else a transition of another window
            scores.append(_placed(path, rec, end))
    return _RunPart(path, start if rep is None else rep.start, rep, windows,
                    frozenset(seen), tuple(scores))


def _placed(path: Any, rec: Score, ends: tuple[bytes, bytes | None]) -> _Placed:
    """``rec`` with the corner its state hash names among ``ends`` (entry, exit)."""
    entry, exit_ = ends
    corner, problem = -1, None
    if rec.state_hash == entry:
        corner = 0
    elif exit_ is not None and rec.state_hash == exit_:
        corner = 1
    else:
        problem = (
            f"{path}: score {rec.name!r} (channel {rec.channel!r}) on transition "
            f"{rec.transition} names state {(rec.state_hash or b'').hex()[:16]}…, which is "
            "neither the entry nor the exit of that window; score x− with "
            "WindowRef.entry_hash and x+ with WindowRef.exit_hash")
    return _Placed(rec.transition or 0, corner, float(rec.value), rec.channel or "",
                   0 if rec.layout is None else rec.layout,
                   0 if rec.wave is None else rec.wave, problem)


#: Bytes of a state hash the collection compares a replayed unit's ends by: a unit that
#: replayed other states than its source recorded differs there but with chance 2⁻⁶⁴,
#: and the per-run stage carries 16 bytes a window instead of 64.
END_BYTES = 8


def _ends(entry: bytes, exit_: bytes | None) -> tuple[bytes, bytes | None]:
    return entry[:END_BYTES], None if exit_ is None else exit_[:END_BYTES]


class _Grid:
    """One (wave, channel, layout)'s scores: an ``(n, 2)`` array of x−/x+ values per
    transition, NaN where unscored, and which cells a score filled (a score may be NaN).
    Grown by doubling as transitions are added: 18 bytes a transition, where a dict of
    cells held ~250."""

    def __init__(self) -> None:
        self.values = np.full((0, 2), np.nan)
        self.filled = np.zeros((0, 2), dtype=bool)

    def put(self, t: int, corner: int, value: float) -> bool:
        """Set a cell; False (nothing set) when a score filled it already."""
        if t >= len(self.values):
            grow = max(t + 1, 2 * len(self.values), 1024) - len(self.values)
            self.values = np.concatenate([self.values, np.full((grow, 2), np.nan)])
            self.filled = np.concatenate([self.filled, np.zeros((grow, 2), dtype=bool)])
        if self.filled[t, corner]:
            return False
        self.filled[t, corner] = True
        self.values[t, corner] = value
        return True


class _Collection:
    """The transitions and their scored cells, collected from the runs' ``_RunPart``s added
    in reading order; ``data()`` gives the ``AsvData``.

    Per transition it holds what the result needs (its key, name, labels), in lists and
    arrays: at 10⁷ runs a Python object per run or per cell is gigabytes. A score's corner
    comes read (``_reduce``); the entry and exit hashes are kept only for the transitions
    of ``named`` (None: every one), those a channel replay's unit names, to check that
    the unit replayed the states its source recorded."""

    def __init__(self, channels: tuple[str, str], window: str | None, target_key: str,
                 trajectory_key: str | None, *,
                 named: set[tuple[str, int]] | None = None) -> None:
        self.channels = channels
        self.window = window
        self.target_key = target_key
        self.trajectory_key = trajectory_key
        self.grids: dict[tuple[int, str, int], _Grid] = {}  # (wave, channel, layout)
        self.transitions: list[tuple[str, int]] = []  # (run id, window id)
        self.names: list[str] = []
        self.trajectory: list[str] = []  # run ids, labelled in data()
        self.target: list[str] = []
        self.named = named
        self.ends: dict[int, tuple[bytes, bytes | None]] = {}  # named ones', END_BYTES long
        self.layouts: dict[str, set[int]] = {c: set() for c in channels}
        self.runs: dict[str, tuple[str, dict[str, Any]]] = {}  # run id -> (base label, meta)
        self.seen: set[str] = set()
        self.index: dict[tuple[str, int], int] = {}  # (run id, window id) -> transition
        self.strings: dict[str, str] = {}  # one object per window name and target
        # transitions first seen in a replay's output, until their source is read
        self.replayed_order: dict[int, tuple[str, int, str]] = {}
        self.recorded: list[int] = []  # the others, in the order their sources were read

    def _add(self, key: tuple[str, int], name: str, start: RunStart, path: Any,
             entry: bytes, exit_: bytes | None) -> int:
        t = self.index[key] = len(self.transitions)
        if self.named is None or key in self.named:
            self.ends[t] = _ends(entry, exit_)
        self.transitions.append(key)
        self.names.append(self.strings.setdefault(name, name))
        self.trajectory.append(_run_slot(self.runs, start, self.trajectory_key, path))
        label = start.meta.get(self.target_key, start.task)
        label = "" if label is None else str(label)
        self.target.append(self.strings.setdefault(label, label))
        return t

    def add(self, part: _RunPart) -> None:
        """Add one run's part (``ValueError`` for a bad score, naming the run's file)."""
        start, rep, path = part.start, part.rep, part.path
        if start is None:
            return
        if rep is not None:
            if self.window is not None and rep.window != self.window:
                return
            t = self.index.get(rep.key, -1)
            if t < 0:
                t = self._add(rep.key, rep.window, start, path, rep.entry_hash,
                              rep.exit_hash)
                self.replayed_order[t] = (rep.source_file, rep.key[1], rep.key[0])
            else:
                self._same_ends(t, (rep.entry_hash, rep.exit_hash), path)
        else:
            for window_id, name, entry, exit_ in part.windows:
                if self.window is not None and name != self.window:
                    continue
                key = (start.run_id, window_id)
                t = self.index.get(key, -1)
                if t >= 0 and t in self.replayed_order:
                    # Its replay's output was read first: the same transition, now in its
                    # source's place.
                    self._same_ends(t, (entry, exit_), path)
                    del self.replayed_order[t]
                else:
                    t = self._add(key, name, start, path, entry, exit_)
                self.recorded.append(t)
        self.seen |= part.channels
        source_run = start.run_id
        for score in part.scores:
            t = self.index.get((source_run, score.transition), -1)
            if t < 0:
                continue  # a transition of another window
            if score.problem is not None:
                raise ValueError(score.problem)
            self._place(t, score, path)

    def _same_ends(self, t: int, ends: tuple[bytes, bytes | None], path: Any) -> None:
        """Refuse a replayed unit whose source transition, read too, has other ends."""
        ends = _ends(*ends)
        known = self.ends.get(t, ends)
        if known != ends:
            run_id, window_id = self.transitions[t]
            raise ValueError(
                f"{path}: a channel replay's unit and its source disagree on the states of "
                f"transition {window_id} of run {run_id} (entry "
                f"{known[0].hex()[:16]}… against {ends[0].hex()[:16]}…); the unit replayed "
                "other states than these traces hold (re-recorded or edited since). Replay "
                "the channels again from these traces")

    def _place(self, t: int, score: _Placed, path: Any) -> None:
        grid = self.grids.get((score.wave, score.channel, score.layout))
        if grid is None:
            grid = self.grids[score.wave, score.channel, score.layout] = _Grid()
        if not grid.put(t, score.corner, score.value):
            raise ValueError(
                f"{path}: transition {score.transition} is scored twice on channel "
                f"{score.channel!r}, {'x+' if score.corner else 'x−'}, layout "
                f"{score.layout}, wave {score.wave}; give repeated acquisitions distinct "
                "waves (a replay's output and the record-time scores of the same traces are "
                "two acquisitions)")
        self.layouts[score.channel].add(score.layout)

    def data(self) -> AsvData:
        """The ``AsvData`` of the runs added (``ValueError``: a channel without scores, no
        transition)."""
        channels = self.channels
        missing = [c for c in channels if c not in self.seen]
        if missing:
            raise ValueError(f"no scores on channel(s) {missing}; channels present: "
                             f"{sorted(self.seen) or 'none'}")
        if not self.transitions:
            raise ValueError("no transitions" + (f" of window {self.window!r}"
                                                 if self.window else ""))
        labels, runs = _trajectory_labels(self.runs, self.trajectory_key is None), self.runs
        trajectory = [labels.get(r, runs[r][0]) for r in self.trajectory]
        n = len(self.transitions)
        # Transitions first seen in a replay's output (their source not read): after the
        # others, in an order of what was recorded (trajectory, source file name, window
        # id), not the order its units finished in.
        perm = self.recorded + sorted(self.replayed_order,
                                      key=lambda t: (trajectory[t], *self.replayed_order[t]))
        transitions, names, target = self.transitions, self.names, self.target
        order: Any = slice(0, n)
        if perm != list(range(n)):
            order = np.asarray(perm)
            transitions = [transitions[t] for t in perm]
            names = [names[t] for t in perm]
            trajectory = [trajectory[t] for t in perm]
            target = [target[t] for t in perm]
        per_layout = {key: np.pad(grid.values, ((0, max(0, n - len(grid.values))), (0, 0)),
                                  constant_values=np.nan)[order]
                      for key, grid in self.grids.items()}
        corners: dict[int, FloatArray] = {}
        for wave in sorted({key[0] for key in self.grids}):
            cols = []
            for ch in channels:
                stack = np.stack([per_layout.get((wave, ch, lay), np.full((n, 2), np.nan))
                                  for lay in sorted(self.layouts[ch])])
                cols.append(stack.mean(axis=0))  # NaN when any layout is missing: incomplete
            corners[wave] = np.column_stack([cols[0], cols[1]])
        return AsvData(
            channels=(channels[0], channels[1]), transitions=transitions,
            window_names=names, trajectory=np.asarray(trajectory),
            target=np.asarray(target), corners=corners,
            layouts={c: tuple(sorted(v)) for c, v in self.layouts.items()},
            per_layout=per_layout,
        )


def from_trace(source: Trace | str | os.PathLike[str] | Sequence[Any], **kwargs: Any
               ) -> AsvData:
    """Deprecated: ``asv.from_traces`` (same arguments); goes in the next release."""
    warn_renamed("asv.from_trace", "asv.from_traces")
    return from_traces(source, **kwargs)
