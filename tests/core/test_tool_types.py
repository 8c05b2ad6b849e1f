"""A tool result served by a frozen replay has the type the live tool returned.

A tool returning a pydantic model was served back as a ``dict``: a framework then rendered
it differently into the next prompt and the model call missed the cache. The result is
rebuilt from the tool's own return annotation and checked against the recorded type.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import numpy as np
import pydantic
import pytest

import agentlog as al
from agentlog.reentry import serving_tools


class Weather(pydantic.BaseModel):
    city: str
    temperature_range: str
    conditions: str


@dataclasses.dataclass(frozen=True)
class Hit:
    doc: str
    score: float


class Row(msgspec.Struct, frozen=True):
    key: str
    values: list[int]


class Pair(NamedTuple):
    left: int
    right: str


@al.tool("weather")
def weather(city: str) -> Weather:
    return Weather(city=city, temperature_range="14-20C", conditions="Sunny with wind.")


@al.tool("hits")
def hits(q: str) -> list[Hit]:
    return [Hit(q, 0.5), Hit(q + "!", 0.25)]


@al.tool("row")
def row(k: str) -> Row:
    return Row(k, [1, 2, 3])


@al.tool("pair")
def pair(n: int) -> tuple[int, str]:
    return (n, str(n))


@al.tool("named")
def named(n: int) -> Pair:
    return Pair(n, "x")


@al.tool("plain")
def plain(n: int) -> dict[str, Any]:
    return {"n": n, "v": [1.5, None, "s"]}


@al.tool("array")
def array(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.float32)


@al.tool("optional")
def optional(n: int) -> Weather | None:
    return None


@al.tool("bare")
def bare(city: str):  # type: ignore[no-untyped-def]  # no return annotation on purpose
    return Weather(city=city, temperature_range="0C", conditions="snow")


@al.tool("lying")
def lying(city: str) -> dict[str, str]:
    return Weather(city=city, temperature_range="0C", conditions="snow")  # type: ignore[return-value]


@al.tool("async_weather")
async def async_weather(city: str) -> Weather:
    return Weather(city=city, temperature_range="1C", conditions="fog")


CALLS: list[tuple[Any, tuple[Any, ...]]] = [
    (weather, ("Tokyo",)), (hits, ("q",)), (row, ("k",)), (pair, (3,)), (named, (4,)),
    (plain, (5,)), (array, (4,)), (optional, (1,))]


def _record(path: Path, calls: list[tuple[Any, tuple[Any, ...]]]) -> list[Any]:
    with al.record(path, seed=1, mode="w"):
        return [fn(*args) for fn, args in calls]


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and bool((a == b).all())
    return bool(a == b)


def test_every_kind_of_result_is_served_as_the_type_it_was_returned(tmp_path: Path) -> None:
    live = _record(tmp_path / "src.zst", CALLS)
    source = al.read(tmp_path / "src.zst")
    with al.record(tmp_path / "replay.zst", seed=1, mode="w"), serving_tools(source) as srv:
        served = [fn(*args) for fn, args in CALLS]
    assert srv.misses == 0 and srv.served == len(CALLS)
    for got, want in zip(served, live, strict=True):
        assert type(got) is type(want), (got, want)
        assert _equal(got, want)
    assert all(type(h) is Hit for h in served[1])
    recorded = {t.name: t.result_type for t in source.tool_calls()}
    assert recorded["weather"] == f"{__name__}:Weather"
    assert recorded["pair"] == "builtins:tuple" and recorded["plain"] == "builtins:dict"
    again = {t.name: t.result_type for t in al.read(tmp_path / "replay.zst").tool_calls()}
    assert again == recorded


def test_an_async_tool_is_served_its_type(tmp_path: Path) -> None:
    import asyncio

    with al.record(tmp_path / "src.zst", seed=1, mode="w"):
        live = asyncio.run(async_weather("Oslo"))
    source = al.read(tmp_path / "src.zst")
    with al.record(tmp_path / "r.zst", seed=1, mode="w"), serving_tools(source):
        got = asyncio.run(async_weather("Oslo"))
    assert type(got) is Weather and got == live


@pytest.mark.parametrize("fn, match", [
    (bare, r"tool 'bare' returned a tests\.core\.test_tool_types:Weather when it was "
           r"recorded.*no return type.*Annotate the tool's return type \(-> Weather\)"),
    (lying, r"tool 'lying' returned a tests\.core\.test_tool_types:Weather when it was "
            r"recorded, but its return annotation .* rebuilds a builtins:dict"),
])
def test_a_result_that_cannot_be_rebuilt_fails_the_call_and_counts_as_a_miss(
        tmp_path: Path, fn: Any, match: str) -> None:
    _record(tmp_path / "src.zst", [(fn, ("Rome",))])
    source = al.read(tmp_path / "src.zst")
    with al.record(tmp_path / "r.zst", seed=1, mode="w"), serving_tools(source) as srv, \
            pytest.raises(al.ReplayError, match=match):
        fn("Rome")
    assert srv.misses == 1
    (call,) = al.read(tmp_path / "r.zst").tool_calls()
    assert call.served and call.status == 1 and call.error_type == "ReplayError"


def test_a_trace_without_result_types_is_rebuilt_from_the_annotation(tmp_path: Path) -> None:
    """Older traces did not record the result's type: the annotation alone decides."""
    from agentlog._tool import RecordedTool

    stored = {"city": "Lima", "temperature_range": "20C", "conditions": "mist"}

    def lookup(name: str, args_hash: bytes) -> RecordedTool:
        return RecordedTool(0, dict(stored))

    with al.record(tmp_path / "r.zst", seed=1, mode="w"), serving_tools(lookup):
        got = weather("Lima")
        untyped = bare("Lima")
    assert type(got) is Weather and got.model_dump() == stored
    assert type(untyped) is dict  # nothing to rebuild it from, nothing claimed either
