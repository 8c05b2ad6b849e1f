"""The example logprob scorer against a real server: the tiny model served by vLLM on
127.0.0.1 (see conftest.py), through the openai adapter and the replay's model cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agentlog.adapters import choice_probs
from agentlog.registry import registry
from agentlog.replay import ExecutionOptions, read_units, replay_channels

from .conftest import VllmServer
from .test_vllm_server import option_ids

# Starts vLLM (the tiny model, in its own environment).
pytestmark = pytest.mark.slow

openai = pytest.importorskip("openai")

APP = "agentlog.examples.logprob_scorer"


@pytest.fixture
def channels(vllm_server: VllmServer) -> Any:
    from agentlog.examples import logprob_scorer

    names = logprob_scorer.register_channels(model="tiny", base_url=vllm_server.base_url,
                                             label_token_ids=option_ids(vllm_server))
    yield names
    for name in names:
        registry("channel").unregister(name)


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    from agentlog.examples.deep_research import run_study

    folder = tmp_path_factory.mktemp("logprob-study")
    return run_study(folder, tasks=["q0", "q1"], rankings=("agent",), seeds=(0,),
                     evaluate=False)


def _scores(out: Path) -> dict[tuple[str, int, str, bytes], float]:
    got = {}
    for unit in read_units(out).values():
        assert unit.status == "ok", unit.error_message
        for s in unit.scores:
            got[(s.channel or "", s.layout or 0, unit.provenance["source_run"],
                 s.state_hash or b"")] = s.value
    return got


def test_the_margin_is_read_from_the_served_models_option_logprobs(
        vllm_server: VllmServer, channels: tuple[str, str], study: list[Path],
        tmp_path: Path) -> None:
    from agentlog.examples.deep_research.agent import LAYOUTS, target_option
    from agentlog.examples.deep_research.channels import pool_of
    from agentlog.examples.logprob_scorer import LABELS, PROMPT, logprob_request, render_prompt
    from agentlog.replay import get_channel
    from agentlog.replay.lowlevel import frozen_transitions

    out = tmp_path / "out.zst"
    summary = replay_channels(study, list(channels), window="retrieval", out=out, app=APP,
                              cache=tmp_path / "cache.sqlite3",
                              execution=ExecutionOptions(progress=False))
    assert (summary.total, summary.done, summary.failed) == (16, 16, 0), summary.failures
    # 2 transitions x 2 states x 2 channels x 4 layouts: every prompt is its own request.
    assert summary.cache_misses == 32 and summary.cache_hits == 0
    got = _scores(out)
    assert len(got) == 32 and all(np.isfinite(list(got.values())))

    # The same number, computed independently: the raw client, the same prompt, the margin.
    raw = openai.OpenAI(base_url=vllm_server.base_url, api_key="EMPTY", max_retries=0)
    t = next(frozen_transitions(study[0], window="retrieval"))
    quote = get_channel("logprob-quote")
    for state in (t.before(), t.after()):
        for layout in (0, 3):
            prompt = render_prompt(PROMPT, state, quote.view(state), layout)
            reply = raw.chat.completions.create(
                model="tiny", messages=[{"role": "user", "content": prompt}], max_tokens=1,
                temperature=0.0, logprobs=True, **logprob_request(option_ids(vllm_server)))
            logp = choice_probs(reply, LABELS).logprobs
            target = int(LAYOUTS[layout, target_option(pool_of(state.entry).theta_star)])
            expected = logp[target] - np.delete(logp, target).max()
            assert got[("logprob-quote", layout, t.run_id, state.hash)] == pytest.approx(
                expected, abs=1e-6)


def test_a_frozen_replay_is_served_from_the_cache_with_identical_scores(
        vllm_server: VllmServer, channels: tuple[str, str], study: list[Path],
        tmp_path: Path) -> None:
    cache = tmp_path / "cache.sqlite3"
    live = replay_channels(study, [channels[0]], window="retrieval", out=tmp_path / "a.zst",
                           app=APP, cache=cache, execution=ExecutionOptions(progress=False))
    frozen = replay_channels(study, [channels[0]], window="retrieval", out=tmp_path / "b.zst",
                             app=APP, cache=cache, frozen=True,
                             execution=ExecutionOptions(progress=False))
    assert live.failed == frozen.failed == 0
    assert (frozen.cache_hits, frozen.cache_misses, frozen.live_calls) == (16, 0, 0)
    assert _scores(tmp_path / "a.zst") == _scores(tmp_path / "b.zst")
    missing = replay_channels(study, [channels[0]], window="retrieval", layouts=1, waves=2,
                              out=tmp_path / "c.zst", app=APP, cache=cache, frozen=True,
                              execution=ExecutionOptions(progress=False))
    # wave 1 is a new draw (its own cache key): not in the cache, so every unit fails
    assert missing.failed == 2 and {f.error_type for f in missing.failures} == {"CacheMiss"}
