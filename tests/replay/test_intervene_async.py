"""``intervene`` re-enters every kind of window: coroutines, async generators, generators.

An ``async def`` window re-entered by calling it only creates a coroutine: every unit was
recorded ``ok`` with an empty arm and ``scores=`` received the coroutine. Each test here
checks that the arm holds what a live run holds (the window, its model and tool calls,
its draws) and that ``scores=`` receives the window's real result.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

openai = pytest.importorskip("openai")

import agentlog as al  # noqa: E402
from agentlog.adapters import openai as adapter  # noqa: E402
from agentlog.records import LLMCall, Selection, ToolCall  # noqa: E402
from agentlog.replay import Design, intervene, read_units  # noqa: E402

from ..adapters._providers import FakeProvider, openai_client  # noqa: E402

APP = __name__
PROVIDER = FakeProvider(text="Sunny")
CLIENT = adapter.wrap(openai_client(PROVIDER, is_async=True))
OWN = Design(selection=["agent"], stopping=["adaptive"])


@al.tool("forecast")
async def forecast(city: str) -> dict[str, str]:
    await asyncio.sleep(0)
    return {"city": city, "conditions": "sunny"}


@al.window("ask")
async def ask(question: str) -> str:
    first = await CLIENT.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": question}])
    found = await forecast(question)
    i = al.select([0.25, 0.5, 0.25], candidates=["a", "b", "c"], name="pick")
    if not al.proceed(0.5, name="stop"):
        return f"{first.choices[0].message.content}|{found['conditions']}|{i}|stop"
    second = await CLIENT.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": question},
                                       {"role": "assistant", "content": str(found)}])
    return f"{second.choices[0].message.content}|{found['conditions']}|{i}|go"


@al.window("agen")
async def agen(n: int) -> AsyncIterator[str]:
    for k in range(n):
        await asyncio.sleep(0)
        yield ["a", "b", "c"][al.select([0.2, 0.3, 0.5], candidates=["a", "b", "c"],
                                        name=f"g{k}")]


@al.window("gen")
def gen(n: int) -> Iterator[int]:
    for k in range(n):
        yield al.select([0.5, 0.5], candidates=[10, 20], name=f"s{k}")


received: list[Any] = []


def keep(result: Any) -> dict[str, float]:
    received.append(result)
    return {"n": float(len(result))}


def _kinds(trace: al.Trace) -> dict[str, int]:
    out: dict[str, int] = {}
    for rec in trace.records:
        out[type(rec).__name__] = out.get(type(rec).__name__, 0) + 1
    return out


def test_an_async_window_with_model_and_tool_calls_is_re_entered_frozen(
        tmp_path: Path) -> None:
    src = tmp_path / "src.zst"
    with al.record(src, seed=3, task="t1", mode="w"):
        live = asyncio.run(ask("Tokyo"))
    before = PROVIDER.count
    received.clear()
    res = intervene(src, window="ask", arms=OWN, out=tmp_path / "out", app=APP,
                    mode="frozen", scores=keep)
    assert res.summary.done == 1 and res.summary.failed == 0, res.summary.failures
    assert res.summary.live_calls == 0 and PROVIDER.count == before
    assert received == [live]  # the window's result, not a coroutine
    (arm_file,) = (tmp_path / "out" / "arms").glob("*.zst")
    arm = al.read(arm_file)
    recorded = al.read(src)
    (view,) = arm.windows("ask")
    assert view.exit_value() == live
    for kind in (LLMCall, ToolCall, Selection):
        assert _kinds(arm)[kind.__name__] == _kinds(recorded)[kind.__name__] > 0
    assert all(c.cache == "hit" for c in arm.llm_calls())
    assert all(t.served for t in arm.tool_calls())
    assert [s.choice for s in arm.selections()] == [s.choice for s in recorded.selections()]
    (unit,) = read_units(tmp_path / "out" / "units.zst").values()
    assert unit.status == "ok" and [s.name for s in unit.scores] == ["n"]


@pytest.mark.parametrize("window, call, expected", [
    ("agen", lambda: asyncio.run(_collect(agen(3))), 3),
    ("gen", lambda: list(gen(4)), 4),
])
def test_generator_windows_are_drained_and_their_yields_scored(
        tmp_path: Path, window: str, call: Any, expected: int) -> None:
    src = tmp_path / "src.zst"
    with al.record(src, seed=5, task="t", mode="w"):
        live = call()
    received.clear()
    res = intervene(src, window=window, arms=OWN, out=tmp_path / "out", app=APP,
                    mode="frozen", scores=keep)
    assert res.summary.done == 1 and res.summary.failed == 0, res.summary.failures
    assert received == [live] and len(live) == expected
    (arm_file,) = (tmp_path / "out" / "arms").glob("*.zst")
    arm = al.read(arm_file)
    assert len(arm.windows(window)) == 1 and len(arm.selections()) == expected


async def _collect(it: AsyncIterator[str]) -> list[str]:
    return [x async for x in it]


def test_a_sync_re_entry_inside_a_running_loop_still_runs_the_window(tmp_path: Path) -> None:
    """``call_window`` from code that already runs an event loop uses a loop of its own."""
    from agentlog.replay._reentry import call_window

    async def main() -> Any:
        with al.record(tmp_path / "t.zst", seed=1, mode="w"):
            return call_window(ask, ("Paris",), {})

    out = asyncio.run(main())
    assert out.endswith(("|stop", "|go"))
    assert len(al.read(tmp_path / "t.zst").windows("ask")) == 1
