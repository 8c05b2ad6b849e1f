"""The small local Ray cluster the Ray tests share, started once per test module.

Importing this module skips the importing test module when Ray is not installed (and
fails under CI, which installs the ``dev`` extra that has Ray). Use it as::

    from tests.replay._ray_cluster import cluster  # noqa: F401  (autouse, module scope)
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

try:
    import ray
except ImportError:  # pragma: no cover - CI installs the dev extra, which has Ray
    if os.environ.get("CI"):
        raise
    pytest.skip("Ray is not installed: pip install -e '.[dev]' (or 'agentlog[ray]')",
                allow_module_level=True)


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Iterator[None]:
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
