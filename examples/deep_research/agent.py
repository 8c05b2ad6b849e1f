"""An offline, deterministic deep-research agent over a generated candidate pool.

The setting of [SSC] §2-3. A research question has a prespecified pool of N
candidate documents with evidence scores ``Y_i ∈ [-1, 1]`` and the pool target
``θ* = (1/N) Σ Y_i`` (eq. 1). The agent opens up to K documents, one per round: it
draws from a softmax over the ranking condition's order mixed with an exploration floor
(``al.select``, stream ``"doc"``), and before every round after the first it may stop,
more likely when the evidence opened so far leans one way (informative stopping,
``al.proceed``, stream ``"stop"``). Its conclusion is the Opened Mean, which leans
towards whatever the ranking puts first: the agent's own ranking by relevance is
correlated with ``Y``, so its Opened Mean is biased relative to ``θ*``. For ASV, the
retrieval transition's before and after states are scored under a direct and a quote
channel in four cyclic layouts ([ASV]'s target-option margin): afterwards, from the sealed
states alone, by channel replay of the channels registered in ``channels.py``
(``agentlog replay ... --app agentlog.examples.deep_research``), or, as an alternative,
while the agent runs, by the record-time ``Evaluator`` (``run_agent(evaluate=True)``).

Examples:
    >>> import agentlog as al
    >>> from agentlog.examples.deep_research import run_agent
    >>> episode = run_agent("q0", ranking="agent", seed=1, path="dr-q0.zst")
    >>> al.verify("dr-q0.zst").ok
    True
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

import agentlog as al
from agentlog.estimators.asv import (
    cyclic_layouts,
)

RANKINGS = ("agent", "reversed", "uniform")
MAX_STOP = 0.9  # c_t < 1 keeps every round reachable: overlap ([SSC] Assumption 1)


def _task_key(task_id: str) -> int:
    # Python's hash() is salted per process; the pool must be the same everywhere.
    return int.from_bytes(hashlib.blake2b(task_id.encode(), digest_size=8).digest(), "little")


def _check_ranking(ranking: str) -> None:
    if ranking not in RANKINGS:
        raise ValueError(f"`ranking` must be one of {RANKINGS}; found {ranking!r}")


@dataclass(frozen=True)
class Pool:
    """The candidate pool of one research question, candidates in id order.

    ``relevance``, ``stance`` and ``authority`` are features known before search;
    ``prediction`` is an outcome model's ``m_i`` (fitted on other questions, fixed before
    search); ``y`` is the evidence score, seen by the agent only for opened documents.
    """

    task_id: str
    ids: tuple[str, ...]
    relevance: tuple[float, ...]
    stance: tuple[float, ...]
    authority: tuple[float, ...]
    prediction: tuple[float, ...]
    y: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def theta_star(self) -> float:
        """The pool target ``θ* = (1/N) Σ Y_i`` ([SSC] eq. 1)."""
        return float(np.mean(self.y))

    def features(self) -> NDArray[np.float64]:
        """``X``: one row per candidate; columns relevance, stance, authority."""
        return np.column_stack([self.relevance, self.stance, self.authority])

    def order(self, ranking: str) -> tuple[str, ...]:
        """Candidate ids best-first under a ranking condition."""
        _check_ranking(ranking)
        if ranking == "uniform":
            return self.ids
        rel = np.asarray(self.relevance)
        idx = np.argsort(-rel if ranking == "agent" else rel, kind="stable")
        return tuple(self.ids[i] for i in idx)

    def with_oracle_hint(self) -> Pool:
        """The same pool with its ``relevance`` replaced by an oracle hint ``−|Y_i − θ*|``.

        Ranked by it, the documents closest to the pool target come first: information
        about ``Y`` and ``θ*`` that no fair variant gets before search. A variant handed
        this pool (``Policy(oracle_hint=True)``) enters retrieval with a different entry
        for the same question, which a certificate must refuse ([LBC] Def. 1).
        """
        theta = self.theta_star
        return dataclasses.replace(
            self, relevance=tuple(-abs(v - theta) for v in self.y))

    @al.tool("open_document")
    def open_document(self, doc_id: str) -> float:
        """Read a document: its evidence score."""
        return self.y[self.ids.index(doc_id)]


def study_seed(task_id: str, replicate: int) -> int:
    """The run seed of replicate ``replicate`` of question ``task_id`` (stable, 63 bits)."""
    digest = hashlib.blake2b(f"{task_id}:{replicate}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def make_pool(task_id: str, n: int = 30, *, seed: int) -> Pool:
    """Generate the candidate pool of ``task_id``: the same for the same (task_id, n, seed)."""
    if n < 2:
        raise ValueError(f"`n` must be >= 2 candidates; found {n}")
    if seed < 0:
        raise ValueError(f"`seed` must be >= 0; found {seed}")
    rng = np.random.default_rng([seed, _task_key(task_id)])
    lean = rng.uniform(-0.6, 0.6)  # where this question's evidence leans overall
    latent = rng.standard_normal(n)  # each document's latent stance
    y = np.tanh(lean + 0.9 * latent + 0.3 * rng.standard_normal(n))
    relevance = 0.8 * latent + 0.6 * rng.standard_normal(n)  # the ranker sees the stance
    stance = latent + 0.5 * rng.standard_normal(n)
    authority = rng.beta(2.0, 2.0, n)
    prediction = np.tanh(0.8 * stance)  # fitted across questions: blind to this one's lean
    width = max(len(str(n - 1)), 2)
    return Pool(
        task_id=task_id,
        ids=tuple(f"{task_id}-d{i:0{width}d}" for i in range(n)),
        relevance=tuple(relevance.tolist()),
        stance=tuple(stance.tolist()),
        authority=tuple(authority.tolist()),
        prediction=tuple(prediction.tolist()),
        y=tuple(y.tolist()),
    )


@dataclass(frozen=True)
class Policy:
    """How the agent searches; a system (leaderboard row) is a named policy.

    Attributes:
        temperature: softmax temperature over rank positions (lower: greedier).
        floor: probability mass spread evenly over the candidates, so that each keeps at
            least ``revisit · floor / N`` (overlap).
        stop_base: stopping probability when the opened evidence is balanced.
        stop_lean: extra stopping probability per unit of ``|mean opened Y|``.
        revisit: relative weight of a document already opened. It stays positive so that
            every candidate keeps a positive probability at every round (overlap,
            [SSC] Assumption 1); a document opened twice counts at each opening.
        backbone: the model the variant runs on, recorded as the run's
            ``meta["backbone"]``. The bundled agent has no language model, so it is a label
            (``"scripted"``: the softmax chooser above); a variant on another backbone is a
            different model behind the same scaffold ([LBC] §6.2).
        oracle_hint: enter retrieval with the privileged pool ``Pool.with_oracle_hint()``
            instead of the question's pool: an unfair variant, for certificates to refuse.
    """

    temperature: float = 3.0
    floor: float = 0.1
    stop_base: float = 0.05
    stop_lean: float = 0.4
    revisit: float = 0.25
    backbone: str = "scripted"
    oracle_hint: bool = False

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"`temperature` must be > 0; found {self.temperature}")
        if not 0.0 <= self.floor <= 1.0:
            raise ValueError(f"`floor` must be in [0, 1]; found {self.floor}")
        if self.stop_base < 0 or self.stop_lean < 0:
            raise ValueError("`stop_base` and `stop_lean` must be >= 0")
        if not 0.0 < self.revisit <= 1.0:
            raise ValueError(f"`revisit` must be in (0, 1] (overlap); found {self.revisit}")
        if not self.backbone:
            raise ValueError("`backbone` must be a non-empty label (e.g. \"scripted\")")

    def selection_probs(self, n: int, ranking: str) -> NDArray[np.float64]:
        """Probabilities over ``n`` candidates listed best-first (before revisit weights)."""
        if ranking == "uniform":
            return np.full(n, 1.0 / n)
        soft = np.exp(-np.arange(n) / self.temperature)
        probs: NDArray[np.float64] = (1.0 - self.floor) * soft / soft.sum() + self.floor / n
        return probs

    def stop_probability(self, opened_y: Sequence[float]) -> float:
        """``c_t``: stop sooner when the evidence opened so far points one way."""
        lean = abs(float(np.mean(opened_y)))
        return min(self.stop_base + self.stop_lean * lean, MAX_STOP)


@dataclass(frozen=True)
class Retrieval:
    """What the retrieval window returns: the opened documents and the logged design.

    ``p[t]`` is the logged probability of the document opened at round t and ``c[t]``
    the pre-selection stopping probability of that round (``c[0] == 0``), as CESS needs
    them ([SSC] eq. 5).
    """

    task_id: str
    ranking: str
    budget: int
    opened: tuple[str, ...]
    y: tuple[float, ...]
    p: tuple[float, ...]
    c: tuple[float, ...]
    stopped: bool  # stopped before the budget was spent


@dataclass(frozen=True)
class Conclusion:
    """The agent's answer: the Opened Mean and its direction (±0.05 counts as mixed)."""

    task_id: str
    opened_mean: float
    n_opened: int
    verdict: str


@dataclass(frozen=True)
class Grade:
    """The audit of a conclusion against the pool target."""

    opened_mean: float
    theta_star: float
    error: float
    abs_error: float


DEFAULT_POLICY = Policy()


@al.window("retrieval")
def retrieve(
    pool: Pool, ranking: str, budget: int = 4, policy: Policy = DEFAULT_POLICY
) -> Retrieval:
    """Open up to ``budget`` documents, one per round, under a ranking condition."""
    order = pool.order(ranking)
    owner: Literal["model", "scaffold"] = "scaffold" if ranking == "uniform" else "model"
    opened: list[str] = []
    ys: list[float] = []
    ps: list[float] = []
    cs: list[float] = []
    stopped = False
    for t in range(budget):
        c = 0.0
        if t > 0:
            c = policy.stop_probability(ys)
            if not al.proceed(1.0 - c, name="stop"):
                stopped = True
                break
        probs = policy.selection_probs(len(order), ranking)
        if opened and ranking != "uniform":  # uniform selection is uniform over the pool
            seen = set(opened)
            probs = probs * np.array([policy.revisit if d in seen else 1.0 for d in order])
            probs = probs / probs.sum()
        i = al.select(probs, candidates=order, name="doc", owner=owner)
        opened.append(order[i])
        ys.append(pool.open_document(order[i]))
        ps.append(float(probs[i]))
        cs.append(c)
    return Retrieval(pool.task_id, ranking, budget, tuple(opened), tuple(ys), tuple(ps),
                     tuple(cs), stopped)


def retrieval_outcome(found: Retrieval) -> dict[str, float]:
    """The outcome of a re-entered retrieval window: its Opened Mean and the number of
    documents it opened (``intervene(scores=...)``, ``agentlog replay --score``)."""
    return {"opened_mean": float(np.mean(found.y)), "n_opened": float(len(found.y))}


@al.window("synthesis", after="retrieval", forbid=("open_document",))
def synthesize(evidence: Retrieval) -> Conclusion:
    """Conclude from the opened evidence only (no new documents: the window is sealed)."""
    mean = float(np.mean(evidence.y))
    verdict = "supports" if mean > 0.05 else "opposes" if mean < -0.05 else "mixed"
    return Conclusion(evidence.task_id, mean, len(evidence.y), verdict)


@al.window("score", entry=lambda conclusion, pool: conclusion, after="synthesis")
def grade(conclusion: Conclusion, pool: Pool) -> Grade:
    """Score the conclusion against ``θ*`` on the direct channel."""
    theta = pool.theta_star
    error = conclusion.opened_mean - theta
    al.score("opened_mean", conclusion.opened_mean, channel="direct")
    al.score("error", error, channel="direct")
    al.score("abs_error", abs(error), channel="direct")
    return Grade(conclusion.opened_mean, theta, error, abs(error))


# -------------------------------------------------------------- record-time evaluator
#
# [ASV]'s target-option margin, made deterministic: a scorer rates the four answer
# options from an evidence lean in [-1, 1] under each cyclic layout of the options (with a
# small position bias); the margin is the target's rating minus the best other option's.
# The layouts are reduced within the channel downstream (``asv.from_traces``).

OPTIONS = ("supports", "opposes", "mixed", "none of the above")
LAYOUTS = cyclic_layouts(len(OPTIONS))  # LAYOUTS[l, i]: position of option i in layout l
POSITION_BIAS = (0.06, 0.02, -0.02, -0.06)  # the scorer favours options listed first
QUOTE_THRESHOLD = 0.3  # a value with |v| below this is quoted as "neutral"
QUOTE_SNIPPETS = 3  # before search, the quote view shows the first results of the ranking
MIXED_BAND = 0.05  # as the synthesis verdict: |lean| <= 0.05 reads as mixed


def target_option(theta_star: float) -> int:
    """The reviewed target of a question: the option θ* supports (an index into OPTIONS)."""
    return 0 if theta_star > MIXED_BAND else 1 if theta_star < -MIXED_BAND else 2


def option_scores(lean: float) -> NDArray[np.float64]:
    """The scorer's rating of each option in OPTIONS given an evidence lean in [-1, 1]."""
    return np.array([lean, -lean, 2 * MIXED_BAND - abs(lean), -0.5])


def quote_labels(values: Sequence[float], threshold: float = QUOTE_THRESHOLD) -> list[str]:
    """The stance label a quote shows for each value: "supports" at or above ``threshold``,
    "opposes" at or below ``-threshold``, else "neutral"."""
    return ["supports" if v >= threshold else "opposes" if v <= -threshold else "neutral"
            for v in values]


def quoted_lean(values: Sequence[float], threshold: float = QUOTE_THRESHOLD) -> float:
    """The lean of quoted stance labels, (#supports − #opposes) / #quoted: a value is
    quoted as "supports" at or above ``threshold``, "opposes" at or below ``-threshold``,
    else "neutral"."""
    v = np.asarray(values, dtype=np.float64)
    return float(np.mean(np.sign(v) * (np.abs(v) >= threshold)))


@dataclass(frozen=True)
class EvalChannel:
    """An evaluation channel: the view the scorer reads, and an additive readout offset.

    ``view="evidence"`` (direct) reads the state itself: before search the pool's
    prediction mean m̄, after it the mean of the opened evidence scores. ``view="quote"``
    reads quoted stance labels (``quoted_lean``): before search of the predictions of the
    ranking's first ``QUOTE_SNIPPETS`` results (a results page), after it of the opened
    evidence. ``offset`` shifts every readout of the channel; it cancels in every gain.
    """

    name: str
    view: Literal["evidence", "quote"]
    offset: float = 0.0


@dataclass(frozen=True)
class Evaluator:
    """Scores the retrieval transition x⁻ → x⁺ under each channel and layout at record time.

    x⁻ is the retrieval window's entry (the pool and ranking before search), x⁺ its exit
    (the opened evidence); the reviewed target is the option θ* supports. Each readout is
    ``al.score(score, margin, channel=, layout=, wave=0, transition=, state_hash=)``, so
    ``asv.from_traces(..., window="retrieval")`` finds a complete face.
    """

    channels: tuple[EvalChannel, ...] = (EvalChannel("direct", "evidence"),
                                         EvalChannel("quote", "quote"))
    score: str = "margin"
    position_bias: tuple[float, ...] = POSITION_BIAS
    quote_threshold: float = QUOTE_THRESHOLD
    snippets: int = QUOTE_SNIPPETS

    def direct_lean_before(self, pool: Pool) -> float:
        """The direct channel's reading of x⁻: the pool's prediction mean m̄."""
        return float(np.mean(pool.prediction))

    def direct_lean_after(self, opened_y: Sequence[float]) -> float:
        """The direct channel's reading of x⁺: the mean of the opened evidence scores."""
        return float(np.mean(opened_y))

    def lean_before(self, channel: EvalChannel, pool: Pool, ranking: str) -> float:
        """What ``channel`` reads off x⁻: the pool before search."""
        if channel.view == "quote":
            shown = pool.order(ranking)[:self.snippets]
            return quoted_lean([pool.prediction[pool.ids.index(d)] for d in shown],
                               self.quote_threshold)
        return self.direct_lean_before(pool)

    def lean_after(self, channel: EvalChannel, found: Retrieval) -> float:
        """What ``channel`` reads off x⁺: the opened evidence."""
        if channel.view == "quote":
            return quoted_lean(found.y, self.quote_threshold)
        return self.direct_lean_after(found.y)

    def margins(self, lean: float, target: int) -> NDArray[np.float64]:
        """The target-option margin in each layout: target's rating − best other rating."""
        rated = option_scores(lean)[None, :] + np.asarray(self.position_bias)[LAYOUTS]
        others = rated.copy()
        others[:, target] = -np.inf
        out: NDArray[np.float64] = rated[:, target] - others.max(axis=1)
        return out

    def evaluate(self, pool: Pool, ranking: str, found: Retrieval) -> None:
        """Record the four corners of the run's latest retrieval (no-op when not recording)."""
        ref = al.last_window("retrieval")
        if ref is None:
            return
        target = target_option(pool.theta_star)
        for ch in self.channels:
            for state, lean in ((ref.entry_hash, self.lean_before(ch, pool, ranking)),
                                (ref.exit_hash, self.lean_after(ch, found))):
                for layout, m in enumerate(self.margins(lean, target) + ch.offset):
                    al.score(self.score, float(m), channel=ch.name, layout=layout, wave=0,
                             transition=ref.id, state_hash=state)


DEFAULT_EVALUATOR = Evaluator()


@dataclass(frozen=True)
class Episode:
    """One run of the agent on one question."""

    task_id: str
    ranking: str
    seed: int
    system: str
    pool: Pool
    retrieval: Retrieval
    conclusion: Conclusion
    grade: Grade
    path: Path | None


def run_agent(
    task_id: str,
    *,
    ranking: str,
    seed: int,
    budget: int = 4,
    policy: Policy = DEFAULT_POLICY,
    n_candidates: int = 30,
    pool_seed: int = 0,
    system: str = "deep-research",
    path: str | os.PathLike[str] | None = None,
    replicate: int | None = None,
    evaluate: bool | Evaluator = True,
) -> Episode:
    """Run the agent once: retrieval → (evaluator) → synthesis → score.

    With ``path`` the run is recorded there (``al.record(path, seed=seed, ...)``). Without
    it the windows join the caller's run, whose seed must be ``seed``; with no recorder at
    all the draws come from a process-local generator and are not reproducible.
    ``evaluate`` scores the retrieval transition under the direct and quote channels
    (``Evaluator``; pass one to configure it, False to record no channel scores).
    """
    _check_ranking(ranking)
    if budget < 1:
        raise ValueError(f"`budget` must be >= 1; found {budget}")
    pool = make_pool(task_id, n_candidates, seed=pool_seed)
    # What the retrieval window is entered with: the question's pool, or a privileged one.
    # θ*, the outcomes and the grade are the question's either way.
    entry = pool.with_oracle_hint() if policy.oracle_hint else pool
    evaluator = (DEFAULT_EVALUATOR if evaluate is True else None if evaluate is False
                 else evaluate)

    def episode(where: Path | None) -> Episode:
        found = retrieve(entry, ranking, budget, policy)
        if evaluator is not None:
            evaluator.evaluate(entry, ranking, found)
        conclusion = synthesize(found)
        return Episode(task_id, ranking, seed, system, pool, found, conclusion,
                       grade(conclusion, pool), where)

    if path is None:
        run = al.current_run()
        if run is not None and run.seed != seed:
            raise ValueError(f"run_agent(seed={seed}) inside a run recorded with seed "
                             f"{run.seed}; pass seed={run.seed} or a `path` of its own")
        return episode(None)
    meta: dict[str, Any] = {
        "ranking": ranking, "cluster": task_id, "budget": budget, "pool_seed": pool_seed,
        "n_candidates": n_candidates, "theta_star": pool.theta_star,
        "policy": dataclasses.asdict(policy), "backbone": policy.backbone,
        # the reviewed target option ([ASV]'s target identity for equal-target weighting)
        "target": OPTIONS[target_option(pool.theta_star)],
    }
    if replicate is not None:
        meta["replicate"] = replicate
    # The demo's seeded study (and what its tests and the README say about it) was drawn
    # with noise generator /1; a new generator draws other noise for the same seeds.
    with al.record(path, mode="w", system=system, seed=seed, task=task_id, meta=meta,
                   generator="fmix64-gumbel/1"):
        return episode(Path(path))


def task_ids(n: int) -> list[str]:
    """``["q0", "q1", ...]``: ``n`` question ids."""
    return [f"q{i}" for i in range(n)]


def run_study(
    out_dir: str | os.PathLike[str],
    *,
    tasks: Sequence[str],
    rankings: Sequence[str] = ("agent", "reversed"),
    seeds: Sequence[int] = (0, 1, 2),
    systems: Mapping[str, Policy] | None = None,
    budget: int = 4,
    n_candidates: int = 30,
    pool_seed: int = 0,
    evaluate: bool | Evaluator = True,
) -> list[Path]:
    """Record one trace per (system, task, ranking, seed) under ``out_dir``; return the paths.

    Files are named ``{system}_{task}_{ranking}_s{seed}.zst``; ``systems`` maps a system
    name to its policy (default ``{"deep-research": Policy()}``). The run seed is
    ``study_seed(task, seed)``: draws are keyed by (run seed, stream, step, candidate id), so
    one run seed per question keeps questions independent, while every ranking and system
    of the same (question, seed) shares its random numbers (common random numbers).
    ``evaluate`` is passed to every ``run_agent`` (the record-time ASV evaluator).
    """
    for ranking in rankings:
        _check_ranking(ranking)
    out = Path(out_dir)
    paths: list[Path] = []
    for system, policy in (systems or {"deep-research": DEFAULT_POLICY}).items():
        for task in tasks:
            for ranking in rankings:
                for seed in seeds:
                    path = out / f"{system}_{task}_{ranking}_s{seed}.zst"
                    run_agent(task, ranking=ranking, seed=study_seed(task, seed), budget=budget,
                              policy=policy,
                              n_candidates=n_candidates, pool_seed=pool_seed, system=system,
                              path=path, replicate=seed, evaluate=evaluate)
                    paths.append(path)
    return paths
