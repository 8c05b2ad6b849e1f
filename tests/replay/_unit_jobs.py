"""Tiny replay jobs for the execution engine's tests, found by ``module:qualname``.

They depend on nothing but the engine's public API, so the engine is tested without
channels. Every score is a pure function of the unit's payload: a re-run, another
executor or another process gives the same values.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Sequence

from agentlog.replay import Unit, UnitContext, UnitScore, request_key

# Keys whose unit raises ValueError (tests set and clear it; a subprocess passes it in
# the payload instead).
FAIL: set[str] = set()


def _value(unit: Unit, corner: int) -> float:
    digest = hashlib.sha256(f"{unit.payload['x']}/{corner}".encode()).digest()
    return int.from_bytes(digest[:4], "little") / 2**32


def score_states(unit: Unit, ctx: UnitContext) -> Sequence[UnitScore]:
    """Two scores per unit (its x− and x+ states), like a channel replay unit."""
    if unit.key in FAIL or unit.payload.get("fail"):
        raise ValueError(f"cannot score unit {unit.key}: {unit.payload.get('why', 'bad state')}")
    t = int(unit.payload["x"])
    return [
        UnitScore("margin", _value(unit, c), channel=unit.payload.get("channel", "quote"),
                  layout=unit.payload.get("layout", 0), wave=0, transition=t,
                  state_hash=hashlib.sha256(f"state/{t}/{c}".encode()).digest())
        for c in (0, 1)
    ]


async def ascore_states(unit: Unit, ctx: UnitContext) -> Sequence[UnitScore]:
    await asyncio.sleep(0)
    return score_states(unit, ctx)


def cached_score(unit: Unit, ctx: UnitContext) -> Sequence[UnitScore]:
    """One model call per unit through ``ctx.cached``: what a scorer with a cache does."""
    key = request_key("openai.chat", {"model": "m", "messages": [
        {"role": "user", "content": f"state {unit.payload['x']}"}], "temperature": 0})
    result = ctx.cached(key, lambda: {"choices": [{"value": float(unit.payload["x"]) / 10}]})
    return [UnitScore("margin", result.response["choices"][0]["value"],
                      transition=int(unit.payload["x"]))]


class Blocker:
    """Holds async units until released: lets a test interrupt a replay mid-way."""

    def __init__(self) -> None:
        self.started = 0
        self.release = asyncio.Event()
        self.some_started = asyncio.Event()


BLOCK: dict[str, Blocker] = {}


async def block_some(unit: Unit, ctx: UnitContext) -> Sequence[UnitScore]:
    """Units with payload ``block`` wait for ``BLOCK['b'].release``; the others finish."""
    if unit.payload.get("block"):
        b = BLOCK["b"]
        b.started += 1
        b.some_started.set()
        await b.release.wait()
    return score_states(unit, ctx)


class Barrier:
    """Counts jobs in flight; every job waits until ``n`` are in flight at once."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0
        self.barrier = threading.Barrier(n, timeout=20)


BARRIER: dict[str, Barrier] = {}


def sync_barrier(unit: Unit, ctx: UnitContext) -> Sequence[UnitScore]:
    b = BARRIER["b"]
    with b.lock:
        b.now += 1
        b.peak = max(b.peak, b.now)
    try:
        b.barrier.wait()  # raises BrokenBarrierError after 20 s: never hangs the suite
    finally:
        with b.lock:
            b.now -= 1
    return score_states(unit, ctx)


def slow_score(unit: Unit, ctx: UnitContext) -> Sequence[UnitScore]:
    """``score_states`` after ``payload['sleep']`` seconds: keeps units in flight."""
    import time

    time.sleep(float(unit.payload.get("sleep", 0.0)))
    return score_states(unit, ctx)
