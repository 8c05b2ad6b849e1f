"""``agentlog.records.trace_files``: the traces a source names, resolved but unread."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentlog as al
from agentlog.records import iter_runs, trace_files


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name in ("b/2.zst", "a/1.zst", "a/3.zst"):
        path = tmp_path / name
        path.parent.mkdir(exist_ok=True)
        with al.record(path, seed=1, task=name):
            al.score("f1", 0.5)
    (tmp_path / "a" / "notes.txt").write_text("not a trace")
    return tmp_path


def test_files_folders_and_globs_resolve_in_order(folder: Path) -> None:
    assert trace_files(folder) == [folder / "a/1.zst", folder / "a/3.zst", folder / "b/2.zst"]
    assert trace_files(str(folder / "*" / "[12].zst")) == [folder / "a/1.zst",
                                                           folder / "b/2.zst"]
    assert trace_files(f"{folder}/**/3.zst") == [folder / "a/3.zst"]
    assert trace_files([folder / "b", folder / "a/1.zst"]) == [folder / "b/2.zst",
                                                                folder / "a/1.zst"]


def test_a_trace_in_memory_is_kept_and_the_list_streams(folder: Path) -> None:
    trace = al.read(folder / "b/2.zst")
    files = trace_files([trace, f"{folder}/a/*.zst"])
    assert files[0] is trace and files[1:] == [folder / "a/1.zst", folder / "a/3.zst"]
    tasks = [run.start.task for _, run in iter_runs(files) if run.start is not None]
    assert tasks == ["b/2.zst", "a/1.zst", "a/3.zst"]
    assert [t.path for t in al.read_traces(f"{folder}/a/*.zst")] == [
        str(folder / "a/1.zst"), str(folder / "a/3.zst")]


def test_what_names_no_trace_is_a_clear_error(folder: Path) -> None:
    with pytest.raises(ValueError, match=r"'.*/c\*\.zst': the pattern matches no file"):
        trace_files(f"{folder}/c*.zst")
    with pytest.raises(FileNotFoundError, match=r"trace '.*none\.zst' does not exist"):
        trace_files([folder / "a/1.zst", folder / "none.zst"])
    (folder / "empty").mkdir()
    with pytest.raises(ValueError, match=r"empty: the folder holds no \*\.zst trace files"):
        trace_files(folder / "empty")
    with pytest.raises(ValueError, match=r"`runs` is empty"):
        trace_files([], name="runs")
    with pytest.raises(ValueError, match=r"item 0 is a int"):
        trace_files([3])  # type: ignore[list-item]
