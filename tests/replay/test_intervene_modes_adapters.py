"""``agentlog.adapters.override_cache``: a per-context model cache of wrapped clients."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

openai = pytest.importorskip("openai")

import agentlog as al  # noqa: E402
from agentlog.adapters import openai as adapter  # noqa: E402
from agentlog.adapters import override_cache  # noqa: E402
from agentlog.context import copy_context_executor  # noqa: E402
from agentlog.replay import ModelCache  # noqa: E402

from ..adapters._providers import FakeProvider, openai_client  # noqa: E402

ASK: dict[str, Any] = {"model": "gpt-4o-mini", "temperature": 0.7, "max_tokens": 4,
                       "messages": [{"role": "user", "content": "Which option?"}]}


def _recorded(tmp_path: Path) -> Path:
    path = tmp_path / "src.zst"
    with al.record(path, seed=1, mode="w"):
        adapter.wrap(openai_client(FakeProvider())).chat.completions.create(**ASK)
    return path


def test_the_override_serves_a_client_wrapped_without_a_cache_and_a_miss_names_the_field(
    tmp_path: Path,
) -> None:
    src = _recorded(tmp_path)
    provider = FakeProvider()
    client = adapter.wrap(openai_client(provider))  # no cache= of its own
    with al.record(tmp_path / "r.zst", seed=1, mode="w"), \
            override_cache(ModelCache.from_traces([src])):
        assert client.chat.completions.create(**ASK).choices[0].message.content == " answerB"
        with pytest.raises(al.CacheMiss, match=r"request\.temperature: 0\.2 here, 0\.7 stored"):
            client.chat.completions.create(**{**ASK, "temperature": 0.2})
    assert provider.count == 0
    calls = al.read(tmp_path / "r.zst").llm_calls()
    assert [(c.status, c.cache) for c in calls] == [(0, "hit"), (1, "miss")]


def test_the_override_replaces_the_clients_own_cache_and_none_means_live(tmp_path: Path) -> None:
    src = _recorded(tmp_path)
    provider = FakeProvider()
    own = ModelCache(":memory:")
    client = adapter.wrap(openai_client(provider), cache=own)
    with al.record(tmp_path / "r.zst", seed=1, mode="w"):
        with override_cache(ModelCache.from_traces([src])):
            client.chat.completions.create(**ASK)
        assert provider.count == 0 and len(own) == 0  # the client's cache was not used
        with override_cache(None):
            client.chat.completions.create(**ASK)
            client.chat.completions.create(**ASK)
        assert provider.count == 2 and len(own) == 0  # live, twice, nothing stored
        client.chat.completions.create(**ASK)  # unset again: the client's own cache
    assert provider.count == 3 and len(own) == 1


def test_the_override_reaches_copied_contexts_and_asyncio_tasks(
    tmp_path: Path,
) -> None:
    src = _recorded(tmp_path)
    provider = FakeProvider()
    client = adapter.wrap(openai_client(provider))
    aclient = adapter.wrap(openai_client(provider, is_async=True))

    def ask(_: int) -> str:
        return str(client.chat.completions.create(**ASK).choices[0].message.content)

    async def many() -> list[Any]:
        return list(await asyncio.gather(*(aclient.chat.completions.create(**ASK)
                                           for _ in range(3))))

    with al.record(tmp_path / "r.zst", seed=1, mode="w"), \
            override_cache(ModelCache.from_traces([src])) as override:
        with copy_context_executor(max_workers=2) as pool:
            assert list(pool.map(ask, range(4))) == [" answerB"] * 4
        assert len(asyncio.run(many())) == 3
        assert provider.count == 0
        override.cache = None  # shared by the copies: later calls go live everywhere
        with copy_context_executor(max_workers=2) as pool:
            list(pool.map(ask, range(2)))
    assert provider.count == 2


def test_under_a_read_only_override_an_unkeyed_request_is_refused_not_sent(
    tmp_path: Path,
) -> None:
    src = _recorded(tmp_path)
    provider = FakeProvider()
    client = adapter.wrap(openai_client(provider))
    with al.record(tmp_path / "r.zst", seed=1, mode="w"), \
            override_cache(ModelCache.from_traces([src])), \
            pytest.warns(al.InstrumentationWarning, match="has no cache key"), \
            pytest.raises(al.CacheMiss, match=r"has no cache key .* a frozen replay refuses"):
        # JSON the SDK sends, but nested past what a cache key encodes.
        deep: Any = "x"
        for _ in range(600):
            deep = [deep]
        client.chat.completions.create(**ASK, extra_body={"deep": deep})
    assert provider.count == 0
