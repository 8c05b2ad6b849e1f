"""The Ray executor: batches of units as plain Ray tasks; the driver writes the output.

Each task receives plain data only: the app module name, the job's ``"module:qualname"``,
the retry policy's numbers, the cache's path and mode, and the units' msgpack bytes. The
worker imports the app and the job by name (agentlog pickles nothing; how Ray moves the
arguments is Ray's business), runs the batch with the same code as the local executor
(``run_attempts``) and returns the outcomes as msgpack bytes. So the two executors give
the same ``Score`` values and provenance; only timestamps and run ids differ.

Sizing: ``T = min(concurrency, cluster CPUs)`` tasks are in flight at once, each running
up to ``concurrency // T`` of its units at a time, so at most ``concurrency`` units run
in the cluster; a batch holds enough units to give each task slot about four batches
(units from an iterator, count unknown: batches double from ``concurrency // T`` up to 256
units). Batches are cut from the units as slots free up, so the driver holds at most
``T`` batches of encoded units, never the whole input.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import random
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from agentlog import MissingDependencyError, ReplayError
from agentlog.adapters import ModelCache
from agentlog.context import copy_context_executor
from agentlog.retry import RetryPolicy

from ._unit_output import Outcome

_enc = msgspec.msgpack.Encoder()
_dec = msgspec.msgpack.Decoder()
_BATCH_MAX = 256

# Caches a worker process opened, by (path, mode) and the file's (device, inode): one
# SQLite connection set per process, never one left on a file since replaced at that path
# (an open connection would keep reading the replaced file).
_worker_caches: dict[tuple[str, str, int, int], ModelCache] = {}


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise MissingDependencyError(
            "executor='ray' needs Ray: pip install 'agentlog[ray]'") from exc
    return ray


def _cache_spec(cache: ModelCache | None) -> tuple[str, str] | None:
    if cache is None:
        return None
    if cache.path == ":memory:" or not os.path.isfile(cache.path):
        raise ValueError(
            f"executor='ray' opens the model cache by path in every worker; the cache "
            f"{cache.path!r} is not a file (an in-memory cache or ModelCache.from_traces): "
            "pass the path of a SQLite cache file")
    return (os.path.abspath(cache.path), cache.mode)


def run_batch(app: str | None, job_id: str, policy: tuple[int, float, float, int | None],
              cache: tuple[str, str] | None, frozen: bool, timeout: float | None,
              concurrency: int, units: list[bytes]) -> bytes:
    """The body of one Ray task (runs in a worker process): plain data in, bytes out."""
    from ._executor import import_app, run_attempts
    from ._units import decode_unit, is_async_job, resolve_job

    import_app(app)
    fn, _ = resolve_job(job_id)
    store = None
    if cache is not None:
        try:
            st = os.stat(cache[0])
            key = (*cache, st.st_dev, st.st_ino)
        except OSError:  # gone: ModelCache says so, or creates it (read-write)
            key = (*cache, -1, -1)
        store = _worker_caches.get(key)
        if store is None:
            for old in [k for k in _worker_caches if k[:2] == cache]:
                _worker_caches.pop(old).close()  # a file replaced at that path
            store = _worker_caches[key] = ModelCache(cache[0], mode=cache[1])  # type: ignore[arg-type]
    before = store.stats() if store is not None else {}
    max_attempts, base, cap, seed = policy
    retry = RetryPolicy(max_attempts, base, cap, seed)
    is_async = is_async_job(fn)

    async def main() -> list[Outcome]:
        limit = asyncio.Semaphore(concurrency)
        rng = random.Random(seed)
        with copy_context_executor(max_workers=concurrency,
                                   thread_name_prefix="agentlog-replay") as pool:

            async def one(data: bytes) -> Outcome:
                async with limit:
                    return await run_attempts(
                        fn, decode_unit(data), is_async=is_async, pool=pool, policy=retry,
                        rng=rng, cache=store, frozen=frozen, timeout=timeout)

            return list(await asyncio.gather(*(one(d) for d in units)))

    outcomes = asyncio.run(main())
    after = store.stats() if store is not None else {}
    stats = [after.get(k, 0) - before.get(k, 0) for k in ("hits", "misses", "upstream_calls")]
    return _enc.encode({
        "outcomes": [[o.key, dict(o.provenance), o.attempts, [list(s) for s in o.scores],
                      o.error_type, o.message, o.transient, o.live_calls] for o in outcomes],
        "stats": stats,
    })


def _outcomes(data: bytes) -> tuple[list[Outcome], list[int]]:
    body = _dec.decode(data)
    out = [Outcome(key, prov, attempts, [tuple(s) for s in scores], error_type, message,
                   transient, live)
           for key, prov, attempts, scores, error_type, message, transient, live
           in body["outcomes"]]
    return out, list(body["stats"])


def _task_failed(exc: BaseException) -> ReplayError:
    cause = getattr(exc, "cause", None) or exc  # RayTaskError carries the worker's error
    return ReplayError(
        f"a Ray task of the replay failed in its worker: {type(cause).__name__}: {cause}. "
        "The units it held are not written (a re-run does them). Workers import the app "
        "and the job by name: install their package on every node, or start the cluster "
        "with it on PYTHONPATH (or a Ray runtime_env)")


def batch_sizes(total: int | None, per_task: int, tasks_at_once: int) -> Iterator[int]:
    """How many units each next batch takes.

    With ``total`` known, every batch has the same size, enough for about four batches per
    task slot. With ``total`` unknown (an iterator), sizes start at ``per_task`` and
    double up to ``_BATCH_MAX``: a short input is still spread over the task slots, a long
    one pays the per-task overhead on big batches.
    """
    if total is not None:
        yield from itertools.repeat(
            max(per_task, min(_BATCH_MAX, math.ceil(total / (4 * tasks_at_once)))))
        return
    size = per_task
    while True:
        yield size
        size = max(per_task, min(_BATCH_MAX, 2 * size))


async def run_ray(units: Iterator[bytes], *, job_id: str, app: str | None, concurrency: int,
                  policy: RetryPolicy, cache: ModelCache | None, frozen: bool,
                  timeout: float | None, address: str | None, num_cpus: int | None,
                  on_done: Callable[[Outcome], None],
                  on_stats: Callable[[int, int, int], None],
                  total: int | None = None) -> None:
    """Run ``units`` as Ray tasks; hand each outcome to ``on_done`` on this loop.

    ``units`` is read one batch at a time, when a task slot is free: at most
    ``tasks_at_once`` batches (each at most ``_BATCH_MAX`` units) are encoded and in
    flight at once. An exception raised while reading ``units`` (a bad unit of a one-shot
    input) stops the reading: the units read before it are sent and their outcomes
    handed to ``on_done``, then it is raised. ``total``: how many units ``units`` holds,
    when known (it sizes the batches).
    """
    ray = _import_ray()
    spec = _cache_spec(cache)
    started = not ray.is_initialized()
    if started:
        if address is None:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=True)
        else:
            ray.init(address=address, log_to_driver=True)
    try:
        slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
        tasks_at_once = max(1, min(concurrency, slots))
        per_task = max(1, concurrency // tasks_at_once)
        sizes = batch_sizes(total, per_task, tasks_at_once)
        remote = ray.remote(num_cpus=1, max_retries=0)(run_batch)
        wire = policy.to_wire()
        waiting: dict[asyncio.Future[Any], Any] = {}
        bad_input: Exception | None = None
        ended = False
        try:
            while True:
                while len(waiting) < tasks_at_once and not ended:
                    batch: list[bytes] = []
                    try:
                        batch.extend(itertools.islice(units, next(sizes)))
                    except Exception as exc:  # the units before it are in `batch`
                        bad_input = exc
                        ended = True
                    if not batch:
                        ended = True
                        break
                    ref = remote.remote(app, job_id, wire, spec, frozen, timeout, per_task,
                                        batch)
                    del batch  # Ray holds its copy until the task is done
                    waiting[asyncio.wrap_future(ref.future())] = ref
                if not waiting:
                    break
                done, _ = await asyncio.wait(set(waiting),
                                             return_when=asyncio.FIRST_COMPLETED)
                for future in done:
                    del waiting[future]
                    try:
                        data = future.result()
                    except Exception as exc:
                        raise _task_failed(exc) from exc
                    outcomes, stats = _outcomes(data)
                    on_stats(*stats)
                    for o in outcomes:
                        on_done(o)
        finally:
            for ref in waiting.values():
                ray.cancel(ref, force=True)
        if bad_input is not None:
            raise bad_input
    finally:
        if started:
            ray.shutdown()
