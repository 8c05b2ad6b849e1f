"""The Phoenix server the tests export to (a session fixture, ``phoenix``) and reading
spans back from it.

Phoenix runs from its own virtual environment (``tests/export/setup_phoenix.sh`` makes
``.venv-phoenix``; ``AGENTLOG_PHOENIX_VENV`` points elsewhere). Without it a test that
asks for it skips and names the setup command, unless ``AGENTLOG_REQUIRE_PHOENIX=1``
(``.ci/run`` sets it): then a missing Phoenix is a failure.
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

ROOT = Path(__file__).resolve().parents[1]
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


def read_back(base: str, project: str, expected: int) -> list[dict[str, Any]]:
    out = subprocess.run(
        [str(VENV / "bin" / "python"), str(ROOT / "tests" / "export" / "_phoenix_read.py"),
         base, project, str(expected), str(READ_TIMEOUT_S)],
        capture_output=True, text=True, timeout=READ_TIMEOUT_S + 120, check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
