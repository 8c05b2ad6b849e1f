"""Windows recorded from ``python script.py`` are registered as ``__main__:…``: a replay
finds them by their qualified name in the module the user names with ``--app``.

Before, re-entry failed with the hint "pass --app __main__", which is wrong in the replay
process (its ``__main__`` is the replay, not the agent).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import agentlog as al
from agentlog.replay import Design, intervene

SCRIPT = textwrap.dedent('''
    import sys
    import agentlog as al

    @al.window("plan")
    def plan(goal: str) -> list[str]:
        ids = ["a", "b", "c"]
        return [ids[al.select([0.2, 0.5, 0.3], candidates=ids, name="step")] for _ in goal]

    if __name__ == "__main__":
        with al.record(sys.argv[1], system="script", seed=4, task="t", mode="w"):
            plan("xyz")
''')


def _recorded(tmp_path: Path, name: str) -> Path:
    (tmp_path / f"{name}.py").write_text(SCRIPT)
    trace = tmp_path / "runs.zst"
    subprocess.run([sys.executable, str(tmp_path / f"{name}.py"), str(trace)], check=True,
                   cwd=tmp_path, timeout=120)
    (view,) = al.read(trace).windows("plan")
    assert view.enter.function == "__main__:plan"
    return trace


def test_a_window_recorded_from_a_script_is_found_in_the_app_module(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = _recorded(tmp_path, "script_agent_a")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.warns(al.InstrumentationWarning,
                      match=r"recorded from __main__:plan .*replaying it as "
                            r"script_agent_a:plan"):
        res = intervene(trace, window="plan", arms=Design(), out=tmp_path / "out",
                        app="script_agent_a", mode="frozen")
    assert res.summary.done == 1 and res.summary.failed == 0, res.summary.failures
    (arm,) = (tmp_path / "out" / "arms").glob("*.zst")
    src, again = al.read(trace), al.read(arm)
    assert [s.choice for s in again.selections()] == [s.choice for s in src.selections()]
    assert again.windows("plan")[0].exit_value() == src.windows("plan")[0].exit_value()


def test_a_script_window_the_app_does_not_register_says_what_to_pass(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = _recorded(tmp_path, "script_agent_b")
    (tmp_path / "other_app.py").write_text(
        "import agentlog as al\n\n@al.window('plan')\ndef make_plan(goal):\n    return []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    res = intervene(trace, window="plan", arms=Design(), out=tmp_path / "out",
                    app="other_app", mode="frozen")
    (failure,) = res.summary.failures
    assert "a script run as `python script.py`" in failure.message
    assert "--app with the script's module name" in failure.message
    assert failure.error_type == "NotRegisteredError"
    assert "--app __main__" not in failure.message
