"""A trace and its runs show themselves in a notebook as escaped HTML tables
(``agentlog.display``, the helpers every ``_repr_html_`` builds its rows with)."""

from __future__ import annotations

import base64
import doctest
import importlib.util
import warnings
from pathlib import Path

import pytest

import agentlog as al
from agentlog import display
from agentlog.display import (
    MAX_ROWS,
    format_interval,
    format_number,
    html_repr,
    render_estimates,
    render_fields,
    render_figure,
    render_table,
)
from tests._html import cells, parse_html

HOSTILE = "<script>alert(1)</script>"


def test_the_module_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = doctest.testmod(display, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize(("value", "spec", "text"), [
    (0.12345, ".3f", "0.123"), (-0.5, "+.3f", "-0.500"), (0.425, ".1%", "42.5%"),
    (float("nan"), ".3f", "-"), (None, ".3f", "-"), (float("inf"), ".3f", "∞"),
    (float("-inf"), ".3f", "-∞"), (7, ".3f", "7"), (True, ".3f", "True"), ("a", ".3f", "a"),
])
def test_a_number_reads_as_the_cli_prints_it(value: object, spec: str, text: str) -> None:
    assert format_number(value, spec) == text


def test_numpy_scalars_are_numbers() -> None:
    np = pytest.importorskip("numpy")
    assert format_number(np.float64(0.25)) == "0.250"
    assert format_number(np.int64(3)) == "3"
    assert format_number(np.float32("nan")) == "-"
    assert format_interval(np.float64(-1), np.float64(1), "+.1f") == "[-1.0, +1.0]"


def test_a_table_escapes_every_label_and_value() -> None:
    markup = render_table([HOSTILE, "value"], [[HOSTILE, 0.5]], caption=HOSTILE)
    tags, text = parse_html(markup)
    assert "script" not in tags
    assert HOSTILE not in markup
    assert text.count(HOSTILE) == 3  # the reader sees the label, as text
    assert "|0.500|" in text


def test_a_long_table_shows_its_first_rows_and_says_how_many_more() -> None:
    text = cells(render_table(["i"], ([i] for i in range(1000)), total=1000))
    assert f"|{MAX_ROWS - 1}|" in text and f"|{MAX_ROWS}|" not in text
    assert f"… and {1000 - MAX_ROWS} more" in text


def test_fields_and_estimates_render_names_values_and_intervals() -> None:
    text = cells(render_fields([("n", 12), ("mean", float("nan"))], caption="Summary"))
    assert "|Summary|n|12|mean|-|" in text
    text = cells(render_estimates([("Δsel", 0.3, 0.1, 0.5, 0.1)], confidence_level=0.9,
                                  spec="+.3f"))
    assert "|90% CI|SE|" in text and "|Δsel|+0.300|[+0.100, +0.500]|0.100|" in text
    assert "SE" not in cells(render_estimates([("x", 1.0, 0.0, 2.0)], confidence_level=0.95))


class _Broken:
    def __repr__(self) -> str:
        return f"<Broken {HOSTILE}>"

    @html_repr
    def _repr_html_(self) -> str:
        raise ZeroDivisionError("no rows")


class _Warns:
    @html_repr
    def _repr_html_(self) -> str:
        warnings.warn("a display must not warn", RuntimeWarning, stacklevel=1)
        return render_fields([("ok", 1)])


def test_a_display_that_fails_shows_the_repr_and_the_error_instead_of_raising() -> None:
    markup = _Broken()._repr_html_()
    tags, text = parse_html(markup)
    assert "script" not in tags
    assert f"<Broken {HOSTILE}>" in text and "ZeroDivisionError: no rows" in text


def test_a_display_never_warns() -> None:
    assert "|ok|1|" in cells(_Warns()._repr_html_())  # filterwarnings = error would raise


def test_a_figure_is_an_svg_image_with_matplotlib_and_nothing_without(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")

    def draw(fig: object) -> None:
        fig.subplots().plot([1, 2], [3, 4])  # type: ignore[attr-defined]

    markup = render_figure(draw, alt=HOSTILE)
    tags, _ = parse_html(markup)
    assert tags == ["img"]
    data = markup.split("base64,", 1)[1].split('"', 1)[0]
    assert b"<svg" in base64.b64decode(data)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert render_figure(draw) == ""


# ------------------------------------------------------------------ a trace and its runs


@al.window("html-retrieval")
def _retrieve(fail: bool) -> int:
    i = al.select([0.7, 0.3], candidates=["d1", "d2"], name="doc")
    al.score("f1", 0.25)
    if fail:
        raise ValueError("no documents")
    return i


def _record(path: Path) -> al.Trace:
    with al.record(str(path), system=HOSTILE, seed=7, task="q-1", mode="w"):
        _retrieve(False)
        al.score("opened_mean", 0.125)
    with pytest.raises(ValueError, match="no documents"), \
            al.record(str(path), system="second", seed=8, task="q-2", mode="a"):
        _retrieve(True)
    return al.read(str(path))


def test_a_trace_shows_its_file_runs_and_windows(trace_path: Path) -> None:
    trace = _record(trace_path)
    markup = trace._repr_html_()
    tags, text = parse_html(markup)
    assert "script" not in tags and HOSTILE not in markup
    assert f"|path|{trace_path}|" in text
    assert f"|records|{trace.records_recovered}|frames|{trace.frames}|runs|2|" in text
    assert "|truncated|no|" in text
    first, second = trace.runs
    assert f"|0|{first.run_id}|{HOSTILE}|q-1|7|ok|1|" in text
    assert f"|1|{second.run_id}|second|q-2|8|failed (ValueError)|1|" in text
    assert "|html-retrieval|2|1|" in text  # two instances, one not ok


def test_a_run_shows_its_windows_and_scores(trace_path: Path) -> None:
    run = _record(trace_path).runs[0]
    text = cells(run._repr_html_())
    assert f"|run_id|{run.run_id}|system|{HOSTILE}|task|q-1|seed|7|status|ok|" in text
    assert "|0|html-retrieval|-1|ok|" in text
    assert "|f1|0.250|0|-|" in text and "|opened_mean|0.125|run|-|" in text


def test_a_truncated_trace_says_so_and_its_cut_run_is_not_ended(trace_path: Path) -> None:
    _record(trace_path)
    data = trace_path.read_bytes()
    trace_path.write_bytes(data[: len(data) // 2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reading a cut file may warn; that is not the test
        trace = al.read(str(trace_path))
    text = cells(trace._repr_html_())
    assert "|truncated|yes (" in text
    assert "not ended" in text or "|runs|0|" in text


def test_an_empty_trace_renders() -> None:
    text = cells(al.Trace(path="empty.zst", records=[])._repr_html_())
    assert "|runs|0|" in text and "|format version|-|" in text
