"""Channel replay on Ray gives the scores and provenance of the local executor (200
transitions of the bundled agent, on the session's small local cluster)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agentlog.estimators import asv
from agentlog.replay import ExecutionOptions, read_units, replay_channels

# The session's local cluster (tests/conftest.py); without Ray the tests skip.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_cluster")]


def _content(out: Path) -> dict[str, tuple[Any, ...]]:
    return {key: (unit.status, tuple(sorted(unit.provenance.items(), key=repr)),
                  tuple((s.name, s.value, s.channel, s.layout, s.wave, s.transition,
                         s.state_hash) for s in unit.scores))
            for key, unit in read_units(out).items()}


def test_ray_and_local_channel_replays_are_identical_on_200_transitions(
        tmp_path: Path) -> None:
    from agentlog.examples.deep_research import run_study, task_ids

    paths = run_study(tmp_path / "runs", tasks=task_ids(100), seeds=(0,), evaluate=False)
    kw: dict[str, Any] = {"window": "retrieval", "app": "agentlog.examples.deep_research",
                          "layouts": 1}
    local = replay_channels(paths, ["direct", "quote"], out=tmp_path / "local.zst",
                            execution=ExecutionOptions(progress=False), **kw)
    remote = replay_channels(paths, ["direct", "quote"], out=tmp_path / "ray.zst",
                             execution=ExecutionOptions(executor="ray", progress=False), **kw)
    assert (local.total, local.done, local.failed) == (400, 400, 0)
    assert (remote.total, remote.done, remote.failed) == (400, 400, 0)
    a, b = _content(tmp_path / "local.zst"), _content(tmp_path / "ray.zst")
    assert len(a) == 400 and a == b
    fa = asv.from_traces(tmp_path / "local.zst", channels=("direct", "quote"))
    fb = asv.from_traces(tmp_path / "ray.zst", channels=("direct", "quote"))
    assert len(fa.transitions) == 200 and fa.transitions == fb.transitions
    assert np.array_equal(fa.corners[0], fb.corners[0])


def test_the_replay_command_on_ray_keeps_stdout_for_its_json(tmp_path: Path) -> None:
    """Ray's driver prints its cluster's messages on stdout: under --executor ray they go
    to stderr, and --json stays parseable."""
    import json

    from agentlog.examples.deep_research import run_study, task_ids
    from tests.cli._cli import invoke

    paths = run_study(tmp_path / "runs", tasks=task_ids(4), seeds=(0,), evaluate=False)
    result = invoke("replay", *paths, "--channel", "direct", "--window", "retrieval",
                    "--app", "agentlog.examples.deep_research", "--layouts", "1",
                    "--executor", "ray", "--out", tmp_path / "ray.zst", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["failed"] == 0 and out["done"] == 4 * 2  # 4 tasks x the 2 default rankings
