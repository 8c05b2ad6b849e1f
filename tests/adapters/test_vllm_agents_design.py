"""End to end with a real model, continued: the OpenAI Agents SDK agent of
``test_vllm_agents_e2e`` inside a window whose choices go through agentlog, on the vLLM
CPU server. Ten runs recorded and verified; a 2×2 paired design (selection agent /
uniform × stopping adaptive / one round, two replicate seeds) re-entered in branch mode,
every arm paired on the recorded draws; a channel replay whose scorer asks the served model
for its option log-probabilities, then the same replay served from the cache.

Each run asks the agent about a city "per" a source it picks: the source is an
``al.select`` over four (a fixed policy of the agent's own), and after each answer an
``al.proceed`` decides whether to ask again (at most three rounds). The arms change those
choices, so their prompts, and the agent's model calls, differ from the recorded ones:
branch mode serves what the recorded run asked and sends the rest to the server.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest

agents = pytest.importorskip("agents")
openai = pytest.importorskip("openai")

import agentlog as al  # noqa: E402
from agentlog.adapters import choice_probs, http_client  # noqa: E402
from agentlog.examples.logprob_scorer import logprob_request  # noqa: E402
from agentlog.registry import registry  # noqa: E402
from agentlog.replay import (  # noqa: E402
    Design,
    ExecutionOptions,
    intervene,
    read_units,
    replay_channels,
)
from agentlog.replay.interventions import FixedHorizon, Uniform  # noqa: E402
from tests.replay._arms import arm_traces  # noqa: E402

from . import test_vllm_agents_e2e as e2e  # noqa: E402
from .conftest import VllmServer  # noqa: E402
from .test_vllm_server import option_ids  # noqa: E402

pytestmark = pytest.mark.slow  # starts vLLM (shared with the other vLLM tests)

APP = __name__
SOURCES = ["met office", "news", "almanac", "satellite"]
SOURCE_PROBS = np.array([0.55, 0.25, 0.15, 0.05])
LABELS = ("A", "B", "C", "D")
CITIES = e2e.CITIES


async def _ask(question: str) -> str:
    agent, config, http = e2e._agent()
    try:
        result = await agents.Runner.run(agent, input=question, run_config=config)
    finally:
        await http.aclose()  # its connections belong to this run's event loop
    return str(result.final_output)


@al.window("forecast")
async def forecast(city: str) -> dict[str, Any]:
    cited: list[str] = []
    answers: list[str] = []
    for _ in range(3):
        source = SOURCES[al.select(SOURCE_PROBS, SOURCES, name="source")]
        cited.append(source)
        answers.append(await _ask(f"Per the {source}, what is the weather in {city}?"))
        if not al.proceed(0.6, name="again"):
            break
    return {"city": city, "cited": cited, "answers": answers}


def rounds(exit_value: dict[str, Any]) -> dict[str, float]:
    """The arm runs' outcome: how many rounds the agent asked, and whether it cited the
    source it favours first."""
    return {"rounds": float(len(exit_value["cited"])),
            "first_is_met": float(exit_value["cited"][0] == SOURCES[0])}


@al.scorer("e2e-forecast-margin", labels=list(LABELS), max_tokens=1, temperature=0.0)
def forecast_margin(state: Any, view: str | None, layout: int, *, context: Any) -> float:
    """log p(A) − max log p(B..D): how strongly the served model rates the state's first
    option, asked about the forecast (x⁻: the city alone; x⁺: the answers)."""
    ch = context.channel
    text = (f"City: {state.value}" if state.before else
            f"Forecasts for {state.value['city']}: " + " | ".join(state.value["answers"]))
    prompt = (f"{'' if view is None else view + ' '}{text}\nIs this forecast useful? "
              "A: yes B: no C: unsure D: irrelevant\nAnswer:")
    client = openai.OpenAI(base_url=ch.params["base_url"], api_key="EMPTY", max_retries=0,
                           http_client=http_client(cache=context.cache))
    reply = client.chat.completions.create(
        model=ch.model, messages=[{"role": "user", "content": prompt}], max_tokens=1,
        temperature=0.0, logprobs=True, **logprob_request(ch.params["label_token_ids"]))
    probs = choice_probs(reply, LABELS)
    assert not probs.missing, probs.missing
    logp = np.asarray(probs.logprobs, dtype=np.float64)
    return float(logp[0] - logp[1:].max())


@pytest.fixture
def channels(vllm_server: VllmServer) -> Any:
    ids = option_ids(vllm_server)

    def plain(state: Any) -> None:
        return None

    def terse(state: Any) -> str:
        return "Be terse."

    names = ("e2e-plain", "e2e-terse")
    for name, view in zip(names, (plain, terse), strict=True):
        al.channel(name, scorer="e2e-forecast-margin", model="tiny", layouts=1,
                   base_url=vllm_server.base_url, label_token_ids=ids)(view)
    yield names
    for name in names:
        registry("channel").unregister(name)


def test_a_paired_design_and_a_channel_replay_on_the_served_model(
        vllm_server: VllmServer, channels: tuple[str, str], tmp_path: Path) -> None:
    e2e.SERVER["base_url"] = vllm_server.base_url
    runs = tmp_path / "runs"
    runs.mkdir()
    for city in CITIES:
        with al.record(runs / f"{city}.zst", seed=3, task=city, mode="w"):
            asyncio.run(forecast(city))
    paths = sorted(runs.glob("*.zst"))
    assert len(paths) == 10 and all(al.verify(p).ok for p in paths)
    recorded = {str(al.read(p).runs[0].run_id): al.read(p) for p in paths}
    n_rounds = [len(t.selections()) for t in recorded.values()]
    assert len(set(n_rounds)) > 1  # the stop decisions vary across tasks

    # 2x2 x 2 replicates, branch mode: the recorded calls are served, the rest go live.
    design = Design(selection=["agent", Uniform()], stopping=["adaptive", FixedHorizon(1)],
                    seeds=range(2))
    res = intervene(paths, window="forecast", arms=design, out=tmp_path / "design", app=APP,
                    mode="branch", scores=rounds,
                    execution=ExecutionOptions(concurrency=1, progress=False))
    assert res.units == 10 * 4 * 2 and res.summary.done == res.units, res.summary.failures
    arms = arm_traces(tmp_path / "design")
    served = [c.cache == "hit" for t in arms.values() for c in t.llm_calls()]
    assert any(served) and not all(served)  # arms that chose otherwise asked the server
    own = "selection=agent,stopping=adaptive"
    for run_id, source in recorded.items():
        # Replicate 0 of the agent's own arm is the recorded run, draw for draw, served.
        replayed = arms[run_id, own, 0]
        assert [s.choice for s in replayed.selections()] == [
            s.choice for s in source.selections()]
        assert all(c.cache == "hit" for c in replayed.llm_calls())
        for replicate in range(2):
            by_arm = {arm.name: arms[run_id, arm.name, replicate] for arm in design.arms()}
            score = {name: {s.name: s.value for s in t.scores()}
                     for name, t in by_arm.items()}
            # One round under FixedHorizon(1), whatever the selection arm.
            assert score["selection=agent,stopping=fixed:1"]["rounds"] == 1.0
            assert score["selection=uniform,stopping=fixed:1"]["rounds"] == 1.0
            # Common random numbers: both selection arms of a replicate draw the same
            # Gumbel noise for the first pick, so where the uniform arm's first pick is
            # the agent's favourite, the agent's arm picks it too (a larger score on it).
            first = {name: t.selections()[0] for name, t in by_arm.items()}
            draws = {name: s.draws for name, s in first.items()}
            assert len(set(draws.values())) == 1
            if first["selection=uniform,stopping=adaptive"].choice == 0:
                assert first[own].choice == 0

    # A channel replay of the recorded windows, the scorer asking the served model; then
    # the same replay frozen, every answer served from the cache.
    cache = tmp_path / "scores.sqlite3"
    live = replay_channels(paths, list(channels), window="forecast", out=tmp_path / "a.zst",
                           app=APP, cache=cache, execution=ExecutionOptions(progress=False))
    frozen = replay_channels(paths, list(channels), window="forecast",
                             out=tmp_path / "b.zst", app=APP, cache=cache, frozen=True,
                             execution=ExecutionOptions(progress=False))
    assert live.failed == frozen.failed == 0, live.failures
    assert frozen.live_calls == 0 and frozen.cache_hits == live.cache_misses == 10 * 2 * 2

    def scores(out: Path) -> dict[tuple[str, str, bytes], float]:
        return {(s.channel or "", u.provenance["source_run"], s.state_hash or b""): s.value
                for u in read_units(out).values() for s in u.scores}

    a = scores(tmp_path / "a.zst")
    assert a == scores(tmp_path / "b.zst") and len(a) == 10 * 2 * 2
    assert all(np.isfinite(v) for v in a.values())
