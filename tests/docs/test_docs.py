"""The documentation site: every page's code runs as written, and the site builds strictly.

Every ``python`` and ``bash`` block of the pages runs, in the order of ``PAGES``, in one
folder where ``agentlog demo`` has run (the snippets read what the demo wrote and, as a
reader following the pages would, what earlier snippets wrote). A block is left out only
when the line before it is ``<!-- skip: REASON -->``. Other fences must say they are shown,
not run (``text``, ``toml``, ``json``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DemoRun

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
BLOCK = re.compile(r"^(<!-- skip: (?P<why>[^>]+?) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)^```",
                   re.S | re.M)
RUN = {"python", "bash"}
SHOWN = {"text", "toml", "json"}

# The order in which a reader meets the pages' code; it is also the order the snippets
# depend on each other (a later page may read what an earlier one wrote).
PAGES = [
    "index.md",
    "tutorials/quickstart.md",
    "tutorials/instrument-your-agent.md",
    "how-to/model-adapters.md",
    "how-to/frameworks.md",
    "how-to/cache.md",
    "tutorials/channel-replay.md",
    "how-to/replay-execution.md",
    "tutorials/paired-intervention.md",
    "how-to/stage-rewards.md",
    "how-to/posterior-noise.md",
    "how-to/attribution.md",
    "how-to/estimators.md",
    "how-to/parquet-duckdb.md",
    "how-to/inspect-ai.md",
    "how-to/testing.md",
    "tutorials/certify-leaderboard.md",
]


def pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md"))


def blocks(page: str) -> list[tuple[str, str, str | None]]:
    return [(m["lang"], m["body"], m["why"])
            for m in BLOCK.finditer((DOCS / page).read_text(encoding="utf-8"))]


SNIPPETS = [(page, i, lang, body, why) for page in PAGES
            for i, (lang, body, why) in enumerate(blocks(page))]


def test_every_page_with_code_is_in_the_run_order() -> None:
    with_code = {str(p.relative_to(DOCS)) for p in pages()
                 if any(lang in RUN for lang, _, _ in blocks(str(p.relative_to(DOCS))))}
    assert with_code <= set(PAGES), sorted(with_code - set(PAGES))


def test_every_fence_says_whether_it_runs() -> None:
    for page in pages():
        for lang, _, why in blocks(str(page.relative_to(DOCS))):
            assert lang in RUN | SHOWN, f"{page}: a ```{lang} block: say python, bash or text"
            assert why is None or why.strip(), f"{page}: a skip without a reason"


def test_the_pages_have_the_snippets_this_test_runs() -> None:
    python = [body for _, _, lang, body, _ in SNIPPETS if lang == "python"]
    assert any("cess.from_trace" in b for b in python)
    assert any(".face()" in b and "asv.summarize(" in b and "trajectory=" in b for b in python)
    assert any("certify.certify(" in b for b in python)


@pytest.fixture(scope="module")
def folder(demo_run: DemoRun, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder where ``agentlog demo`` has run, as in a checkout of the repository:
    ``.venv`` is this interpreter's environment (the pages say ``.venv/bin/agentlog``) and
    ``examples/`` the repository's."""
    work = tmp_path_factory.mktemp("docs") / "work"
    shutil.copytree(demo_run.folder, work)
    (work / ".venv").symlink_to(Path(sys.prefix))
    (work / "examples").symlink_to(ROOT / "examples")  # plans the pages name by path
    return work


@pytest.mark.parametrize(("page", "index", "lang", "body", "why"), SNIPPETS,
                         ids=[f"{p}#{i}" for p, i, *_ in SNIPPETS])
def test_every_snippet_runs_as_written(folder: Path, page: str, index: int, lang: str,
                                       body: str, why: str | None) -> None:
    if lang not in RUN:
        return  # shown, not run: checked by test_every_fence_says_whether_it_runs
    if why is not None:
        pytest.skip(why)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "NO_COLOR": "1"}
    command = [sys.executable, "-"] if lang == "python" else ["bash", "-euo", "pipefail"]
    done = subprocess.run(command, input=body, cwd=folder, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, f"{page} block {index} failed:\n{done.stdout[-3000:]}\n" \
                                 f"{done.stderr[-3000:]}"
    assert "Warning" not in done.stderr, done.stderr


def test_every_key_the_demo_cites_is_defined_in_the_references(demo_run: DemoRun) -> None:
    references = (DOCS / "explanation/references.md").read_text(encoding="utf-8")
    glossary = (DOCS / "explanation/glossary.md").read_text(encoding="utf-8")
    for key in sorted(set(re.findall(r"\[(LBC|DMC|SSC|ASV)\]", demo_run.text))):
        assert f"**[{key}]**" in references, key
    for term in ("θ*", "CESS", "Ω", "CVaR", "ε̂_out", "CR1", "R0–R5", "Remark 2"):
        assert f"**{term}" in glossary, term


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """``mkdocs build --strict``: no warning (a broken link or anchor, a page left out of
    the navigation, a docstring the API reference cannot render) fails the build."""
    pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d",
                           str(tmp_path / "site")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-5000:]
    site = tmp_path / "site"
    api = (site / "reference/api/index.html").read_text(encoding="utf-8")
    for name in ("agentlog.record", "agentlog.window", "agentlog.estimators.certify"):
        assert name in api, name
    cli = (site / "reference/command-line/index.html").read_text(encoding="utf-8")
    for command in ("agentlog certify", "agentlog estimate reliability", "agentlog import inspect"):
        assert command in cli, command
    assert "--executor" in cli
