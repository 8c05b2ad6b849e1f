"""HTML for notebooks: the one place where rows become escaped tables and figures.

A ``Trace``, a run and every estimator result show themselves in Jupyter through a short
``_repr_html_`` that builds its rows and hands them to the helpers here: every label and
value is escaped, numbers read as the CLI prints them (a missing or NaN value is ``-``,
an infinite one ``∞``), and a figure is drawn only where matplotlib is installed
(``pip install 'agentlog[plot]'``), as an SVG image inside the HTML.

Examples:
    >>> from agentlog.display import format_interval, format_number, render_table
    >>> format_number(0.12345), format_number(float("nan")), format_number(7)
    ('0.123', '-', '7')
    >>> format_interval(-0.5, float("inf"), "+.2f")
    '[-0.50, ∞]'
    >>> print(render_table(["system", "mean"], [["<b>", 0.5]]))
    <table><thead><tr><th>system</th><th>mean</th></tr></thead><tbody><tr><td>&lt;b&gt;</td><td>0.500</td></tr></tbody></table>
"""

from __future__ import annotations

import base64
import functools
import html
import importlib.util
import io
import logging
import math
import numbers
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

__all__ = [
    "MAX_ROWS",
    "format_interval",
    "format_number",
    "html_repr",
    "render_estimates",
    "render_fields",
    "render_figure",
    "render_notes",
    "render_table",
]

_T = TypeVar("_T")
_logger = logging.getLogger(__name__)

#: Rows a table shows before it says how many more there are: a notebook cell stays
#: readable, and a trace of a million runs renders as fast as one of ten.
MAX_ROWS = 20


def format_number(x: Any, spec: str = ".3f") -> str:
    """``x`` as text: a real number by ``spec``, ``-`` when it is None or NaN, ``∞``/``-∞``
    when infinite; an integer (or bool) as itself; anything else by ``str``."""
    if x is None:
        return "-"
    if isinstance(x, bool | numbers.Integral):
        return str(x)
    if isinstance(x, numbers.Real):
        value = float(x)
        if math.isnan(value):
            return "-"
        if math.isinf(value):
            return "∞" if value > 0 else "-∞"
        return format(value, spec)
    return str(x)


def format_interval(low: Any, high: Any, spec: str = ".3f") -> str:
    """``[low, high]``, each end by ``format_number``."""
    return f"[{format_number(low, spec)}, {format_number(high, spec)}]"


def _cell(tag: str, value: Any) -> str:
    return f"<{tag}>{html.escape(format_number(value))}</{tag}>"


def render_table(header: Sequence[str], rows: Iterable[Sequence[Any]], *,
                 caption: str | None = None, total: int | None = None) -> str:
    """An HTML table: ``header``, then at most ``MAX_ROWS`` of ``rows`` (cells by
    ``format_number``, so pre-format a number that needs another spec). ``total``: how many
    rows there are when ``rows`` holds only the first ones; a last line says how many more."""
    shown = []
    for i, row in enumerate(rows):
        if i == MAX_ROWS:
            break
        shown.append("<tr>" + "".join(_cell("td", v) for v in row) + "</tr>")
    more = (total if total is not None else len(shown)) - len(shown)
    if more > 0:
        shown.append(f'<tr><td colspan="{max(len(header), 1)}">… and {more} more</td></tr>')
    head = "".join(_cell("th", h) for h in header)
    title = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return (f"<table>{title}<thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(shown)}</tbody></table>")


def render_fields(fields: Iterable[tuple[str, Any]], *, caption: str | None = None) -> str:
    """A two-column table of ``(name, value)`` pairs, one per row (values by
    ``format_number``)."""
    rows = "".join(f"<tr>{_cell('th', name)}{_cell('td', value)}</tr>" for name, value in fields)
    title = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{title}<tbody>{rows}</tbody></table>"


def render_estimates(rows: Iterable[Sequence[Any]], *, confidence_level: float,
                     caption: str | None = None,
                     spec: str | Callable[[str], str] = ".3f") -> str:
    """Estimates with their intervals: ``(label, estimate, low, high[, standard error])``
    per row, the numbers by ``spec`` (or by ``spec(label)``), the interval's column titled
    by ``confidence_level``; a standard-error column when the rows carry one."""
    level = format_number(100 * confidence_level, ".3g")
    body, with_se = [], False
    for label, value, low, high, *se in rows:
        how = spec if isinstance(spec, str) else spec(label)
        with_se = with_se or bool(se)
        body.append([label, format_number(value, how), format_interval(low, high, how),
                     *(format_number(x, how.lstrip("+")) for x in se)])
    return render_table(["", "estimate", f"{level}% CI", *(["SE"] * with_se)], body,
                        caption=caption)


def render_notes(lines: Iterable[str | None]) -> str:
    """Notes and warnings as a list (empty and None lines are left out; "" when none)."""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines if line)
    return f"<ul>{items}</ul>" if items else ""


def render_figure(draw: Callable[[Any], None], *, size: tuple[float, float] = (6.4, 3.0),
                  alt: str = "figure") -> str:
    """``draw(figure)`` on a new matplotlib ``Figure``, as an ``<img>`` of its SVG; "" when
    matplotlib is not installed.

    The figure never touches pyplot, so a notebook's inline backend does not show it a
    second time and no figure is left open.
    """
    if importlib.util.find_spec("matplotlib") is None:
        return ""
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=100, layout="constrained")
    draw(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="svg")
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/svg+xml;base64,{data}"/>'


def html_repr(render: Callable[[_T], str]) -> Callable[[_T], str]:
    """Make ``render`` an object's ``_repr_html_``: its HTML inside one ``<div>``.

    A display never warns (the result warned when it was made) and never raises: if
    ``render`` fails, the object's ``repr`` is shown with the error instead of a traceback
    in the user's notebook (and the traceback is logged at debug level).
    """

    @functools.wraps(render)
    def _repr_html_(self: _T) -> str:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                body = render(self)
        except Exception as exc:
            _logger.debug("rendering %s as HTML failed", type(self).__name__, exc_info=True)
            try:
                text = repr(self)
            except Exception:
                text = object.__repr__(self)
            return (f'<div class="agentlog"><pre>{html.escape(text)}</pre><p>(agentlog could '
                    f"not render this as a table: {html.escape(type(exc).__name__)}: "
                    f"{html.escape(str(exc))})</p></div>")
        return f'<div class="agentlog">{body}</div>'

    return _repr_html_
