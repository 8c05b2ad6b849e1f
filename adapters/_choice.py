"""``choice_probs``: the candidate probability vector over option tokens, from logprobs.

A model asked to answer with one of the option labels ("A".."D") gives, at the answer
position, a log-probability for each token it lists. The candidate vector over the labels
is those probabilities renormalised over the mass the labels received ([DMC] §3: the
target-option margin is read off these log-probabilities; [SSC] §3.1: the logged vector is
what an estimator reweights). The mass the renormalisation removed — everything the
model put on other tokens, and on labels it did not list — is reported, never hidden:
a vector renormalised from 2 % of the mass is a different observation from one
renormalised from 99 %.

Examples:
    >>> from agentlog.adapters import choice_probs
    >>> body = {"choices": [{"logprobs": {"content": [{"token": "A", "logprob": -0.2,
    ...     "top_logprobs": [{"token": "A", "logprob": -0.2}, {"token": " B", "logprob": -1.9},
    ...                      {"token": "so", "logprob": -3.0}]}]}}]}
    >>> p = choice_probs(body, ["A", "B"])
    >>> [round(float(x), 3) for x in p.probs], round(p.unobserved_mass, 3), p.position
    ([0.846, 0.154], 0.032, 0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agentlog import NoLogprobsError

__all__ = ["ChoiceProbs", "NoLogprobsError", "choice_probs", "choice_probs_from_positions"]


@dataclass(frozen=True, eq=False)
class ChoiceProbs:
    """A candidate probability vector read from a model's logprobs at one position.

    Pass it straight to ``agentlog.select(probs, candidates=probs.labels, owner="model")``:
    it converts to the vector ``probs`` (numpy's ``__array__``).

    Attributes:
        labels: the candidates, in the order of ``probs``.
        probs: probability of each label, renormalised over ``label_mass`` (sums to 1).
            A label the model did not list gets 0 (see ``missing``, ``missing_bound``).
        logprobs: the observed log-probability of each label (tokens that normalise to
            the same label are summed); ``-inf`` for a label not listed.
        label_mass: the probability the model put on the labels, before renormalising.
        unobserved_mass: ``1 - label_mass``: what the renormalisation removed.
        missing: labels not among the listed tokens at ``position``.
        missing_bound: each missing label's probability is at most this (the smallest
            probability listed at ``position``); None when every label was listed.
        position: index of the token position the vector was read from.
        token: the token actually sampled at ``position``.
        source: where the numbers came from, e.g. ``"openai.chat.top_logprobs"``.
    """

    labels: tuple[Any, ...]
    probs: NDArray[np.float64]
    logprobs: NDArray[np.float64]
    label_mass: float
    unobserved_mass: float
    missing: tuple[Any, ...]
    missing_bound: float | None
    position: int
    token: str | None
    source: str

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> NDArray[Any]:
        return self.probs if dtype is None else self.probs.astype(dtype)

    def __len__(self) -> int:
        return len(self.labels)

    def __repr__(self) -> str:
        vec = ", ".join(f"{lab!r}: {p:.4g}" for lab, p in zip(self.labels, self.probs,
                                                                strict=True))
        return (f"ChoiceProbs({{{vec}}}, unobserved_mass={self.unobserved_mass:.4g}, "
                f"missing={list(self.missing)}, position={self.position}, "
                f"source={self.source!r})")


def _labels_iv(labels: Sequence[Any]) -> tuple[Any, ...]:
    if isinstance(labels, str | bytes):
        raise TypeError(f"`labels` must be a sequence of option labels such as ['A', 'B']; "
                        f"found the single string {labels!r}")
    out = tuple(labels)
    if not out:
        raise ValueError("`labels` must name at least one option; found an empty sequence")
    if len(set(out)) != len(out):
        raise ValueError(f"`labels` must be distinct; found {list(out)}")
    return out


def _norm(token: Any) -> Any:
    return token.strip() if isinstance(token, str) else token


def choice_probs_from_positions(
    positions: Sequence[Sequence[tuple[Any, float]]],
    sampled: Sequence[Any],
    labels: Sequence[Any],
    *,
    position: int | None = None,
    source: str,
    complete: bool = False,
) -> ChoiceProbs:
    """The vector over ``labels`` from per-position ``(token, logprob)`` lists.

    Args:
        positions: for each generated position, the listed tokens and their logprobs.
        sampled: the token sampled at each position.
        labels: option labels (str, compared after stripping whitespace) or token ids.
        position: read this position; None: the first one listing any label.
        source: what produced the numbers (kept on the result).
        complete: the lists give every label's logprob (vLLM ``logprob_token_ids``), so a
            label not listed has probability 0 and no ``missing_bound``.

    Raises:
        NoLogprobsError: there are no positions, or no position lists any label.
        ValueError: ``position`` is out of range; ``labels`` is empty or repeats a label.
    """
    labs = _labels_iv(labels)
    if not positions:
        raise NoLogprobsError(
            f"{source}: the response has no token logprobs; request them (openai Chat: "
            "logprobs=True, top_logprobs=20; Responses: include=['message.output_text."
            "logprobs'], top_logprobs=20; vLLM: SamplingParams(logprobs=20))")
    wanted = {_norm(lab): i for i, lab in enumerate(labs)}
    if position is None:
        position = next((i for i, listed in enumerate(positions)
                         if any(_norm(t) in wanted for t, _ in listed)), None)
        if position is None:
            seen = sorted({str(t) for listed in positions[:3] for t, _ in listed})[:12]
            raise NoLogprobsError(
                f"{source}: none of the labels {list(labs)} is listed at any of the "
                f"{len(positions)} positions (first positions list {seen}); raise "
                "top_logprobs, constrain the answer format, or pass position=")
    elif not -len(positions) <= position < len(positions):
        raise ValueError(f"`position` {position} is out of range: the response has "
                         f"{len(positions)} token positions")
    position %= len(positions)
    listed = positions[position]
    mass = np.zeros(len(labs))
    seen_label = [False] * len(labs)
    for token, logprob in listed:
        i = wanted.get(_norm(token))
        lp = float(logprob)
        if i is not None and math.isfinite(lp):
            mass[i] += math.exp(lp)
            seen_label[i] = True
    label_mass = float(mass.sum())
    if label_mass <= 0:
        raise NoLogprobsError(f"{source}: position {position} lists none of the labels "
                              f"{list(labs)} with a finite logprob")
    with np.errstate(divide="ignore"):
        logprobs = np.where(seen_label, np.log(np.where(seen_label, mass, 1.0)), -np.inf)
    missing = tuple(lab for lab, s in zip(labs, seen_label, strict=True) if not s)
    finite = [math.exp(float(lp)) for _, lp in listed if math.isfinite(float(lp))]
    bound = None if complete or not missing or not finite else min(finite)
    return ChoiceProbs(
        labels=labs, probs=mass / label_mass, logprobs=logprobs,
        label_mass=min(label_mass, 1.0), unobserved_mass=max(0.0, 1.0 - label_mass),
        missing=missing, missing_bound=bound, position=position,
        token=None if position >= len(sampled) else sampled[position], source=source,
    )


def _as_dict(response: Any) -> Any:
    if isinstance(response, Mapping):
        return response
    dump = getattr(response, "model_dump", None)
    if dump is not None:
        return dump(mode="json")
    return None


def _entries(content: Sequence[Mapping[str, Any]]) -> tuple[list[list[tuple[Any, float]]],
                                                             list[Any]]:
    positions: list[list[tuple[Any, float]]] = []
    sampled: list[Any] = []
    for entry in content:
        top = entry.get("top_logprobs") or []
        listed = [(t.get("token"), float(t.get("logprob", -math.inf))) for t in top]
        if not any(tok == entry.get("token") for tok, _ in listed):
            listed.append((entry.get("token"), float(entry.get("logprob", -math.inf))))
        positions.append(listed)
        sampled.append(entry.get("token"))
    return positions, sampled


def choice_probs(response: Any, labels: Sequence[Any], *, position: int | None = None,
                 choice: int = 0) -> ChoiceProbs:
    """The candidate probability vector over ``labels`` read from ``response``'s logprobs.

    Args:
        response: an openai ``ChatCompletion`` or Responses ``Response`` (objects or their
            JSON bodies, also from an OpenAI-compatible server), or a vLLM offline
            ``RequestOutput`` (read by ``agentlog.adapters.vllm.choice_probs_from_vllm``).
        labels: the option labels (``["A", "B", "C", "D"]``); a listed token counts for a
            label when it equals the label after stripping whitespace (" B" counts for
            "B"; several such tokens are summed).
        position: the token position to read; None: the first position listing a label.
        choice: which choice of an ``n > 1`` Chat response.

    Raises:
        NoLogprobsError: the response has no logprobs (anthropic never returns them), or no
            position lists any label. Never an invented vector.
    """
    body = _as_dict(response)
    if isinstance(body, Mapping):
        if isinstance(body.get("choices"), list):
            choices = body["choices"]
            if not 0 <= choice < len(choices):
                raise ValueError(f"`choice` {choice} is out of range: the response has "
                                 f"{len(choices)} choices")
            content = ((choices[choice].get("logprobs") or {}).get("content")) or []
            positions, sampled = _entries(content)
            return choice_probs_from_positions(positions, sampled, labels, position=position,
                                               source="openai.chat.top_logprobs")
        if body.get("object") == "response" or (
                isinstance(body.get("output"), list) and "created_at" in body):
            content = [lp for item in body.get("output") or () if item.get("type") == "message"
                       for part in item.get("content") or () if part.get("type") == "output_text"
                       for lp in part.get("logprobs") or ()]
            positions, sampled = _entries(content)
            return choice_probs_from_positions(positions, sampled, labels, position=position,
                                               source="openai.responses.top_logprobs")
        if body.get("type") == "message" and isinstance(body.get("content"), list):
            _labels_iv(labels)
            raise NoLogprobsError(
                "anthropic Messages responses carry no logprobs, so no candidate vector can be "
                "read from them; use a provider that returns logprobs (openai, vLLM) for "
                "model-owned choices, or record the choice as owner='scaffold'")
    items = response if isinstance(response, list | tuple) else [response]
    if items and all(hasattr(item, "outputs") for item in items):
        from . import vllm  # vLLM's own parsing; importing it does not import vllm itself

        return vllm.choice_probs_from_vllm(response, labels)
    raise NoLogprobsError(
        f"cannot read logprobs from a {type(response).__qualname__}; expected an openai "
        "ChatCompletion or Response (or their JSON bodies), an anthropic Message (which has "
        "none) or a vLLM RequestOutput")
