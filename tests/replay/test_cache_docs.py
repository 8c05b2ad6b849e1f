"""The runnable examples in the cache modules' docstrings stay true."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize("name", ["agentlog.replay", "agentlog.adapters._cache",
                                  "agentlog.adapters._request_fields"])
def test_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


CACHE_NAMES = [
    "CacheKey", "CacheMode", "CacheResult", "CacheStatus", "ModelCache", "RequestFields",
    "default_cache_path", "register_request_fields", "registered_request_fields",
    "request_fields", "request_key",
]
# The replay execution engine (issue 13).
ENGINE_NAMES = [
    "ExecutionOptions", "RetryPolicy", "RunSummary", "Unit", "UnitContext", "UnitFailure",
    "UnitOutput",
    "UnitScore", "arun_units", "is_transient", "read_units", "run_units", "sealed_units",
]
# Re-entry seams (issue 14).
REENTRY_NAMES = [
    "reenter_arguments", "resume_streams", "tool_result", "window_function",
]
# Paired interventions (issue 14): designs and re-entry under arms.
INTERVENTION_NAMES = [
    "Arm", "CounterfactualChoice", "Design", "InterventionRun", "alteration_arm",
    "counterfactual_choices", "intervene", "parse_design", "reenter_job",
    "replicate_seed",
]
# Channel replay (issue 13): registry, app module, channels and scorers, frozen states.
CHANNEL_REPLAY_NAMES = [
    "AppImportError", "AppNotGivenError", "Channel", "ChannelVersionError",
    "FrozenTransition", "RederivedReplay", "areplay_channels", "ascore_channel_unit",
    "iter_channel_units", "plan_channel_units", "rederive_channel_replay", "replay_channels",
    "score_channel_unit",
    "NotRegisteredError", "RegistryCollisionWarning",
    "ScoreContext", "Scorer", "State", "StateDecodeError", "WindowNotFoundError",
    "channel", "get_channel", "get_scorer", "resolve_app", "scorer",
]
# Moved: plumbing to agentlog.replay.lowlevel, the registry to agentlog.registry.
MOVED = {"APP_ENV": "lowlevel", "Job": "lowlevel", "app_from_pyproject": "lowlevel",
         "frozen_transitions": "lowlevel", "recorded_generator": "lowlevel",
         "recorded_modules": "lowlevel", "stream_offsets": "lowlevel",
         "trace_file_hash": "lowlevel", "Registered": "registry", "Registry": "registry",
         "object_id": "registry", "registry": "registry"}


def test_the_replay_package_exports_a_sorted_fixed_list() -> None:
    import agentlog.replay as replay

    assert replay.__all__ == sorted(replay.__all__) == sorted(
        CACHE_NAMES + CHANNEL_REPLAY_NAMES + REENTRY_NAMES + ENGINE_NAMES
        + INTERVENTION_NAMES)
    for name in replay.__all__:
        assert getattr(replay, name) is not None


@pytest.mark.parametrize("name", sorted(MOVED))
def test_a_moved_name_still_works_for_a_release_with_a_deprecation_warning(name: str) -> None:
    import importlib

    import agentlog.replay as replay

    home = ("agentlog.replay.lowlevel" if MOVED[name] == "lowlevel" else "agentlog.registry")
    with pytest.warns(DeprecationWarning, match=f"agentlog.replay.{name} moved to {home}"):
        old = getattr(replay, name)
    assert old is getattr(importlib.import_module(home), name)
    assert name not in replay.__all__ and name in importlib.import_module(home).__all__


def test_importing_the_replay_package_does_not_import_heavy_or_optional_packages() -> None:
    import subprocess
    import sys

    code = ("import sys, agentlog.replay; print([m for m in ('scipy', 'ot', 'openai', "
            "'anthropic', 'vllm', 'torch') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
