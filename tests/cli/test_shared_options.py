"""Options several commands share are declared once (``agentlog.cli._options``, a private
piece): the same flag means the same thing, with the same bounds, in every command."""

from __future__ import annotations

import re

import pytest

from tests.cli._cli import invoke

BOOTSTRAP_COMMANDS = [("estimate", "asv", "--channels", "direct,quote"),
                      ("estimate", "effects"), ("estimate", "reliability")]
JSON_TABLE_COMMANDS = [("demo",), ("inspect",), ("verify",), ("estimate", "cess"),
                       ("estimate", "asv"), ("estimate", "effects"),
                       ("estimate", "reliability")]


def _option_row(command: tuple[str, ...], flag: str) -> str:
    """The help row of ``flag``, with its type column and whitespace folded."""
    out = invoke(*command, "--help").output
    row = next(line for line in out.splitlines() if re.search(rf"\s{flag}\s", line))
    return " ".join(row.strip("│ ").split())


@pytest.mark.parametrize("command", BOOTSTRAP_COMMANDS, ids=" ".join)
def test_a_negative_bootstrap_seed_is_a_usage_error_naming_the_option(
        command: tuple[str, ...], tmp_path: object) -> None:
    done = invoke(*command, str(tmp_path), "--seed", "-1")
    assert done.exit_code == 2
    assert "Invalid value for '--seed': Input should be greater than or equal to 0" in (
        done.output)


@pytest.mark.parametrize("command", BOOTSTRAP_COMMANDS, ids=" ".join)
def test_the_bootstrap_seed_reads_the_same_in_every_command(command: tuple[str, ...]) -> None:
    assert _option_row(command[:2], "--seed") == (
        "--seed <int range> [x>=0] Seed of the bootstrap draws. [default: 0]")


@pytest.mark.parametrize("command", JSON_TABLE_COMMANDS, ids=" ".join)
def test_json_reads_the_same_in_every_command_that_prints_tables(
        command: tuple[str, ...]) -> None:
    assert _option_row(command, "--json") == "--json <bool> Print JSON instead of tables."


def test_every_plot_option_says_it_writes_a_png_and_what_it_needs() -> None:
    for command in (("certify",), ("estimate", "cess"), ("estimate", "asv"),
                    ("estimate", "reliability")):
        row = _option_row(command, "--plot")
        assert re.search(r"Write .+ to this PNG \(needs matplotlib", row), (command, row)
