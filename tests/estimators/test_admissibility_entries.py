"""A pair refused for different sealed entries says which fields differ and how to seal
only what must be shared (a new user sealed every argument, settings included)."""

from __future__ import annotations

from pathlib import Path

import agentlog as al
from agentlog.estimators import certify

PLAN = """
name = "settings"
version = 1
estimand = "two temperatures of one agent on the same questions"
window = "answer"
target = "correct"
min_common_tasks = 2

[failure]
policy = "drop"

[readouts.correct]
tolerance = 0.05
better = "higher"

[conditions]
assumption_1 = true
backbone = "part-of-system"
shared_entry = true
"""


@al.window("answer")
def answer(question: str, temperature: float = 1.0) -> str:
    return question[: int(temperature * 3)]


def test_a_refusal_names_the_differing_fields_and_the_fix(tmp_path: Path) -> None:
    for system, temperature in (("cold", 0.3), ("hot", 1.0)):
        for t in range(3):
            with al.record(tmp_path / f"{system}.zst", system=system, task=f"t{t}",
                           seed=t, mode="a"):
                answer(f"question {t}", temperature=temperature)
                al.score("correct", 1.0)
    plan = certify.Plan.from_toml(PLAN.encode())
    adm = certify.admissibility(tmp_path, plan=plan)
    (pair,) = adm.pairs
    assert pair.status == "refused"
    assert ("the entry hashes differ on 3 of 3 common tasks (first: 't0'; `temperature`: "
            "0.3 vs 1.0)") in pair.reason
    assert "entry=lambda question, **_: question" in pair.reason


@al.window("plan")
def plan_steps(task: str, k: int, temperature: float = 1.0) -> str:
    return task[: k + int(temperature)]


def test_the_fix_names_the_arguments_the_entries_share(tmp_path: Path) -> None:
    """The suggested projection keeps the window's own shared arguments, by their names."""
    for system, temperature in (("cold", 0.3), ("hot", 1.0)):
        for t in range(3):
            with al.record(tmp_path / f"{system}.zst", system=system, task=f"t{t}",
                           seed=t, mode="a"):
                plan_steps(f"task {t}", 2, temperature=temperature)
                al.score("correct", 1.0)
    plan = certify.Plan.from_toml(PLAN.replace('window = "answer"', 'window = "plan"').encode())
    (pair,) = certify.admissibility(tmp_path, plan=plan).pairs
    assert pair.status == "refused", pair.reason
    assert "entry=lambda k, task, **_: (k, task))" in pair.reason  # the sealed order
