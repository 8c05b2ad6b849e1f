"""The replay's progress bar: units done / total, rate, ETA and failures, on stderr.

Shown only when asked for and stderr is a terminal (a pipe, a CI log or a test gets no
control sequences). rich is imported only when a bar is shown.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO


class Progress:
    """A bar over ``total`` units, or nothing at all when ``enabled`` is False.

    ``total=None`` (units read from an iterator, count unknown): a running count of the
    units done, with their rate, and no ETA.
    """

    def __init__(self, total: int | None, *, enabled: bool, description: str = "replay",
                 stream: TextIO | None = None) -> None:
        stream = sys.stderr if stream is None else stream
        self.enabled = enabled and (total is None or total > 0) and _is_tty(stream)
        self._bar: Any = None
        self._task: Any = None
        self.failed = 0
        if not self.enabled:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as RichProgress

        self._bar = RichProgress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TaskProgressColumn(), TextColumn("{task.fields[rate]}"),
            TextColumn("ETA"), TimeRemainingColumn(), TimeElapsedColumn(),
            TextColumn("[red]{task.fields[failed]} failed"),
            console=Console(file=stream), transient=False,
        )
        self._task = self._bar.add_task(description, total=total, rate="", failed=0)
        self._bar.start()

    def advance(self, done: int, failed: int) -> None:
        """``done`` more units finished, ``failed`` of them failed."""
        if self._bar is None:
            return
        self.failed += failed
        speed = self._bar.tasks[0].speed
        rate = "" if speed is None else f"{speed:,.1f} units/s"
        self._bar.update(self._task, advance=done, failed=self.failed, rate=rate)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _is_tty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or replaced streams
        return False
