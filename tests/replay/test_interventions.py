"""Interventions: closed forms of each steer, composition, registration and arm hashes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

import agentlog as al
from agentlog.reentry import steering
from agentlog.replay import RegistryCollisionWarning, resume_streams
from agentlog.replay.interventions import (
    STEERS,
    Compose,
    FixedHorizon,
    NeverStop,
    Permute,
    Reverse,
    Steer,
    StopAt,
    Temperature,
    Uniform,
    compose,
    identity,
)

P = np.array([0.5, 0.25, 0.15, 0.1])
IDS = ["a", "b", "c", "d"]


def steered_selection(tmp_path: Path, steer: Steer, probs: NDArray[np.float64] = P,
                      name: str = "doc") -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(the vector the draw used, the agent's own) of one select under ``steer``."""
    path = tmp_path / "s.zst"
    with al.record(path, seed=4, mode="w"), steering(steer):
        al.select(probs, candidates=IDS, name=name)
    trace = al.read(path)
    (sel,) = trace.selections()
    policy = trace.policy_probs(sel)
    assert sel.steer == steer.name and not sel.forced
    assert policy is not None
    return trace.probs(sel), policy


@pytest.mark.parametrize(("steer", "expected"), [
    (Uniform(), np.full(4, 0.25)),
    (Reverse(), P[::-1]),
    (Permute([2, 0, 3, 1]), np.array([0.15, 0.5, 0.1, 0.25])),
    (Temperature(0.5), P**2 / (P**2).sum()),
    (Temperature(2.0), np.sqrt(P) / np.sqrt(P).sum()),
])
def test_each_selection_steer_replaces_the_vector_by_its_closed_form(
        tmp_path: Path, steer: Steer, expected: NDArray[np.float64]) -> None:
    used, agent = steered_selection(tmp_path, steer)
    np.testing.assert_allclose(used, expected, rtol=1e-12)
    np.testing.assert_array_equal(agent, P)


def test_temperature_keeps_zeros_at_zero(tmp_path: Path) -> None:
    used, _ = steered_selection(tmp_path, Temperature(3.0), np.array([0.6, 0.4, 0.0, 0.0]))
    assert used[2] == used[3] == 0.0 and used.sum() == pytest.approx(1.0)


def test_a_stream_restricted_steer_leaves_other_streams_alone(tmp_path: Path) -> None:
    path = tmp_path / "s.zst"
    with al.record(path, seed=4), steering(Uniform(stream="doc")):
        al.select(P, candidates=IDS, name="doc")
        al.select(P, candidates=IDS, name="query")
    doc, query = al.read(path).selections()
    assert doc.steer == "uniform" and query.steer is None


@pytest.mark.parametrize(("make", "match"), [
    (lambda: Permute([0, 0, 1]), r"`order` must be a permutation of 0\.\.2; found \[0, 0, 1\]"),
    (lambda: Temperature(0), r"`t` of Temperature must be a finite number > 0; found 0\.0"),
    (lambda: Temperature(float("inf")), r"finite number > 0; found inf"),
    (lambda: FixedHorizon(0), r"`n` of FixedHorizon must be an int >= 1 \(rounds\); found 0"),
    (lambda: StopAt(True), r"`n` of StopAt must be an int >= 1"),
    (lambda: Uniform(stream=""), r"`stream` must be a non-empty str or None; found ''"),
])
def test_bad_parameters_are_refused_with_what_was_expected(make: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make()


def test_a_permutation_of_another_length_names_the_select(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"Permute of 3 positions applied to select 'doc' step "
                                         r"0 with 4 candidates"):
        steered_selection(tmp_path, Permute([2, 1, 0]))


def rounds_under(steer: Steer | None, p_continue: float, *, path: Path,
                 budget: int = 10) -> int:
    """Rounds of the usual loop: open a round, then ask whether to go on."""
    rounds = 0
    with al.record(path, seed=2, mode="w"), steering(steer):
        for t in range(budget):
            if t and not al.proceed(p_continue, name="stop"):
                break
            rounds += 1
    return rounds


@pytest.mark.parametrize("p_continue", [0.0, 0.3, 1.0])
def test_fixed_horizon_gives_exactly_n_rounds_whatever_the_agent_wants(
        tmp_path: Path, p_continue: float) -> None:
    for n in (1, 2, 5):
        assert rounds_under(FixedHorizon(n), p_continue, path=tmp_path / "f.zst") == n
    conts = al.read(tmp_path / "f.zst").continuations("stop")
    # probabilities, not forced bools: the records stay weightable
    assert [c.p for c in conts] == [1.0, 1.0, 1.0, 1.0, 0.0]
    assert all(c.policy_p == p_continue and not c.forced for c in conts)


def test_stop_at_caps_the_agent_and_never_stop_continues(tmp_path: Path) -> None:
    path = tmp_path / "s.zst"
    assert rounds_under(StopAt(3), 1.0, path=path) == 3
    assert rounds_under(StopAt(3), 0.0, path=path) == 1  # the agent's own stop stands
    assert rounds_under(NeverStop(), 0.0, budget=7, path=path) == 7
    assert rounds_under(None, 0.0, path=path) == 1


def test_the_horizon_counts_from_where_the_reentry_started_the_stream(tmp_path: Path) -> None:
    with al.record(tmp_path / "r.zst", seed=2), resume_streams({"stop": 6}), \
            steering(FixedHorizon(3)):
        rounds = 1
        while al.proceed(0.0, name="stop"):
            rounds += 1
    assert rounds == 3
    assert [c.step for c in al.read(tmp_path / "r.zst").continuations()] == [6, 7, 8]


def test_steers_compose_in_order_and_record_the_composite_name(tmp_path: Path) -> None:
    arm = Uniform() + FixedHorizon(2)
    assert isinstance(arm, Compose) and arm.name == "uniform+fixed_horizon"
    assert identity(arm) == identity(compose(Uniform(), FixedHorizon(2)))
    nested = compose(arm, Temperature(2.0))
    assert [s.name for s in nested.steers] == ["uniform", "fixed_horizon", "temperature"]
    # Reverse then Permute: the permutation sees the reversed vector
    used, _ = steered_selection(tmp_path, Reverse() + Permute([1, 0, 2, 3]))
    np.testing.assert_array_equal(used, P[::-1][[1, 0, 2, 3]])
    path = tmp_path / "c.zst"
    assert rounds_under(arm, 0.0, path=path) == 2
    assert {c.steer for c in al.read(path).continuations()} == {"uniform+fixed_horizon"}
    with pytest.raises(TypeError, match=r"compose\(\) takes Steer instances; found int"):
        compose(Uniform(), 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"compose\(\) needs at least one steer"):
        compose()


class Greedy(Steer):
    """A user intervention: all mass on the agent's favourite (a probability, not a force)."""

    name = "test_greedy"

    def __init__(self, floor: float = 0.0) -> None:
        self.floor = floor

    def select(self, stream: str, step: int, probs: NDArray[np.float64],
               ids: tuple[Any, ...]) -> NDArray[np.float64]:
        q = np.full(len(probs), self.floor)
        q[int(np.argmax(probs))] += 1.0
        out: NDArray[np.float64] = q / q.sum()
        return out


def test_a_user_steer_registers_and_its_parameters_are_hashed_into_the_arm(
        tmp_path: Path) -> None:
    entry = STEERS.get("test_greedy")
    assert entry.obj is Greedy and entry.id == f"{__name__}:Greedy"
    a, b, c = identity(Greedy()), identity(Greedy(0.0)), identity(Greedy(0.1))
    assert a == b and a["hash"] != c["hash"] and len(a["hash"]) == 64
    assert a["params"] == {"floor": 0.0} and a["id"] == entry.id
    assert identity(Uniform())["hash"] != identity(Uniform(stream="doc"))["hash"]
    assert identity(FixedHorizon(4))["hash"] != identity(StopAt(4))["hash"]
    used, _ = steered_selection(tmp_path, Greedy(0.1))
    np.testing.assert_allclose(used, np.array([1.1, 0.1, 0.1, 0.1]) / 1.4)
    with al.record(tmp_path / "g.zst", seed=1), steering(Greedy() + FixedHorizon(1)):
        al.select(P, candidates=IDS, name="doc")
    assert al.read(tmp_path / "g.zst").selections()[0].steer == "test_greedy+fixed_horizon"


def test_a_second_steer_class_under_a_taken_name_warns_and_wins() -> None:
    with pytest.warns(RegistryCollisionWarning, match=r"test_greedy"):
        class Other(Steer):
            name = "test_greedy"

    assert STEERS.get("test_greedy").obj is Other
    with pytest.warns(RegistryCollisionWarning):  # put the original back for other tests
        STEERS.register("test_greedy", Greedy)


def test_a_core_steer_that_is_not_registered_has_no_arm_identity() -> None:
    from agentlog.reentry import Steer as CoreSteer

    with pytest.raises(TypeError, match=r"is not registered as an intervention: derive it "
                                        r"from agentlog\.replay\.interventions\.Steer"):
        identity(CoreSteer())


@pytest.mark.parametrize("steer", [Uniform(), Uniform(stream="doc"), Reverse(),
                                   Permute([1, 0, 2]), Temperature(0.7), FixedHorizon(3),
                                   StopAt(2, stream="stop"), NeverStop(), Greedy(0.2)])
def test_a_steer_is_rebuilt_from_its_registered_class_and_parameters(steer: Steer) -> None:
    ident = identity(steer)
    cls = STEERS.get(ident["id"]).obj
    assert identity(cls(**ident["params"])) == ident
