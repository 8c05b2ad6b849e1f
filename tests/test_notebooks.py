"""Every notebook under docs/ runs top to bottom on a fresh kernel without an error, and
the results it displays show themselves as HTML tables."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "docs").rglob("*.ipynb"))


@functools.cache
def executed(path: Path) -> Any:
    """``path`` run once on a fresh python3 kernel in an empty folder (nbclient raises
    ``CellExecutionError`` at the first cell that raises)."""
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as folder:
        nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                resources={"metadata": {"path": folder}}).execute()
    return nb


def _results(nb: Any) -> list[dict[str, Any]]:
    return [out["data"] for cell in nb.cells if cell.cell_type == "code"
            for out in cell.get("outputs", []) if out["output_type"] == "execute_result"]


def test_there_is_a_notebook_and_it_is_stored_without_outputs() -> None:
    assert NOTEBOOKS, "no notebook under docs/"
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        assert all(not c.get("outputs") and c.get("execution_count") is None
                   for c in nb.cells if c.cell_type == "code"), f"{path}: clear its outputs"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_notebook_runs_and_its_results_show_as_html(path: Path) -> None:
    nb = executed(path)
    errors = [out for cell in nb.cells if cell.cell_type == "code"
              for out in cell.get("outputs", []) if out["output_type"] == "error"]
    assert errors == []
    results = _results(nb)
    # a plain value (a count) shows as text; every object a cell ends with shows as HTML
    objects = [r for r in results if r["text/plain"].startswith("<")]
    assert objects and all("text/html" in r for r in objects)
    for r in objects:
        assert "could not render" not in r["text/html"]


@pytest.mark.timeout(600)
def test_the_tutorial_shows_each_kind_of_result() -> None:
    """What docs/tutorials/notebook.ipynb promises: a trace, a run, CESS, the ASV face and
    summary, reliability and a certified board with its rank-interval figure."""
    nb = executed(ROOT / "docs" / "tutorials" / "notebook.ipynb")
    shown = "\n".join(r.get("text/html", "") for r in _results(nb))
    for caption in ("<caption>Trace</caption>", "<caption>Run 0</caption>",
                    "CESS estimates", "ASV face", "ASV summary", "Reliability by group",
                    "Reliability summary", "Certified leaderboard", "Pair on"):
        assert caption in shown, caption
    pytest.importorskip("matplotlib")
    assert 'alt="certified rank intervals"' in shown
