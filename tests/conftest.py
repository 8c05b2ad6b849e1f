"""Shared fixtures: a trace path per test, record-type filters, and the two expensive
things the suite starts once per session: the default demo and a local Ray cluster."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests._phoenix import phoenix  # noqa: F401  (the session's Phoenix server, on demand)

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _files_closed_after_each_test() -> Iterator[None]:
    """Close the files a test's finished runs left open for a next run (``al.flush()``).

    A ``durability="frame"`` run leaves its writer open, its last records queued: without
    this, they would be written during the next test, under its patched OS calls.
    """
    yield
    shared = sys.modules.get("agentlog._writer.shared")
    if shared is not None:
        shared.flush_all(timeout=10)


@pytest.fixture
def trace_path(tmp_path: Path) -> Path:
    return tmp_path / "run.zst"


def of_type(trace: Any, kind: type[T]) -> list[T]:
    """The records of one type, in file order."""
    return [r for r in trace.records if isinstance(r, kind)]


def blocked_signals(thread: threading.Thread) -> set[int]:
    """The signals ``thread`` blocks, read from Linux's /proc (its ``SigBlk`` mask)."""
    status = ""
    deadline = time.monotonic() + 10  # a thread just started may not be listed yet
    while "SigBlk" not in status and time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            status = Path(f"/proc/self/task/{thread.native_id}/status").read_text()
    mask = int(next(line.split()[1] for line in status.splitlines()
                    if line.startswith("SigBlk:")), 16)
    return {sig for sig in range(1, 65) if mask >> (sig - 1) & 1}


@dataclass(frozen=True)
class DemoRun:
    """The default ``agentlog demo`` as a user runs it, in ``folder`` (read-only: copy
    ``folder`` before writing into it).

    Attributes:
        folder: the working folder it ran in.
        out: the folder it wrote (``folder / "agentlog-demo"``, the default ``--out``).
        summary: ``run_demo``'s summary; its paths are relative to ``folder``.
        text: what ``agentlog demo`` printed.
    """

    folder: Path
    out: Path
    summary: dict[str, Any]
    text: str


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """The default demo, recorded once for every test that reads it."""
    from rich.console import Console

    from agentlog.cli._demo import DEFAULT_OUT, render_demo, run_demo

    folder = tmp_path_factory.mktemp("demo")
    printed = io.StringIO()
    with contextlib.chdir(folder):  # what `agentlog demo` does in the user's folder
        summary = run_demo(DEFAULT_OUT)
        render_demo(summary, Console(file=printed, highlight=False, soft_wrap=True))
    return DemoRun(folder, folder / DEFAULT_OUT, summary, printed.getvalue())


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[None]:
    """A small local Ray cluster (two CPUs) for every Ray test; skips them without Ray (and
    fails under CI, which installs the ``dev`` extra that has Ray)."""
    try:
        import ray
    except ImportError:  # pragma: no cover - CI installs the dev extra, which has Ray
        if os.environ.get("CI"):
            raise
        pytest.skip("Ray is not installed: pip install -e '.[dev]' (or 'agentlog[ray]')")
    # Workers are processes started by this cluster: they find the test jobs through the
    # PYTHONPATH they inherit.
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), old) if p)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
