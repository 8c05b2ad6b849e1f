"""Running the agentlog CLI in-process for tests (typer's CliRunner, a wide terminal)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner, Result

from agentlog.cli import app


def invoke(*args: str | Path, columns: int = 200) -> Result:
    """Run ``agentlog ARGS...``; rich tables get ``columns`` characters before wrapping."""
    return CliRunner(env={"COLUMNS": str(columns)}).invoke(app, [str(a) for a in args])
