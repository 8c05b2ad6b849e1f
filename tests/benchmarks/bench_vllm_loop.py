"""What recording costs in a real agent loop: one vLLM call per window on loopback.

Run: ``python tests/benchmarks/bench_vllm_loop.py [--pairs P] [--windows W]
[--calls-only]`` (prints a table; asserts nothing; ``--calls-only``: each window only its
model call, recorded in the run without a window: the transport's share). Needs the
vLLM environment (``bash tests/adapters/setup_vllm.sh``);
it writes the tiny random model and starts the OpenAI-compatible server itself, on
127.0.0.1, and stops it at the end.

Each window: one chat call to the server (``max_tokens=4``, ``logprobs``) through the
openai client, a tool call, and 3 selections over 50 fresh candidates. Two variants of
the same loop, run as ``P`` pairs (bare first, then recorded, alternating which goes
first), so that drift of the machine cancels in each pair's ratio:

* ``bare``: the bare client, plain functions, numpy's Gumbel-max;
* ``recorded``: the client wrapped by ``agentlog.adapters.openai.wrap`` (the recording
  HTTP transport), ``@al.window``, ``@al.tool`` and ``al.select``, inside ``al.record``.

The table shows the median of the pairs' wall-time ratios and its range (target, issue 31
and 32: recording overhead ≤ 1 % of the loop's wall time).
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import openai

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))
from _tempdir import bench_dir  # noqa: E402

import agentlog as al  # noqa: E402
from agentlog.adapters import openai as adapter  # noqa: E402

QUESTION = [{"role": "user", "content": "which option is right ? A B C D"}]


def _option(name: str, default: int) -> int:
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def start_server(folder: Path) -> tuple[subprocess.Popen[bytes], int]:
    python = ROOT / ".venv-vllm" / "bin" / "python"
    if not python.exists():
        sys.exit("the vLLM environment is not set up: bash tests/adapters/setup_vllm.sh")
    sys.path.insert(0, str(ROOT))
    from tests.adapters.conftest import child_env  # the environment the tests give vLLM

    env = child_env()
    model = folder / "tiny"
    subprocess.run([str(python), str(ROOT / "tests/adapters/_tiny_model.py"), str(model)],
                   check=True, env=env, capture_output=True, timeout=600)
    port = _free_port()
    log = (folder / "server.log").open("wb")
    process = subprocess.Popen(
        [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
         "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port),
         "--dtype", "float32", "--max-model-len", "256", "--enforce-eager", "--seed", "0",
         "--max-logprobs", "-1"], stdout=log, stderr=subprocess.STDOUT, env=env,
        start_new_session=True)
    deadline = time.monotonic() + 600
    while not _healthy(port):
        if process.poll() is not None or time.monotonic() > deadline:
            tail = (folder / "server.log").read_text(errors="replace")[-3000:]
            sys.exit(f"the vLLM server did not start; its log ends:\n{tail}")
        time.sleep(1.0)
    return process, port


def numpy_select(p: np.ndarray, rng: np.random.Generator) -> int:
    return int(np.argmax(np.log(p) + rng.gumbel(size=p.size)))


def lookup(q: str) -> str:
    return q[::-1]


CALLS_ONLY = "--calls-only" in sys.argv  # only the model call: the transport's share


def loop_bare(client: Any, windows: int, rng: np.random.Generator) -> None:
    for _ in range(windows):
        reply = client.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=4,
                                               temperature=1.0, logprobs=True, top_logprobs=2)
        if CALLS_ONLY:
            continue
        lookup(str(reply.choices[0].message.content))
        p = rng.dirichlet(np.ones(50))
        for _ in range(3):
            numpy_select(p, rng)


def loop_recorded(client: Any, windows: int, path: str, seed: int) -> None:
    tool = al.tool("lookup")(lookup)

    @al.window("step", entry=lambda w: w)
    def step(w: int) -> None:
        reply = client.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=4,
                                               temperature=1.0, logprobs=True, top_logprobs=2)
        tool(str(reply.choices[0].message.content))
        rng = np.random.default_rng(w)
        p = rng.dirichlet(np.ones(50))
        candidates = [f"c{w}-{i}" for i in range(50)]  # fresh ids every window
        for k in range(3):
            al.select(p, candidates=candidates, name=f"s{k}")

    with al.record(path, mode="a", seed=seed):
        for w in range(windows):
            if CALLS_ONLY:
                client.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=4,
                                               temperature=1.0, logprobs=True, top_logprobs=2)
            else:
                step(w)


def main() -> None:
    pairs, windows = _option("--pairs", 20), _option("--windows", 10)
    with bench_dir("agentlog-bench-vllm-") as tmp:
        folder = Path(tmp)
        process, port = start_server(folder)
        try:
            base = f"http://127.0.0.1:{port}/v1"
            bare = openai.OpenAI(base_url=base, api_key="sk-bench", max_retries=0)
            wrapped = adapter.wrap(openai.OpenAI(base_url=base, api_key="sk-bench",
                                                 max_retries=0))
            rng = np.random.default_rng(0)
            loop_bare(bare, 3, rng)  # warm the server and both clients
            loop_recorded(wrapped, 3, str(folder / "warm.zst"), 0)
            ratios, bare_s = [], []
            for i in range(pairs):
                times = {}
                order = ("bare", "recorded") if i % 2 == 0 else ("recorded", "bare")
                for variant in order:
                    t0 = time.perf_counter()
                    if variant == "bare":
                        loop_bare(bare, windows, rng)
                    else:
                        loop_recorded(wrapped, windows, str(folder / "t.zst"), i)
                        al.flush()
                    times[variant] = time.perf_counter() - t0
                ratios.append(times["recorded"] / times["bare"])
                bare_s.append(times["bare"] / windows)
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=60)
    ratios.sort()
    print(f"vLLM loopback loop: {pairs} pairs × {windows} windows; a bare window "
          f"{statistics.median(bare_s) * 1e3:.1f} ms (median)")
    print(f"recorded / bare wall time: median {statistics.median(ratios):.4f} "
          f"(range {ratios[0]:.4f}–{ratios[-1]:.4f}); overhead "
          f"{(statistics.median(ratios) - 1) * 100:+.2f} % (target ≤ 1 %)")


if __name__ == "__main__":
    main()
