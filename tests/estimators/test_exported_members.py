"""Every estimator module's public names exist, are listed once, and import cheaply."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys

import pytest

MODULES = ["asv", "attribution", "bounds", "certify", "cess", "distance", "reliability", "rewards"]


@pytest.mark.parametrize("name", MODULES)
def test_all_names_exist_and_are_unique(name: str) -> None:
    module = importlib.import_module(f"agentlog.estimators.{name}")
    assert len(set(module.__all__)) == len(module.__all__)
    for member in module.__all__:
        assert getattr(module, member) is not None, member
    # everything public that the module defines is listed
    public = {n for n, v in vars(module).items() if not n.startswith("_")
              and getattr(v, "__module__", "").startswith("agentlog.estimators")}
    assert public <= set(module.__all__), public - set(module.__all__)


def test_the_package_lists_its_modules_the_interval_type_and_use_ray() -> None:
    import agentlog.estimators as est

    assert sorted(est.__all__) == sorted([*MODULES, "ConfidenceInterval", "use_ray"])
    assert est.ConfidenceInterval.__name__ == "ConfidenceInterval"
    assert est.use_ray.__name__ == "use_ray"


def _loaded_by(statement: str, heavy: tuple[str, ...]) -> list[str]:
    """Which of ``heavy`` a fresh interpreter has imported after ``statement``."""
    code = f"import sys; {statement}; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    loaded: list[str] = ast.literal_eval(out.stdout.strip())
    return loaded


def test_use_ray_loads_without_ray() -> None:
    """Ray is imported when a Ray runtime is asked for, not when the name is."""
    assert _loaded_by("from agentlog.estimators import use_ray", ("ray", "scipy")) == []


def test_the_interval_type_loads_without_numpy_scipy_or_pot() -> None:
    assert _loaded_by("from agentlog.estimators import ConfidenceInterval",
                      ("numpy", "scipy", "ot")) == []


@pytest.mark.parametrize("name", MODULES)
def test_importing_an_estimator_module_does_not_import_scipy_pot_or_statsmodels(
    name: str,
) -> None:
    assert _loaded_by(f"import agentlog.estimators.{name}",
                      ("scipy", "ot", "statsmodels", "matplotlib")) == []
