"""Span comparison helpers: a span as a hashable signature that includes its parent chain."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

# Attributes the SDK adds to a live exception event that a stored trace cannot have, and
# the one a live window span cannot have: its receipt, which the writer thread chains after
# the span has ended (export reads it from the stored record).
_LIVE_ONLY = {"exception.stacktrace", "exception.escaped", "agentlog.receipt"}


def _frozen(attributes: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(
        (k, tuple(v) if isinstance(v, list | tuple) else v)
        for k, v in dict(attributes or {}).items() if k not in _LIVE_ONLY
    ))


def signatures(spans: Iterable[Any]) -> Counter[Any]:
    """Each span as (name, kind, status, attributes, events, parent's signature)."""
    spans = list(spans)
    by_id = {s.context.span_id: s for s in spans}
    memo: dict[int, Any] = {}

    def sig(span: Any) -> Any:
        key = span.context.span_id
        if key not in memo:
            parent = None if span.parent is None else by_id.get(span.parent.span_id)
            memo[key] = (
                span.name, span.kind.name, span.status.status_code.name,
                _frozen(span.attributes),
                tuple((e.name, _frozen(e.attributes)) for e in span.events),
                None if parent is None else sig(parent),
            )
        return memo[key]

    return Counter(sig(s) for s in spans)
