"""Counterfactual choices read off recorded draws: a selection steer applied to the noise a
selection was drawn with, without re-running anything.

Under the Gumbel-max model a selection is ``argmax(log p + g)``; under an intervention that
replaces the vector by ``q`` the same decision is ``argmax(log q + g)`` on the same ``g``.
For a choice made by agentlog the recorded ``g`` is the draw itself; for one made elsewhere
(``al.select(..., observed=k)``: an API model's sampled answer, an imported log's) it is the
posterior noise given the vector and the observed choice, so the counterfactual is paired
with what was observed, not a fresh draw (Oberst & Sontag 2019, Gumbel-max SCMs). This
covers one decision; what the rest of a run would have done after it needs a re-entry
(``intervene``), which imported runs cannot have.

Examples:
    >>> import agentlog as al
    >>> from agentlog.replay import counterfactual_choices
    >>> from agentlog.replay.interventions import Uniform
    >>> with al.record("agentlog-cf-doc.zst", seed=2, task="q1", mode="w"):
    ...     k = al.select([0.7, 0.2, 0.1], candidates=["A", "B", "C"], name="answer",
    ...                   observed=0)
    >>> (row,) = counterfactual_choices("agentlog-cf-doc.zst", stream="answer",
    ...                                 steer=Uniform())
    >>> row.factual, row.drawn, row.counterfactual in ("A", "B", "C")
    ('A', 'posterior', True)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentlog import Trace
from agentlog.records import Selection, iter_runs
from agentlog.reentry import Steer

__all__ = ["CounterfactualChoice", "counterfactual_choices"]

TraceInput = Trace | str | os.PathLike[str]


@dataclass(frozen=True)
class CounterfactualChoice:
    """One recorded selection and its counterfactual under a steer, on the same noise.

    Attributes:
        trace: the trace file; ``run_id``, ``task``: its run; ``window``: the window id
            (-1 outside any window); ``stream``, ``step``: the selection.
        drawn: ``"prior"`` (drawn by agentlog) or ``"posterior"`` (observed elsewhere).
        factual, counterfactual: the candidate ids chosen and that the steer would choose.
        entry: the decoded entry of the selection's window (None outside any window): an
            imported sample's ``{"input", "target"}``.
    """

    trace: str
    run_id: str
    task: str | None
    window: int
    stream: str
    step: int
    drawn: str
    factual: Any
    counterfactual: Any
    entry: Any = None

    @property
    def changed(self) -> bool:
        return bool(self.factual != self.counterfactual)


def counterfactual_choices(traces: TraceInput | Iterable[TraceInput], *, stream: str,
                           steer: Steer) -> Iterator[CounterfactualChoice]:
    """For every selection of ``stream`` in ``traces``, the choice ``steer`` would make on
    its recorded noise: ``argmax(log q + g)`` with ``q`` the steer's vector for the agent's
    own (``policy_probs`` when the recording was itself steered).

    Args:
        traces: trace files, folders (every ``*.zst`` below) or ``al.Trace`` objects.
        stream: the selection stream (``al.select(name=...)``).
        steer: a selection intervention (``Uniform()``, ``Temperature(t)``, ``Reverse()``,
            ``Permute(order)`` or your own ``Steer``); a steer that leaves a draw alone
            leaves its choice as it was.

    Raises:
        ValueError: ``steer`` is not a ``Steer``; the traces cannot be read (the reader's
            errors).
    """
    if not isinstance(steer, Steer):
        raise ValueError(f"`steer` must be a selection intervention (a Steer such as "
                         f"Uniform() or Temperature(0.5)); found {steer!r}")
    for trace, run in iter_runs(traces, name="traces"):
        start = run.start
        entries: dict[int, Any] = {}
        for sel in run.records:
            if type(sel) is not Selection or sel.name != stream:
                continue
            ids = tuple(trace.candidates(sel))
            policy = trace.policy_probs(sel)
            agent = trace.probs(sel) if policy is None else policy
            noise = trace.draws(sel)
            out = steer.select(stream, sel.step, agent, ids)
            if out is None:
                q = agent
            elif isinstance(out, int | np.integer):
                q = np.eye(len(ids))[int(out)]
            else:
                q = np.asarray(out, dtype=np.float64)
            with np.errstate(divide="ignore"):
                counterfactual = int(np.argmax(np.log(q) + noise))
            if sel.window >= 0 and sel.window not in entries:
                view = next((v for v in run.windows if v.window == sel.window), None)
                entries[sel.window] = None if view is None else view.entry_value()
            yield CounterfactualChoice(
                trace=trace.path, run_id="" if start is None else start.run_id,
                task=None if start is None else start.task, window=sel.window,
                stream=stream, step=sel.step, drawn=sel.drawn, factual=ids[sel.choice],
                counterfactual=ids[counterfactual], entry=entries.get(sel.window))
