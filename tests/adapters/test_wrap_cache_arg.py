"""``wrap(client, cache=...)`` takes a ``ModelCache`` or its path, and refuses anything else
at ``wrap`` (issue 28: a path used to fail at the first call with ``'str' object has no
attribute 'mode'``). Over the real openai and anthropic clients and ``httpx2.MockTransport``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

from agentlog.adapters import anthropic as anthropic_adapter  # noqa: E402
from agentlog.adapters import openai as openai_adapter  # noqa: E402

from ._providers import FakeProvider, anthropic_client, openai_client  # noqa: E402

CHAT: dict[str, Any] = {"model": "gpt-4o-mini", "max_tokens": 4,
                        "messages": [{"role": "user", "content": "A, B, C or D?"}]}
MESSAGE: dict[str, Any] = {"model": "claude-opus-4-7", "max_tokens": 16,
                           "messages": [{"role": "user", "content": "A, B, C or D?"}]}


def _openai(provider: FakeProvider, cache: Any) -> Any:
    client = openai_adapter.wrap(openai_client(provider), cache=cache)
    return lambda: client.chat.completions.create(**CHAT)


def _anthropic(provider: FakeProvider, cache: Any) -> Any:
    client = anthropic_adapter.wrap(anthropic_client(provider), cache=cache)
    return lambda: client.messages.create(**MESSAGE)


ADAPTERS = [_openai, _anthropic]


@pytest.mark.parametrize("wrapped", ADAPTERS, ids=["openai", "anthropic"])
@pytest.mark.parametrize("as_text", [True, False], ids=["str", "Path"])
def test_a_cache_path_opens_a_model_cache_that_serves_the_second_call(
        wrapped: Any, as_text: bool, tmp_path: Path) -> None:
    path = tmp_path / "runs" / "cache.sqlite"
    provider = FakeProvider()
    ask = wrapped(provider, str(path) if as_text else path)
    ask()
    ask()
    assert provider.count == 1
    assert path.is_file()


def test_a_copy_of_a_client_wrapped_with_a_path_shares_its_cache(tmp_path: Path) -> None:
    provider = FakeProvider()
    client = openai_adapter.wrap(openai_client(provider), cache=tmp_path / "c.sqlite")
    client.chat.completions.create(**CHAT)
    client.with_options(timeout=5).chat.completions.create(**CHAT)
    assert provider.count == 1


@pytest.mark.parametrize("wrapped", ADAPTERS, ids=["openai", "anthropic"])
@pytest.mark.parametrize("cache", [42, {"path": "cache.sqlite"}, b"cache.sqlite"],
                         ids=["int", "dict", "bytes"])
def test_anything_else_is_refused_at_wrap_naming_model_cache(wrapped: Any, cache: Any) -> None:
    with pytest.raises(TypeError, match=r"`cache` must be an agentlog\.replay\.ModelCache, "
                                        r"e\.g\. ModelCache\(path\), the path of its SQLite "
                                        r"file .* or None; found (int|dict|bytes)"):
        wrapped(FakeProvider(), cache)


@pytest.mark.parametrize("wrapped", ADAPTERS, ids=["openai", "anthropic"])
def test_a_folder_given_as_the_cache_is_refused_at_wrap(wrapped: Any, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"model cache '.*' is a folder; a model cache is a "
                                         r"SQLite file path, e\.g\. 'runs/cache\.sqlite'"):
        wrapped(FakeProvider(), tmp_path)
