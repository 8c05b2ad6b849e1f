"""The core's re-entry seams (public API): what replay builds interventions on.

A sealed window instance is re-entered by calling its decorated function again with the
decoded entry, in a fresh run with the recorded seed, task and noise generator, with every
random stream started at the step it had reached when the window opened
(``WindowEnter.steps``) and, for an intervention, a ``Steer`` installed with
``steering``. Because the noise of a draw is a function of (seed, task, stream, step,
candidate id) (``noise_seed`` folds the task into the seed), the re-entered window then
sees the recorded Gumbel draws and stop uniforms: common random numbers ([SSC] Appendix
D).
``agentlog.replay`` (``reenter_arguments``, ``stream_offsets``, ``resume_streams``,
``agentlog.replay.interventions``) is the user-facing layer on top of this module.
``serving_tools`` answers the window's ``@al.tool`` calls from a recording instead of
calling the tools (a frozen replay).

Examples:
    >>> import agentlog as al
    >>> from agentlog.reentry import gumbel_draws, start_streams
    >>> with al.record("agentlog-reentry-doctest.zst", seed=3, mode="w"):
    ...     start_streams({"doc": 5})
    ...     i = al.select([0.5, 0.5], candidates=["a", "b"], name="doc")
    >>> sel = al.read("agentlog-reentry-doctest.zst").selections()[0]
    >>> sel.step, bool((al.read("agentlog-reentry-doctest.zst").draws(sel)
    ...                  == gumbel_draws(["a", "b"], 3, "doc", 5)).all())
    (5, True)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import _noise, _pools
from ._draw_match import (
    DRAW_TOLERANCE,
    choice_agrees,
    first_draw_disagreement,
    first_posterior_disagreement,
)
from ._encoding import decode as _decode
from ._encoding import secret_env_name
from ._errors import CacheMiss
from ._posterior import posterior_keyed
from ._records import ToolCall
from ._select import observing as _observing
from ._state import current_run_var
from ._steering import Steer, current_steer_var, steering
from ._tool import RecordedTool, ToolLookup, ToolServing, tool_args_hash
from ._tool import serving_tools as _serving_tools
from ._trace import Trace, WindowView
from ._window.registry import function_id, registered_window

__all__ = [
    "DRAW_TOLERANCE",
    "RecordedTool",
    "Steer",
    "ToolLookup",
    "ToolServing",
    "choice_agrees",
    "continuation_uniform",
    "current_steer",
    "first_draw_disagreement",
    "first_posterior_disagreement",
    "function_id",
    "gumbel_draws",
    "noise_seed",
    "observing",
    "posterior_gumbel_draws",
    "recorded_tools",
    "registered_window",
    "secret_env_name",
    "serving_tools",
    "start_streams",
    "steering",
    "stream_origin",
    "tool_args_hash",
]


def current_steer() -> Steer | None:
    """The ``Steer`` installed in this context (``steering``), or None."""
    return current_steer_var.get()


def start_streams(offsets: Mapping[str, int], *, generator: str | None = None) -> None:
    """Start the current run's random streams at these steps (``{stream: next step}``).

    Streams not named start at 0, as they had when a window whose ``WindowEnter.steps``
    does not name them opened.

    Args:
        offsets: ``{stream: next step}``.
        generator: the noise generator the recorded run drew with (``RunStart.generator``);
            when given, the current run must draw with it too, or the re-entered window
            would get other draws than the recorded ones under the same seed and steps.

    Raises:
        RuntimeError: no run is being recorded in this context.
        ValueError: an offset is not an int >= 0, the run already drew a stream past its
            offset (re-enter each window in a run of its own), or the run's generator is
            not ``generator``.
    """
    run = current_run_var.get()
    if run is None:
        raise RuntimeError(
            "start_streams needs a run: call it inside `with al.record(..., seed=<the "
            "recorded run's seed>)`, before the re-entered window")
    if generator is not None and run.generator != generator:
        raise ValueError(
            f"the current run draws with noise generator {run.generator!r}, but the window "
            f"was recorded with {generator!r}: the same seed and steps would give other "
            f"draws. Record the re-entry with al.record(..., generator={generator!r}) (the "
            "source's RunStart.generator)")
    run.resume_steps(dict(offsets))


def stream_origin(stream: str) -> int:
    """The step ``start_streams`` started ``stream`` at in the current run (0 if none).

    A steer that counts the rounds of a re-entered window (``FixedHorizon``) counts from
    here, so round 0 is the window's first decision whatever the recorded offset.
    """
    run = current_run_var.get()
    return 0 if run is None else run.origins.get(stream, 0)


def noise_seed(seed: int, task: str | None, generator: str) -> int:
    """The seed a run's draws are keyed by, from its ``RunStart`` (seed, task, generator).

    Under ``"fmix64-gumbel/3"`` (new runs) the task is folded into the seed, so tasks
    recorded under one seed draw independent noise, while the same seed and task draw the
    same noise in every system and replay (what pairs them); without a task, and under
    generators /1 and /2, it is ``seed`` itself: every task recorded under one seed drew
    the same noise. ``Run.noise_seed`` of an open run.

    Raises:
        ValueError: an unknown generator.
        TypeError: ``task`` is neither a str nor None.
    """
    return _noise.noise_seed(seed, task, generator)


def _generator_now(generator: str | None) -> str:
    if generator is not None:
        return generator
    run = current_run_var.get()
    return _noise.GENERATOR_ID if run is None else run.generator


def gumbel_draws(candidates: Sequence[Any], seed: int, stream: str, step: int,
                 generator: str | None = None, *, task: str | None = None
                 ) -> NDArray[np.float64]:
    """The Gumbel draws ``al.select`` makes for these candidate ids at (seed, stream, step).

    ``seed`` and ``task`` are the run's (``RunStart.seed``, ``RunStart.task``): the draws
    are keyed by ``noise_seed(seed, task, generator)``. ``generator`` is the noise
    generator id (``Selection.generator`` of a recorded draw); None means the current
    run's, or this agentlog's default outside a run.

    The draws are bit-identical on one CPU family; across CPUs numpy's ``log`` may round
    the last bits differently: compare them with recorded draws through
    ``first_draw_disagreement`` (within ``DRAW_TOLERANCE``), not ``==``.
    """
    generator = _generator_now(generator)
    pool = _pools.pool(list(candidates), len(candidates))
    out: NDArray[np.float64] = _noise.gumbel(_pools.keys_for(pool, generator),
                                             _noise.noise_seed(seed, task, generator),
                                             stream, step)
    return out


def posterior_gumbel_draws(candidates: Sequence[Any], probs: NDArray[np.float64],
                           observed: int, seed: int, stream: str, step: int,
                           generator: str | None = None, *, task: str | None = None
                           ) -> NDArray[np.float64]:
    """The draws ``al.select(probs, candidates, observed=observed)`` makes at (seed,
    stream, step): the posterior Gumbel noise given the agent's vector ``probs`` and the
    observed choice, keyed as ``gumbel_draws`` (same arguments). Compare them with
    recorded ones through ``first_posterior_disagreement``."""
    generator = _generator_now(generator)
    pool = _pools.pool(list(candidates), len(candidates))
    return posterior_keyed(np.asarray(probs, dtype=np.float64), observed,
                           _pools.keys_for(pool, generator),
                           _noise.noise_seed(seed, task, generator), stream, step)


def observing() -> int | None:
    """Inside a steer's ``select``: the observed choice of the ``al.select(...,
    observed=)`` consulting it (its draws are posterior draws), else None."""
    return _observing()


def continuation_uniform(seed: int, stream: str, step: int, generator: str | None = None,
                         *, task: str | None = None) -> float:
    """The uniform ``al.proceed`` compares with ``p_continue`` at (seed, stream, step).

    ``seed``, ``task`` and ``generator`` as in ``gumbel_draws``.
    """
    generator = _generator_now(generator)
    return _noise.uniform(_noise.noise_seed(seed, task, generator), stream, step)




def recorded_tools(source: Trace | WindowView) -> ToolLookup:
    """A ``ToolLookup`` over the recorded tool calls of a trace, or of one window instance.

    Of several recorded calls of one tool with one arguments hash, the first is served.
    Refused calls (status 2) are not served. A call whose result was hashed but not stored
    (traces recorded before tool results were kept) raises ``CacheMiss`` saying so.
    """
    if isinstance(source, WindowView):
        trace, run, window = source.trace, source.run, source.window
    else:
        trace, run, window = source, None, None
    found: dict[tuple[str, bytes], ToolCall] = {}
    for rec in trace.tool_calls():
        if rec.args_hash is None or rec.status == 2:
            continue
        if run is not None and (rec.run != run or rec.window != window):
            continue
        found.setdefault((rec.name, rec.args_hash), rec)

    def lookup(name: str, args_hash: bytes) -> RecordedTool | None:
        rec = found.get((name, args_hash))
        if rec is None:
            return None
        if rec.status != 0:
            return RecordedTool(rec.status, error_type=rec.error_type,
                                error_message=rec.error_message)
        if rec.result is not None:
            return RecordedTool(0, _decode(rec.result), result_type=rec.result_type)
        if rec.result_hash is not None and trace.has_blob(rec.result_hash):
            return RecordedTool(0, _decode(trace.blob(rec.result_hash)),
                                result_type=rec.result_type)
        raise CacheMiss(f"tool {name!r} in {trace.path}: the recorded result was hashed but "
                        "not stored (a trace recorded before agentlog kept tool results); "
                        "re-record to replay it frozen", key=args_hash.hex())

    return lookup


@contextlib.contextmanager
def serving_tools(source: Trace | WindowView | ToolLookup) -> Iterator[ToolServing]:
    """Serve every ``@al.tool`` call of this context from a recording; none runs live.

    ``source`` is a ``Trace`` (any of its recorded calls), a ``WindowView`` (the calls of
    that window instance) or a ``ToolLookup`` of your own. A served call returns the
    recorded result or raises the recorded error (a built-in exception type as itself,
    others as ``agentlog.ReplayError``); a call never recorded raises ``agentlog.CacheMiss``
    naming the tool and its arguments hash. Every served call is recorded as a
    ``ToolCall`` with ``served=True``. Set ``.live = True`` on the yielded ``ToolServing``
    to let later calls run live.

    Raises:
        RuntimeError: no run is being recorded in this context.
    """
    lookup = recorded_tools(source) if isinstance(source, Trace | WindowView) else source
    with _serving_tools(lookup) as serving:
        yield serving
