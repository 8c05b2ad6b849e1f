"""Channel replay: score the frozen states of recorded transitions under registered channels.

For every completed instance of a window (a frozen transition, ``frozen_transitions``) and
every channel, the replay scores the before state x⁻ and the after state x⁺ under each of
the channel's cyclic layouts and in each acquisition wave, and writes the raw scores to an
output trace ([ASV] §1, §4). Nothing is reduced here: the layouts are averaged within the
channel later, by the estimator (``asv.from_traces(out)``), so the reduction can be re-run.

The work is cut into units, one per (transition, channel, layout, wave); a unit scores
both states. Its key is the SHA-256 of that identity (the transition's source run id,
window id and sealed entry/exit hashes, the channel's name and version hash, the scorer's
version hash, the layout and the wave), so a re-run into the same output skips every unit
already sealed there, and a new version of a channel is new work. Each unit's output run
carries its provenance: the source trace hash and file name, the source run's identity
(system, task, seed, meta, run id), the window and its id, the channel name, id and hash,
the scorer name, id and hash, the layout, the wave, the states' hashes and the channel's
declared model.

Execution (bounded concurrency, retry, progress, resume, Ray) is ``run_units``'s. The
code that runs is the app module the user names (``resolve_app``), never the trace. (In
the example the channel is registered in the session itself, so ``app`` only has to name
an importable module; a real app module registers its channels when imported.)

Examples:
    >>> import agentlog as al
    >>> from agentlog.replay import replay_channels
    >>> @al.window("replay-doc-step")
    ... def step(x: float) -> float:
    ...     return x + 1.0
    >>> @al.scorer("replay-doc-value")
    ... def value(state, view, layout):
    ...     v = state.value["x"] if state.before else state.value
    ...     return float(v) + 0.1 * layout
    >>> @al.channel("replay-doc-direct", scorer="replay-doc-value", layouts=2)
    ... def direct(state):
    ...     return None
    >>> with al.record("agentlog-replay-doc.zst", seed=1, task="t"):
    ...     _ = step(1.0)
    >>> summary = replay_channels("agentlog-replay-doc.zst", ["replay-doc-direct"],
    ...                           window="replay-doc-step", app="agentlog",
    ...                           out="agentlog-replay-doc-out.zst")
    >>> summary.total, summary.done, summary.failed
    (2, 2, 0)
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import itertools
import numbers
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from agentlog import ChannelVersionError, Trace
from agentlog.adapters import call_options
from agentlog.records import encode_artifact
from agentlog.registry import Channel, ScoreContext, Scorer, get_channel, get_scorer

from ._app import resolve_app
from ._executor import arun_units, run_units
from ._options import ExecutionOptions, execution_options
from ._states import FrozenTransition, State, frozen_transitions
from ._units import RunSummary, Unit, UnitContext, UnitScore

if TYPE_CHECKING:
    from agentlog.adapters import ModelCache

__all__ = [
    "CHANNEL_REPLAY_KIND",
    "ChannelVersionError",
    "RederivedReplay",
    "areplay_channels",
    "ascore_channel_unit",
    "iter_channel_units",
    "plan_channel_units",
    "rederive_channel_replay",
    "replay_channels",
    "score_channel_unit",
]

CHANNEL_REPLAY_KIND = "agentlog.channel-replay/1"
# Their public names (agentlog.replay exports both): written into every output unit.
JOB = "agentlog.replay:score_channel_unit"
AJOB = "agentlog.replay:ascore_channel_unit"

TraceSource = Trace | str | os.PathLike[str] | Sequence[Any]


def _unit_key(t: FrozenTransition, ch: Channel, sc: Scorer, layout: int, wave: int) -> str:
    identity = [CHANNEL_REPLAY_KIND, t.run_id, t.window_id, t.entry_hash, t.exit_hash,
                ch.name, ch.hash, sc.hash, layout, wave]
    return hashlib.sha256(encode_artifact(identity, what="unit identity")).hexdigest()


def _unit(t: FrozenTransition, ch: Channel, sc: Scorer, layout: int, wave: int) -> Unit:
    payload = {
        "channel": ch.name, "channel_hash": ch.hash, "scorer": sc.name,
        "scorer_hash": sc.hash, "layout": layout, "wave": wave,
        "source": None if t.source is None else str(t.source), "run_id": t.run_id,
        "window": t.window, "window_id": t.window_id, "system": t.system, "task": t.task,
        "seed": t.seed, "meta": dict(t.meta), "entry_hash": t.entry_hash,
        "exit_hash": t.exit_hash, "entry": t.entry, "exit": t.exit,
        "entry_problem": t.entry_problem, "exit_problem": t.exit_problem,
    }
    provenance = {
        "kind": CHANNEL_REPLAY_KIND, "source_trace": t.trace_hash,
        "source_file": "" if t.source is None else t.source.name, "source_run": t.run_id,
        "source_system": t.system, "source_task": t.task, "source_seed": t.seed,
        "source_meta": dict(t.meta), "window": t.window, "window_id": t.window_id,
        "entry_hash": t.entry_hash.hex(), "exit_hash": t.exit_hash.hex(),
        "channel": ch.name, "channel_id": ch.id, "channel_hash": ch.hash,
        "scorer": sc.name, "scorer_id": sc.id, "scorer_hash": sc.hash,
        "layout": layout, "wave": wave, "model": ch.model,
    }
    return Unit(_unit_key(t, ch, sc, layout, wave), payload, provenance)


def _check_counts(layouts: int | None, waves: int) -> None:
    if layouts is not None and (isinstance(layouts, bool) or not isinstance(layouts, int)
                                or layouts < 1):
        raise ValueError(f"`layouts` must be an int >= 1 or None (each channel's declared "
                         f"layouts); found {layouts!r}")
    if isinstance(waves, bool) or not isinstance(waves, int) or waves < 1:
        raise ValueError(f"`waves` must be an int >= 1 (acquisition waves); found {waves!r}")


def _resolve_channels(channels: Iterable[str]) -> list[tuple[Channel, Scorer]]:
    if isinstance(channels, str):
        channels = [channels]
    names = list(dict.fromkeys(channels))
    if not names:
        raise ValueError("`channels` must name at least one registered channel "
                         "(--channel NAME)")
    out = []
    versions: dict[str, str] = {}
    for name in names:
        ch = get_channel(name)
        twin = versions.setdefault(ch.hash, name)
        if twin != name:
            # A unit is keyed by its channel's version: two names of one version would be
            # one unit scored twice. Two lambdas on one line share their id and source.
            raise ValueError(
                f"channels {twin!r} and {name!r} have the same version (function "
                f"{ch.id}, arguments and source): agentlog cannot tell their scores apart. "
                "Define each channel's view as its own named function (not two lambdas on "
                "one line), or give them different arguments")
        out.append((ch, get_scorer(ch.scorer)))
    return out


def plan_channel_units(traces: TraceSource, channels: Iterable[str], *, window: str,
                       layouts: int | None = None, waves: int = 1) -> list[Unit]:
    """The units of a channel replay, in order: transition, channel, layout, wave.

    A list of ``iter_channel_units``: it holds every unit's payload (both frozen states of
    each transition) at once; a replay of a big trace iterates instead.

    Args:
        traces: a ``Trace``, a trace file, a folder or a list of them.
        channels: registered channel names.
        window: the window whose transitions are scored.
        layouts: score layouts ``0..layouts-1`` of every channel; None: each channel's
            declared ``layouts``.
        waves: acquisition waves ``0..waves-1``.

    Raises:
        agentlog.replay.NotRegisteredError: a channel, or the scorer it names, is not
            registered (the app module was not imported, or the name is wrong).
        agentlog.replay.WindowNotFoundError: the traces hold no completed ``window``.
        ValueError: bad ``layouts``/``waves``, or no channel.
    """
    return list(iter_channel_units(traces, channels, window=window, layouts=layouts,
                                   waves=waves))


def iter_channel_units(traces: TraceSource, channels: Iterable[str], *, window: str,
                       layouts: int | None = None, waves: int = 1) -> Iterator[Unit]:
    """The units of ``plan_channel_units``, in the same order, streamed.

    The traces are read as the units are taken, one transition at a time, so a replay
    (``run_units`` takes any iterable lazily) holds the states of the transitions in
    flight only. The arguments and the channels are checked at the call;
    ``WindowNotFoundError`` is raised when the traces turn out to hold no instance of
    ``window`` (at the first ``next``, after reading them).

    Raises:
        agentlog.replay.NotRegisteredError: a channel, or the scorer it names, is not
            registered.
        agentlog.replay.WindowNotFoundError: the traces hold no completed ``window``.
        ValueError: bad ``layouts``/``waves``, or no channel.
    """
    _check_counts(layouts, waves)
    resolved = _resolve_channels(channels)

    def units() -> Iterator[Unit]:
        for t in frozen_transitions(traces, window=window):
            for ch, sc in resolved:
                for layout in range(ch.layouts if layouts is None else layouts):
                    for wave in range(waves):
                        yield _unit(t, ch, sc, layout, wave)

    return units()


# ---------------------------------------------------------------------------- the job


_resolved: dict[tuple[str, str, str, str], tuple[Channel, Scorer]] = {}


def _channel_and_scorer(p: Mapping[str, Any]) -> tuple[Channel, Scorer]:
    # A replay asks for the same few (channel, scorer) versions thousands of times; a
    # version is fixed by its hash, so the pair resolved once serves every unit.
    key = (p["channel"], p["channel_hash"], p["scorer"], p["scorer_hash"])
    found = _resolved.get(key)
    if found is not None:
        return found
    ch = get_channel(p["channel"])
    sc = get_scorer(p["scorer"])
    for what, got, want in (("channel", ch, p["channel_hash"]),
                            ("scorer", sc, p["scorer_hash"])):
        if got.hash != want:
            raise ChannelVersionError(
                f"{what} {got.name!r} here has version {got.hash[:12]}…, but the replay was "
                f"planned with {want[:12]}…: this process imports different code for it "
                f"({got.id}). Run every worker with the same version of the app module")
    if len(_resolved) < 1024:  # bounded: versions come and go in a long-lived process
        _resolved[key] = (ch, sc)
    return ch, sc


def _payload_parts(unit: Unit) -> tuple[Channel, Scorer, FrozenTransition, int, int]:
    p = unit.payload
    ch, sc = _channel_and_scorer(p)
    source = p.get("source")
    t = FrozenTransition(
        source=None if source is None else Path(source), trace_hash="", run_id=p["run_id"],
        window_id=p["window_id"], window=p["window"], system=p["system"], task=p["task"],
        seed=p["seed"], meta=p["meta"], entry_hash=p["entry_hash"], exit_hash=p["exit_hash"],
        entry=p["entry"], exit=p["exit"], entry_problem=p.get("entry_problem"),
        exit_problem=p.get("exit_problem"))
    return ch, sc, t, p["layout"], p["wave"]


def _both_states(t: FrozenTransition) -> tuple[State, State]:
    before = t.before()
    after = State(side="after", value=t.decoded_exit(), entry=before.value, hash=t.exit_hash,
                  window=t.window, task=t.task, system=t.system, seed=t.seed, meta=t.meta)
    return before, after


def _view(ch: Channel, state: State) -> str | None:
    view = ch.view(state)
    if view is not None and not isinstance(view, str):
        raise TypeError(f"channel {ch.name!r}: view({state.side} state) must return a str or "
                        f"None (no added view); returned {type(view).__name__}")
    return view


def _kwargs(sc: Scorer, ch: Channel, layout: int, wave: int, unit: Unit,
            ctx: UnitContext) -> dict[str, Any]:
    if not sc.takes_context:
        return {}
    return {"context": ScoreContext(channel=ch, scorer=sc, layout=layout, wave=wave,
                                    cache=ctx.cache, unit=unit.key)}


def _score(sc: Scorer, ch: Channel, layout: int, wave: int, t: FrozenTransition,
           state: State, value: Any) -> UnitScore:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"scorer {sc.name!r} must return a float; returned "
                        f"{type(value).__name__} for the {state.side} state")
    return UnitScore(sc.name, float(value), channel=ch.name, layout=layout, wave=wave,
                     transition=t.window_id, state_hash=state.hash)


def score_channel_unit(unit: Unit, ctx: UnitContext) -> list[UnitScore]:
    """The job of one channel-replay unit: score x⁻ and x⁺ under its channel and layout.

    Model calls inside use draw index = the wave and the channel's name in their cache key
    (``adapters.call_options``), so each wave is its own acquisition.

    Raises:
        agentlog.replay.StateDecodeError: a state cannot be decoded (this unit fails).
        ChannelVersionError: the channel or scorer here differs from the planned version.
        TypeError: a view that returns neither str nor None, a scorer that returns no
            float, or an async scorer (``ascore_channel_unit`` runs those).
    """
    ch, sc, t, layout, wave = _payload_parts(unit)
    if sc.is_async:
        raise TypeError(f"scorer {sc.name!r} is async: run the unit with "
                        "ascore_channel_unit")
    out = []
    with call_options(draw=wave, channel=ch.name):
        for state in _both_states(t):
            view = _view(ch, state)
            value = sc.fn(state, view, layout, **_kwargs(sc, ch, layout, wave, unit, ctx))
            out.append(_score(sc, ch, layout, wave, t, state, value))
    return out


async def ascore_channel_unit(unit: Unit, ctx: UnitContext) -> list[UnitScore]:
    """The async twin of ``score_channel_unit``: awaits an async scorer; a sync scorer runs
    in a worker thread (context copied), so it never blocks the event loop."""
    ch, sc, t, layout, wave = _payload_parts(unit)
    out = []
    with call_options(draw=wave, channel=ch.name):
        for state in _both_states(t):
            view = _view(ch, state)
            kwargs = _kwargs(sc, ch, layout, wave, unit, ctx)
            if sc.is_async:
                value = await sc.fn(state, view, layout, **kwargs)
            else:
                value = await asyncio.to_thread(sc.fn, state, view, layout, **kwargs)
            if inspect.isawaitable(value):
                value = await value
            out.append(_score(sc, ch, layout, wave, t, state, value))
    return out


# ---------------------------------------------------------------------------- the replay


def _prepare(traces: TraceSource, channels: Iterable[str], window: str,
             app: str | ModuleType | None, layouts: int | None, waves: int,
             start: Path | None) -> tuple[Iterator[Unit], str, str]:
    channels = [channels] if isinstance(channels, str) else list(channels)
    paths: list[Path] = []
    if isinstance(traces, str | os.PathLike):
        paths = [Path(traces)]
    elif not isinstance(traces, Trace):
        paths = [Path(p) for p in traces if isinstance(p, str | os.PathLike)]
    module = resolve_app(app, traces=paths, start=start)
    units = iter_channel_units(traces, channels, window=window, layouts=layouts,
                               waves=waves)
    is_async = any(sc.is_async for _, sc in _resolve_channels(channels))
    return units, module.__name__, AJOB if is_async else JOB


def replay_channels(
    traces: TraceSource,
    channels: Iterable[str],
    *,
    window: str,
    out: str | os.PathLike[str],
    app: str | ModuleType | None = None,
    layouts: int | None = None,
    waves: int = 1,
    cache: ModelCache | str | os.PathLike[str] | None = None,
    frozen: bool = False,
    execution: ExecutionOptions | None = None,
    start: Path | None = None,
    **legacy: Any,
) -> RunSummary:
    """Score x⁻ and x⁺ of every transition of ``window`` under each channel; write ``out``.

    Args:
        traces: the recorded traces (a ``Trace``, a file, a folder or a list of them).
        channels: registered channel names (``--channel``), e.g. ``["direct", "quote"]``.
        window: the window whose transitions are scored (``--window``).
        out: the output trace, appended to; units already sealed there are skipped.
        app: the module that registers the channels and scorers (``--app``: its name,
            or the module itself); else ``[tool.agentlog] app`` in the nearest
            ``pyproject.toml``, else ``$AGENTLOG_APP`` (``resolve_app``).
        layouts: layouts ``0..layouts-1`` of every channel; None: each channel's declared.
        waves: acquisition waves ``0..waves-1`` (repeat scoring passes of the same cells).
        cache: the exact-input model cache (a ``ModelCache`` or its path) that scorers'
            model calls go through (``ScoreContext.cache``).
        frozen: every model call must be served by ``cache``; a miss fails its unit with
            ``agentlog.CacheMiss``.
        execution: where and how the units run (``ExecutionOptions``; default
            ``ExecutionOptions()``: 8 units in flight, local, sync scorers in threads).
        start: where to look for ``pyproject.toml`` (default: the working folder).
        **legacy: ``ExecutionOptions`` fields given one by one (``concurrency=4``) work
            for one release, with a ``DeprecationWarning``.

    Returns:
        The ``RunSummary``: units total / skipped / done / failed, the failures, cache
        hits, misses and live calls.

    Raises:
        agentlog.replay.AppNotGivenError, agentlog.replay.AppImportError: no app, or it
            does not import.
        agentlog.replay.NotRegisteredError: a channel or its scorer is not registered.
        agentlog.replay.WindowNotFoundError: the traces hold no completed ``window``.
    """
    opts = execution_options("replay_channels", execution, legacy, ExecutionOptions())
    units, module, job = _prepare(traces, channels, window, app, layouts, waves, start)
    return run_units(units, job, out=out, app=module, cache=cache, frozen=frozen,
                     execution=opts)


async def areplay_channels(
    traces: TraceSource,
    channels: Iterable[str],
    *,
    window: str,
    out: str | os.PathLike[str],
    app: str | ModuleType | None = None,
    layouts: int | None = None,
    waves: int = 1,
    cache: ModelCache | str | os.PathLike[str] | None = None,
    frozen: bool = False,
    execution: ExecutionOptions | None = None,
    start: Path | None = None,
    **legacy: Any,
) -> RunSummary:
    """The async twin of ``replay_channels`` (same arguments, same result)."""
    opts = execution_options("areplay_channels", execution, legacy, ExecutionOptions())
    units, module, job = _prepare(traces, channels, window, app, layouts, waves, start)
    return await arun_units(units, job, out=out, app=module, cache=cache, frozen=frozen,
                            execution=opts)


# ---------------------------------------------------------------------------- re-derivation


@dataclass(frozen=True)
class RederivedReplay:
    """A channel replay's output checked against the traces it replays: did it run, and do
    its scores come out the same when derived again from the sealed states?

    Attributes:
        out: the replay's output trace.
        window: the window replayed.
        channels: the channels replayed.
        planned: units the traces' transitions need: the design the output holds
            (layouts 0..L−1 of each channel, L its largest layout there plus one; waves
            0..W−1).
        sealed: of them, sealed ok in ``out``.
        failed: sealed as failures only.
        missing: not in ``out`` at all (the replay did not reach them).
        rederived: sealed units whose scores were derived again.
        mismatched: re-derived units whose scores differ from the stored ones.
        problems: the first few problems, one line each.
    """

    out: str
    window: str | None
    channels: tuple[str, ...]
    planned: int
    sealed: int
    failed: int
    missing: int
    rederived: int
    mismatched: int
    problems: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready)."""
        return {"out": self.out, "window": self.window, "channels": list(self.channels),
                "planned": self.planned, "sealed": self.sealed, "failed": self.failed,
                "missing": self.missing, "rederived": self.rederived,
                "mismatched": self.mismatched, "problems": list(self.problems)}


def _same(stored: Sequence[UnitScore], again: Sequence[UnitScore], tolerance: float) -> bool:
    if len(stored) != len(again):
        return False
    for a, b in zip(stored, again, strict=True):
        if (a.name, a.channel, a.layout, a.wave, a.transition, a.state_hash) != (
                b.name, b.channel, b.layout, b.wave, b.transition, b.state_hash):
            return False
        if abs(float(a.value) - float(b.value)) > tolerance:
            return False
    return True


def rederive_channel_replay(
    traces: TraceSource, out: str | os.PathLike[str], *, app: str | ModuleType | None = None,
    window: str | None = None, channels: Iterable[str] | None = None,
    cache: ModelCache | str | os.PathLike[str] | None = None, tolerance: float = 0.0,
    start: Path | None = None,
) -> RederivedReplay:
    """Check that a channel replay of ``traces`` ran into ``out`` and re-derive its scores.

    Every unit the traces' transitions need is looked up in ``out``; each one sealed ok is
    scored again, in this process, from the sealed states (the job the replay ran), and
    its scores compared with the stored ones (within ``tolerance``; 0: exactly). With
    ``cache`` the scorers' model calls are served from it and a miss is an error (a
    re-derivation never calls a model live). Nothing is written.

    Args:
        traces: the recorded traces the replay read.
        out: the replay's output trace.
        app: the module that registers the channels (as for ``replay_channels``).
        window: the window replayed (default: the one the output's units name).
        channels: the channels to check (default: every channel in the output).
        cache: the model cache (``ModelCache`` or path), opened read-only.
        tolerance: the largest absolute difference counted as equal.
        start: where to look for ``pyproject.toml``.

    Raises:
        ValueError: the output names several windows and ``window`` is not given.
        agentlog.replay.AppNotGivenError, AppImportError, NotRegisteredError: as
            ``replay_channels``.
    """
    from agentlog.adapters import ModelCache

    from ._unit_output import read_units

    stored = {k: u for k, u in read_units(out).items()
              if u.provenance.get("kind") == CHANNEL_REPLAY_KIND}
    windows = sorted({str(u.provenance.get("window")) for u in stored.values()})
    if window is None and len(windows) > 1:
        raise ValueError(f"{out} replays several windows ({', '.join(windows)}); pass "
                         "window= to pick one")
    window = window if window is not None else (windows[0] if windows else None)
    in_window = [u for u in stored.values() if u.provenance.get("window") == window]
    names = (list(dict.fromkeys(channels)) if channels is not None
             else sorted({str(u.provenance["channel"]) for u in in_window}))
    if window is None or not names or not in_window:
        return RederivedReplay(str(out), window, tuple(names), 0, 0, 0, 0, 0, 0,
                               (f"{out} holds no channel-replay unit"
                                + (f" of window {window!r}" if window else ""),))
    waves = 1 + max(int(u.provenance["wave"]) for u in in_window)
    plans: list[Iterator[Unit]] = []  # streamed: one unit's states in memory at a time
    for name in names:  # each channel with the layouts the output holds of it
        held = [int(u.provenance["layout"]) for u in in_window
                if u.provenance["channel"] == name]
        layouts = 1 + max(held) if held else None
        plans.append(_prepare(traces, [name], window, app, layouts, waves, start)[0])
    planned = 0
    opened = (ModelCache(cache, mode="read-only") if isinstance(cache, str | os.PathLike)
              else cache)
    sealed = failed = missing = mismatched = 0
    problems: list[str] = []
    try:
        for unit in itertools.chain.from_iterable(plans):
            planned += 1
            found = stored.get(unit.key)
            if found is None:
                missing += 1
                continue
            if found.status != "ok":
                failed += 1
                if len(problems) < 5:
                    problems.append(f"unit {unit.key[:12]}… failed: {found.error_type}: "
                                    f"{found.error_message}")
                continue
            sealed += 1
            ctx = UnitContext(unit.key, 1, opened, frozen=opened is not None)
            again = _derive_again(unit, ctx)
            if not _same(found.scores, again, tolerance):
                mismatched += 1
                if len(problems) < 5:
                    problems.append(
                        f"unit {unit.key[:12]}… (channel {unit.payload['channel']!r}, layout "
                        f"{unit.payload['layout']}, wave {unit.payload['wave']}): stored "
                        f"{[s.value for s in found.scores]}, derived again "
                        f"{[s.value for s in again]}")
    finally:
        if opened is not None and opened is not cache:
            opened.close()
    return RederivedReplay(str(out), window, tuple(names), planned, sealed, failed,
                           missing, sealed, mismatched, tuple(problems))


def _derive_again(unit: Unit, ctx: UnitContext) -> list[UnitScore]:
    _, sc = _channel_and_scorer(unit.payload)
    if sc.is_async:
        return asyncio.run(ascore_channel_unit(unit, ctx))
    return score_channel_unit(unit, ctx)
