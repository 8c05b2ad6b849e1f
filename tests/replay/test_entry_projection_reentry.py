"""A window sealed with an ``entry=`` projection re-enters whatever way its caller passed
the arguments, and a projection that cannot take them says how to write it.

A new user's report: a projection ``lambda question, a, b, **_: question`` worked while
recording (the settings came by name) and failed in every replay unit, which passed all
six arguments by position.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import agentlog as al
from agentlog.replay import Design, intervene, reenter_arguments

APP_HERE = __name__


@al.window("answer", entry=lambda question, a, b, **_: question)
def answer(question: str, a: int, b: int, temperature: float = 1.0, top_k: int = 3,
           seed: int = 0) -> str:
    return ("x", "y")[al.select([0.5, 0.5], candidates=["x", "y"], name="pick")]


@al.window("strict", entry=lambda q: q)
def strict(question: str, a: int) -> int:
    return a


def test_a_projection_written_for_the_recorded_call_takes_the_replayed_one(
        tmp_path: Path) -> None:
    with al.record(tmp_path / "r.zst", seed=1, task="t", mode="w"):
        answer("q?", 1, 2, temperature=0.3, top_k=5, seed=2)
    (view,) = al.read(tmp_path / "r.zst").windows("answer")
    args, kwargs = reenter_arguments(view)
    assert args == ("q?", 1, 2) and kwargs == {"temperature": 0.3, "top_k": 5, "seed": 2}
    res = intervene(tmp_path / "r.zst", window="answer", arms=Design(), out=tmp_path / "out",
                    app=APP_HERE, mode="frozen")
    assert res.summary.done == 1 and res.summary.failures == []
    (arm,) = (tmp_path / "out" / "arms").glob("*.zst")
    (again,) = al.read(arm).windows("answer")
    assert again.entry_hash == view.entry_hash and again.exit_hash == view.exit_hash


def test_a_projection_that_cannot_take_the_arguments_says_how_to_write_it(
        tmp_path: Path) -> None:
    with al.record(tmp_path / "s.zst", seed=1, mode="w"), \
            pytest.raises(TypeError, match=r"window 'strict': its entry= projection cannot "
                                           r"take the call's arguments .*entry=lambda "
                                           r"question, \*\*_"):
        strict("q?", 1)


def test_an_error_inside_a_projection_is_the_users_own(tmp_path: Path) -> None:
    @al.window("broken", entry=lambda x: x.nope)
    def broken(x: int) -> int:
        return x

    with al.record(tmp_path / "b.zst", seed=1, mode="w"), \
            pytest.raises(AttributeError, match="nope"):
        broken(1)
