"""A replayed unit names who served its model calls: the model revision behind its scores."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

openai = pytest.importorskip("openai")

from agentlog.adapters import openai as adapter  # noqa: E402
from agentlog.replay import (  # noqa: E402
    ExecutionOptions,
    ModelCache,
    Unit,
    UnitContext,
    UnitScore,
    read_units,
    run_units,
)
from tests.replay import _unit_jobs as jobs  # noqa: E402

from ..adapters._providers import FakeProvider, chat_body, openai_client  # noqa: E402

PROVIDER = FakeProvider()
CLIENT = adapter.wrap(openai_client(PROVIDER))
SERVED = chat_body()


def ask_model(unit: Unit, ctx: UnitContext) -> Sequence[UnitScore]:
    """A scorer that calls a wrapped client outside any run (as channel scorers do)."""
    reply = CLIENT.chat.completions.create(
        model="gpt-4o-mini", max_tokens=2,
        messages=[{"role": "user", "content": f"state {unit.payload['x']}"}])
    return [UnitScore("margin", float(len(reply.choices[0].message.content or "")),
                      transition=int(unit.payload["x"]))]


def test_each_unit_stores_who_served_its_model_calls(tmp_path: Path) -> None:
    units = [Unit(f"u{i}", {"x": i}, {"kind": "test"}) for i in range(3)]
    summary = run_units(units, ask_model, out=tmp_path / "out.zst",
                        execution=ExecutionOptions(progress=False))
    assert summary.done == 3
    for unit in read_units(tmp_path / "out.zst").values():
        assert unit.provenance["kind"] == "test"
        assert unit.provenance["serving"] == {"served_by": [{
            "provider": "openai.chat", "model": "gpt-4o-mini",
            "response_model": SERVED["model"], "fingerprint": SERVED["system_fingerprint"],
            "calls": 1, "hits": 0, "failed": 0}]}


def test_calls_through_the_unit_context_cache_are_counted_and_hits_say_so(
        tmp_path: Path) -> None:
    units = [Unit(f"u{i}", {"x": i % 2}) for i in range(4)]  # two requests, twice each
    with ModelCache(tmp_path / "c.sqlite") as cache:
        run_units(units, jobs.cached_score, out=tmp_path / "out.zst",
                  execution=ExecutionOptions(progress=False, concurrency=1),
                  cache=cache)
    served = {k: u.provenance["serving"]["served_by"]
              for k, u in read_units(tmp_path / "out.zst").items()}
    assert {k: (s[0]["provider"], s[0]["model"], s[0]["calls"]) for k, s in served.items()} == {
        f"u{i}": ("openai.chat", "m", 1) for i in range(4)}
    assert sorted(s[0]["hits"] for s in served.values()) == [0, 0, 1, 1]


def test_a_unit_without_model_calls_stores_no_serving_entry(tmp_path: Path) -> None:
    run_units([Unit("u0", {"x": 0})], jobs.score_states, out=tmp_path / "out.zst",
              execution=ExecutionOptions(progress=False))
    assert "serving" not in read_units(tmp_path / "out.zst")["u0"].provenance
