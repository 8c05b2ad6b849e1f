"""The certification plan: TOML in, validated, hashed ([LBC] Def. 1, §6.1)."""

from __future__ import annotations

import doctest
import hashlib
import math
from pathlib import Path

import pydantic
import pytest

from agentlog._encoding import encode
from agentlog.estimators import _plan, certify

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plans" / "deep_research.toml"

MINIMAL = """
estimand = "whole-agent contrast, shared input"
[readouts.f1]
tolerance = 0.05
"""


def test_the_module_example_runs() -> None:
    result = doctest.testmod(_plan, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_a_minimal_plan_takes_the_papers_defaults() -> None:
    plan = certify.Plan.from_toml(MINIMAL)
    assert plan.delta == plan.delta_prime == 0.05
    # CR2 with Bell–McCaffrey df and Cornish–Fisher skewness terms; "cr1" reproduces [LBC]
    assert plan.sampling == "cr2-bm-cf"
    assert plan.min_common_tasks == 10
    assert plan.family == "all"
    assert plan.failure.policy == "drop"
    assert plan.target == "composite" and plan.targets == ("composite", "f1")
    assert plan.conditions.backbone == "part-of-system" and plan.conditions.assumption_1
    assert plan.calibration.n_resamples == 2000


def test_the_committed_example_plan_loads_from_its_path() -> None:
    plan = certify.Plan.from_toml(EXAMPLE)
    assert plan.window == "retrieval" and plan.target == "abs_error"
    assert plan.readouts["abs_error"].better == "lower"
    assert plan.select == {"ranking": "agent"}
    assert certify.Plan.from_toml(str(EXAMPLE)) == plan
    assert certify.Plan.from_toml(EXAMPLE.read_bytes()) == plan


def test_the_hash_is_sha256_of_the_canonical_encoding() -> None:
    plan = certify.Plan.from_toml(MINIMAL)
    expected = hashlib.sha256(encode(plan.model_dump(mode="json"))).hexdigest()
    assert plan.hash() == expected and len(expected) == 64


def test_the_hash_ignores_layout_but_not_content() -> None:
    a = certify.Plan.from_toml('estimand = "e"\ndelta = 0.05\n[readouts.f1]\ntolerance = 0.1\n'
                               "[readouts.g]\ntolerance = 0.2\n")
    b = certify.Plan.from_toml('delta = 0.05\nestimand = "e"  # the estimand\n'
                               "[readouts.f1]\ntolerance   =   0.1\n[readouts.g]\n"
                               "tolerance = 0.2\n")
    assert a.hash() == b.hash()
    c = certify.Plan.from_toml('estimand = "e"\n[readouts.f1]\ntolerance = 0.1\n'
                               "[readouts.g]\ntolerance = 0.21\n")
    assert c.hash() != a.hash()


def test_a_readout_without_a_tolerance_is_a_clear_error() -> None:
    with pytest.raises(pydantic.ValidationError,
                       match=r"names readout\(s\) `g` without a `tolerance`"):
        certify.Plan.from_toml(MINIMAL + "[readouts.g]\naxis = 'quality'\n")


def test_a_plan_without_readouts_or_estimand_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match="estimand"):
        certify.Plan.from_toml("[readouts.f1]\ntolerance = 0.1\n")
    with pytest.raises(pydantic.ValidationError, match="`estimand` is empty"):
        certify.Plan.from_toml('estimand = "  "\n[readouts.f1]\ntolerance = 0.1\n')
    with pytest.raises(pydantic.ValidationError, match="`readouts` is empty"):
        certify.Plan.from_toml('estimand = "e"\nreadouts = {}\n')


@pytest.mark.parametrize(("extra", "message"), [
    ('target = "nope"', "`target` must be 'composite' or a readout"),
    ("delta = 1.5", "delta"),
    ("delta_prime = 0", "delta_prime"),
    ("min_common_tasks = 1", "min_common_tasks"),
    ('family = [["a", "a"]]', "pairs a system with itself"),
    ('family = [["a", "b"], ["b", "a"]]', "lists the pair"),
    ("surprise = 1", "surprise"),
    ('[failure]\npolicy = "score"', "no ⊥ value is declared for `f1`"),
])
def test_malformed_plans_name_what_is_wrong(extra: str, message: str) -> None:
    top = extra if not extra.startswith("[") else ""
    table = extra if extra.startswith("[") else ""
    text = f'estimand = "e"\n{top}\n[readouts.f1]\ntolerance = 0.05\n{table}\n'
    with pytest.raises(pydantic.ValidationError, match=message):
        certify.Plan.from_toml(text)


def test_a_tolerance_must_be_positive() -> None:
    with pytest.raises(pydantic.ValidationError, match="tolerance"):
        certify.Plan.from_toml('estimand = "e"\n[readouts.f1]\ntolerance = 0\n')


def test_a_missing_file_and_bad_toml_are_reported() -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        certify.Plan.from_toml("no/such/plan.toml")
    with pytest.raises(ValueError, match="not valid TOML"):
        certify.Plan.from_toml("estimand = \n")


def test_the_composite_weighs_axes_equally_and_readouts_equally_within_one() -> None:
    plan = certify.Plan.from_toml(
        'estimand = "e"\n'
        "[readouts.a]\ntolerance = 0.1\naxis = 'x'\n"
        "[readouts.b]\ntolerance = 0.2\naxis = 'x'\n"
        "[readouts.c]\ntolerance = 0.4\naxis = 'y'\n"
        "[readouts.d]\ntolerance = 0.3\n")  # its own axis
    w = plan.composite_weights()
    assert w == pytest.approx({"a": 1 / 6, "b": 1 / 6, "c": 1 / 3, "d": 1 / 3})
    assert plan.tolerance("composite") == pytest.approx(0.1 / 6 + 0.2 / 6 + 0.4 / 3 + 0.3 / 3)
    assert plan.tolerance("c") == 0.4


def test_constants_resolve_window_system_then_system_then_window_then_default() -> None:
    plan = certify.Plan.from_toml(MINIMAL + """
[constants.default]
L_M = 1.0
xi = 0.1
[constants.systems.a]
L_M = 0.8
[constants.windows.w.default]
xi = 0.2
eps_cont = 0.05
[constants.windows.w.systems.a]
eps_cont = 0.01
[constants.windows.w]
L_C = 0.5
""")
    c = plan.constants
    assert c.for_system("a", "w") == {"L_M": 0.8, "xi": 0.2, "eps_cont": 0.01, "eps_in": None}
    assert c.for_system("b", "w") == {"L_M": 1.0, "xi": 0.2, "eps_cont": 0.05, "eps_in": None}
    assert c.for_system("a", None) == {"L_M": 0.8, "xi": 0.1, "eps_cont": 0.0, "eps_in": None}
    assert c.channel_constant("w") == 0.5 and c.channel_constant("v") == 1.0


def test_an_amplifier_may_be_declared_infinite_but_never_nan() -> None:
    plan = certify.Plan.from_toml(MINIMAL + "[constants.systems.a]\nL_M = inf\n")
    assert math.isinf(plan.constants.for_system("a", None)["L_M"] or 0.0)
    with pytest.raises(pydantic.ValidationError, match="L_M"):
        certify.Plan.from_toml(MINIMAL + "[constants.systems.a]\nL_M = nan\n")


def test_an_explicit_family_is_checked_against_the_systems() -> None:
    plan = certify.Plan.from_toml('estimand = "e"\nfamily = [["a", "b"], ["c", "a"]]\n'
                                  "[readouts.f1]\ntolerance = 0.1\n")
    assert plan.family_pairs(["a", "b", "c"]) == [("a", "b"), ("c", "a")]
    with pytest.raises(ValueError, match="`family` names system 'c', which has no scores"):
        plan.family_pairs(["a", "b"])


def test_a_plan_is_frozen() -> None:
    plan = certify.Plan.from_toml(MINIMAL)
    with pytest.raises(pydantic.ValidationError):
        plan.delta = 0.1  # type: ignore[misc]


def test_select_matches_run_meta() -> None:
    plan = certify.Plan.from_toml('estimand = "e"\nselect = {ranking = "agent"}\n'
                                  "[readouts.f1]\ntolerance = 0.1\n")
    assert plan.matches({"ranking": "agent", "cluster": "q1"})
    assert not plan.matches({"ranking": "reversed"}) and not plan.matches({})
