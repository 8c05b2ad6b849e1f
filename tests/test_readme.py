"""Every README snippet runs as written, from a fresh folder, after the README's install.

The README's first command installs agentlog and runs ``agentlog demo``; the snippets that
follow read what the demo wrote. Each Python block runs in its own interpreter, in order,
in one temporary folder (as a user pasting them into files would run them). Nothing in
the README, the package's files or the command line's output may point outside the
repository.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli._cli import invoke
from tests.conftest import DemoRun

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
OUTSIDE = ("../shared", "papers/00", "DESIGN.md", "/work/")
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks(kind: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(README.read_text()) if lang == kind]


@pytest.fixture(scope="module")
def demo_folder(demo_run: DemoRun, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder where the README's first command has run ``agentlog demo``: a copy of the
    session's default demo (the snippets and commands write beside it)."""
    first = blocks("bash")[0].strip()
    assert first.startswith("python3 -m venv .venv && .venv/bin/pip install -q . &&"), first
    demo = first.rsplit("&&", 1)[1].strip()
    assert demo == ".venv/bin/agentlog demo", demo
    assert demo_run.summary["totals"]["with_problems"] == 0  # `agentlog demo` exits 0
    folder = tmp_path_factory.mktemp("readme") / "work"
    shutil.copytree(demo_run.folder, folder)
    (folder / "demo-output.txt").write_text(demo_run.text)
    return folder


def test_the_readme_is_one_page_with_its_two_commands_first() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 150
    first, second = blocks("bash")[:2]
    assert text.index(first) < text.index("## ")  # both before the first section
    assert text.index(second) < text.index("## ")
    ci = (ROOT / ".ci/run").read_text()
    assert second.strip() in ci  # .ci/run runs exactly the README's test command
    home = (ROOT / "docs/index.md").read_text()  # the site's home shows the same two
    assert first.strip() in home and second.strip() in home
    python = blocks("python")
    assert len(python) == 1 and "al.record(" in python[0] and "al.verify(" in python[0]
    assert len(python[0].strip().splitlines()) <= 30
    # every fenced block says what it is: run (python, bash) or shown (text)
    kinds = {lang for lang, _ in BLOCK.findall(text)}
    assert kinds <= {"python", "bash", "text"}, kinds


def test_every_link_of_the_readme_leads_to_a_file_of_the_repository() -> None:
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if "://" not in link]
    assert local, "the README links to the docs"
    missing = [link for link in local if not (ROOT / link).exists()]
    assert missing == []


@pytest.mark.parametrize("index", range(len(blocks("python"))))
def test_every_python_snippet_runs_as_written(demo_folder: Path, index: int) -> None:
    script = demo_folder / f"snippet_{index}.py"
    script.write_text(blocks("python")[index])
    done = subprocess.run([sys.executable, str(script)], cwd=demo_folder,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"README snippet {index} failed:\n{done.stderr}"
    assert "Warning" not in done.stderr, done.stderr


def test_the_demo_then_every_suggested_command_runs(
    demo_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo's "Next:" line is made of commands that work in this environment."""
    monkeypatch.chdir(demo_folder)
    text = (demo_folder / "demo-output.txt").read_text()
    line = next(x for x in text.splitlines() if x.startswith("Next: "))
    commands = [c.strip() for c in line.removeprefix("Next: ").split("  ·  ")]
    assert len(commands) >= 5
    for command in commands:
        args = command.split()
        assert args[0] == "agentlog"
        # the shell would expand the globs; paths are relative to the demo's folder
        expanded = [str(p) for a in args[1:] for p in (sorted(Path().glob(a)) if "*" in a
                                                       else [a])]
        result = invoke(*expanded)  # in-process: the same app, no interpreter start-up
        assert result.exit_code == 0, f"{command}: {result.output[-2000:]}"


def _package_files() -> list[Path]:
    out = []
    for folder in ("agentlog", "replay", "estimators", "adapters", "cli", "examples"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in (".py", ".toml", ".md", ".txt") and \
                    "__pycache__" not in path.parts:
                out.append(path)
    return out


def test_nothing_in_the_readme_the_package_or_the_cli_points_outside_the_repository(
    demo_folder: Path,
) -> None:
    texts = {"README.md": README.read_text(),
             **{str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
                for p in (ROOT / "docs").rglob("*.md")},
             "demo output": (demo_folder / "demo-output.txt").read_text()}
    for path in _package_files():
        texts[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    commands = [[], ["demo"], ["inspect"], ["verify"], ["validity-card"], ["certify"],
                ["estimate"], ["estimate", "cess"], ["estimate", "asv"],
                ["estimate", "reliability"], ["replay"]]
    for command in commands:
        result = invoke(*command, "--help")
        assert result.exit_code == 0, (command, result.output)
        texts[f"agentlog {' '.join(command)} --help"] = result.stdout
    hits = [f"{where}: {word}" for where, text in texts.items() for word in OUTSIDE
            if word in text]
    assert hits == []


def test_every_command_the_readme_shows_runs_in_the_demo_folder(
    demo_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``bash`` block of "What no other tool does": each ``agentlog`` command exits 0,
    run in order where the demo ran (globs expanded as the shell would)."""
    import shlex

    monkeypatch.chdir(demo_folder)
    section = README.read_text().split("## What no other tool does", 1)[1].split("\n## ")[0]
    shown = [body for lang, body in BLOCK.findall(section) if lang == "bash"]
    assert shown, "the README shows the commands of what no other tool does"
    ran = 0
    for block in shown:
        text = block.replace("\\\n", " ")
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            args = shlex.split(line)
            assert args[0] == "agentlog", line
            expanded = [str(p) for a in args[1:]
                        for p in (sorted(Path().glob(a)) if any(c in a for c in "*[")
                                  else [a])]
            result = invoke(*expanded)
            assert result.exit_code == 0, f"{line}: {result.output[-2000:]}"
            ran += 1
    assert ran >= 5
