"""``Design``: factors × levels × replicate seeds → arms with names, hashes and paired seeds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agentlog as al
from agentlog.records import Continuation, Selection
from agentlog.reentry import Steer as CoreSteer
from agentlog.reentry import steering
from agentlog.replay import Design, parse_design, replicate_seed
from agentlog.replay.interventions import (
    FixedHorizon,
    NeverStop,
    Reverse,
    StopAt,
    Temperature,
    Uniform,
)


class Flat(CoreSteer):
    """A steer that is not a registered intervention: identified by class and attributes."""

    name = "flat"

    def __init__(self, label: str = "flat") -> None:
        self.label = label

    def select(self, stream: str, step: int, probs: Any, ids: Any) -> Any:
        return np.full(len(probs), 1.0 / len(probs))


def test_a_2x2_design_expands_to_four_named_arms_and_paired_replicates() -> None:
    d = Design(selection=["agent", Uniform()], stopping=["adaptive", FixedHorizon(4)],
               seeds=range(3))
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
    again = Design(selection=["agent", Uniform()], stopping=["adaptive", FixedHorizon(4)]).arms()
    assert [a.hash for a in again] == [a.hash for a in arms]
    other = Design(selection=["agent", Uniform()], stopping=["adaptive", FixedHorizon(5)]).arms()
    assert other[0].hash == arms[0].hash and other[1].hash != arms[1].hash


def test_an_arms_steer_applies_each_factor_only_through_its_own_hook(tmp_path: Path) -> None:
    arm = Design(selection=[Uniform()], stopping=[FixedHorizon(2)]).arms()[0]
    assert arm.steer is not None
    np.testing.assert_allclose(arm.steer.select("doc", 0, np.array([0.9, 0.1]), ("a", "b")),
                               [0.5, 0.5])
    assert arm.steer.proceed("stop", 0, 0.01) == 1.0  # FixedHorizon(2): go on, then stop
    assert arm.steer.proceed("stop", 1, 0.99) == 0.0
    sel_only = Design(selection=[Uniform()], stopping=["adaptive"]).arms()[0]
    assert sel_only.steer is not None and sel_only.steer.proceed("stop", 0, 0.3) is None
    path = tmp_path / "arm.zst"
    with al.record(path, seed=3), steering(arm.steer):
        al.select([0.9, 0.1], candidates=["a", "b"], name="doc")
        assert al.proceed(0.01, name="stop") is True
    sel = next(r for r in al.read(path).records if type(r) is Selection)
    cont = next(r for r in al.read(path).records if type(r) is Continuation)
    assert sel.steer == cont.steer == arm.name and not cont.forced and not sel.forced
    assert (cont.p, cont.policy_p) == (1.0, 0.01)
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
        Design(selection=[Uniform(), Uniform()])
    with pytest.raises(ValueError, match="`seeds` repeats a replicate"):
        Design(seeds=[0, 0])
    with pytest.raises(ValueError, match="`seeds` are replicate indices >= 0; found -2"):
        Design(seeds=[-2])
    with pytest.raises(ValueError, match="`seeds` needs at least one replicate"):
        Design(seeds=[])


def _level(factor: str, token: str) -> Any:
    return Flat(token) if token.startswith("flat") else token


def test_the_command_line_form_parses_to_the_same_design() -> None:
    d = parse_design(["selection=agent,uniform", "stopping=adaptive,fixed:4"], seeds=3)
    direct = Design(selection=["agent", Uniform()], stopping=["adaptive", FixedHorizon(4)],
                    seeds=range(3))
    assert [a.name for a in d.arms()] == [a.name for a in direct.arms()] == [
        "selection=agent,stopping=adaptive", "selection=agent,stopping=fixed:4",
        "selection=uniform,stopping=adaptive", "selection=uniform,stopping=fixed:4"]
    assert [a.hash for a in d.arms()] == [a.hash for a in direct.arms()]
    assert d.replicates == (0, 1, 2)
    every = parse_design(["selection=agent,uniform,reverse,temperature:0.5",
                          "stopping=adaptive,fixed:3,stop_at:2,never_stop"])
    levels = {f: [dict(a.factors)[f] for a in every.arms()] for f in ("selection", "stopping")}
    assert sorted(set(levels["selection"])) == ["agent", "reverse", "temperature:0.5",
                                                "uniform"]
    assert sorted(set(levels["stopping"])) == ["adaptive", "fixed:3", "never_stop", "stop_at:2"]
    kinds = {type(v) for v in (*every.selection, *every.stopping) if not isinstance(v, str)}
    assert kinds == {Uniform, Reverse, Temperature, FixedHorizon, StopAt, NeverStop}
    assert next(v for v in every.selection if isinstance(v, Temperature)).t == 0.5
    only_sel = parse_design(["selection=agent,uniform"])
    assert [a.name for a in only_sel.arms()] == ["selection=agent,stopping=adaptive",
                                                "selection=uniform,stopping=adaptive"]
    for bad, message in (
        (["selection"], "expected FACTOR=LEVEL,LEVEL"),
        (["ranking=agent"], "unknown factor 'ranking'; the factors are selection, stopping"),
        (["selection=agent", "selection=uniform"], "factor 'selection' is given twice"),
        (["selection=agent,,uniform"], "an empty level"),
        (["selection=agent,greedy"], r"unknown selection level 'greedy'; the selection "
                                     r"levels are agent, uniform, reverse, temperature:T"),
        (["stopping=adaptive,uniform"], r"unknown stopping level 'uniform'; the stopping "
                                        r"levels are adaptive, fixed:N, stop_at:N, never_stop"),
        (["stopping=fixed:x"], r"stopping level 'fixed:x': expected fixed:N with a whole "
                               "number after the colon"),
        (["selection=uniform:3"], "selection level 'uniform:3': uniform takes no argument"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_design(bad)
    with pytest.raises(ValueError, match="--seeds must be a positive number"):
        parse_design([], seeds=0)


def test_a_custom_level_parser_and_an_unregistered_steer() -> None:
    d = parse_design(["selection=agent,flat"], level=_level)
    (own, flat) = d.arms()
    assert flat.name == "selection=flat,stopping=adaptive" and own.steer is None
    other = parse_design(["selection=agent,flat2"], level=_level).arms()[1]
    assert other.hash != flat.hash  # the steer's attributes are in the hash
