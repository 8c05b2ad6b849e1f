"""Generator /3 folds the task into the noise: tasks recorded under one seed draw independent
noise, and one task under one seed draws the same noise in every system (issue 28, item 4).

Under generators /1 and /2 every task recorded with the same seed drew the same stop
uniforms and Gumbel draws, so estimates over tasks rested on correlated ones.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

import agentlog as al
from agentlog import _noise
from agentlog._writer import TraceWriter
from agentlog.records import Continuation, RunStart, Selection
from agentlog.reentry import continuation_uniform, gumbel_draws, noise_seed

POOL = [f"doc-{i}" for i in range(5)]
V2 = "fmix64-gumbel/2"
V3 = "fmix64-gumbel/3"


def record_step_0(path: Path, *, task: str | None, system: str = "agent", seed: int = 7,
                  generator: str = V3) -> tuple[list[float], float]:
    """One select over POOL and one proceed; their draws at step 0 as recorded."""
    with al.record(path, system=system, seed=seed, task=task, generator=generator):
        al.select([0.2] * 5, candidates=POOL, name="doc")
        al.proceed(0.5, name="stop")
    trace = al.read(path)
    (sel,) = trace.selections()
    (cont,) = [r for r in trace.records if isinstance(r, Continuation)]
    assert sel.step == cont.step == 0
    return trace.draws(sel).tolist(), cont.u


def test_two_tasks_under_one_seed_draw_independent_noise_and_two_systems_the_same(
        tmp_path: Path) -> None:
    q1a = record_step_0(tmp_path / "q1-a.zst", task="q-001", system="a")
    q2a = record_step_0(tmp_path / "q2-a.zst", task="q-002", system="a")
    q1b = record_step_0(tmp_path / "q1-b.zst", task="q-001", system="b")
    draws_1, u_1 = q1a
    draws_2, u_2 = q2a
    assert u_1 != u_2  # the stop uniform at step 0
    assert all(a != b for a, b in zip(draws_1, draws_2, strict=True))  # every Gumbel draw
    assert q1b == q1a  # the same task and seed in another system: paired by the same noise


def test_thirty_tasks_under_one_seed_draw_thirty_stop_uniforms() -> None:
    """The issue's measurement: under /2 all 30 tasks drew one u at step 0."""
    u = [continuation_uniform(7, "stop", 0, V3, task=f"q-{i:03d}") for i in range(30)]
    assert len(set(u)) == 30
    assert {continuation_uniform(7, "stop", 0, V2, task=f"q-{i:03d}") for i in range(30)} == {
        _noise.uniform(7, "stop", 0)}


def test_a_run_recorded_with_generator_2_still_draws_the_old_values(tmp_path: Path) -> None:
    # Pinned from agentlog at e620041 (before /3): al.record(seed=7, task="q-001") with
    # its default generator /2, the same select and proceed.
    old = ([0.8309115266559585, 1.875704631955581, 1.8139552915942534], 0.24524421866798002)
    path = tmp_path / "v2.zst"
    with al.record(path, seed=7, task="q-001", generator=V2):
        choice = al.select([0.25, 0.25, 0.5], candidates=["d1", "d2", "d3"], name="doc")
        al.proceed(0.5, name="stop")
    trace = al.read(path)
    (sel,) = trace.selections()
    (cont,) = [r for r in trace.records if isinstance(r, Continuation)]
    assert (trace.draws(sel).tolist(), cont.u) == old and choice == 2
    assert sel.generator == V2 and al.verify(path).ok
    # /2 ignores the task: another task under the seed draws the same; /3 (new runs) does not
    assert record_step_0(tmp_path / "a.zst", task="q-001", generator=V2) == record_step_0(
        tmp_path / "b.zst", task="q-002", generator=V2)
    new = tmp_path / "v3.zst"
    with al.record(new, seed=7, task="q-001"):
        al.select([0.25, 0.25, 0.5], candidates=["d1", "d2", "d3"], name="doc")
    assert al.read(new).draws(al.read(new).selections()[0]).tolist() != old[0]


def test_the_noise_seed_is_the_documented_fold_of_seed_and_task() -> None:
    def reference(seed: int, task: str) -> int:
        t = int.from_bytes(hashlib.blake2b(b"agentlog-task\0" + task.encode("utf-8"),
                                           digest_size=8).digest(), "little")
        return _noise.fmix64((seed % 2**64) ^ _noise.fmix64(t))

    for seed in (0, 7, 2**63, 2**64 - 1):
        for task in ("q-001", "", "日本語"):
            assert noise_seed(seed, task, V3) == reference(seed, task)
    assert noise_seed(7, "q-001", V3) == 0xB9BBC46AA4E21546  # a contract: never changes
    assert noise_seed(-1, "q-001", V3) == reference(2**64 - 1, "q-001")  # masked to 64 bits
    assert noise_seed(7, None, V3) == 7  # no task: the seed itself
    assert noise_seed(7, "q-001", V2) == noise_seed(7, "q-001", "fmix64-gumbel/1") == 7
    with pytest.raises(ValueError, match="`generator` must be one of"):
        noise_seed(7, "q-001", "philox/9")
    with pytest.raises(TypeError, match="`task` must be a str or None; found int"):
        noise_seed(7, 3, V3)  # type: ignore[arg-type]


def test_the_run_keeps_its_noise_seed_and_record_refuses_a_task_that_is_not_a_str(
        tmp_path: Path) -> None:
    with al.record(tmp_path / "t.zst", seed=7, task="q-001") as run:
        assert run.generator == V3 and run.noise_seed == noise_seed(7, "q-001", V3)
        i = al.select([0.2] * 5, candidates=POOL, name="doc")
    g = gumbel_draws(POOL, 7, "doc", 0, V3, task="q-001")
    assert i == int(np.argmax(np.log([0.2] * 5) + g))
    with pytest.raises(TypeError, match="`task` must be a str or None; found int"):
        al.record(tmp_path / "x.zst", task=3)  # type: ignore[arg-type]


def _rewritten(src: Path, out: Path, edit: type[Any], change: dict[str, Any]) -> Path:
    with TraceWriter(out) as w:
        for r in al.read(src).records:
            w.put(msgspec.structs.replace(r, **change) if isinstance(r, edit) else r)
    return out


def test_verify_regenerates_the_draws_of_generator_3_and_finds_an_edited_one(
        tmp_path: Path) -> None:
    path = tmp_path / "v3.zst"
    record_step_0(path, task="q-001")
    assert {r.generator for r in al.read(path).records if isinstance(r, RunStart)} == {V3}
    report = al.verify(path)
    assert report.ok and report.checked["selections"] == 1
    assert report.checked["continuations"] == 1
    (sel,) = al.read(path).selections()
    draws = np.frombuffer(sel.draws, dtype="<f8").copy()
    draws[2] += 0.25
    edited = _rewritten(path, tmp_path / "draw.zst", Selection, {"draws": draws.tobytes()})
    assert [p.message for p in al.verify(edited).problems if p.kind == "draws"] == [
        f"select 'doc' step 0: draw 2 is {draws[2]!r}, regenerating from (seed, task, "
        f"stream, step, id) gives {np.frombuffer(sel.draws, dtype='<f8')[2]!r}"]
    # The task is part of the noise: another task in the RunStart regenerates other draws.
    moved = _rewritten(path, tmp_path / "task.zst", RunStart, {"task": "q-002"})
    kinds = [(p.kind, p.message.split(":")[0]) for p in al.verify(moved).problems]
    assert ("draws", "select 'doc' step 0") in kinds and ("draws", "proceed 'stop' step 0") in kinds
