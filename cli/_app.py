"""The typer application, with commands that load when they run.

``agentlog --help`` must start fast, so this module imports only typer: each command lives
in its own module (``_inspect``, ``_verify_cmd``, ``_demo``, ...) and is imported the first
time that command is run, or its own ``--help`` is asked for. The help lines the group
lists come from the tables below (a test checks that each equals the command's own
docstring summary, so they cannot drift).

**Adding a command** is one line in ``COMMANDS`` (or ``ESTIMATE_COMMANDS`` for
``agentlog estimate NAME``, ``IMPORT_COMMANDS`` for ``agentlog import NAME``)::

    "replay": ("._replay_cmd", "replay_command", "Re-execute recorded runs ..."),

that is: the command name, the module (relative to this package) and the typer command
function in it, and the first sentence of that function's docstring. Nothing else here
changes.

Exit codes everywhere: 0 ok, 1 a check found a problem, 2 bad input (a missing or
unreadable file, a bad option). Every error names the file and what to do.

**What the terminal shows** is decided here, once, for every command (``command_guard``):
a warning is one ``warning: MESSAGE`` line on stderr (never Python's ``file.py:LINE:
Category`` form with the source line), and an error no command turned into its own
message is one ``error:`` line, never a traceback: exit 2 for what reads as bad input (an
``agentlog`` error, an ``OSError``, a ``ValueError``), exit 1 for anything else, which
is a bug to report (``AGENTLOG_TRACEBACK=1`` shows its traceback).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import warnings
from collections.abc import Iterator
from typing import Annotated, Any, ClassVar, TextIO

import typer
from typer.core import TyperCommand, TyperGroup

from agentlog import __version__

#: ``name -> (module, command function, one-line help)`` of ``agentlog NAME``.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "demo": ("._demo", "demo_command",
             "Record the bundled deep-research agent (offline), inspect and verify it, run "
             "the estimators on it and certify a leaderboard of its variants."),
    "inspect": ("._inspect", "inspect_command",
                "Show what a trace holds: runs, windows, selections, stops, scores, calls."),
    "verify": ("._verify_cmd", "verify_command",
               "Recompute hashes, receipts, digests, draws and continuity."),
    "validity-card": ("._validity_card", "validity_card_command",
                      "The validity card of recorded runs: scorer probes, decision "
                      "ownership, non-degeneracy, replay and the licensed claim ([DMC] "
                      "§5.5)."),
    "certify": ("._certify_cmd", "certify_command",
                "Certify a leaderboard: admissibility from the sealed entries before any "
                "score, eq. 4 per pair, rank intervals, the R0–R5 ladder ([LBC])."),
    "export": ("._export_cmd", "export_command",
               "Export traces as OpenTelemetry spans."),
    "replay": ("._replay_cmd", "replay_command",
               "Replay recorded states under evaluation channels."),
    "counterfactual": ("._counterfactual_cmd", "counterfactual_command",
                       "Recorded choices under a selection intervention, on the noise each "
                       "was drawn with (posterior noise for choices observed elsewhere)."),
    "rewards": ("._rewards_cmd", "rewards_command",
                "Certified stage rewards: each exit of a window scored by one readout, with "
                "its group-relative advantage, for training."),
}

#: ``name -> (module, command function, one-line help)`` of ``agentlog estimate NAME``.
ESTIMATE_COMMANDS: dict[str, tuple[str, str, str]] = {
    "cess": ("._estimate", "cess_command",
             "CESS estimates of the candidate-pool conclusion θ* from recorded runs "
             "([SSC])."),
    "asv": ("._estimate_asv", "asv_command",
            "ASV: the four-corner face of a window's transitions under two channels "
            "([ASV])."),
    "reliability": ("._estimate_reliability", "reliability_command",
                    "Reliability beyond the mean per group of runs: worst case, CVaR@α, "
                    "Reliability@τ and a bootstrap CI of the mean ([DMC] §4.4)."),
    "effects": ("._estimate_effects", "effects_command",
                "Policy effects Δsel, Δstop, Δint and total of a paired 2×2 ([SSC] eq. "
                "3–4), with task-clustered intervals and ICC(1,k) across seeds."),
    "attribution": ("._estimate_attribution", "attribution_command",
                    "Per-step attribution: each decision's contrastive effect and Shapley "
                    "value on the outcome, with task-clustered intervals."),
}

#: ``name -> (module, command function, one-line help)`` of ``agentlog import NAME``.
IMPORT_COMMANDS: dict[str, tuple[str, str, str]] = {
    "inspect": ("._import_cmd", "import_inspect_command",
                "Import Inspect AI eval logs as agentlog traces: one trace per log, one run "
                "per sample and epoch with its model calls, tool calls and scores."),
    "otlp": ("._import_cmd", "import_otlp_command",
             "Import OpenTelemetry spans (OTLP JSON) as agentlog traces: one trace per file, "
             "one run per trace id with its model calls, tool calls and evaluation scores."),
}

# Output cites the papers behind each estimator by short keys; --help says which.
REFERENCES = (
    "Papers cited in the output: "
    "[LBC] What Can a Leaderboard Certify? (arXiv:2609.32318); "
    "[DMC] The Double Measurement Confound in Agent Benchmarks (arXiv:2609.09218); "
    "[SSC] Search Shapes Conclusions; "
    "[ASV] Agent Step Value."
)


def load_command(name: str, module: str, attribute: str) -> Any:
    """The click command ``name`` built from the typer function ``module.attribute``.

    The command gets an app of its own (typer's rich help and errors), so only the
    command being run is imported.
    """
    function = getattr(importlib.import_module(module, __package__), attribute)
    single = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    single.command(name)(function)
    return typer.main.get_command(single)


class _Listed(TyperCommand):
    """What the group's help lists for a command not loaded yet: its name and help line."""


class _LazyGroup(TyperGroup):
    """A group whose commands, from ``registry``, are imported only when one is run."""

    registry: ClassVar[dict[str, tuple[str, str, str]]] = {}

    def list_commands(self, ctx: Any) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.registry})

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = super().get_command(ctx, cmd_name)
        if found is not None or cmd_name not in self.registry:
            return found
        # Listing the commands (the group's --help) needs only the help line.
        line = self.registry[cmd_name][2]
        return _Listed(name=cmd_name, help=line, short_help=line)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        if isinstance(command, _Listed) and name is not None:
            module, attribute, _ = self.registry[name]
            command = load_command(name, module, attribute)
            self.commands[name] = command  # loaded once per process
        if name is not None:  # for the error line: "agentlog estimate asv: ..."
            ctx.meta.setdefault(_COMMAND_PATH, []).append(name)
        return name, command, rest


class _RootGroup(_LazyGroup):
    """``agentlog`` itself: every command (``estimate``'s too) runs in ``command_guard``."""

    def invoke(self, ctx: Any) -> Any:
        with command_guard(ctx):
            return super().invoke(ctx)


def _lazy_group(registry: dict[str, tuple[str, str, str]],
                base: type[_LazyGroup] = _LazyGroup) -> type[_LazyGroup]:
    return type("LazyGroup", (base,), {"registry": registry})


_COMMAND_PATH = "agentlog.command"  # ctx.meta key: the command names resolved, in order
_EXIT_PROBLEM, _EXIT_BAD_INPUT = 1, 2  # as in ._output, which this module must not import


def show_warning(message: Warning | str, category: type[Warning], filename: str,
                 lineno: int, file: TextIO | None = None, line: str | None = None) -> None:
    """``warnings.showwarning`` of the command line: ``warning: MESSAGE``, no source."""
    stream = file if file is not None else sys.stderr
    # As warnings' own: a stderr that is gone loses the line, never the command.
    with contextlib.suppress(OSError, AttributeError, ValueError):
        stream.write(f"warning: {message}\n")


@contextlib.contextmanager
def command_guard(ctx: Any) -> Iterator[None]:
    """Run a command with warnings shown as ``warning: MESSAGE`` lines and every error it
    did not report itself shown as one ``error:`` line (exit 2 bad input, 1 a bug)."""
    with warnings.catch_warnings():  # the filters stay the user's; only the display changes
        warnings.showwarning = show_warning
        try:
            yield
        except (typer.Exit, typer.Abort, typer.TyperException, BrokenPipeError):
            # The command's own exit, click's usage errors (already worded), or a reader
            # that went away (``| head``), which typer ends quietly.
            raise
        except Exception as exc:
            if os.environ.get("AGENTLOG_TRACEBACK") == "1":
                raise
            raise typer.Exit(_report(ctx, exc)) from None


def _report(ctx: Any, exc: Exception) -> int:
    """Print ``exc`` as one error line; the exit code it stands for."""
    from rich.markup import escape

    import agentlog as al

    from ._output import stderr

    where = " ".join(["agentlog", *ctx.meta.get(_COMMAND_PATH, [])])
    text = str(exc) or type(exc).__name__
    if isinstance(exc, al.AgentlogError | OSError | ValueError):
        code, message = _EXIT_BAD_INPUT, f"{where}: {text}"
    else:
        code, message = _EXIT_PROBLEM, (
            f"{where}: unexpected {type(exc).__qualname__}: {text}. This is a bug in "
            "agentlog: please report it with the command you ran (AGENTLOG_TRACEBACK=1 "
            "prints the traceback)")
    stderr().print(f"[bold red]error:[/] {escape(message)}")
    return code


# rich_markup_mode=None: the groups' help is plain click, so listing the commands does not
# import rich's Markdown renderer (~0.25 s); each command's own help stays rich.
app = typer.Typer(
    name="agentlog",
    cls=_lazy_group(COMMANDS, _RootGroup),
    help="Record, inspect and verify sealed traces of LLM agents.",
    epilog=REFERENCES,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
estimate_app = typer.Typer(
    name="estimate",
    cls=_lazy_group(ESTIMATE_COMMANDS),
    help="Estimators over recorded traces ([SSC]: CESS; [ASV]: ASV; [DMC]: reliability).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

import_app = typer.Typer(
    name="import",
    cls=_lazy_group(IMPORT_COMMANDS),
    help="Other tools' logs as agentlog traces (inspect: Inspect AI eval logs; otlp: "
         "OpenTelemetry spans as OTLP JSON).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
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


app.add_typer(estimate_app, name="estimate")
app.add_typer(import_app, name="import")


def main() -> None:
    """Run the command line (the ``agentlog`` console script)."""
    app()
