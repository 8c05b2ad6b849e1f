"""``intervene`` modes: ``frozen`` serves every call from the recording, ``branch`` goes live
after the first changed decision, and neither ever calls a stopped server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

openai = pytest.importorskip("openai")

import agentlog as al  # noqa: E402
from agentlog.adapters import openai as adapter  # noqa: E402
from agentlog.reentry import continuation_uniform, stream_origin  # noqa: E402
from agentlog.replay import Design, ExecutionOptions, ModelCache, intervene, read_units  # noqa: E402
from agentlog.replay import interventions as iv  # noqa: E402
from agentlog.replay.interventions import ForceRecorded  # noqa: E402

from ..adapters._providers import FakeProvider, openai_client  # noqa: E402

APP_HERE = __name__
IDS = ["a", "b", "c"]
ASK: dict[str, Any] = {"model": "gpt-4o-mini", "max_tokens": 4, "temperature": 0.5}


class Server:
    """The fake model server; ``down`` makes every request fail (the server is stopped)."""

    def __init__(self) -> None:
        self.down = False
        self.provider = FakeProvider(on_request=self._check)
        self.client = adapter.wrap(openai_client(self.provider))
        self.tool_calls: list[str] = []

    def _check(self, request: Any) -> None:
        if self.down:
            raise ConnectionRefusedError("the model server is stopped")


SERVER = Server()


@al.tool("fetch_page")
def fetch_page(doc: str) -> str:
    SERVER.tool_calls.append(doc)
    return f"the text of {doc}"


@al.window("modes_agent")
def agent(ids: list[str], rounds: int) -> list[str]:
    """Each round: choose a document, read it with a tool, ask the model about it."""
    out = []
    for _ in range(rounds):
        doc = ids[al.select([0.5, 0.3, 0.2], candidates=ids, name="doc")]
        page = fetch_page(doc)
        reply = SERVER.client.chat.completions.create(
            **ASK, messages=[{"role": "user", "content": page}])
        out.append(f"{doc}:{reply.choices[0].message.content}")
        if not al.proceed(0.9, name="more"):
            break
    return out


@al.window("modes_tuned")
def tuned(levels: list[float]) -> str:
    """The model's temperature is the one sampling parameter a steered choice changes."""
    t = levels[al.select([0.999, 0.001], candidates=[str(v) for v in levels], name="temp")]
    reply = SERVER.client.chat.completions.create(
        **{**ASK, "temperature": t}, messages=[{"role": "user", "content": "q"}])
    return str(reply.choices[0].message.content)


@al.window("modes_forgiving")
def forgiving(ids: list[str]) -> list[str]:
    """An agent that treats a failing tool as "no page" and carries on."""
    out = []
    for _ in range(2):
        doc = ids[al.select([0.5, 0.3, 0.2], candidates=ids, name="doc")]
        try:
            out.append(fetch_page(doc))
        except Exception:
            out.append("")
    return out


class PickLast(iv.Steer):
    """Force the last candidate (a test steer)."""

    name = "test_modes_pick_last"

    def select(self, stream: str, step: int, probs: Any, ids: tuple[Any, ...]) -> int:
        return len(ids) - 1


class ForceFrom(iv.Steer):
    """From round ``k`` of ``doc`` on, force candidate ``index`` (a test steer)."""

    name = "test_modes_force_from"

    def __init__(self, k: int, index: int) -> None:
        self.k, self.index = k, index

    @property
    def label(self) -> str:
        return f"from{self.k}"

    def select(self, stream: str, step: int, probs: Any, ids: tuple[Any, ...]) -> int | None:
        return self.index if step - stream_origin(stream) >= self.k else None

    def proceed(self, stream: str, step: int, p: float) -> bool:
        return True  # every round is played, so the round count is the design's


@pytest.fixture()
def server() -> Any:
    SERVER.down = False
    SERVER.provider.requests.clear()
    SERVER.tool_calls.clear()
    yield SERVER
    SERVER.down = False


def _record(path: Path, fn: Any, *args: Any, seed: int = 5) -> Any:
    with al.record(path, seed=seed, task="t0", mode="w"):
        out = fn(*args)
    SERVER.provider.requests.clear()  # from here on, count the replay's requests only
    SERVER.tool_calls.clear()
    return out


def _arm(out: Path, arm: str) -> al.Trace:
    for p in sorted((out / "arms").glob("*.zst")):
        t = al.read(p)
        start = t.runs[0].start
        assert start is not None
        if start.meta["agentlog.replay.arm"]["arm"] == arm:
            return t
    raise AssertionError(f"no arm {arm}")


def test_frozen_replay_succeeds_from_the_trace_alone_with_the_server_stopped(
    server: Server, tmp_path: Path,
) -> None:
    live = _record(tmp_path / "src.zst", agent, IDS, 4)
    src = al.read(tmp_path / "src.zst")
    recorded_tools = len(src.tool_calls())
    assert len(src.llm_calls()) == recorded_tools >= 1
    server.down = True
    force = ForceRecorded(src.windows("modes_agent")[0])
    design = Design(selection=["agent", force], stopping=["adaptive", force])
    res = intervene(tmp_path / "src.zst", window="modes_agent", arms=design,
                    out=tmp_path / "out", app=APP_HERE)  # mode defaults to "frozen"
    assert res.mode == "frozen" and res.summary.done == 4 and res.summary.failed == 0
    assert server.provider.count == 0 and server.tool_calls == []  # zero live calls
    for arm in ("selection=agent,stopping=adaptive",
                "selection=force_recorded,stopping=force_recorded"):
        t = _arm(tmp_path / "out", arm)
        (view,) = t.windows("modes_agent")
        assert view.exit_value() == live
        assert [c.cache for c in t.llm_calls()] == ["hit"] * recorded_tools
        assert [c.served for c in t.tool_calls()] == [True] * recorded_tools
        start = t.runs[0].start
        assert start is not None and start.meta["agentlog.replay.arm"]["mode"] == "frozen"
    assert {u.provenance["mode"] for u in read_units(tmp_path / "out" / "units.zst").values()
            } == {"frozen"}


def test_a_request_differing_in_one_sampling_parameter_fails_its_unit_naming_it(
    server: Server, tmp_path: Path,
) -> None:
    _record(tmp_path / "src.zst", tuned, [0.2, 0.9])
    (sel,) = al.read(tmp_path / "src.zst").selections()
    assert sel.choice == 0  # recorded at temperature 0.2; the steer picks 0.9
    server.down = True
    res = intervene(tmp_path / "src.zst", window="modes_tuned", out=tmp_path / "out",
                    arms=Design(selection=["agent", PickLast()]), app=APP_HERE,
                    mode="frozen")
    assert (res.summary.done, res.summary.failed) == (1, 1)
    (failure,) = res.summary.failures
    assert failure.error_type == "CacheMiss"
    assert "differs in 1 field(s): request.temperature: 0.9 here, 0.2 stored" in \
        failure.message
    assert server.provider.count == 0
    steered = _arm(tmp_path / "out", "selection=test_modes_pick_last,stopping=adaptive")
    (call,) = steered.llm_calls()
    assert (call.status, call.cache) == (1, "miss")
    units = read_units(tmp_path / "out" / "units.zst")
    assert sorted(u.status for u in units.values()) == ["failed", "ok"]


def test_branch_serves_the_calls_before_the_first_changed_decision_and_runs_the_rest_live(
    server: Server, tmp_path: Path,
) -> None:
    rounds, k = 5, 2
    # A seed whose own stop draws (p = 0.9) go on for every round: the arms stop as the
    # agent does, so the unchanged arm plays all rounds too.
    assert all(continuation_uniform(6, "more", s, task="t0") < 0.9 for s in range(rounds))
    with al.record(tmp_path / "src.zst", seed=6, task="t0", mode="w"), \
            al.reentry.steering(ForceFrom(99, 0)):  # every round played, none forced
        agent(IDS, rounds)
    src = al.read(tmp_path / "src.zst")
    choices = [s.choice for s in src.selections()]
    assert len(choices) == rounds
    other = next(i for i in range(3) if i != choices[k])  # differs at round k
    server.provider.requests.clear()
    server.tool_calls.clear()
    res = intervene(tmp_path / "src.zst", window="modes_agent", out=tmp_path / "out",
                    arms=Design(selection=[ForceFrom(99, 0), ForceFrom(k, other)]),
                    app=APP_HERE, mode="branch")
    assert res.summary.done == 2 and res.mode == "branch"
    # the arm that changes no outcome never branches: everything served
    same = _arm(tmp_path / "out", "selection=from99,stopping=adaptive")
    assert all(c.served for c in same.tool_calls()) and len(same.tool_calls()) == rounds
    assert [c.cache for c in same.llm_calls()] == ["hit"] * rounds
    assert server.provider.count == rounds - k and len(server.tool_calls) == rounds - k
    t = _arm(tmp_path / "out", f"selection=from{k},stopping=adaptive")
    assert [c.cache for c in t.llm_calls()] == ["hit"] * k + [None] * (rounds - k)
    assert [c.served for c in t.tool_calls()] == [True] * k + [False] * (rounds - k)
    assert server.tool_calls[0] == IDS[other]


def test_branch_goes_live_at_the_changed_decision_while_the_unchanged_arm_stays_served(
    server: Server, tmp_path: Path,
) -> None:
    _record(tmp_path / "src.zst", tuned, [0.2, 0.9])
    server.down = True
    # The steer changes the choice, so branch goes live at that decision: the server is
    # stopped, so the call fails with the provider's error, not a CacheMiss.
    res = intervene(tmp_path / "src.zst", window="modes_tuned", out=tmp_path / "out",
                    arms=Design(selection=["agent", PickLast()]), app=APP_HERE,
                    mode="branch")
    (failure,) = res.summary.failures
    assert failure.error_type != "CacheMiss" and server.provider.count >= 1
    assert res.summary.done == 1  # the agent's own arm never branched: served


def test_a_user_cache_serves_what_the_recording_lacks_and_is_never_fetched_into(
    server: Server, tmp_path: Path,
) -> None:
    _record(tmp_path / "src.zst", tuned, [0.2, 0.9])
    cache = ModelCache(":memory:")
    _record(tmp_path / "other.zst", lambda: adapter.wrap(
        openai_client(FakeProvider()), cache=cache).chat.completions.create(
            **{**ASK, "temperature": 0.9}, messages=[{"role": "user", "content": "q"}]))
    assert len(cache) == 1
    server.down = True
    res = intervene(tmp_path / "src.zst", window="modes_tuned", out=tmp_path / "out",
                    arms=Design(selection=[PickLast()]), app=APP_HERE, cache=cache)
    assert res.summary.done == 1 and server.provider.count == 0
    empty = ModelCache(":memory:")
    res = intervene(tmp_path / "src.zst", window="modes_tuned", out=tmp_path / "o2",
                    arms=Design(selection=[PickLast()]), app=APP_HERE, cache=empty)
    assert res.summary.failed == 1 and len(empty) == 0 and server.provider.count == 0
    with pytest.raises(ValueError, match="executor='ray': cache= is an object of this "
                                         "process"):
        intervene(tmp_path / "src.zst", window="modes_tuned", out=tmp_path / "o3",
                  arms=Design(), app=APP_HERE, cache=cache,
                  execution=ExecutionOptions(executor="ray"))


def test_frozen_re_entry_of_the_demo_agent_reproduces_it_with_every_tool_call_served(
    tmp_path: Path,
) -> None:
    from agentlog.examples.deep_research import run_study, task_ids

    run_study(tmp_path / "src", tasks=task_ids(2), rankings=("agent",), seeds=(0,),
              evaluate=False)
    res = intervene(tmp_path / "src", window="retrieval", arms=Design(),
                    out=tmp_path / "out", app="agentlog.examples.deep_research")
    assert res.mode == "frozen" and res.summary.done == res.instances == 2
    sources = {}
    for p in sorted((tmp_path / "src").glob("*.zst")):
        t = al.read(p)
        start = t.runs[0].start
        assert start is not None
        sources[start.run_id] = t
    for p in sorted((tmp_path / "out" / "arms").glob("*.zst")):
        arm = al.read(p)
        start = arm.runs[0].start
        assert start is not None
        src = sources[start.meta["agentlog.replay.arm"]["source_run"]]
        (view,) = src.windows("retrieval")
        (again,) = arm.windows("retrieval")
        assert again.exit_value() == view.exit_value()
        recorded = [(s.step, s.choice) for s in src.selections() if s.window == view.window]
        assert [(s.step, s.choice) for s in arm.selections()] == recorded
        tools = arm.tool_calls()
        assert tools and all(c.served for c in tools)
        assert [c.args_hash for c in tools] == [c.args_hash for c in src.tool_calls()
                                                if c.window == view.window]
        assert [c.result_hash for c in tools] == [c.result_hash for c in src.tool_calls()
                                                  if c.window == view.window]


def test_a_miss_the_window_caught_still_fails_the_unit(server: Server, tmp_path: Path) -> None:
    _record(tmp_path / "src.zst", forgiving, IDS)
    recorded = [s.choice for s in al.read(tmp_path / "src.zst").selections()]
    never = next(i for i in range(3) if i not in recorded)
    res = intervene(tmp_path / "src.zst", window="modes_forgiving", out=tmp_path / "out",
                    arms=Design(selection=["agent", ForceFrom(0, never)]), app=APP_HERE)
    assert (res.summary.done, res.summary.failed) == (1, 1)
    (failure,) = res.summary.failures
    assert failure.error_type == "CacheMiss"
    assert "2 model or tool call(s) could not be served from the recording (each raised " \
        "CacheMiss, which the window caught)" in failure.message
    assert server.tool_calls == []


def test_the_frozen_cache_looks_the_users_cache_up_async_and_never_fetches(
    server: Server, tmp_path: Path,
) -> None:
    import asyncio

    from agentlog.replay import request_key
    from agentlog.replay._modes import FrozenCache

    src = tmp_path / "src.zst"
    _record(src, tuned, [0.2, 0.9])
    user = ModelCache(":memory:")
    key = request_key("openai.chat", {"model": "m", "messages": []})
    user.call(key, lambda: {"choices": []})
    frozen = FrozenCache(ModelCache.from_traces([src]), user)
    fetched: list[int] = []

    async def afetch() -> dict[str, Any]:
        fetched.append(1)
        return {}

    assert asyncio.run(frozen.acall(key, afetch)).response == {"choices": []}
    other = request_key("openai.chat", {"model": "m", "messages": [], "temperature": 1.0})
    with pytest.raises(al.CacheMiss, match="not in the read-only model cache"):
        asyncio.run(frozen.acall(other, afetch))
    assert fetched == [] and frozen.misses == 1 and len(user) == 1
