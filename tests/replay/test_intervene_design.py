"""``Design``: factors × levels × replicate seeds → arms with names, hashes and paired seeds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agentlog as al
from agentlog.records import Continuation, Selection
from agentlog.reentry import Steer, steering, stream_origin
from agentlog.replay import Design, parse_design, replicate_seed


class Flat(Steer):
    name = "uniform"

    def select(self, stream: str, step: int, probs: Any, ids: Any) -> Any:
        return np.full(len(probs), 1.0 / len(probs))


class Horizon(Steer):
    name = "fixed"

    def __init__(self, n: int) -> None:
        self.n = n
        self.label = f"fixed:{n}"

    def proceed(self, stream: str, step: int, p: float) -> bool | None:
        return step - stream_origin(stream) + 1 < self.n  # continue until round n


def test_a_2x2_design_expands_to_four_named_arms_and_paired_replicates() -> None:
    d = Design(selection=["agent", Flat()], stopping=["adaptive", Horizon(4)], seeds=range(3))
    arms = d.arms()
    assert [a.name for a in arms] == [
        "selection=agent,stopping=adaptive", "selection=agent,stopping=fixed:4",
        "selection=uniform,stopping=adaptive", "selection=uniform,stopping=fixed:4"]
    assert [dict(a.factors) for a in arms][3] == {"selection": "uniform", "stopping": "fixed:4"}
    assert len({a.hash for a in arms}) == 4 and all(len(a.hash) == 64 for a in arms)
    assert arms[0].steer is None and arms[3].steer is not None
    assert d.replicates == (0, 1, 2) and len(d) == 12
    # the hash is a function of the levels' identities: equal designs, equal hashes;
    # another horizon, another hash
    again = Design(selection=["agent", Flat()], stopping=["adaptive", Horizon(4)]).arms()
    assert [a.hash for a in again] == [a.hash for a in arms]
    other = Design(selection=["agent", Flat()], stopping=["adaptive", Horizon(5)]).arms()
    assert other[0].hash == arms[0].hash and other[1].hash != arms[1].hash


def test_an_arms_steer_applies_each_factor_only_through_its_own_hook(tmp_path: Path) -> None:
    arm = Design(selection=[Flat()], stopping=[Horizon(2)]).arms()[0]
    assert arm.steer is not None
    np.testing.assert_allclose(arm.steer.select("doc", 0, np.array([0.9, 0.1]), ("a", "b")),
                               [0.5, 0.5])
    assert arm.steer.proceed("stop", 0, 0.01) is True
    assert arm.steer.proceed("stop", 1, 0.99) is False
    sel_only = Design(selection=[Flat()], stopping=["adaptive"]).arms()[0]
    assert sel_only.steer is not None and sel_only.steer.proceed("stop", 0, 0.3) is None
    path = tmp_path / "arm.zst"
    with al.record(path, seed=3), steering(arm.steer):
        al.select([0.9, 0.1], candidates=["a", "b"], name="doc")
        assert al.proceed(0.01, name="stop") is True
    sel = next(r for r in al.read(path).records if type(r) is Selection)
    cont = next(r for r in al.read(path).records if type(r) is Continuation)
    assert sel.steer == cont.steer == arm.name and cont.forced and not sel.forced
    np.testing.assert_allclose(np.frombuffer(sel.probs), [0.5, 0.5])


def test_replicate_zero_is_the_recorded_seed_and_others_are_stable_and_distinct() -> None:
    assert replicate_seed(12345, 0) == 12345
    seeds = [replicate_seed(12345, r) for r in range(1, 50)]
    assert len(set(seeds)) == 49 and all(0 <= s < 2**63 for s in seeds)
    assert replicate_seed(12345, 7) == replicate_seed(12345, 7) != replicate_seed(12346, 7)
    with pytest.raises(ValueError, match="a replicate must be >= 0; found -1"):
        replicate_seed(1, -1)


def test_bad_designs_say_what_was_expected() -> None:
    with pytest.raises(ValueError, match="the only string level is the agent's own policy "
                                         "'agent'"):
        Design(selection=["agent", "uniform"])
    with pytest.raises(TypeError, match="`stopping` must be a list of levels"):
        Design(stopping="adaptive")
    with pytest.raises(ValueError, match=r"`selection` has levels with the same label "
                                         r"\['uniform'\]"):
        Design(selection=[Flat(), Flat()])
    with pytest.raises(ValueError, match="`seeds` repeats a replicate"):
        Design(seeds=[0, 0])
    with pytest.raises(ValueError, match="`seeds` are replicate indices >= 0; found -2"):
        Design(seeds=[-2])
    with pytest.raises(ValueError, match="`seeds` needs at least one replicate"):
        Design(seeds=[])


def _level(factor: str, token: str) -> Any:
    if token in ("agent", "adaptive"):
        return token
    if token == "uniform":
        return Flat()
    if token.startswith("fixed:"):
        return Horizon(int(token.split(":")[1]))
    raise ValueError(f"unknown {factor} level {token!r}")


def test_the_command_line_form_parses_to_the_same_design() -> None:
    d = parse_design(["selection=agent,uniform", "stopping=adaptive,fixed:4"], seeds=3,
                     level=_level)
    direct = Design(selection=["agent", Flat()], stopping=["adaptive", Horizon(4)],
                    seeds=range(3))
    assert [a.name for a in d.arms()] == [a.name for a in direct.arms()]
    assert [a.hash for a in d.arms()] == [a.hash for a in direct.arms()]
    assert d.replicates == (0, 1, 2)
    only_sel = parse_design(["selection=agent,uniform"], level=_level)
    assert [a.name for a in only_sel.arms()] == ["selection=agent,stopping=adaptive",
                                                "selection=uniform,stopping=adaptive"]
    for bad, message in (
        (["selection"], "expected FACTOR=LEVEL,LEVEL"),
        (["ranking=agent"], "unknown factor 'ranking'; the factors are selection, stopping"),
        (["selection=agent", "selection=uniform"], "factor 'selection' is given twice"),
        (["selection=agent,,uniform"], "an empty level"),
        (["selection=agent,greedy"], "unknown selection level 'greedy'"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_design(bad, level=_level)
    with pytest.raises(ValueError, match="--seeds must be a positive number"):
        parse_design([], seeds=0, level=_level)


def test_the_default_level_parser_names_the_known_levels_of_the_factor() -> None:
    with pytest.raises(ValueError, match=r"unknown stopping level 'uniform'; the stopping "
                                         r"levels are adaptive, fixed:N, stop_at:N, never_stop"):
        parse_design(["stopping=adaptive,uniform"])
    assert parse_design(["selection=agent"]).arms()[0].steer is None
