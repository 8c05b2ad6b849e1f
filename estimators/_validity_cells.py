"""The validity card's vocabulary: statuses, claims, probe variants, ``Cell`` and the
Markdown helpers every audit of the card shares ([DMC] §5.5).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentlog import Trace

Status = Literal["pass", "fail", "not probed"]
PASS: Status = "pass"
FAIL: Status = "fail"
NOT_PROBED: Status = "not probed"

Claim = Literal["model capability", "system performance", "specification compliance",
                "self-report compliance", "none"]
#: The claims of the lattice, strongest first ([DMC] §5.5).
CLAIMS: tuple[Claim, ...] = ("model capability", "system performance",
                             "specification compliance", "self-report compliance", "none")
_LICENSES: dict[str, frozenset[str]] = {
    "model capability": frozenset({"model capability", "system performance"}),
    "system performance": frozenset({"system performance"}),
    "specification compliance": frozenset({"specification compliance"}),
    "self-report compliance": frozenset({"self-report compliance"}),
    "none": frozenset(),
}
ScorerBasis = Literal["outcome", "specification"]

CORRECT = "correct"
EMPTY = "empty"
FABRICATED = "fabricated"
DUPLICATE_LADEN = "duplicate-laden"
CONTRADICTORY = "contradictory metadata"
VARIANTS = (CORRECT, EMPTY, FABRICATED, DUPLICATE_LADEN, CONTRADICTORY)
DEGRADED = (EMPTY, FABRICATED, DUPLICATE_LADEN)

TracesLike = str | os.PathLike[str] | Trace | Sequence[str | os.PathLike[str] | Trace]


@dataclass(frozen=True)
class Cell:
    """One item of the card: ``status`` is ``"pass"``, ``"fail"`` or ``"not probed"``."""

    item: str
    status: Status
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"item": self.item, "status": self.status, "detail": self.detail}


def _file_name(item: Trace | os.PathLike[str] | str) -> str:
    """The file a trace comes from, for an item of ``agentlog.records.trace_files``."""
    return str(item.path) if isinstance(item, Trace) else os.fspath(item)


def _combine(statuses: Sequence[Status]) -> Status:
    """``fail`` if any fails, ``pass`` only if there is at least one and all pass."""
    if FAIL in statuses:
        return FAIL
    if statuses and all(s == PASS for s in statuses):
        return PASS
    return NOT_PROBED


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _fmt(x: float) -> str:
    return "—" if math.isnan(x) else f"{x:.3f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(_md(h) for h in header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
    return out
