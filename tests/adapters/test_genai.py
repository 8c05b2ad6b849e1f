"""Our GenAI attribute names equal the semantic-conventions package's (which deprecated them)."""

from __future__ import annotations

import importlib
import warnings

import pytest

from agentlog._llm import GENAI_ATTRIBUTES, llm_span_attributes


def _package_module() -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module(
            "opentelemetry.semconv._incubating.attributes.gen_ai_attributes")


@pytest.mark.parametrize("name", sorted(GENAI_ATTRIBUTES))
def test_each_constant_equals_the_semantic_conventions_package(name: str) -> None:
    assert getattr(_package_module(), name) == GENAI_ATTRIBUTES[name]


def test_the_provider_attribute_is_the_current_one_not_the_deprecated_system() -> None:
    attrs = llm_span_attributes(provider="anthropic.messages", model="claude", operation="chat",
                                request={}, input_tokens=1, output_tokens=2)
    assert attrs["gen_ai.provider.name"] == "anthropic"
    assert _package_module().GEN_AI_SYSTEM not in attrs


def test_non_numeric_or_non_finite_sampling_parameters_are_left_out() -> None:
    attrs = llm_span_attributes(provider="p", model="m", operation="chat",
                                request={"temperature": float("nan"), "top_p": "0.5",
                                         "max_output_tokens": 7, "seed": True},
                                input_tokens=0, output_tokens=0)
    assert "gen_ai.request.temperature" not in attrs and "gen_ai.request.top_p" not in attrs
    assert "gen_ai.request.seed" not in attrs
    assert attrs["gen_ai.request.max_tokens"] == 7
