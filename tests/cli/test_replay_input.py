"""`agentlog replay`: a --cache it cannot use is bad input (exit 2, one line saying why), and
an interrupted replay says what it left (issue 28)."""

from __future__ import annotations

import re
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentlog.replay
from agentlog.replay.lowlevel import APP_ENV
from tests.cli._cli import invoke

TEST_APP = "tests.replay.test_channel_replay"  # registers the chrep-* channels


@pytest.fixture(autouse=True)
def _no_app_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path
                                 ) -> Iterator[None]:
    monkeypatch.delenv(APP_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield


def _replay(tmp_path: Path, *extra: str | Path, design: bool = False) -> Any:
    from tests.replay.test_channel_replay import _record

    src = _record(tmp_path / "src.zst", [1.0, 2.0])
    if design:
        args: list[str | Path] = ["--design", "selection=agent", "--out", tmp_path / "arms"]
    else:
        args = ["--channel", "chrep-direct", "--out", tmp_path / "o.zst"]
    return invoke("replay", src, "--window", "chrep-step", "--app", TEST_APP, *args, *extra,
                  columns=1000)


def _junk(tmp_path: Path) -> Path:
    path = tmp_path / "notes.sqlite"
    path.write_text("not a database\n")
    return path


def _foreign(tmp_path: Path) -> Path:
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize("design", [False, True], ids=["channels", "design"])
@pytest.mark.parametrize(("make", "message"), [
    (lambda tmp: tmp / "folder", r"--cache: model cache '.*folder' is a folder; a model cache "
                                 r"is a SQLite file path, e\.g\. 'runs/cache\.sqlite'"),
    (_junk, r"--cache: model cache '.*notes\.sqlite' is not a SQLite file \(file is not a "
            r"database\)"),
    (_foreign, r"--cache: model cache '.*app\.db' is a SQLite file but not an agentlog model "
               r"cache \(its tables: users\)"),
], ids=["folder", "not sqlite", "another database"])
def test_a_cache_that_is_not_a_model_cache_exits_2_saying_why(
        tmp_path: Path, make: Any, message: str, design: bool) -> None:
    """Before: a ``sqlite3.OperationalError`` / ``DatabaseError`` traceback, exit 1."""
    cache = make(tmp_path)
    if cache.name == "folder":
        cache.mkdir()
    result = _replay(tmp_path, "--cache", cache, design=design)
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert re.search(message, text), text
    assert "Traceback" not in result.output and result.exception is not None  # SystemExit
    assert not (tmp_path / "o.zst").exists() and not (tmp_path / "arms").exists()


def test_frozen_with_a_cache_that_does_not_exist_says_so(tmp_path: Path) -> None:
    """Before: ``None: cannot be read (...); check its permissions``."""
    result = _replay(tmp_path, "--cache", tmp_path / "none.sqlite", "--frozen")
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert (f"error: agentlog replay: --frozen needs an existing cache file; "
            f"{tmp_path / 'none.sqlite'} does not exist. Build it first") in text
    assert "None" not in text and "permissions" not in text
    assert not (tmp_path / "none.sqlite").exists()


def test_a_cache_the_replay_filled_serves_a_frozen_one(tmp_path: Path) -> None:
    cache = tmp_path / "runs" / "cache.sqlite"
    first = _replay(tmp_path, "--cache", cache)
    assert first.exit_code == 0, first.output
    again = invoke("replay", tmp_path / "src.zst", "--window", "chrep-step", "--app", TEST_APP,
                   "--channel", "chrep-direct", "--out", tmp_path / "o2.zst", "--cache",
                   cache, "--frozen")
    assert again.exit_code == 0, again.output


def test_ctrl_c_before_any_unit_finished_says_nothing_was_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: "the units finished so far are sealed in o.zst", a file that did not exist."""
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(agentlog.replay, "replay_channels", interrupted)
    result = _replay(tmp_path)
    assert result.exit_code == 130, result.output
    # The working folder is tmp_path: the output is named relative to it.
    assert "interrupted before any unit finished; nothing was written to o.zst" in (
        " ".join(result.output.split()))
    assert "sealed" not in result.output and not (tmp_path / "o.zst").exists()
