"""vLLM's async engine (``AsyncLLMEngine.generate``, an async generator of outputs) through
``agentlog.adapters.vllm.wrap`` on the tiny model: outputs passed through, the final output
recorded, early close, DELTA outputs, the cache and a frozen replay.

The engine runs in the vLLM environment as one script (tests/adapters/_vllm_async.py); this
test reads the observations it prints and checks them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import run_engine_script

# Starts vLLM (the tiny model, in its own environment).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(vllm_python: Path, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
        ) -> dict[str, Any]:
    return run_engine_script(vllm_python, "_vllm_async.py", tiny_model,
                             tmp_path_factory.mktemp("vllm-async"))


def _final(outputs: list[dict[str, Any]]) -> tuple[str, list[int], bool]:
    last = outputs[-1]
    return last["text"], last["token_ids"], last["finished"]


def test_the_caller_gets_the_engines_outputs_unchanged(run: dict[str, Any]) -> None:
    ref = run["reference"]
    # How many outputs a request yields depends on scheduling (vLLM drains what is ready),
    # so runs are compared by their final output; within one run, the caller gets the very
    # objects the engine yielded, in order, each as it was when yielded.
    assert ref[-1]["finished"] and not ref[0]["finished"] and len(ref[-1]["token_ids"]) == 6
    assert run["live_same_objects"] is True
    assert _final(run["outside_run"]) == _final(run["live"]) == _final(ref)
    assert {o["request_id"] for o in run["live"]} == {"live-1"}


def test_the_final_output_is_recorded_once(run: dict[str, Any]) -> None:
    assert len(run["live_records"]) == 4  # live, closed early, after the close, delta
    live, after = run["live_records"][0], run["live_records"][2]
    final = run["reference"][-1]
    assert (live["provider"], live["status"], live["finished"]) == ("vllm.generate", 0, True)
    assert (live["text"], live["token_ids"]) == (final["text"], final["token_ids"])
    assert live["output_tokens"] == 6 and live["input_tokens"] > 0
    assert live["logprob_rows"] == 6
    assert live["fingerprint"].startswith("vllm-0.") and live["cache_key"]
    assert after["status"] == 0 and after["text"] == final["text"]


def test_a_generator_closed_early_records_what_was_received(run: dict[str, Any]) -> None:
    early = run["live_records"][1]
    assert (early["status"], early["error_type"]) == (1, "StreamClosedError")
    assert "after 1 item(s)" in early["error_message"]
    assert early["finished"] is False and early["token_ids"] == run["early_first"]["token_ids"]
    # The engine aborted the request: the next one ran normally.
    assert _final(run["after_close"]) == _final(run["reference"])


def test_delta_outputs_are_joined_into_the_final_body(run: dict[str, Any]) -> None:
    delta = run["live_records"][3]
    final = run["reference"][-1]
    assert "".join(o["text"] for o in run["delta"]) == final["text"]
    assert (delta["text"], delta["token_ids"]) == (final["text"], final["token_ids"])
    assert delta["logprob_rows"] == 6 and delta["finished"] is True
    # Same prompt, same content: DELTA delivery is not part of the key.
    assert delta["cache_key"] == run["live_records"][0]["cache_key"]


def test_under_a_cache_a_miss_and_a_hit_yield_the_final_output(run: dict[str, Any]) -> None:
    (miss,) = run["miss"]
    assert _final([miss]) == _final(run["reference"]) and miss["request_id"] == "miss-1"
    (hit,) = run["hit"]
    final = run["reference"][-1]
    assert (hit["text"], hit["token_ids"], hit["finished"]) == (
        final["text"], final["token_ids"], True)
    assert hit["type"] == "RequestOutput" and hit["request_id"] == "hit-1"
    assert run["flight_upstream"] == 1  # four identical concurrent requests, one engine run
    assert run["flight_finals"] == [final["text"]] * 4
    records = run["cached_records"]
    assert len(records) == 6 and all(r["status"] == 0 for r in records)


def test_a_frozen_replay_serves_from_the_trace(run: dict[str, Any]) -> None:
    (frozen,) = run["frozen"]
    assert frozen["text"] == run["reference"][-1]["text"]
    assert run["frozen_miss"] is not None
    assert "request.sampling_params.max_tokens: 2 here, 6 stored" in run["frozen_miss"]
