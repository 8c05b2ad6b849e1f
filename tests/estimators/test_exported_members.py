"""Every estimator module's public names exist, are listed once, and import cheaply."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

MODULES = ["asv", "bounds", "certify", "cess", "distance", "reliability"]


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


def test_the_package_lists_its_modules() -> None:
    import agentlog.estimators as est

    assert sorted(est.__all__) == MODULES


@pytest.mark.parametrize("name", MODULES)
def test_importing_an_estimator_module_does_not_import_scipy_pot_or_statsmodels(
    name: str,
) -> None:
    code = (f"import sys, agentlog.estimators.{name};"
            "print([m for m in ('scipy', 'ot', 'statsmodels', 'matplotlib') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
