"""``intervene`` on the Ray executor gives the arm traces of the local one (content)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.examples.deep_research import run_study, task_ids
from agentlog.records import Continuation, Score, Selection, ToolCall
from agentlog.replay import Design, ExecutionOptions, intervene, read_units
from agentlog.replay.interventions import FixedHorizon, Uniform
from tests.replay.test_intervene import APP, opened_mean

# The session's local cluster (tests/conftest.py); without Ray the tests skip.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_cluster")]


def _content(trace: al.Trace) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for r in trace.records:
        if type(r) is Selection:
            rows.append(("sel", r.name, r.step, r.choice, r.probs, r.draws, r.steer))
        elif type(r) is Continuation:
            rows.append(("cont", r.name, r.step, r.p, r.u, r.decision, r.steer))
        elif type(r) is Score:
            rows.append(("score", r.name, r.value))
        elif type(r) is ToolCall:
            rows.append(("tool", r.name, r.args_hash, r.result_hash))
    for view in trace.windows():
        rows.append(("window", view.name, view.entry_hash, view.exit_hash))
    return rows


def test_local_and_ray_give_identical_arm_traces(tmp_path: Path) -> None:
    run_study(tmp_path / "src", tasks=task_ids(2), rankings=("agent",), seeds=(0,),
              evaluate=False)
    design = Design(selection=["agent", Uniform()], stopping=["adaptive", FixedHorizon(4)],
                    seeds=range(2))
    outs = {}
    for executor in ("local", "ray"):
        res = intervene(tmp_path / "src", window="retrieval", arms=design, app=APP,
                        out=tmp_path / executor, mode="rerun", scores=opened_mean,
                        execution=ExecutionOptions(executor=executor))  # type: ignore[arg-type]
        assert res.summary.done == 16 and res.summary.failed == 0, res.summary.failures
        outs[executor] = read_units(tmp_path / executor / "units.zst")
    assert outs["local"].keys() == outs["ray"].keys()
    compared = 0
    for key, local in outs["local"].items():
        remote = outs["ray"][key]
        assert [(s.name, s.value) for s in local.scores] == \
            [(s.name, s.value) for s in remote.scores]
        assert local.provenance == remote.provenance
        a = al.read(tmp_path / "local" / local.provenance["arm_trace"])
        b = al.read(tmp_path / "ray" / remote.provenance["arm_trace"])
        assert _content(a) == _content(b)
        compared += len(_content(a))
    assert compared > 100


def test_an_async_window_is_re_entered_on_ray_as_locally(tmp_path: Path) -> None:
    """Ray workers run the same re-entry: an ``async def`` window with model and tool
    calls is awaited there too (frozen: served from the source trace, nothing live)."""
    import asyncio

    from tests.replay import test_intervene_async as agent

    src = tmp_path / "src.zst"
    with al.record(src, seed=3, task="t1", mode="w"):
        live = asyncio.run(agent.ask("Kyoto"))
    outs = {}
    for executor in ("local", "ray"):
        res = intervene(src, window="ask", arms=agent.OWN, out=tmp_path / executor,
                        app=agent.APP, mode="frozen", scores=agent.keep,
                        execution=ExecutionOptions(executor=executor))  # type: ignore[arg-type]
        assert res.summary.done == 1 and res.summary.failed == 0, res.summary.failures
        (unit,) = read_units(tmp_path / executor / "units.zst").values()
        outs[executor] = al.read(tmp_path / executor / unit.provenance["arm_trace"])
        assert [s.value for s in unit.scores] == [float(len(live))]
    assert _content(outs["local"]) == _content(outs["ray"])
    assert len(outs["ray"].llm_calls()) == len(al.read(src).llm_calls()) > 0
    assert all(c.cache == "hit" for c in outs["ray"].llm_calls())


def test_attribution_arms_run_on_ray_as_locally(tmp_path: Path) -> None:
    """Each alteration arm crosses to the workers as its Alter steer's identity."""
    from agentlog.estimators import attribution
    from agentlog.examples.deep_research import retrieval_outcome

    run_study(tmp_path / "src", tasks=task_ids(2), rankings=("agent",), seeds=(0,),
              evaluate=False)
    arms = attribution.arms(["doc@0", "doc@1=resample", "stop@0=flip"], shapley=None)
    results = {}
    for executor in ("local", "ray"):
        res = intervene(tmp_path / "src", window="retrieval", arms=arms, app=APP,
                        out=tmp_path / executor, mode="branch", seeds=range(2),
                        scores=retrieval_outcome,
                        execution=ExecutionOptions(executor=executor))  # type: ignore[arg-type]
        assert res.summary.done == 2 * 5 * 2 and res.summary.failed == 0, res.summary.failures
        results[executor] = attribution.from_traces(tmp_path / executor,
                                                    outcome="opened_mean")
    assert results["local"].to_dict() == results["ray"].to_dict()
