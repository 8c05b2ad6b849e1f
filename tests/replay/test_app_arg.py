"""``app=`` takes an imported module as well as its name, wherever it comes in
(``resolve_app``, ``replay_channels``, ``run_units``, ``intervene``); anything else is a
``TypeError`` naming what is expected (issue 28: a module used to fail with
``AttributeError: 'module' object has no attribute 'strip'``)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from agentlog.examples.deep_research import run_study, task_ids
from agentlog.replay import (
    Design,
    ExecutionOptions,
    Unit,
    UnitScore,
    intervene,
    read_units,
    replay_channels,
    resolve_app,
    run_units,
)

from . import test_channel_replay as channel_app


def _square(unit: Unit, ctx: object) -> list[UnitScore]:
    return [UnitScore("sq", unit.payload["x"] ** 2)]


def test_resolve_app_takes_the_module_itself() -> None:
    assert resolve_app(channel_app) is channel_app


def test_replay_channels_takes_the_app_module(tmp_path: Path) -> None:
    src = channel_app._record(tmp_path / "src.zst", [1.0, 2.0])
    summary = replay_channels(src, ["chrep-direct"], window="chrep-step",
                              out=tmp_path / "o.zst", app=channel_app,
                              execution=ExecutionOptions(progress=False))
    assert (summary.done, summary.failed) == (4, 0)


def test_run_units_takes_the_app_module(tmp_path: Path) -> None:
    app = importlib.import_module("tests.replay.test_units")
    summary = run_units([Unit("u2", {"x": 2})], _square, out=tmp_path / "o.zst", app=app,
                        execution=ExecutionOptions(progress=False))
    assert summary.done == 1
    assert read_units(tmp_path / "o.zst")["u2"].scores[0].value == 4.0


def test_intervene_takes_the_app_module(tmp_path: Path) -> None:
    from agentlog.examples import deep_research

    run_study(tmp_path / "src", tasks=task_ids(1), rankings=("agent",), seeds=(0,),
              evaluate=False)
    run = intervene(tmp_path / "src", window="retrieval", arms=Design(selection=["agent"]),
                    out=tmp_path / "out", app=deep_research, mode="rerun",
                    execution=ExecutionOptions(progress=False))
    assert run.summary.done == run.units == 1 and run.summary.failed == 0


@pytest.mark.parametrize("call", ["resolve_app", "run_units"])
def test_an_app_that_is_neither_a_name_nor_a_module_is_a_type_error(call: str,
                                                                     tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"`app` must be a module name such as 'my_agent', an "
                                        r"imported module, or None; found int 42"):
        if call == "resolve_app":
            resolve_app(42)  # type: ignore[arg-type]
        else:
            run_units([Unit("u", {"x": 1})], _square, out=tmp_path / "o.zst",
                      app=42, execution=ExecutionOptions(progress=False))  # type: ignore[arg-type]
