"""Our GenAI attribute names equal the semantic-conventions package's (which deprecated them)."""

from __future__ import annotations

import importlib
import warnings

import pytest

from agentlog._encoding import encode
from agentlog._llm import GENAI_ATTRIBUTES
from agentlog._spans.builder import model_span
from agentlog.records import LLMCall


def _package_module() -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module(
            "opentelemetry.semconv._incubating.attributes.gen_ai_attributes")


@pytest.mark.parametrize("name", sorted(GENAI_ATTRIBUTES))
def test_each_constant_equals_the_semantic_conventions_package(name: str) -> None:
    assert getattr(_package_module(), name) == GENAI_ATTRIBUTES[name]


def _attributes(provider: str, request: object) -> dict[str, object]:
    call = LLMCall(run=0, window=-1, t_ns=1, provider=provider, model="m",
                   request=encode(request), response=encode(None), operation="chat")
    return model_span("r", call)[1]


def test_the_provider_attribute_is_the_current_one_not_the_deprecated_system() -> None:
    attrs = _attributes("anthropic.messages", {})
    assert attrs["gen_ai.provider.name"] == "anthropic"
    assert _package_module().GEN_AI_SYSTEM not in attrs


def test_non_numeric_or_non_finite_sampling_parameters_are_left_out() -> None:
    attrs = _attributes("p", {"temperature": float("nan"), "top_p": "0.5",
                              "max_output_tokens": 7, "seed": True})
    assert "gen_ai.request.temperature" not in attrs and "gen_ai.request.top_p" not in attrs
    assert "gen_ai.request.seed" not in attrs
    assert attrs["gen_ai.request.max_tokens"] == 7


def test_parameters_are_read_from_a_canonical_request_and_from_vllm_sampling_params() -> None:
    canonical = {"provider": "openai.chat", "version": 1, "draw": 0, "channel": None,
                 "request": {"model": "m", "temperature": 0.25, "max_completion_tokens": 5}}
    attrs = _attributes("openai.chat", canonical)
    assert (attrs["gen_ai.request.temperature"], attrs["gen_ai.request.max_tokens"]) == (0.25, 5)
    vllm = {**canonical, "request": {"model": "m", "sampling_params": {"top_k": 3, "seed": 9}}}
    attrs = _attributes("vllm.generate", vllm)
    assert (attrs["gen_ai.request.top_k"], attrs["gen_ai.request.seed"]) == (3, 9)
