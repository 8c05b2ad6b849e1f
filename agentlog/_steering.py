"""The steering hook: a context variable through which ``select``/``proceed`` are steered.

Replay installs a ``Steer`` (an intervention such as uniform selection, a fixed horizon,
or forcing the recorded choices) with ``steering(steer)``; every ``select``/``proceed``
in that context consults it before drawing. The draw itself still uses the identity-keyed
noise of (seed, task, stream, step, candidate), so a steered branch and its recorded twin
share their random numbers (common random numbers, [SSC] Appendix D).

Examples:
    >>> import numpy as np, agentlog as al
    >>> from agentlog._steering import Steer, steering
    >>> class Uniform(Steer):
    ...     name = "uniform"
    ...     def select(self, stream, step, probs, ids):
    ...         return np.full(len(probs), 1.0 / len(probs))
    >>> with steering(Uniform()):
    ...     i = al.select([0.9, 0.1])
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np
from numpy.typing import NDArray


class Steer:
    """Base class of interventions. Return None from a hook to leave the draw alone.

    ``select`` may return a replacement probability vector (same length, validated like the
    agent's own) or an ``int`` index that forces the choice. ``proceed`` may return a
    replacement probability of continuing (``float``) or a forced decision (``bool``).
    """

    name: str = "steer"

    def select(
        self, stream: str, step: int, probs: NDArray[np.float64], ids: tuple[Any, ...]
    ) -> NDArray[np.float64] | int | None:
        return None

    def proceed(self, stream: str, step: int, p: float) -> float | bool | None:
        return None


current_steer_var: ContextVar[Steer | None] = ContextVar("agentlog_steer", default=None)


@contextmanager
def steering(steer: Steer | None) -> Iterator[Steer | None]:
    """Apply ``steer`` to every ``select``/``proceed`` in this context."""
    token = current_steer_var.set(steer)
    try:
        yield steer
    finally:
        current_steer_var.reset(token)
