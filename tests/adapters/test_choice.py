"""``choice_probs`` reads the candidate vector over option labels from logprobs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agentlog as al
from agentlog.adapters import ChoiceProbs, NoLogprobsError, choice_probs

from ._providers import TOP, chat_body, message_body, responses_body


def _chat(positions: list[list[tuple[str, float]]], sampled: list[str] | None = None
          ) -> dict[str, Any]:
    sampled = sampled or [p[0][0] for p in positions]
    content = [{"token": s, "logprob": p[0][1], "bytes": None,
                "top_logprobs": [{"token": t, "logprob": lp, "bytes": None} for t, lp in p]}
               for s, p in zip(sampled, positions, strict=True)]
    return {"choices": [{"index": 0, "logprobs": {"content": content}}]}


def test_the_vector_is_the_label_mass_renormalised_with_the_rest_reported() -> None:
    # Closed form: p(B) = e^-0.25 + e^-3.5 (" B" counts for "B"), p(A) = e^-2, p(C) = e^-4.
    result = choice_probs(chat_body(), ["A", "B", "C", "D"])
    raw = np.array([math.exp(-2.0), math.exp(-0.25) + math.exp(-3.5), math.exp(-4.0), 0.0])
    assert result.probs == pytest.approx(raw / raw.sum(), abs=1e-12)
    assert result.probs.sum() == pytest.approx(1.0, abs=1e-12)
    assert result.label_mass == pytest.approx(raw.sum(), abs=1e-12)
    assert result.unobserved_mass == pytest.approx(1 - raw.sum(), abs=1e-12)
    assert result.logprobs[1] == pytest.approx(math.log(raw[1]))
    assert result.logprobs[3] == -math.inf
    assert result.missing == ("D",)
    assert result.missing_bound == pytest.approx(min(math.exp(lp) for _, lp in TOP))
    assert (result.position, result.token, result.source) == (1, "B",
                                                              "openai.chat.top_logprobs")


def test_the_responses_api_gives_the_same_vector_as_chat_for_the_same_logprobs() -> None:
    chat = choice_probs(chat_body(), ["A", "B", "C"])
    responses = choice_probs(responses_body(), ["A", "B", "C"])
    assert responses.probs == pytest.approx(chat.probs, abs=1e-12)
    assert responses.source == "openai.responses.top_logprobs"


def test_sdk_objects_and_their_json_bodies_give_the_same_vector() -> None:
    openai = pytest.importorskip("openai")
    obj = openai.types.chat.ChatCompletion.model_validate(chat_body())
    assert choice_probs(obj, ["A", "B"]).probs == pytest.approx(
        choice_probs(chat_body(), ["A", "B"]).probs)


def test_it_feeds_select_directly(tmp_path: Path) -> None:
    labels = ["A", "B", "C", "D"]
    probs = choice_probs(chat_body(), labels)
    with al.record(tmp_path / "t.zst", seed=3):
        i = al.select(probs, candidates=labels, owner="model", name="answer")
    (sel,) = al.read(tmp_path / "t.zst").selections()
    assert labels[i] in labels and sel.owner == "model"
    assert np.frombuffer(sel.probs, "<f8") == pytest.approx(probs.probs)
    assert sel.n_zero == 1  # D was not listed: the zero is counted, not hidden


def test_an_explicit_position_is_read_and_checked() -> None:
    body = _chat([[("A", -0.1), ("B", -2.3)], [("B", -0.5), ("A", -1.0)]])
    assert choice_probs(body, ["A", "B"]).position == 0
    second = choice_probs(body, ["A", "B"], position=1)
    expect = np.array([math.exp(-1.0), math.exp(-0.5)])
    assert second.probs == pytest.approx(expect / expect.sum())
    assert choice_probs(body, ["A", "B"], position=-1).position == 1
    with pytest.raises(ValueError, match=r"`position` 2 is out of range: the response has 2"):
        choice_probs(body, ["A", "B"], position=2)


def test_a_sampled_token_missing_from_top_logprobs_still_counts() -> None:
    body = _chat([[("A", -1.2)]], sampled=["B"])
    body["choices"][0]["logprobs"]["content"][0]["logprob"] = -0.4
    result = choice_probs(body, ["A", "B"])
    expect = np.array([math.exp(-1.2), math.exp(-0.4)])
    assert result.probs == pytest.approx(expect / expect.sum())
    assert result.missing == () and result.missing_bound is None


def test_no_logprobs_raises_with_how_to_request_them() -> None:
    body = chat_body()
    body["choices"][0]["logprobs"] = None
    with pytest.raises(NoLogprobsError, match=r"logprobs=True, top_logprobs=20"):
        choice_probs(body, ["A", "B"])


def test_labels_never_listed_raise_instead_of_a_made_up_vector() -> None:
    with pytest.raises(NoLogprobsError, match=r"none of the labels \['X', 'Y'\] is listed"):
        choice_probs(chat_body(), ["X", "Y"])


def test_an_anthropic_message_has_no_logprobs_and_says_so() -> None:
    with pytest.raises(NoLogprobsError, match="anthropic Messages responses carry no logprobs"):
        choice_probs(message_body(), ["A", "B"])


@pytest.mark.parametrize("labels, message", [
    ("AB", r"must be a sequence of option labels"),
    ([], r"must name at least one option"),
    (["A", "A"], r"must be distinct"),
])
def test_bad_labels_are_refused(labels: Any, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        choice_probs(chat_body(), labels)


def test_an_unknown_response_type_is_refused_by_name() -> None:
    with pytest.raises(NoLogprobsError, match=r"cannot read logprobs from a int"):
        choice_probs(3, ["A"])


def test_the_result_reads_as_a_vector_and_prints_its_caveats() -> None:
    result = choice_probs(chat_body(), ["A", "B", "C", "D"])
    assert isinstance(result, ChoiceProbs) and len(result) == 4
    assert np.asarray(result).tolist() == result.probs.tolist()
    assert "unobserved_mass=" in repr(result) and "missing=['D']" in repr(result)


def test_the_adapters_public_names_are_fixed() -> None:
    import agentlog.adapters as adapters

    assert adapters.__all__ == sorted(adapters.__all__) == [
        "CacheKey", "CacheMode", "CacheOverride", "CacheResult", "CacheStatus", "CallOptions",
        "ChoiceProbs", "ModelCache", "NoLogprobsError", "ObservedCalls", "RequestFields",
        "ServedBy", "StreamClosedError", "async_http_client", "call_options", "choice_probs",
        "default_cache_path", "http_client", "observe_calls", "observing", "override_cache",
        "register_request_fields", "registered_request_fields", "request_fields",
        "request_key", "transport"]
    assert issubclass(adapters.NoLogprobsError, al.AdapterError)
