"""Which model revision served a block's model calls (``observe_calls``).

A replay stores, with each unit's scores, who served the model calls behind them; the
adapters count every call of a wrapped client into the ``ObservedCalls`` of the context
they run in, whether or not a run records them.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ServedBy:
    """Who served a group of model calls: the same provider, model and serving fingerprint.

    Attributes:
        provider: the adapter's provider id (``"openai.chat"``, ``"vllm.generate"``, ...).
        model: the requested model.
        response_model: the model the response names (a dated snapshot, a served name).
        fingerprint: the serving fingerprint (``system_fingerprint``, the vLLM engine's
            version, dtype and revision), when the provider gives one.
        calls: calls in the group.
        hits: of those, served by the exact-input cache.
        failed: of those, failed.
    """

    provider: str
    model: str
    response_model: str | None
    fingerprint: str | None
    calls: int
    hits: int
    failed: int

    def to_dict(self) -> dict[str, Any]:
        """The group as a JSON-compatible dict (how replay outputs store it)."""
        return {"provider": self.provider, "model": self.model,
                "response_model": self.response_model, "fingerprint": self.fingerprint,
                "calls": self.calls, "hits": self.hits, "failed": self.failed}


class ObservedCalls:
    """The model calls of wrapped clients made inside one ``observe_calls()`` block.

    Bounded: calls are counted into groups by (provider, model, response model,
    fingerprint); at most ``MAX_GROUPS`` groups are kept, the calls beyond them only
    counted in ``dropped``.
    """

    MAX_GROUPS = 64

    def __init__(self) -> None:
        self._groups: dict[tuple[str, str, str | None, str | None], list[int]] = {}
        self._lock = threading.Lock()
        self.dropped = 0

    def add(self, provider: str, model: str, response_model: str | None,
            fingerprint: str | None, *, hit: bool, failed: bool) -> None:
        """Count one call (the adapters call this; safe from any thread)."""
        group = (provider, model, response_model, fingerprint)
        with self._lock:
            counts = self._groups.get(group)
            if counts is None:
                if len(self._groups) >= self.MAX_GROUPS:
                    self.dropped += 1
                    return
                counts = self._groups[group] = [0, 0, 0]
            counts[0] += 1
            counts[1] += hit
            counts[2] += failed

    @property
    def served_by(self) -> list[ServedBy]:
        """The groups, sorted by provider, model, response model and fingerprint."""
        with self._lock:
            items = sorted(self._groups.items(), key=lambda kv: tuple(map(str, kv[0])))
        return [ServedBy(*group, *counts) for group, counts in items]

    def __len__(self) -> int:
        with self._lock:
            return sum(c[0] for c in self._groups.values()) + self.dropped

    def __repr__(self) -> str:
        return f"ObservedCalls({len(self)} calls, {len(self._groups)} serving groups)"


_observed: contextvars.ContextVar[ObservedCalls | None] = contextvars.ContextVar(
    "agentlog_adapter_observed", default=None
)


@contextlib.contextmanager
def observe_calls() -> Iterator[ObservedCalls]:
    """Count the model calls of wrapped clients in this block by who served them.

    Inside or outside a run, cached or live: every call of a wrapped client made in this
    context (and in contexts copied from it: worker threads of ``copy_context_executor``,
    asyncio tasks) is counted with its provider, model, the model its response names and
    the serving fingerprint. A replay uses it to store, with each unit's scores, which
    model revision produced them.

    Examples:
        >>> from agentlog.adapters import observe_calls
        >>> with observe_calls() as seen:
        ...     pass  # calls of wrapped clients here
        >>> seen.served_by
        []
    """
    seen = ObservedCalls()
    token = _observed.set(seen)
    try:
        yield seen
    finally:
        _observed.reset(token)


def observing() -> ObservedCalls | None:
    """The ``observe_calls()`` block this context is in, if any (adapters ask per call)."""
    return _observed.get()
