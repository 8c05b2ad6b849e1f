"""The vLLM adapter's parts that need no engine: the missing-SDK error and the parsing of
stored vLLM bodies into candidate vectors (the engine itself: test_vllm_offline.py)."""

from __future__ import annotations

import importlib.util
import math
from typing import Any

import numpy as np
import pytest

import agentlog as al
from agentlog.adapters import NoLogprobsError, choice_probs
from agentlog.adapters.vllm import choice_probs_from_vllm, sampling_params_dict


def body(rows: list[list[tuple[int, float, str]]], token_ids: list[int]) -> dict[str, Any]:
    """A stored vLLM RequestOutput body with the given logprob rows."""
    return {"request_id": "0", "prompt": "p", "prompt_token_ids": [1, 2], "finished": True,
            "prompt_logprobs": None, "model": "tiny", "system_fingerprint": "vllm-x",
            "outputs": [{"index": 0, "text": "A", "token_ids": token_ids,
                         "cumulative_logprob": -1.0, "finish_reason": "length",
                         "stop_reason": None,
                         "logprobs": [[{"id": t, "logprob": lp, "rank": r + 1, "text": d}
                                       for r, (t, lp, d) in enumerate(row)] for row in rows]}]}


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None,
                    reason="vLLM is installed in this environment")
def test_wrapping_without_vllm_names_the_install_line() -> None:
    from agentlog.adapters import vllm

    with pytest.raises(al.MissingDependencyError,
                       match=r"needs the `vllm` package.*pip install 'agentlog\[vllm\]'"):
        vllm.wrap(object())


def test_a_top_logprobs_row_gives_the_renormalised_vector_and_the_unobserved_mass() -> None:
    lp = {10: math.log(0.5), 11: math.log(0.2), 5: math.log(0.1), 12: math.log(0.05)}
    stored = body([[(10, lp[10], "A"), (11, lp[11], " B"), (5, lp[5], ":"),
                    (12, lp[12], "C")]], [10])
    cp = choice_probs_from_vllm(stored, ["A", "B", "C", "D"])
    label_mass = 0.5 + 0.2 + 0.05
    np.testing.assert_allclose(cp.probs, [0.5 / label_mass, 0.2 / label_mass,
                                          0.05 / label_mass, 0.0], rtol=1e-12)
    assert cp.label_mass == pytest.approx(label_mass, rel=1e-12)
    assert cp.unobserved_mass == pytest.approx(1 - label_mass, rel=1e-12)
    assert cp.missing == ("D",) and cp.missing_bound == pytest.approx(0.05, rel=1e-12)
    assert (cp.position, cp.token, cp.source) == (0, "A", "vllm.offline.logprobs")


def test_labels_given_as_token_ids_match_ids_not_text() -> None:
    stored = body([[(10, math.log(0.6), "A"), (11, math.log(0.3), "B")]], [10])
    cp = choice_probs_from_vllm(stored, [11, 10], complete=True)
    np.testing.assert_allclose(cp.probs, [1 / 3, 2 / 3], rtol=1e-12)
    assert cp.token == 10 and cp.source == "vllm.offline.logprob_token_ids"
    assert cp.missing_bound is None


def test_the_first_position_listing_a_label_is_read_by_default() -> None:
    stored = body([[(5, math.log(0.9), ":")], [(12, math.log(0.4), "C"),
                                              (13, math.log(0.4), "D")]], [5, 12])
    cp = choice_probs_from_vllm(stored, ["C", "D"])
    assert cp.position == 1 and cp.token == "C"
    np.testing.assert_allclose(cp.probs, [0.5, 0.5], rtol=1e-12)
    assert choice_probs_from_vllm(stored, ["C", "D"], position=-1).position == 1


def test_an_impossible_token_stored_as_null_counts_as_zero() -> None:
    stored = body([[(10, math.log(0.5), "A"), (11, None, "B")]], [10])  # type: ignore[list-item]
    cp = choice_probs_from_vllm(stored, ["A", "B"], complete=True)
    np.testing.assert_allclose(cp.probs, [1.0, 0.0])
    assert cp.missing == ("B",)


def test_choice_probs_reads_a_stored_vllm_body_through_the_output_list() -> None:
    stored = body([[(10, math.log(0.5), "A"), (11, math.log(0.5), "B")]], [10])

    class Output:  # what choice_probs dispatches on: an object with `.outputs`
        outputs = stored["outputs"]

    cp = choice_probs(Output(), ["A", "B"])
    np.testing.assert_allclose(cp.probs, [0.5, 0.5])
    i = al.select(cp, candidates=["A", "B"], name="option", owner="model")
    assert i in (0, 1)


def test_an_output_without_logprobs_says_how_to_ask_for_them() -> None:
    stored = body([], [10])
    stored["outputs"][0]["logprobs"] = None
    with pytest.raises(NoLogprobsError, match=r"vllm.offline.logprobs: the response has no "
                                              r"token logprobs.*SamplingParams\(logprobs=20\)"):
        choice_probs_from_vllm(stored, ["A", "B"])


def test_a_batch_of_outputs_is_refused_with_what_to_pass() -> None:
    stored = body([[(10, 0.0, "A")]], [10])
    with pytest.raises(ValueError, match=r"a batch of 2 vLLM outputs; pass one of them"):
        choice_probs_from_vllm([stored, stored], ["A"])
    with pytest.raises(ValueError, match=r"`choice` 3 is out of range: the output has 1"):
        choice_probs_from_vllm(stored, ["A"], choice=3)


def test_sampling_params_keep_content_fields_and_drop_delivery_fields() -> None:
    import enum

    import msgspec

    class Kind(enum.Enum):
        FINAL_ONLY = 2

    class FakeParams(msgspec.Struct):  # vLLM's SamplingParams is a msgspec Struct too
        temperature: float = 0.0
        logprobs: int | None = 5
        stop: set[str] = msgspec.field(default_factory=lambda: {"b", "a"})
        output_kind: Kind = Kind.FINAL_ONLY
        _private: int = 0

    plain = sampling_params_dict(FakeParams())
    assert plain == {"temperature": 0.0, "logprobs": 5, "stop": ["a", "b"]}


def test_a_recorded_body_comes_back_from_the_trace_unchanged(tmp_path: Any) -> None:
    """What a frozen replay from the trace serves is the body as the adapter stored it (its
    field names avoid the credential-like ``token_id`` the recorder's scrubber once ate)."""
    import msgspec

    stored = body([[(10, math.log(0.7), "A"), (11, math.log(0.2), "B")]], [10])
    trace = tmp_path / "run.zst"
    with al.record(trace, seed=1):
        al.llm_call("vllm.generate", "tiny", request={"prompts": "p"}, response=stored,
                    kind="internal")
    [call] = al.read(trace).llm_calls()
    assert msgspec.msgpack.decode(call.response) == stored
    np.testing.assert_allclose(choice_probs_from_vllm(msgspec.msgpack.decode(call.response),
                                                      ["A", "B"]).probs, [7 / 9, 2 / 9])
