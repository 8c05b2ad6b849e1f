"""The deep-research agent's evaluation channels and scorer, for channel replay ([ASV]).

Importing this module (``--app agentlog.examples.deep_research`` imports it) registers:

* scorer ``margin``: [ASV]'s target-option margin, made deterministic. The four answer
  options (``OPTIONS``) are rated from an evidence lean in [-1, 1] under cyclic layout
  ``layout`` of the options (with a small position bias); the margin is the reviewed
  target's rating minus the best other option's. The target is the option the pool
  target θ* supports, read off the sealed entry (the pool). The lean is the state's own
  when the channel adds no view, else the lean of the quoted stance labels in the view.
* channel ``direct`` (no added view): reads the state itself; before search x⁻ the pool's
  prediction mean m̄, after it x⁺ the mean of the opened evidence scores.
* channel ``quote``: adds a deterministic excerpt of the state, stance labels of the first
  ``QUOTE_SNIPPETS`` results of the ranking's order (x⁻: their predictions, a results
  page) or of the opened documents (x⁺: their evidence scores).

Both declare four cyclic layouts. Replay them over recorded traces with::

    agentlog replay runs/*.zst --channel direct --channel quote --window retrieval \\
        --app agentlog.examples.deep_research --out asv.zst
    agentlog estimate asv asv.zst --channels direct,quote

The record-time alternative (``Evaluator``, ``run_agent(evaluate=True)``) writes the same
scores while the agent runs; both read the same functions of the state, so they agree.

Examples:
    >>> from agentlog.replay import get_channel
    >>> ch = get_channel("quote")
    >>> ch.scorer, ch.layouts
    ('margin', 4)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import agentlog as al

from .agent import (
    DEFAULT_EVALUATOR,
    MIXED_BAND,
    OPTIONS,
    QUOTE_SNIPPETS,
    QUOTE_THRESHOLD,
    Pool,
    quote_labels,
    target_option,
)

__all__ = ["direct", "margin", "pool_of", "quote", "view_lean"]


def pool_of(entry: Mapping[str, Any]) -> Pool:
    """The ``Pool`` of a decoded retrieval entry (its fields come back as lists)."""
    f = entry["pool"]
    return Pool(task_id=f["task_id"], ids=tuple(f["ids"]), relevance=tuple(f["relevance"]),
                stance=tuple(f["stance"]), authority=tuple(f["authority"]),
                prediction=tuple(f["prediction"]), y=tuple(f["y"]))


def view_lean(view: str) -> float:
    """The lean of a quote view: (#supports − #opposes) / #quoted (0 for an empty view)."""
    labels = [part.rsplit(": ", 1)[-1] for part in view.split("; ") if part]
    if not labels:
        return 0.0
    return (labels.count("supports") - labels.count("opposes")) / len(labels)


@al.scorer("margin", options=list(OPTIONS), position_bias=list(DEFAULT_EVALUATOR.position_bias),
           mixed_band=MIXED_BAND)
def margin(state: Any, view: str | None, layout: int) -> float:
    """The target-option margin of ``state`` under ``layout``, from the view's lean."""
    pool = pool_of(state.entry)
    if view is not None:
        lean = view_lean(view)
    elif state.before:
        lean = DEFAULT_EVALUATOR.direct_lean_before(pool)
    else:
        lean = DEFAULT_EVALUATOR.direct_lean_after(state.value["y"])
    return float(DEFAULT_EVALUATOR.margins(lean, target_option(pool.theta_star))[layout])


@al.channel("direct", scorer="margin", layouts=4, view="evidence")
def direct(state: Any) -> None:
    """No added view: the scorer reads the state itself."""
    return None


@al.channel("quote", scorer="margin", layouts=4, view="quote", threshold=QUOTE_THRESHOLD,
            snippets=QUOTE_SNIPPETS)
def quote(state: Any) -> str:
    """``"doc: label; ..."``: stance labels quoted from the state (see the module)."""
    if state.before:
        pool = pool_of(state.entry)
        shown: Sequence[str] = pool.order(state.value["ranking"])[:QUOTE_SNIPPETS]
        values = [pool.prediction[pool.ids.index(d)] for d in shown]
    else:
        shown, values = state.value["opened"], state.value["y"]
    return "; ".join(f"{d}: {label}" for d, label in zip(shown, quote_labels(values),
                                                         strict=True))
