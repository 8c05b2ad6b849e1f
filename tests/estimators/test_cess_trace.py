"""cess.from_traces: record trajectories with al.select/al.proceed, read them back, get the
same numbers as the array path; cess.load_table reads CSV, JSON lines and Parquet."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agentlog as al
from agentlog._steering import Steer, steering
from agentlog.estimators import cess
from agentlog.examples.deep_research import Policy, make_pool, run_agent

IDS = ("a", "b", "c", "d", "e")
Y = {"a": 0.9, "b": 0.4, "c": -0.3, "d": -0.8, "e": 0.1}
M = {"a": 0.6, "b": 0.2, "c": -0.1, "d": -0.5, "e": 0.0}
# The known design: one full vector per round (with replacement, so every candidate keeps
# positive probability: overlap) and the continue probability before rounds 2 and 3.
VECTORS = ((0.4, 0.3, 0.1, 0.1, 0.1), (0.2, 0.2, 0.2, 0.2, 0.2), (0.05, 0.05, 0.3, 0.3, 0.3))
CONTINUE = (1.0, 0.8, 0.6)


def hand_agent(log: list[tuple[str, float, float]], *, vectors: Sequence[Sequence[float]] = VECTORS,
               continues: Sequence[float] = CONTINUE, noise: bool = True) -> None:
    """Open up to three documents; log (chosen id, its p, s_t) as the agent knows them."""
    survival = 1.0
    for t, vector in enumerate(vectors):
        if noise:  # other streams must not count
            al.select([0.5, 0.5], candidates=["x", "y"], name="query")
            al.proceed(0.5, name="retry")
        if t > 0:
            if not al.proceed(continues[t], name="stop"):
                return
            survival *= continues[t]
        i = al.select(list(vector), candidates=list(IDS), name="doc")
        log.append((IDS[i], vector[i], survival))


def record_hand_runs(folder: Path, n: int = 8, **kwargs: Any) -> list[list[tuple[str, float,
                                                                                   float]]]:
    logs = []
    for seed in range(n):
        log: list[tuple[str, float, float]] = []
        with al.record(folder / f"run{seed:02d}.zst", system="hand", seed=seed, task="t1",
                       meta={"condition": "A" if seed % 2 else "B", "replicate": seed}):
            hand_agent(log, **kwargs)
        logs.append(log)
    return logs


def hand_arrays(logs: list[list[tuple[str, float, float]]], budget: int,
                y: dict[str, float] = Y, m: dict[str, float] = M) -> dict[str, Any]:
    n = len(logs)
    out = {k: np.full((n, budget), np.nan) for k in ("y", "p", "s", "m_chosen")}
    for i, log in enumerate(logs):
        for t, (cid, p, s) in enumerate(log[:budget]):
            out["y"][i, t], out["p"][i, t], out["s"][i, t] = y[cid], p, s
            out["m_chosen"][i, t] = m[cid]
    return out


@pytest.fixture
def hand(tmp_path: Path) -> tuple[Path, list[list[tuple[str, float, float]]]]:
    return tmp_path, record_hand_runs(tmp_path)


# -- the arrays --------------------------------------------------------------------------


def test_the_arrays_are_the_logged_probabilities_survival_and_table_values(
    hand: tuple[Path, list[list[tuple[str, float, float]]]],
) -> None:
    folder, logs = hand
    data = cess.from_traces(folder, outcomes=Y, predictions=M, budget=3)
    expected = hand_arrays(logs, 3)
    for name in ("y", "p", "s", "m_chosen"):
        np.testing.assert_array_equal(getattr(data, name), expected[name], err_msg=name)
    assert data.budget == 3 and len(data) == 8
    np.testing.assert_array_equal(data.n_pool, 5)
    np.testing.assert_array_equal(data.rho, 0.0)
    np.testing.assert_allclose(data.m_bar, np.mean(list(M.values())), rtol=0, atol=1e-15)
    np.testing.assert_allclose(data.theta_star, np.mean(list(Y.values())), rtol=0, atol=1e-15)
    np.testing.assert_array_equal(data.n_rounds, [len(log) for log in logs])
    assert data.condition == tuple("BABABABA") and data.replicate == tuple(range(8))
    assert data.task == ("t1",) * 8 and data.cluster == ("t1",) * 8  # cluster falls back to task
    assert data.system == ("hand",) * 8 and data.seed == tuple(range(8))
    assert [Path(p).name for p in data.path] == [f"run{i:02d}.zst" for i in range(8)]
    assert len(set(data.run_id)) == 8 and data.has_theta_star


def test_some_runs_stop_early_so_survival_and_nan_padding_are_exercised(
    hand: tuple[Path, list[list[tuple[str, float, float]]]],
) -> None:
    _, logs = hand
    assert {len(log) for log in logs} >= {1, 3}, [len(log) for log in logs]


@pytest.mark.parametrize(("lam", "order", "anchor"), [
    (1.0, "shrink-then-clip", "prediction"),
    (0.5, "clip-then-shrink", "prediction"),
    (0.2, "clip-then-shrink", "opened"),
])
def test_end_to_end_estimates_equal_the_array_path(
    hand: tuple[Path, list[list[tuple[str, float, float]]]], lam: float, order: Any,
    anchor: Any,
) -> None:
    """Record with al.select/al.proceed, read with cess.from_traces: the array path's numbers."""
    folder, logs = hand
    got = cess.from_traces(folder, outcomes=Y, predictions=M, budget=3).estimate(
        lam=lam, order=order, anchor=anchor)
    arrays = hand_arrays(logs, 3)
    want = cess.estimate(arrays["y"], arrays["p"], arrays["s"], arrays["m_chosen"],
                         float(np.mean(list(M.values()))), 5, budget=3, lam=lam, order=order,
                         anchor=anchor)
    for name in ("opened_mean", "outcome_regression", "ipw", "dr_raw", "estimate", "ess",
                 "max_weight", "min_ps"):
        np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=0, atol=1e-12,
                                   err_msg=name)
    # and the raw DR is eq. 6 written out by hand for the first run
    m_bar = float(np.mean(list(M.values())))
    first = m_bar + sum((Y[c] - M[c]) / (5 * p * s) for c, p, s in logs[0]) / 3
    assert got.dr_raw[0] == pytest.approx(first, abs=1e-12)


def test_a_smaller_budget_keeps_the_prefix_and_a_larger_one_pads_with_nan(
    hand: tuple[Path, list[list[tuple[str, float, float]]]],
) -> None:
    folder, logs = hand
    two = cess.from_traces(folder, outcomes=Y, predictions=M, budget=2)
    np.testing.assert_array_equal(two.y, hand_arrays(logs, 2)["y"])
    six = cess.from_traces(folder, outcomes=Y, predictions=M, budget=6)
    assert six.y.shape == (8, 6) and np.isnan(six.y[:, 3:]).all()
    arrays = hand_arrays(logs, 6)
    want = cess.estimate(arrays["y"], arrays["p"], arrays["s"], arrays["m_chosen"],
                         float(np.mean(list(M.values()))), 5, budget=6)
    np.testing.assert_allclose(six.estimate(lam=1.0).dr_raw, want.dr_raw, rtol=0, atol=1e-12)
    # a prefix analysis through CessData.estimate(budget=k) sees the same first k rounds
    np.testing.assert_allclose(six.estimate(budget=2).opened_mean,
                               two.estimate().opened_mean, rtol=0, atol=1e-15)


def test_the_example_agent_logs_what_its_retrieval_window_returns(tmp_path: Path) -> None:
    episodes = [run_agent(task, ranking=ranking, seed=seed, path=tmp_path / f"{task}_{ranking}"
                          f"_{seed}.zst", replicate=seed)
                for task in ("q0", "q1") for ranking in ("agent", "reversed") for seed in (3, 4)]
    pools = {task: make_pool(task, seed=0) for task in ("q0", "q1")}
    outcomes = {(t, c): y for t, p in pools.items() for c, y in zip(p.ids, p.y, strict=True)}
    predictions = {(t, c): m for t, p in pools.items()
                   for c, m in zip(p.ids, p.prediction, strict=True)}
    # The example agent draws with generator /1 (its seeded study's), which keys noise by
    # the seed alone: q0 and q1 under seed 3 (and 4) share their draws, and that is said.
    with pytest.warns(al.SharedNoiseWarning, match=r"2 tasks share seed 3 under noise "
                                                   r"generator 'fmix64-gumbel/1' \(q0, q1\); so "
                                                   r"do the tasks of 1 other seed"):
        data = cess.from_traces([e.path for e in episodes if e.path is not None],
                                outcomes=outcomes, predictions=predictions, budget=4)
    for i, e in enumerate(episodes):
        r = e.retrieval
        k = len(r.opened)
        np.testing.assert_array_equal(data.y[i, :k], r.y)
        np.testing.assert_array_equal(data.p[i, :k], r.p)
        np.testing.assert_allclose(data.s[i, :k], np.cumprod(1 - np.asarray(r.c)), rtol=1e-15)
        assert np.isnan(data.y[i, k:]).all()
        assert data.m_bar[i] == pytest.approx(np.mean(e.pool.prediction), abs=1e-15)
        assert data.theta_star[i] == pytest.approx(e.pool.theta_star, abs=1e-15)
        assert (data.condition[i], data.cluster[i], data.replicate[i], data.n_pool[i]) == (
            e.ranking, e.task_id, e.seed, 30)
    np.testing.assert_allclose(data.estimate().opened_mean,
                               [e.conclusion.opened_mean for e in episodes], rtol=0, atol=1e-12)


def test_tables_may_be_columns_a_pyarrow_table_or_a_file(
    hand: tuple[Path, list[list[tuple[str, float, float]]]], tmp_path: Path,
) -> None:
    pa = pytest.importorskip("pyarrow")  # the arrow extra

    folder, _ = hand
    base = cess.from_traces(folder, outcomes=Y, predictions=M, budget=3)
    columns = {"candidate_id": list(Y), "outcome": list(Y.values())}
    csv_path = tmp_path / "m.csv"
    csv_path.write_text("candidate_id,m\n" + "".join(f"{c},{v}\n" for c, v in M.items()))
    other = cess.from_traces(folder, outcomes=pa.table(columns), predictions=csv_path, budget=3)
    same = cess.from_traces(folder, outcomes=columns, predictions=dict(M), budget=3)
    for d in (other, same):
        np.testing.assert_array_equal(d.y, base.y)
        np.testing.assert_array_equal(d.m_chosen, base.m_chosen)


def test_int_ids_in_the_trace_match_text_ids_from_a_csv(tmp_path: Path) -> None:
    with al.record(tmp_path / "ints.zst", seed=3, task="t"):
        al.select([0.25] * 4, candidates=[10, 11, 12, 13], name="doc")
    table = tmp_path / "y.csv"
    table.write_text("candidate_id,y\n10,0.1\n11,0.2\n12,0.3\n13,0.4\n")
    data = cess.from_traces(tmp_path / "ints.zst", outcomes=table, predictions=table, budget=1)
    assert data.theta_star[0] == pytest.approx(0.25) and data.n_pool[0] == 4


def test_without_a_pool_or_task_column_the_pool_is_the_union_of_the_logged_vectors(
    tmp_path: Path,
) -> None:
    """Round 2 exposes a candidate round 1 did not list: the pool is every id logged, but
    that candidate was unreachable at round 1 (and round 2 drops "a"), so the support
    changed: ρ > 0 and a warning, where ρ = 0 once hid a biased round (issue 29)."""
    with al.record(tmp_path / "grow.zst", seed=1, task="t"):
        first = al.select([0.5, 0.5], candidates=["a", "b"], name="doc")
        al.select([0.5, 0.5], candidates=["b", "c"], name="doc")
    with pytest.warns(al.DegenerateDataWarning, match=r"changed their support .*round 1: "
                                                      r"candidate 'c' had probability 0"):
        data = cess.from_traces(tmp_path / "grow.zst", outcomes=Y, predictions=M, budget=2)
    assert data.theta_star[0] == pytest.approx((Y["a"] + Y["b"] + Y["c"]) / 3)
    # D+ = the candidates every round covers: "b" (positive at both) and, when round 1
    # opened "a", "a" too (opened, then 0: without replacement).
    reachable = ["b"] if first == 1 else ["a", "b"]
    assert data.replacement == (("with",) if first == 1 else ("without",))
    assert data.n_pool[0] == len(reachable) and data.rho[0] == pytest.approx(
        1 - len(reachable) / 3)
    assert data.m_bar[0] == pytest.approx(np.mean([M[c] for c in reachable]))


def test_a_run_enclosing_nested_runs_is_a_container_not_a_trajectory(tmp_path: Path) -> None:
    path = tmp_path / "nested.zst"
    log: list[tuple[str, float, float]] = []
    with al.record(path, system="outer", seed=1), al.record(path, system="inner", seed=2,
                                                            task="t1"):
        hand_agent(log, noise=False)
    data = cess.from_traces(path, outcomes=Y, predictions=M, budget=3)
    assert data.system == ("inner",)


def test_theta_star_is_nan_when_the_outcomes_do_not_cover_the_pool(
    hand: tuple[Path, list[list[tuple[str, float, float]]]],
) -> None:
    folder, logs = hand
    partial = {c: Y[c] for c, _, _ in logs[0]}  # only what run 0 opened (≤ 3 of 5)
    data = cess.from_traces(folder / "run00.zst", outcomes=partial, predictions=M, budget=3)
    assert np.isnan(data.theta_star).all() and not data.has_theta_star
    assert np.isfinite(data.estimate().estimate).all()


# -- limited support (eq. 10) --------------------------------------------------------------


def test_zero_probability_candidates_give_rho_the_reachable_pool_and_the_eq_10_interval(
    tmp_path: Path,
) -> None:
    vectors = [(0.5, 0.5, 0.0, 0.0, 0.0)] * 3
    logs = record_hand_runs(tmp_path, n=4, vectors=vectors, continues=(1.0, 1.0, 1.0))
    data = cess.from_traces(tmp_path, outcomes=Y, predictions=M, budget=3)
    np.testing.assert_allclose(data.rho, 0.6)
    np.testing.assert_array_equal(data.n_pool, 2)  # D+ = {a, b}
    np.testing.assert_allclose(data.m_bar, (M["a"] + M["b"]) / 2)
    np.testing.assert_allclose(data.theta_star, np.mean(list(Y.values())))  # θ*, whole pool
    with pytest.warns(al.DegenerateDataWarning, match="reach only part of the pool"):
        res = data.estimate(lam=1.0)
    arrays = hand_arrays(logs, 3)
    want = cess.estimate(arrays["y"], arrays["p"], arrays["s"], arrays["m_chosen"],
                         (M["a"] + M["b"]) / 2, 2, budget=3, lam=1.0)
    np.testing.assert_allclose(res.estimate, want.estimate, rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.support_low, 0.4 * res.estimate - 0.6, atol=1e-12)
    np.testing.assert_allclose(res.support_high, 0.4 * res.estimate + 0.6, atol=1e-12)
    theta_plus = (Y["a"] + Y["b"]) / 2  # the interval built on the true θ+ holds θ*
    low, high = cess.support_interval(theta_plus, 0.6)
    assert low <= np.mean(list(Y.values())) <= high


def test_a_pool_candidate_never_logged_is_unreachable(
    hand: tuple[Path, list[list[tuple[str, float, float]]]],
) -> None:
    folder, _ = hand
    pool = {"t1": [*IDS, "f"]}
    # "f" is unreachable: m̄ averages over D+ (no prediction of "f" needed), θ* over the pool.
    data = cess.from_traces(folder, outcomes={**Y, "f": 0.0}, predictions=M, budget=3,
                            pool=pool)
    np.testing.assert_allclose(data.rho, 1 / 6)
    np.testing.assert_array_equal(data.n_pool, 5)
    np.testing.assert_allclose(data.theta_star, sum(Y.values()) / 6)
    with pytest.warns(al.DegenerateDataWarning, match="reach only part of the pool"):
        res = data.estimate()
    assert np.isfinite(res.support_low).all()
    with pytest.raises(ValueError, match="`pool` has no entry for task 't1'"):
        cess.from_traces(folder, outcomes=Y, predictions=M, budget=3, pool={"t2": IDS})


# -- errors --------------------------------------------------------------------------------


def test_a_pool_candidate_without_a_prediction_raises_because_m_bar_needs_it(
    tmp_path: Path,
) -> None:
    with al.record(tmp_path / "one.zst", seed=4, task="t1"):
        i = al.select([0.2] * 5, candidates=list(IDS), name="doc")
    other = IDS[(i + 1) % 5]
    with pytest.raises(ValueError, match=rf"one\.zst: run \w+ \(task 't1'\): candidate "
                       rf"'{other}' of the pool has no prediction in `predictions`; m̄ "
                       "averages the predictions over the whole pool"):
        cess.from_traces(tmp_path / "one.zst", outcomes=Y,
                         predictions={c: v for c, v in M.items() if c != other}, budget=1)



def test_a_selected_candidate_missing_from_the_tables_is_named_with_its_round(
    hand: tuple[Path, list[list[tuple[str, float, float]]]],
) -> None:
    folder, logs = hand
    cid = logs[0][0][0]
    without = {c: v for c, v in Y.items() if c != cid}
    with pytest.raises(ValueError, match=rf"run00\.zst: run \w+ \(task 't1'\), round 1: the "
                       rf"selected candidate '{cid}' has no outcome in `outcomes`; add a row"):
        cess.from_traces(folder, outcomes=without, predictions=M, budget=3)
    with pytest.raises(ValueError, match=f"selected candidate '{cid}' has no prediction"):
        cess.from_traces(folder, outcomes=Y, predictions={c: v for c, v in M.items()
                                                         if c != cid}, budget=3)


def test_a_nan_outcome_or_prediction_of_a_selected_candidate_raises(
    hand: tuple[Path, list[list[tuple[str, float, float]]]],
) -> None:
    folder, logs = hand
    cid = logs[0][0][0]
    with pytest.raises(ValueError, match=f"round 1: the selected candidate '{cid}' has a NaN "
                       "outcome in `outcomes`; every opened document needs its outcome"):
        cess.from_traces(folder, outcomes={**Y, cid: math.nan}, predictions=M, budget=3)
    with pytest.raises(ValueError, match=f"'{cid}' has a NaN prediction"):
        cess.from_traces(folder, outcomes=Y, predictions={**M, cid: math.nan}, budget=3)


class ForceZero(Steer):
    name = "force-zero"

    def select(self, stream: str, step: int, probs: Any, ids: tuple[Any, ...]) -> int | None:
        return 4 if stream == "doc" else None

    def proceed(self, stream: str, step: int, p: float) -> float | bool | None:
        return True if stream == "stop" else None


def unforced(path: Path) -> al.Trace:
    """The trace with its forced records marked unforced: what a hand-edited (or wrongly
    written) trace looks like, so the checks behind the forced-record refusal are reached."""
    import msgspec

    trace = al.read(path)
    for run in trace.runs:
        run.records[:] = [msgspec.structs.replace(r, forced=False)
                          if getattr(r, "forced", False) else r for r in run.records]
    return trace


def test_a_chosen_probability_of_zero_raises(tmp_path: Path) -> None:
    with al.record(tmp_path / "forced.zst", seed=1, task="t1"), steering(ForceZero()):
        al.select([0.5, 0.5, 0.0, 0.0, 0.0], candidates=list(IDS), name="doc")
    with pytest.raises(ValueError, match=r"forced\.zst: run \w+ \(task 't1'\), round 1: the "
                       r"choice \(stream 'doc' step 0\) was forced by steer 'force-zero'"):
        cess.from_traces(tmp_path / "forced.zst", outcomes=Y, predictions=M, budget=1)
    with pytest.raises(ValueError, match=r"forced\.zst: run \w+ \(task 't1'\), round 1: the "
                       r"chosen candidate 'e' has logged probability 0\.0; a chosen "
                       r"probability must be > 0"):
        cess.from_traces(unforced(tmp_path / "forced.zst"), outcomes=Y, predictions=M,
                         budget=1)


def test_a_round_reached_with_zero_survival_probability_raises(tmp_path: Path) -> None:
    with al.record(tmp_path / "forced.zst", seed=1, task="t1"), steering(ForceZero()):
        al.select([0.2] * 5, candidates=list(IDS), name="doc")
        al.proceed(0.0, name="stop")
        al.select([0.2] * 5, candidates=list(IDS), name="doc")
    with pytest.raises(ValueError, match=r"round 1: the choice \(stream 'doc' step 0\) was "
                       r"forced by steer 'force-zero'"):
        cess.from_traces(tmp_path / "forced.zst", outcomes=Y, predictions=M, budget=2)
    with pytest.raises(ValueError, match=r"round 2: the run reached this round although its "
                       r"logged continue probabilities multiply to 0\.0"):
        cess.from_traces(unforced(tmp_path / "forced.zst"), outcomes=Y, predictions=M,
                         budget=2)


def test_a_run_without_selections_of_the_stream_names_the_streams_it_has(
    hand: tuple[Path, list[list[tuple[str, float, float]]]], tmp_path: Path,
) -> None:
    folder, _ = hand
    with al.record(folder / "zz.zst", seed=9, task="t1"):
        al.select([0.5, 0.5], candidates=["x", "y"], name="query")
    with pytest.raises(ValueError, match=r"zz\.zst: run \w+ \(task 't1'\): no selections of "
                       r"stream 'doc'; this run holds streams \['query'\]"):
        cess.from_traces(folder, outcomes=Y, predictions=M, budget=3)


def test_an_unknown_stream_or_stop_stream_raises_with_the_streams_present(
    hand: tuple[Path, list[list[tuple[str, float, float]]]],
) -> None:
    folder, _ = hand
    with pytest.raises(ValueError, match=r"unknown stream 'docs': no selections of it in .*; "
                       r"the traces hold select streams \['doc', 'query'\]"):
        cess.from_traces(folder, outcomes=Y, predictions=M, stream="docs", budget=3)
    with pytest.raises(ValueError, match=r"unknown stop stream 'halt'.* proceed streams "
                       r"\['retry', 'stop'\].*stop_stream=None"):
        cess.from_traces(folder, outcomes=Y, predictions=M, stop_stream="halt", budget=3)
    with pytest.raises(ValueError, match=r"unknown stream 'docs'.*; and unknown stop stream "
                       r"'halt'.*stop_stream="):  # both wrong: both named at once
        cess.from_traces(folder, outcomes=Y, predictions=M, stream="docs", stop_stream="halt",
                         budget=3)


def test_stop_stream_none_is_fixed_length_search(
    hand: tuple[Path, list[list[tuple[str, float, float]]]],
) -> None:
    folder, _ = hand
    data = cess.from_traces(folder, outcomes=Y, predictions=M, stop_stream=None, budget=3)
    np.testing.assert_array_equal(data.s[~np.isnan(data.y)], 1.0)


def test_bad_arguments_raise(hand: tuple[Path, list[list[tuple[str, float, float]]]],
                             tmp_path: Path) -> None:
    folder, _ = hand
    with pytest.raises(ValueError, match="`budget` must be a positive int"):
        cess.from_traces(folder, outcomes=Y, predictions=M, budget=0)
    with pytest.raises(ValueError, match="`source` is empty"):
        cess.from_traces([], outcomes=Y, predictions=M, budget=3)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"holds no \*\.zst trace files"):
        cess.from_traces(tmp_path / "empty", outcomes=Y, predictions=M, budget=3)
    with pytest.raises(ValueError, match=r"mixes \(task, candidate_id\) keys"):
        cess.from_traces(folder, outcomes={("t1", "a"): 1.0, "b": 0.0}, predictions=M, budget=3)
    with pytest.raises(ValueError, match="`outcomes` must map candidate ids to numbers"):
        cess.from_traces(folder, outcomes={**Y, "a": "high"}, predictions=M, budget=3)
    with pytest.raises(ValueError, match="`predictions` must be a mapping"):
        cess.from_traces(folder, outcomes=Y, predictions=[0.1, 0.2], budget=3)


def test_a_task_keyed_table_needs_runs_with_a_task(tmp_path: Path) -> None:
    with al.record(tmp_path / "notask.zst", seed=1):
        al.select([0.5, 0.5], candidates=["a", "b"], name="doc")
    keyed = {("t1", c): v for c, v in Y.items()}
    with pytest.raises(ValueError, match="the run has no task, but `outcomes` is keyed by"):
        cess.from_traces(tmp_path / "notask.zst", outcomes=keyed, predictions=M, budget=1)


# -- load_table ------------------------------------------------------------------------------


def test_load_table_reads_csv_jsonl_and_parquet_alike(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")  # the arrow extra
    pq = pytest.importorskip("pyarrow.parquet")

    rows = [("t1", "a", 0.5), ("t1", "b", -0.25), ("t2", "a", 1.0)]
    (tmp_path / "y.csv").write_text("task,candidate_id,y\n" + "".join(
        f"{t},{c},{v}\n" for t, c, v in rows))
    (tmp_path / "y.jsonl").write_text("".join(
        json.dumps({"task": t, "candidate_id": c, "outcome": v}) + "\n" for t, c, v in rows))
    pq.write_table(pa.table({"task": [r[0] for r in rows], "candidate_id": [r[1] for r in rows],
                             "value": [r[2] for r in rows]}), tmp_path / "y.parquet")
    want = {("t1", "a"): 0.5, ("t1", "b"): -0.25, ("t2", "a"): 1.0}
    for name in ("y.csv", "y.jsonl", "y.parquet"):
        assert cess.load_table(tmp_path / name) == want, name


def test_load_table_without_a_task_column_keys_by_id_and_empty_cells_are_nan(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.csv"
    path.write_text("candidate_id,prediction,note\nd1,0.25,x\nd2,,y\n")
    table = cess.load_table(path)
    assert table["d1"] == 0.25 and math.isnan(table["d2"]) and set(table) == {"d1", "d2"}
    assert cess.load_table(path, value_column="prediction")["d1"] == 0.25


@pytest.mark.parametrize(("text", "message"), [
    ("id,y\nd1,0.5\n", r"m\.csv: no 'candidate_id' column \(found \['id', 'y'\]\)"),
    ("candidate_id,y\nd1,0.5\nd1,0.6\n", r"duplicate candidate_id 'd1' \(row 2\); keep one row"),
    ("candidate_id,y\nd1,high\n", r"row 1: y must be a number; found 'high'"),
    ("candidate_id,score\nd1,0.5\n", r"no value column among \['candidate_id', 'score'\]; "
                                     r"expected exactly one of y, value"),
    ("candidate_id,y,m\nd1,0.5,0.1\n", r"several value columns \['y', 'm'\]"),
    ("", r"the file is empty"),
])
def test_load_table_errors_name_the_file_and_the_fix(tmp_path: Path, text: str,
                                                     message: str) -> None:
    path = tmp_path / "m.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        cess.load_table(path)


def test_load_table_errors_for_other_formats(tmp_path: Path) -> None:
    (tmp_path / "t.xlsx").write_text("")
    with pytest.raises(ValueError, match=r"unknown table format '\.xlsx'"):
        cess.load_table(tmp_path / "t.xlsx")
    (tmp_path / "t.jsonl").write_text('{"candidate_id": "a", "y": 1}\nnot json\n')
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        cess.load_table(tmp_path / "t.jsonl")
    (tmp_path / "d.jsonl").write_text('{"candidate_id": "a", "task": "t", "y": 1}\n'
                                      '{"candidate_id": "a", "task": "t", "y": 2}\n')
    with pytest.raises(ValueError, match="duplicate candidate_id 'a' in task 't'"):
        cess.load_table(tmp_path / "d.jsonl")
    with pytest.raises(ValueError, match="no column 'score'"):
        cess.load_table(tmp_path / "d.jsonl", value_column="score")


def test_load_table_refuses_a_file_that_is_not_parquet(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow.parquet")  # the arrow extra
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(ValueError, match="not a readable Parquet file"):
        cess.load_table(tmp_path / "bad.parquet")


def test_load_table_names_the_pip_line_when_pyarrow_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(al.MissingDependencyError, match=r"pip install 'agentlog\[arrow\]'"):
        cess.load_table(tmp_path / "y.parquet")


def test_cess_data_is_exported_and_estimate_forwards_keywords(
    hand: tuple[Path, list[list[tuple[str, float, float]]]],
) -> None:
    folder, _ = hand
    data = cess.from_traces(folder, outcomes=Y, predictions=M, budget=3)
    assert isinstance(data, cess.CessData)
    assert {"CessData", "from_traces", "load_table"} <= set(cess.__all__)
    res = data.estimate(lam=0.0, bounds=(-2.0, 2.0))
    np.testing.assert_allclose(res.estimate, data.m_bar)
    assert res.bounds == (-2.0, 2.0) and res.budget == 3


def test_the_uniform_ranking_logs_uniform_probabilities_over_the_pool(tmp_path: Path) -> None:
    e = run_agent("q2", ranking="uniform", seed=1, path=tmp_path / "u.zst",
                  policy=Policy(stop_base=0.0, stop_lean=0.0))
    data = cess.from_traces(tmp_path / "u.zst", outcomes=dict(zip(e.pool.ids, e.pool.y,
                                                                  strict=True)),
                            predictions=dict(zip(e.pool.ids, e.pool.prediction, strict=True)),
                            budget=4)
    np.testing.assert_array_equal(data.p[0], 1 / 30)
    np.testing.assert_array_equal(data.s[0], 1.0)


def test_runs_that_crashed_or_raised_are_left_out_with_a_warning(tmp_path: Path) -> None:
    """A crash is not a stop drawn from the design: such runs are dropped unless kept."""
    from agentlog._writer import TraceWriter
    from agentlog.records import RunEnd

    logs = record_hand_runs(tmp_path, n=4)
    # a killed process: the same run's records without its RunEnd
    crashed = tmp_path / "run00.zst"
    records = [r for r in al.read(crashed).records if not isinstance(r, RunEnd)]
    with TraceWriter(crashed, mode="w") as writer:
        for r in records:
            writer.put(r)
    # a run whose body raised
    with pytest.raises(RuntimeError, match="agent bug"), al.record(
            tmp_path / "raised.zst", system="hand", seed=99, task="t1"):
        hand_agent([])
        raise RuntimeError("agent bug")
    with pytest.warns(al.DegenerateDataWarning, match=r"2 run\(s\) crashed or raised"):
        data = cess.from_traces(tmp_path, outcomes=Y, predictions=M, budget=3)
    assert len(data) == 3
    expected = hand_arrays(logs[1:], 3)
    np.testing.assert_array_equal(data.p, expected["p"])
    kept = cess.from_traces(tmp_path, outcomes=Y, predictions=M, budget=3, unfinished="keep")
    assert len(kept) == 5
    with pytest.raises(ValueError, match="`unfinished` must be 'drop' or 'keep'"):
        cess.from_traces(tmp_path, outcomes=Y, predictions=M, budget=3, unfinished="skip")
