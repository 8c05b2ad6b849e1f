"""``ModelCache(path)`` refuses a path that is not a model cache with words, not SQLite's:
a folder, a file that is not SQLite, another program's SQLite database (issue 28)."""

from __future__ import annotations

import gc
import sqlite3
from pathlib import Path

import pytest

from agentlog.replay import ModelCache

MODES = ["read-write", "read-only"]


@pytest.mark.parametrize("mode", MODES)
def test_a_folder_is_refused_naming_it_and_what_a_cache_is(tmp_path: Path, mode: str) -> None:
    with pytest.raises(ValueError, match=r"model cache '.*' is a folder; a model cache is a "
                                         r"SQLite file path, e\.g\. 'runs/cache\.sqlite'"):
        ModelCache(tmp_path, mode=mode)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", MODES)
def test_a_file_that_is_not_sqlite_is_refused_and_left_as_it_was(tmp_path: Path,
                                                                 mode: str) -> None:
    path = tmp_path / "notes.sqlite"
    path.write_text("not a database\n" * 100)
    with pytest.raises(ValueError, match=r"model cache '.*notes\.sqlite' is not a SQLite file "
                                         r"\(file is not a database\); a model cache is a "
                                         r"SQLite file path"):
        ModelCache(path, mode=mode)  # type: ignore[arg-type]
    assert path.read_text() == "not a database\n" * 100


@pytest.mark.parametrize("mode", MODES)
def test_another_programs_database_is_refused_and_not_changed(tmp_path: Path,
                                                              mode: str) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    conn.close()
    with pytest.raises(ValueError, match=r"model cache '.*app\.db' is a SQLite file but not an "
                                         r"agentlog model cache"):
        ModelCache(path, mode=mode)  # type: ignore[arg-type]
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master")]
    finally:
        conn.close()
    assert tables == ["users"]


def test_a_cache_written_before_opens_in_both_modes(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    ModelCache(path).close()
    with ModelCache(path, mode="read-only") as cache:
        assert len(cache) == 0


def test_a_cache_nobody_closes_closes_its_connections_when_collected(tmp_path: Path) -> None:
    """White-box test of ``ModelCache``'s store: its connections are what must close."""
    cache = ModelCache(tmp_path / "c.sqlite")
    conns = list(cache._store._all)  # type: ignore[union-attr]  # private: what is closed
    del cache
    gc.collect()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        conns[0].execute("SELECT 1")
