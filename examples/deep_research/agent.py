"""An offline, deterministic deep-research agent over a generated candidate pool.

The setting of papers/003 §2-3. A research question has a prespecified pool of N
candidate documents with evidence scores ``Y_i ∈ [-1, 1]`` and the pool target
``θ* = (1/N) Σ Y_i`` (eq. 1). The agent opens up to K documents, one per round: it
draws from a softmax over the ranking condition's order mixed with an exploration floor
(``al.select``, stream ``"doc"``), and before every round after the first it may stop,
more likely when the evidence opened so far leans one way (informative stopping,
``al.proceed``, stream ``"stop"``). Its conclusion is the Opened Mean, which leans
towards whatever the ranking puts first: the agent's own ranking by relevance is
correlated with ``Y``, so its Opened Mean is biased relative to ``θ*``.

Example:
    >>> import agentlog as al
    >>> from agentlog.examples.deep_research import run_agent
    >>> episode = run_agent("q0", ranking="agent", seed=1, path="/tmp/dr-q0.zst")
    >>> al.verify("/tmp/dr-q0.zst").ok
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

RANKINGS = ("agent", "reversed", "uniform")
MAX_STOP = 0.9  # c_t < 1 keeps every round reachable: overlap (papers/003 Assumption 1)


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
        """The pool target ``θ* = (1/N) Σ Y_i`` (papers/003 eq. 1)."""
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
            papers/003 Assumption 1); a document opened twice counts at each opening.
    """

    temperature: float = 3.0
    floor: float = 0.1
    stop_base: float = 0.05
    stop_lean: float = 0.4
    revisit: float = 0.25

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"`temperature` must be > 0; found {self.temperature}")
        if not 0.0 <= self.floor <= 1.0:
            raise ValueError(f"`floor` must be in [0, 1]; found {self.floor}")
        if self.stop_base < 0 or self.stop_lean < 0:
            raise ValueError("`stop_base` and `stop_lean` must be >= 0")
        if not 0.0 < self.revisit <= 1.0:
            raise ValueError(f"`revisit` must be in (0, 1] (overlap); found {self.revisit}")

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
    them (papers/003 eq. 5).
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
) -> Episode:
    """Run the agent once: retrieval → synthesis → score.

    With ``path`` the run is recorded there (``al.record(path, seed=seed, ...)``). Without
    it the windows join the caller's run, whose seed must be ``seed``; with no recorder at
    all the draws come from a process-local generator and are not reproducible.
    """
    _check_ranking(ranking)
    if budget < 1:
        raise ValueError(f"`budget` must be >= 1; found {budget}")
    pool = make_pool(task_id, n_candidates, seed=pool_seed)

    def episode(where: Path | None) -> Episode:
        found = retrieve(pool, ranking, budget, policy)
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
        "policy": dataclasses.asdict(policy),
    }
    if replicate is not None:
        meta["replicate"] = replicate
    with al.record(path, system=system, seed=seed, task=task_id, meta=meta):
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
) -> list[Path]:
    """Record one trace per (system, task, ranking, seed) under ``out_dir``; return the paths.

    Files are named ``{system}_{task}_{ranking}_s{seed}.zst``; ``systems`` maps a system
    name to its policy (default ``{"deep-research": Policy()}``). The run seed is
    ``study_seed(task, seed)``: draws are keyed by (run seed, stream, step, candidate id), so
    one run seed per question keeps questions independent, while every ranking and system
    of the same (question, seed) shares its random numbers (common random numbers).
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
                              path=path, replicate=seed)
                    paths.append(path)
    return paths
