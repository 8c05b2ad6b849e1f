"""A real tracing backend: the demo's traces exported to Phoenix and read back.

Phoenix runs from its own virtual environment (``tests/export/setup_phoenix.sh`` makes
``.venv-phoenix``; ``AGENTLOG_PHOENIX_VENV`` points elsewhere). Without it the test skips
and names the setup command, unless ``AGENTLOG_REQUIRE_PHOENIX=1`` (``.ci/run`` sets it):
then a missing Phoenix is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentlog.export import to_spans
from tests.cli._cli import invoke

# Starts a Phoenix server.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("AGENTLOG_PHOENIX_VENV", ROOT / ".venv-phoenix"))
START_TIMEOUT_S = 180.0  # measured ~18-50 s to healthy on a loaded 2-core machine
READ_TIMEOUT_S = 120.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Phoenix server on 127.0.0.1 (free HTTP and gRPC ports), stopped at the end."""
    exe = VENV / "bin" / "phoenix"
    if not exe.exists():
        message = (f"Phoenix is not installed at {VENV}; run tests/export/setup_phoenix.sh "
                   "(or set AGENTLOG_PHOENIX_VENV)")
        if os.environ.get("AGENTLOG_REQUIRE_PHOENIX") == "1":
            pytest.fail(message)
        pytest.skip(message)
    work = tmp_path_factory.mktemp("phoenix")
    port, grpc_port = _free_port(), _free_port()
    env = {**os.environ, "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(grpc_port), "PHOENIX_WORKING_DIR": str(work)}
    log = (work / "phoenix.log").open("wb")
    proc = subprocess.Popen([str(exe), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"phoenix serve exited with {proc.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"Phoenix was not healthy after {START_TIMEOUT_S:.0f} s; see "
                            f"{log.name}")
            time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def _read_back(base: str, project: str, expected: int) -> list[dict[str, Any]]:
    out = subprocess.run(
        [str(VENV / "bin" / "python"), str(Path(__file__).with_name("_phoenix_read.py")),
         base, project, str(expected), str(READ_TIMEOUT_S)],
        capture_output=True, text=True, timeout=READ_TIMEOUT_S + 120, check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def test_the_demo_traces_read_back_from_phoenix_as_exported_once(
    phoenix: str, tmp_path: Path
) -> None:
    from agentlog.examples.deep_research import run_study, task_ids

    paths = run_study(tmp_path / "runs", tasks=task_ids(2), seeds=range(1), budget=2,
                      n_candidates=8)
    url = f"{phoenix}/v1/traces"
    for _ in range(2):  # twice: deterministic ids, so Phoenix keeps one copy
        result = invoke("export", tmp_path / "runs", "--otlp", url, "--project", "agentlog-t",
                        "--batch", "7")
        assert result.exit_code == 0, result.output
    project = {"openinference.project.name": "agentlog-t"}  # what --project sets
    expected = {format(s.context.span_id, "016x"): s for p in paths
                for s in to_spans(p, resource_attributes=project)}
    got = _read_back(phoenix, "agentlog-t", len(expected))
    assert len(got) == len(expected)  # no duplicate from the second export
    assert {g["span_id"] for g in got} == set(expected)
    for g in got:
        span = expected[g["span_id"]]
        assert g["name"] == span.name
        assert g["trace_id"] == format(span.context.trace_id, "032x")
        assert g["parent_id"] == (None if span.parent is None
                                  else format(span.parent.span_id, "016x"))
        # Phoenix stores microseconds (rounded): the original times to within 1 µs.
        assert abs(g["start_us"] - span.start_time / 1000) <= 1  # type: ignore[operator]
        assert abs(g["end_us"] - span.end_time / 1000) <= 1  # type: ignore[operator]
        assert g["events"] == [e.name for e in span.events]
        attrs = dict(span.attributes or {})
        if span.name.startswith("agentlog.window."):
            assert g["agentlog"]["receipt"] == attrs["agentlog.receipt"]
        # Phoenix re-files some gen_ai.* keys under its own names; agentlog.* come back as is.
        assert g["agentlog"]["run_id"] == attrs["agentlog.run_id"]
    names = {g["name"] for g in got}
    assert {"invoke_agent deep-research", "agentlog.window.retrieval",
            "execute_tool open_document"} <= names
    # Re-exported with content: spans of their own, which Phoenix keeps (before, it kept
    # none of them while the CLI said they were sent).
    result = invoke("export", tmp_path / "runs", "--otlp", url, "--project", "agentlog-t",
                    "--capture-content")
    assert result.exit_code == 0, result.output
    assert len(_read_back(phoenix, "agentlog-t", 2 * len(expected))) == 2 * len(expected)
