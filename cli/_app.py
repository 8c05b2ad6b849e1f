"""The typer application: one command per module (``_inspect``, ``_verify_cmd``, ``_demo``,
``_validity_card``, ``_certify_cmd``), and the ``estimate`` sub-app (``_estimate``: one
command per estimator; ``asv`` lives in ``_estimate_asv``, ``reliability`` in
``_estimate_reliability``).

Exit codes everywhere: 0 ok, 1 a check found a problem, 2 bad input (a missing or
unreadable file, a bad option). Every error names the file and what to do.
"""

from __future__ import annotations

from typing import Annotated

import typer

from agentlog import __version__

from ._certify_cmd import certify_command
from ._demo import demo_command
from ._estimate import estimate_app
from ._estimate_asv import asv_command
from ._estimate_effects import effects_command
from ._estimate_reliability import reliability_command
from ._export_cmd import export_command
from ._inspect import inspect_command
from ._replay_cmd import replay_command
from ._validity_card import validity_card_command
from ._verify_cmd import verify_command

# Output cites the papers behind each estimator by short keys; --help says which.
REFERENCES = (
    "Papers cited in the output: "
    "[LBC] What Can a Leaderboard Certify? (arXiv:2609.32318); "
    "[DMC] The Double Measurement Confound in Agent Benchmarks (arXiv:2609.09218); "
    "[SSC] Search Shapes Conclusions; "
    "[ASV] Agent Step Value."
)

app = typer.Typer(
    name="agentlog",
    help="Record, inspect and verify sealed traces of LLM agents.",
    epilog=REFERENCES,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"agentlog {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="Print agentlog's version and exit.")] = False,
) -> None:
    """Record, inspect and verify sealed traces of LLM agents."""

app.command("demo")(demo_command)
app.command("inspect")(inspect_command)
app.command("verify")(verify_command)
app.command("validity-card")(validity_card_command)
app.command("certify")(certify_command)
app.command("export")(export_command)
app.command("replay")(replay_command)
estimate_app.command("asv")(asv_command)
estimate_app.command("reliability")(reliability_command)
estimate_app.command("effects")(effects_command)
app.add_typer(estimate_app, name="estimate")


def main() -> None:
    """Run the command line (the ``agentlog`` console script)."""
    app()
