"""``agentlog --help`` imports only typer: each command loads when it is run (issue 16).

Structural, not timed: a fresh interpreter runs the help and reports ``sys.modules``.
``tests/benchmarks/bench_cli_startup.py`` measures the time.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest

from agentlog.cli import _app

from ._cli import invoke

# What the listing must not pay for: the numeric stack, rich's renderers, the commands.
HEAVY = ("numpy", "scipy", "pyarrow", "rich.markdown", "rich.table", "rich.console",
         "agentlog.estimators", "agentlog._reader", "agentlog._encoding",
         "agentlog.cli._inspect", "agentlog.cli._demo", "agentlog.cli._output")

CHILD = """
import json, sys
sys.argv = ["agentlog", *json.loads(sys.argv[1])]
from agentlog.cli import main
try:
    main()
except SystemExit:
    pass
sys.stdout.flush()
sys.stderr.write(json.dumps(sorted(sys.modules)))
"""


def _help_in_child(*args: str) -> tuple[str, set[str]]:
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps([*args, "--help"])],
                          capture_output=True, text=True, timeout=120, check=True,
                          env={"COLUMNS": "200", "PATH": ""})
    return done.stdout, set(json.loads(done.stderr))


@pytest.mark.parametrize("group", [(), ("estimate",)])
def test_a_groups_help_lists_every_command_without_importing_them(group: tuple[str, ...]
                                                                  ) -> None:
    out, modules = _help_in_child(*group)
    registry = _app.ESTIMATE_COMMANDS if group else {**_app.COMMANDS, "estimate": None}
    for name in registry:
        assert f"  {name} " in out, (name, out)
    loaded = sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert loaded == []


def test_a_commands_own_help_loads_it_and_stays_rich() -> None:
    out, modules = _help_in_child("inspect")
    assert "agentlog.cli._inspect" in modules and "agentlog.cli._demo" not in modules
    assert "--json" in out


@pytest.mark.parametrize("registry", [_app.COMMANDS, _app.ESTIMATE_COMMANDS],
                         ids=["agentlog", "estimate"])
def test_each_listed_help_line_is_the_summary_of_the_commands_docstring(
    registry: dict[str, tuple[str, str, str]],
) -> None:
    for name, (module, attribute, line) in registry.items():
        command = _app.load_command(name, module, attribute)
        summary = " ".join(inspect.cleandoc(command.help or "").split("\n\n")[0].split())
        assert summary.startswith(line), (name, summary, line)


def test_an_unknown_command_is_bad_input_naming_it() -> None:
    result = invoke("no-such-command")
    assert result.exit_code == 2
    assert "No such command 'no-such-command'" in result.output
