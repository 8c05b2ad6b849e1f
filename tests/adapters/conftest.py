"""Fixtures of the vLLM tests: the vLLM environment, a tiny model written in the session, and
an OpenAI-compatible vLLM server on 127.0.0.1.

vLLM lives in its own virtual environment (``.venv-vllm``, built by
``tests/adapters/setup_vllm.sh``; ``AGENTLOG_VLLM_VENV`` names another). Without it these
tests skip with the setup command, unless ``AGENTLOG_REQUIRE_VLLM=1`` (set by ``.ci/run``)
turns the missing environment into a failure. No weights are downloaded: the model is a
random-weight llama with a locally trained tokenizer, generated into a temporary folder.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SETUP = "bash tests/adapters/setup_vllm.sh"
START_TIMEOUT_S = float(os.environ.get("AGENTLOG_VLLM_START_TIMEOUT", "900"))
# vLLM's CPU build reads these; offline so a missing file never turns into a download.
VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "TOKENIZERS_PARALLELISM": "false"}


def vllm_venv() -> Path:
    return Path(os.environ.get("AGENTLOG_VLLM_VENV", REPO / ".venv-vllm"))


def _missing(message: str) -> None:
    if os.environ.get("AGENTLOG_REQUIRE_VLLM") == "1":
        pytest.fail(f"{message} (AGENTLOG_REQUIRE_VLLM=1: this run needs it)", pytrace=False)
    pytest.skip(message)


_SOURCE: list[Path] = []


def _this_checkout() -> Path:
    """A folder holding only an ``agentlog`` link to this checkout's package.

    The vLLM environment has agentlog installed in editable mode from wherever it was built
    (possibly another checkout); on ``PYTHONPATH`` this folder makes the engine scripts
    import the code under test, without putting the repository's other top-level folders
    (``tests``, ``cli``, ...) on the path.
    """
    if not _SOURCE:
        folder = Path(tempfile.mkdtemp(prefix="agentlog-src-"))
        (folder / "agentlog").symlink_to(REPO / "agentlog", target_is_directory=True)
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _SOURCE.append(folder)
    return _SOURCE[0]


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(VLLM_ENV)
    env["PYTHONPATH"] = str(_this_checkout())
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # the environment may be shared: leave it unchanged
    return env


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The vLLM environment's interpreter (skip, or fail under CI, when it is not set up)."""
    venv = vllm_venv()
    python = venv / "bin" / "python"
    found = list(venv.glob("lib/python3*/site-packages/vllm/__init__.py"))
    if not python.exists() or not found:
        _missing(f"the vLLM environment {venv} is not set up; create it with: {SETUP}")
    return python


@pytest.fixture(scope="session")
def tiny_model(vllm_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight llama (2 layers, word-level tokenizer, chat template)."""
    out = tmp_path_factory.mktemp("tiny-llama")
    done = subprocess.run([str(vllm_python), str(REPO / "tests/adapters/_tiny_model.py"),
                           str(out)], capture_output=True, text=True, timeout=600,
                          env=child_env(), check=False)
    if done.returncode != 0:
        pytest.fail(f"could not write the tiny model into {out}:\n{done.stderr[-3000:]}",
                    pytrace=False)
    return out


def run_engine_script(vllm_python: Path, script: str, tiny_model: Path, work: Path
                      ) -> dict[str, Any]:
    """Run ``tests/adapters/<script>`` in the vLLM environment; its ``RESULT`` JSON line.

    The script prints its observations; the tests decide pass or fail.
    """
    done = subprocess.run([str(vllm_python), str(REPO / "tests/adapters" / script),
                           str(tiny_model), str(work)], capture_output=True, text=True,
                          timeout=1200, env=child_env(), cwd=work, check=False)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        pytest.fail(f"{script} failed ({done.returncode}):\n{done.stderr[-4000:]}",
                    pytrace=False)
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT "):])
    return result


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class VllmServer:
    """A running ``vllm.entrypoints.openai.api_server`` serving the tiny model as ``tiny``."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path
    model_dir: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health",
                                        timeout=2) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return "<no log>"

    def stop(self) -> None:
        """Stop the server and its engine processes (its own process group); bounded."""
        if self.process.poll() is not None:
            return
        for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.process.wait(timeout=wait_s)
                return
            except subprocess.TimeoutExpired:
                continue


@pytest.fixture(scope="session")
def vllm_server(vllm_python: Path, tiny_model: Path,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """The OpenAI-compatible server on 127.0.0.1, waited for on ``/health``, always stopped."""
    port = free_port()
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    cmd = [str(vllm_python), "-m", "vllm.entrypoints.openai.api_server",
           "--model", str(tiny_model), "--served-model-name", "tiny",
           "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
           "--max-model-len", "256", "--enforce-eager", "--seed", "0", "--max-logprobs", "-1"]
    with log.open("wb") as sink:
        process = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT,
                                   env=child_env(), start_new_session=True)
    server = VllmServer(process=process, port=port, log=log, model_dir=tiny_model)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.healthy():
            if process.poll() is not None:
                pytest.fail(f"the vLLM server exited with {process.returncode} before it was "
                            f"healthy; its log ends:\n{server.log_tail()}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail(f"the vLLM server was not healthy after {START_TIMEOUT_S:.0f} s "
                            "(AGENTLOG_VLLM_START_TIMEOUT); its log ends:\n"
                            f"{server.log_tail()}", pytrace=False)
            time.sleep(1.0)
        yield server
    finally:
        server.stop()
