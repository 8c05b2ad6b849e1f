"""The options and arguments several commands share, declared once.

Where every command means the same thing by an option, its whole declaration is a typer
``Annotated`` alias (``json_output: JsonOutput = False``). Where each command says in its
help what the option means for it (``--window``: the comparison window, the scored window,
the replayed window), a factory takes that help and fixes the rest once: the flag, whether
the default is shown, the bounds (``window: Annotated[str | None, window_option("...")]``).
Only typer is imported here, so a command's module stays as cheap to load as before.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

TRACES_HELP = "Trace files, or folders of them (every *.zst below)."
JSON_HELP = "Print JSON instead of tables."


def _option(flag: str, **fixed: Any) -> Callable[..., Any]:
    """A factory of ``flag`` with the ``fixed`` settings; each command gives the help (and
    may override a setting)."""
    def option(help: str, **override: Any) -> Any:
        return typer.Option(flag, help=help, **{**fixed, **override})
    option.__name__ = option.__qualname__ = f"{flag.lstrip('-').replace('-', '_')}_option"
    return option


def traces_argument(help: str = TRACES_HELP) -> Any:
    """The trace files or folders a command reads (one or more, no default)."""
    return typer.Argument(help=help, show_default=False)


def plot_option(what: str, *, needs: str = "matplotlib") -> Any:
    """``--plot PATH``: "Write WHAT to this PNG (needs NEEDS)."."""
    return typer.Option("--plot", help=f"Write {what} to this PNG (needs {needs}).",
                        show_default=False)


json_option = _option("--json")                           # --json: machine-readable output
window_option = _option("--window", show_default=False)  # --window NAME
score_option = _option("--score", show_default=False)    # --score NAME (or what scores a run)
channel_option = _option("--channel", show_default=False)  # --channel NAME
app_option = _option("--app", show_default=False)        # --app MODULE (channels, scorers)
cache_option = _option("--cache", show_default=False)    # --cache PATH (exact-input cache)
out_option = _option("--out")                            # --out PATH (where it writes)
seed_option = _option("--seed", min=0)                   # --seed N: a numpy seed, N >= 0
seeds_option = _option("--seeds", min=1)                 # --seeds N: how many seeds
resamples_option = _option("--resamples", min=2)         # --resamples B: bootstrap draws
ci_method_option = _option("--ci-method")                # --ci-method: BCa, percentile, basic

Traces = Annotated[list[Path], traces_argument()]
JsonOutput = Annotated[bool, json_option(JSON_HELP)]
BootstrapSeed = Annotated[int, seed_option("Seed of the bootstrap draws.")]
