"""vLLM offline (``LLM.generate`` / ``LLM.chat`` through ``agentlog.adapters.vllm.wrap``) on
the tiny model: records, caches per prompt, candidate vectors, frozen replay.

The engine runs in the vLLM environment as one script (tests/adapters/_vllm_offline.py); this
test reads the observations it prints and checks them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from .conftest import run_engine_script

# Starts vLLM (the tiny model, in its own environment).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def offline(vllm_python: Path, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
            ) -> dict[str, Any]:
    return run_engine_script(vllm_python, "_vllm_offline.py", tiny_model,
                             tmp_path_factory.mktemp("vllm-offline"))


def test_only_missing_prompts_reach_the_engine(offline: dict[str, Any]) -> None:
    assert offline["first_engine_batches"] == [2]  # both prompts were misses: one batch
    assert offline["again_engine_batches"] == [2]  # both hits: the engine was not called
    assert offline["mixed_engine_batches"] == [2, 1]  # one hit, one miss: one prompt sent
    assert offline["draw_engine_batches"] == [2, 1, 1]  # draw=1 is a new entry


def test_a_hit_is_a_request_output_equal_to_the_original(offline: dict[str, Any]) -> None:
    assert offline["hit_type"] == "RequestOutput"
    assert offline["same_text"] == offline["same_token_ids"] == [True, True]
    assert offline["same_logprobs"] == [True, True]
    assert offline["single_is_list"] is True


def test_chat_renders_the_template_and_is_cached(offline: dict[str, Any]) -> None:
    assert offline["chat_prompt"].startswith("user : which option is right ?")
    assert offline["chat_prompt"].rstrip().endswith("assistant :")
    assert offline["chat_same"] is True and offline["chat_engine_batches"] == [1]


def test_every_prompt_is_one_record_with_usage_and_the_engine_fingerprint(
        offline: dict[str, Any]) -> None:
    records = offline["records"]
    # 2 + 2 + 2 + 1 + 1 generate prompts, 2 chats, 2 choice-probability generates
    assert len(records) == 12 == offline["window_llm_calls"]
    assert {r["provider"] for r in records} == {"vllm.generate", "vllm.chat"}
    assert all(r["has_key"] and r["status"] == 0 for r in records)
    assert all(r["fingerprint"].startswith("vllm-0.") and "float32" in r["fingerprint"]
               for r in records)
    assert all(r["input_tokens"] > 0 and r["output_tokens"] > 0 for r in records)


def test_every_prompt_is_an_internal_genai_span_under_its_window(
        offline: dict[str, Any]) -> None:
    spans = offline["spans"]
    model = offline["model_name"]
    assert len(spans) == 12
    assert {s["name"] for s in spans} == {f"text_completion {model}", f"chat {model}"}
    assert all(s["kind"] == "INTERNAL" and s["parent"] == "agentlog.window.answer"
               and s["provider"] == "vllm" and s["has_key"] for s in spans)
    caches = [s["cache"] for s in spans]
    # first batch: 2 misses; again: 2 hits; mixed: 1 hit + 1 miss; single: hit; draw 1: miss;
    # chat: miss, hit; the two choice-probability calls: misses
    assert sorted(caches) == sorted(["miss"] * 7 + ["hit"] * 5)
    assert all(s["input_tokens"] > 0 for s in spans)


def test_logprob_token_ids_give_the_exact_renormalised_label_vector(
        offline: dict[str, Any]) -> None:
    c = offline["choice"]
    # Truth: the full-vocabulary distribution at the same position (logprobs=-1).
    assert c["vocab_listed"] >= 40 and c["vocab_mass"] == pytest.approx(1.0, abs=1e-4)
    assert c["sum"] == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(c["probs"], c["truth_probs"], atol=1e-5)
    np.testing.assert_allclose(c["text_probs"], c["truth_probs"], atol=1e-5)
    assert c["unobserved_mass"] == pytest.approx(1 - c["truth_mass"], abs=1e-5)
    assert 0 < c["unobserved_mass"] < 1 and c["missing"] == []
    assert c["text_missing_bound"] is None and c["position"] == 0
    assert c["source"] == "vllm.offline.logprobs"  # choice_probs cannot know it was complete
    assert offline["selected"] in range(4)


def test_top_logprobs_vectors_report_what_they_did_not_see(offline: dict[str, Any]) -> None:
    c = offline["choice"]
    assert c["top_sum"] == pytest.approx(1.0, abs=1e-9)
    assert 0 < c["top_unobserved"] < 1


def test_a_frozen_replay_from_the_trace_never_calls_the_engine(offline: dict[str, Any]) -> None:
    assert offline["frozen_engine_batches"] == []
    assert offline["frozen_texts_match"] is True
    miss = offline["frozen_miss"]
    assert miss is not None and offline["frozen_miss_engine_batches"] == []
    assert "request.sampling_params.temperature" in miss["differences"]
    assert "request.sampling_params.temperature: 0.5 here, 0 stored" in miss["message"]
