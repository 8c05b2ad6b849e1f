"""OpenTelemetry spans, a copy of the trace (the trace file is the source of truth).

agentlog uses the global TracerProvider the user configured. When none is configured
(the API's proxy/no-op provider), ``tracer()`` returns None and no span work is done at
all. Probability vectors never go into attributes: a span carries their hash and a
summary (size, entropy, chosen probability).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import threading
import weakref
from collections.abc import Collection
from typing import Any

import numpy as np
from numpy.typing import NDArray
from opentelemetry import trace

from agentlog._scrub import exception_attributes
from agentlog._state import current_run_var
from agentlog._version import __version__

# A TracerProvider set by agentlog.testing.capture_spans(): a context variable, so that
# two tests or two threads capturing at once each see only their own runs' spans.
_override: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "agentlog_provider_override", default=None
)
INSTRUMENTATION = "agentlog"
_tracers: weakref.WeakKeyDictionary[Any, trace.Tracer] = weakref.WeakKeyDictionary()


def set_provider_override(provider: Any) -> Any:
    """Use ``provider`` instead of the global one in this context (tests).

    Returns the previous override (this context's), to hand back when done.
    """
    previous = _override.get()
    _override.set(provider)
    return previous


def tracer() -> trace.Tracer | None:
    """A tracer from the configured provider, or None when only the API's no-op is there."""
    override = _override.get()
    provider = override if override is not None else trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    # get_tracer costs ~15 µs in the SDK (a new Tracer and scope each call): keep one per
    # provider, weakly, so that a provider a test drops is not kept alive here.
    try:
        return _tracers[provider]
    except (KeyError, TypeError):
        pass
    tracer_ = provider.get_tracer(INSTRUMENTATION, __version__)
    # The SDK gives each get_tracer call its own Tracer: this one is agentlog's alone, so
    # its id generator can hand out the ids `agentlog export` gives the same spans.
    generator = getattr(tracer_, "id_generator", None)
    if generator is not None and not isinstance(generator, _ChosenIds):
        with contextlib.suppress(AttributeError):
            setattr(tracer_, "id_generator", _ChosenIds(generator))  # noqa: B010
    with contextlib.suppress(TypeError):  # a provider that cannot be weakly referenced
        _tracers[provider] = tracer_
    return tracer_


class _ChosenIds:
    """The SDK id generator of agentlog's tracer: the span id (and, for a root span, the
    trace id) chosen for the span being started (``start_span``), else the provider's."""

    def __init__(self, fallback: Any) -> None:
        self._fallback = fallback
        self._chosen = threading.local()

    def choose(self, trace_id: int, span_id: int) -> None:
        self._chosen.ids = (trace_id, span_id)

    def clear(self) -> None:
        self._chosen.ids = None

    def generate_span_id(self) -> int:
        ids = getattr(self._chosen, "ids", None)
        return ids[1] if ids is not None else int(self._fallback.generate_span_id())

    def generate_trace_id(self) -> int:
        # Asked for a span without a parent only; 0 chosen: the span has none of its own.
        ids = getattr(self._chosen, "ids", None)
        return ids[0] if ids is not None and ids[0] else int(
            self._fallback.generate_trace_id())

    def is_trace_id_random(self) -> bool:
        # A chosen trace id is a hash of the run id, not random (W3C's random flag).
        if getattr(self._chosen, "ids", None) is not None:
            return False
        return bool(getattr(self._fallback, "is_trace_id_random", lambda: True)())


def start_span(tracer_: Any, name: str, ids: tuple[int, int], **kwargs: Any) -> Any:
    """``tracer_.start_span`` with the span id (and root trace id) ``ids`` = (trace id, span
    id; trace id 0: the parent's): the ids ``agentlog export`` gives the same span, so
    exporting a run that was traced live adds no span twice. A tracer without agentlog's
    generator picks its own ids."""
    generator = getattr(tracer_, "id_generator", None)
    if not isinstance(generator, _ChosenIds):
        return tracer_.start_span(name, **kwargs)
    generator.choose(*ids)
    try:
        return tracer_.start_span(name, **kwargs)
    finally:
        generator.clear()


# The open runs' root spans by run id (bounded by the number of open runs): a window at a
# run's top level, a run-level score, and tool/model calls outside any window parent to it.
# Written only by _live.start_run/end_run; a dict read is atomic, so readers take no lock.
run_spans: dict[str, Any] = {}
# The same runs' spans wrapped in a Context once: set_span_in_context copies the current
# context on every call, and every top-level window would otherwise pay for that.
run_contexts: dict[str, Any] = {}


def start_window_span(tracer_: trace.Tracer, span_name: str, parent_span: Any,
                      ids: tuple[int, int]) -> trace.Span:
    """Start a window's span under its enclosing window's span, else its run's span.

    Never the thread's current OpenTelemetry context: a thread that sees the run but not
    the context (or a user's span current inside the run) would otherwise give the live
    span another parent than the one ``agentlog export`` reads from the stored trace.
    No attributes at the start: the window's are all known only at its exit and are set
    there in one call (``agentlog._window.call._close``); samplers see the window in the span name.
    """
    if parent_span is not None:
        return start_span(tracer_, span_name, ids,  # type: ignore[no-any-return]
                          context=trace.set_span_in_context(parent_span))
    run = current_run_var.get()
    return start_span(tracer_, span_name, ids,  # type: ignore[no-any-return]
                      context=None if run is None else run_contexts.get(run.run_id))


def record_exception(span: Any, exc: BaseException, message: str,
                     known: Collection[str] | None = None) -> None:
    """``span.record_exception`` with a scrubbed message: never call the SDK's own.

    The SDK's copies ``str(exc)`` and a traceback ending in it into the span unscrubbed;
    this adds the same ``exception`` event (semantic-convention attributes) with
    ``message`` (already scrubbed and redacted) and the traceback scrubbed likewise.
    """
    span.add_event("exception", exception_attributes(exc, message, known))


CHOSEN_ID_MAX = 128  # characters of a chosen candidate's id kept on a selection event


def vector_entropy(probs: NDArray[np.float64], n_zero: int | None = None) -> float:
    """H = -Σ p log p over the positive entries of a selection's vector.

    The one computation of a selection event's entropy: ``select``'s live event passes its
    vector, ``agentlog export`` the stored copy, and both get the same bits. The vector is
    read contiguously (numpy's SIMD ``log`` serves contiguous arrays only, and differs from
    the C library's ``log`` a strided view gets in the last bit) and summed by numpy's
    pairwise ``add.reduce``, whose order depends only on the length (not on BLAS, memory
    alignment or threads, as ``np.dot``'s does). ``n_zero``: the vector's zero count when
    the caller has it (the Selection record holds it); it only saves a pass.
    """
    p = np.ascontiguousarray(probs, dtype=np.float64)
    if n_zero is None or n_zero:
        p = p[p > 0]  # log 0 = -inf: a zero adds nothing to H
    return -float(np.add.reduce(p * np.log(p)))


def selection_event_attributes(
    name: str, step: int, owner: str, probs: NDArray[np.float64], choice: int,
    probs_bytes: bytes, chosen_id: Any = None, n_zero: int | None = None,
) -> dict[str, Any]:
    """A selection event: the vector's hash and summary, the chosen id (``str``, capped).

    ``n_zero``: the vector's zero count when known (the Selection record holds it); it
    only saves work. The live path and export give the same entropy, bit for bit
    (``vector_entropy``).
    """
    attributes = {
        "agentlog.stream": name,
        "agentlog.step": step,
        "agentlog.owner": owner,
        "agentlog.n_candidates": int(probs.shape[0]),
        "agentlog.entropy": vector_entropy(probs, n_zero),
        "agentlog.chosen_index": choice,
        "agentlog.chosen_p": float(probs[choice]),
        "agentlog.probs_sha256": hashlib.sha256(probs_bytes).hexdigest(),
    }
    if chosen_id is not None:
        attributes["agentlog.chosen_id"] = str(chosen_id)[:CHOSEN_ID_MAX]
    return attributes


def continuation_event_attributes(
    name: str, step: int, p: float, u: float, decision: bool
) -> dict[str, Any]:
    return {
        "agentlog.stream": name,
        "agentlog.step": step,
        "agentlog.p_continue": p,
        "agentlog.u": u,
        "agentlog.decision": decision,
    }
