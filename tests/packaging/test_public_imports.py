"""The packages built on the core talk to it through public names only.

``estimators``, ``cli``, ``examples``, ``adapters`` and ``replay`` may import
``agentlog``, ``agentlog.records``, ``agentlog.context`` and the other public modules,
never a private ``agentlog._module`` nor a ``_name`` out of a public one: the core may
reorganise its private modules without breaking them. Nothing is allow-listed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["estimators", "cli", "examples", "adapters", "replay"]
# Dunder names are public by convention (``agentlog.__version__``).
_PRIVATE = re.compile(r"^_(?!_)")
_DYNAMIC = re.compile(r"""import_module\(\s*["']agentlog\._""")


def _private_imports(path: Path) -> list[str]:
    """``line: statement`` of every import of a private core name in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "agentlog" and any(_PRIVATE.match(p) for p in parts[1:]):
                    found.append(f"{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            parts = node.module.split(".")
            if parts[0] != "agentlog":
                continue
            if any(_PRIVATE.match(p) for p in parts[1:]):
                found.append(f"{node.lineno}: from {node.module} import ...")
            for alias in node.names:
                if _PRIVATE.match(alias.name):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if _DYNAMIC.search(line):
            found.append(f"{lineno}: {line.strip()}")
    return found


def _sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_the_packages_exist_and_hold_sources() -> None:
    sources = _sources()
    for pkg in PACKAGES:
        assert any(p.is_relative_to(ROOT / pkg) for p in sources), pkg


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_private_core_import(path: Path) -> None:
    found = _private_imports(path)
    assert not found, (
        f"{path.relative_to(ROOT)} imports private core names; use the public ones "
        f"(agentlog.*, agentlog.records.*): {found}")


def test_the_check_catches_each_form(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import agentlog._reader\n"
        "from agentlog._errors import TraceFormatError\n"
        "from agentlog import _encoding, __version__\n"
        "from agentlog.records import _hidden\n"
        "import importlib; importlib.import_module('agentlog._verify')\n"
        "from agentlog import read\n"
        "from agentlog.records import probs\n"
        "from ._plan import Plan\n",
        encoding="utf-8")
    assert [f.split(":")[0] for f in _private_imports(bad)] == ["1", "2", "3", "4", "5"]
