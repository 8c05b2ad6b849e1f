"""Certified leaderboards: admissibility, eq. 4, rank intervals, the ladder, calibration.

[LBC] §3.4 and Appendix A.3. A pair of systems ``(A, B)`` is compared on a readout
``n`` (or on the composite) in three steps, in this order:

1. **Admissibility** (Def. 1, Def. 7), decided from the plan and the sealed entries before
   any score is read (``admissibility`` takes no scores): Assumption 1 must be declared; a
   backbone change inside a scaffold window has no finite radius (refused); equal entry
   hashes on every common task make an *exact cell* (``ε_in = 0``, ``r = 0``); otherwise
   the entry mismatch is the mean per-task 1-Wasserstein distance between the declared
   entry feature of the two systems (``distance.wasserstein``), with Hoeffding's one-sided
   radius. Eq. 3 (``bounds.nuisance_radius``) turns it into ``ε̂_out`` and ``r``; the pair
   is admissible on ``n`` iff ``ε̂_out + r ≤ ε_fair,n``.
2. **Sampling radius**: the paired differences ``d_i = y_A,i − y_B,i`` on the common tasks
   (a failed task dropped, or scored ⊥, as declared), ``Δ̂ = mean d_i``, a cluster-robust
   standard error over task clusters and ``q = crit · se`` with ``crit`` a Bonferroni
   quantile at ``δ′/(2m)`` over the ``m`` pairs of the family. The plan's ``sampling``
   picks it: ``"cr2-bm-cf"`` (default) the bias-reduced CR2 variance
   ``Σ_g E_g² / (1 − n_g/N) / N²`` with Bell–McCaffrey degrees of freedom and the t
   quantile widened by the Cornish–Fisher skewness terms of the studentized mean, which
   holds ``δ′`` when cluster sizes differ and when the differences are skewed (rare 0/1
   successes against a continuous scorer); ``"cr2-bm"`` the same t quantile without the
   skewness terms; ``"cr1"`` the paper's ``G/(G−1) · Σ_g E_g² / N²`` with ``t(G−1)``
   (statsmodels' ``cov_cluster`` with ``use_correction``), ``E_g = Σ_{i∈g} (d_i − Δ̂)``. A
   pair with zero variance is never certified (``DegenerateDataWarning``). Each pair
   reports the skewness of its cluster-level differences beside its degrees of freedom;
   a certified pair that rests on a system whose score barely varies (a rare outcome
   that may not have happened), or under ``"cr2-bm"``/``"cr1"`` on symmetry the
   skewness terms would not grant, warns (``DegenerateDataWarning``).
3. **Certification** (eq. 4): ``A ≻ B`` iff ``|Δ̂| > q + ε̂_out + r`` with ``Δ̂ > 0``.
   Otherwise undecided: *attribution-limited* when ``|Δ̂| ≤ ε̂_out + r`` (more tasks alone
   cannot decide it) and *sampling-limited* otherwise (Appendix A.3); a sampling-limited
   pair whose effective degrees of freedom fall below 3 names the cluster that dominates.

Rank intervals come from the transitive closure of the certified relation:
``rank(X) = [1 + #ancestors, n − #descendants]`` (cycles are reported, never hidden). The
conventional ladder R0–R5 (Table 2) is computed beside the certificate, and Appendix F.5's
calibration — a per-cluster sign-flip null with one sign vector per draw shared by every
pair, the family-wise false-certification rate, the radius scale ``c*`` and leave-one-
cluster-out stability — is attached to the board.

Examples:
    >>> import numpy as np
    >>> from agentlog.estimators import certify
    >>> plan = certify.Plan.from_toml('''
    ... estimand = "whole-agent contrast under one shared task input"
    ... [readouts.f1]
    ... tolerance = 0.05
    ... [conditions]
    ... shared_entry = true
    ... [calibration]
    ... n_resamples = 200
    ... ''')
    >>> rng = np.random.default_rng(0)
    >>> task = rng.normal(0, 0.1, 40)
    >>> scores = {"a": 0.7 + task + rng.normal(0, 0.02, 40),
    ...           "b": 0.5 + task + rng.normal(0, 0.02, 40),
    ...           "c": 0.5 + task + rng.normal(0, 0.02, 40)}
    >>> board = certify.certify(scores, clusters=np.arange(40) // 2, plan=plan)
    >>> board.certified()
    [('a', 'b'), ('a', 'c')]
    >>> board.rank("a"), board.rank("b"), board.decision("b", "c").decision
    ((1, 1), (2, 3), 'undecided-sampling')
    >>> certify.rank_intervals(["x", "y", "z"], [("x", "y")]).intervals
    {'x': (1, 2), 'y': (2, 3), 'z': (1, 3)}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._admissibility import Admissibility
from ._admissibility import admissibility as _decide_admissibility
from ._board import BoardResult
from ._calibration import _calibrate
from ._decisions import _cells, _decisions, _ladder, _values, _warn_shape
from ._executor import Executor, check_executor, executing
from ._inputs import CertifyData, _certify_iv, _scores_hash
from ._plan import COMPOSITE, Plan
from ._ranks import rank_intervals

__all__ = ["certify"]



def certify(
    scores: Mapping[str, Any] | CertifyData,
    *,
    clusters: Sequence[Any] | ArrayLike | None = None,
    plan: Plan,
    admissibility: Admissibility | None = None,
    tasks: Sequence[str] | None = None,
    present: Mapping[str, ArrayLike] | None = None,
    failed: Mapping[str, ArrayLike] | None = None,
    input_hashes: Mapping[str, str] | None = None,
    calibrate: bool = True,
    executor: Executor = "local",
) -> BoardResult:
    """Certify a leaderboard ([LBC] eq. 4, Def. 7, §6.1; Table 2; Appendix F.5).

    Args:
        scores: ``system -> scores over tasks``: an array ``(n_tasks,)`` (one readout),
            ``(n_tasks, n_readouts)`` in the plan's readout order, or a mapping readout ->
            ``(n_tasks,)``; every system over the same tasks. Or the ``CertifyData`` of
            ``from_traces`` (which brings clusters, tasks, masks, entries and file hashes).
        clusters: the cluster of each task (required with arrays).
        plan: the certification plan.
        admissibility: the pre-score decision; by default it is decided here, before any
            score is read, from the CertifyData's entries or else from the plan alone.
        tasks: task labels (for messages and the report).
        present: ``system -> bool (n_tasks,)``: the system ran the task (default all).
        failed: ``system -> bool (n_tasks,)``: the task failed (⊥), handled per the plan's
            failure policy. Scores at absent or failed tasks are ignored (may be NaN); a
            NaN anywhere else is an error.
        input_hashes: ``path -> SHA-256`` of the inputs, stored on the board.
        calibrate: compute Appendix F.5 (``plan.calibration``); False skips it.
        executor: where the calibration's sign-flip draws are computed: ``"local"``, or
            ``"ray"`` (blocks of draws as Ray tasks; ``agentlog.estimators.use_ray``). The
            same draws either way, so the same board, bit for bit.

    Returns:
        ``BoardResult``.
    """
    inp = _certify_iv(scores, clusters, plan, tasks, present, failed, input_hashes)
    how = check_executor(executor)
    if admissibility is None:
        # Decided from entries and declarations only; the scores are not passed.
        admissibility = _decide_admissibility(
            inp.entries, plan=plan, systems=None if inp.entries is not None else inp.systems)
    elif not isinstance(admissibility, Admissibility):
        raise TypeError(f"`admissibility` must be a certify.Admissibility; found "
                        f"{type(admissibility).__name__}")
    adm = admissibility
    if adm.plan_hash != plan.hash():
        raise ValueError("`admissibility` was decided under another plan (hash "
                         f"{adm.plan_hash[:12]}…, this plan {plan.hash()[:12]}…); decide it "
                         "again with this plan")
    pair_names = plan.family_pairs(list(inp.systems))
    index = {s: i for i, s in enumerate(inp.systems)}
    for a, b in pair_names:
        adm.pair(a, b)  # raises with the pair's names when it was not decided
    pairs = [(index[a], index[b]) for a, b in pair_names]
    values, used = _values(plan, inp)
    cells = _cells(plan, inp, adm, pairs, values, used)
    decisions = _decisions(plan, inp, adm, cells)
    _warn_shape(plan, inp, cells, values, decisions)
    ranks = {t: rank_intervals(inp.systems, [(p.better, p.worse) for p in decisions[t]
                                             if p.better is not None and p.worse is not None])
             for t in plan.targets}
    ladder = _ladder(plan, inp, cells, values, used, decisions[plan.target], adm)
    calib = None
    if calibrate and plan.calibration.n_resamples > 0:
        with executing(how):
            calib = _calibrate(plan, inp, cells, decisions, ranks[plan.target], how)
    with np.errstate(invalid="ignore", divide="ignore"):
        n_used = used.sum(axis=1)
        means = (values * used[:, :, None]).sum(axis=1) / n_used[:, None]  # (S, T)
    orient = {COMPOSITE: 1.0, **plan.orientation()}
    table = {s: {t: float(means[i, j] * orient[t]) for j, t in enumerate(plan.targets)}
             for i, s in enumerate(inp.systems)}
    t_main = plan.targets.index(plan.target)
    order = sorted(range(len(inp.systems)),
                   key=lambda i: (-np.nan_to_num(means[i, t_main], nan=-np.inf),
                                  inp.systems[i]))
    return BoardResult(
        systems=tuple(inp.systems[i] for i in order), target=plan.target,
        targets=plan.targets, scores=table,
        n_tasks={s: int(n_used[i]) for i, s in enumerate(inp.systems)},
        decisions=decisions, ranks=ranks, ladder=ladder, calibration=calib,
        admissibility=adm, plan=plan, plan_hash=plan.hash(),
        input_hashes=inp.input_hashes, scores_hash=_scores_hash(inp, plan.readout_names),
        family_size=len(pairs), n_clusters=len(inp.clusters),
    )
