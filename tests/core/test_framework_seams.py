"""The seams a framework's hooks use: ``al.open_window`` (a window opened and closed by
calls) and ``al.tool_call`` (a tool call the framework makes, served under replay)."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from pathlib import Path
from typing import Any

import pydantic
import pytest

import agentlog as al
from agentlog.records import WindowEnter, WindowExit, encode_artifact
from agentlog.reentry import serving_tools


class Forecast(pydantic.BaseModel):
    city: str
    high: int


def _windows(path: Path) -> list[tuple[str, int, int]]:
    """(name, window id, parent id) of each window entered, in file order."""
    return [(r.name, r.window, r.parent) for r in al.iter_records(path)
            if isinstance(r, WindowEnter)]


def test_a_window_opened_by_calls_is_recorded_as_a_decorated_one_is(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, seed=1):
        handle = al.open_window("step", {"messages": ["hi"]})
        al.tool_call("lookup", {"q": "hi"}, lambda: "found")
        handle.close(exit={"answer": "B"})
        handle.close(exit="ignored")  # once: later calls do nothing
    enter = next(r for r in al.iter_records(path) if isinstance(r, WindowEnter))
    exit_ = next(r for r in al.iter_records(path) if isinstance(r, WindowExit))
    assert enter.name == "step" and enter.function is None
    assert enter.entry_hash == hashlib.sha256(encode_artifact({"messages": ["hi"]})).digest()
    assert exit_.exit_hash == hashlib.sha256(encode_artifact({"answer": "B"})).digest()
    assert (exit_.status, exit_.tool_calls) == (0, 1)
    assert handle.closed and "closed" in repr(handle)
    assert al.verify(path).ok


def test_windows_opened_by_calls_nest_and_restore_the_previous_window(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, seed=1):
        with al.open_window("agent", "task") as outer:
            with al.open_window("turn", 1):
                assert al.current_window().name == "turn"
            assert al.current_window() is outer.state
        assert al.current_window() is None
    (agent, a_id, a_parent), (turn, _, t_parent) = _windows(path)
    assert (agent, a_parent, turn, t_parent) == ("agent", -1, "turn", a_id)


def test_an_exception_in_the_block_is_the_failure_exit_and_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, seed=1), pytest.raises(KeyError), al.open_window("step", None):
        raise KeyError("boom")
    exit_ = next(r for r in al.iter_records(path) if isinstance(r, WindowExit))
    assert (exit_.status, exit_.error_type) == (1, "KeyError")


def test_a_window_closed_on_another_thread_sends_later_records_to_its_parent(
        tmp_path: Path) -> None:
    """A framework's end hook may run on a worker thread: the window closes there, and the
    context that opened it no longer counts calls into a closed window."""
    path = tmp_path / "t.zst"
    with al.record(path, seed=1), al.open_window("agent", None) as agent:
        step = al.open_window("llm", None)
        worker = threading.Thread(target=step.close, kwargs={"exit": "done"})
        worker.start()
        worker.join(timeout=10)
        assert step.closed
        assert al.current_window() is agent.state
        al.tool_call("after", {}, lambda: 1)
    exits = {r.name: r for r in al.iter_records(path) if isinstance(r, WindowExit)}
    assert exits["llm"].tool_calls == 0 and exits["agent"].tool_calls == 1
    assert al.verify(path).ok


def test_concurrent_tasks_each_have_their_own_window(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"

    async def step(i: int) -> None:
        async with al.open_window("step", i):
            await asyncio.sleep(0.01 * (3 - i))
            await al.atool_call("echo", {"i": i}, lambda: asyncio.sleep(0, result=i))

    async def main() -> None:
        async with al.record(path, seed=1):
            await asyncio.gather(*(step(i) for i in range(3)))

    asyncio.run(main())
    exits = [r for r in al.iter_records(path) if isinstance(r, WindowExit)]
    assert len(exits) == 3 and all(e.tool_calls == 1 and e.status == 0 for e in exits)


def test_without_a_run_the_handle_does_nothing_and_the_tool_is_called() -> None:
    handle = al.open_window("step", object())  # not even encodable: nothing is sealed
    assert handle.state is None and "no run" in repr(handle)
    handle.close()
    assert al.tool_call("t", {"x": 1}, lambda: 42) == 42


@pytest.mark.parametrize(("call", "error", "says"), [
    (lambda: al.open_window(""), ValueError, "`name` of open_window must be a non-empty str"),
    (lambda: al.tool_call("", {}, lambda: 1), ValueError, "`name` of tool_call"),
    (lambda: al.open_window("w").fail("not an exception"), TypeError,  # type: ignore[arg-type]
     "`exc` must be an exception"),
])
def test_bad_arguments_are_refused_where_they_come_in(call: Any, error: type[Exception],
                                                       says: str, tmp_path: Path) -> None:
    with al.record(tmp_path / "t.zst", seed=1), pytest.raises(error, match=says):
        call()


def test_tool_call_arguments_must_be_a_mapping(tmp_path: Path) -> None:
    with al.record(tmp_path / "t.zst", seed=1), pytest.raises(
            TypeError, match=r"`arguments` must be the tool's arguments as a mapping"):
        al.tool_call("t", ["x"], lambda: 1)  # type: ignore[arg-type]


def test_a_framework_tool_is_served_under_a_frozen_replay_as_its_type(tmp_path: Path) -> None:
    calls: list[str] = []

    def forecast(city: str) -> Forecast:
        calls.append(city)
        return Forecast(city=city, high=21)

    def agent() -> Forecast:
        with al.open_window("turn", "Oslo"):
            return al.tool_call("forecast", {"city": "Oslo", "api_key": "sk-secret-123456"},
                                lambda: forecast("Oslo"), returns=Forecast)

    with al.record(tmp_path / "src.zst", seed=1):
        live = agent()
    assert b"sk-secret-123456" not in (tmp_path / "src.zst").read_bytes()
    source = al.read(tmp_path / "src.zst")
    with al.record(tmp_path / "replay.zst", seed=1), serving_tools(source) as srv:
        served = agent()
        with pytest.raises(al.CacheMiss, match="never recorded with these arguments"):
            al.tool_call("forecast", {"city": "Bergen"}, lambda: forecast("Bergen"))
    assert type(served) is Forecast and served == live
    assert calls == ["Oslo"] and srv.served == 2 and srv.misses == 1
    (recorded,) = [t for t in al.read(tmp_path / "replay.zst").tool_calls() if t.status == 0]
    assert recorded.served
