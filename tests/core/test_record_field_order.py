"""The one record built positionally (``Selection``, in ``select``) keeps every value in its field.

Every other record is built by keyword. ``select`` builds its ``Selection`` positionally
(a measured hot constructor), so a reordered field in ``agentlog.records`` or two swapped
arguments of the same type in ``select`` must fail here rather than write a wrong trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import agentlog as al
from agentlog.records import Selection
from agentlog.reentry import Steer, steering


def test_the_selection_fields_keep_the_order_select_builds_them_in() -> None:
    assert Selection.__struct_fields__ == (
        "run", "window", "name", "step", "owner", "pool", "n", "probs", "draws", "choice",
        "n_zero", "generator", "top_k", "top_p", "raw_probs", "t_ns", "policy_probs",
        "steer", "forced", "observed",
    )


class _Halves(Steer):
    name = "halves"

    def select(self, stream: str, step: int, probs: Any, ids: tuple[Any, ...]) -> Any:
        return np.full(len(probs), 1.0 / len(probs))


class _Forced(Steer):
    name = "forced"

    def select(self, stream: str, step: int, probs: Any, ids: tuple[Any, ...]) -> Any:
        return 1


@al.window("pick")
def pick() -> None:
    for _ in range(3):  # steps 0..2 of stream "doc": the step differs from the other ints
        al.select([0.5, 0.25, 0.25], candidates=["a", "b", "c"], name="doc")
    al.select([0.0, 0.1, 0.2, 0.3, 0.4], name="trunc", owner="scaffold", top_k=2)
    with steering(_Halves()):
        al.select([0.7, 0.2, 0.1], name="steered")
    with steering(_Forced()):
        al.select([0.7, 0.2, 0.1], name="forced")


def test_a_recorded_selection_has_each_value_in_its_own_field(trace_path: Path) -> None:
    with al.record(trace_path, seed=5) as run:
        al.select([0.5, 0.5], name="outside")  # window -1, run 0: other ints than above
        pick()
    trace = al.read(trace_path)
    by_name: dict[str, list[Selection]] = {}
    for s in trace.selections():
        by_name.setdefault(s.name, []).append(s)
    (window,) = trace.windows("pick")
    (outside,) = by_name["outside"]
    assert (outside.run, outside.window, outside.step) == (run.index, -1, 0)
    doc = by_name["doc"][2]
    assert (doc.window, doc.step, doc.owner, doc.n, doc.n_zero) == (
        window.enter.window, 2, "model", 3, 0)
    assert doc.generator == run.generator and doc.t_ns >= window.enter.t_ns
    assert np.frombuffer(doc.probs).tolist() == [0.5, 0.25, 0.25]
    assert len(np.frombuffer(doc.draws)) == 3 and doc.draws != doc.probs
    assert doc.choice in (0, 1, 2) and doc.pool != doc.probs
    assert (doc.top_k, doc.top_p, doc.raw_probs, doc.policy_probs, doc.steer, doc.forced) == (
        None, None, None, None, None, False)
    (trunc,) = by_name["trunc"]
    assert (trunc.owner, trunc.top_k, trunc.n, trunc.n_zero) == ("scaffold", 2, 5, 3)
    assert trunc.choice in (3, 4)
    assert trunc.raw_probs is not None
    assert np.frombuffer(trunc.raw_probs).tolist() == [0.0, 0.1, 0.2, 0.3, 0.4]
    (steered,) = by_name["steered"]
    assert (steered.steer, steered.forced) == ("halves", False)
    assert steered.policy_probs is not None
    assert np.frombuffer(steered.policy_probs).tolist() == [0.7, 0.2, 0.1]
    assert np.allclose(np.frombuffer(steered.probs), 1 / 3)
    (forced,) = by_name["forced"]
    assert (forced.steer, forced.forced, forced.choice) == ("forced", True, 1)
    assert al.verify(trace_path).ok
