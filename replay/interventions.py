"""Interventions: the selection and stopping policies a re-entered window runs under.

An intervention is a ``Steer``: while it is installed (``agentlog.reentry.steering``, or
the replay engine under an arm), every ``al.select`` and ``al.proceed`` consults it before
drawing. It may replace the probability vector or the continue probability; the draw
itself keeps the identity-keyed noise of (seed, task, stream, step, candidate id), so a
steered arm and the recording share their random numbers ([SSC] §3-4 and Appendix D: paired
interventions with common random numbers). Replacing probabilities rather than forcing
outcomes keeps every record weightable: ``cess.from_traces`` weights a steered draw by the
vector it was drawn from.

Selection (``stream=None``: every select stream, else only that one):

* ``Uniform()``: ``1/N`` for each candidate (the uniform arm π₀ of [SSC] eq. 3).
* ``Reverse()``: the candidate listed ``i``-th gets the probability of the ``(N-1-i)``-th,
  which reverses a ranking whose probabilities follow the list order.
* ``Permute(order)``: the candidate listed ``i``-th gets the probability of the
  ``order[i]``-th (``Reverse()`` is ``Permute(range(N-1, -1, -1))`` for one ``N``).
* ``Temperature(t)``: ``p_i^(1/t)``, renormalised (zeros stay zero).

Stopping (counted per stream from where the re-entry started it, ``stream_origin``, so
decision 0 is the window's first):

* ``FixedHorizon(n)``: continue at decisions 0..n-2 and stop at decision n-1: ``n`` rounds
  for the usual loop that opens a round, then asks whether to go on (the bundled agent).
* ``StopAt(n)``: the agent decides, but stops at decision n-1 at the latest (a cap).
* ``NeverStop()``: always continue (the agent's own budget still ends the loop).

One decision (per-step attribution, ``agentlog.estimators.attribution``):

* ``Alter(["doc@1", "stop@0=stop"])``: change only the named decisions, ``STREAM@K`` being
  decision ``K`` of ``STREAM`` counted from the re-entry's start; every other decision keeps
  the agent's policy and every draw its noise. A selection's alternative is ``runner_up``
  (the default: the candidate the same Gumbel draws rank second, the one chosen had the
  agent's pick been unavailable), ``uniform``, ``resample`` (the agent's vector on
  independent noise) or ``pick:I``; a stop decision's is ``flip`` (the default: the other
  outcome under the same uniform), ``stop``, ``continue`` or ``resample``.

Replay: ``ForceRecorded(source)`` reproduces a recorded run and checks every draw against
it (candidates, probabilities, noise, outcome); the first difference raises
``al.ReplayDivergenceError`` naming the record, the stream, the step and both values.

Steers compose: ``Uniform() + FixedHorizon(4)`` or ``compose(Uniform(), FixedHorizon(4))``
apply in order. Every subclass of ``Steer`` here registers at class creation in a
``Registry("steer")`` under its ``name``; ``identity(steer)`` gives the hash an arm stores:
the registered hash (kind, ``module:qualname``, source digest) with the instance's
constructor parameters.

Examples:
    >>> import agentlog as al
    >>> from agentlog.reentry import steering
    >>> from agentlog.replay.interventions import FixedHorizon, Uniform, identity
    >>> arm = Uniform() + FixedHorizon(2)
    >>> with al.record("agentlog-interventions-doctest.zst", seed=1, mode="w"), steering(arm):
    ...     rounds = 1
    ...     while al.proceed(0.1, name="stop"):
    ...         rounds += 1
    >>> rounds, identity(arm)["name"]
    (2, 'uniform+fixed_horizon')
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from os import PathLike
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

import agentlog as al
from agentlog import ReplayDivergenceError, Trace
from agentlog.records import Continuation, Selection, WindowView, decode_pool, encode_artifact
from agentlog.reentry import Steer as _CoreSteer
from agentlog.reentry import (
    choice_agrees,
    continuation_uniform,
    first_draw_disagreement,
    first_posterior_disagreement,
    gumbel_draws,
    noise_seed,
    observing,
    posterior_gumbel_draws,
    stream_origin,
)
from agentlog.registry import Registered, Registry

__all__ = [
    "ALTER_FACTOR",
    "STEERS",
    "Alter",
    "Compose",
    "FixedHorizon",
    "ForceRecorded",
    "NeverStop",
    "Permute",
    "Reverse",
    "Steer",
    "StopAt",
    "Temperature",
    "Uniform",
    "compose",
    "decision_label",
    "identity",
    "parse_decision",
]

STEERS = Registry("steer")


class Steer(_CoreSteer):
    """Base class of interventions; subclasses register themselves under ``name``.

    Override ``select`` and/or ``proceed`` (return None to leave a draw alone) and
    ``params`` (the constructor arguments that make two instances differ; by default the
    instance's public attributes), so that ``identity`` tells arms apart. ``params`` are
    keyword arguments of the constructor: ``type(s)(**s.params())`` rebuilds the steer
    (what a worker process does with an arm's identity).
    """

    name: str = "steer"
    _registered: ClassVar[Registered | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = cls.__name__.lower()
        if not cls.name.startswith("_"):  # a private base of steers is not one itself
            cls._registered = STEERS.register(cls.name, cls)

    def params(self) -> dict[str, Any]:
        """The constructor arguments, canonical-encodable (hashed into the arm)."""
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def applies(self, stream: str) -> bool:
        """Whether this steer acts on ``stream`` (``stream=`` given at construction)."""
        only = getattr(self, "stream", None)
        return only is None or only == stream

    def __add__(self, other: _CoreSteer) -> Compose:
        return compose(self, other)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"



def _check_stream(stream: str | None) -> str | None:
    if stream is not None and (not isinstance(stream, str) or not stream):
        raise ValueError(f"`stream` must be a non-empty str or None; found {stream!r}")
    return stream


class _SelectionSteer(Steer):
    """A steer that replaces the probability vector of the streams it applies to."""

    name = "_selection"

    def __init__(self, stream: str | None = None) -> None:
        self.stream = _check_stream(stream)

    def select(self, stream: str, step: int, probs: NDArray[np.float64],
               ids: tuple[Any, ...]) -> NDArray[np.float64] | None:
        return self.vector(stream, step, probs) if self.applies(stream) else None

    def vector(self, stream: str, step: int,
               probs: NDArray[np.float64]) -> NDArray[np.float64]:
        """The replacement of the agent's vector ``probs``."""
        raise NotImplementedError


class Uniform(_SelectionSteer):
    """Uniform selection: every candidate gets ``1/N``."""

    name = "uniform"

    def vector(self, stream: str, step: int,
               probs: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.full(probs.shape[0], 1.0 / probs.shape[0])


class Permute(_SelectionSteer):
    """The candidate listed ``i``-th gets the probability of the ``order[i]``-th."""

    name = "permute"

    def __init__(self, order: Sequence[int], stream: str | None = None) -> None:
        perm = [int(i) for i in order]
        if sorted(perm) != list(range(len(perm))):
            raise ValueError(f"`order` must be a permutation of 0..{len(perm) - 1}; found "
                             f"{list(order)!r}")
        self.order = perm
        super().__init__(stream)

    def vector(self, stream: str, step: int,
               probs: NDArray[np.float64]) -> NDArray[np.float64]:
        if len(self.order) != probs.shape[0]:
            raise ValueError(
                f"Permute of {len(self.order)} positions applied to select {stream!r} step "
                f"{step} with {probs.shape[0]} candidates; give an order of that length, or "
                "stream= to apply it to one stream only")
        out: NDArray[np.float64] = probs[np.asarray(self.order)]
        return out


class Reverse(_SelectionSteer):
    """The candidate listed ``i``-th gets the probability of the ``(N-1-i)``-th."""

    name = "reverse"

    def vector(self, stream: str, step: int,
               probs: NDArray[np.float64]) -> NDArray[np.float64]:
        out: NDArray[np.float64] = probs[::-1].copy()
        return out


class Temperature(_SelectionSteer):
    """``p_i^(1/t)`` renormalised: ``t < 1`` sharpens, ``t > 1`` flattens."""

    name = "temperature"

    def __init__(self, t: float, stream: str | None = None) -> None:
        t = float(t)
        if not math.isfinite(t) or t <= 0:
            raise ValueError(f"`t` of Temperature must be a finite number > 0; found {t}")
        self.t = t
        super().__init__(stream)

    def vector(self, stream: str, step: int,
               probs: NDArray[np.float64]) -> NDArray[np.float64]:
        with np.errstate(divide="ignore"):
            logits = np.log(probs) / self.t
        logits -= logits.max()
        q = np.exp(logits)
        out: NDArray[np.float64] = q / q.sum()
        return out


def _rounds(n: int, what: str) -> int:
    if not isinstance(n, int | np.integer) or isinstance(n, bool) or n < 1:
        raise ValueError(f"`n` of {what} must be an int >= 1 (rounds); found {n!r}")
    return int(n)


class FixedHorizon(Steer):
    """Exactly ``n`` rounds: continue at stop decisions 0..n-2, stop at decision n-1."""

    name = "fixed_horizon"

    def __init__(self, n: int, stream: str | None = None) -> None:
        self.n = _rounds(n, "FixedHorizon")
        self.stream = _check_stream(stream)

    def proceed(self, stream: str, step: int, p: float) -> float | None:
        if not self.applies(stream):
            return None
        # 1.0 / 0.0, not True / False: a probability keeps the record weightable.
        return 1.0 if step - stream_origin(stream) < self.n - 1 else 0.0


class StopAt(Steer):
    """The agent's own stop decisions, but at most ``n`` rounds."""

    name = "stop_at"

    def __init__(self, n: int, stream: str | None = None) -> None:
        self.n = _rounds(n, "StopAt")
        self.stream = _check_stream(stream)

    def proceed(self, stream: str, step: int, p: float) -> float | None:
        if not self.applies(stream) or step - stream_origin(stream) < self.n - 1:
            return None
        return 0.0


class NeverStop(Steer):
    """Always continue (the agent's own budget still ends its loop)."""

    name = "never_stop"

    def __init__(self, stream: str | None = None) -> None:
        self.stream = _check_stream(stream)

    def proceed(self, stream: str, step: int, p: float) -> float | None:
        return 1.0 if self.applies(stream) else None


class Compose(Steer):
    """Steers applied in order: each sees the probabilities the previous one returned;
    a forced outcome (an index, a bool) ends the chain."""

    name = "compose"

    def __init__(self, steers: Iterable[_CoreSteer]) -> None:
        flat: list[_CoreSteer] = []
        for s in steers:
            if not isinstance(s, _CoreSteer):
                raise TypeError(f"compose() takes Steer instances; found {type(s).__name__}")
            flat.extend(s.steers if isinstance(s, Compose) else [s])
        if not flat:
            raise ValueError("compose() needs at least one steer")
        self.steers: list[_CoreSteer] = flat
        self.name = "+".join(s.name for s in flat)  # what Selection/Continuation.steer record

    def params(self) -> dict[str, Any]:
        return {"steers": [identity(s) for s in self.steers]}

    def select(self, stream: str, step: int, probs: NDArray[np.float64],
               ids: tuple[Any, ...]) -> NDArray[np.float64] | int | None:
        current, changed = probs, False
        for s in self.steers:
            out = s.select(stream, step, current, ids)
            if out is None:
                continue
            if isinstance(out, int | np.integer):
                return int(out)
            current, changed = np.asarray(out, dtype=np.float64), True
        return current if changed else None

    def proceed(self, stream: str, step: int, p: float) -> float | bool | None:
        current, changed = p, False
        for s in self.steers:
            out = s.proceed(stream, step, current)
            if out is None:
                continue
            if isinstance(out, bool):
                return out
            current, changed = float(out), True
        return current if changed else None


SELECT_ALTERNATIVES = ("runner_up", "uniform", "resample", "pick:I")
PROCEED_ALTERNATIVES = ("flip", "stop", "continue", "resample")
RESAMPLE_STREAM = "{stream}~resample"  # the independent noise a "resample" draws on
# The one factor of an alteration arm (``agentlog.replay.alteration_arm``): its decision
# tokens, sorted and "+"-joined ("" for the agent's own arm).
ALTER_FACTOR = "alter"


def parse_decision(token: str) -> tuple[str, int, str | None]:
    """``"doc@1=uniform"`` → ``("doc", 1, "uniform")``; no ``=``: the default alternative
    (None: ``runner_up`` for a selection, ``flip`` for a stop decision)."""
    text = token.strip() if isinstance(token, str) else ""
    head, sep, alt = text.partition("=")
    stream, at, step = head.rpartition("@")
    if not at or not stream or not step.strip().isdigit():
        raise ValueError(f"decision {token!r}: expected STREAM@K or STREAM@K=ALTERNATIVE "
                         "(K the decision's index in the re-entered window, from 0), e.g. "
                         "doc@1, doc@1=uniform, stop@0=flip")
    alternative = alt.strip() if sep else None
    if alternative is not None:
        known = alternative in SELECT_ALTERNATIVES[:3] or alternative in PROCEED_ALTERNATIVES
        pick, _, index = alternative.partition(":")
        if not known and not (pick == "pick" and index.isdigit()):
            raise ValueError(
                f"decision {token!r}: unknown alternative {alternative!r}; a selection's are "
                f"{', '.join(SELECT_ALTERNATIVES)}, a stop decision's "
                f"{', '.join(PROCEED_ALTERNATIVES)}")
    return stream, int(step), alternative


def decision_label(stream: str, step: int, alternative: str | None) -> str:
    """The canonical token of a decision change (``parse_decision`` reads it back)."""
    return f"{stream}@{step}" + ("" if alternative is None else f"={alternative}")


class Alter(Steer):
    """Change the named decisions of a re-entered window, and nothing else.

    Each decision is ``STREAM@K[=ALTERNATIVE]``: decision ``K`` of ``STREAM`` counted from
    where the re-entry started the stream (``stream_origin``), so ``doc@0`` is the window's
    first ``select(name="doc")``. Every other decision keeps the agent's own policy, and
    every draw (the altered ones included) keeps its identity-keyed noise, so an arm that
    alters decision K and the agent's own arm share all their random numbers: the
    interventional contrast of one step under common random numbers.

    Alternatives of a selection: ``runner_up`` (default; under the same Gumbel draws the
    candidate ranked second by ``log p + g``: the agent's pick made unavailable), ``uniform``
    (``1/N``, a fresh choice under the same draws), ``resample`` (the agent's own vector on
    independent noise: the draws of stream ``"<stream>~resample"`` at the same step, the
    same in every arm that resamples this decision) or ``pick:I`` (the ``I``-th candidate).
    Of a stop decision (``al.proceed``): ``flip`` (default; the other outcome under the same
    uniform), ``stop``, ``continue`` or ``resample`` (the agent's own probability against
    the uniform of ``"<stream>~resample"``). Outcomes are imposed as probability vectors (a
    one-hot, 0.0 or 1.0), so every record stays weightable. A selection with one candidate
    of positive probability has no runner-up: it is left as the agent drew it.

    Args:
        decisions: the decision tokens (``["doc@1", "stop@0=stop"]``); a decision named
            twice is refused.
    """

    name = "alter"

    def __init__(self, decisions: Iterable[str]) -> None:
        if isinstance(decisions, str):
            raise TypeError(f"`decisions` must be a list of tokens, e.g. [{decisions!r}]")
        parsed: dict[tuple[str, int], str | None] = {}
        for token in decisions:
            stream, step, alternative = parse_decision(token)
            if (stream, step) in parsed:
                raise ValueError(f"decision {stream}@{step} is named twice in {decisions!r}")
            parsed[stream, step] = alternative
        self.decisions = sorted(decision_label(s, k, a) for (s, k), a in parsed.items())
        self._changes = parsed

    def params(self) -> dict[str, Any]:
        return {"decisions": list(self.decisions)}

    def _change(self, stream: str, step: int, default: str) -> tuple[str, str] | None:
        """``(its token, the alternative)`` of a named decision (``default`` when the token
        gives none), or None for any other decision."""
        key = (stream, step - stream_origin(stream))
        if key not in self._changes:
            return None
        alternative = self._changes[key] or default
        return decision_label(*key, alternative), alternative

    @staticmethod
    def _run() -> Any:
        run = al.current_run()
        if run is None:  # select and proceed only call a steer inside a run
            raise RuntimeError("Alter steers draws of a recorded run only")
        return run

    def select(self, stream: str, step: int, probs: NDArray[np.float64],
               ids: tuple[Any, ...]) -> NDArray[np.float64] | None:
        change = self._change(stream, step, "runner_up")
        if change is None:
            return None
        token, alternative = change
        n = probs.shape[0]
        if alternative in PROCEED_ALTERNATIVES and alternative not in SELECT_ALTERNATIVES:
            raise ValueError(f"Alter {token}: {stream!r} is a selection stream; its "
                             f"alternatives are {', '.join(SELECT_ALTERNATIVES)}")
        if alternative == "uniform":
            return np.full(n, 1.0 / n)
        if alternative.startswith("pick:"):
            index = int(alternative[5:])
            if index >= n:
                raise ValueError(f"Alter {token}: the selection has {n} candidates "
                                 f"(0..{n - 1})")
            return _one_hot(n, index)
        run = self._run()
        if alternative == "resample":
            noise = gumbel_draws(ids, run.seed, RESAMPLE_STREAM.format(stream=stream), step,
                                 run.generator, task=run.task)
            with np.errstate(divide="ignore"):
                return _one_hot(n, int(np.argmax(np.log(probs) + noise)))
        now = observing()
        if now is None:
            noise = gumbel_draws(ids, run.seed, stream, step, run.generator, task=run.task)
        else:
            noise = posterior_gumbel_draws(ids, probs, now, run.seed, stream, step,
                                           run.generator, task=run.task)
        with np.errstate(divide="ignore"):
            keys = np.log(probs) + noise
        order = np.argsort(-keys, kind="stable")
        if n < 2 or not np.isfinite(keys[order[1]]):
            return None  # one reachable candidate: no runner-up, the draw stands
        return _one_hot(n, int(order[1]))

    def proceed(self, stream: str, step: int, p: float) -> float | None:
        change = self._change(stream, step, "flip")
        if change is None:
            return None
        token, alternative = change
        if alternative not in PROCEED_ALTERNATIVES:
            raise ValueError(f"Alter {token}: {stream!r} is a stop stream (al.proceed); its "
                             f"alternatives are {', '.join(PROCEED_ALTERNATIVES)}")
        if alternative in ("stop", "continue"):
            return 1.0 if alternative == "continue" else 0.0
        run = self._run()
        if alternative == "resample":
            u = continuation_uniform(run.seed, RESAMPLE_STREAM.format(stream=stream), step,
                                     run.generator, task=run.task)
            return 1.0 if u < p else 0.0  # the agent's own p on independent noise
        u = continuation_uniform(run.seed, stream, step, run.generator, task=run.task)
        return 0.0 if u < p else 1.0  # the other outcome than the agent's under this u


def _one_hot(n: int, index: int) -> NDArray[np.float64]:
    """The vector that imposes candidate ``index`` (a probability vector: weightable)."""
    out: NDArray[np.float64] = np.eye(n)[index]
    return out


def compose(*steers: _CoreSteer) -> Compose:
    """``compose(Uniform(), FixedHorizon(4))``: the steers applied in order."""
    return Compose(steers)


def identity(steer: _CoreSteer) -> dict[str, Any]:
    """What an arm stores about its steer: ``{"name", "id", "params", "hash"}``.

    ``hash`` is hex SHA-256 over the registered hash of the steer's class (its kind,
    ``module:qualname`` and source digest) and the canonical encoding of its parameters,
    so two arms differ in hash exactly when their code or their parameters differ.

    Raises:
        TypeError: a core ``Steer`` that is not a registered subclass of this module's
            ``Steer`` (derive from ``agentlog.replay.interventions.Steer``).
    """
    if not isinstance(steer, Steer):
        raise TypeError(f"{type(steer).__qualname__} is not registered as an intervention: "
                        "derive it from agentlog.replay.interventions.Steer (which registers "
                        "every subclass) so that its arm can be identified")
    registered = type(steer)._registered
    assert registered is not None  # set by __init_subclass__ for every subclass
    params = steer.params()
    digest = hashlib.sha256(registered.hash.encode("ascii"))
    digest.update(encode_artifact(params, what=f"steer {steer.name!r} parameters"))
    return {"name": steer.name, "id": registered.id, "params": params,
            "hash": digest.hexdigest()}


# ------------------------------------------------------------------------ ForceRecorded


def _first_difference(a: NDArray[Any], b: NDArray[Any]) -> int:
    """The first index where two vectors of one length differ."""
    return int(np.flatnonzero(a != b)[0])


class ForceRecorded(Steer):
    """Pure replay of one recorded run: every draw must reproduce the recorded one.

    At each ``select``/``proceed`` the replay's candidates, agent probabilities, noise
    (regenerated from the replay run's seed and task) and outcome are compared with the
    record at the same stream and step; a recorded steered draw is steered the same way
    again. The first difference raises ``al.ReplayDivergenceError``. ``unreplayed()`` lists the
    recorded draws of the window the replay never reached.

    Args:
        source: a ``WindowView`` (the run and the window of that instance), a ``Trace``
            or a trace path (one run, or ``run=``).
        run: the run index inside the trace, when it holds several.
    """

    name = "force_recorded"

    def __init__(self, source: WindowView | Trace | str | PathLike[str], *,
                 run: int | None = None) -> None:
        view: WindowView | None = None
        if isinstance(source, WindowView):
            view = source
            trace = source.trace
            run = source.run
        else:
            trace = source if isinstance(source, Trace) else al.read(source)
        runs = trace.runs if run is None else [r for r in trace.runs if r.run == run]
        if len(runs) != 1:
            raise ValueError(
                f"ForceRecorded needs one run of {trace.path}; it holds "
                f"{[r.run for r in trace.runs]}: pass run= (or a WindowView)")
        self._trace = trace
        self._run = runs[0]
        self._where = f"{trace.path}, run {self._run.run} ({self._run.run_id})"
        self._records: dict[tuple[str, str, int], tuple[int, Any]] = {}
        inside = None if view is None else _window_and_descendants(self._run, view.window)
        for i, rec in enumerate(self._run.records):
            kind = type(rec)
            if kind is Selection or kind is Continuation:
                tag = "select" if kind is Selection else "proceed"
                self._records[(tag, rec.name, rec.step)] = (i, rec)
        self._scope = {k for k, (_, rec) in self._records.items()
                       if inside is None or rec.window in inside}
        self._seen: set[tuple[str, str, int]] = set()
        self.source_run = self._run.run_id

    def params(self) -> dict[str, Any]:
        return {"run_id": self._run.run_id}

    def _diverged(self, kind: str, stream: str, step: int, index: int | None, what: str,
                  recorded: Any, replayed: Any) -> ReplayDivergenceError:
        record = "no record" if index is None else f"record #{index} of the run"
        return ReplayDivergenceError(
            f"replay diverged from {self._where} at {record} ({kind} {stream!r} step "
            f"{step}): {what} recorded {recorded}, replayed {replayed}",
            record=index, stream=stream, step=step, field=what, recorded=recorded,
            replayed=replayed)

    def _lookup(self, kind: str, stream: str, step: int) -> tuple[int, Any]:
        hit = self._records.get((kind, stream, step))
        if hit is None:
            raise self._diverged(kind, stream, step, None, "the draw", "nothing (the recording "
                                 "never drew this stream at this step)", "a draw")
        self._seen.add((kind, stream, step))
        return hit

    def _noise_key(self, kind: str, stream: str, step: int, index: int
                   ) -> tuple[int, str | None]:
        """The replay run's seed and task, which (with its generator) key the live draws."""
        run = al.current_run()
        if run is None:  # select/proceed only call a steer inside a run
            raise RuntimeError("ForceRecorded steers draws of a recorded run only")
        start = self._run.start
        if (start is not None and run.task != start.task
                and run.noise_seed != noise_seed(run.seed, start.task, run.generator)):
            raise self._diverged(kind, stream, step, index, "task", repr(start.task),
                                 f"{run.task!r} (the task is part of the noise: open the "
                                 f"replay's run with al.record(..., task={start.task!r}))")
        return run.seed, run.task

    def select(self, stream: str, step: int, probs: NDArray[np.float64],
               ids: tuple[Any, ...]) -> NDArray[np.float64] | int | None:
        i, rec = self._lookup("select", stream, step)
        trace = self._trace
        recorded_ids = tuple(decode_pool(trace.blob(rec.pool)))
        if recorded_ids != tuple(ids):
            raise self._diverged("select", stream, step, i, "candidates",
                                 list(recorded_ids), list(ids))
        policy = trace.policy_probs(rec)
        agent = trace.probs(rec) if policy is None else policy
        if not np.array_equal(agent, probs):  # same ids, so the same length
            j = _first_difference(agent, probs)
            raise self._diverged("select", stream, step, i, f"probability of {ids[j]!r}",
                                 float(agent[j]), float(probs[j]))
        run = al.current_run()
        if run is not None and run.generator != rec.generator:
            raise self._diverged("select", stream, step, i, "noise generator", rec.generator,
                                 f"{run.generator} (open the replay's run with "
                                 f"al.record(..., generator={rec.generator!r}))")
        seed, task = self._noise_key("select", stream, step, i)
        now = observing()
        if now != rec.observed:
            raise self._diverged("select", stream, step, i, "observed choice",
                                 rec.observed, now)
        draws = trace.draws(rec)
        if rec.observed is None:
            live = gumbel_draws(ids, seed, stream, step, rec.generator, task=task)
            bad = first_draw_disagreement(draws, live)  # within the CPUs' rounding of log
        else:  # the posterior noise given the agent's vector and what was observed
            live = posterior_gumbel_draws(ids, agent, rec.observed, seed, stream, step,
                                          rec.generator, task=task)
            bad = first_posterior_disagreement(draws, live, agent)
        if bad is not None:
            raise self._diverged("select", stream, step, i, f"Gumbel draw of {ids[bad]!r}",
                                 float(draws[bad]), float(live[bad]))
        used = trace.probs(rec)
        expected = rec.choice
        if not rec.forced:
            with np.errstate(divide="ignore"):
                log_used = np.log(used)
            if not choice_agrees(log_used, live, rec.choice):
                expected = int(np.argmax(log_used + live))
        if expected != rec.choice:
            raise self._diverged("select", stream, step, i, "choice",
                                 f"{rec.choice} ({recorded_ids[rec.choice]!r})",
                                 f"{expected} ({recorded_ids[expected]!r})")
        if rec.forced:
            return int(rec.choice)
        return None if policy is None else used

    def proceed(self, stream: str, step: int, p: float) -> float | bool | None:
        i, rec = self._lookup("proceed", stream, step)
        agent = rec.p if rec.policy_p is None else rec.policy_p
        if agent != p:
            raise self._diverged("proceed", stream, step, i, "p_continue", agent, p)
        seed, task = self._noise_key("proceed", stream, step, i)
        u = continuation_uniform(seed, stream, step, task=task)
        if u != rec.u:
            raise self._diverged("proceed", stream, step, i, "uniform", rec.u, u)
        decision = rec.decision if rec.forced else bool(u < rec.p)
        if decision != rec.decision:
            raise self._diverged("proceed", stream, step, i, "decision", rec.decision,
                                 decision)
        if rec.forced:
            return bool(rec.decision)
        return None if rec.policy_p is None else float(rec.p)

    def unreplayed(self) -> list[tuple[str, str, int]]:
        """(kind, stream, step) of the recorded draws in scope the replay has not made."""
        return sorted(self._scope - self._seen)


def _window_and_descendants(run: Any, window: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for view in run.windows:
        children.setdefault(view.parent, []).append(view.window)
    out, todo = set(), [window]
    while todo:
        w = todo.pop()
        out.add(w)
        todo.extend(children.get(w, ()))
    return out

