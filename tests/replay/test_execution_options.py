"""``ExecutionOptions``: one frozen object for the sync/async twins, checked when made, and
the keywords it replaced still accepted for one release with a ``DeprecationWarning``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from agentlog.replay import (
    ExecutionOptions,
    RetryPolicy,
    Unit,
    arun_units,
    intervene,
    read_units,
    replay_channels,
    run_units,
)
from tests.replay import _unit_jobs as jobs


def _units(n: int) -> list[Unit]:
    return [Unit(f"u{i}", {"x": i}) for i in range(n)]


def test_options_are_frozen_and_have_the_documented_defaults() -> None:
    opts = ExecutionOptions()
    assert (opts.concurrency, opts.executor, opts.ray_address, opts.ray_num_cpus,
            opts.timeout, opts.progress) == (8, "local", None, None, None, True)
    assert opts.retry == RetryPolicy()
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.concurrency = 2  # type: ignore[misc]
    assert opts.replace(concurrency=2) == ExecutionOptions(concurrency=2)


@pytest.mark.parametrize(("changes", "error", "says"), [
    ({"concurrency": 0}, ValueError, "`concurrency` must be an int >= 1; found 0"),
    ({"concurrency": True}, ValueError, "`concurrency` must be an int >= 1; found True"),
    ({"concurrency": 2.0}, ValueError, "`concurrency`"),
    ({"executor": "dask"}, ValueError, "`executor` must be 'local' or 'ray'; found 'dask'"),
    ({"retry": 3}, TypeError, "`retry` must be a RetryPolicy; found int"),
    ({"timeout": 0}, ValueError, "`timeout` must be a positive number of seconds"),
    ({"timeout": "5"}, ValueError, "`timeout`"),
    ({"ray_num_cpus": 0}, ValueError, "`ray_num_cpus` must be an int >= 1 or None"),
    ({"ray_address": 10001}, TypeError, "`ray_address` must be a string or None"),
])
def test_a_bad_value_is_refused_where_the_options_are_made(
        changes: dict[str, Any], error: type[Exception], says: str) -> None:
    with pytest.raises(error, match=says.replace("(", r"\(").replace(")", r"\)")):
        ExecutionOptions(**changes)
    with pytest.raises(error):  # replace() checks the same way
        ExecutionOptions().replace(**changes)


def test_sync_and_async_twins_take_the_same_options_and_write_the_same_units(
        tmp_path: Path) -> None:
    import asyncio

    opts = ExecutionOptions(concurrency=2, progress=False)
    a = run_units(_units(4), jobs.score_states, out=tmp_path / "a.zst", execution=opts)
    b = asyncio.run(arun_units(_units(4), jobs.score_states, out=tmp_path / "b.zst",
                               execution=opts))
    assert a.done == b.done == 4
    assert ({k: [s.value for s in u.scores] for k, u in read_units(tmp_path / "a.zst").items()}
            == {k: [s.value for s in u.scores]
                for k, u in read_units(tmp_path / "b.zst").items()})


def test_the_old_keywords_still_work_with_a_deprecation_warning_naming_the_new_call(
        tmp_path: Path) -> None:
    with pytest.warns(DeprecationWarning,
                      match=r"run_units\(concurrency=\.\.\., progress=\.\.\.\) is deprecated.*"
                            r"execution=ExecutionOptions\(concurrency=\.\.\., progress=\.\.\.\)"):
        summary = run_units(_units(3), jobs.score_states, out=tmp_path / "o.zst", concurrency=1,
                            progress=False)
    assert summary.done == 3
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="`concurrency`"):
        run_units(_units(1), jobs.score_states, out=tmp_path / "p.zst", concurrency=0)


@pytest.mark.parametrize(("function", "required"), [
    (run_units, {"job": "x"}),
    (replay_channels, {"channels": ["quote"], "window": "w"}),
    (intervene, {"window": "w", "arms": []}),
])
def test_an_unknown_keyword_or_options_with_old_keywords_is_a_type_error(
        function: Any, required: dict[str, Any], tmp_path: Path) -> None:
    def call(**kwargs: Any) -> Any:
        return function([], out=tmp_path / "o.zst", **required, **kwargs)

    with pytest.raises(TypeError, match=f"{function.__name__}\\(\\) got an unexpected "
                                        "keyword argument 'concurency'"):
        call(concurency=2)
    with pytest.raises(TypeError, match="pass either execution=ExecutionOptions"):
        call(execution=ExecutionOptions(), concurrency=2)
    with pytest.raises(TypeError, match="`execution` must be an ExecutionOptions; found dict"):
        call(execution={"concurrency": 2})
