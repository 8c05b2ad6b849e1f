"""Packaging: one distribution, one `agentlog.*` namespace, lazy heavy imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUBPACKAGES = ["agentlog.replay", "agentlog.estimators", "agentlog.adapters", "agentlog.cli",
               "agentlog.examples.deep_research"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(ROOT)],
        check=True, capture_output=True, text=True,
    )
    (whl,) = out.glob("agentlog-*.whl")
    return whl


def test_the_wheel_holds_only_agentlog_paths(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    name, version = wheel.name.split("-")[:2]
    assert top == {"agentlog", f"{name}-{version}.dist-info"}, top
    for sub in ("replay", "estimators", "adapters", "cli", "examples/deep_research"):
        assert f"agentlog/{sub}/__init__.py" in names
    assert "agentlog/py.typed" in names
    # The demo certifies under the example plan, read with importlib.resources.
    assert "agentlog/examples/plans/deep_research.toml" in names
    entry_points = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "agentlog = agentlog.cli:main" in entry_points


def test_the_wheel_is_pure_python_with_no_compiled_or_c_files(wheel: Path) -> None:
    """One wheel for every platform: it installs, and computes the same, without a compiler."""
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    native = [n for n in names if n.endswith((".so", ".pyd", ".dylib", ".c", ".h"))]
    assert native == [], native
    metadata = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
    assert "Root-Is-Purelib: true" in metadata and "Tag: py3-none-any" in metadata


def test_a_plain_install_of_the_wheel_gives_the_agentlog_namespace(
    wheel: Path, tmp_path: Path
) -> None:
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(target), str(wheel)], check=True, capture_output=True)
    code = (
        "import importlib, json, sys;"
        f"mods={SUBPACKAGES!r};"
        "files={m: importlib.import_module(m).__file__ for m in mods};"
        "import agentlog, importlib.resources as r;"
        "plan=r.files('agentlog.examples').joinpath('plans','deep_research.toml').read_text();"
        "tops=[t for t in ('replay','cli','estimators','adapters','examples')"
        " if importlib.util.find_spec(t) is not None];"
        "print(json.dumps({'files': files, 'agentlog': agentlog.__file__, 'tops': tops,"
        " 'plan': plan}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={"PYTHONPATH": str(target), "PATH": ""},
                         cwd=tmp_path)
    info = json.loads(out.stdout)
    assert info["agentlog"].startswith(str(target))
    assert all(f.startswith(str(target)) for f in info["files"].values())
    assert info["tops"] == []
    assert info["plan"] == (ROOT / "examples" / "plans" / "deep_research.toml").read_text()


def test_the_development_install_gives_the_same_imports() -> None:
    code = (
        "import importlib, json;"
        f"mods={SUBPACKAGES!r};"
        "print(json.dumps({m: importlib.import_module(m).__file__ for m in mods}))"
    )
    # The install alone: a session's Ray cluster puts the checkout on PYTHONPATH for its
    # workers (tests/conftest.py), which would make the top-level folders importable.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd="/", env=env)
    files = json.loads(out.stdout)
    # through agentlog/replay -> ../replay (see the source-tree test below): the same file
    assert Path(files["agentlog.replay"]).resolve() == ROOT / "replay" / "__init__.py"
    assert Path(files["agentlog.cli"]).resolve() == ROOT / "cli" / "__init__.py"
    spec = subprocess.run([sys.executable, "-c", "import importlib.util as u;"
                           "print(u.find_spec('replay'), u.find_spec('cli'))"],
                          capture_output=True, text=True, check=True, cwd="/", env=env)
    assert spec.stdout.split() == ["None", "None"]


def test_importing_agentlog_does_not_import_heavy_dependencies() -> None:
    heavy = ["scipy", "ot", "openai", "anthropic", "vllm", "ray", "matplotlib", "torch",
             "pyarrow", "pandas", "opentelemetry.sdk"]
    code = (
        "import sys, json, agentlog, agentlog.replay, agentlog.estimators, agentlog.adapters;"
        f"print(json.dumps([m for m in {heavy!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout) == []


def test_the_console_script_runs() -> None:
    exe = Path(sys.executable).with_name("agentlog")
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=True)
    for command in ("demo", "inspect", "verify"):
        assert command in out.stdout


def _package_dirs() -> dict[str, str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    return {pkg: folder for pkg, folder in mapping.items() if pkg != "agentlog"}


def test_the_source_tree_mirrors_every_installed_subpackage() -> None:
    """agentlog/<sub> links to the sibling folder setuptools installs as agentlog.<sub>.

    It is what makes the source tree import from the repository root exactly as the
    wheel does, and what lets strict mypy (``files = ["agentlog"]``) check calls from
    ``cli/`` and ``examples/`` into ``agentlog.estimators``.
    """
    mapping = _package_dirs()
    assert mapping, "pyproject.toml maps no subpackage"
    for pkg, folder in mapping.items():
        link = ROOT / pkg.replace(".", "/")
        assert link.is_symlink(), f"{link} should be a symlink to ../{folder}"
        assert link.resolve() == (ROOT / folder).resolve(), (pkg, link.resolve())
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["tool"]["mypy"]["files"] == ["agentlog"]


def test_the_repository_root_imports_like_the_installed_package() -> None:
    """From a clone's root the source folder agentlog/ shadows any installed copy; it
    must still provide every agentlog.* subpackage (the README's snippets run there)."""
    mods = ["agentlog.estimators.cess", "agentlog.estimators.asv", *SUBPACKAGES]
    code = (
        "import importlib, json, sys;"
        # drop the development install's finder: only the source tree may answer
        "sys.meta_path[:] = [f for f in sys.meta_path"
        " if 'editable' not in getattr(f, '__module__', '')];"
        "from agentlog.estimators import cess;"
        "import agentlog.estimators as est;"
        f"mods={mods!r};"
        "files={m: importlib.import_module(m).__file__ for m in mods};"
        "print(json.dumps({'files': files, 'lazy': est.asv.__name__,"
        " 'from_trace': callable(cess.from_trace)}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    info = json.loads(out.stdout)
    assert info["lazy"] == "agentlog.estimators.asv" and info["from_trace"]
    for module, path in info["files"].items():
        assert Path(path).resolve().is_relative_to(ROOT), (module, path)


def test_the_console_script_prints_its_version() -> None:
    exe = Path(sys.executable).with_name("agentlog")
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True)
    import agentlog

    assert out.stdout == f"agentlog {agentlog.__version__}\n"
    helped = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=True)
    for key in ("[LBC]", "[DMC]", "[SSC]", "[ASV]"):  # every key the output cites, defined
        assert key in helped.stdout
