"""What ``verify`` reports: ``Problem`` and ``VerifyReport``, and the stored chain head."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Problem", "VerifyReport", "parse_chain_head"]


@dataclass(frozen=True)
class Problem:
    """One thing that does not hold. ``record`` is the index of the record in the file."""

    kind: str
    message: str
    run: int | None = None
    record: int | None = None

    def __str__(self) -> str:
        where = []
        if self.run is not None:
            where.append(f"run {self.run}")
        if self.record is not None:
            where.append(f"record {self.record}")
        prefix = f"[{self.kind}]" + (f" ({', '.join(where)})" if where else "")
        return f"{prefix} {self.message}"


@dataclass
class VerifyReport:
    """What ``verify`` found in one trace file.

    Attributes:
        path: the file.
        problems: what does not hold (at most ``MAX_PROBLEMS_PER_KIND`` of each kind,
            then one line counting the rest).
        checked: how many of each thing were checked.
        truncated, bytes_dropped: whether the file ends inside a frame, and how many
            bytes follow its last complete frame.
        records, runs, frames: what the file holds.
        notes: what could not be checked and why (not problems), e.g. a trace written
            before run digests existed.
        keyed_runs, chain_head: how many runs the file's chain of keyed runs holds, and
            its head ``"<position>:<hex digest>"`` (None without keyed runs). Store the
            head when you record; ``verify(path, key=..., expect_head=head)`` later
            proves that no keyed run up to it was removed, including from the end.
    """

    path: str
    problems: list[Problem] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)
    truncated: bool = False
    bytes_dropped: int = 0
    records: int = 0
    runs: int = 0
    frames: int = 0
    notes: list[str] = field(default_factory=list)
    keyed_runs: int = 0
    chain_head: str | None = None

    @property
    def ok(self) -> bool:
        """True when nothing is wrong (a truncated tail is a problem)."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "ok": self.ok,
            "records": self.records,
            "runs": self.runs,
            "frames": self.frames,
            "truncated": self.truncated,
            "bytes_dropped": self.bytes_dropped,
            "checked": dict(self.checked),
            "notes": list(self.notes),
            "keyed_runs": self.keyed_runs,
            "chain_head": self.chain_head,
            "problems": [
                {"kind": p.kind, "message": p.message, "run": p.run, "record": p.record}
                for p in self.problems
            ],
        }


def parse_chain_head(head: str | None, *, keyed: bool) -> tuple[int, bytes] | None:
    """``"<position>:<hex digest>"`` (a ``VerifyReport.chain_head``) as (position, digest).

    Raises:
        ValueError: not of that form, or given without a key.
    """
    if head is None:
        return None
    if not isinstance(head, str):
        raise TypeError(f"`expect_head` must be a str like '12:<64 hex digits>' (a "
                        f"VerifyReport.chain_head); found {type(head).__name__}")
    position, _, digest = head.strip().partition(":")
    try:
        n, raw = int(position), bytes.fromhex(digest)
    except ValueError:
        n, raw = 0, b""
    if n < 1 or len(raw) != 32:
        raise ValueError(f"`expect_head` must be '<position>:<64 hex digits>', as verify "
                         f"reports it in chain_head; found {head!r}")
    if not keyed:
        raise ValueError("`expect_head` needs the key the runs were recorded with: without "
                         "it the chain's digests are not checked, so a head proves nothing")
    return n, raw
