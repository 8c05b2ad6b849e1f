"""What every command shares: exit codes, consoles, JSON output, bad-input errors."""

from __future__ import annotations

import contextlib
import json
import math
import os
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

import agentlog as al

EXIT_OK = 0
EXIT_PROBLEM = 1  # a check ran and found something wrong
EXIT_BAD_INPUT = 2  # the input could not be used: missing file, not a trace, bad option


class BadInput(Exception):
    """An input the command cannot use; the message names the file and what to do."""


def stdout() -> Console:
    return Console(highlight=False, soft_wrap=True)


def stderr() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def jsonable(obj: Any) -> Any:
    """A JSON-ready copy: bytes as hex, tuples as lists, non-finite floats as strings."""
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [jsonable(v) for v in obj]
    if isinstance(obj, bytes | bytearray | memoryview):
        return bytes(obj).hex()
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return jsonable(obj.item())
    return obj


def print_json(obj: Any) -> None:
    typer.echo(json.dumps(jsonable(obj), indent=2, ensure_ascii=False))


def print_estimate(out: dict[str, Any], records: list[warnings.WarningMessage],
                   render: Callable[[dict[str, Any], Console], None], *,
                   as_json: bool) -> NoReturn:
    """Print an estimate command's result: ``out`` with the warnings its estimator raised
    (recorded, each once) as JSON, or drawn by ``render`` followed by the warnings; exit 0."""
    out["warnings"] = list(dict.fromkeys(str(w.message) for w in records))
    if as_json:
        print_json(out)
    else:
        console = stdout()
        render(out, console)
        for message in out["warnings"]:
            console.print(f"[yellow]warning:[/] {escape(message)}")
    raise typer.Exit(EXIT_OK)


def fail(message: str) -> NoReturn:
    """Print a bad-input error to stderr and exit with code 2."""
    stderr().print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(EXIT_BAD_INPUT)


def write_plot(command: str, path: Path, draw: Callable[[], None]) -> None:
    """``draw()`` a figure into ``path``: a missing ``plot`` extra or a path that cannot be
    written ends the command with what to do, never a traceback."""
    try:
        draw()
    except al.MissingDependencyError as exc:
        fail(f"agentlog {command}: {exc}")
    except OSError as exc:
        fail(f"agentlog {command}: {path}: cannot write the plot ({exc.strerror or exc}); "
             "pass a writable path")


def expand(paths: list[Path]) -> list[Path]:
    """Files as given; a folder stands for the ``*.zst`` files below it (sorted)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(p.rglob("*.zst"))
            out.extend(found if found else [p])  # an empty folder is reported as bad input
        else:
            out.append(p)
    return out


def check_trace_path(path: Path) -> None:
    """Raise ``BadInput`` unless ``path`` names an existing file (not a folder)."""
    if not path.exists():
        raise BadInput(f"{path}: no such file; check the path (agentlog traces end in .zst)")
    if path.is_dir():
        raise BadInput(f"{path}: is a folder; pass one trace file (e.g. {path / '*.zst'})")


@contextlib.contextmanager
def trace_errors(path: Path | None = None) -> Iterator[None]:
    """Turn every way reading the trace at ``path`` (default: the file the error names,
    for a stream over several) can fail into ``BadInput``."""
    try:
        yield
    except al.TraceFormatError as exc:
        raise BadInput(f"{exc}. It is not a readable agentlog trace: pass a file written by "
                       "al.record(), or re-record the run") from exc
    except OSError as exc:
        where = path if path is not None else exc.filename
        if where is None:  # agentlog's own message (it names the file and what to do)
            raise BadInput(str(exc)) from exc
        if isinstance(exc, FileNotFoundError):
            raise BadInput(f"{where}: no such file; check the path (agentlog traces end in "
                           ".zst)") from exc
        raise BadInput(f"{where}: cannot be read ({exc.strerror or exc}); check its "
                       "permissions") from exc


@contextlib.contextmanager
def dataset_errors(dataset: object = None) -> Iterator[None]:
    """A dataset that pyarrow cannot read (or no pyarrow) is ``BadInput``. An ``OSError``
    reading ``dataset`` at a URI is agentlog's message, which names the URI and what to
    check (credentials, endpoint), as it is."""
    from agentlog.dataset import is_uri

    try:
        yield
    except al.MissingDependencyError as exc:
        raise BadInput(str(exc)) from None
    except (OSError, ValueError) as exc:
        if isinstance(exc, BadInput):
            raise
        if isinstance(exc, OSError) and is_uri(dataset):
            raise BadInput(str(exc)) from None
        raise BadInput(f"the Parquet dataset cannot be read ({exc}); export it again with "
                       "agentlog export TRACES --format parquet --out DIR") from None


def open_cache(path: Path, *, read_only: bool, missing: str) -> Any:
    """``ModelCache(path)`` for a command, opened now: a cache it cannot use (a folder, a
    file that is not a cache, no file where ``read_only`` needs one: ``missing`` says
    what to do then) is ``BadInput`` before any work starts. The caller closes it."""
    from agentlog.replay import ModelCache

    if read_only and not path.exists():
        raise BadInput(missing)
    try:
        return ModelCache(path, mode="read-only" if read_only else "read-write")
    except ValueError as exc:
        raise BadInput(f"--cache: {exc}") from exc
    except OSError as exc:
        raise BadInput(f"--cache {path}: cannot be opened ({exc.strerror or exc}); pass a "
                       "file path in a folder you may write, e.g. runs/cache.sqlite") from exc


def read_trace(path: Path) -> al.Trace:
    """Read one trace, turning every way it can be unusable into ``BadInput``."""
    check_trace_path(path)
    with trace_errors(path):
        return al.read(path)


def fmt_ms(ms: float | None) -> str:
    """A duration given in milliseconds, in the unit that reads best."""
    if ms is None:
        return "-"
    if ms < 1:
        return f"{ms * 1000:.3g} us"
    return f"{ms:.3g} ms" if ms < 1000 else f"{ms / 1000:.3g} s"


def fmt_num(x: float | None, digits: int = 4) -> str:
    if x is None:
        return "-"
    return f"{x:.{digits}g}"


def fmt_signed(x: float, digits: int = 3) -> str:
    """``x`` with its sign always shown (``+0.125``), for effects and contrasts."""
    return f"{x:+.{digits}f}"


def short_path(path: str | os.PathLike[str]) -> str:
    """The path relative to the working directory when it lies below it."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend, imported only for --plot."""
    try:
        import matplotlib
    except ImportError as exc:
        import agentlog as al

        raise al.MissingDependencyError(
            "--plot needs matplotlib, which is not installed: pip install 'agentlog[plot]'"
        ) from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
