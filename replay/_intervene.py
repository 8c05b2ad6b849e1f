"""``intervene``: re-enter sealed window instances under the arms of a design.

Each sealed instance of ``window`` in the source traces is re-entered once per (arm,
replicate seed): the decorated function the app registered is called again with the
decoded entry (``reenter_arguments``), in a fresh run recorded with the replicate's seed
(replicate 0: the recorded seed), every random stream started at its recorded step
(``resume_streams``), under the arm's steer (``agentlog.reentry.steering``). Every arm of
a replicate shares its seed, so the arms see the same Gumbel draws and stop uniforms:
common random numbers ([SSC] Appendix D).

One unit of ``run_units`` is one (source window instance, arm, replicate); a re-run
skips the units already sealed. Output layout under ``out``:

* ``out/units.zst``: the engine's output, one run per unit whose ``meta["agentlog.replay"]``
  is the unit's provenance — ``factors`` ({"selection": …, "stopping": …}), ``arm``,
  ``arm_hash``, ``replicate``, ``seed``, ``mode``, ``task``, ``system``, ``source_run``,
  ``source_trace``, ``window``, ``window_name``, ``arm_trace`` — and whose scores are the
  arm run's ``Score`` records (``cess.effects_from_traces(out, outcome=…)`` reads them);
* ``out/arms/<unit key>.zst``: the arm run itself (the re-entered window with its
  selections, continuations, tool calls and scores), ``meta["agentlog.replay.arm"]``
  holding the same provenance and the source run's own meta beside it, so
  ``cess.from_traces(out / "arms", ...)`` reads the arms as it reads recorded runs.

Modes say what may run live; the output records the mode (``_modes``). ``"frozen"``
(default): every model call of the re-entered window is served from the source trace's
recorded calls or the user's ``cache=``, every ``@al.tool`` call from the recorded tool
calls; a miss raises ``agentlog.CacheMiss`` (naming the request and the differing field)
and the unit fails, nothing runs live. ``"branch"``: frozen up to the first decision whose
outcome the arm changed (the branch point), live after it. ``"rerun"``: everything live
(for an agent whose model and tools are deterministic, as the bundled one).

Example::

    from agentlog.replay import Design, intervene
    from agentlog.replay.interventions import FixedHorizon, Uniform

    run = intervene("runs/", window="retrieval", app="my_agent", mode="branch",
                    arms=Design(selection=["agent", Uniform()],
                                stopping=["adaptive", FixedHorizon(4)], seeds=range(3)),
                    scores=lambda found: {"opened_mean": sum(found.y) / len(found.y)},
                    out="arms/")
    cess.effects_from_traces("arms/", outcome="opened_mean")
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import agentlog as al
from agentlog import ReplayError, Trace
from agentlog.records import Score, WindowView, encode_artifact
from agentlog.reentry import steering
from agentlog.registry import resolve

from ._app import resolve_app
from ._design import Arm, Design
from ._executor import run_units
from ._modes import serving_mode
from ._options import ExecutionOptions, execution_options
from ._reentry import (
    call_window,
    reenter_arguments,
    resume_streams,
    stream_offsets,
    window_function,
)
from ._units import RunSummary, Unit, UnitContext, UnitScore

__all__ = ["ARM_META_KEY", "MODES", "InterventionRun", "intervene", "reenter_job"]

Mode = Literal["frozen", "branch", "rerun"]
MODES = ("frozen", "branch", "rerun")
_INTERVENE_DEFAULT = ExecutionOptions(concurrency=4, progress=False)
ARM_META_KEY = "agentlog.replay.arm"  # the arm run's provenance (not a unit of the engine)
UNITS_FILE = "units.zst"
ARMS_DIR = "arms"
JOB = "agentlog.replay:reenter_job"  # its public name: written into every output unit

ScoreFn = Callable[[Any], Mapping[str, float]]


@dataclass(frozen=True)
class _Call:
    """What one ``intervene`` call hands its jobs in this process (never in a payload:
    steers, secrets and instance factories are objects, secrets must not be stored)."""

    arms: Mapping[str, Arm]
    secrets: Mapping[str, Any] | None
    instance: Any
    scores: ScoreFn | None
    cache: Any = None


_calls: dict[str, _Call] = {}
_calls_lock = threading.Lock()
# Source traces read once per process, by path, each checked against the file's identity
# (device, inode, size, mtime) and the unit's own run (its run id and digest) before it
# serves a unit: a file re-recorded at the same path is read again, never served stale.
_sources: dict[str, _SourceEntry] = {}
_TRACE_CACHE_ENTRIES = 16
_TRACE_CACHE_BYTES = 256 << 20  # of trace files; the newest source is kept whatever its size


def _file_identity(path: str) -> tuple[int, int, int, int]:
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True)
class _SourceEntry:
    identity: tuple[int, int, int, int]
    trace: Trace

    def holds(self, run: int, run_id: str, digest: str | None) -> bool:
        """Whether the trace's run ``run`` is the run the unit was made from."""
        for view in self.trace.runs:
            if view.run == run:
                end_digest = None if view.end is None or view.end.digest is None else (
                    view.end.digest.hex())
                return (view.start is not None and view.start.run_id == run_id
                        and end_digest == digest)
        return False


@dataclass(frozen=True)
class InterventionRun:
    """What ``intervene`` did.

    Attributes:
        out: the output folder (``units.zst`` and ``arms/``).
        units: units asked for: source window instances × arms × replicates.
        instances: source window instances found.
        arms: the arms, in design order.
        mode: the mode the units ran in.
        summary: the engine's ``RunSummary`` (done, skipped, failed, …).
    """

    out: Path
    units: int
    instances: int
    arms: tuple[Arm, ...]
    mode: str
    summary: RunSummary


def _source_files(traces: Any) -> list[Path]:
    items = [traces] if isinstance(traces, str | os.PathLike) else list(traces)
    if not items:
        raise ValueError("`traces` names no trace; pass the recorded trace files or folders")
    out: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = sorted(p.rglob("*.zst"))
            if not found:
                raise ValueError(f"{p}: the folder holds no *.zst traces; pass the folder "
                                 "the runs were recorded into")
            out.extend(found)
        elif p.exists():
            out.append(p)
        else:
            raise ValueError(f"{p}: no such trace file or folder")
    # A file named twice (itself and its folder, say) holds the same instances once.
    seen: set[Path] = set()
    return [p for p in out if not (p.resolve() in seen or seen.add(p.resolve()))]  # type: ignore[func-returns-value]


def _unit_key(run_id: str, window: int, arm: Arm, replicate: int, mode: str) -> str:
    identity = encode_artifact([run_id, window, arm.hash, replicate, mode],
                               what="unit identity")
    return hashlib.sha256(identity).hexdigest()[:40]


def intervene(
    traces: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    window: str,
    arms: Design | Sequence[Arm],
    out: str | os.PathLike[str],
    app: str | None = None,
    mode: Mode = "frozen",
    seeds: Iterable[int] | None = None,
    scores: ScoreFn | None = None,
    secrets: Mapping[str, Any] | None = None,
    instance: Any = None,
    cache: Any = None,
    execution: ExecutionOptions | None = None,
    **legacy: Any,
) -> InterventionRun:
    """Re-enter every sealed instance of ``window`` under every arm and replicate seed.

    Args:
        traces: the recorded traces (files or folders).
        window: the window name to re-enter (``"retrieval"``).
        arms: a ``Design`` (its arms and replicate seeds) or a list of ``Arm``.
        out: the output folder (created): ``units.zst`` and ``arms/``.
        app: the module that registers the window's function (``resolve_app``).
        mode: ``"frozen"`` (default), ``"branch"`` or ``"rerun"``; see the module docs.
        seeds: replicate indices; default the design's (``(0,)`` for a list of arms).
        scores: a function of the window's return value giving ``{name: value}``, recorded
            as run-level scores of each arm run (e.g. the Opened Mean); the window's own
            ``al.score`` readouts are kept too.
        secrets: values of the window's secret arguments (else
            ``$AGENTLOG_SECRET_<NAME>``); never stored.
        instance: the object (or a factory of the ``WindowView``) a method window binds.
        cache: a ``ModelCache`` serving model calls besides the recorded ones: in
            ``frozen`` (and ``branch`` before its branch point) only looked up, never
            fetched into; after the branch point and in ``rerun`` it serves and stores as
            usual. Local executor only.
        execution: where and how the units run (``ExecutionOptions``; default
            ``ExecutionOptions(concurrency=4, progress=False)``). On Ray
            (``executor="ray"``) each unit carries its arm as plain data (every steer's
            ``interventions.identity``: a worker rebuilds it from its registered class and
            refuses when the identity hash differs), ``scores`` and ``instance`` must be
            module-level functions of the app, and secrets come from
            ``$AGENTLOG_SECRET_<NAME>`` where the workers run.
        **legacy: ``ExecutionOptions`` fields given one by one (``concurrency=2``) work
            for one release, with a ``DeprecationWarning``.

    Returns:
        An ``InterventionRun``.

    Raises:
        ValueError: an unknown mode; no sealed instance of ``window``; bad traces; on
            Ray, an arm, ``scores``, ``instance`` or ``cache`` a worker cannot rebuild.
            Each message says what to do. A unit whose call misses in ``frozen``/``branch``
            does not raise here: it is recorded as failed (``CacheMiss`` in
            ``summary.failures``), and a re-run retries it.
        TraceFormatError: a source trace that cannot be read. The units are made as the
            engine takes them, one source trace read at a time (a study never holds all
            its units), so the units of the traces before it have run and are written:
            a re-run after the fix skips them.
        AppNotGivenError, AppImportError: the app module (``resolve_app``).
    """
    if mode not in MODES:
        raise ValueError(f"`mode` must be one of {', '.join(MODES)}; found {mode!r}")
    opts = execution_options("intervene", execution, legacy, _INTERVENE_DEFAULT)
    executor = opts.executor
    files = _source_files(traces)
    arm_list = tuple(arms.arms() if isinstance(arms, Design) else arms)
    if not arm_list:
        raise ValueError("`arms` is empty; give a Design or a list of Arm")
    specs = {a.hash: _arm_spec(a, executor) for a in arm_list}
    scores_id = _function_id(scores, "scores", executor)
    instance_id = _function_id(instance, "instance", executor)
    if executor == "ray" and secrets:
        raise ValueError("executor='ray': secrets= are values of this process and never "
                         "cross to workers; set $AGENTLOG_SECRET_<NAME> where the workers "
                         "run instead")
    if executor == "ray" and cache is not None:
        raise ValueError("executor='ray': cache= is an object of this process and does not "
                         "cross to workers; use executor='local', or leave cache= out (the "
                         "source traces still serve every recorded call)")
    reps = tuple(seeds) if seeds is not None else (
        arms.replicates if isinstance(arms, Design) else (0,))
    app = resolve_app(app, traces=files).__name__  # the flag, pyproject or $AGENTLOG_APP
    out_dir = Path(out)
    (out_dir / ARMS_DIR).mkdir(parents=True, exist_ok=True)
    token = uuid.uuid4().hex
    count = _Count()
    units = _units(files, window, arm_list, reps, mode, out_dir, token, specs, scores_id,
                   instance_id, count, app)
    # Made as the engine takes them, one source trace read at a time: a study of many
    # window instances x arms x seeds never holds its units all at once. The first is
    # made now, so that a window with no sealed instance is refused before anything runs.
    first = next(units, None)
    if first is None:
        raise ValueError(f"no sealed instance of window {window!r} in {len(files)} trace(s) "
                         f"({files[0]}{' …' if len(files) > 1 else ''}); check the window "
                         "name (agentlog inspect lists them)")
    with _calls_lock:
        _calls[token] = _Call({a.hash: a for a in arm_list}, secrets, instance, scores, cache)
    try:
        summary = run_units(itertools.chain((first,), units), JOB, out=out_dir / UNITS_FILE,
                            app=app, execution=opts)
    finally:
        with _calls_lock:
            _calls.pop(token, None)
    return InterventionRun(out=out_dir, units=count.units, instances=count.instances,
                           arms=arm_list, mode=mode, summary=summary)


@dataclass
class _Count:
    units: int = 0
    instances: int = 0


def _units(files: list[Path], window: str, arm_list: tuple[Arm, ...], reps: tuple[int, ...],
           mode: str, out_dir: Path, token: str, specs: Mapping[str, Any],
           scores_id: str | None, instance_id: str | None, count: _Count,
           app: str | None) -> Iterator[Unit]:
    """One unit per (sealed instance of ``window``, arm, replicate), trace by trace."""
    from ._design import replicate_seed

    for path in files:
        trace = al.read(path)
        runs = {r.run: r for r in trace.runs}
        for view in trace.windows(window):
            if view.exit is None or view.exit.status != 0:
                continue  # not sealed, or failed: nothing recorded to re-enter
            start = runs[view.run].start if view.run in runs else None
            if start is None:
                continue
            end = runs[view.run].end
            digest = None if end is None or end.digest is None else end.digest.hex()
            count.instances += 1
            for arm in arm_list:
                for r in reps:
                    key = _unit_key(start.run_id, view.window, arm, int(r), mode)
                    prov = {
                        "factors": dict(arm.factors), "arm": arm.name, "arm_hash": arm.hash,
                        "replicate": int(r), "seed": replicate_seed(start.seed, int(r)),
                        "mode": mode, "task": start.task, "system": start.system,
                        "source_run": start.run_id,
                        "source_trace": str(path), "window": view.window,
                        "window_name": window, "arm_trace": f"{ARMS_DIR}/{key}.zst",
                    }
                    count.units += 1
                    yield Unit(key, payload={
                        "token": token, "source": str(path), "run": view.run,
                        "run_id": start.run_id, "run_digest": digest, "window": view.window,
                        "arm_hash": arm.hash, "seed": prov["seed"],
                        "arm_trace": str(out_dir / ARMS_DIR / f"{key}.zst"),
                        "arm": specs[arm.hash], "scores": scores_id, "instance": instance_id,
                        "mode": mode, "app": app,
                    }, provenance=prov)
        del trace  # before the next file is read


def _source(path: str, run: int, run_id: str, digest: str | None) -> Trace:
    """The source trace at ``path`` holding run ``run`` with this id and digest.

    Served from this process's cache only while the file has the identity it had when it
    was read and the cached run is the unit's own; otherwise read again.

    Raises:
        ValueError: the file no longer holds the unit's run (re-recorded or edited since
            the units were made).
    """
    try:
        identity = _file_identity(path)
    except OSError as exc:
        raise ValueError(f"{path}: the source trace is gone ({exc.strerror}); it was there "
                         "when the units were made: restore it, or re-run intervene") from exc
    with _calls_lock:
        entry = _sources.get(path)
    if entry is not None and entry.identity == identity and entry.holds(run, run_id, digest):
        return entry.trace
    entry = _SourceEntry(identity, al.read(path))
    if not entry.holds(run, run_id, digest):
        raise ValueError(
            f"{path}: run {run} is no longer run {run_id} as it was when the units were "
            "made (the file was re-recorded or edited meanwhile); re-run intervene on the "
            "file as it is now")
    with _calls_lock:
        # Bounded: a replay reads a few sources at a time, and its units come source by
        # source, so the newest source stays (a unit rereading a large trace would cost
        # more than holding it) and older ones go, oldest first, past the bounds.
        _sources.pop(path, None)
        while _sources and (len(_sources) >= _TRACE_CACHE_ENTRIES or sum(
                e.identity[2] for e in _sources.values()) + identity[2] > _TRACE_CACHE_BYTES):
            del _sources[next(iter(_sources))]
        _sources[path] = entry
    return entry.trace


def _view(trace: Trace, run: int, window: int) -> WindowView:
    for view in trace.windows():
        if view.run == run and view.window == window:
            return view
    raise ValueError(f"{trace.path}: no window {window} in run {run}; the source trace "
                     "changed since the units were made: re-run intervene")


def reenter_job(unit: Unit, ctx: UnitContext) -> list[UnitScore]:
    """Re-enter one window instance under one arm and seed; return the arm run's scores."""
    p = unit.payload
    with _calls_lock:
        call = _calls.get(p["token"])
    if call is None:  # a worker of another process (Ray): rebuild from plain data
        call = _rebuilt(p)
    arm = call.arms[p["arm_hash"]]
    trace = _source(p["source"], p["run"], p["run_id"], p.get("run_digest"))
    view = _view(trace, p["run"], p["window"])
    start = next(r.start for r in trace.runs if r.run == view.run)
    assert start is not None
    fn = window_function(view, app=p.get("app"))
    args, kwargs = reenter_arguments(view, secrets=call.secrets, instance=call.instance,
                                     function=fn)
    offsets = stream_offsets(view, trace)
    meta = {k: v for k, v in start.meta.items() if k not in ("agentlog.replay", ARM_META_KEY)}
    meta[ARM_META_KEY] = dict(unit.provenance)
    path = Path(p["arm_trace"])
    mode = str(p["mode"])  # no default: a unit never runs live unless it says so
    # The source run's noise generator: a trace recorded before a generator change still
    # replays with the draws it was recorded with.
    with al.record(path, mode="w", system=start.system, seed=int(p["seed"]), task=start.task,
                   meta=meta, generator=start.generator), \
            resume_streams(offsets, generator=start.generator), \
            serving_mode(mode, view=view, steer=arm.steer,
                         cache=call.cache) as serving, steering(serving.steer):
        result = call_window(fn, args, kwargs, where=f"window {view.name!r}")
        serving.check(f"window {view.name!r} of run {start.run_id} under arm {arm.name}")
        if call.scores is not None:
            for name, value in call.scores(result).items():
                al.score(name, float(value))
    out: list[UnitScore] = []
    arm_trace = al.read(path)
    if not arm_trace.windows(view.name):
        raise ReplayError(
            f"re-entering window {view.name!r} of run {start.run_id} called {fn!r}, which "
            f"recorded no window {view.name!r} in the arm run: the call returned "
            f"{type(result).__name__} without running the window. Re-entry runs sync and "
            "async functions, generators and async generators; register the window on the "
            "function the agent calls")
    for rec in arm_trace.records:
        if type(rec) is Score and math.isfinite(rec.value):
            out.append(UnitScore(rec.name, rec.value, channel=rec.channel, layout=rec.layout,
                                 wave=rec.wave, transition=rec.transition,
                                 state_hash=rec.state_hash))
    return out


def _arm_spec(arm: Arm, executor: str) -> dict[str, Any]:
    """The arm as plain data a worker rebuilds it from: each factor's steer identity
    (``interventions.identity``: registered class, constructor parameters, hash)."""
    from . import interventions

    spec: dict[str, Any] = {"name": arm.name, "factors": dict(arm.factors)}
    steer = arm.steer
    for factor in ("selection", "stopping"):
        level = getattr(steer, factor, None) if steer is not None else None
        if level is None:
            spec[factor] = None
        elif isinstance(level, interventions.Steer):
            spec[factor] = interventions.identity(level)
        elif executor == "ray":
            raise ValueError(
                f"executor='ray': the {factor} level {level!r} of arm {arm.name} is not a "
                "registered intervention, so a worker cannot rebuild it; derive it from "
                "agentlog.replay.interventions.Steer, or use executor='local'")
        else:
            spec[factor] = None  # served by this process's objects only
    return spec


def _function_id(obj: Any, what: str, executor: str) -> str | None:
    """``module:qualname`` of a module-level function (a worker imports it), else None
    (served by this process only; refused for Ray)."""
    if obj is None:
        return None
    module, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
    ok = bool(module) and "<" not in qual and callable(obj)
    if ok:
        try:
            ok = resolve(f"{module}:{qual}", what="function") is obj
        except (ImportError, AttributeError):
            ok = False
    if ok:
        return f"{module}:{qual}"
    if executor == "ray":
        raise ValueError(f"executor='ray': `{what}` must be a module-level function a worker "
                         f"can import (found {obj!r}); define it in your app module")
    return None


def _rebuilt(payload: Mapping[str, Any]) -> _Call:
    """The arm, scores and instance of a unit from its plain data, in a worker process.

    Each steer is rebuilt from its registered class and parameters, and its identity hash
    checked against the one the driver computed: a worker whose code differs refuses.
    """
    from . import interventions
    from ._design import _ArmSteer

    spec = payload["arm"]
    levels: dict[str, Any] = {}
    for factor in ("selection", "stopping"):
        ident = spec.get(factor)
        if ident is None:
            levels[factor] = None
            continue
        cls = interventions.STEERS.get(ident["id"]).obj
        steer = cls(**ident["params"])
        if interventions.identity(steer)["hash"] != ident["hash"]:
            raise RuntimeError(
                f"the {factor} steer {ident['name']!r} rebuilt in this worker has another "
                "identity than the driver's (its code or parameters differ): install the "
                "same agentlog and app version on every worker")
        levels[factor] = steer
    own = levels["selection"] is None and levels["stopping"] is None
    steer_obj = None if own else _ArmSteer(spec["name"], levels["selection"],
                                           levels["stopping"])
    arm = Arm(name=spec["name"], factors=spec["factors"], hash=payload["arm_hash"],
              steer=steer_obj)
    scores = resolve(payload["scores"], what="function") if payload.get("scores") else None
    instance = (resolve(payload["instance"], what="function") if payload.get("instance")
                else None)
    return _Call({arm.hash: arm}, None, instance, scores)
