"""The simulated agent of ``bench_attribution_vs_car.py``: three independent binary
decisions; a run is bad when the first two both pick ``a`` or the third picks ``b``."""

from __future__ import annotations

from collections.abc import Sequence

import agentlog as al


@al.window("decide")
def decide(p_a: Sequence[float]) -> tuple[str, ...]:
    return tuple(("a", "b")[al.select([p, 1 - p], candidates=["a", "b"], name="pick")]
                 for p in p_a)


def outcome(picks: tuple[str, ...]) -> dict[str, float]:
    is_bad = (picks[0] == "a" and picks[1] == "a") or picks[2] == "b"
    return {"bad": float(is_bad)}
