"""The packages layer: core <- adapters <- replay <- estimators <- examples <- cli.

A package imports only from the layers below it (``[tool.importlinter]`` in pyproject.toml,
checked here with import-linter), and through their public names: no module of one
package imports a private module (``_name``) of another.
"""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import agentlog

ROOT = Path(__file__).parents[2]
PACKAGES = ("adapters", "replay", "estimators", "examples", "cli")


def _config() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        config: dict[str, object] = tomllib.load(f)["tool"]["importlinter"]
    return config


def test_the_core_contract_names_every_core_module() -> None:
    (core,) = [c for c in _config()["contracts"] if c["type"] == "forbidden"]  # type: ignore[attr-defined]
    modules = sorted(f"agentlog.{m.name}" for m in pkgutil.iter_modules(agentlog.__path__)
                     if m.name not in PACKAGES)
    assert sorted(core["source_modules"]) == modules


@pytest.mark.timeout(300)
def test_the_import_linter_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def private_imports(source: str, package: str) -> list[str]:
    """The ``from agentlog...`` imports in ``source`` (a module of ``package``) that reach
    a private module of another package."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        parts = node.module.split(".")
        if parts[0] != "agentlog":
            continue
        target = parts[1] if len(parts) > 1 and parts[1] in PACKAGES else "agentlog"
        inner = parts[2:] if target != "agentlog" else parts[1:]
        if target != package and any(p.startswith("_") for p in inner):
            found.append(f"{node.lineno}: {node.module}")
    return found


def test_the_private_import_check_finds_one() -> None:
    source = "from agentlog._encoding import x\nfrom agentlog.adapters._cache import y\n"
    assert private_imports(source, "replay") == ["1: agentlog._encoding",
                                                 "2: agentlog.adapters._cache"]
    assert private_imports(source, "agentlog") == ["2: agentlog.adapters._cache"]
    assert private_imports("from agentlog.adapters import ModelCache\n", "replay") == []


def test_packages_import_each_other_through_public_names_only() -> None:
    found = []
    for package in ("agentlog", *PACKAGES):
        for path in sorted((ROOT / package).rglob("*.py")):
            if package == "agentlog" and path.relative_to(ROOT / package).parts[0] in PACKAGES:
                continue  # agentlog/<package> links to the package's own folder
            found += [f"{path.relative_to(ROOT)}:{hit}"
                      for hit in private_imports(path.read_text(), package)]
    assert found == []
