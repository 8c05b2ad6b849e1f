"""The runnable examples in the cache modules' docstrings stay true."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize("name", ["agentlog.replay", "agentlog.replay._cache",
                                  "agentlog.replay._request_fields"])
def test_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_the_replay_package_exports_a_sorted_fixed_list() -> None:
    import agentlog.replay as replay

    assert replay.__all__ == sorted(replay.__all__) == [
        "APP_ENV", "AppImportError", "AppNotGivenError", "Arm", "CacheKey", "CacheMode",
        "CacheResult", "CacheStatus", "Design", "InterventionRun", "Job", "ModelCache",
        "NotRegisteredError", "Registered", "Registry", "RegistryCollisionWarning",
        "RequestFields", "RetryPolicy", "RunSummary", "Unit", "UnitContext", "UnitFailure",
        "UnitOutput", "UnitScore", "app_from_pyproject", "arun_units",
        "default_cache_path", "intervene", "is_transient", "object_id", "parse_design",
        "read_units", "recorded_modules", "reenter_arguments", "register_request_fields",
        "registered_request_fields", "replicate_seed", "request_fields", "request_key",
        "resolve_app", "resume_streams", "run_units", "sealed_units", "stream_offsets",
        "tool_result", "window_function",
    ]
    for name in replay.__all__:
        assert getattr(replay, name) is not None


def test_importing_the_replay_package_does_not_import_heavy_or_optional_packages() -> None:
    import subprocess
    import sys

    code = ("import sys, agentlog.replay; print([m for m in ('scipy', 'ot', 'openai', "
            "'anthropic', 'vllm', 'torch') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
