"""The real openai client, wrapped by ``agentlog.adapters.openai``, and LangChain's
``ChatOpenAI`` on ``agentlog.adapters.http_client``, against a real OpenAI-compatible
server: vLLM serving the tiny model on 127.0.0.1 (see conftest.py).

Chat with ``top_logprobs``, streaming, the Responses API, ``logprob_token_ids``, the cache,
and a frozen replay served from the recorded trace after the server has been stopped. The
frozen-replay test stops the session's server, so it stays the last test of this module.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentlog as al
from agentlog.adapters import call_options, choice_probs, http_client
from agentlog.replay import ModelCache

from .conftest import VllmServer

# Starts vLLM (the tiny model, in its own environment).
pytestmark = pytest.mark.slow

openai = pytest.importorskip("openai")
from agentlog.adapters import openai as openai_adapter  # noqa: E402

CANARY = "sk-canary-vllm-7f3e9d21c4b8"
QUESTION = [{"role": "user", "content": "which option is right ? A B C D"}]
LABELS = ["A", "B", "C", "D"]


def client_for(server: VllmServer, **wrap_kwargs: Any) -> Any:
    return openai_adapter.wrap(openai.OpenAI(base_url=server.base_url, api_key=CANARY,
                                             max_retries=0, timeout=120), **wrap_kwargs)


def chat_model_for(server: VllmServer, cache: Any = None) -> Any:
    """LangChain's ChatOpenAI on the recording HTTP client (a framework's own call path)."""
    lc = pytest.importorskip("langchain_openai")
    return lc.ChatOpenAI(model="tiny", base_url=server.base_url, api_key=CANARY, max_retries=0,
                         timeout=120, max_tokens=2, temperature=0,
                         http_client=http_client(cache=cache))


def option_ids(server: VllmServer) -> list[int]:
    ids = json.loads((server.model_dir / "agentlog_tiny.json").read_text())["option_ids"]
    return [int(ids[label]) for label in LABELS]


def calls_of(trace: Path) -> list[Any]:
    return al.read(trace).llm_calls()


def body_of(call: Any) -> Any:
    return msgspec.msgpack.decode(call.response)


def test_chat_with_top_logprobs_is_recorded_with_the_server_fingerprint(
        vllm_server: VllmServer, tmp_path: Path) -> None:
    client = client_for(vllm_server)
    trace = tmp_path / "run.zst"
    with al.record(trace, seed=1):
        reply = client.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=2,
                                               temperature=0, logprobs=True, top_logprobs=5)
    assert isinstance(reply, openai.types.chat.ChatCompletion)
    [call] = calls_of(trace)
    body = body_of(call)
    assert (call.provider, call.model, call.status) == ("openai.chat", "tiny", 0)
    assert call.fingerprint == reply.system_fingerprint and call.fingerprint.startswith("vllm-")
    assert call.input_tokens == reply.usage.prompt_tokens > 0
    assert call.output_tokens == 2 and call.cache_key is not None
    assert len(body["choices"][0]["logprobs"]["content"]) == 2
    assert all(len(p["top_logprobs"]) == 5 for p in body["choices"][0]["logprobs"]["content"])
    assert CANARY.encode() not in trace.read_bytes()


def test_a_stream_passes_through_unchanged_and_is_recorded_once_at_its_end(
        vllm_server: VllmServer, tmp_path: Path) -> None:
    client = client_for(vllm_server)
    trace = tmp_path / "run.zst"
    with al.record(trace, seed=1):
        stream = client.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=3,
                                                temperature=0, logprobs=True, top_logprobs=2,
                                                stream=True)
        chunks = list(stream)
    assert all(isinstance(c, openai.types.chat.ChatCompletionChunk) for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    streamed = [lp.token for c in chunks if c.choices and c.choices[0].logprobs
                for lp in c.choices[0].logprobs.content or ()]
    [call] = calls_of(trace)
    body = body_of(call)
    assert body["choices"][0]["message"]["content"] == text
    assert [p["token"] for p in body["choices"][0]["logprobs"]["content"]] == streamed
    assert len(streamed) == 3


def test_the_responses_api_is_recorded_with_its_logprobs(vllm_server: VllmServer,
                                                         tmp_path: Path) -> None:
    client = client_for(vllm_server)
    trace = tmp_path / "run.zst"
    with al.record(trace, seed=1):
        response = client.responses.create(model="tiny", input="which option is right ?",
                                           max_output_tokens=2, temperature=0,
                                           include=["message.output_text.logprobs"],
                                           top_logprobs=3)
    [call] = calls_of(trace)
    assert call.provider == "openai.responses" and call.status == 0
    assert body_of(call)["id"] == response.id
    assert call.output_tokens == response.usage.output_tokens == 2
    text_parts = [part for item in body_of(call)["output"] if item["type"] == "message"
                  for part in item["content"]]
    assert len(text_parts[0]["logprobs"]) == 2


def test_logprob_token_ids_give_a_candidate_vector_over_the_four_options(
        vllm_server: VllmServer) -> None:
    client = client_for(vllm_server)
    reply = client.chat.completions.create(
        model="tiny", messages=QUESTION, max_tokens=1, temperature=0, logprobs=True,
        extra_body={"logprob_token_ids": option_ids(vllm_server)})
    listed = {t.token: t.logprob for t in reply.choices[0].logprobs.content[0].top_logprobs}
    assert set(LABELS) <= set(listed)  # every option was scored, whatever its rank
    probs = choice_probs(reply, LABELS)
    mass = sum(math.exp(listed[label]) for label in LABELS)
    assert float(probs.probs.sum()) == pytest.approx(1.0, abs=1e-12)
    for label, p in zip(LABELS, probs.probs, strict=True):
        assert p == pytest.approx(math.exp(listed[label]) / mass, rel=1e-9)
    assert probs.unobserved_mass == pytest.approx(1 - mass, rel=1e-9)
    assert 0 < probs.unobserved_mass < 1 and probs.missing == ()
    assert al.select(probs, candidates=LABELS, name="option", owner="model") in range(4)


def test_the_cache_serves_a_repeated_request_without_a_second_server_call(
        vllm_server: VllmServer, tmp_path: Path) -> None:
    with ModelCache(tmp_path / "cache.sqlite3") as cache:
        client = client_for(vllm_server, cache=cache)
        first = client.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=2,
                                               temperature=0, logprobs=True, top_logprobs=2)
        again = client.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=2,
                                               temperature=0, logprobs=True, top_logprobs=2)
        with call_options(draw=1):
            other = client.chat.completions.create(model="tiny", messages=QUESTION,
                                                   max_tokens=2, temperature=0, logprobs=True,
                                                   top_logprobs=2)
        stats = cache.stats()
    assert again.id == first.id != other.id  # vLLM gives every real call a fresh id
    assert again.choices[0].logprobs == first.choices[0].logprobs
    assert stats["upstream_calls"] == 2 and stats["hits"] == 1


def test_a_frozen_replay_serves_every_call_from_the_trace_with_the_server_stopped(
        vllm_server: VllmServer, tmp_path: Path) -> None:
    trace = tmp_path / "original.zst"

    @al.window("ask", entry=lambda client, llm: "the same question")  # a client has no seal
    def ask(client: Any, llm: Any) -> dict[str, Any]:
        chat = client.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=2,
                                              temperature=0, logprobs=True, top_logprobs=5)
        stream = client.chat.completions.create(model="tiny", messages=QUESTION, max_tokens=2,
                                                temperature=0, stream=True)
        streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        response = client.responses.create(model="tiny", input="which option is right ?",
                                           max_output_tokens=2, temperature=0)
        scored = client.chat.completions.create(
            model="tiny", messages=QUESTION, max_tokens=1, temperature=0, logprobs=True,
            extra_body={"logprob_token_ids": option_ids(vllm_server)})
        probs = choice_probs(scored, LABELS)
        framework = llm.invoke(QUESTION[0]["content"]).content
        return {"chat": chat.choices[0].message.content, "stream": streamed,
                "responses": response.output_text, "probs": [float(p) for p in probs.probs],
                "langchain": framework}

    with al.record(trace, seed=3, task="q1"):
        original = ask(client_for(vllm_server), chat_model_for(vllm_server))
    vllm_server.stop()
    assert not vllm_server.healthy()

    frozen = ModelCache.from_traces([trace])
    replay_trace = tmp_path / "replay.zst"
    with al.record(replay_trace, seed=3, task="q1"):
        replayed = ask(client_for(vllm_server, cache=frozen),
                       chat_model_for(vllm_server, cache=frozen))
    assert replayed == original
    assert frozen.stats()["upstream_calls"] == 0 and frozen.stats()["hits"] == 5
    assert len(calls_of(replay_trace)) == 5
    with pytest.raises(al.CacheMiss, match=r"differs in 1 field\(s\): request.max_tokens: 7 "
                                           r"here, 2 stored"):
        client_for(vllm_server, cache=frozen).chat.completions.create(
            model="tiny", messages=QUESTION, max_tokens=7, temperature=0, logprobs=True,
            top_logprobs=5)
