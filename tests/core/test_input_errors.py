"""Bad input to the core's entry points is refused where it comes in, with what was expected,
what was found and what to do (issue 28): ``al.score`` values, ``al.read`` paths."""

from __future__ import annotations

import fractions
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agentlog as al


@pytest.mark.parametrize("value", ["0.8", b"0.8", None, 1 + 0j, [0.8], np.array([0.8]),
                                   np.str_("0.8")],
                         ids=["str", "bytes", "None", "complex", "list", "1-d array",
                              "numpy str"])
def test_a_score_that_is_not_a_real_number_is_refused_and_not_written(
        value: Any, trace_path: Path) -> None:
    with al.record(trace_path, seed=1):
        with pytest.raises(TypeError, match=r"`value` of score 'f1' must be a real number; "
                                            r"found \w+ .*convert it where it is computed"):
            al.score("f1", value)
        al.score("kept", 0.5)
    assert [(s.name, s.value) for s in al.read(trace_path).scores()] == [("kept", 0.5)]


@pytest.mark.parametrize(("value", "stored"), [
    (1, 1.0), (0.25, 0.25), (True, 1.0), (False, 0.0), (fractions.Fraction(1, 4), 0.25),
    (np.float32(0.5), 0.5), (np.int64(3), 3.0), (np.bool_(True), 1.0), (np.array(0.75), 0.75),
], ids=["int", "float", "True", "False", "Fraction", "float32", "int64", "numpy bool",
        "0-d array"])
def test_real_numbers_of_every_kind_are_scores(value: Any, stored: float,
                                               trace_path: Path) -> None:
    with al.record(trace_path, seed=1):
        al.score("f1", value)
    (score,) = al.read(trace_path).scores()
    assert score.value == stored and type(score.value) is float


def test_reading_a_missing_file_names_it_where_it_looked_and_what_to_do(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"no such trace file \(relative to .*\); "
                                                r"check the path, or record the run first "
                                                r"with al\.record\(path\): 'nope\.zst'") as got:
        al.read("nope.zst")
    assert got.value.filename == "nope.zst" and got.value.errno == 2
    with pytest.raises(FileNotFoundError, match=r"no such trace file; check the path"):
        al.read(tmp_path / "nope.zst")  # an absolute path needs no folder named


def test_reading_a_folder_says_how_to_read_the_traces_in_it(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError, match=r"not a trace file; read the traces in a "
                                                r"folder with al\.read_traces\(folder\)"):
        al.read(tmp_path)


def test_reading_a_trace_already_read_says_to_use_it(trace_path: Path) -> None:
    with al.record(trace_path, seed=1):
        al.score("f1", 0.5)
    trace = al.read(trace_path)
    with pytest.raises(TypeError, match=r"al\.read takes the path of a trace file \(a str or "
                                        r"os\.PathLike.*\); found a Trace, a trace already "
                                        r"read: use it as it is"):
        al.read(trace)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"al\.read takes the path .*; found int 3"):
        al.read(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"al\.iter_records takes the path .*; found a Trace"):
        list(al.iter_records(trace))  # type: ignore[arg-type]
    assert os.fspath(trace_path) == trace.path  # what the message points to
