"""``observe_calls()``: which model revision served the calls of a block, run or no run."""

from __future__ import annotations

from pathlib import Path

import pytest

openai = pytest.importorskip("openai")

import agentlog as al  # noqa: E402
from agentlog.adapters import ObservedCalls, ServedBy, observe_calls, observing  # noqa: E402
from agentlog.adapters import openai as adapter  # noqa: E402
from agentlog.context import copy_context_executor  # noqa: E402
from agentlog.replay import ModelCache  # noqa: E402

from ._providers import FakeProvider, chat_body, openai_client  # noqa: E402

ASK = {"model": "gpt-4o-mini", "max_tokens": 2,
       "messages": [{"role": "user", "content": "Which option?"}]}
SERVED = chat_body()  # what FakeProvider answers: a dated model and a system_fingerprint


def test_calls_outside_any_run_are_counted_by_who_served_them() -> None:
    provider = FakeProvider()
    client = adapter.wrap(openai_client(provider))
    assert observing() is None
    client.chat.completions.create(**ASK)  # nobody observing, no run: straight to the SDK
    with observe_calls() as seen:
        assert observing() is seen
        client.chat.completions.create(**ASK)
        client.chat.completions.create(**{**ASK, "model": "gpt-4.1-mini"})
    assert observing() is None
    assert provider.count == 3
    assert seen.served_by == [
        ServedBy("openai.chat", "gpt-4.1-mini", "gpt-4.1-mini-2024-07-18",
                 SERVED["system_fingerprint"], calls=1, hits=0, failed=0),
        ServedBy("openai.chat", "gpt-4o-mini", SERVED["model"], SERVED["system_fingerprint"],
                 calls=1, hits=0, failed=0),
    ]
    assert len(seen) == 2


def test_cache_hits_and_failures_are_counted_and_a_run_records_as_before(
        tmp_path: Path) -> None:
    provider = FakeProvider(fail={2: 500})
    client = adapter.wrap(openai_client(provider), cache=ModelCache(":memory:"))
    with observe_calls() as seen, al.record(tmp_path / "t.zst", seed=1):
        client.chat.completions.create(**ASK)  # a miss, stored
        client.chat.completions.create(**ASK)  # a hit: no request
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(**{**ASK, "max_tokens": 3})  # request 2: a 500
    (ok, failed) = sorted(seen.served_by, key=lambda s: s.failed)
    assert (ok.calls, ok.hits, ok.failed, ok.fingerprint) == (2, 1, 0, SERVED["system_fingerprint"])
    assert (failed.calls, failed.failed, failed.response_model) == (1, 1, None)
    assert [c.cache for c in al.read(tmp_path / "t.zst").llm_calls()] == ["miss", "hit", "miss"]


def test_worker_threads_of_a_copied_context_are_seen_and_the_groups_are_bounded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    client = adapter.wrap(openai_client(FakeProvider()))
    with observe_calls() as seen, copy_context_executor(max_workers=4) as pool:
        list(pool.map(lambda _: client.chat.completions.create(**ASK), range(8)))
    assert [(s.model, s.calls) for s in seen.served_by] == [("gpt-4o-mini", 8)]

    monkeypatch.setattr(ObservedCalls, "MAX_GROUPS", 1)
    with observe_calls() as bounded:
        client.chat.completions.create(**ASK)
        client.chat.completions.create(**{**ASK, "model": "gpt-4.1-mini"})
    assert [s.model for s in bounded.served_by] == ["gpt-4o-mini"]
    assert bounded.dropped == 1 and len(bounded) == 2


def test_the_streaming_response_route_is_observed_outside_a_run_too() -> None:
    provider = FakeProvider()
    client = adapter.wrap(openai_client(provider))
    with observe_calls() as seen, client.chat.completions.with_streaming_response.create(
            **ASK) as response:
        assert response.parse().choices[0].message.content == " answerB"
    assert [(s.response_model, s.calls) for s in seen.served_by] == [(SERVED["model"], 1)]
