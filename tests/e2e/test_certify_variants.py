"""End to end: variants of the bundled agent, recorded, then certified from their traces under
the bundled plan ([LBC] §3.4, §6.1–6.2).

Five systems run the same questions and seeds: three fair search policies, one handed a
privileged entry (its retrieval pool carries an oracle ranking hint) and one on another
backbone. Admissibility is decided from the sealed retrieval entries before any score is read:
the privileged pairs are refused for their entry mismatch, the backbone pairs for having no
finite radius, and the fair pairs are exact cells, decided by the sampling radius alone.
"""

from __future__ import annotations

import hashlib
import math
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

import agentlog as al
from agentlog._encoding import decode
from agentlog.estimators import certify
from agentlog.examples.deep_research import Policy, make_pool, run_study, task_ids

TASKS = task_ids(12)
SEEDS = (0, 1)
FAIR = ("reference", "greedy", "explorer")
SYSTEMS = {
    "reference": Policy(),
    "greedy": Policy(temperature=1.0, floor=0.02),
    "explorer": Policy(temperature=30.0, floor=0.5),
    "privileged": Policy(oracle_hint=True),
    "other-backbone": Policy(backbone="olmo-2-7b"),
}
N_PAIRS = 10  # every pair of the five systems (family = "all")


def plan_with(changes: dict[str, Any] | None = None) -> Any:
    """The bundled plan (read as the demo reads it), with dotted-path changes."""
    text = resources.files("agentlog.examples").joinpath("plans", "deep_research.toml")
    data = tomllib.loads(text.read_text(encoding="utf-8"))
    for dotted, value in (changes or {}).items():
        *parents, key = dotted.split(".")
        node = data
        for p in parents:
            node = node.setdefault(p, {})
        node[key] = value
    return certify.Plan.model_validate(data)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("variants")
    # Both rankings are recorded; the plan's select keeps the agent's ranking only.
    run_study(out, tasks=TASKS, rankings=("agent", "reversed"), seeds=SEEDS, systems=SYSTEMS,
              evaluate=False)
    return out


@pytest.fixture(scope="module")
def data(runs: Path) -> Any:
    return certify.from_traces(runs, plan=plan_with())


@pytest.fixture(scope="module")
def board(data: Any) -> Any:
    plan = plan_with()
    adm = certify.admissibility(data.entries, plan=plan)
    return certify.certify(data, plan=plan, admissibility=adm)


def abs_errors(folder: Path) -> dict[str, dict[str, float]]:
    """``system -> task -> mean abs_error`` over the agent-ranking runs, read directly."""
    cells: dict[tuple[str, str], list[float]] = {}
    for path in sorted(folder.glob("*.zst")):
        trace = al.read(path)
        for run in trace.runs:
            assert run.start is not None and run.start.task is not None
            if run.start.meta["ranking"] != "agent":
                continue
            (value,) = [s.value for s in trace.scores("abs_error") if s.run == run.run]
            cells.setdefault((run.start.system, run.start.task), []).append(value)
    out: dict[str, dict[str, float]] = {}
    for (system, task), values in cells.items():
        assert len(values) == len(SEEDS)
        out.setdefault(system, {})[task] = float(np.mean(values))
    return out


def test_the_plan_reads_only_the_agent_ranking_of_every_variant(data: Any) -> None:
    assert data.systems == tuple(sorted(SYSTEMS)) and data.tasks == tuple(sorted(TASKS))
    assert data.n_runs == len(SYSTEMS) * len(TASKS) * len(SEEDS) and data.n_failed_runs == 0
    assert data.entries.window == "retrieval"
    assert len(data.input_hashes) == 2 * len(SYSTEMS) * len(TASKS) * len(SEEDS)


def test_the_privileged_variant_enters_retrieval_with_another_pool_and_scores_best(
    data: Any, board: Any
) -> None:
    """Its entry carries an oracle hint (the same ids and evidence, another relevance), which
    makes it look best by raw score."""
    first = next(e for e in data.entries.entries
                 if e.system == "privileged" and e.task == "q3")
    pool = decode(first.entry_bytes)["pool"]
    truth = make_pool("q3", seed=0)
    assert tuple(pool["ids"]) == truth.ids and tuple(pool["y"]) == truth.y
    assert tuple(pool["relevance"]) != truth.relevance
    assert tuple(pool["relevance"]) == truth.with_oracle_hint().relevance
    assert board.systems[0] == "privileged"
    assert {e.backbone for e in data.entries.entries if e.system == "other-backbone"} == {
        "olmo-2-7b"}
    assert {e.backbone for e in data.entries.entries if e.system != "other-backbone"} == {
        "scripted"}


def test_pairs_with_the_privileged_variant_are_refused_for_entry_mismatch(board: Any) -> None:
    for other in FAIR:
        adm = board.admissibility.pair("privileged", other)
        assert adm.status == "refused"
        assert ("the plan declares one shared entry, but the entries' `pool` bytes differ on "
                f"{len(TASKS)} of {len(TASKS)} common tasks") in adm.reason
        p = board.decision("privileged", other)
        assert p.decision == "refused" and p.reason == adm.reason
        assert p.better is None and p.eps_out == math.inf and math.isnan(p.r)
    assert board.rank("privileged") == (1, len(SYSTEMS))  # refused: any position


def test_without_a_shared_entry_declared_the_mismatch_is_measured_and_too_large(
    data: Any,
) -> None:
    """The plan's `entry_feature` (pool.relevance) measures the mismatch: ε̂_in is the mean
    per-task W1, r its Hoeffding radius D·sqrt(log(m/δ)/(2N)); both exceed ε_fair."""
    plan = plan_with({"conditions.shared_entry": False})
    adm = certify.admissibility(data.entries, plan=plan).pair("reference", "privileged")
    # The hint moves relevance further than the declared bound D = 1 on some question.
    assert adm.status == "refused" and "above the declared `distance_bound` 1" in adm.reason
    bound = 5.0
    plan = plan_with({"conditions.shared_entry": False, "constants.distance_bound": bound})
    adm = certify.admissibility(data.entries, plan=plan).pair("reference", "privileged")
    assert adm.status == "measured" and adm.n_common == len(TASKS)
    w1 = []
    for task in TASKS:
        pool = make_pool(task, seed=0)
        w1.append(stats.wasserstein_distance(pool.relevance, pool.with_oracle_hint().relevance))
    r_in = bound * math.sqrt(math.log(N_PAIRS / 0.05) / (2 * len(TASKS)))
    assert adm.r_in == pytest.approx(r_in, rel=1e-12)
    target = adm.targets["abs_error"]
    assert target.eps_out == pytest.approx(float(np.mean(w1)), rel=1e-9)
    assert target.r == pytest.approx(r_in, rel=1e-12)
    assert not target.admissible and "> ε_fair = 0.05" in (target.reason or "")


def test_pairs_with_another_backbone_are_refused_with_no_finite_radius(board: Any) -> None:
    for other in (*FAIR, "privileged"):
        adm = board.admissibility.pair("other-backbone", other)
        assert adm.status == "refused"
        assert "backbone change" in adm.reason and "olmo-2-7b" in adm.reason
        assert "eq. 3 has no finite radius" in adm.reason
        p = board.decision("other-backbone", other)
        assert p.decision == "refused" and p.eps_out == math.inf and p.better is None
    # The label changes no draw of the bundled agent: its scores equal the reference's, and
    # the pair is refused all the same, because the decision reads no score.
    assert board.decision("other-backbone", "reference").delta == 0.0


def test_as_a_system_window_the_backbone_pair_is_an_exact_cell(data: Any) -> None:
    """[LBC] §6.1: when the backbone is part of the system, it may differ."""
    plan = plan_with({"conditions.backbone": "part-of-system"})
    adm = certify.admissibility(data.entries, plan=plan).pair("reference", "other-backbone")
    assert adm.status == "exact" and adm.targets["abs_error"].admissible


def test_exact_entry_pairs_are_decided_by_the_sampling_radius_alone(
    runs: Path, board: Any
) -> None:
    """r = 0 and ε̂_out = ε_protocol (0 in the bundled plan); Δ̂ and the t(G−1) radius,
    Bonferroni over the 10 pairs, recomputed from the traces' scores (every question is its
    own cluster, so the default CR2 variance with Bell–McCaffrey df is CR1 with t(G−1))."""
    errors = abs_errors(runs)
    t = stats.t.ppf(1 - 0.05 / (2 * N_PAIRS), len(TASKS) - 1)
    for i, a in enumerate(FAIR):
        for b in FAIR[i + 1:]:
            adm = board.admissibility.pair(a, b)
            assert adm.status == "exact" and adm.eps_in == (0.0, 0.0) and adm.r_in == 0.0
            assert f"`pool` bytes equal on {len(TASKS)} of {len(TASKS)}" in adm.reason
            p = board.decision(a, b)
            # abs_error is lower-is-better: Δ̂ favours the first system when it errs less.
            d = np.array([errors[b][t_] - errors[a][t_] for t_ in sorted(TASKS)]) \
                if (p.a, p.b) == (a, b) else \
                np.array([errors[a][t_] - errors[b][t_] for t_ in sorted(TASKS)])
            n = g = len(TASKS)  # every question is its own cluster
            se = math.sqrt(g / (g - 1) * float(((d - d.mean()) ** 2).sum()) / n**2)
            assert p.delta == pytest.approx(d.mean(), abs=1e-12)
            assert p.se == pytest.approx(se, rel=1e-9)
            assert p.q == pytest.approx(t * se, rel=1e-9)
            assert p.sampling == "cr2-bm" and p.df == pytest.approx(g - 1, rel=1e-12)
            assert p.eps_out == 0.0 and p.r == 0.0 and p.n_tasks == len(TASKS)
            assert p.decision == ("certified" if abs(p.delta) > p.q else "undecided-sampling")
    # The seeded study's outcome (the rule above is what the test pins; these are its values).
    assert board.certified() == [("explorer", "greedy"), ("explorer", "reference")]
    assert board.decision("reference", "greedy").decision == "undecided-sampling"
    assert [board.rank(s) for s in ("explorer", "reference", "greedy")] == [(1, 3), (2, 5),
                                                                              (2, 5)]


def test_a_declared_protocol_imbalance_is_the_whole_nuisance_radius_of_an_exact_cell(
    data: Any, board: Any
) -> None:
    plan = plan_with({"readouts.abs_error.eps_protocol": 0.02})
    adm = certify.admissibility(data.entries, plan=plan)
    tight = certify.certify(data, plan=plan, admissibility=adm, calibrate=False)
    for i, a in enumerate(FAIR):
        for b in FAIR[i + 1:]:
            p, before = tight.decision(a, b), board.decision(a, b)
            assert p.eps_out == 0.02 and p.r == 0.0
            assert (p.delta, p.q) == (before.delta, before.q)  # the scores did not change
            if abs(p.delta) > p.q + 0.02:
                assert p.decision == "certified"
            elif abs(p.delta) <= 0.02:
                assert p.decision == "undecided-attribution"
            else:
                assert p.decision == "undecided-sampling"
    assert tight.plan_hash != board.plan_hash


def test_the_board_records_the_plan_and_every_input_by_hash(runs: Path, board: Any) -> None:
    plan = plan_with()
    out = board.to_dict()
    assert out["plan_hash"] == plan.hash() == board.admissibility.plan_hash
    files = sorted(runs.glob("*.zst"))
    assert sorted(out["input_hashes"]) == [str(f) for f in files]
    assert out["input_hashes"][str(files[0])] == hashlib.sha256(files[0].read_bytes()
                                                                ).hexdigest()
    assert [r["rule"] for r in out["ladder"]] == ["R0", "R1", "R2", "R3", "R4", "R5"]
    assert out["ladder"][4]["out_of"] == 3  # the three exact cells are admissible
