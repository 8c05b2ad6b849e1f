"""Audit (b) of the validity card: the decision-ownership map ([DMC] §4.1, §4.2)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentlog.records import Continuation, Selection, iter_runs, trace_files

from ._validity_cells import (
    FAIL,
    NOT_PROBED,
    PASS,
    Cell,
    TracesLike,
    _combine,
    _file_name,
    _table,
)

# ------------------------------------------------------------------ (b) ownership map


@dataclass(frozen=True)
class DecisionOwnership:
    """Who owns one decision stream across the traces.

    Attributes:
        name: the stream name (``select(..., name=)`` / ``proceed(..., name=)``).
        kind: ``"select"`` or ``"proceed"``.
        owner: ``"model"``, ``"scaffold"``, ``"mixed"`` (both recorded) or
            ``"unrecorded"`` (``proceed`` records carry no owner).
        n_model, n_scaffold: records with each owner.
        n_records: every record of the stream.
        n_runs: runs in which the stream occurs.
    """

    name: str
    kind: Literal["select", "proceed"]
    owner: Literal["model", "scaffold", "mixed", "unrecorded"]
    n_model: int
    n_scaffold: int
    n_records: int
    n_runs: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "owner": self.owner,
                "n_model": self.n_model, "n_scaffold": self.n_scaffold,
                "n_records": self.n_records, "n_runs": self.n_runs}


@dataclass(frozen=True)
class OwnershipMap:
    """The decision-ownership map of a set of traces ([DMC] §4.1)."""

    decisions: tuple[DecisionOwnership, ...]
    traces: tuple[str, ...]

    @property
    def model_owned(self) -> frozenset[str]:
        """``D_model``: the streams whose every record is model-owned."""
        return frozenset(d.name for d in self.decisions if d.owner == "model")

    def __getitem__(self, name: str) -> DecisionOwnership:
        for d in self.decisions:
            if d.name == name:
                return d
        raise KeyError(f"no decision stream {name!r}; found "
                       f"{sorted(d.name for d in self.decisions)}")

    def check(self, claimed: Sequence[str] | None = None) -> tuple[Cell, ...]:
        """The cells for ``D_claimed ⊆ D_model``: the combined cell, then one per decision.

        ``claimed=None`` claims every decision in the traces.
        """
        by_name: dict[str, list[DecisionOwnership]] = defaultdict(list)
        for d in self.decisions:
            by_name[d.name].append(d)
        if claimed is None:
            names = sorted(by_name)
            if not names:
                return (Cell("ownership: model owns the claimed decisions", NOT_PROBED,
                             "the traces record no select or proceed decision; name the "
                             "claimed decisions with `claimed_decisions`"),)
            scope = "every decision in the traces"
        else:
            names = list(claimed)
            scope = "the claimed decisions"
        cells = []
        for name in names:
            entries = by_name.get(name, [])
            owners = {d.owner for d in entries}
            if not entries:
                cells.append(Cell(f"ownership: {name}", FAIL,
                                  "claimed but never recorded: no trace shows the model "
                                  "making it (the scaffold may make it silently)"))
            elif owners == {"model"}:
                n = sum(d.n_records for d in entries)
                cells.append(Cell(f"ownership: {name}", PASS, f"model-owned in all {n} "
                                  "records"))
            elif owners & {"scaffold", "mixed"}:
                n = sum(d.n_scaffold for d in entries)
                cells.append(Cell(f"ownership: {name}", FAIL,
                                  f"scaffold-owned in {n} record(s)"))
            else:
                cells.append(Cell(f"ownership: {name}", NOT_PROBED,
                                  "proceed records carry no owner; record the decision "
                                  "with select(..., owner=) to audit it"))
        status = _combine([c.status for c in cells])
        model = sorted(n for n, c in zip(names, cells, strict=True) if c.status == PASS)
        detail = (f"D_claimed ⊆ D_model over {scope}: {len(model)}/{len(names)} "
                  f"model-owned")
        return (Cell("ownership: model owns the claimed decisions", status, detail),
                *cells)

    def to_dict(self) -> dict[str, Any]:
        return {"traces": list(self.traces), "decisions": [d.to_dict() for d in self.decisions]}

    def to_markdown(self) -> str:
        rows = [[d.name, d.kind, d.owner, d.n_model, d.n_scaffold, d.n_runs]
                for d in self.decisions]
        return "\n".join(_table(["decision", "kind", "owner", "model", "scaffold", "runs"],
                                rows))


def ownership_map(traces: TracesLike) -> OwnershipMap:
    """Read which decisions the model owns and which the scaffold owns from traces.

    Args:
        traces: trace paths, folders, glob patterns or ``agentlog.Trace`` objects (one or
            a sequence); files stream one run at a time, so memory does not grow with
            their size.

    Returns:
        An ``OwnershipMap`` with one entry per (stream, kind), sorted by name.
    """
    files = trace_files(traces, name="traces")
    counts: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    runs: dict[tuple[str, str], set[tuple[int, int]]] = defaultdict(set)
    t_index, current = -1, None
    # One run at a time (agentlog.records.iter_runs): memory holds a run, not a file.
    for trace, run in iter_runs(files, name="traces"):
        if trace is not current:
            t_index, current = t_index + 1, trace
        for r in run.records:
            t = type(r)
            if t is Selection:
                counts[(r.name, "select")][r.owner] += 1
                runs[(r.name, "select")].add((t_index, r.run))
            elif t is Continuation:
                counts[(r.name, "proceed")]["unrecorded"] += 1
                runs[(r.name, "proceed")].add((t_index, r.run))
    decisions = []
    for (name, kind), c in sorted(counts.items()):
        n_model, n_scaffold = c.get("model", 0), c.get("scaffold", 0)
        owner: Literal["model", "scaffold", "mixed", "unrecorded"]
        if kind == "proceed":
            owner = "unrecorded"
        elif n_model and n_scaffold:
            owner = "mixed"
        else:
            owner = "model" if n_model else "scaffold"
        decisions.append(DecisionOwnership(
            name=name, kind="select" if kind == "select" else "proceed", owner=owner,
            n_model=n_model, n_scaffold=n_scaffold, n_records=sum(c.values()),
            n_runs=len(runs[(name, kind)])))
    return OwnershipMap(tuple(decisions), tuple(_file_name(f) for f in files))
