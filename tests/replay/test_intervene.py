"""``intervene``: sealed windows re-entered under the arms of a design, with CRN."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agentlog as al
from agentlog.estimators import cess
from agentlog.examples.deep_research import run_agent, run_study, task_ids
from agentlog.records import Continuation
from agentlog.replay import Design, ExecutionOptions, intervene, read_units, replicate_seed
from agentlog.replay.interventions import FixedHorizon, Uniform
from tests.adapters._trace_text import trace_plaintext
from tests.replay._arms import arm_traces

APP = "agentlog.examples.deep_research"


def opened_mean(result: Any) -> dict[str, float]:
    return {"opened_mean": float(np.mean(result.y))}


DESIGN = Design(selection=["agent", Uniform()], stopping=["adaptive", FixedHorizon(4)],
                seeds=range(2))


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("intervene")
    run_study(d / "src", tasks=task_ids(3), rankings=("agent",), seeds=(0, 1), evaluate=False)
    res = intervene(d / "src", window="retrieval", arms=DESIGN, out=d / "out", app=APP,
                    mode="rerun", scores=opened_mean)
    assert res.instances == 6 and res.units == 6 * 4 * 2 and res.summary.done == 48
    return d


def test_the_agents_own_arm_at_replicate_0_reproduces_every_recorded_draw(
    replayed: Path,
) -> None:
    arms = arm_traces(replayed / "out")
    checked = 0
    for p in sorted((replayed / "src").glob("*.zst")):
        src = al.read(p)
        start = src.runs[0].start
        assert start is not None
        arm = arms[start.run_id, "selection=agent,stopping=adaptive", 0]
        assert arm.runs[0].start is not None and arm.runs[0].start.seed == start.seed
        for a, b in zip(src.selections(), arm.selections(), strict=True):
            assert (a.step, a.choice, a.probs, a.draws) == (b.step, b.choice, b.probs, b.draws)
            checked += 1
        conts = [(r.step, r.p, r.u, r.decision) for r in src.records if type(r) is Continuation]
        again = [(r.step, r.p, r.u, r.decision) for r in arm.records if type(r) is Continuation]
        assert conts == again
        assert src.windows("retrieval")[0].exit_value() == arm.windows("retrieval")[0].exit_value()
    assert checked >= 6


def test_every_arm_of_a_block_shares_its_random_numbers(replayed: Path) -> None:
    """CRN: at each step, each document's Gumbel draw is the recorded draw of that document
    at that step, whatever the arm's probabilities or the pool's order."""
    arms = arm_traces(replayed / "out")
    compared = 0
    for (run_id, name, rep), trace in arms.items():
        if rep != 0:
            continue
        own = arms[run_id, "selection=agent,stopping=adaptive", 0]
        own_draws = {s.step: dict(zip(own.candidates(s), own.draws(s), strict=True))
                     for s in own.selections()}
        for s in trace.selections():
            if s.step not in own_draws:
                continue
            for cid, g in zip(trace.candidates(s), trace.draws(s), strict=True):
                assert own_draws[s.step][cid] == g
                compared += 1
        if name == "selection=uniform,stopping=fixed:4":
            assert all(s.steer == name for s in trace.selections())
    assert compared > 100
    # replicate 1 runs with the derived seed, the same for every arm of the block
    seeds = {key: t.runs[0].start.seed for key, t in arms.items()}  # type: ignore[union-attr]
    for (run_id, name, rep), seed in seeds.items():
        recorded = seeds[run_id, "selection=agent,stopping=adaptive", 0]
        assert seed == replicate_seed(recorded, rep), name


def test_the_output_carries_the_provenance_and_gives_the_policy_effects(replayed: Path) -> None:
    units = read_units(replayed / "out" / "units.zst")
    assert len(units) == 48 and all(u.status == "ok" for u in units.values())
    prov = next(iter(units.values())).provenance
    assert set(prov) >= {"factors", "arm", "arm_hash", "replicate", "seed", "mode", "task",
                         "source_run", "source_trace", "window", "window_name", "arm_trace"}
    assert prov["mode"] == "rerun" and prov["window_name"] == "retrieval"
    hashes = {a.name: a.hash for a in DESIGN.arms()}
    for u in units.values():
        assert u.provenance["arm_hash"] == hashes[u.provenance["arm"]]
        (score,) = u.scores
        assert score.name == "opened_mean"
    arm_means = {}
    for key, trace in arm_traces(replayed / "out").items():
        (view,) = trace.windows("retrieval")
        arm_means[key] = float(np.mean(view.exit_value()["y"]))
    fx = cess.effects_from_traces(replayed / "out", outcome="opened_mean", n_resamples=300)
    assert fx.n_blocks == 12 and fx.n_clusters == 3 and fx.n_skipped == 48
    # θ_11 is the agent's own arm: its opened mean, block by block
    by_block = {(u.provenance["source_run"], u.provenance["replicate"]): u
                for u in units.values() if u.provenance["arm"] ==
                "selection=agent,stopping=adaptive"}
    expected = [arm_means[k[0], "selection=agent,stopping=adaptive", k[1]] for k in by_block]
    assert sorted(fx.theta["11"]) == pytest.approx(sorted(expected), abs=1e-12)


def test_a_second_call_resumes_and_skips_every_sealed_unit(replayed: Path) -> None:
    res = intervene(replayed / "src", window="retrieval", arms=DESIGN, out=replayed / "out",
                    app=APP, mode="rerun", scores=opened_mean)
    assert res.summary.skipped == 48 and res.summary.done == 0


def test_bad_calls_say_what_to_do(replayed: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="`mode` must be one of frozen, branch, rerun"):
        intervene(replayed / "src", window="retrieval", arms=DESIGN, out=tmp_path / "o",
                  mode="replay")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no sealed instance of window 'retrival'"):
        intervene(replayed / "src", window="retrival", arms=DESIGN, out=tmp_path / "o",
                  app=APP, mode="rerun")
    with pytest.raises(ValueError, match="`scores` must be a module-level function a worker "
                                         "can import"):
        intervene(replayed / "src", window="retrieval", arms=DESIGN, out=tmp_path / "o",
                  app=APP, mode="rerun",
                  execution=ExecutionOptions(executor="ray"), scores=lambda r: {})
    with pytest.raises(ValueError, match=r"secrets= are values of this process and never "
                                         r"cross to workers; set \$AGENTLOG_SECRET_<NAME>"):
        intervene(replayed / "src", window="retrieval", arms=DESIGN, out=tmp_path / "o",
                  app=APP, mode="rerun",
                  execution=ExecutionOptions(executor="ray"), secrets={"token": "x"})
    with pytest.raises(ValueError, match="no such trace file or folder"):
        intervene(tmp_path / "missing", window="retrieval", arms=DESIGN, out=tmp_path / "o",
                  app=APP, mode="rerun")


# -- windows recorded mid-run, on methods, with entry= and with secrets -----------------


class Searcher:
    def __init__(self, k: int) -> None:
        self.k = k

    @al.window("intervene_method")
    def search(self, ids: list[str]) -> list[str]:
        return [ids[al.select([1 / len(ids)] * len(ids), candidates=ids, name="doc")]
                for _ in range(self.k)]


@al.window("intervene_secret", secret=("token",))
def fetch(ids: list[str], token: str) -> str:
    assert token == "s3cret"
    return ids[al.select([0.7, 0.2, 0.1], candidates=ids, name="doc")]


@al.window("intervene_projected", entry=lambda ids, n: ids)
def pick(ids: list[str], n: int) -> list[str]:
    return [ids[al.select([0.5, 0.3, 0.2], candidates=ids, name="doc")] for _ in range(n)]


IDS = ["a", "b", "c"]
APP_HERE = __name__


def _record_mid_run(path: Path) -> None:
    with al.record(path, seed=11, task="t0", mode="w"):
        for _ in range(3):  # draws before the windows: they open at step 3, 5, ...
            al.select([0.5, 0.25, 0.25], candidates=IDS, name="doc")
        Searcher(2).search(IDS)
        fetch(IDS, "s3cret")
        pick(IDS, 2)


def test_windows_recorded_mid_run_reenter_at_their_stream_offsets(tmp_path: Path) -> None:
    _record_mid_run(tmp_path / "src.zst")
    src = al.read(tmp_path / "src.zst")
    own = Design(seeds=range(1))
    for window, extra in (("intervene_method", {"instance": Searcher(2)}),
                          ("intervene_secret", {"secrets": {"token": "s3cret"}}),
                          ("intervene_projected", {})):
        out = tmp_path / window
        intervene(tmp_path / "src.zst", window=window, arms=own, out=out, app=APP_HERE,
                  mode="rerun", **extra)
        (arm_path,) = (out / "arms").glob("*.zst")
        arm = al.read(arm_path)
        (view,) = src.windows(window)
        recorded = [s for s in src.selections() if s.window == view.window]
        again = arm.selections()
        assert [(s.step, s.choice, s.draws) for s in again] == \
            [(s.step, s.choice, s.draws) for s in recorded]
        assert recorded[0].step >= 3
        assert arm.windows(window)[0].exit_value() == view.exit_value()
    # the secret was never stored
    for p in tmp_path.rglob("*.zst"):
        assert b"s3cret" not in p.read_bytes()


def test_method_and_secret_windows_refuse_with_what_to_supply(tmp_path: Path) -> None:
    _record_mid_run(tmp_path / "src.zst")
    own = Design()
    res = intervene(tmp_path / "src.zst", window="intervene_method", arms=own,
                    out=tmp_path / "m", app=APP_HERE, mode="rerun")
    (failure,) = res.summary.failures
    assert "Pass instance=<the object>" in failure.message
    res = intervene(tmp_path / "src.zst", window="intervene_secret", arms=own,
                    out=tmp_path / "s", app=APP_HERE, mode="rerun")
    (failure,) = res.summary.failures
    assert "token" in failure.message and "secrets=" in failure.message
    units = read_units(tmp_path / "s" / "units.zst")
    assert [u.status for u in units.values()] == ["failed"]  # recorded, retried by a re-run
    res = intervene(tmp_path / "src.zst", window="intervene_secret", arms=own,
                    out=tmp_path / "s", app=APP_HERE, mode="rerun",
                    secrets={"token": "s3cret"})
    assert res.summary.done == 1 and res.summary.skipped == 0
    assert [u.status for u in read_units(tmp_path / "s" / "units.zst").values()] == ["ok"]


def test_units_are_made_as_the_engine_takes_them_one_source_at_a_time(
        replayed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A study of many instances x arms x seeds never holds its units all at once: the
    engine gets an iterator, and taking a unit reads no more source traces than it needs.
    Naming a trace twice (itself and its folder) gives its instances once."""
    from agentlog.replay import _intervene

    sources = sorted((replayed / "src").glob("*.zst"))
    assert len(sources) == 6
    reads: list[str] = []
    real_read, real_run_units = al.read, _intervene.run_units
    monkeypatch.setattr(al, "read", lambda path, **kw: reads.append(str(path)) or real_read(
        path, **kw))
    taken: dict[str, Any] = {}

    def spy(units: Any, *args: Any, **kwargs: Any) -> Any:
        taken["iterator"] = iter(units) is units
        first = [next(units) for _ in range(8)]  # the first instance's 8 (arm, seed) units
        taken["reads"] = len(reads)
        return real_run_units(iter([*first, *units]), *args, **kwargs)

    monkeypatch.setattr(_intervene, "run_units", spy)
    res = intervene([replayed / "src", sources[0]], window="retrieval", arms=DESIGN,
                    out=tmp_path / "o", app=APP, mode="rerun")
    assert taken == {"iterator": True, "reads": 1}  # one source read for its first 8 units
    assert res.instances == 6 and res.units == 48 and res.summary.done == 48


def test_policy_effects_warn_when_the_sources_drew_one_noise_for_every_task(
        tmp_path: Path) -> None:
    """The example agent draws with generator /1, which keys noise by the seed alone: three
    questions recorded under one seed share their draws, and so do their arms (each arm run
    draws with its source's seed, task and generator). The effects say so."""
    for task in task_ids(3):
        run_agent(task, ranking="agent", seed=5, path=tmp_path / "src" / f"{task}.zst",
                  evaluate=False)
    design = Design(selection=["agent", Uniform()], stopping=["adaptive", FixedHorizon(4)])
    res = intervene(tmp_path / "src", window="retrieval", arms=design, out=tmp_path / "out",
                    app=APP, mode="rerun", scores=opened_mean)
    assert res.summary.done == 12
    with pytest.warns(al.SharedNoiseWarning, match=r"3 tasks share seed 5 under noise "
                                                   r"generator 'fmix64-gumbel/1' \(q0, q1, "
                                                   r"q2\): their random draws"):
        fx = cess.effects_from_traces(tmp_path / "out", outcome="opened_mean",
                                      n_resamples=200)
    assert fx.n_blocks == 3


def test_no_private_module_path_is_written_into_the_outputs(replayed: Path) -> None:
    private = re.compile(rb"agentlog\.(?:[a-z]+\.)?_[a-z_]+")
    files = sorted((replayed / "out").rglob("*.zst"))
    assert files and all(private.findall(trace_plaintext(p)) == [] for p in files)
