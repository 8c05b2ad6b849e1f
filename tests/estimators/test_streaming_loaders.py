"""cess.from_traces and asv.from_traces stream their files one run at a time: they never
read a file whole, and they give what the in-memory path (Traces read first) gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pytest

import agentlog as al
import agentlog._reader as reader
from agentlog._writer import TraceWriter
from agentlog.cli._demo import (
    ASV_CHANNELS,
    ASV_SCORE,
    ASV_WINDOW,
    pool_tables,
    write_pool_tables,
)
from agentlog.cli._demo_pools import (
    DEMO_BUDGET,
    DEMO_CANDIDATES,
    DEMO_POOL_SEED,
)
from agentlog.estimators import asv, cess, reliability
from agentlog.examples.deep_research import run_study, task_ids
from tests.cli._cli import invoke

TASKS = task_ids(2)


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The demo's study, small: 2 tasks x 2 rankings x 2 seeds, one trace per run."""
    out = tmp_path_factory.mktemp("study")
    return run_study(out, tasks=TASKS, seeds=range(2), budget=DEMO_BUDGET,
                     n_candidates=DEMO_CANDIDATES, pool_seed=DEMO_POOL_SEED)


def _cess(source: Any) -> cess.CessData:
    outcomes, predictions = pool_tables(TASKS, pool_seed=DEMO_POOL_SEED,
                                        n_candidates=DEMO_CANDIDATES)
    return cess.from_traces(source, outcomes=outcomes, predictions=predictions,
                            budget=DEMO_BUDGET)


def _asv(source: Any, **kwargs: Any) -> asv.AsvData:
    return asv.from_traces(source, channels=ASV_CHANNELS, score=ASV_SCORE, **kwargs)


def _no_whole_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> NoReturn:
        raise AssertionError(f"a file was read whole: read{args}")

    # read_traces calls the module's `read`; agentlog.read is the same function. agentlog's
    # names load on first use: patch them before the module, or they would load `refuse`.
    monkeypatch.setattr(al, "read", refuse)
    monkeypatch.setattr(al, "read_traces", refuse)
    monkeypatch.setattr(reader, "read", refuse)


def test_cess_and_asv_from_trace_never_read_a_file_whole(
    study: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_whole_reads(monkeypatch)
    with pytest.raises(AssertionError, match="a file was read whole"):
        reader.read_traces(study)  # the guard bites
    assert len(_cess(study)) == len(study)
    assert len(_asv(study, window=ASV_WINDOW).transitions) > 0
    assert len(_asv(study[0].parent).transitions) > 0  # a folder; window found first


def _fields(data: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(data).items()}


def _assert_same(a: Any, b: Any) -> None:
    fa, fb = _fields(a), _fields(b)
    assert fa.keys() == fb.keys()
    for key, va in fa.items():
        vb = fb[key]
        if isinstance(va, np.ndarray):
            np.testing.assert_array_equal(va, vb, err_msg=key)  # NaNs equal, bit for bit
            assert va.dtype == vb.dtype, key
        elif isinstance(va, dict) and va and isinstance(next(iter(va.values())), np.ndarray):
            assert va.keys() == vb.keys(), key
            for k in va:
                np.testing.assert_array_equal(va[k], vb[k], err_msg=f"{key}[{k}]")
        else:
            assert va == vb, key


def test_cess_from_trace_streamed_equals_the_in_memory_path(study: list[Path]) -> None:
    streamed = _cess(study)
    in_memory = _cess([al.read(p) for p in study])
    _assert_same(streamed, in_memory)
    assert streamed.path == tuple(str(p) for p in study)  # the stand-ins name the files
    np.testing.assert_array_equal(streamed.estimate(lam=0.5).estimate,
                                  in_memory.estimate(lam=0.5).estimate)


@pytest.mark.parametrize("window", [ASV_WINDOW, None])
def test_asv_from_trace_streamed_equals_the_in_memory_path(
    study: list[Path], window: str | None
) -> None:
    streamed = _asv(study, window=window)
    in_memory = _asv([al.read(p) for p in study], window=window)
    _assert_same(streamed, in_memory)
    assert streamed.window_names == in_memory.window_names != []


def test_asv_from_trace_reads_a_one_shot_iterable_twice(study: list[Path]) -> None:
    """Finding the default window is a first pass: a generator must not run dry."""
    data = _asv(p for p in study)
    _assert_same(data, _asv(study))


def test_cess_keeps_its_error_order_when_streaming(study: list[Path]) -> None:
    """The unknown stream is reported before any run's own problem, as before."""
    with pytest.raises(ValueError, match=r"unknown stream 'nope': no selections of it in "):
        cess.from_traces(study, outcomes={}, predictions={}, stream="nope", budget=2)
    with pytest.raises(ValueError, match=r"has no outcome in `outcomes`"):
        cess.from_traces(study, outcomes={}, predictions={}, budget=2)


def test_agentlog_estimate_cess_and_asv_stream_and_print_the_in_memory_numbers(
    study: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = study[0].parent
    tables = write_pool_tables(folder, TASKS)
    cess_args = ("estimate", "cess", folder, "--outcomes", tables["outcomes"],
                 "--predictions", tables["predictions"], "--json")
    asv_args = ("estimate", "asv", folder, "--channels", ",".join(ASV_CHANNELS),
                "--resamples", "200", "--json")
    _no_whole_reads(monkeypatch)
    got_cess, got_asv = invoke(*cess_args), invoke(*asv_args)
    assert got_cess.exit_code == 0, got_cess.output
    assert got_asv.exit_code == 0, got_asv.output
    cess_out, asv_out = json.loads(got_cess.stdout), json.loads(got_asv.stdout)
    monkeypatch.undo()
    # The same numbers as the estimators on Traces read whole (the budget the runs recorded).
    res = _cess([al.read(p) for p in study]).estimate(lam=cess_out["settings"]["lam"],
                                                      order=cess_out["settings"]["order"])
    assert cess_out["settings"]["budget"] == DEMO_BUDGET
    assert cess_out["settings"]["traces"] == [str(p) for p in study]
    assert [r["dr_raw"] for r in cess_out["runs"]] == res.dr_raw.tolist()
    assert [r["opened_mean"] for r in cess_out["runs"]] == res.opened_mean.tolist()
    data = _asv([al.read(p) for p in study], window=ASV_WINDOW)
    assert asv_out["settings"]["window"] == ASV_WINDOW
    assert asv_out["counts"]["transitions"] == len(data.transitions) > 0


def test_traces_without_runs_are_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "empty.zst"
    with TraceWriter(path):
        pass  # the header only
    with pytest.raises(ValueError, match=r"unknown stream 'doc': no selections of it in the "
                                         r"traces given \(they hold no runs\); the traces "
                                         r"hold no al.select records at all"):
        cess.from_traces(path, outcomes={}, predictions={}, budget=2)


def test_decision_outcomes_streams_and_equals_the_in_memory_path(
    study: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    in_memory = reliability.decision_outcomes([al.read(p) for p in study], decision="doc",
                                              score="abs_error")
    _no_whole_reads(monkeypatch)
    streamed = reliability.decision_outcomes(study, decision="doc", score="abs_error")
    assert len(streamed.actions) == len(study)
    _assert_same(streamed, in_memory)
