"""A scorer that reads a served model's option log-probabilities: [ASV]'s target margin.

The bundled deep-research channels (``direct``, ``quote``) score states with a
deterministic rating; this module scores the same retrieval states with a real model
behind an OpenAI-compatible endpoint (OpenAI, vLLM, ...). For each state, view and cyclic
layout it asks the model to answer with one option label, reads the label probabilities
at the answer position through ``agentlog.adapters.choice_probs`` and returns the margin
log p(target) − max over the other options of log p(option) ([ASV] §4: the target-option
margin; renormalising over the labels does not change a difference of logs). Calls go
through ``agentlog.adapters.openai`` and the replay's model cache: with ``--cache PATH`` a
re-run is served from it, and ``--frozen`` makes a missing answer an ``al.CacheMiss``.

Importing registers the scorer ``logprob-margin``. ``register_channels(model=...,
base_url=...)`` registers the channels ``logprob-direct`` (no added view) and
``logprob-quote`` (the bundled quote view) for one model; call it from your app module::

    # myapp.py
    from agentlog.examples.logprob_scorer import register_channels
    register_channels(model="gpt-4o-mini", base_url="https://api.openai.com/v1")

    $ OPENAI_API_KEY=... agentlog replay runs/*.zst --channel logprob-direct \\
        --channel logprob-quote --window retrieval --app myapp --cache scores.sqlite3

The API key comes from ``$OPENAI_API_KEY`` (``"EMPTY"`` when unset, what a local vLLM
server accepts); it is never a channel parameter, so it reaches no hash, trace or cache key.
Needs ``pip install openai``.

Examples:
    >>> from agentlog.examples.logprob_scorer import option_lines, LABELS
    >>> option_lines(1)
    ['A: none of the above', 'B: supports', 'C: opposes', 'D: mixed']
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

import numpy as np

import agentlog as al
from agentlog.adapters import choice_probs
from agentlog.examples.deep_research.agent import LAYOUTS, OPTIONS, target_option
from agentlog.examples.deep_research.channels import pool_of, quote

__all__ = [
    "LABELS",
    "PROMPT",
    "TargetNotListedError",
    "logprob_margin",
    "logprob_request",
    "option_lines",
    "register_channels",
    "render_prompt",
    "state_text",
]

LABELS = ("A", "B", "C", "D")
TOP_LOGPROBS = 20
PROMPT = (
    "You are evaluating whether the evidence state supports a claim. Use only the evidence "
    "below.\nEvidence: {evidence}\n{view}Options:\n{options}\nOutput exactly one option "
    "label."
)

# One wrapped client per (model cache, endpoint): a client is bound to the cache it was
# wrapped with, so a cache that is gone takes its clients with it.
_clients: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
_uncached: dict[str, Any] = {}
_clients_lock = threading.Lock()


class TargetNotListedError(al.AdapterError):
    """The model listed no log-probability for an option label at the answer position."""


def option_lines(layout: int) -> list[str]:
    """``"A: supports"``, ... : the options in cyclic layout ``layout`` (option i at
    position ``LAYOUTS[layout, i]``)."""
    at = {int(LAYOUTS[layout, i]): option for i, option in enumerate(OPTIONS)}
    return [f"{LABELS[k]}: {at[k]}" for k in range(len(OPTIONS))]


def state_text(state: Any) -> str:
    """The projected state as text: the question, then for x⁻ that no document is opened
    yet, for x⁺ the opened documents with their evidence scores."""
    question = f"question {state.entry['pool']['task_id']}: "
    if state.before:
        return (f"{question}no document opened yet; {len(state.value['pool']['ids'])} "
                f"candidates, ranked by {state.value['ranking']}")
    return question + "; ".join(f"{d}: evidence {y:+.2f}" for d, y in zip(
        state.value["opened"], state.value["y"], strict=True))


def render_prompt(template: str, state: Any, view: str | None, layout: int) -> str:
    """The prompt of one state, view and layout (``template`` is the channel's)."""
    view_text = "" if view is None else f"Quoted stances: {view}\n"
    return template.format(evidence=state_text(state), view=view_text,
                           options="\n".join(option_lines(layout)))


def _client(base_url: str, cache: Any) -> Any:
    try:
        import openai
    except ImportError as exc:
        raise al.MissingDependencyError(
            "the logprob scorer needs the openai client: pip install openai") from exc
    from agentlog.adapters import openai as openai_adapter

    with _clients_lock:
        clients = _uncached if cache is None else _clients.setdefault(cache, {})
        client = clients.get(base_url)
        if client is None:
            raw = openai.OpenAI(base_url=base_url,
                                api_key=os.environ.get("OPENAI_API_KEY", "EMPTY"),
                                max_retries=0, timeout=120)
            client = clients[base_url] = openai_adapter.wrap(raw, cache=cache)
    return client


def logprob_request(label_token_ids: list[int] | None) -> dict[str, Any]:
    """How the label log-probabilities are asked for: the top ``TOP_LOGPROBS`` tokens, or,
    given the labels' token ids, exactly those (vLLM's ``logprob_token_ids``: every label
    is scored, whatever its rank)."""
    if label_token_ids:
        return {"extra_body": {"logprob_token_ids": list(label_token_ids)}}
    return {"top_logprobs": TOP_LOGPROBS}


@al.scorer("logprob-margin", labels=list(LABELS), top_logprobs=TOP_LOGPROBS, max_tokens=1,
           temperature=0.0)
def logprob_margin(state: Any, view: str | None, layout: int, *, context: Any) -> float:
    """log p(target label) − max log p(other label) at the answer position."""
    ch = context.channel
    base_url = ch.params.get("base_url")
    if not ch.model or not base_url:
        raise ValueError(f"channel {ch.name!r} needs model= and base_url=: register it with "
                         "register_channels(model=..., base_url=...)")
    prompt = render_prompt(ch.template or PROMPT, state, view, layout)
    reply = _client(base_url, context.cache).chat.completions.create(
        model=ch.model, messages=[{"role": "user", "content": prompt}], max_tokens=1,
        temperature=0.0, logprobs=True, **logprob_request(ch.params.get("label_token_ids")))
    probs = choice_probs(reply, LABELS)
    if probs.missing:
        raise TargetNotListedError(
            f"the model listed no log-probability for label(s) {list(probs.missing)} among "
            f"its top {TOP_LOGPROBS} tokens; its margin is unbounded. Use a model that "
            "answers with the option labels, or a prompt that asks for them")
    position = int(LAYOUTS[layout, target_option(pool_of(state.entry).theta_star)])
    logp = np.asarray(probs.logprobs, dtype=np.float64)
    others = np.delete(logp, position)
    return float(logp[position] - others.max())


def register_channels(*, model: str, base_url: str, layouts: int = len(OPTIONS),
                      template: str = PROMPT,
                      label_token_ids: list[int] | None = None) -> tuple[str, str]:
    """Register ``logprob-direct`` (no added view) and ``logprob-quote`` (the bundled quote
    view) for ``model`` at ``base_url``; returns their names. ``label_token_ids`` (the
    token ids of "A".."D" in the model's vocabulary) asks a vLLM server for exactly those
    log-probabilities instead of the top ``TOP_LOGPROBS``."""
    def logprob_direct(state: Any) -> None:
        return None

    def logprob_quote(state: Any) -> str:
        return quote(state)

    for name, view in (("logprob-direct", logprob_direct), ("logprob-quote", logprob_quote)):
        al.channel(name, scorer="logprob-margin", template=template, model=model,
                   layouts=layouts, base_url=base_url,
                   label_token_ids=list(label_token_ids or []))(view)
    return "logprob-direct", "logprob-quote"
