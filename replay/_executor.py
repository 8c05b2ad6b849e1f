"""``run_units`` / ``arun_units``: run replay units with bounded concurrency, resumably.

The engine owns the output trace (layout: ``agentlog.replay._unit_output``). It reads the
keys already sealed there, runs every other unit through the job (at most
``concurrency`` at once; async jobs on the event loop, sync jobs in a context-copying
thread pool), retries transient failures (``RetryPolicy``), and appends each finished
unit as a sealed run. Interrupted (Ctrl-C, task cancellation), it stops starting units,
writes the ones that finished, closes every run it opened and re-raises: the output is
a valid trace and a re-run does the rest. A process killed outright (SIGKILL, SIGTERM)
loses only the units not yet written; the re-run first sets aside the run it may have
cut short (``set_aside_cut_runs``), so the finished output verifies.

Examples:
    >>> import agentlog as al
    >>> from agentlog.replay import ExecutionOptions, Unit, UnitScore, read_units, run_units
    >>> def square(unit, ctx):
    ...     return [UnitScore("sq", unit.payload["x"] ** 2)]
    >>> units = [Unit(f"u{i}", {"x": i}) for i in range(3)]
    >>> quiet = ExecutionOptions(progress=False)
    >>> first = run_units(units, square, out="agentlog-units-doc.zst", execution=quiet)
    >>> again = run_units(units, square, out="agentlog-units-doc.zst", execution=quiet)
    >>> (first.done, again.done, again.skipped)
    (3, 0, 3)
    >>> sorted((k, u.scores[0].value) for k, u in read_units("agentlog-units-doc.zst").items())
    [('u0', 0.0), ('u1', 1.0), ('u2', 4.0)]
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import itertools
import os
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from pathlib import Path
from types import ModuleType
from typing import Any

from agentlog.adapters import ModelCache, ObservedCalls, observe_calls
from agentlog.context import copy_context_executor
from agentlog.retry import RetryPolicy, is_transient, retry_after

from ._app import app_name
from ._options import ExecutionOptions, execution_options
from ._progress import Progress
from ._unit_output import Outcome, OutputWriter, read_units, sealed_units, set_aside_cut_runs
from ._units import (
    RunSummary,
    Unit,
    UnitContext,
    UnitFailure,
    check_scores,
    decode_unit,
    encode_unit,
    is_async_job,
    resolve_job,
)

__all__ = ["arun_units", "run_units"]

_BATCH_MAX = 256  # units written per batch at most
_BATCH_DELAY = 0.02  # seconds a finished unit waits for others to share its batch


def _error_text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception as err:  # a broken __str__ must not lose the failure
        return f"<str() of {type(exc).__name__} raised {type(err).__name__}>"


async def run_attempts(
    fn: Callable[..., Any], unit: Unit, *, is_async: bool, pool: Executor,
    policy: RetryPolicy, rng: random.Random, cache: ModelCache | None, frozen: bool,
    timeout: float | None,
) -> Outcome:
    """One unit, attempt after attempt, as an ``Outcome`` (never raises but cancellation)."""
    loop = asyncio.get_running_loop()
    sleep = policy.sleep or asyncio.sleep
    attempt = 0
    live = 0
    while True:
        attempt += 1
        ctx = UnitContext(unit.key, attempt, cache, frozen=frozen)
        # The model calls of this attempt, by who served them: stored with the unit's
        # provenance, so a replayed score names the model revision behind it. Set here, in
        # the task's context, it is seen by a sync job's worker thread too (the executor
        # copies the context) and by the tasks an async job starts.
        with observe_calls() as seen:
            try:
                if is_async:
                    pending: Awaitable[Any] = fn(unit, ctx)
                else:
                    pending = loop.run_in_executor(pool, fn, unit, ctx)
                result = await (pending if timeout is None
                                else asyncio.wait_for(pending, timeout))
                if inspect.isawaitable(result):  # a sync callable that returned a coroutine
                    result = await (result if timeout is None
                                    else asyncio.wait_for(result, timeout))
                scores = check_scores(result, unit.key)
                return Outcome(unit.key, _with_serving(unit.provenance, seen), attempt,
                               scores, live_calls=live + ctx.live_calls)
            except Exception as exc:
                live += ctx.live_calls
                transient = is_transient(exc)
                if not (transient and attempt < policy.max_attempts):
                    return Outcome(unit.key, _with_serving(unit.provenance, seen), attempt,
                                   error_type=type(exc).__qualname__, message=_error_text(exc),
                                   transient=transient, live_calls=live)
                delay = policy.delay(attempt, rng=rng, retry_after=retry_after(exc))
        await sleep(delay)


def _with_serving(provenance: Mapping[str, Any], seen: ObservedCalls) -> Mapping[str, Any]:
    """``provenance`` plus ``"serving"``: who served the attempt's model calls, when any."""
    served = seen.served_by
    if not served and not seen.dropped:
        return provenance  # no model call: the output stays what it was without one
    serving: dict[str, Any] = {"served_by": [s.to_dict() for s in served]}
    if seen.dropped:
        serving["uncounted_calls"] = seen.dropped
    return {**provenance, "serving": serving}


def import_app(app: str | ModuleType | None) -> None:
    """Import the user's app module (it registers the channels and scorers jobs use)."""
    app = app_name(app)
    if app is None:
        return
    if not app:
        raise TypeError(f"`app` must be a module name, a module or None; found {app!r}")
    try:
        importlib.import_module(app)
    except ImportError as exc:
        raise ImportError(f"cannot import the app module {app!r}: {exc}. Pass --app with a "
                          "module importable from here (check PYTHONPATH)") from exc


def _open_cache(cache: ModelCache | str | os.PathLike[str] | None,
                frozen: bool) -> ModelCache | None:
    if cache is None:
        if frozen:
            raise ValueError("`frozen=True` needs a model cache to serve the calls: pass "
                             "`cache=` (a path to the cache file, --cache PATH)")
        return None
    if isinstance(cache, ModelCache):
        if frozen and cache.mode != "read-only":
            raise ValueError(f"`frozen=True` needs a read-only cache; `cache` is in mode "
                             f"{cache.mode!r}: pass its path, or ModelCache(path, "
                             "mode='read-only')")
        return cache
    path = Path(cache)
    if frozen and not path.is_file():
        raise FileNotFoundError(f"`cache` {str(path)!r} does not exist; a frozen replay "
                                "serves every model call from it: build it first (a "
                                "read-write replay, or ModelCache.from_traces)")
    return ModelCache(path, mode="read-only" if frozen else "read-write")


def _output_path(out: Any) -> Path:
    path = Path(out)
    if path.is_dir():
        raise IsADirectoryError(f"`out` {str(path)!r} is a folder; name the output trace "
                                "file (e.g. out/replay.zst)")
    path.parent.mkdir(parents=True, exist_ok=True)  # as record() makes a trace's folder
    return path


class _Source:
    """The units of one call, taken lazily: at most the keys are kept, never the payloads.

    A ``Sequence`` is read twice. The first pass checks every unit (``encode_unit``: plain
    data, a valid key; the bytes are dropped at once) and that no key repeats, so bad input
    fails before anything runs; the second pass encodes each unit to do when the executor
    takes it. Any other iterable is read once: each unit is checked and encoded when it
    is taken, and a bad unit or a repeated key raises then (``arun_units`` documents what
    is written by that time).
    """

    def __init__(self, units: Iterable[Unit]) -> None:
        self.units = units
        self.keys: set[str] = set()
        self.total = 0  # units read so far (all of them once the input is exhausted)
        self.skipped = 0  # of them, sealed in the output already
        self.todo_count: int | None = None  # known up front for a Sequence only
        self.two_pass = isinstance(units, Sequence)
        if self.two_pass:
            for i, unit in enumerate(units):
                encode_unit(unit, i)  # raises on a bad unit; the bytes are not kept
                self._add_key(unit.key)
            self.total = len(self.keys)

    def _add_key(self, key: str) -> None:
        if key in self.keys:
            raise ValueError(f"unit key {key!r} appears twice in `units`; a key is a "
                             "unit's resume identity and must be unique")
        self.keys.add(key)

    def todo(self, sealed: set[str]) -> Iterator[bytes]:
        """The wire form of every unit not in ``sealed``, encoded as it is taken."""
        if self.two_pass:
            self.skipped = sum(1 for k in self.keys if k in sealed)
            self.todo_count = self.total - self.skipped
            return (encode_unit(unit, i) for i, unit in enumerate(self.units)
                    if unit.key not in sealed)
        return self._one_pass(sealed)

    def _one_pass(self, sealed: set[str]) -> Iterator[bytes]:
        for i, unit in enumerate(self.units):
            data = encode_unit(unit, i)
            self._add_key(unit.key)
            self.total += 1
            if unit.key in sealed:
                self.skipped += 1
                continue
            yield data


class _Batcher:
    """Collects finished units on the loop and writes them in batches (see the layout)."""

    def __init__(self, writer: OutputWriter, bar: Progress) -> None:
        self.writer = writer
        self.bar = bar
        self.pending: list[Outcome] = []
        self.handle: asyncio.TimerHandle | None = None
        self.done = 0
        self.failures: list[Outcome] = []
        self.retries = 0
        self.live_calls = 0
        self.cache_hits_remote = 0  # counted by the caches of worker processes
        self.cache_misses_remote = 0

    def add_stats(self, hits: int, misses: int, upstream: int) -> None:
        """Cache counts reported by a worker process (its own ``ModelCache``)."""
        self.cache_hits_remote += hits
        self.cache_misses_remote += misses
        self.live_calls += upstream

    def add(self, outcome: Outcome) -> None:
        self.pending.append(outcome)
        if len(self.pending) >= _BATCH_MAX:
            self.flush()
        elif self.handle is None:
            self.handle = asyncio.get_running_loop().call_later(_BATCH_DELAY, self.flush)

    def flush(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
        batch, self.pending = self.pending, []
        if not batch:
            return
        self.writer.write(batch)
        failed = [o for o in batch if not o.ok]
        self.failures.extend(failed)
        self.done += len(batch) - len(failed)
        self.retries += sum(o.attempts - 1 for o in batch)
        self.live_calls += sum(o.live_calls for o in batch)
        self.bar.advance(len(batch), len(failed))


async def _run_local(units: Iterator[bytes], fn: Callable[..., Any], *, concurrency: int,
                     policy: RetryPolicy, cache: ModelCache | None, frozen: bool,
                     timeout: float | None, on_done: Callable[[Outcome], None]) -> None:
    is_async = is_async_job(fn)
    rng = random.Random(policy.seed)
    limit = asyncio.Semaphore(concurrency)
    tasks: set[asyncio.Task[Outcome]] = set()

    errors: list[BaseException] = []  # from a job that raised a BaseException (not Exception)

    def finished(task: asyncio.Task[Outcome]) -> None:
        tasks.discard(task)
        limit.release()
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            errors.append(exc)
        else:
            on_done(task.result())

    pool = copy_context_executor(max_workers=concurrency,
                                 thread_name_prefix="agentlog-replay")
    bad_input: Exception | None = None
    try:
        while True:
            await limit.acquire()
            if errors:
                break
            # The unit is taken (and encoded) only once a slot is free: at most
            # `concurrency` encoded units exist at a time, whatever the input's length.
            try:
                data = next(units, None)
            except Exception as exc:  # a bad unit of a one-shot input (see arun_units)
                bad_input = exc
                data = None
            if data is None:
                limit.release()
                break
            task = asyncio.create_task(run_attempts(
                fn, decode_unit(data), is_async=is_async, pool=pool, policy=policy, rng=rng,
                cache=cache, frozen=frozen, timeout=timeout))
            del data
            tasks.add(task)
            task.add_done_callback(finished)
        while tasks and not errors:
            await asyncio.wait(set(tasks), return_when=asyncio.FIRST_EXCEPTION)
        if errors:
            # Not a unit failure (those are Exceptions): the job asked the whole program
            # to stop. Stop as Ctrl-C does, the finished units written, and re-raise it.
            raise errors[0]
        if bad_input is not None:
            # The units taken before the bad one have run and are handed to `on_done`
            # (so they are written); the bad one and those after it never start.
            raise bad_input
    finally:
        for task in tasks:
            task.cancel()
        if tasks:
            # Cancelled tasks end at their next await; a sync job's thread cannot be
            # stopped, so its result is dropped (the unit is not written and runs again).
            await asyncio.wait(set(tasks), timeout=1.0)
        pool.shutdown(wait=False, cancel_futures=True)


async def arun_units(
    units: Iterable[Unit],
    job: str | Callable[..., Any],
    *,
    out: str | os.PathLike[str],
    app: str | ModuleType | None = None,
    cache: ModelCache | str | os.PathLike[str] | None = None,
    frozen: bool = False,
    execution: ExecutionOptions | None = None,
    output_system: str = "agentlog.replay",
    output_meta: Mapping[str, Any] | None = None,
    **legacy: Any,
) -> RunSummary:
    """The async twin of ``run_units`` (same arguments, same result).

    Cancelling the task that awaits it stops the replay as Ctrl-C does: the finished
    units are written, every output run is closed, and ``CancelledError`` propagates.
    """
    t0 = time.perf_counter()
    opts = execution_options("arun_units", execution, legacy, ExecutionOptions())
    concurrency, executor, retry = opts.concurrency, opts.executor, opts.retry
    path = _output_path(out)
    app = app_name(app)  # a module object crosses to Ray's workers by its name
    import_app(app)
    fn, job_id = resolve_job(job)
    if executor == "ray" and job_id is None:
        raise ValueError(_NO_JOB_ID.format(job=job))
    if frozen and cache is None:
        _open_cache(cache, frozen)  # raises: say so before any work
    source = _Source(units)  # a Sequence is checked whole here; an iterator as it is read
    sealed = sealed_units(path, job=job_id)  # also refuses an output a replay did not write
    todo = source.todo(sealed)
    first = next(todo, None)  # nothing to do: no cache opened, no Ray started
    work = None if first is None else itertools.chain([first], todo)
    if work is not None:
        # What a killed replay left half-written goes before anything is appended (its
        # units are not sealed: they are in `todo`), so the output verifies.
        set_aside_cut_runs(path)
    del first  # held by `work` until dispatched, then dropped
    store = _open_cache(cache, frozen) if work is not None else None
    stats0 = store.stats() if store is not None else {}
    writer = OutputWriter(path, system=output_system, meta=output_meta, job_id=job_id)
    bar = Progress(source.todo_count, enabled=opts.progress and work is not None)
    batcher = _Batcher(writer, bar)
    interrupted = False
    try:
        if work is not None and executor == "local":
            await _run_local(work, fn, concurrency=concurrency, policy=retry, cache=store,
                             frozen=frozen, timeout=opts.timeout, on_done=batcher.add)
        elif work is not None:
            from ._ray_executor import run_ray

            assert job_id is not None
            await run_ray(work, job_id=job_id, app=app,
                          concurrency=concurrency, policy=retry, cache=store, frozen=frozen,
                          timeout=opts.timeout, address=opts.ray_address,
                          num_cpus=opts.ray_num_cpus,
                          on_done=batcher.add, on_stats=batcher.add_stats,
                          total=source.todo_count)
    except BaseException:
        interrupted = True
        raise
    finally:
        try:
            batcher.flush()
        finally:
            writer.close()
            bar.close()
        if store is not None and store is not cache:
            store.close()
    stats1 = store.stats() if store is not None else {}

    def delta(name: str) -> int:
        return stats1.get(name, 0) - stats0.get(name, 0)

    failures = _failures(path, batcher.failures)
    return RunSummary(
        total=source.total, skipped=source.skipped, done=batcher.done, failed=len(failures),
        failures=failures, cache_hits=delta("hits") + batcher.cache_hits_remote,
        cache_misses=delta("misses") + batcher.cache_misses_remote,
        live_calls=delta("upstream_calls") + batcher.live_calls,
        wall_s=time.perf_counter() - t0, retries=batcher.retries, interrupted=interrupted)


_NO_JOB_ID = ("`job` {job!r} has no importable 'module:qualname' (a lambda, a local function "
              "or one defined in __main__?); a Ray worker finds the job by that name: define "
              "it at the top level of a module and pass 'module:qualname'")


def _failures(path: Path, failed: Sequence[Outcome]) -> list[UnitFailure]:
    """The failures as written: the message the core scrubbed, read back from the output."""
    if not failed:
        return []
    written = read_units(path)
    out = []
    for o in failed:
        unit = written.get(o.key)
        message = unit.error_message if unit is not None and unit.status == "failed" else None
        out.append(UnitFailure(o.key, o.error_type or "Exception",
                               message if message is not None else "<not written>",
                               o.attempts, o.transient))
    return out


def run_units(
    units: Iterable[Unit],
    job: str | Callable[..., Any],
    *,
    out: str | os.PathLike[str],
    app: str | ModuleType | None = None,
    cache: ModelCache | str | os.PathLike[str] | None = None,
    frozen: bool = False,
    execution: ExecutionOptions | None = None,
    output_system: str = "agentlog.replay",
    output_meta: Mapping[str, Any] | None = None,
    **legacy: Any,
) -> RunSummary:
    """Run every unit not yet sealed in ``out`` through ``job``; write each as a sealed run.

    Args:
        units: the work (``Unit``); keys must be unique. Any iterable, taken lazily: a
            unit is encoded when it is dispatched (local: when a concurrency slot is free;
            Ray: with its batch, a bounded number of batches in flight), so the engine
            holds O(concurrency + batch) encoded payloads, whatever the input's length;
            beyond that it keeps only the keys. A ``Sequence`` (list, tuple) is first
            checked whole (every unit's data and key, no duplicate key), so bad units fail
            before anything runs, and the progress bar knows its total. Any other
            iterable (a generator) is read once: a unit is checked when it is reached,
            and a bad unit, a repeated key or an error the iterable itself raises (a
            trace that cannot be read) is raised then, before that unit runs, after the
            units before it have run and been written (a re-run after the fix skips
            them); the bar shows a running count.
        job: ``"module:qualname"`` of ``job(unit, ctx) -> Sequence[UnitScore]`` (sync or
            async), or the function itself (the Ray executor needs an importable one).
        out: the output trace; created, or appended to (``al.record(mode="a")``).
        app: the user's app module (its name, or the module), imported first here and
            in every worker (it registers the channels and scorers); None imports nothing.
        cache: the model cache (``ModelCache`` or the path of its SQLite file) handed to
            jobs as ``ctx.cache``.
        frozen: open ``cache`` read-only: a call it does not hold raises
            ``agentlog.CacheMiss`` and fails that unit.
        execution: where and how the units run (``ExecutionOptions``: concurrency,
            executor, Ray cluster, retry, per-attempt timeout, progress bar); default
            ``ExecutionOptions()``.
        output_system: ``system`` of the output runs.
        output_meta: extra ``meta`` of every output run.
        **legacy: the keywords of ``ExecutionOptions`` given one by one (``concurrency=4``)
            still work for one release, with a ``DeprecationWarning``.

    Returns:
        ``RunSummary``: units skipped (already sealed), done, failed (with the errors as
        written), cache hits and misses, live calls.

    Raises:
        KeyboardInterrupt: Ctrl-C. The units that finished are written and the output is
            a valid trace: run again to finish.
        ValueError, TypeError: bad arguments or units: nothing is written (for a
            ``Sequence``), or only the units before the bad one (any other iterable).
        ImportError: ``app`` or ``job`` cannot be imported.
        RuntimeError: called from a running event loop (use ``arun_units``).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("run_units was called from a running event loop; use "
                           "`await arun_units(...)` there")
    opts = execution_options("run_units", execution, legacy, ExecutionOptions())
    return asyncio.run(arun_units(
        units, job, out=out, app=app, cache=cache, frozen=frozen, execution=opts,
        output_system=output_system, output_meta=output_meta))
