"""select / proceed: validation, identity-keyed draws, logging, steering."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

import agentlog as al
from agentlog import _noise, _pools
from agentlog._steering import Steer, steering
from agentlog.records import Continuation, Selection
from tests.conftest import of_type


def test_select_validates_the_vector_with_messages_that_name_the_problem() -> None:
    with pytest.raises(ValueError, match="must be finite; found nan at index 1"):
        al.select([0.5, float("nan"), 0.5])
    with pytest.raises(ValueError, match=r"must be non-negative; found -0\.1 at index 0"):
        al.select([-0.1, 1.1])
    with pytest.raises(ValueError, match=r"must sum to 1 within 1e-06; found sum 0\.9"):
        al.select([0.5, 0.4])
    with pytest.raises(ValueError, match=r"non-empty 1-D vector; found shape \(2, 2\)"):
        al.select(np.eye(2) / 2)
    with pytest.raises(ValueError, match=r"non-empty 1-D vector; found shape \(0,\)"):
        al.select([])
    with pytest.raises(ValueError, match="has 3 ids but `probs` has 2"):
        al.select([0.5, 0.5], candidates=["a", "b", "c"])
    with pytest.raises(ValueError, match="cannot normalise an all-zero vector"):
        al.select([0.0, 0.0], normalize=True)
    with pytest.raises(ValueError, match="`owner` must be 'model' or 'scaffold'"):
        al.select([1.0], owner="user")  # type: ignore[arg-type]


def test_proceed_validates_its_probability() -> None:
    with pytest.raises(ValueError, match=r"must be in \[0, 1\]; found nan"):
        al.proceed(float("nan"))
    with pytest.raises(ValueError, match=r"must be in \[0, 1\]; found 1.5"):
        al.proceed(1.5)
    with pytest.raises(TypeError, match="must be a number; found str"):
        al.proceed("high")  # type: ignore[arg-type]


def test_without_a_recorder_select_and_proceed_still_decide() -> None:
    assert al.select([0.0, 1.0]) == 1
    assert al.proceed(1.0) is True and al.proceed(0.0) is False


def test_select_records_vector_pool_draws_and_the_gumbel_max_choice(trace_path: Path) -> None:
    ids = ["a", "b", "c", "d"]
    p = np.array([0.1, 0.2, 0.3, 0.4])
    with al.record(trace_path, seed=42):
        choices = [al.select(p, candidates=ids, name="doc", owner="scaffold") for _ in range(20)]
    sels = of_type(al.read(trace_path), Selection)
    assert [s.step for s in sels] == list(range(20))
    for s, c in zip(sels, choices, strict=True):
        draws = np.frombuffer(s.draws, "<f8")
        np.testing.assert_array_equal(np.frombuffer(s.probs, "<f8"), p)
        np.testing.assert_array_equal(
            draws, _noise.gumbel(_pools.pool(ids, 4).keys, 42, "doc", s.step))
        assert s.choice == c == int(np.argmax(np.log(p) + draws))
        assert s.owner == "scaffold" and s.n == 4 and s.n_zero == 0
    assert al.verify(trace_path).ok


def test_zero_probabilities_are_allowed_counted_and_never_chosen(trace_path: Path) -> None:
    with al.record(trace_path, seed=1):
        picks = {al.select([0.0, 0.5, 0.0, 0.5]) for _ in range(50)}
    assert picks <= {1, 3}
    assert {s.n_zero for s in of_type(al.read(trace_path), Selection)} == {2}


def test_reversing_the_pool_keeps_each_documents_draw(tmp_path: Path) -> None:
    ids = [f"d{i}" for i in range(30)]
    p = np.full(30, 1 / 30)
    for name, pool in (("fwd", ids), ("rev", ids[::-1])):
        with al.record(tmp_path / f"{name}.zst", seed=5):
            al.select(p, candidates=pool, name="doc")
    fwd = of_type(al.read(tmp_path / "fwd.zst"), Selection)[0]
    rev = of_type(al.read(tmp_path / "rev.zst"), Selection)[0]
    np.testing.assert_array_equal(np.frombuffer(fwd.draws, "<f8"),
                                  np.frombuffer(rev.draws, "<f8")[::-1])
    assert ids[fwd.choice] == ids[::-1][rev.choice]  # uniform p: the same document wins


def test_top_k_and_top_p_truncate_and_log_the_untruncated_vector(trace_path: Path) -> None:
    p = [0.4, 0.3, 0.2, 0.1]
    with al.record(trace_path, seed=3):
        for _ in range(30):
            assert al.select(p, top_k=2) in (0, 1)
        for _ in range(30):
            assert al.select(p, top_p=0.65) in (0, 1)
    sels = of_type(al.read(trace_path), Selection)
    np.testing.assert_allclose(np.frombuffer(sels[0].probs, "<f8"), [4 / 7, 3 / 7, 0, 0])
    np.testing.assert_array_equal(np.frombuffer(sels[0].raw_probs, "<f8"), p)
    assert sels[0].top_k == 2 and sels[-1].top_p == 0.65
    assert al.verify(trace_path).ok


def test_proceed_records_p_u_and_the_decision_u_below_p(trace_path: Path) -> None:
    with al.record(trace_path, seed=8):
        decisions = [al.proceed(0.6, name="stop") for _ in range(200)]
    conts = of_type(al.read(trace_path), Continuation)
    for c, d in zip(conts, decisions, strict=True):
        assert c.u == _noise.uniform(8, "stop", c.step) and c.decision == d == (c.u < 0.6)
    # Bernoulli(0.6) over 200 draws: SE = sqrt(.6*.4/200) ≈ 0.035
    assert abs(np.mean(decisions) - 0.6) < 4 * np.sqrt(0.24 / 200)
    assert al.verify(trace_path).ok


def test_a_steer_replaces_the_vector_and_keeps_the_agents_own(trace_path: Path) -> None:
    class Uniform(Steer):
        name = "uniform"

        def select(self, stream, step, probs, ids):  # type: ignore[no-untyped-def]
            return np.full(len(probs), 1 / len(probs))

    class FixedHorizon(Steer):
        name = "fixed-horizon"

        def proceed(self, stream, step, p):  # type: ignore[no-untyped-def]
            return step < 2

    with al.record(trace_path, seed=4), steering(Uniform()):
        al.select([0.9, 0.1], candidates=["a", "b"], name="doc")
    with al.record(trace_path.with_name("h.zst"), seed=4), steering(FixedHorizon()):
        assert [al.proceed(0.0, name="stop") for _ in range(4)] == [True, True, False, False]
    sel = of_type(al.read(trace_path), Selection)[0]
    np.testing.assert_array_equal(np.frombuffer(sel.probs, "<f8"), [0.5, 0.5])
    np.testing.assert_array_equal(np.frombuffer(sel.policy_probs, "<f8"), [0.9, 0.1])
    assert sel.steer == "uniform" and not sel.forced
    conts = of_type(al.read(trace_path.with_name("h.zst")), Continuation)
    assert all(c.forced and c.steer == "fixed-horizon" for c in conts)
    assert al.verify(trace_path).ok and al.verify(trace_path.with_name("h.zst")).ok


def test_verify_catches_a_choice_that_is_not_the_gumbel_argmax(trace_path: Path) -> None:
    import msgspec

    from agentlog._writer import TraceWriter

    with al.record(trace_path, seed=2):
        al.select([0.5, 0.5], candidates=["a", "b"], name="doc")
    records = al.read(trace_path).records
    forged = trace_path.with_name("forged.zst")
    with TraceWriter(forged) as w:
        for r in records:
            if isinstance(r, Selection):
                r = msgspec.structs.replace(r, choice=1 - r.choice)
            w.put(r)
    problems = al.verify(forged).problems
    # The choice check names the draw; the run digest catches the edit as well.
    assert [p.kind for p in problems] == ["choice", "digest"]
    assert "argmax(log p + g)" in problems[0].message


def test_select_from_many_threads_with_tiny_caches_never_raises(
    trace_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Concurrent evictions of the pool caches must not raise KeyError into the agent.

    White-box test of ``agentlog._pools``' caches: shrunk to one entry so that every
    miss evicts."""
    import sys

    from agentlog.context import copy_context_executor

    # Caches of one entry: every miss evicts, so threads evict the same entry at once.
    monkeypatch.setattr(_pools, "_POOL_CACHE_SIZE", 1)
    monkeypatch.setattr(_pools, "_LIST_CACHE_SIZE", 1, raising=False)
    monkeypatch.setattr(_pools, "_pool_cache", {})
    monkeypatch.setattr(_pools, "_list_cache", {})
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter allows
    n_threads, per_thread = 8, 300

    def work(t: int) -> list[int]:
        out = []
        for i in range(per_thread):
            ids = [f"t{t}-{i}-{j}" for j in range(3)]  # a fresh list: always a miss
            out.append(al.select([0.2, 0.3, 0.5], candidates=ids, name=f"s{t}"))
            # seen again: found in the list cache (which took it in, evicting, at first sight)
            out.append(al.select([0.2, 0.3, 0.5], candidates=ids, name=f"s{t}"))
        return out

    try:
        with al.record(trace_path, seed=3), copy_context_executor(n_threads) as pool:
            results = list(pool.map(work, range(n_threads)))
    finally:
        sys.setswitchinterval(previous)
    assert all(len(r) == 2 * per_thread and set(r) <= {0, 1, 2} for r in results)
    selections = of_type(al.read(trace_path), Selection)
    assert len(selections) == 2 * n_threads * per_thread
    # Each stream's steps are 0..2 per_thread - 1: every call was recorded exactly once.
    for t in range(n_threads):
        steps = sorted(s.step for s in selections if s.name == f"s{t}")
        assert steps == list(range(2 * per_thread))


# Change detector: digests of what al.select recorded at N = 200 and N = 1,000 (the numpy
# path) before its passes were cut down (2026-12-01), computed by that code. A change
# here changes the draws of every trace: verification and replay of recorded runs break.
PINNED_CHOICES = [105, 52, 160, 12, 43, 67, 174, 147, 69, 833, 772, 130, 341, 957, 830, 234,
                  876, 224]
PINNED_N_ZERO = [0, 0, 0, 3, 3, 3, 0, 0, 0, 0, 0, 0, 3, 3, 3, 0, 0, 0]
PINNED_DRAWS = "a5ec8cdc71964dd6"  # sha256 of the recorded draws, in file order
PINNED_UNIFORMS = "c7c7245ed635ae25"  # the uniforms under them: the same on every platform


def test_draws_choices_and_zero_counts_at_n_200_and_1000_are_pinned(trace_path: Path) -> None:
    rng = np.random.default_rng(2026)
    cases = []
    for n in (200, 1000):
        p = rng.dirichlet(np.ones(n))
        z = p.copy()
        z[[3, 77, 150]] = 0.0
        cases += [(n, p, False), (n, z / z.sum(), False), (n, p * 7.0, True)]
    with al.record(trace_path, seed=2026):
        choices = [al.select(p, candidates=[f"doc-{i:05d}" for i in range(n)], name=f"s{n}",
                             normalize=norm)
                   for n, p, norm in cases for _ in range(3)]
    sels = of_type(al.read(trace_path), Selection)
    assert choices == [s.choice for s in sels] == PINNED_CHOICES
    assert [s.n_zero for s in sels] == PINNED_N_ZERO
    draws = hashlib.sha256(b"".join(bytes(s.draws) for s in sels)).hexdigest()[:16]
    assert draws == PINNED_DRAWS
    uniforms = b"".join(
        _noise.uniforms(_pools.pool([f"doc-{i:05d}" for i in range(n)], n).keys,
                        _noise.step_base(2026, f"s{n}", k)).tobytes()
        for n in (200, 1000) for k in range(9))
    assert hashlib.sha256(uniforms).hexdigest()[:16] == PINNED_UNIFORMS
    assert al.verify(trace_path).ok


@pytest.mark.parametrize("n", [3, 200])
def test_an_entry_that_normalises_to_zero_is_counted_as_a_zero(trace_path: Path, n: int) -> None:
    # The smallest subnormal halves to 0.0: select skips its zero count only when the
    # normalised vector's smallest entry is positive, so this one must be counted.
    scores = np.full(n, 2.0 / (n - 1))
    scores[0] = 5e-324
    with al.record(trace_path, seed=3):
        choice = al.select(scores, normalize=True)
    (sel,) = of_type(al.read(trace_path), Selection)
    probs = np.frombuffer(sel.probs, "<f8")
    assert probs[0] == 0.0 and sel.n_zero == 1 and choice != 0
