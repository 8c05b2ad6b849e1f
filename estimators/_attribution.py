"""Per-step causal attribution: which decisions of a window caused its outcome.

A *player* is one decision of a re-entered window (``"doc@1"``: decision 1 of stream
``doc``) or a named group of decisions (a round, a sub-window's decisions). For a coalition
``S`` of players, ``Y_b(S)`` is the outcome of block ``b`` (one sealed window instance
under one replicate seed) re-entered with the decisions of ``S`` changed
(``agentlog.replay.alteration_arm``, ``interventions.Alter``) and every other decision at
the agent's own policy, every draw on the block's common random numbers. Branch mode
serves everything before the first changed decision from the recording and runs the rest
live, so a coalition's arm is the agent running forward from the changed steps.

* **Contrastive (interventional) effect** of player ``i``:
  ``Δ_i = E_b[Y_b({i}) − Y_b(∅)]``, the effect of changing ``i`` alone.
* **Shapley value** (Shapley 1953) of player ``i`` over the players ``P`` (n of them):
  ``φ_i = E_b[Σ_{S ⊆ P∖{i}} |S|!(n−|S|−1)!/n! · (Y_b(S ∪ {i}) − Y_b(S))]``, exact over every
  coalition, or over ``M`` seeded permutations with their reverses (antithetic pairs;
  the permutation estimator of Castro, Gómez & Tejada 2009): the mean over permutations of
  ``Y_b(pre_π(i) ∪ {i}) − Y_b(pre_π(i))``. Per block the values add up to the total
  ``Y_b(P) − Y_b(∅)`` (efficiency), which is reported too.

Every attribution is, per block, a fixed linear combination of the block's arm outcomes.
It is averaged within each task and tasks weigh equally; the interval is the cluster t
interval over the per-task values, as for the paired 2×2's policy effects (whose module
documents its coverage). With ``M`` permutations the permutations are fixed for every block
(every block runs the same arms), so the interval covers the ``M``-permutation Shapley
value, whose distance to the exact one the permutations' own spread bounds
(``permutation_spread``); with every coalition it covers the exact value.

Common random numbers make ``Y_b(S)`` and ``Y_b(∅)`` share every draw but the changed
ones, so their difference has far less variance than two independent runs' would:
``independent_standard_error`` says what the same blocks would give unpaired.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from agentlog import DegenerateDataWarning
from agentlog.display import html_repr, render_estimates, render_fields, render_notes

from ._bootstrap import group_means
from ._effects import block_values, cluster_standard_error, cluster_t_interval, warn_doubtful
from ._effects_trace import TraceInput, complete_blocks, read_arm_runs
from ._interval import ConfidenceInterval, check_confidence_level
from ._labels import codes

__all__ = ["KINDS", "AttributionResult", "arms", "estimate", "from_traces",
           "shapley_permutations"]

FloatArray = NDArray[np.float64]
KINDS = ("contrastive", "shapley")
ShapleyOption = Literal["auto", "exact"] | int | None
MAX_EXACT_PLAYERS = 12  # 2^12 = 4096 arms per block: beyond, sample permutations
AUTO_EXACT_PLAYERS = 6  # arms(shapley="auto"): every coalition up to 2^6 = 64 arms

ATTRIBUTION_NOTE = (
    "Each attribution is interventional: the outcome when a decision is changed (every "
    "other decision at the agent's own policy, every draw on common random numbers) "
    "against the agent's own re-entry. A contrastive effect changes one player alone; a "
    "Shapley value averages its marginal effect over the coalitions of the others and the "
    "values add up to the total. Neither is the effect of the decision in the recorded run "
    "alone: the run forward from a changed decision is re-drawn."
)


def shapley_permutations(n: int, permutations: int, seed: int = 0) -> list[tuple[int, ...]]:
    """``permutations`` orders of ``n`` players: seeded draws, each followed by its reverse
    (antithetic pairs), the first ``permutations`` of them.

    ``arms(..., shapley=M, seed=S)`` runs the coalitions these permutations pass through
    and ``from_traces(..., shapley=M, seed=S)`` reads them back: both call this.
    """
    if isinstance(permutations, bool) or not isinstance(permutations, int) or permutations < 1:
        raise ValueError(f"`shapley` as a number of permutations must be an int >= 1; found "
                         f"{permutations!r}")
    rng = np.random.default_rng(seed)
    out: list[tuple[int, ...]] = []
    while len(out) < permutations:
        perm = tuple(int(i) for i in rng.permutation(n))
        out.extend([perm, perm[::-1]])
    return out[:permutations]


def _coalitions(n: int, shapley: ShapleyOption, seed: int) -> list[frozenset[int]]:
    """The coalitions (of player indices) a Shapley computation reads, in first-use order."""
    if shapley == "exact":
        return [frozenset(i for i in range(n) if mask >> i & 1) for mask in range(1 << n)]
    assert isinstance(shapley, int)
    seen: dict[frozenset[int], None] = {}
    for perm in shapley_permutations(n, shapley, seed):
        for k in range(n + 1):
            seen.setdefault(frozenset(perm[:k]), None)
    return list(seen)


def _players(players: Sequence[str] | Mapping[str, Sequence[str]]
             ) -> dict[str, tuple[str, ...]]:
    """``{player name: its decision tokens}``, sorted by name (the order permutations index)."""
    from agentlog.replay.interventions import decision_label, parse_decision

    if isinstance(players, str):
        raise TypeError(f"`players` must be a list of decisions or a mapping of names to "
                        f"decisions; found the string {players!r} (write [{players!r}])")
    groups = (dict(players) if isinstance(players, Mapping)
              else {p: (p,) for p in players})
    if not groups:
        raise ValueError("`players` is empty: name at least one decision, e.g. ['doc@0']")
    out: dict[str, tuple[str, ...]] = {}
    owner: dict[str, str] = {}
    for name in sorted(groups, key=str):
        decisions = groups[name]
        if isinstance(decisions, str):
            decisions = (decisions,)
        tokens = []
        for token in decisions:
            label = decision_label(*parse_decision(token))
            if label in owner:
                raise ValueError(f"decision {label} belongs to two players ({owner[label]!r} "
                                 f"and {name!r}); give each decision to one player")
            owner[label] = str(name)
            tokens.append(label)
        if not tokens:
            raise ValueError(f"player {name!r} has no decision")
        out[str(name)] = tuple(sorted(tokens))
    return out


def arms(players: Sequence[str] | Mapping[str, Sequence[str]], *,
         shapley: ShapleyOption = None, seed: int = 0) -> list[Any]:
    """The alteration arms an attribution study runs (``intervene(..., arms=...)``).

    Args:
        players: decision tokens (``["doc@0", "doc@1", "stop@0=stop"]``, each its own
            player; see ``interventions.Alter`` for the form and the alternatives), or
            ``{name: [decisions]}`` to attribute to groups (a round, a sub-window).
        shapley: None (default): the agent's own arm, one arm per player and the arm
            changing all players (contrastive effects and the total); ``"exact"``: every
            coalition (2^n arms, n ≤ 12); ``"auto"``: exact up to 6 players, else 64
            permutations; an int ``M``: the coalitions of ``M`` seeded permutations (with
            their reverses), read back by ``from_traces(..., shapley=M, seed=seed)``.
        seed: the permutations' seed.

    Returns:
        ``agentlog.replay.Arm`` objects, the agent's own arm first.
    """
    from agentlog.replay import alteration_arm

    groups = _players(players)
    names = list(groups)
    n = len(names)
    wanted: dict[frozenset[int], None] = {frozenset(): None}
    for i in range(n):
        wanted.setdefault(frozenset({i}), None)
    wanted.setdefault(frozenset(range(n)), None)
    mode = _shapley_mode(shapley, n)
    if mode is not None:
        for c in _coalitions(n, mode, seed):
            wanted.setdefault(c, None)
    return [alteration_arm([d for i in c for d in groups[names[i]]]) for c in wanted]


def _shapley_mode(shapley: ShapleyOption, n: int) -> Literal["exact"] | int | None:
    if shapley is None:
        return None
    if shapley == "auto":
        return "exact" if n <= AUTO_EXACT_PLAYERS else 64
    if shapley == "exact":
        if n > MAX_EXACT_PLAYERS:
            raise ValueError(f"exact Shapley values over {n} players need 2^{n} arms per "
                             f"block; give shapley=M (a number of permutations, e.g. 64) "
                             f"above {MAX_EXACT_PLAYERS} players")
        return "exact"
    if isinstance(shapley, bool) or not isinstance(shapley, int):
        raise ValueError(f"`shapley` must be None, 'auto', 'exact' or a number of "
                         f"permutations; found {shapley!r}")
    shapley_permutations(n, shapley)  # checks M
    return shapley


@dataclass(frozen=True, eq=False)
class AttributionResult:
    """Per-player contrastive effects and Shapley values with task-clustered intervals.

    Attributes:
        players: the player names, sorted (the order of every per-player array).
        decisions: ``{player: its decision tokens}``.
        contrastive: ``{player: Δ_i}``, the mean over tasks of ``Y(i) − Y(∅)``.
        shapley: ``{player: φ_i}``, or None (``shapley_note`` says why).
        total: ``Y(all players) − Y(∅)`` (= Σφ_i), or None without that arm.
        shapley_method: ``"exact"``, ``"permutations:M"`` or None.
        per_block: ``{"contrastive"|"shapley": (blocks, players) array, "total": (blocks,)}``.
        per_cluster: the same, averaged within each task: ``(tasks, players)``/``(tasks,)``.
        baseline: ``Y(∅)`` per block (the agent's own re-entry).
        confidence_level: the level of ``confidence_interval`` by default.
        block, task, replicate: each block's identity (trace input), else ``()``.
        outcome: what Y measures; ``n_runs``/``n_skipped``/``n_unused``: arm runs read,
            runs left out, and arm runs whose decisions are no coalition of the players.
        permutation_spread: per player, the standard error of φ_i over the permutations
            (how far the ``M``-permutation value may sit from the exact one); None when
            exact.
        shapley_note: why ``shapley`` is None ("" when it is not).
        outcomes: ``Y(S)`` per block for every coalition ``S`` read (frozensets of names).
        changed: per player, the blocks whose outcome changing it alone changed (a player
            that changed none is warned about).
        group: each block's task code (the row of ``per_cluster``).
    """

    players: tuple[str, ...]
    decisions: dict[str, tuple[str, ...]]
    contrastive: dict[str, float]
    shapley: dict[str, float] | None
    total: float | None
    shapley_method: str | None
    per_block: dict[str, FloatArray]
    per_cluster: dict[str, FloatArray]
    baseline: FloatArray
    confidence_level: float
    n_blocks: int
    n_clusters: int
    outcome: str = ""
    block: tuple[str, ...] = ()
    task: tuple[str, ...] = ()
    replicate: tuple[str, ...] = ()
    n_runs: int = 0
    n_skipped: int = 0
    n_unused: int = 0
    permutation_spread: dict[str, float] | None = None
    shapley_note: str = ""
    independent_se: dict[str, float] = field(default_factory=dict)
    outcomes: dict[frozenset[str], FloatArray] = field(default_factory=dict)
    changed: dict[str, int] = field(default_factory=dict)
    group: NDArray[np.intp] = field(default_factory=lambda: np.empty(0, dtype=np.intp))
    note: str = ATTRIBUTION_NOTE

    def joint_effect(self, players: Iterable[str], *, confidence_level: float | None = None
                     ) -> tuple[float, float, ConfidenceInterval[float]]:
        """The effect of changing ``players`` together, ``E[Y(S) − Y(∅)]``, averaged within
        tasks (tasks weigh equally): ``(estimate, standard error, cluster t interval)``.
        ``S`` must have been run (every coalition with ``shapley="exact"``)."""
        key = frozenset([players] if isinstance(players, str) else players)
        if key not in self.outcomes:
            raise KeyError(f"no arm changed exactly {sorted(key)}; the coalitions run are "
                           f"{sorted(sorted(c) for c in self.outcomes)}")
        level = check_confidence_level(
            self.confidence_level if confidence_level is None else confidence_level)
        per_task = group_means(self.outcomes[key] - self.baseline, self.group,
                               self.n_clusters)
        return (float(per_task.mean()), cluster_standard_error(per_task),
                cluster_t_interval(per_task, level))

    def _column(self, player: str, kind: str) -> FloatArray:
        if kind not in (*KINDS, "total"):
            raise ValueError(f"`kind` must be one of {[*KINDS, 'total']}; found {kind!r}")
        if kind == "total":
            if self.total is None:
                raise ValueError("no total: the arm changing every player was not run "
                                 "(attribution.arms adds it)")
            return self.per_cluster["total"]
        if kind == "shapley" and self.shapley is None:
            raise ValueError(f"no Shapley values: {self.shapley_note}")
        if player not in self.players:
            raise KeyError(f"unknown player {player!r}; the players are {list(self.players)}")
        return self.per_cluster[kind][:, self.players.index(player)]

    def confidence_interval(self, player: str, kind: str = "contrastive", *,
                            confidence_level: float | None = None
                            ) -> ConfidenceInterval[float]:
        """The cluster t interval of ``player``'s ``kind`` (``"contrastive"``,
        ``"shapley"``; ``"total"`` ignores ``player``) at ``confidence_level`` (default
        the level the result was made with)."""
        level = check_confidence_level(
            self.confidence_level if confidence_level is None else confidence_level)
        return cluster_t_interval(self._column(player, kind), level)

    def standard_error(self, player: str, kind: str = "contrastive") -> float:
        """``s/√G`` over the per-task values of ``player``'s ``kind``."""
        return cluster_standard_error(self._column(player, kind))

    def independent_standard_error(self, player: str) -> float:
        """The standard error ``Δ_i`` would have from the same blocks unpaired: arms drawn
        independently of the agent's own (``√(SE(Ȳ(i))² + SE(Ȳ(∅))²)`` over tasks). Its
        ratio to ``standard_error(player)`` is what common random numbers buy."""
        if player not in self.independent_se:
            raise KeyError(f"unknown player {player!r}; the players are {list(self.players)}")
        return self.independent_se[player]

    def ranked(self, kind: str = "contrastive") -> list[tuple[str, float]]:
        """``(player, value)`` by decreasing absolute value."""
        values = self.contrastive if kind == "contrastive" else self.shapley
        if kind not in KINDS:
            raise ValueError(f"`kind` must be one of {list(KINDS)}; found {kind!r}")
        if values is None:
            raise ValueError(f"no Shapley values: {self.shapley_note}")
        return sorted(values.items(), key=lambda kv: (-abs(kv[1]), kv[0]))

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON: per player each estimate with interval and SE, the total,
        counts and notes."""
        rows: dict[str, Any] = {}
        for p in self.players:
            row: dict[str, Any] = {"decisions": list(self.decisions[p])}
            for kind in KINDS:
                values = self.contrastive if kind == "contrastive" else self.shapley
                if values is None:
                    continue
                low, high = self.confidence_interval(p, kind)
                row[kind] = {"estimate": values[p], "low": low, "high": high,
                             "standard_error": self.standard_error(p, kind)}
            row["contrastive"]["independent_standard_error"] = self.independent_se[p]
            row["blocks_changed"] = self.changed.get(p)
            if self.permutation_spread is not None:
                row["shapley"]["permutation_spread"] = self.permutation_spread[p]
            rows[p] = row
        total = None
        if self.total is not None:
            low, high = self.confidence_interval("", "total")
            total = {"estimate": self.total, "low": low, "high": high,
                     "standard_error": self.standard_error("", "total")}
        return {
            "outcome": self.outcome, "players": rows, "total": total,
            "shapley_method": self.shapley_method, "shapley_note": self.shapley_note,
            "baseline_mean": float(np.mean(self.baseline)),
            "confidence_level": self.confidence_level, "interval": "cluster t",
            "n_blocks": self.n_blocks, "n_clusters": self.n_clusters,
            "n_runs": self.n_runs, "n_skipped": self.n_skipped, "n_unused": self.n_unused,
            "note": self.note,
        }

    @html_repr
    def _repr_html_(self) -> str:
        head = render_fields([
            ("outcome", self.outcome or "-"), ("paired blocks", self.n_blocks),
            ("tasks (clusters)", self.n_clusters),
            ("Shapley", self.shapley_method or self.shapley_note),
            ("total", "-" if self.total is None else self.total),
        ], caption="Per-step attribution")
        parts = [head]
        for kind in KINDS:
            values = self.contrastive if kind == "contrastive" else self.shapley
            if values is None:
                continue
            parts.append(render_estimates(
                ((f"{kind} {p}", values[p], *self.confidence_interval(p, kind),
                  self.standard_error(p, kind)) for p in self.players),
                confidence_level=self.confidence_level, spec="+.3f"))
        return "".join(parts) + render_notes([self.note])


def estimate(
    outcomes: Mapping[Iterable[str], ArrayLike],
    *,
    players: Sequence[str] | None = None,
    cluster: Any = None,
    shapley: ShapleyOption = "auto",
    seed: int = 0,
    confidence_level: float = 0.95,
) -> AttributionResult:
    """Contrastive effects and Shapley values from coalition outcomes, block by block.

    Args:
        outcomes: ``{coalition: Y per block}``: a coalition is an iterable of player
            names (``()`` or ``frozenset()`` for the agent's own arm), its value a 1-D
            array over the same paired blocks (one source window instance and replicate
            seed per block: common random numbers).
        players: the player names (default: every name in a coalition), sorted.
        cluster: the task of each block (default: every block its own).
        shapley: ``"auto"`` (default): exact when every coalition is given, else none
            (``shapley_note`` says what is missing); ``"exact"``: every coalition must be
            given; ``M``: the coalitions of ``shapley_permutations(n, M, seed)``; None:
            contrastive effects only.
        seed: the permutations' seed.
        confidence_level: of the cluster t intervals.

    Raises:
        ValueError: no baseline (``()``) or a player without its own coalition; arrays of
            different lengths or non-finite values; a coalition a requested Shapley mode
            needs but that is not given (named, with the arms that make it).

    Warns:
        DegenerateDataWarning: a single task; an attribution with the same value in every
            task (zero-width interval) or too skewed for the number of tasks.
    """
    level = check_confidence_level(confidence_level)
    table: dict[frozenset[str], FloatArray] = {}
    for key, values in outcomes.items():
        coalition = frozenset([key] if isinstance(key, str) else key)
        table[coalition] = block_values(values, f"the outcomes of coalition {sorted(coalition)}")
    names = tuple(sorted(players if players is not None
                         else {p for c in table for p in c}, key=str))
    if frozenset() not in table:
        raise ValueError("no baseline: give the agent's own arm as the empty coalition ()")
    n_blocks = table[frozenset()].shape[0]
    for c, arr in table.items():
        if arr.shape[0] != n_blocks:
            raise ValueError(f"coalition {sorted(c)} has {arr.shape[0]} blocks, the baseline "
                             f"{n_blocks}: the arms must be paired block by block")
    missing = [p for p in names if frozenset({p}) not in table]
    if missing:
        raise ValueError(f"player(s) {missing} have no arm of their own: a contrastive effect "
                         "needs each player changed alone (attribution.arms adds them)")
    base = table[frozenset()]
    contrastive = np.column_stack([table[frozenset({p})] - base for p in names])
    full = frozenset(names)
    total = table[full] - base if full in table else None
    shapley_block, method, note, spread = _shapley(table, names, shapley, seed)
    clusters = np.arange(n_blocks) if cluster is None else cluster
    levels, group = codes(clusters, name="cluster")
    G = len(levels)
    if G < 2:
        warnings.warn(
            f"all {n_blocks} block(s) are in one task: the intervals have zero width and say "
            "nothing about sampling error; attribute over at least two tasks",
            DegenerateDataWarning, stacklevel=2)
    per_block: dict[str, FloatArray] = {"contrastive": contrastive}
    if shapley_block is not None:
        per_block["shapley"] = shapley_block
    if total is not None:
        per_block["total"] = total
    per_cluster = {k: group_means(v, group, G) for k, v in per_block.items()}
    changed = {p: int(np.count_nonzero(contrastive[:, i])) for i, p in enumerate(names)}
    inert = [p for p in names if changed[p] == 0]
    if inert:
        warnings.warn(
            f"changing {', '.join(inert)} left the outcome as it was in every one of the "
            f"{n_blocks} blocks: a decision the re-entries never reach (STREAM@K counts the "
            "decisions of STREAM from the window's start), an alternative equal to the "
            "agent's own choice, or an outcome that does not depend on it; its effect 0 has "
            "no sampling error", DegenerateDataWarning, stacklevel=2)
    live = [i for i, p in enumerate(names) if changed[p]]
    if G >= 2 and live:
        warn_doubtful(per_cluster["contrastive"][:, live],
                      [f"contrastive {names[i]}" for i in live])
    means = {k: v.mean(axis=0) for k, v in per_cluster.items()}
    independent = {}
    base_se = cluster_standard_error(group_means(base, group, G))
    for p in names:
        arm_se = cluster_standard_error(group_means(table[frozenset({p})], group, G))
        independent[p] = math.hypot(arm_se, base_se)
    return AttributionResult(
        players=names, decisions={p: (p,) for p in names},
        contrastive={p: float(means["contrastive"][i]) for i, p in enumerate(names)},
        shapley=(None if shapley_block is None else
                 {p: float(means["shapley"][i]) for i, p in enumerate(names)}),
        total=None if total is None else float(means["total"]),
        shapley_method=method, per_block=per_block, per_cluster=per_cluster, baseline=base,
        confidence_level=level, n_blocks=n_blocks, n_clusters=G,
        permutation_spread=spread, shapley_note=note, independent_se=independent,
        outcomes=dict(table), group=group, changed=changed,
    )


def _shapley(table: Mapping[frozenset[str], FloatArray], names: tuple[str, ...],
             shapley: ShapleyOption, seed: int
             ) -> tuple[FloatArray | None, str | None, str, dict[str, float] | None]:
    """Per-block Shapley values, the method, why none, and the permutations' spread."""
    n = len(names)
    if shapley is None:
        return None, None, "not asked for (shapley=None)", None
    mode: Literal["exact"] | int
    if shapley == "auto":
        every = n <= MAX_EXACT_PLAYERS and all(frozenset(names[i] for i in c) in table
                                               for c in _coalitions(n, "exact", 0))
        if not every:
            have = sum(1 for c in table if c <= set(names))
            return None, None, (
                f"Shapley values need every coalition of the {n} players (2^{n} = {1 << n} "
                f"arms per block; {have} given) or shapley=M with the arms of "
                "attribution.arms(players, shapley=M, seed=S)"), None
        mode = "exact"
    else:
        mode = _shapley_mode(shapley, n)  # type: ignore[assignment]
    needed = _coalitions(n, mode, seed)
    for c in needed:
        key = frozenset(names[i] for i in c)
        if key not in table:
            how = ("shapley='exact'" if mode == "exact" else f"shapley={mode}, seed={seed}")
            raise ValueError(
                f"Shapley ({how}) needs the arm changing {sorted(key) or 'nothing'}, which "
                f"was not run: make the arms with attribution.arms(players, {how}) (or "
                f"agentlog replay --alter … --shapley {mode})")
    n_blocks = table[frozenset()].shape[0]
    phi = np.zeros((n_blocks, n))
    if mode == "exact":
        weights = [math.factorial(k) * math.factorial(n - k - 1) / math.factorial(n)
                   for k in range(n)]
        for c in needed:
            key = frozenset(names[i] for i in c)
            for i in range(n):
                if i in c:
                    continue
                with_i = frozenset(key | {names[i]})
                phi[:, i] += weights[len(c)] * (table[with_i] - table[key])
        return phi, "exact", "", None
    perms = shapley_permutations(n, mode, seed)
    marginals = np.zeros((len(perms), n_blocks, n))
    for m, perm in enumerate(perms):
        for k, i in enumerate(perm):
            before = frozenset(names[j] for j in perm[:k])
            marginals[m, :, i] = table[before | {names[i]}] - table[before]
    phi = marginals.mean(axis=0)
    # How far the M-permutation value may sit from the exact one: the spread over
    # permutations of the block-averaged marginal (antithetic pairs averaged first).
    pairs = marginals.mean(axis=1)
    if len(perms) >= 2:
        k = len(perms) // 2 * 2
        paired = (pairs[0:k:2] + pairs[1:k:2]) / 2
        spread = (paired.std(axis=0, ddof=1) / math.sqrt(paired.shape[0])
                  if paired.shape[0] >= 2 else np.full(n, math.nan))
    else:
        spread = np.full(n, math.nan)
    return (phi, f"permutations:{mode}", "",
            {p: float(spread[i]) for i, p in enumerate(names)})


def from_traces(
    source: TraceInput | Iterable[TraceInput],
    *,
    outcome: str | Callable[[Any], float],
    players: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    channel: str | None = None,
    shapley: ShapleyOption = "auto",
    seed: int = 0,
    incomplete: str = "error",
    confidence_level: float = 0.95,
) -> AttributionResult:
    """Per-step attribution from the output of ``intervene(..., arms=attribution.arms(...))``.

    Args:
        source: the intervention's output folder (its ``units.zst``), a trace, or
            a list of those. Runs without arm provenance are skipped (``n_skipped``).
        outcome: the ``Score`` each arm run holds once, or a function of the run.
        players: as given to ``arms`` (decision tokens, or ``{name: decisions}``); default
            every decision an arm changed, each its own player. Arm runs whose decisions
            are no coalition of the players are left out (``n_unused``).
        channel: with a score name, only scores of this channel count.
        shapley, seed: as ``estimate``; give the ``shapley``/``seed`` the arms were made
            with.
        incomplete: a block without every arm needed: ``"error"`` (default) or ``"drop"``
            (with a ``DegenerateDataWarning``).
        confidence_level: of the cluster t intervals.

    Raises:
        ValueError: a run whose arm is not an alteration arm (a 2×2 arm: use
            ``cess.effects_from_traces``); an arm run without the outcome, with it twice or
            with a non-finite one; an incomplete block (unless ``incomplete="drop"``); what
            ``estimate`` refuses.
    """
    if incomplete not in ("error", "drop"):
        raise ValueError(f"`incomplete` must be 'error' or 'drop'; found {incomplete!r}")
    level = check_confidence_level(confidence_level)  # before reading any file
    outcome_name = outcome if isinstance(outcome, str) else getattr(outcome, "__name__",
                                                                     repr(outcome))

    from agentlog.replay.interventions import ALTER_FACTOR

    def arm_of(factors: Mapping[str, Any], where: str) -> str:
        label = factors.get(ALTER_FACTOR)
        if not isinstance(label, str):
            raise ValueError(
                f"{where}: the run's arm ({dict(factors)}) is not an alteration arm; "
                "attribution reads the arms of attribution.arms / alteration_arm (for a "
                "2×2 design use cess.effects_from_traces)")
        return label

    runs = read_arm_runs(source, outcome=outcome, channel=channel, arm_of=arm_of,
                         describe=lambda label: f"{ALTER_FACTOR}={label}",
                         hint="agentlog.replay.intervene with attribution.arms (agentlog "
                              "replay --alter … --out DIR)")
    labels = {label for cell in runs.blocks.values() for label in cell}
    decisions_seen = sorted({d for label in labels if label for d in label.split("+")})
    if players is None and not decisions_seen:
        failed = (f"; {runs.n_failed} arm unit(s) failed (first: {runs.first_failure})"
                  if runs.n_failed else "")
        raise ValueError("no arm run changed a decision: only the agent's own arm ran"
                         f"{failed}. Fix the cause and run the intervention again (it "
                         "retries only the units not sealed)")
    groups = _players(players if players is not None else decisions_seen)
    names = list(groups)
    owner = {d: p for p, ds in groups.items() for d in ds}
    coalition_of: dict[str, frozenset[str] | None] = {}
    for label in labels:
        ds = set(label.split("+")) if label else set()
        members = {owner.get(d) for d in ds}
        ok = None not in members and all(set(groups[p]) <= ds for p in members if p)
        coalition_of[label] = frozenset(p for p in members if p) if ok else None
    needed = {frozenset(), *(frozenset({p}) for p in names)}
    mode = _shapley_mode(shapley, len(names)) if shapley != "auto" else None
    if mode is not None:
        needed |= {frozenset(names[i] for i in c) for c in _coalitions(len(names), mode, seed)}
    coalitions = {key: {c: value for label, (value, _where) in cell.items()
                        if (c := coalition_of[label]) is not None}
                  for key, cell in runs.blocks.items()}
    n_unused = sum(coalition_of[label] is None for cell in runs.blocks.values()
                   for label in cell)
    wanted = sorted(needed, key=lambda c: (len(c), sorted(c)))
    kept = complete_blocks(
        coalitions, lambda cell: ["+".join(sorted(c)) or "the agent's own" for c in wanted
                                  if c not in cell],
        incomplete, needs="the same arms")
    cells = [coalitions[key] for key in kept]
    common = set.intersection(*(set(v) for v in cells))
    rows: dict[Iterable[str], ArrayLike] = {c: [v[c] for v in cells] for c in common}
    runs.shared.warn(stacklevel=2)
    result = estimate(rows, players=names, cluster=[k[0] for k in kept], shapley=shapley,
                      seed=seed, confidence_level=level)
    return dataclasses.replace(
        result, decisions=groups, outcome=outcome_name, block=tuple(k[1] for k in kept),
        task=tuple(k[0] for k in kept), replicate=tuple(k[2] for k in kept),
        n_runs=runs.n_runs, n_skipped=runs.n_skipped, n_unused=n_unused)

