"""Rank intervals of a certified relation ([LBC] §3.4, Appendix A.3)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agentlog.display import html_repr, render_figure, render_notes, render_table

__all__ = [
    "RankIntervalsResult",
    "draw_rank_intervals",
    "rank_intervals",
]

BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.intp]


@dataclass(frozen=True)
class RankIntervalsResult:
    """Rank intervals of a certified relation ([LBC] §3.4, Appendix A.3).

    Attributes:
        systems: the systems, in the order given.
        intervals: ``system -> (lowest rank, highest rank)``; 1 is best. For an acyclic
            relation, ``[1 + #ancestors, n − #descendants]`` of the transitive closure: the
            range of positions the system takes over all linear extensions.
        relation: the certified relation as given, ``(better, worse)`` pairs.
        closure: its transitive closure, ``(better, worse)`` pairs, sorted.
        cycles: groups of systems each above the others through certified relations (a
            cycle makes the relation no partial order; those systems' intervals count only
            the ancestors and descendants outside their group, and they are never pinned).
    """

    systems: tuple[str, ...]
    intervals: dict[str, tuple[int, int]]
    relation: tuple[tuple[str, str], ...]
    closure: tuple[tuple[str, str], ...]
    cycles: tuple[tuple[str, ...], ...]

    def pinned(self, system: str) -> bool:
        """True when the system's interval holds a single position."""
        lo, hi = self.intervals[system]
        return lo == hi

    @property
    def added(self) -> tuple[tuple[str, str], ...]:
        """Relations the closure adds to the certified ones."""
        given = set(self.relation)
        return tuple(p for p in self.closure if p not in given)

    def to_dict(self) -> dict[str, Any]:
        return {
            "intervals": {s: list(v) for s, v in self.intervals.items()},
            "pinned": [s for s in self.systems if self.pinned(s)],
            "closure": [list(p) for p in self.closure],
            "added_by_closure": [list(p) for p in self.added],
            "cycles": [list(c) for c in self.cycles],
        }

    @html_repr
    def _repr_html_(self) -> str:
        return (render_table(["system", "rank"], ((s, rank_text(*self.intervals[s]))
                                                  for s in self.systems),
                             caption="Certified rank intervals ([LBC] §3.4; ● pinned)",
                             total=len(self.systems))
                + render_rank_figure(self.systems, self.intervals)
                + render_notes(cycle_notes(self.cycles)))


def rank_text(low: int, high: int) -> str:
    """``"2–5"``, or ``"1 ●"`` for a pinned position (as ``agentlog certify`` prints it)."""
    return f"{low} ●" if low == high else f"{low}–{high}"


def cycle_notes(cycles: Iterable[Sequence[str]]) -> list[str]:
    return [f"certified relations form a cycle among {', '.join(c)}; their intervals are "
            "never pinned" for c in cycles]


#: Systems past which the rank-interval figure is left out (the table still lists them).
MAX_FIGURE_SYSTEMS = 40


def draw_rank_intervals(ax: Any, systems: Sequence[str],
                        intervals: Mapping[str, tuple[int, int]], *,
                        labels: Mapping[str, str] | None = None,
                        refused: Iterable[str] = ()) -> None:
    """[LBC] Figure 1 on a matplotlib ``ax``: one row per system in the order given (the
    first at the top), a bar over its certified rank interval, a dot when the rank is
    pinned; ``labels``: text right of each row (e.g. its score); ``refused``: systems drawn
    grey and marked "(refused)" (every pair of theirs was refused)."""
    grey = set(refused)
    bar, pinned, muted = "#1f6fb4", "#0b3d6b", "#aaaaaa"
    n = len(systems)
    for y, s in enumerate(systems):
        lo, hi = intervals[s]
        if lo == hi:
            ax.plot(lo, y, "o", color=muted if s in grey else pinned, ms=9, zorder=3)
        else:
            ax.plot([lo, hi], [y, y], color=muted if s in grey else bar, lw=7,
                    solid_capstyle="round", alpha=0.85, zorder=2)
        if labels is not None:
            ax.text(1.01, y, labels.get(s, ""), transform=ax.get_yaxis_transform(),
                    va="center", fontsize=8)
    ax.set_yticks(range(n), [s + (" (refused)" if s in grey else "") for s in systems])
    ax.set_ylim(n - 0.5, -0.5)  # the first row at the top
    ax.set_xticks(range(1, n + 1))
    ax.set_xlim(0.5, n + 0.5)
    ax.set_xlabel("certified rank (1 = best)")
    ax.grid(alpha=0.3, axis="x")


def render_rank_figure(systems: Sequence[str], intervals: Mapping[str, tuple[int, int]], *,
                       labels: Mapping[str, str] | None = None) -> str:
    """``draw_rank_intervals`` as an HTML image; "" without matplotlib, with no system or
    with more than ``MAX_FIGURE_SYSTEMS``."""
    n = len(systems)
    if not 0 < n <= MAX_FIGURE_SYSTEMS:
        return ""
    return render_figure(lambda fig: draw_rank_intervals(fig.subplots(), systems, intervals,
                                                         labels=labels),
                         size=(6.4, 1.2 + 0.38 * n), alt="certified rank intervals")


def _closure(adj: BoolArray) -> BoolArray:
    reach = adj.copy()
    for k in range(reach.shape[0]):  # Warshall, one vectorised row sweep per pivot
        reach |= reach[:, k : k + 1] & reach[k : k + 1, :]
    return reach


def _intervals(reach: BoolArray) -> tuple[IntArray, IntArray, BoolArray]:
    n = reach.shape[0]
    mutual = reach & reach.T
    same = mutual | np.eye(n, dtype=bool)
    above = reach.T & ~same  # above[i, j]: j is an ancestor of i outside i's cycle
    below = reach & ~same
    lo = (1 + above.sum(axis=1)).astype(np.intp)
    hi = (n - below.sum(axis=1)).astype(np.intp)
    return lo, hi, np.diag(reach).copy()


def rank_intervals(systems: Sequence[str], relations: Iterable[tuple[str, str]]
                   ) -> RankIntervalsResult:
    """Rank intervals from certified ``(better, worse)`` relations.

    Args:
        systems: every system ranked (``n`` names, unique).
        relations: certified relations ``(better, worse)``; names must be in ``systems``.

    Returns:
        ``RankIntervalsResult``: per system ``[1 + #ancestors, n − #descendants]`` of the
        transitive closure, which is exactly the range of positions over all linear
        extensions of the partial order; cycles are reported in ``cycles``.
    """
    names = tuple(str(s) for s in systems)
    if len(set(names)) != len(names):
        dup = next(s for s in names if names.count(s) > 1)
        raise ValueError(f"`systems` must be unique; {dup!r} appears more than once")
    index = {s: i for i, s in enumerate(names)}
    rel: list[tuple[str, str]] = []
    adj = np.zeros((len(names), len(names)), dtype=bool)
    for pair in relations:
        if len(pair) != 2:
            raise ValueError(f"`relations` holds (better, worse) pairs; found {pair!r}")
        a, b = str(pair[0]), str(pair[1])
        for s in (a, b):
            if s not in index:
                raise ValueError(f"`relations` names {s!r}, which is not in `systems`")
        if a == b:
            raise ValueError(f"`relations` relates {a!r} to itself")
        adj[index[a], index[b]] = True
        rel.append((a, b))
    reach = _closure(adj)
    lo, hi, cyclic = _intervals(reach)
    groups: list[tuple[str, ...]] = []
    seen: set[int] = set()
    for i in np.flatnonzero(cyclic):
        if int(i) in seen:
            continue
        members = [int(j) for j in np.flatnonzero(reach[i] & reach[:, i])]
        seen.update(members)
        groups.append(tuple(names[j] for j in members))
    closure = tuple(sorted((names[i], names[j]) for i, j in zip(*np.nonzero(reach), strict=True)
                           if i != j))
    return RankIntervalsResult(
        systems=names,
        intervals={s: (int(lo[i]), int(hi[i])) for i, s in enumerate(names)},
        relation=tuple(dict.fromkeys(rel)),
        closure=closure,
        cycles=tuple(groups),
    )

