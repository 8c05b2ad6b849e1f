"""Certified stage rewards for training ([LBC] §5): each exit of a window scored by one
readout, grouped by the sealed entry it came from, with its group-relative advantage;
groups that are not exact cells refused with the reason.

Examples:
    >>> import agentlog as al
    >>> from agentlog.estimators import rewards
    >>> @al.window("draft")
    ... def draft(topic: str) -> str:
    ...     i = al.select([0.5, 0.5], candidates=["short", "long"], name="style")
    ...     al.score("quality", [0.4, 0.8][i])  # the readout, at the stage's exit
    ...     return f"{topic}: " + ["short", "long"][i]
    >>> for seed in range(4):  # four exits from one sealed entry
    ...     with al.record("agentlog-rewards-doc.zst", seed=seed, task="t",
    ...                    mode="w" if seed == 0 else "a"):
    ...         _ = draft("cells")
    >>> table = rewards.from_traces("agentlog-rewards-doc.zst", window="draft",
    ...                             readout="quality")
    >>> [(r.reward, round(r.advantage, 3)) for r in table.rows]
    [(0.8, 0.5), (0.8, 0.5), (0.4, -1.5), (0.8, 0.5)]
    >>> table.rows[2].completion, table.refused
    ('cells: short', ())
"""

from ._rewards import REFUSALS, RefusedGroup, RewardRow, RewardTable, from_traces

__all__ = ["REFUSALS", "RefusedGroup", "RewardRow", "RewardTable", "from_traces"]
