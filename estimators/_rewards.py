"""Certified stage rewards ([LBC] §5): a window's exit score as that stage's reward.

"Two versions of a stage entered from the same sealed input and scored at its exit with
the same readout and protocol are exactly matched, so ε_outside = 0 and Δobs = Δ*: the
exit score can serve as that stage's reward" ([LBC] §5, with eq. 3's ε_outside). A group
is the instances of one window that share a sealed entry (a GRPO-style group: one stage
input, several sampled exits, from ``intervene`` with replicate seeds or recorded), each
exit scored by one readout. Per instance the reward is its exit score and the
group-relative advantage ``(r − mean_g) / sd_g`` (``scale="std"``, the sample standard
deviation, 0 when every reward of the group is equal) or ``r − mean_g`` (``"none"``).

A group is refused, with the reason (as ``certify`` refuses a pair), when it is not an
exact cell:

* ``"entries differ"``: grouped by a key other than the entry (``group_by="task"`` or a
  run meta key) and its instances entered from different sealed inputs;
* ``"readout differs"``: its exits were scored on different channels (pass ``channel=``);
* ``"backbone differs"``: its runs name different backbones (run meta ``"backbone"``), or
  the model calls inside the window went to different models;
* ``"exit failed"``: a window instance failed, or never closed;
* ``"no readout"``: an exit has no score of the readout;
* ``"too few"``: fewer than ``min_group`` instances (one exit has no relative advantage).

A readout score is a ``Score`` of that name recorded inside the window instance
(``al.score`` at its exit), one tied to the transition's exit state (``transition=``
window id, ``state_hash=`` the exit hash), or one written by a channel replay of it
(``agentlog replay --channel``); several layouts of one channel are averaged.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentlog import Trace
from agentlog.records import LLMCall, Score, iter_runs, trace_sha256

from ._asv_trace import _replayed

__all__ = ["REFUSALS", "RefusedGroup", "RewardRow", "RewardTable", "from_traces"]

REFUSALS = ("entries differ", "readout differs", "backbone differs", "exit failed",
            "no readout", "too few")
TraceInput = Trace | str | os.PathLike[str]


@dataclass(frozen=True)
class RewardRow:
    """One scored exit of a certified group.

    Attributes:
        group: the group id (the entry hash in hex, or the group key).
        prompt: the stage's input: the decoded sealed entry, or ``prompt(entry)``.
        completion: the stage's output: the decoded exit.
        reward: its readout score (the mean over the channel's layouts).
        advantage: the group-relative advantage (module docs).
        run_id, window_id: the window instance.
        source, source_sha256: the trace file and its SHA-256 when read.
        entry_hash, exit_hash, receipt: hex, from the sealed records.
        readout, channel: the score name and its channel.
    """

    group: str
    prompt: Any
    completion: Any
    reward: float
    advantage: float
    run_id: str
    window_id: int
    source: str
    source_sha256: str
    entry_hash: str
    exit_hash: str
    receipt: str
    readout: str
    channel: str | None

    def as_dict(self) -> dict[str, Any]:
        """The row as the columns a trainer reads (TRL's ``prompt``/``completion`` plus
        ``reward``, ``advantage``, ``group`` and the provenance)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True)
class RefusedGroup:
    """A group that is not an exact cell: ``reason`` is one of ``REFUSALS``, ``detail``
    says what differed or was missing, ``instances`` how many window instances it had."""

    group: str
    reason: str
    detail: str
    instances: int


@dataclass(frozen=True)
class RewardTable:
    """What ``from_traces`` certified: ``rows`` (one per exit of a certified group, in
    group order) and ``refused`` groups, with the settings they were computed under."""

    rows: tuple[RewardRow, ...]
    refused: tuple[RefusedGroup, ...]
    window: str
    readout: str
    channel: str | None
    scale: str
    groups: int = field(default=0)

    def records(self) -> list[dict[str, Any]]:
        """``[row.as_dict() ...]``: e.g. ``datasets.Dataset.from_list(table.records())``."""
        return [row.as_dict() for row in self.rows]

    def to_jsonl(self, path: str | os.PathLike[str]) -> Path:
        """One JSON object per row (values that are not JSON are written as their text)."""
        out = Path(path)
        with open(out, "w", encoding="utf-8") as f:
            for row in self.records():
                f.write(json.dumps(row, default=str, ensure_ascii=False) + "\n")
        return out

    def to_parquet(self, path: str | os.PathLike[str]) -> Path:
        """The rows as one Parquet file; ``prompt`` and ``completion`` are JSON text."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = self.records()
        columns = {name: [r[name] for r in rows] for name in RewardRow.__dataclass_fields__}
        for name in ("prompt", "completion"):
            columns[name] = [json.dumps(v, default=str, ensure_ascii=False)
                             for v in columns[name]]
        table = pa.table(columns) if rows else pa.table(
            {name: pa.array([], pa.string()) for name in columns})
        out = Path(path)
        pq.write_table(table.replace_schema_metadata({
            "agentlog.rewards": json.dumps({"window": self.window, "readout": self.readout,
                                            "channel": self.channel, "scale": self.scale})}),
            out)
        return out

    def reward_function(self) -> Callable[..., list[float | None]]:
        """A reward function with TRL's ``GRPOTrainer`` signature (``f(prompts,
        completions, **columns) -> list[float | None]``): the certified reward of each
        (prompt, completion) the table holds, None for one it does not (TRL skips it).
        Prompts and completions are compared as the table's, or as their JSON text."""
        index = {(_key(r.prompt), _key(r.completion)): r.reward for r in self.rows}

        def reward(prompts: Sequence[Any], completions: Sequence[Any],
                   **columns: Any) -> list[float | None]:
            return [index.get((_key(p), _key(c))) for p, c in
                    zip(prompts, completions, strict=True)]

        return reward


def _key(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


@dataclass
class _Instance:
    run_id: str
    window_id: int
    source: str
    group: str
    entry_hash: bytes
    exit_hash: bytes | None
    receipt: bytes | None
    failed: bool
    backbone: Any
    models: frozenset[str]
    entry: Any
    exit: Any


def from_traces(
    source: TraceInput | Iterable[TraceInput],
    *,
    window: str,
    readout: str,
    channel: str | None = None,
    group_by: str = "entry",
    scale: str = "std",
    min_group: int = 2,
    prompt: Callable[[Any], Any] | None = None,
) -> RewardTable:
    """Certified stage rewards of ``window`` from recorded traces (module docs).

    Args:
        source: traces holding the window instances (e.g. ``intervene``'s arms with
            replicate seeds), and, when the exits were scored by a channel replay, that
            replay's output.
        window: the stage's window name.
        readout: the score name read at each exit.
        channel: only scores of this channel (default: any; a group whose exits were
            scored on several is refused).
        group_by: ``"entry"`` (the sealed entry hash: an exact cell by construction),
            ``"task"``, or a run meta key.
        scale: ``"std"`` or ``"none"`` (module docs).
        min_group: the fewest instances a group needs.
        prompt: a projection of the decoded entry for the ``prompt`` column.

    Raises:
        ValueError: bad arguments, or no instance of ``window`` in the traces.
    """
    if not isinstance(window, str) or not window:
        raise ValueError(f"`window` must be a window name; found {window!r}")
    if not isinstance(readout, str) or not readout:
        raise ValueError(f"`readout` must be a score name; found {readout!r}")
    if scale not in ("std", "none"):
        raise ValueError(f"`scale` must be 'std' or 'none'; found {scale!r}")
    if isinstance(min_group, bool) or not isinstance(min_group, int) or min_group < 2:
        raise ValueError(f"`min_group` must be an int >= 2; found {min_group!r}")
    instances: list[_Instance] = []
    scores: dict[tuple[str, int], list[tuple[str | None, bytes | None, float]]] = {}
    hashes: dict[str, str] = {}
    for trace, run in iter_runs(source, name="source"):
        start = run.start
        if start is None:
            continue
        path = str(trace.path)
        if path not in hashes:
            hashes[path] = _sha256(path)
        rep = _replayed(start, path)
        if rep is not None:  # a channel replay's unit: scores of its source transition
            for rec in run.records:
                if (type(rec) is Score and rec.name == readout
                        and rec.transition == rep.key[1]):
                    scores.setdefault(rep.key, []).append(
                        (rec.channel, rec.state_hash, float(rec.value)))
            continue
        inside = _descendants(run.windows)
        models: dict[int, set[str]] = {}
        for rec in run.records:
            kind = type(rec)
            if kind is Score and rec.name == readout:
                at = rec.window if rec.transition is None else rec.transition
                scores.setdefault((start.run_id, at), []).append(
                    (rec.channel, rec.state_hash if rec.transition is not None else b"",
                     float(rec.value)))
            elif kind is LLMCall:
                models.setdefault(rec.window, set()).add(rec.model)
        for w in run.windows:
            if w.name != window:
                continue
            used = frozenset().union(*(models.get(i, set()) for i in inside[w.window]))
            key = (w.entry_hash.hex() if group_by == "entry" else
                   str(start.task) if group_by == "task" else
                   json.dumps(start.meta.get(group_by), sort_keys=True, default=str))
            complete = w.exit is not None
            instances.append(_Instance(
                run_id=start.run_id, window_id=w.window, source=path, group=key,
                entry_hash=w.entry_hash, exit_hash=w.exit_hash, receipt=(
                    w.exit.receipt if complete else None),  # type: ignore[union-attr]
                failed=w.failed or not complete, backbone=start.meta.get("backbone"),
                models=used, entry=w.entry_value(),
                exit=w.exit_value() if complete and not w.failed else None))
    if not instances:
        raise ValueError(f"no instance of window {window!r} in the traces given")
    groups: dict[str, list[_Instance]] = {}
    for inst in instances:
        groups.setdefault(inst.group, []).append(inst)
    rows: list[RewardRow] = []
    refused: list[RefusedGroup] = []
    for gid, members in groups.items():
        verdict, values, channels = _judge(members, scores, channel, min_group, group_by)
        if verdict is not None:
            refused.append(RefusedGroup(gid, verdict[0], verdict[1], len(members)))
            continue
        mean = math.fsum(values) / len(values)
        sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))
        for inst, value, ch in zip(members, values, channels, strict=True):
            centred = value - mean
            adv = centred if scale == "none" else (centred / sd if sd > 0 else 0.0)
            rows.append(RewardRow(
                group=gid, prompt=inst.entry if prompt is None else prompt(inst.entry),
                completion=inst.exit, reward=value, advantage=adv, run_id=inst.run_id,
                window_id=inst.window_id, source=inst.source,
                source_sha256=hashes[inst.source], entry_hash=inst.entry_hash.hex(),
                exit_hash=(inst.exit_hash or b"").hex(),
                receipt=(inst.receipt or b"").hex(), readout=readout, channel=ch))
    return RewardTable(rows=tuple(rows), refused=tuple(refused), window=window,
                       readout=readout, channel=channel, scale=scale, groups=len(groups))


def _judge(members: list[_Instance],
           scores: dict[tuple[str, int], list[tuple[str | None, bytes | None, float]]],
           channel: str | None, min_group: int, group_by: str
           ) -> tuple[tuple[str, str] | None, list[float], list[str | None]]:
    """(reason, detail) of a refusal, else None with each member's reward and channel."""
    if group_by != "entry" and len({m.entry_hash for m in members}) > 1:
        return ("entries differ", f"{len({m.entry_hash for m in members})} different sealed "
                "entries: their exits are not of one input"), [], []
    failed = [m for m in members if m.failed]
    if failed:
        return ("exit failed", f"run {failed[0].run_id} window {failed[0].window_id} failed "
                "or never closed"), [], []
    backbones = {json.dumps(m.backbone, sort_keys=True, default=str) for m in members}
    models = {m.models for m in members if m.models}
    if len(backbones) > 1 or len(models) > 1:
        what = sorted(backbones) if len(backbones) > 1 else [sorted(s) for s in models]
        return ("backbone differs", f"the window ran on {what}"), [], []
    values: list[float] = []
    channels: list[str | None] = []
    for m in members:
        got = [(ch, v) for ch, state, v in scores.get((m.run_id, m.window_id), [])
               if (channel is None or ch == channel) and state in (b"", None, m.exit_hash)]
        if not got:
            return ("no readout", f"run {m.run_id} window {m.window_id} has no score of the "
                    "readout at its exit"), [], []
        seen = {ch for ch, _ in got}
        if len(seen) > 1:
            return ("readout differs", f"an exit is scored on channels {sorted(map(str, seen))}: "
                    "pass channel="), [], []
        values.append(math.fsum(v for _, v in got) / len(got))
        channels.append(got[0][0])
    if len(set(channels)) > 1:
        return ("readout differs", f"exits scored on channels {sorted(map(str, set(channels)))}"
                ": pass channel="), [], []
    if len(members) < min_group:
        return ("too few", f"{len(members)} instance(s); a group needs {min_group}"), [], []
    return None, values, channels


def _descendants(windows: Sequence[Any]) -> dict[int, set[int]]:
    """Each window id -> itself and the ids of the windows nested in it."""
    children: dict[int, list[int]] = {}
    for w in windows:
        children.setdefault(w.parent, []).append(w.window)
    out: dict[int, set[int]] = {}
    for w in windows:
        todo, seen = [w.window], set()
        while todo:
            i = todo.pop()
            if i not in seen:
                seen.add(i)
                todo.extend(children.get(i, ()))
        out[w.window] = seen
    return out


def _sha256(path: str) -> str:
    try:
        return trace_sha256(path)
    except (OSError, ValueError):
        return ""
