"""Posterior Gumbel noise for a choice made outside agentlog (``al.posterior_draws``,
``al.select(..., observed=)``): it always reproduces the observed choice, and the
counterfactual choices it gives under another vector have the joint law the Gumbel-max
structural model gives with the true noise (two-sample tests over 10⁵ draws)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

import agentlog as al
from agentlog.reentry import Steer, steering

P = np.array([0.5, 0.25, 0.15, 0.1])
Q = np.array([0.1, 0.2, 0.3, 0.4])
N = 100_000
ALPHA = 1e-3  # each test's false-alarm rate under a correct sampler


def test_the_draws_always_make_the_observed_choice_the_argmax() -> None:
    rng = np.random.default_rng(1)
    for _ in range(2_000):
        n = int(rng.integers(1, 12))
        p = rng.dirichlet(np.full(n, 0.3))
        p[rng.random(n) < 0.2] = 0.0  # zeros: never the argmax, whatever their noise
        if p.sum() == 0:
            continue
        p /= p.sum()
        k = int(rng.choice(n, p=p))
        g = al.posterior_draws(p, k, seed=rng)
        with np.errstate(divide="ignore"):
            scores = np.log(p) + g
        assert int(np.argmax(scores)) == k and np.isfinite(g).all()


def _posterior_batch(p: np.ndarray, ks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.stack([al.posterior_draws(p, int(k), seed=rng) for k in ks])


def test_mixed_over_the_choice_the_noise_is_the_prior() -> None:
    """Σ_k p_k · posterior(g | k) is the i.i.d. standard Gumbel prior: each coordinate
    passes a Kolmogorov-Smirnov test against Gumbel(0, 1)."""
    rng = np.random.default_rng(2)
    ks = rng.choice(len(P), size=N // 4, p=P)
    g = _posterior_batch(P, ks, rng)
    for i in range(len(P)):
        assert stats.kstest(g[:, i], stats.gumbel_r.cdf).pvalue > ALPHA


def test_counterfactual_choices_have_the_joint_law_of_the_true_noise() -> None:
    """(factual, counterfactual) under Q: from the true noise, and from an observed factual
    choice plus posterior noise. A chi-square test of homogeneity over the 4x4 cells."""
    rng = np.random.default_rng(3)
    true_g = rng.gumbel(size=(N, len(P)))
    factual = np.argmax(np.log(P) + true_g, axis=1)
    counter = np.argmax(np.log(Q) + true_g, axis=1)
    observed = rng.choice(len(P), size=N, p=P)  # the factual choices alone, as observed
    post = _posterior_batch(P, observed, rng)
    assert (np.argmax(np.log(P) + post, axis=1) == observed).all()
    counter_post = np.argmax(np.log(Q) + post, axis=1)
    table = np.zeros((2, len(P) * len(P)))
    np.add.at(table[0], factual * len(P) + counter, 1)
    np.add.at(table[1], observed * len(P) + counter_post, 1)
    table = table[:, table.sum(axis=0) > 0]
    assert stats.chi2_contingency(table).pvalue > ALPHA
    # Not the independent coupling: fresh noise would pair them far less often.
    fresh = np.argmax(np.log(Q) + rng.gumbel(size=(N, len(P))), axis=1)
    stay_true, stay_fresh = (factual == counter).mean(), (observed == fresh).mean()
    se = np.sqrt(stay_true * (1 - stay_true) / N)
    assert stay_true - stay_fresh > 10 * se
    assert abs((observed == counter_post).mean() - stay_true) < 4 * se * np.sqrt(2)


def test_bad_inputs_are_named() -> None:
    with pytest.raises(ValueError, match="has probability 0"):
        al.posterior_draws([0.5, 0.5, 0.0], 2)
    with pytest.raises(ValueError, match="outside the 2 probabilities"):
        al.posterior_draws([0.5, 0.5], 2)
    with pytest.raises(ValueError, match="sum to 1"):
        al.posterior_draws([0.5, 0.6], 0)
    with pytest.raises(ValueError, match="must be an int index"):
        al.posterior_draws([0.5, 0.5], True)


# ----------------------------------------------------------------------------- select


def _ask(observed: int) -> int:
    return al.select(P, candidates=["a", "b", "c", "d"], name="answer", observed=observed)


def test_select_records_an_observed_choice_with_its_posterior_noise(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    with al.record(path, seed=7, task="q"):
        assert [_ask(k) for k in (2, 0, 3)] == [2, 0, 3]
    sels = al.read(path).selections("answer")
    assert [(s.choice, s.observed, s.drawn) for s in sels] == [
        (2, 2, "posterior"), (0, 0, "posterior"), (3, 3, "posterior")]
    for s in sels:
        g = np.frombuffer(s.draws, dtype="<f8")
        assert int(np.argmax(np.log(P) + g)) == s.observed
    report = al.verify(path)
    assert report.ok, report.problems
    # Reproducible: the same run records the same noise.
    with al.record(tmp_path / "again.zst", seed=7, task="q"):
        for k in (2, 0, 3):
            _ask(k)
    assert [s.draws for s in al.read(tmp_path / "again.zst").selections("answer")] == [
        s.draws for s in sels]
    assert al.select(P, observed=1) == 1  # outside a run: the observed choice, as it is


def test_an_edited_posterior_draw_fails_verify(tmp_path: Path) -> None:
    import msgspec

    from agentlog._writer import TraceWriter

    path = tmp_path / "t.zst"
    with al.record(path, seed=7, task="q"):
        _ask(1)
    records = list(al.iter_records(path))
    out = tmp_path / "edited.zst"
    with TraceWriter(out, frame_interval=3600) as writer:
        for r in records:
            if type(r).__name__ == "Selection":
                g = np.frombuffer(r.draws, dtype="<f8").copy()
                g[0] += 0.5
                r = msgspec.structs.replace(r, draws=g.tobytes())
            writer.put(r)
    report = al.verify(out)
    assert not report.ok
    assert any("posterior noise" in p.message for p in report.problems)


class _Toward(Steer):
    """An intervention that replaces the answer vector by Q."""

    name = "toward-q"

    def select(self, stream: str, step: int, probs: Any, ids: tuple[Any, ...]) -> Any:
        return Q.copy()


def test_an_intervention_on_an_observed_choice_is_paired_on_its_noise(tmp_path: Path) -> None:
    """Under a steer, the choice is argmax(log Q + g) on the posterior noise of the
    observed factual choice: the counterfactual of the Gumbel-max model. Over many runs
    it stays with the factual choice as often as the true noise would."""
    rng = np.random.default_rng(5)
    stays = []
    n = 2_000
    for seed in range(n):
        k = int(rng.choice(len(P), p=P))
        with al.record(tmp_path / "s.zst", seed=seed, task="q", mode="w"), \
                steering(_Toward()):
            stays.append(_ask(k) == k)
    true_g = np.random.default_rng(6).gumbel(size=(200_000, len(P)))
    truth = (np.argmax(np.log(P) + true_g, axis=1) == np.argmax(np.log(Q) + true_g, axis=1)
             ).mean()
    se = np.sqrt(truth * (1 - truth) / n)
    assert abs(np.mean(stays) - truth) < 4 * se
    sel = al.read(tmp_path / "s.zst").selections("answer")[0]
    assert sel.observed is not None and sel.steer == "toward-q"
    assert al.verify(tmp_path / "s.zst").ok


def test_select_refuses_an_observed_choice_the_vector_cannot_give() -> None:
    with pytest.raises(ValueError, match="has probability 0 under the vector given"):
        al.select([0.5, 0.5, 0.0], observed=2)
    with pytest.raises(ValueError, match="lies outside its 2 candidates"):
        al.select([0.5, 0.5], observed=5)
    with pytest.raises(TypeError, match="must be an int index"):
        al.select([0.5, 0.5], observed="a")  # type: ignore[arg-type]


def test_a_pure_replay_regenerates_the_posterior_noise_and_names_a_changed_observation(
        tmp_path: Path) -> None:
    from agentlog.replay.interventions import ForceRecorded

    path = tmp_path / "t.zst"
    with al.record(path, seed=7, task="q"):
        _ask(2)
        _ask(0)
    with al.record(tmp_path / "r.zst", seed=7, task="q"), \
            steering(ForceRecorded(path)):
        assert [_ask(2), _ask(0)] == [2, 0]  # reproduced, no divergence
    assert al.verify(tmp_path / "r.zst").ok
    with al.record(tmp_path / "d.zst", seed=7, task="q"), \
            steering(ForceRecorded(path)), \
            pytest.raises(al.ReplayDivergenceError, match="observed choice"):
        _ask(3)  # the served model answered otherwise this time


def _reference_topdown(log_p: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """The top-down sampler as the reference implementation (``lm-counterfactuals``,
    ``sampling.topdown_vectorized``) states it: the top at Gumbel + logsumexp, the others
    Gumbels truncated below it, the chosen index at the top, minus the logits."""
    top = rng.gumbel() + np.logaddexp.reduce(log_p)
    shifted = rng.gumbel(size=log_p.size) + log_p
    out = -np.log(np.exp(-shifted) + np.exp(-top))
    out[k] = top
    return out - log_p


def test_the_draws_agree_with_the_reference_samplers_within_monte_carlo_error() -> None:
    """On shared inputs (vector, observed choice), the counterfactual choices under Q from
    our draws and from the reference's sampler have one law: a chi-square homogeneity
    test over 4x4 cells. (An earlier version of the reference drew the observed token's
    noise from the prior Gumbel(0, 1) instead: its counterfactual kept the factual
    choice 0.32 of the time here, against 0.49 under the true noise.)"""
    rng = np.random.default_rng(8)
    n = N // 2
    observed = rng.choice(len(P), size=n, p=P)
    ours = np.argmax(np.log(Q) + _posterior_batch(P, observed, rng), axis=1)
    log_p = np.log(P)
    ref = np.argmax(np.log(Q) + np.stack([_reference_topdown(log_p, int(k), rng)
                                          for k in observed]), axis=1)
    table = np.zeros((2, len(P) * len(P)))
    np.add.at(table[0], observed * len(P) + ours, 1)
    np.add.at(table[1], observed * len(P) + ref, 1)
    table = table[:, table.sum(axis=0) > 0]
    assert stats.chi2_contingency(table).pvalue > ALPHA
