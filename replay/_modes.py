"""What may run live in a re-entered window: the ``frozen``, ``branch`` and ``rerun`` modes.

* ``frozen``: every model call of the window is served from the source trace's recorded
  calls (``ModelCache.from_traces``), else from the user's ``cache=`` (looked up only:
  nothing is fetched); every ``@al.tool`` call from the recorded tool calls (those of the
  same window instance first, then any of the source trace). A miss raises
  ``agentlog.CacheMiss`` (for a model call: the fields that differ from the nearest
  recorded request; for a tool: its name and arguments hash) and nothing runs live.
* ``branch``: frozen up to the *branch point*, live after it. The branch point is the
  first ``select``/``proceed`` of the window whose outcome under the arm (the chosen
  candidate id; the continue bit) differs from the recorded outcome at the same stream and
  step, or that the recording never made. Up to it the arm has made exactly the recorded
  decisions from the recorded entry with the recorded random numbers, so its model and
  tool requests are the recorded ones and serving them is exact; a steer that reshapes
  probabilities without changing an outcome does not branch. From the branch point on,
  model calls go to the user's ``cache=`` (or live, as the clients were wrapped to do
  when no ``cache=`` is given) and tools are called.
* ``rerun``: everything live (the user's ``cache=``, when given, serves model calls).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import numpy as np
from numpy.typing import NDArray

import agentlog as al
from agentlog import CacheMiss, Trace
from agentlog.adapters import CacheKey, CacheResult, ModelCache, override_cache
from agentlog.records import Continuation, Selection, WindowView, decode_pool
from agentlog.reentry import (
    RecordedTool,
    Steer,
    continuation_uniform,
    gumbel_draws,
    observing,
    posterior_gumbel_draws,
    recorded_tools,
    serving_tools,
)

from .interventions import _window_and_descendants

__all__ = ["BranchSteer", "FrozenCache", "Serving", "serving_mode"]

# The source traces' recorded calls as caches, built once per Trace object: a Trace holds
# the file's records as read, so its cache can never serve another recording's calls.
_caches: weakref.WeakKeyDictionary[Trace, ModelCache] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def _fail(miss: CacheMiss) -> Callable[[], Any]:
    def fetch() -> Any:
        raise miss

    return fetch


def _afail(miss: CacheMiss) -> Callable[[], Awaitable[Any]]:
    async def afetch() -> Any:
        raise miss

    return afetch


class FrozenCache:
    """A read-only cache: the recorded calls first, then the user's cache, never upstream.

    A request neither holds raises the recorded calls' ``CacheMiss`` (it names the fields
    that differ from the nearest recorded request).
    """

    mode = "read-only"

    def __init__(self, recorded: ModelCache, user: Any = None) -> None:
        self.recorded = recorded
        self.user = user
        self.misses = 0  # counted: a replay fails even when the agent caught the miss

    def call(self, key: CacheKey, fetch: Callable[[], dict[str, Any]]) -> CacheResult:
        try:
            return self.recorded.call(key, fetch)  # read-only: a miss raises, never fetches
        except CacheMiss as miss:
            if self.user is None:
                self.misses += 1
                raise
            try:
                result: CacheResult = self.user.call(key, _fail(miss))
            except CacheMiss:
                self.misses += 1
                raise miss from None
            return result

    async def acall(self, key: CacheKey, afetch: Callable[[], Any]) -> CacheResult:
        try:
            return await self.recorded.acall(key, afetch)
        except CacheMiss as miss:
            if self.user is None:
                self.misses += 1
                raise
            try:
                result: CacheResult = await self.user.acall(key, _afail(miss))
            except CacheMiss:
                self.misses += 1
                raise miss from None
            return result


def _recorded_calls(trace: Trace) -> ModelCache:
    with _caches_lock:
        cache = _caches.get(trace)
    if cache is None:
        cache = ModelCache.from_traces(trace)
        with _caches_lock:
            _caches[trace] = cache  # lives as long as the trace (bounded by its holder)
    return cache


class BranchSteer(Steer):
    """The arm's steer, watching for the branch point (see the module docs).

    At the first decision whose outcome differs from the recorded one, ``on_branch`` is
    called once (before that decision's own draw is recorded) and ``branch`` says where.

    Args:
        inner: the arm's steer (None: the agent's own policy; it never branches).
        view: the recorded window instance.
        on_branch: what to switch live.
    """

    def __init__(self, inner: Steer | None, view: WindowView,
                 on_branch: Callable[[], None]) -> None:
        self.inner = inner
        self.name = "branch" if inner is None else inner.name
        self.on_branch = on_branch
        self.branch: tuple[str, str, int] | None = None
        trace, run = view.trace, next(r for r in view.trace.runs if r.run == view.run)
        inside = _window_and_descendants(run, view.window)
        self._recorded: dict[tuple[str, str, int], Any] = {}
        for rec in run.records:
            if type(rec) is Selection and rec.window in inside:
                ids = decode_pool(trace.blob(rec.pool))
                self._recorded["select", rec.name, rec.step] = ids[rec.choice]
            elif type(rec) is Continuation and rec.window in inside:
                self._recorded["proceed", rec.name, rec.step] = bool(rec.decision)

    def _outcome(self, key: tuple[str, str, int], outcome: Any) -> None:
        if self.branch is not None:
            return
        missing = object()
        if self._recorded.get(key, missing) != outcome:
            self.branch = key
            self.on_branch()

    def select(self, stream: str, step: int, probs: NDArray[np.float64],
               ids: tuple[Any, ...]) -> NDArray[np.float64] | int | None:
        out = None if self.inner is None else self.inner.select(stream, step, probs, ids)
        if self.branch is None:
            run = al.current_run()
            if isinstance(out, int | np.integer) and not isinstance(out, bool):
                choice = int(out)
            elif run is None:
                return out
            elif out is None and (observed := observing()) is not None:
                choice = observed  # an observed choice is kept under no steer
            else:  # the draw select will make: argmax(log p + g), [SSC] eq. 6
                p = probs if out is None else np.asarray(out, dtype=np.float64)
                observed = observing()
                g = (gumbel_draws(ids, run.seed, stream, step, task=run.task)
                     if observed is None else posterior_gumbel_draws(
                         ids, probs, observed, run.seed, stream, step, task=run.task))
                with np.errstate(divide="ignore"):
                    choice = int(np.argmax(np.log(p) + g))
            self._outcome(("select", stream, step),
                          ids[choice] if 0 <= choice < len(ids) else None)
        return out

    def proceed(self, stream: str, step: int, p: float) -> float | bool | None:
        out = None if self.inner is None else self.inner.proceed(stream, step, p)
        if self.branch is None:
            run = al.current_run()
            if isinstance(out, bool):
                decision = out
            elif run is None:
                return out
            else:
                q = p if out is None else float(out)
                decision = bool(continuation_uniform(run.seed, stream, step,
                                                     task=run.task) < q)
            self._outcome(("proceed", stream, step), decision)
        return out


def _tools(view: WindowView, trace: Trace) -> Callable[[str, bytes], RecordedTool | None]:
    own, anywhere = recorded_tools(view), recorded_tools(trace)

    def lookup(name: str, args_hash: bytes) -> RecordedTool | None:
        found = own(name, args_hash)
        return found if found is not None else anywhere(name, args_hash)

    return lookup


class Serving:
    """What ``serving_mode`` installed: the steer to apply, and the misses so far."""

    def __init__(self, steer: Steer | None, model: FrozenCache | None = None,
                 tools: Any = None) -> None:
        self.steer = steer
        self._model = model
        self._tools = tools

    def check(self, where: str) -> None:
        """Raise ``CacheMiss`` when a call missed, even if the window caught the error.

        A window that catches its tools' errors would otherwise return normally after a
        frozen replay refused a call, and its unit would look like a faithful replay.
        """
        misses = (0 if self._model is None else self._model.misses) + (
            0 if self._tools is None else self._tools.misses)
        if misses:
            raise CacheMiss(f"{where}: {misses} model or tool call(s) could not be served "
                            "from the recording (each raised CacheMiss, which the window "
                            "caught); the replay is not faithful, so the unit fails. Replay "
                            "with mode='branch' or 'rerun' to let them run live")


@contextlib.contextmanager
def serving_mode(mode: str, *, view: WindowView, steer: Steer | None,
                 cache: Any = None) -> Iterator[Serving]:
    """Install what ``mode`` serves for one re-entered window.

    Must be entered inside the arm run's ``al.record`` (the served calls are recorded).
    Yields a ``Serving``: install its ``steer``, and call ``check`` when the window
    returned.
    """
    if mode == "rerun":
        if cache is None:
            yield Serving(steer)
        else:
            with override_cache(cache):
                yield Serving(steer)
        return
    frozen = FrozenCache(_recorded_calls(view.trace), cache)
    with override_cache(frozen) as model, serving_tools(_tools(view, view.trace)) as tools:
        if mode == "frozen":
            yield Serving(steer, frozen, tools)
            return

        def go_live() -> None:
            model.cache = cache  # None: the clients call their servers (recorded)
            tools.live = True

        # Misses before the branch point count; after it nothing is served, so none occur.
        yield Serving(BranchSteer(steer, view, go_live), frozen, tools)
