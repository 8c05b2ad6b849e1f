"""Gumbel noise consistent with an observed choice: the posterior of the Gumbel-max model.

``select`` draws ``choice = argmax_i (log p_i + g_i)`` with ``g_i`` i.i.d. standard Gumbel,
and records ``g``: a replay under another vector ``p'`` re-draws with the same ``g`` (common
random numbers), so the factual and the counterfactual choice are paired. A choice made
outside agentlog (a served model's sampled answer, read with its logprobs) comes with ``p``
and the choice but no ``g``. Given them, the noise is not free: it is the Gumbel noise
conditioned on ``argmax (log p + g) = k``, which can be sampled exactly, top-down
("Counterfactual Off-Policy Evaluation with Gumbel-Max Structural Causal Models",
Oberst & Sontag 2019; the top-down construction of "A* Sampling", Maddison, Tarlow &
Minka 2014):

* the maximum ``M = max_i (log p_i + g_i)`` is Gumbel with location ``log Σ p_i`` (0 for a
  normalised vector), independent of which index attains it: ``M = log Σp − log(−log u₀)``;
* the chosen index sits at the maximum: ``g_k = M − log p_k``;
* every other index with ``p_i > 0`` is a Gumbel with location ``log p_i`` truncated below
  ``M``: with ``G_i = log p_i − log(−log u_i)``, ``log p_i + g_i = −log(e^{−M} + e^{−G_i})``;
* an index with ``p_i = 0`` is never the argmax, whatever its noise: its ``g_i`` is an
  untruncated standard Gumbel ``−log(−log u_i)``.

Under ``p`` these draws reproduce ``k`` always; under another vector ``p'`` the choice
``argmax (log p'_i + g_i)`` is distributed as the counterfactual of the Gumbel-max
structural model given the factual observation.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import _noise

__all__ = ["posterior_draws", "posterior_from_uniforms", "posterior_keyed"]

# The tag of the streams a posterior's uniforms come from: a NUL cannot be in a stream
# name a user would pick, so they never meet a stream's own draws.
_TAG = "\x00posterior"
_TAG_MAX = "\x00posterior-max"


def posterior_from_uniforms(probs: NDArray[np.float64], choice: int, u_max: float,
                            u: NDArray[np.float64]) -> NDArray[np.float64]:
    """The posterior draws (module docs) from uniforms in (0, 1): ``u_max`` for the
    maximum, ``u`` one per index (``u[choice]`` unused). ``probs[choice]`` must be > 0."""
    with np.errstate(divide="ignore"):
        log_p = np.log(probs)
    top = float(np.log(probs.sum())) - float(np.log(-np.log(u_max)))
    draws = -np.log(-np.log(u))  # the zeros' own noise; the others are replaced below
    positive = probs > 0
    shifted = log_p[positive] + draws[positive]  # G_i, Gumbel with location log p_i
    draws[positive] = -np.logaddexp(-top, -shifted) - log_p[positive]
    draws[choice] = top - log_p[choice]
    return draws


def posterior_keyed(probs: NDArray[np.float64], choice: int, keys: NDArray[np.uint64],
                    seed: int, stream: str, step: int) -> NDArray[np.float64]:
    """The posterior draws of ``select(..., observed=choice)``: their uniforms keyed, as
    every draw of a run, by (noise seed, stream, step, candidate key), from streams of
    their own, so that a replay regenerates them from what the run recorded."""
    u = _noise.uniforms(keys, _noise.step_base(seed, stream + _TAG, step))
    u_max = _noise.uniforms(keys[choice:choice + 1],
                            _noise.step_base(seed, stream + _TAG_MAX, step))
    return posterior_from_uniforms(probs, choice, float(u_max[0]), u)


def posterior_draws(probs: ArrayLike, choice: int, *,
                    seed: int | np.random.Generator | None = None) -> NDArray[np.float64]:
    """Gumbel noise ``g`` under which ``choice`` is the Gumbel-max draw from ``probs``,
    sampled from its posterior (module docs): ``argmax (log probs + g) == choice`` always,
    and ``argmax (log q + g)`` is the counterfactual choice under another vector ``q``.

    Args:
        probs: the probability vector the choice was drawn from (finite, non-negative,
            summing to 1 within 1e-6).
        choice: the index chosen; its probability must be positive.
        seed: an int, a ``numpy.random.Generator`` or None (fresh entropy). Inside a run,
            ``al.select(probs, observed=choice)`` keys the draws by the run's seed, the
            stream, the step and the candidates instead, as every other draw.

    Raises:
        ValueError: a vector that is no probability vector, or a choice outside it or of
            probability 0 (no noise makes it the argmax).

    Examples:
        >>> import numpy as np
        >>> import agentlog as al
        >>> p = np.array([0.7, 0.2, 0.1])
        >>> g = al.posterior_draws(p, 2, seed=0)
        >>> int(np.argmax(np.log(p) + g))
        2
    """
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 1 or p.size == 0 or not np.isfinite(p).all() or (p < 0).any():
        raise ValueError("`probs` must be a non-empty 1-D vector of finite, non-negative "
                         f"probabilities; found {np.asarray(probs)!r}")
    if abs(float(p.sum()) - 1.0) > 1e-6:
        raise ValueError(f"`probs` must sum to 1 (within 1e-6); they sum to {p.sum()!r}")
    if isinstance(choice, bool) or not isinstance(choice, int | np.integer):
        raise ValueError(f"`choice` must be an int index; found {choice!r}")
    k = int(choice)
    if not 0 <= k < p.size:
        raise ValueError(f"`choice` {k} lies outside the {p.size} probabilities")
    if not p[k] > 0:
        raise ValueError(f"`choice` {k} has probability 0: no noise makes it the Gumbel-max "
                         "draw; pass the vector the choice was drawn from")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    # Uniforms strictly inside (0, 1): -log(-log u) is finite for every one.
    u = (rng.integers(0, 2**53, size=p.size + 1).astype(np.float64) + 0.5) / 2.0**53
    return posterior_from_uniforms(p, k, float(u[0]), u[1:])
