"""``select`` and ``proceed``: logged, identity-keyed random decisions.

``select`` draws ``argmax_i(log p_i + g_i)`` with ``g_i`` standard Gumbel noise keyed by
(run seed and task, stream, step, candidate id) — the Gumbel-max trick, so the choice is
a sample from ``p`` — and records the full vector, the candidate pool, the draws and the
choice ([SSC] §3.1 and Appendix D: estimators need the probability of the chosen document
*and* the support of every logged vector). ``proceed`` draws ``u`` keyed by (seed and
task, stream, step) and continues iff ``u < p_continue``. The run's ``noise_seed`` is
its seed with its task folded in (``agentlog._noise.noise_seed``).

Examples:
    >>> import agentlog as al
    >>> i = al.select([0.2, 0.8], candidates=["a", "b"], name="doc")
    >>> i in (0, 1)
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from math import isfinite as _isfinite
from time import perf_counter_ns as _perf_ns
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import _noise, _pools, _state
from ._posterior import posterior_keyed
from ._records import Continuation, Selection
from ._spans import events as _events
from ._spans import tracer as _otel
from ._state import current_run_var, window_in
from ._steering import current_steer_var

SUM_TOLERANCE = 1e-6
_fallback_rng = np.random.default_rng()


def _select_iv(probs: ArrayLike, normalize: bool, name: str
               ) -> tuple[NDArray[np.float64], float]:
    """The checked (and, with ``normalize``, normalised) vector and its smallest entry.

    The smallest entry is the vector's own (``min(p / total)`` is ``min(p) / total``, as
    division by a positive number keeps the order): a caller that finds it positive knows
    there is no zero to count without another pass.
    """
    try:
        p = np.asarray(probs, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"`probs` of select {name!r} must be a 1-D array of numbers; {exc}"
        ) from None
    if p.ndim != 1 or p.shape[0] == 0:
        raise ValueError(
            f"`probs` of select {name!r} must be a non-empty 1-D vector; found shape {p.shape}"
        )
    # One sum and one min decide the common case; the slow diagnosis runs only on failure.
    total = float(p.sum())
    lo = float(p.min())
    if not _isfinite(total) or lo < 0:
        _diagnose(p, name, total)
    if normalize:
        if total <= 0:
            raise ValueError(
                f"`probs` of select {name!r} sums to {total}; cannot normalise an all-zero vector"
            )
        p = p / total
        lo /= total
    elif abs(total - 1.0) > SUM_TOLERANCE:
        raise ValueError(
            f"`probs` of select {name!r} must sum to 1 within {SUM_TOLERANCE}; found sum "
            f"{total!r}. Pass normalize=True to renormalise scores that are proportional "
            "to probabilities."
        )
    return p, lo


def _diagnose(p: NDArray[np.float64], name: str, total: float) -> None:
    """Raise the error of a vector whose sum is not finite or that has a negative entry."""
    if not np.isfinite(p).all():
        bad = int(np.flatnonzero(~np.isfinite(p))[0])
        raise ValueError(
            f"`probs` of select {name!r} must be finite; found {p[bad]} at index {bad}"
        )
    negative = np.flatnonzero(p < 0)
    if negative.shape[0]:
        bad = int(negative[0])
        raise ValueError(
            f"`probs` of select {name!r} must be non-negative; found {p[bad]} at index {bad}"
        )
    raise ValueError(  # finite entries whose float64 sum overflows
        f"`probs` of select {name!r} sums to {total} in float64 (largest entry "
        f"{float(p.max())!r}); scale the scores down before passing them"
    )


def _truncate(
    p: NDArray[np.float64], top_k: int | None, top_p: float | None
) -> NDArray[np.float64]:
    """Top-k / nucleus truncation, renormalised. Ties at the boundary are kept by index."""
    keep = np.ones(p.shape[0], dtype=bool)
    order = np.argsort(-p, kind="stable")
    if top_k is not None:
        if top_k < 1:
            raise ValueError(f"`top_k` must be >= 1; found {top_k}")
        keep[order[top_k:]] = False
    if top_p is not None:
        if not 0.0 < top_p <= 1.0:
            raise ValueError(f"`top_p` must be in (0, 1]; found {top_p}")
        cumulative = np.cumsum(p[order])
        # the smallest prefix whose mass reaches top_p
        cut = int(np.searchsorted(cumulative, top_p - 1e-12)) + 1
        keep[order[cut:]] = False
    q: NDArray[np.float64] = np.where(keep, p, 0.0)
    out: NDArray[np.float64] = q / q.sum()
    return out


# The observed choice of the select now consulting a steer (replay's steers regenerate the
# draw select is about to make: the posterior one when a choice was observed).
_observing: ContextVar[int | None] = ContextVar("agentlog_observing", default=None)


def observing() -> int | None:
    """The observed choice of the ``select(..., observed=)`` whose steer is running, else
    None (``agentlog.reentry``: what a steer needs to regenerate that select's draws)."""
    return _observing.get()


def _observed_iv(observed: Any, p: NDArray[np.float64], name: str) -> int:
    if isinstance(observed, bool) or not isinstance(observed, int | np.integer):
        raise TypeError(f"`observed` of select {name!r} must be an int index; found "
                        f"{type(observed).__name__}")
    k = int(observed)
    if not 0 <= k < p.shape[0]:
        raise ValueError(f"`observed` {k} of select {name!r} lies outside its "
                         f"{p.shape[0]} candidates")
    if not p[k] > 0:
        raise ValueError(
            f"`observed` {k} of select {name!r} has probability 0 under the vector given "
            "(after top_k/top_p): no draw from it gives that choice; pass the vector the "
            "choice was drawn from")
    return k


def select(
    probs: ArrayLike,
    candidates: Sequence[Any] | NDArray[Any] | None = None,
    *,
    name: str = "select",
    owner: Literal["model", "scaffold"] = "model",
    normalize: bool = False,
    top_k: int | None = None,
    top_p: float | None = None,
    observed: int | None = None,
) -> int:
    """Draw one candidate from ``probs`` and record the draw. Returns its index.

    Args:
        probs: probability of each candidate; finite, non-negative, summing to 1 within
            1e-6 (or any non-negative scores with ``normalize=True``). Zeros are allowed and
            counted: they break overlap, and estimators need to know.
        candidates: stable ids (str, int or bytes), one per entry of ``probs``; they key
            the random draws, so a reordered pool gets the same noise per document.
            Defaults to ``0..n-1``.
        name: the stream name; steps are counted per stream within the run.
        owner: who owns the decision: ``"model"`` or ``"scaffold"`` ([DMC]).
        normalize: renormalise ``probs`` instead of requiring a sum of 1.
        top_k, top_p: truncate the vector before drawing; the untruncated vector is logged
            beside it.
        observed: the index of a choice made outside agentlog from ``probs`` (a served
            model's sampled answer, its vector read from the logprobs): it is recorded,
            and returned, as the choice, with the posterior Gumbel noise given it
            (``agentlog.posterior_draws``, keyed by the run's seed, the stream, the step
            and the candidates, so a replay regenerates it) instead of fresh draws. Under
            an intervention that replaces the vector, the choice is the counterfactual
            ``argmax (log q + g)`` on that noise: paired with the observed one. Its
            probability must be positive.

    With no active recorder the draw still happens (from a process-local generator) and
    nothing is recorded; an ``observed`` choice is returned as it is.
    """
    p, lo = _select_iv(probs, normalize, name)
    if owner not in ("model", "scaffold"):
        raise ValueError(f"`owner` must be 'model' or 'scaffold'; found {owner!r}")
    raw: NDArray[np.float64] | None = None
    if top_k is not None or top_p is not None:
        raw = p
        p = _truncate(p, top_k, top_p)
        lo = 0.0  # truncated entries are zeros: count them
    n = p.shape[0]
    run = current_run_var.get() if _state.active_runs else None
    if candidates is not None and len(candidates) != n:
        raise ValueError(
            f"`candidates` of select {name!r} has {len(candidates)} ids but `probs` has {n} "
            "entries; pass one id per probability"
        )
    if observed is not None:
        observed = _observed_iv(observed, p, name)
        if run is None:
            return observed
    if run is None:
        if _state.active_runs:
            _state.warn_runless_thread(f"select {name!r}")
        with np.errstate(divide="ignore"):
            return int(np.argmax(np.log(p) + _fallback_rng.gumbel(size=n)))
    pool = _pools.pool(candidates, n)
    step = run.next_step(name)
    steer = current_steer_var.get()
    policy: NDArray[np.float64] | None = None
    forced = False
    steer_name: str | None = None
    forced_choice = -1
    if steer is not None:
        token = None if observed is None else _observing.set(observed)
        try:
            override = steer.select(name, step, p, pool.ids)
        finally:
            if token is not None:
                _observing.reset(token)
        if override is not None:
            steer_name = steer.name
            if isinstance(override, int | np.integer):
                if not 0 <= int(override) < n:
                    raise ValueError(
                        f"steer {steer.name!r} forced index {override} in select {name!r} "
                        f"with {n} candidates"
                    )
                forced, forced_choice = True, int(override)
            else:
                policy = p
                p, lo = _select_iv(override, False, f"{name} (steered by {steer.name})")
                if p.shape[0] != n:
                    raise ValueError(
                        f"steer {steer.name!r} returned {p.shape[0]} probabilities for "
                        f"select {name!r} with {n} candidates"
                    )
    generator = run.generator
    if observed is not None:  # the noise given the agent's vector and the observed choice
        draws = posterior_keyed(p if policy is None else policy, observed,
                                _pools.keys_for(pool, generator),
                                run.noise_seed, name, step)
    else:
        draws = _noise.gumbel(_pools.keys_for(pool, generator), run.noise_seed, name, step)
    # No zero when the smallest entry is positive (the common case: no counting pass).
    n_zero = 0 if lo > 0 else n - int(np.count_nonzero(p))  # -0.0 counts as a zero
    window = window_in(run)
    if forced:
        choice = forced_choice
    elif observed is not None and policy is None:
        choice = observed  # its own noise makes it the argmax: no rounding may move it
    else:
        with np.errstate(divide="ignore"):  # log 0 = -inf: never chosen
            choice = int(np.argmax(np.log(p) + draws))
    writer = run.writer
    writer.put_blob(pool.hash, pool.encoded, "pool")
    probs_bytes = p.tobytes()  # float64 is little-endian on every platform numpy supports
    # The one record built positionally (STYLE: records by keyword, but for one measured
    # hot constructor): select runs several times per window, and 19 keywords cost
    # ~0.7 µs a call here. tests/core/test_record_field_order.py pins the order. The
    # draws are this call's own array: the writer gets a view, not a copy.
    writer.put(
        Selection(
            run.index, -1 if window is None else window.id, name, step, owner, pool.hash, n,
            probs_bytes, draws.data, choice, n_zero, generator,  # type: ignore[arg-type]
            top_k, top_p, None if raw is None else raw.tobytes(),
            run.t0_ns + (_perf_ns() - run.t0_perf),
            None if policy is None else policy.tobytes(), steer_name, forced, observed,
        )
    )
    if window is not None:
        with run.lock:  # WindowState.add_usage(selections=1) without its other counters
            window.selections += 1
        if window.span is not None:
            # The entropy comes from the function export runs on the stored copy of ``p``
            # (``vector_entropy``): the live event and the exported one agree bit for bit.
            _events.emit(
                run, window.span, "agentlog.select",
                _otel.selection_event_attributes(name, step, owner, p, choice, probs_bytes,
                                                 pool.ids[choice], n_zero),
            )
    return choice


def proceed(p_continue: float, *, name: str = "proceed") -> bool:
    """Decide whether to continue: True iff ``u < p_continue``, ``u`` keyed by (seed, name, step).

    The seed is the run's ``noise_seed`` (its seed with its task folded in). With no active
    recorder the decision is drawn from a process-local generator.
    """
    try:
        p = float(p_continue)
    except (TypeError, ValueError):
        raise TypeError(
            f"`p_continue` of proceed {name!r} must be a number; found "
            f"{type(p_continue).__name__}"
        ) from None
    if not 0.0 <= p <= 1.0:  # also rejects NaN
        raise ValueError(f"`p_continue` of proceed {name!r} must be in [0, 1]; found {p}")
    run = current_run_var.get() if _state.active_runs else None
    if run is None:
        if _state.active_runs:
            _state.warn_runless_thread(f"proceed {name!r}")
        return bool(_fallback_rng.random() < p)
    step = run.next_step(name)
    steer = current_steer_var.get()
    policy_p: float | None = None
    steer_name: str | None = None
    forced = False
    u = _noise.uniform(run.noise_seed, name, step)
    if steer is not None:
        override = steer.proceed(name, step, p)
        if override is not None:
            steer_name = steer.name
            if isinstance(override, bool):
                forced = True
                decision = override
            else:
                policy_p, p = p, float(override)
                if not 0.0 <= p <= 1.0:
                    raise ValueError(
                        f"steer {steer.name!r} returned p_continue {p} for proceed {name!r}"
                    )
    if not forced:
        decision = u < p
    window = window_in(run)
    run.writer.put(
        Continuation(
            run=run.index,
            window=-1 if window is None else window.id,
            name=name,
            step=step,
            p=p,
            u=u,
            decision=decision,
            t_ns=run.now_ns(),
            policy_p=policy_p,
            steer=steer_name,
            forced=forced,
        )
    )
    if window is not None and window.span is not None:
        _events.emit(run, window.span, "agentlog.proceed",
                     _otel.continuation_event_attributes(name, step, p, u, decision))
    return decision


