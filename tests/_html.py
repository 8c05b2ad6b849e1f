"""Reading back the HTML that ``_repr_html_`` gives: its tags balance, and its text."""

from __future__ import annotations

import html
from html.parser import HTMLParser

VOID = {"img", "br", "hr", "meta", "input", "col", "wbr"}


class _Balance(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.problems: list[str] = []
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse_html(markup: str) -> tuple[list[str], str]:
    """``(tags, text)`` of ``markup``, after checking that every element it opens is closed
    in order; the text joins the cells with ``|`` so a test can look for ``|0.500|``."""
    parser = _Balance()
    parser.feed(markup)
    parser.close()
    assert parser.problems == [], parser.problems
    assert parser.stack == [], f"left open: {parser.stack}"
    return parser.tags, "|" + "|".join(parser.text) + "|"


def cells(markup: str) -> str:
    """The text of ``markup`` (tags balanced), cells joined by ``|``."""
    return parse_html(markup)[1]


def escaped(text: str) -> str:
    return html.escape(text)
