"""What every command shows on bad input: one ``error:`` line and exit 2, never a traceback
or Python's ``file.py:LINE: Category`` warning form (issue 28).

The commands are listed from the typer app itself, so a command added later is covered
(and fails here until ``EXTRA`` says which options it needs to reach its input).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import typer

import agentlog as al
import agentlog.examples
from agentlog.cli import _app, app
from tests.cli._cli import invoke
from tests.cli.test_estimate_cess import write_tables

PLAN = Path(agentlog.examples.__file__).parent / "plans" / "deep_research.toml"
DEMO_APP = "agentlog.examples.deep_research"

# The options each command needs besides its traces to read them ({tmp}: a scratch folder).
EXTRA: dict[str, tuple[str, ...]] = {
    "certify": ("--plan", str(PLAN)),
    "counterfactual": ("--select", "doc", "--steer", "uniform"),
    "estimate asv": ("--channels", "direct,quote"),
    "estimate cess": ("--outcomes", "{tmp}/outcomes.csv", "--predictions",
                      "{tmp}/predictions.csv"),
    "estimate effects": (),
    "estimate attribution": (),
    "estimate reliability": (),
    "export": ("--format", "otlp-json", "--out", "{tmp}/spans.json"),
    "import inspect": ("--out", "{tmp}/imported"),
    "import otlp": ("--out", "{tmp}/imported"),
    "inspect": (),
    "replay": ("--channel", "direct", "--window", "retrieval", "--app", DEMO_APP, "--out",
               "{tmp}/out.zst"),
    "rewards": ("--window", "retrieval", "--readout", "margin", "--out", "{tmp}/r.jsonl"),
    "validity-card": (),
    "verify": (),
}
NO_TRACES = {"demo"}  # takes no trace: its bad input is an --out that is a file
SOURCE_LINE = re.compile(r"\.py:\d+")


def every_command() -> list[str]:
    """``agentlog``'s commands as typed (``"estimate asv"``), from the click group."""
    root = typer.main.get_command(app)
    ctx = root.make_context("agentlog", [], resilient_parsing=True)
    out = []
    for name in root.list_commands(ctx):  # type: ignore[attr-defined]
        command = root.get_command(ctx, name)  # type: ignore[attr-defined]
        if hasattr(command, "list_commands"):
            sub = command.make_context(name, [], parent=ctx, resilient_parsing=True)
            out.extend(f"{name} {n}" for n in command.list_commands(sub))
        else:
            out.append(name)
    return out


def test_every_command_is_covered_by_this_file() -> None:
    assert set(every_command()) == set(EXTRA) | NO_TRACES


def assert_clean(result: Any) -> None:
    """No traceback, no source line, no exception escaped the command."""
    assert "Traceback" not in result.output, result.output
    assert not SOURCE_LINE.search(result.output), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        repr(result.exception))


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bad")
    (root / "junk.zst").write_text("this is not a trace\n")
    (root / "empty.zst").write_bytes(b"")
    (root / "folder").mkdir()
    return {"missing": root / "missing.zst", "not a trace": root / "junk.zst",
            "folder": root / "folder", "empty": root / "empty.zst"}


@pytest.mark.parametrize("kind", ["missing", "not a trace", "folder", "empty"])
@pytest.mark.parametrize("command", sorted(EXTRA))
def test_a_command_given_bad_input_prints_one_error_and_no_traceback(
        command: str, kind: str, bad: dict[str, Path], tmp_path: Path) -> None:
    write_tables(tmp_path)
    extra = [a.format(tmp=tmp_path) for a in EXTRA[command]]
    result = invoke(*command.split(), bad[kind], *extra, columns=1000)
    assert_clean(result)
    if kind == "empty":  # a file that ends before its header reads as an empty trace
        assert result.exit_code in (0, 1, 2), result.output
    else:
        assert result.exit_code == 2, result.output
        assert "error" in result.output or "unreadable" in result.output, result.output


def test_demo_given_a_file_as_its_folder_prints_one_error(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("mine")
    result = invoke("demo", "--out", tmp_path / "taken")
    assert_clean(result)
    assert result.exit_code == 2 and "exists and is not a folder" in result.output
    assert (tmp_path / "taken").read_text() == "mine"


# ---------------------------------------------------------------- the guard of every command


def warning_command() -> None:
    """Warn, then finish."""
    warnings.warn("only 3 runs: the interval is wide", al.DegenerateDataWarning, stacklevel=1)
    typer.echo("finished")


def value_error_command() -> None:
    """Raise what reads as bad input."""
    raise ValueError("`alpha` must be in (0, 1); found 2")


def bug_command() -> None:
    """Raise what no command expects."""
    raise RuntimeError("kaput")


def _register(monkeypatch: pytest.MonkeyPatch, name: str, attribute: str,
              registry: dict[str, tuple[str, str, str]] = _app.COMMANDS) -> None:
    monkeypatch.setitem(registry, name, (__name__, attribute, "A test command."))


def test_a_warning_inside_a_command_is_one_warning_line(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """Before: ``…/_certify.py:135: DegenerateDataWarning: … cells = _cells(…)``."""
    _register(monkeypatch, "warn-test", "warning_command")
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # as outside pytest: shown, not raised
        shown = warnings.showwarning
        result = invoke("warn-test")
        assert warnings.showwarning is shown  # the command's display is undone after it
    assert result.exit_code == 0, result.output
    assert "warning: only 3 runs: the interval is wide" in result.stderr
    assert "DegenerateDataWarning" not in result.output
    assert_clean(result)


def test_an_error_no_command_reported_is_one_error_line_exit_2(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _register(monkeypatch, "bad-test", "value_error_command", _app.ESTIMATE_COMMANDS)
    result = invoke("estimate", "bad-test", columns=1000)
    assert result.exit_code == 2
    assert "error: agentlog estimate bad-test: `alpha` must be in (0, 1); found 2" in (
        result.stderr)
    assert_clean(result)


def test_an_unexpected_error_is_one_line_asking_for_a_report_exit_1(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _register(monkeypatch, "bug-test", "bug_command")
    result = invoke("bug-test", columns=1000)
    assert result.exit_code == 1
    assert ("error: agentlog bug-test: unexpected RuntimeError: kaput. This is a bug in "
            "agentlog: please report it") in result.stderr
    assert_clean(result)


CHILD = """
import json, sys
from agentlog.cli import _app, main
for name, attribute in (("warn-test", "warning_command"), ("bug-test", "bug_command")):
    _app.COMMANDS[name] = ("tests.cli.test_cli_errors", attribute, "A test command.")
sys.argv = ["agentlog", *json.loads(sys.argv[1])]
main()
"""


@pytest.mark.parametrize(("args", "code", "line"), [
    (["warn-test"], 0, "warning: only 3 runs: the interval is wide"),
    (["bug-test"], 1, "error: agentlog bug-test: unexpected RuntimeError: kaput."),
])
def test_the_console_script_prints_no_traceback_nor_source_line(
        args: list[str], code: int, line: str) -> None:
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(args)], capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).parents[2],
                          env={"COLUMNS": "1000", "PATH": ""})
    assert done.returncode == code, done.stderr
    assert line in done.stderr
    assert "Traceback" not in done.stderr and not SOURCE_LINE.search(done.stderr), done.stderr


# ---------------------------------------------------------------- --executor and --ray-address

EXECUTOR_COMMANDS = ["certify", "estimate reliability"]


@pytest.fixture
def one_trace(tmp_path: Path) -> Path:
    with al.record(tmp_path / "t.zst", system="a", task="t0", seed=0,
                   meta={"ranking": "agent"}):
        al.score("abs_error", 0.1, channel="direct")
    return tmp_path / "t.zst"


@pytest.mark.parametrize("command", EXECUTOR_COMMANDS)
def test_an_unknown_executor_is_one_error_exit_2(command: str, one_trace: Path) -> None:
    result = invoke(*command.split(), one_trace, *EXTRA[command], "--executor", "spark",
                    columns=1000)
    assert_clean(result)
    assert result.exit_code == 2
    assert "Invalid value for '--executor'" in result.stderr
    assert "'spark' is not one of 'local', 'ray'" in result.stderr


@pytest.mark.parametrize("command", EXECUTOR_COMMANDS)
def test_a_ray_address_without_executor_ray_is_one_error_exit_2(command: str,
                                                                one_trace: Path) -> None:
    result = invoke(*command.split(), one_trace, *EXTRA[command], "--ray-address", "auto",
                    columns=1000)
    assert_clean(result)
    assert result.exit_code == 2
    assert (f"error: agentlog {command}: --ray-address names the cluster of --executor ray; "
            "pass --executor ray too, or leave --ray-address out") in result.stderr


@pytest.mark.parametrize("command", EXECUTOR_COMMANDS)
def test_executor_ray_without_ray_names_the_install_line_exit_2(
        command: str, one_trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    result = invoke(*command.split(), one_trace, *EXTRA[command], "--executor", "ray",
                    columns=1000)
    assert_clean(result)
    assert result.exit_code == 2
    assert (f"error: agentlog {command}: --executor ray: executor='ray' needs Ray, which "
            "cannot be imported") in result.stderr
    assert "pip install 'agentlog[ray]'" in result.stderr


@pytest.mark.parametrize("command", EXECUTOR_COMMANDS)
def test_an_empty_ray_address_is_one_error_exit_2(command: str, one_trace: Path) -> None:
    pytest.importorskip("ray")
    result = invoke(*command.split(), one_trace, *EXTRA[command], "--executor", "ray",
                    "--ray-address", " ", columns=1000)
    assert_clean(result)
    assert result.exit_code == 2
    assert "`address` must name a Ray cluster" in result.stderr
