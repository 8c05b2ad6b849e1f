"""End to end: the bundled deep-research agent records sealed, verifiable, auditable traces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import numpy as np
import pytest

import agentlog as al
from agentlog._writer import TraceWriter
from agentlog.examples.deep_research import (
    Policy,
    make_pool,
    retrieve,
    run_agent,
    run_study,
    study_seed,
    task_ids,
)
from agentlog.records import Continuation, Selection, WindowEnter, WindowExit
from tests.conftest import of_type

TASKS = task_ids(4)
SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("study")
    paths: list[Path] = run_study(
        out, tasks=TASKS, rankings=("agent", "reversed", "uniform"), seeds=SEEDS
    )
    return paths


def pool_ids(trace: al.Trace, sel: Selection) -> list[str]:
    ids: list[str] = msgspec.msgpack.decode(trace.blob(sel.pool))
    return ids


def test_the_pool_is_a_stable_function_of_task_n_and_seed() -> None:
    pool = make_pool("q3", seed=0)
    assert pool.n == 30 and pool.ids[7] == "q3-d07"
    assert pool == make_pool("q3", seed=0) and pool != make_pool("q4", seed=0)
    assert pool != make_pool("q3", seed=1)
    assert all(-1 < y < 1 for y in pool.y)
    assert pool.theta_star == pytest.approx(float(np.mean(pool.y)))
    assert pool.features().shape == (30, 3)
    assert sorted(pool.order("reversed")) == sorted(pool.ids)
    assert pool.order("reversed") == pool.order("agent")[::-1]
    # Python's hash() is salted per process; the pool must not depend on it.
    code = ("from agentlog.examples.deep_research import make_pool;"
            "print(repr(make_pool('q3', seed=0).theta_star))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, check=True)
    assert float(done.stdout) == pool.theta_star


def test_the_study_records_one_clean_trace_per_task_ranking_and_seed(study: list[Path]) -> None:
    assert len(study) == len(TASKS) * 3 * len(SEEDS)
    for path in study:
        report = al.verify(path)
        assert report.ok, (path, [str(p) for p in report.problems])
        trace = al.read(path)
        (run,) = trace.runs
        assert run.start is not None and run.complete and not run.failed
        assert run.start.meta["cluster"] == run.start.task
        replicate = run.start.meta["replicate"]
        assert f"_{run.start.meta['ranking']}_s{replicate}" in path.name
        assert run.start.seed == study_seed(run.start.task, replicate)
        assert [w.name for w in trace.windows()] == ["retrieval", "synthesis", "score"]


def test_after_continuity_holds_from_retrieval_to_synthesis_to_score(study: list[Path]) -> None:
    for path in study:
        trace = al.read(path)
        exits = {e.name: e.exit_hash for e in of_type(trace, WindowExit)}
        enters = {e.name: e for e in of_type(trace, WindowEnter)}
        assert enters["synthesis"].after == "retrieval"
        assert enters["synthesis"].link_hash == enters["synthesis"].expected_hash == exits[
            "retrieval"]
        assert enters["score"].after == "synthesis"  # through the entry= projection
        assert enters["score"].link_hash == enters["score"].expected_hash == exits["synthesis"]


def test_the_returned_bundle_carries_the_logged_design_cess_needs(tmp_path: Path) -> None:
    for seed in range(6):
        episode = run_agent("q1", ranking="agent", seed=seed, path=tmp_path / f"{seed}.zst")
        assert episode.path is not None
        trace = al.read(episode.path)
        found = episode.retrieval
        sels = trace.selections("doc")
        assert [pool_ids(trace, s)[s.choice] for s in sels] == list(found.opened)
        assert [float(trace.probs(s)[s.choice]) for s in sels] == list(found.p)
        assert found.c[0] == 0.0
        stops = trace.continuations("stop")
        assert [1.0 - c.p for c in stops[: len(found.c) - 1]] == pytest.approx(found.c[1:])
        assert found.stopped == (not stops[-1].decision if stops else False)
        assert found.y == tuple(episode.pool.y[episode.pool.ids.index(d)] for d in found.opened)
        assert all(s.owner == "model" and s.n_zero == 0 for s in sels)


def test_a_uniform_ranking_is_a_scaffold_owned_choice(study: list[Path]) -> None:
    trace = al.read(next(p for p in study if "_uniform_" in p.name))
    assert {s.owner for s in trace.selections("doc")} == {"scaffold"}
    for s in trace.selections("doc"):
        assert np.allclose(trace.probs(s), 1.0 / s.n)


def opened_mean_errors(tmp_path: Path, ranking: str, policy: Policy, n: int) -> np.ndarray:
    """Opened Mean - θ* over ``n`` questions, one run each, every run with its own seed.

    Distinct seeds keep the trajectories independent: noise is keyed by (seed, stream,
    step, candidate id), so runs sharing a seed share their stopping uniforms.
    """
    errors = [
        run_agent(task, ranking=ranking, seed=1000 + i, policy=policy,
                  path=tmp_path / f"{ranking}-{task}.zst").grade.error
        for i, task in enumerate(task_ids(n))
    ]
    return np.asarray(errors)


def test_the_opened_mean_is_biased_towards_what_the_ranking_puts_first(tmp_path: Path) -> None:
    """Seeded simulation, 40 independent questions per condition; tolerance 4 standard errors.

    The agent's ranking sorts by relevance, which correlates with the evidence score, so its
    Opened Mean overshoots θ*; the reversed ranking undershoots it. Uniform selection with a
    fixed horizon opens a uniform draw every round, so there the Opened Mean is unbiased.
    """
    n = 40
    for ranking, sign in (("agent", 1.0), ("reversed", -1.0)):
        errors = opened_mean_errors(tmp_path, ranking, Policy(), n)
        se = errors.std(ddof=1) / np.sqrt(n)
        assert sign * errors.mean() > 4 * se, (ranking, errors.mean(), se)
    fixed = Policy(stop_base=0.0, stop_lean=0.0)
    errors = opened_mean_errors(tmp_path, "uniform", fixed, n)
    se = errors.std(ddof=1) / np.sqrt(n)
    assert abs(errors.mean()) < 4 * se, (errors.mean(), se)


def test_reversing_the_ranking_changes_selections_but_not_the_draw_of_any_candidate(
    study: list[Path],
) -> None:
    """Common random numbers: a candidate's Gumbel draw depends on (seed, step, id) only."""
    changed = compared = 0
    for path in study:
        if "_agent_" not in path.name:
            continue
        agent = al.read(path)
        reversed_ = al.read(path.with_name(path.name.replace("_agent_", "_reversed_")))
        opened_a = [pool_ids(agent, s)[s.choice] for s in agent.selections("doc")]
        opened_r = [pool_ids(reversed_, s)[s.choice] for s in reversed_.selections("doc")]
        changed += opened_a != opened_r
        steps_r = {s.step: s for s in reversed_.selections("doc")}
        for sa in agent.selections("doc"):
            sr = steps_r.get(sa.step)
            if sr is None:
                continue
            draws_a = dict(zip(pool_ids(agent, sa), agent.draws(sa), strict=True))
            draws_r = dict(zip(pool_ids(reversed_, sr), reversed_.draws(sr), strict=True))
            common = draws_a.keys() & draws_r.keys()
            assert common
            assert all(draws_a[c] == draws_r[c] for c in common)
            if sa.step == 0:  # same candidates in opposite positions: same draws, reordered
                assert set(draws_a) == set(draws_r)
                assert not np.array_equal(agent.draws(sa), reversed_.draws(sr))
            compared += len(common)
    assert changed >= 1 and compared > 0


def test_the_cli_verifies_the_study_and_catches_a_tampered_and_a_garbage_file(
    study: list[Path], tmp_path: Path
) -> None:
    def verify(*paths: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "agentlog.cli", "verify", "--json",
                               *map(str, paths)], capture_output=True, text=True)

    clean = verify(study[0].parent)
    assert clean.returncode == 0, clean.stdout
    assert json.loads(clean.stdout)["counts"]["ok"] == len(study)

    records = list(al.read(study[0]).records)
    i = next(k for k, r in enumerate(records) if isinstance(r, Selection))
    records[i] = msgspec.structs.replace(records[i], choice=(records[i].choice + 1) % records[i].n)
    j = next(k for k, r in enumerate(records) if isinstance(r, Continuation))
    records[j] = msgspec.structs.replace(records[j], decision=not records[j].decision)
    tampered = tmp_path / "tampered.zst"
    with TraceWriter(tampered) as writer:
        for r in records:
            writer.put(r)
    found = verify(tampered)
    assert found.returncode == 1
    kinds = {p["kind"] for p in json.loads(found.stdout)["files"][0]["problems"]}
    assert kinds == {"choice", "decision", "digest"}

    garbage = tmp_path / "garbage.zst"
    garbage.write_bytes(bytes(range(256)))
    bad = verify(garbage)
    assert bad.returncode == 2
    assert "garbage.zst" in json.loads(bad.stdout)["files"][0]["error"]


def test_the_run_script_records_a_study_into_a_folder(tmp_path: Path) -> None:
    from agentlog.examples.deep_research.run import main

    assert main(["--out", str(tmp_path), "--tasks", "2", "--seeds", "1"]) == 0
    assert sorted(p.name for p in tmp_path.glob("*.zst")) == [
        "deep-research_q0_agent_s0.zst", "deep-research_q0_reversed_s0.zst",
        "deep-research_q1_agent_s0.zst", "deep-research_q1_reversed_s0.zst"]


def test_the_sealed_retrieval_entry_reinvokes_the_window_and_reproduces_it(
    tmp_path: Path,
) -> None:
    """What replay builds on: decode the entry, call again under the same seed, same exit."""
    episode = run_agent("q2", ranking="reversed", seed=3, path=tmp_path / "first.zst")
    first = al.read(tmp_path / "first.zst")
    (window,) = first.windows("retrieval")
    args, kwargs = al.decode_arguments(retrieve, window.entry_bytes)
    assert args[0] == episode.pool
    # Same seed and same noise generator: the trace names the one its draws came from.
    with al.record(tmp_path / "again.zst", seed=3, generator=first.runs[0].start.generator):
        assert retrieve(*args, **kwargs) == episode.retrieval
    (again,) = al.read(tmp_path / "again.zst").windows("retrieval")
    assert (again.entry_hash, again.exit_hash) == (window.entry_hash, window.exit_hash)
