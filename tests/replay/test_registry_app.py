"""resolve_app: the app module comes from the user (flag, pyproject, env), never the trace."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import agentlog as al
from agentlog.replay import AppImportError, AppNotGivenError, resolve_app
from agentlog.replay.lowlevel import APP_ENV, app_from_pyproject, recorded_modules


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No AGENTLOG_APP from the environment, sys.path and sys.modules restored after."""
    monkeypatch.delenv(APP_ENV, raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith("agentlog_app_"):
            del sys.modules[name]


def _module(folder: Path, name: str, body: str = "VALUE = 1\n") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(body)


def test_the_flag_names_the_module(tmp_path: Path) -> None:
    _module(tmp_path, "agentlog_app_flag")
    module = resolve_app("agentlog_app_flag", start=tmp_path)
    assert module.__name__ == "agentlog_app_flag" and module.VALUE == 1


def test_the_flag_wins_over_pyproject_and_env(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    _module(tmp_path, "agentlog_app_a")
    _module(tmp_path, "agentlog_app_b")
    (tmp_path / "pyproject.toml").write_text('[tool.agentlog]\napp = "agentlog_app_b"\n')
    monkeypatch.setenv(APP_ENV, "agentlog_app_b")
    assert resolve_app("agentlog_app_a", start=tmp_path).__name__ == "agentlog_app_a"


def test_the_nearest_pyproject_names_the_module_when_no_flag(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _module(tmp_path, "agentlog_app_pp")
    _module(tmp_path, "agentlog_app_env")
    (tmp_path / "pyproject.toml").write_text('[tool.agentlog]\napp = "agentlog_app_pp"\n')
    nested = tmp_path / "src" / "deeper"
    nested.mkdir(parents=True)
    monkeypatch.setenv(APP_ENV, "agentlog_app_env")
    assert app_from_pyproject(nested) == ("agentlog_app_pp", tmp_path / "pyproject.toml")
    monkeypatch.chdir(nested)
    sys.path.append(str(tmp_path))
    assert resolve_app(None).__name__ == "agentlog_app_pp"


def test_a_nearer_pyproject_without_the_key_stops_the_search(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.agentlog]\napp = "outer"\n')
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert app_from_pyproject(inner) is None


def test_the_environment_names_the_module_last(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    _module(tmp_path, "agentlog_app_env2")
    monkeypatch.setenv(APP_ENV, "agentlog_app_env2")
    assert resolve_app(None, start=tmp_path).__name__ == "agentlog_app_env2"


def test_an_invalid_pyproject_app_is_refused_with_the_file(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.agentlog]\napp = 3\n')
    with pytest.raises(ValueError, match=r"pyproject.toml: \[tool.agentlog\] app must be a "
                                         r"module name such as \"pkg.mod\"; found 3"):
        resolve_app(None, start=tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.agentlog\n')
    with pytest.raises(ValueError, match=r"pyproject.toml: not valid TOML .*pass --app"):
        resolve_app(None, start=tmp_path)


def _trace(path: Path) -> Path:
    @al.window("agentlog-app-test-step")
    def step(x: int) -> int:
        return x + 1

    with al.record(path, seed=1):
        step(1)
    return path


def test_no_app_given_names_the_module_the_windows_were_recorded_from(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "t.zst")
    with pytest.raises(AppNotGivenError,
                       match=r"no app module given: the windows of the trace were recorded "
                             r"from tests\.replay\.test_registry_app; a trace never decides "
                             r"what code runs, so name the module that registers the channels "
                             r"and scorers: --app tests\.replay\.test_registry_app "
                             r"\(\[tool\.agentlog\] app = \"\.\.\.\" in pyproject\.toml or "
                             r"\$AGENTLOG_APP also work\)") as info:
        resolve_app(None, traces=[trace], start=tmp_path)
    assert isinstance(info.value, ValueError)
    assert info.value.recorded == ("tests.replay.test_registry_app",)
    assert recorded_modules([trace]) == (["tests.replay.test_registry_app"],
                                         ["agentlog-app-test-step"])


def test_no_app_given_for_an_old_trace_names_its_windows_and_the_flag(tmp_path: Path) -> None:
    golden = Path(__file__).parents[1] / "fixtures" / "traces" / "v1" / "golden.zst"
    with pytest.raises(AppNotGivenError,
                       match=r"no app module given: the trace does not store which module its "
                             r"windows \(retrieval, synthesis\) were recorded from; pass the "
                             r"module that registers the channels and scorers with --app "
                             r"pkg\.mod"):
        resolve_app(None, traces=[golden], start=tmp_path)


def test_no_app_given_and_no_trace_still_says_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(AppNotGivenError, match=r"^no app module given: pass the module that "
                                               r"registers the channels and scorers with "
                                               r"--app pkg\.mod"):
        resolve_app("  ", start=tmp_path)


def test_a_module_that_does_not_exist_is_an_app_import_error(tmp_path: Path) -> None:
    with pytest.raises(AppImportError,
                       match=r"module 'agentlog_no_such_app' \(from --app\) is not importable: "
                             r"No module named 'agentlog_no_such_app'\. Check the name") as info:
        resolve_app("agentlog_no_such_app", start=tmp_path)
    assert isinstance(info.value, ImportError)
    assert (info.value.module, info.value.source) == ("agentlog_no_such_app", "--app")


def test_a_module_missing_a_dependency_names_the_dependency(tmp_path: Path) -> None:
    _module(tmp_path, "agentlog_app_dep", "import agentlog_missing_dependency_xyz\n")
    with pytest.raises(AppImportError,
                       match=r"module 'agentlog_app_dep' \(from --app\) failed to import: it "
                             r"needs 'agentlog_missing_dependency_xyz', which is not installed"):
        resolve_app("agentlog_app_dep", start=tmp_path)


def test_a_module_that_raises_while_importing_is_an_app_import_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _module(tmp_path, "agentlog_app_boom", "raise RuntimeError('boom at import')\n")
    monkeypatch.setenv(APP_ENV, "agentlog_app_boom")
    with pytest.raises(AppImportError,
                       match=r"module 'agentlog_app_boom' \(from \$AGENTLOG_APP\) raised "
                             r"RuntimeError while importing: boom at import"):
        resolve_app(None, start=tmp_path)


def test_the_bundled_example_resolves() -> None:
    assert resolve_app("agentlog.examples.deep_research").__name__ == \
        "agentlog.examples.deep_research"
