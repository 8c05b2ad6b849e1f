"""CESS arrays from recorded traces: ``from_traces`` and the outcome/prediction tables.

``cess.estimate`` works on arrays; this module builds them from what ``al.select`` and
``al.proceed`` logged ([SSC] eq. 5): per run, the t-th ``Selection`` of the document
stream is round t, ``p_t`` is the logged probability of the chosen candidate and
``s_t = Π(1 − c_k)`` is the product of the continue probabilities ``p`` of every
``Continuation`` of the stop stream logged before that selection (so ``c_1 = 0`` when
nothing precedes the first selection). Evidence scores ``Y`` and predictions ``m`` come
from tables keyed by candidate id (or by ``(task, candidate_id)``).

Examples:
    >>> import agentlog as al
    >>> from agentlog.estimators import cess
    >>> with al.record("agentlog-cess-trace-doctest.zst", system="s", seed=1, task="q"):
    ...     i = al.select([0.5, 0.25, 0.25], candidates=["a", "b", "c"], name="doc")
    >>> data = cess.from_traces("agentlog-cess-trace-doctest.zst",
    ...                         outcomes={"a": 0.4, "b": -0.2, "c": 0.1},
    ...                         predictions={"a": 0.2, "b": 0.0, "c": 0.1}, budget=1)
    >>> data.y.shape, round(float(data.m_bar[0]), 9), round(float(data.theta_star[0]), 9)
    ((1, 1), 0.1, 0.1)
    >>> eq6 = data.m_bar + (data.y[:, 0] - data.m_chosen[:, 0]) / (3 * data.p[:, 0])  # K = 1
    >>> bool(abs(data.estimate(lam=1.0).dr_raw[0] - eq6[0]) < 1e-12)
    True
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from agentlog import DegenerateDataWarning, Trace
from agentlog.deprecation import warn_renamed
from agentlog.records import Continuation, RunStart, Selection, iter_runs

from ._cess import CessResult, estimate
from ._cess_design import SamplingDesign, sampling_design
from ._cess_tables import (
    _as_table,
    _lookup,
    _Table,
    load_table,
)
from ._executor import Executor, check_dataset, check_executor
from ._shared_noise import SharedNoise

__all__ = ["CessData", "from_dataset", "from_traces", "load_table"]

FloatArray = NDArray[np.float64]
TraceInput = Trace | str | os.PathLike[str]


# -- the result ------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class CessData:
    """The CESS arrays of a set of recorded runs, one row per run ([SSC] eq. 5-6).

    Attributes:
        y, p, s, m_chosen: shape ``(n_runs, budget)``: per round the evidence score of the
            selected document, its logged selection probability ``p_t``, the survival
            probability ``s_t`` and its prediction ``m_{J_t}``; NaN after the last round.
        m_bar: the mean prediction over the pool (over the reachable pool D+ when ρ > 0).
        n_pool: the pool size ``N`` (``|D+|`` when ρ > 0).
        rho: the inaccessible mass ``ρ = 1 − |D+|/N`` (eq. 10), 0 when every round within the
            budget covered the whole pool (``cess.sampling_design``).
        replacement: per run, the form ``estimate`` uses: ``"with"`` ([SSC] eq. 6) or
            ``"without"`` (Des Raj's ordered form [Raj56]), as ``from_traces`` chose it.
        in_support: shape ``(n_runs, budget)``: False where the round's chosen candidate
            lies outside D+ (a round that adds no correction); True elsewhere.
        theta_star: ``θ* = (1/N) Σ Y_i`` over the whole pool, NaN unless the outcomes
            cover every candidate of the pool.
        run_id, path, task, system, seed: where each row comes from.
        condition: ``meta["ranking"]`` when recorded, else ``meta.get("condition")``.
        cluster: ``meta["cluster"]``, else the task (the unit of clustered resampling).
        replicate: ``meta.get("replicate")``.
        budget: ``K``, the number of columns.
        stream, stop_stream: the streams the rows were built from.
    """

    y: FloatArray
    p: FloatArray
    s: FloatArray
    m_chosen: FloatArray
    m_bar: FloatArray
    n_pool: NDArray[np.int64]
    rho: FloatArray
    theta_star: FloatArray
    run_id: tuple[str, ...]
    path: tuple[str, ...]
    task: tuple[str | None, ...]
    system: tuple[str | None, ...]
    condition: tuple[str | None, ...]
    seed: tuple[int | None, ...]
    cluster: tuple[str | None, ...]
    replicate: tuple[Any, ...]
    replacement: tuple[str, ...]
    in_support: NDArray[np.bool_]
    budget: int
    stream: str = "doc"
    stop_stream: str | None = "stop"

    def __len__(self) -> int:
        return int(self.y.shape[0])

    @property
    def n_rounds(self) -> NDArray[np.int64]:
        """Observed rounds ``T`` per run (within the budget)."""
        counts: NDArray[np.int64] = (~np.isnan(self.y)).sum(axis=1).astype(np.int64)
        return counts

    @property
    def has_theta_star(self) -> bool:
        """True when θ* is known for every run (the outcomes cover each whole pool)."""
        return bool(len(self)) and bool(np.isfinite(self.theta_star).all())

    def estimate(self, **kwargs: Any) -> CessResult:
        """``cess.estimate`` on these arrays.

        ``budget`` defaults to ``self.budget`` (a smaller one is a prefix analysis),
        ``rho`` to ``self.rho`` when some run reaches only part of its pool, which adds the
        eq. 10 interval (and a ``DegenerateDataWarning``), ``replacement`` and
        ``in_support`` to what ``from_traces`` read off the vectors. Every other keyword
        (``lam``, ``order``, ``anchor``, ``bounds``) goes to ``cess.estimate`` unchanged.
        """
        kwargs.setdefault("budget", self.budget)
        if "rho" not in kwargs and (self.rho > 0).any():
            kwargs["rho"] = self.rho
        kwargs.setdefault("replacement", list(self.replacement))
        if "in_support" not in kwargs and not self.in_support.all():
            kwargs["in_support"] = self.in_support
        return estimate(self.y, self.p, self.s, self.m_chosen, self.m_bar, self.n_pool,
                        **kwargs)

_ids_decoder = msgspec.msgpack.Decoder(list[Any])


# -- tables ------------------------------------------------------------------------------


@dataclass
class _Rows:
    y: list[list[float]] = field(default_factory=list)
    p: list[list[float]] = field(default_factory=list)
    s: list[list[float]] = field(default_factory=list)
    m: list[list[float]] = field(default_factory=list)
    m_bar: list[float] = field(default_factory=list)
    n_pool: list[int] = field(default_factory=list)
    rho: list[float] = field(default_factory=list)
    theta: list[float] = field(default_factory=list)
    in_support: list[tuple[bool, ...]] = field(default_factory=list)
    forms: list[str] = field(default_factory=list)
    # (where, design) of the runs a warning is about only: memory stays flat on clean runs
    troubled: list[tuple[str, SamplingDesign]] = field(default_factory=list)
    labels: list[tuple[Any, ...]] = field(default_factory=list)


def from_traces(
    source: TraceInput | Iterable[TraceInput],
    *,
    outcomes: Any,
    predictions: Any,
    stream: str = "doc",
    stop_stream: str | None = "stop",
    budget: int,
    pool: Mapping[str, Sequence[Any]] | None = None,
    unfinished: str = "drop",
    replacement: str = "auto",
) -> CessData:
    """Build the CESS arrays of every run in some traces ([SSC] eq. 5-6, 10).

    Args:
        source: an ``al.Trace``, a trace file, a folder (every ``*.zst`` below it) or a list
            of those. One row per run, in file order.
        outcomes: evidence scores ``Y``: ``{candidate_id: y}``, ``{(task, candidate_id): y}``,
            a table with columns ``candidate_id[, task]`` and a value (a dict of columns, a
            pyarrow Table, a pandas DataFrame) or a file path (``load_table``).
        predictions: outcome-model predictions ``m``, in the same forms.
        stream: the ``al.select`` stream of document choices; its t-th selection in a run is
            round t.
        stop_stream: the ``al.proceed`` stream of stop decisions; ``None`` for fixed-length
            search (``s_t = 1``).
        budget: ``K``, the maximum budget; later rounds are dropped (a prefix). It may exceed
            the longest run.
        pool: ``{task: [candidate ids]}``, the whole candidate pool of each task. Without it
            the pool is the task's ids in ``predictions`` when that is keyed by task, else
            the union of the candidates in the run's logged vectors.
        unfinished: what to do with a run that crashed (no ``RunEnd``, e.g. a killed
            process) or whose body raised: ``"drop"`` (default, with a
            ``DegenerateDataWarning``) or ``"keep"``. Such a run ended early for a reason
            outside the logged design, so keeping it as a trajectory that *stopped* would
            treat the crash as a draw of the stopping policy.
        replacement: ``"auto"`` (default) reads each run's form off its vectors
            (``cess.sampling_design``): a run that gives the candidates it opened probability
            0 later samples without replacement and gets Des Raj's ordered form [Raj56]; a
            run that keeps them positive gets eq. 6. ``"with"`` or ``"without"`` forces a
            form: ``"with"`` on a run that zeroes every opened candidate, or ``"without"``
            on a run that reopens one, raises; ``"without"`` on vectors that keep opened
            candidates positive renormalises them over the unopened ones (the propensity
            of a controller that redraws an opened pick) and warns.

    Returns:
        A ``CessData``; ``replacement`` records the form of each run. When some candidates
        are not covered by every round within the budget (ρ > 0), the run's ``n_pool`` and
        ``m_bar`` describe the reachable pool D+, so the estimate targets θ+ and
        ``CessData.estimate`` adds the eq. 10 interval.

    Warns:
        SharedNoiseWarning: runs of different tasks drew the same noise (recorded with
            generator /1 or /2 under one seed), so the tasks are not independent.
        DegenerateDataWarning: a run's support changed (a candidate positive at one round
            had probability 0 at another before it was opened: Assumption 1's overlap
            fails, those candidates leave D+ and the interval is reported); a run mixes the
            two forms (its conflicting candidates leave D+); a forced ``"without"``
            renormalised vectors. Each names the first run and what to do.

    Raises:
        ValueError: an unknown stream; a run with no selection of ``stream``; a selected
            candidate with no (or a NaN) outcome or prediction; a chosen probability or a
            survival probability that is not positive; a pool candidate without a
            prediction. Each message names the file, run, round and candidate.
    """
    return _from_runs(iter_runs(source, name="source"), outcomes=outcomes,
                      predictions=predictions, stream=stream, stop_stream=stop_stream,
                      budget=budget, pool=pool, unfinished=unfinished,
                      replacement=replacement)


def from_dataset(
    dataset: str | os.PathLike[str] | Mapping[str, Any],
    *,
    outcomes: Any,
    predictions: Any,
    stream: str = "doc",
    stop_stream: str | None = "stop",
    budget: int,
    pool: Mapping[str, Sequence[Any]] | None = None,
    unfinished: str = "drop",
    replacement: str = "auto",
    executor: Executor = "local",
) -> CessData:
    """``from_traces`` of the traces a Parquet dataset was exported from (``agentlog
    export --format parquet``), read from its ``runs``, ``selections``, ``continuations``
    and ``pools`` tables: the same ``CessData``, rows in the same order, to the bit.

    The per-run stage (each run's selections and continuations, rebuilt from its rows by
    ``agentlog.dataset.iter_runs``, through the per-run stage of ``from_traces``) is a
    group-by on ``run_id``: over Arrow tables in this process (``executor="local"``; a
    chunk of runs' records at a time), or on Ray Data (``"ray"``: the tables' union grouped
    by run in Ray's workers). The driver puts the per-run rows in the order ``from_traces``
    reads the source files in, and raises the first error and gives the warnings in that
    order, as ``from_traces`` does.

    Args:
        dataset: the dataset folder, or its tables already selected (e.g. filtered in
            SQL): ``{"runs": ..., "selections": ..., "continuations": ..., "pools": ...}``
            as pyarrow tables or DuckDB relations (``agentlog.dataset.iter_runs`` says
            which columns).
        outcomes, predictions, stream, stop_stream, budget, pool, unfinished, replacement:
            as ``from_traces``.
        executor: ``"local"``, or ``"ray"`` to run the per-run stage on Ray Data
            (``dataset`` must then be a folder every node reads, or an ``s3://`` URI).
            The same ``CessData`` either way, bit for bit.

    Raises:
        ValueError: as ``from_traces``; a folder that is not a dataset of this version.
        MissingDependencyError: pyarrow is not installed, or ``executor="ray"`` without
            Ray (``pip install 'agentlog[ray]'``).
    """
    budget = _from_runs_iv(budget, unfinished, replacement)
    how = check_executor(executor)
    check_dataset(dataset, how)
    from ._cess_dataset import from_stage, per_run_stage

    stage = per_run_stage(dataset, outcomes=_as_table(outcomes, "outcomes"),
                          predictions=_as_table(predictions, "predictions"), pool=pool,
                          stream=stream, stop_stream=stop_stream, budget=budget,
                          replacement=replacement, unfinished=unfinished, executor=how)
    return from_stage(stage, budget=budget, stream=stream, stop_stream=stop_stream,
                      replacement=replacement)


def _from_runs(
    runs: Iterable[Any], *, outcomes: Any, predictions: Any, stream: str,
    stop_stream: str | None, budget: int, pool: Mapping[str, Sequence[Any]] | None,
    unfinished: str, replacement: str,
) -> CessData:
    """The per-run stage over ``runs`` (``TraceRun``s, in file order), then the arrays."""
    budget = _from_runs_iv(budget, unfinished, replacement)
    y_table = _as_table(outcomes, "outcomes")
    m_table = _as_table(predictions, "predictions")
    rows = _Rows()
    summary_cache: dict[Any, tuple[float, float]] = {}
    # The runs stream one at a time, so what the in-memory loader decided before its loop
    # (the streams present, which runs only enclose nested runs) is known only at the
    # end: a run's verdict that depends on it waits in `pending`, in run order, and the
    # first error is raised after the stream checks, exactly as before.
    sel_names: set[str] = set()
    cont_names: set[str] = set()
    child_parents: set[str] = set()
    paths: list[str] = []
    pending: list[tuple[str, ValueError | None]] = []  # (run id, error or a drop)
    failed = False
    current: Trace | None = None
    ids_cache: dict[bytes, tuple[Any, ...]] = {}
    shared = SharedNoise()
    for trace, run in runs:
        if trace is not current:
            current, ids_cache = trace, {}
            paths.append(trace.path)
        start = run.start
        if start is not None and start.parent_run is not None:
            child_parents.add(start.parent_run)
        for rec in run.records:
            kind = type(rec)
            if kind is Selection:
                sel_names.add(rec.name)
            elif kind is Continuation:
                cont_names.add(rec.name)
        if failed:
            continue  # only the names above still matter
        if unfinished == "drop" and (not run.complete or run.failed):
            if start is not None:
                pending.append((start.run_id, None))
            continue
        try:
            _add_run(rows, trace, run, ids_cache, y_table, m_table, pool, stream,
                     stop_stream, budget, summary_cache, replacement)
            shared.add(start)
        except _NoSelections as exc:
            pending.append((exc.run_id, exc))
        except ValueError as exc:
            pending.append(("", exc))
            failed = True
    error: ValueError | None = None
    dropped: list[str] = []
    for run_id, problem in pending:
        if run_id in child_parents:
            continue  # a container of nested runs, not a trajectory of its own
        if problem is not None:
            error = problem
            break
        dropped.append(run_id)
    n = len(rows.labels)
    finish(sel_names=sel_names, cont_names=cont_names, paths=paths, stream=stream,
           stop_stream=stop_stream, error=error, dropped=dropped, n=n, shared=shared,
           designs=rows.troubled, replacement=replacement)

    def grid(values: list[list[float]]) -> FloatArray:
        out = np.full((n, budget), np.nan)
        for i, v in enumerate(values):
            out[i, :len(v)] = v
        return out

    labels = list(zip(*rows.labels, strict=True))
    return CessData(
        y=grid(rows.y), p=grid(rows.p), s=grid(rows.s), m_chosen=grid(rows.m),
        m_bar=np.array(rows.m_bar, dtype=np.float64),
        n_pool=np.array(rows.n_pool, dtype=np.int64),
        rho=np.array(rows.rho, dtype=np.float64),
        theta_star=np.array(rows.theta, dtype=np.float64),
        run_id=tuple(labels[0]), path=tuple(labels[1]), task=tuple(labels[2]),
        system=tuple(labels[3]), condition=tuple(labels[4]), seed=tuple(labels[5]),
        cluster=tuple(labels[6]), replicate=tuple(labels[7]),
        replacement=tuple(rows.forms),
        in_support=np.array([list(r) + [True] * (budget - len(r)) for r in rows.in_support],
                            dtype=bool).reshape(n, budget),
        budget=budget, stream=stream, stop_stream=stop_stream,
    )


def finish(*, sel_names: set[str], cont_names: set[str], paths: Sequence[str], stream: str,
           stop_stream: str | None, error: ValueError | None, dropped: Sequence[str], n: int,
           shared: SharedNoise, designs: list[tuple[str, SamplingDesign]],
           replacement: str) -> None:
    """What ``from_traces`` and ``from_dataset`` check once every run's per-run stage is
    done, in this order: the streams present, the first error in run order, the runs left
    out unfinished (``dropped``: their ids in run order), no run left (``n``), shared
    noise, the sampling designs. Its warnings point at the caller of ``from_traces`` or
    ``from_dataset``, three frames up."""
    _check_streams(sel_names, cont_names, _files(paths), stream, stop_stream)
    if error is not None:
        raise error
    if dropped:
        warnings.warn(
            f"{len(dropped)} run(s) crashed or raised before they ended (first: {dropped[0]}) "
            "and were left out: their early end is not a stop drawn from the logged design. "
            "Pass unfinished='keep' to include them",
            DegenerateDataWarning, stacklevel=4,
        )
    if n == 0:
        raise ValueError(f"no runs with selections of stream {stream!r} in {_files(paths)}")
    shared.warn(stacklevel=4)
    _warn_designs(designs, replacement, stacklevel=5)


def _from_runs_iv(budget: Any, unfinished: str, replacement: str) -> int:
    """``budget`` as an int, after the checks of ``from_traces``'s arguments."""
    if not isinstance(budget, int | np.integer) or isinstance(budget, bool) or budget < 1:
        raise ValueError(f"`budget` must be a positive int (K in [SSC] eq. 6); "
                         f"found {budget!r}")
    if unfinished not in ("drop", "keep"):
        raise ValueError(f"`unfinished` must be 'drop' or 'keep'; found {unfinished!r}")
    if replacement not in ("auto", "with", "without"):
        raise ValueError(f"`replacement` must be 'auto', 'with' or 'without'; found "
                         f"{replacement!r}")
    return int(budget)


def from_trace(trace_or_paths: TraceInput | Iterable[TraceInput], **kwargs: Any) -> CessData:
    """Deprecated: ``cess.from_traces`` (same arguments); goes in the next release."""
    warn_renamed("cess.from_trace", "cess.from_traces")
    return from_traces(trace_or_paths, **kwargs)


def _warn_designs(designs: list[tuple[str, SamplingDesign]], replacement: str, *,
                  stacklevel: int = 3) -> None:
    """One ``DegenerateDataWarning`` per kind of design problem, naming the first run."""
    changed = [(w, d) for w, d in designs if d.dropped]
    if changed:
        where, d = changed[0]
        t, cid, positive = d.dropped[0]
        warnings.warn(
            f"{len(changed)} run(s) changed their support (first: {where}, round {t}: "
            f"candidate {cid!r} had probability 0 although it was positive at round "
            f"{positive} and not yet opened): [SSC] Assumption 1's overlap fails at those "
            "rounds, so no estimate of θ* from them is design-unbiased. Such candidates are "
            f"left out of the reachable pool D+ (ρ up to {max(x.rho for _, x in changed):.3g})"
            " and the eq. 10 interval is reported; the point estimate approximates the mean "
            "θ+ over D+ (exactly only when the same candidates drop whatever the run opens). "
            "To estimate θ*, keep every unopened candidate's probability positive at every "
            "round (log the whole pool in each vector)",
            DegenerateDataWarning, stacklevel=stacklevel,
        )
    mixed = [(w, d) for w, d in designs if d.conflicts]
    if mixed:
        where, d = mixed[0]
        t, cid = d.conflicts[0]
        how = ("you passed replacement='with'" if replacement == "with" else
               "the form that keeps more of the pool was taken")
        warnings.warn(
            f"{len(mixed)} run(s) give some opened candidates probability 0 later and keep "
            f"others positive (first: {where}, round {t}, candidate {cid!r}), so neither "
            f"eq. 6 nor Des Raj's form is their design; {how} ({d.replacement} replacement) "
            "and the opened candidates that contradict it are left out of D+ (ρ > 0, eq. 10 "
            "interval). Record one rule (zero every opened candidate, or none), or pass "
            "replacement='without' if the controller never reopens a document",
            DegenerateDataWarning, stacklevel=stacklevel,
        )
    renormalised = [(w, d) for w, d in designs if d.renormalised > 0]
    if renormalised:
        where, d = renormalised[0]
        warnings.warn(
            f"replacement='without' on {len(renormalised)} run(s) whose vectors keep "
            f"probability on candidates already opened (first: {where}, mass "
            f"{d.renormalised:.3g}): their chosen probabilities were renormalised over the "
            "unopened candidates, the propensity only of a controller that redraws when it "
            "picks an opened document. If it could reopen one, pass replacement='auto'",
            DegenerateDataWarning, stacklevel=stacklevel,
        )


def _files(paths: Sequence[str]) -> str:
    """The files that held runs, for messages (a streamed file without runs never shows)."""
    if not paths:
        return "the traces given (they hold no runs)"
    return ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


def _check_streams(sel_names: set[str], cont_names: set[str], files: str, stream: str,
                   stop_stream: str | None) -> None:
    """Both stream names at once: a wrong ``stream`` often comes with a wrong stop stream."""
    problems = []
    if stream not in sel_names:
        have = sorted(sel_names)
        hint = (f"the traces hold select streams {have}: pass one as stream= (--stream)"
                if have else "the traces hold no al.select records at all")
        problems.append(f"unknown stream {stream!r}: no selections of it in {files}; {hint}")
    if stop_stream is not None and cont_names and stop_stream not in cont_names:
        problems.append(
            f"unknown stop stream {stop_stream!r}: no continuations of it in {files}; the "
            f"traces hold proceed streams {sorted(cont_names)}: pass one as stop_stream= "
            "(--stop-stream), or stop_stream=None for fixed-length search (s_t = 1)")
    if problems:
        raise ValueError("; and ".join(problems))


class _NoSelections(ValueError):
    """A run without selections of the stream: an error unless it only encloses nested
    runs, which the stream tells only once every run has been read."""

    def __init__(self, message: str, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


def _add_run(
    rows: _Rows, trace: Trace, run: Any, ids_cache: dict[bytes, tuple[Any, ...]],
    y_table: _Table, m_table: _Table,
    pool: Mapping[str, Sequence[Any]] | None, stream: str, stop_stream: str | None,
    budget: int, summary_cache: dict[Any, tuple[float, float]], replacement: str,
) -> None:
    start: RunStart | None = run.start
    run_id = start.run_id if start is not None else f"#{run.run}"
    task = start.task if start is not None else None
    meta: Mapping[str, Any] = start.meta if start is not None else {}
    where = f"{trace.path}: run {run_id}" + (f" (task {task!r})" if task is not None else "")

    def ids_of(sel: Selection) -> tuple[Any, ...]:
        ids = ids_cache.get(sel.pool)
        if ids is None:
            try:
                ids = ids_cache[sel.pool] = tuple(_ids_decoder.decode(trace.blob(sel.pool)))
            except (KeyError, msgspec.DecodeError) as exc:
                raise ValueError(f"{where}: the candidate pool of selection step {sel.step} "
                                 f"cannot be read ({exc}); run agentlog verify on the file"
                                 ) from None
        return ids

    chosen: list[Any] = []
    ss: list[float] = []
    vectors: list[tuple[tuple[Any, ...], FloatArray]] = []
    logged: set[bytes] = set()  # pool hashes of every vector of the run, for the universe
    surv = 1.0
    for rec in run.records:
        kind = type(rec)
        if kind is Continuation:
            if rec.name == stop_stream and len(chosen) < budget:
                if rec.forced:
                    raise ValueError(
                        f"{where}, before round {len(chosen) + 1}: the stop decision (stream "
                        f"{stop_stream!r} step {rec.step}) was forced by steer {rec.steer!r}, "
                        "so no continuation probability produced it and the run has no "
                        "survival weight ([SSC] eq. 6). Steer with a probability (p=1 or 0 "
                        "for a fixed horizon) instead of a forced bool, or leave the run out"
                    )
                # After a steer, rec.p is the probability the decision was drawn with
                # (the agent's own is in rec.policy_p): the weight of the logged design.
                surv *= rec.p
        elif kind is Selection and rec.name == stream:
            logged.add(rec.pool)
            if len(chosen) >= budget:
                continue
            t = len(chosen) + 1
            if rec.forced:
                raise ValueError(
                    f"{where}, round {t}: the choice (stream {stream!r} step {rec.step}) was "
                    f"forced by steer {rec.steer!r}: an index, not a draw from a logged "
                    "vector, so it has no inverse-probability weight ([SSC] eq. 5). Steer "
                    "with a probability vector instead, or leave the run out (a policy "
                    "effect, not CESS, compares such arms)"
                )
            ids = ids_of(rec)
            # After a steer, the logged vector is the one the choice was drawn from (the
            # agent's own is policy_probs): its entry is the propensity of the choice.
            probs = trace.probs(rec)
            if not 0 <= rec.choice < len(ids) or len(ids) != len(probs):
                raise ValueError(f"{where}, round {t}: the selection does not match its pool "
                                 f"({len(ids)} ids, {len(probs)} probabilities, choice "
                                 f"{rec.choice}); run agentlog verify on the file")
            p_chosen = float(probs[rec.choice])
            cid = ids[rec.choice]
            if not p_chosen > 0:
                raise ValueError(
                    f"{where}, round {t}: the chosen candidate {cid!r} has logged probability "
                    f"{p_chosen}; a chosen probability must be > 0 ([SSC] Assumption 1). "
                    "The choice was forced or the vector is wrong: re-record the run, or "
                    "leave it out"
                )
            if not surv > 0:
                raise ValueError(
                    f"{where}, round {t}: the run reached this round although its logged "
                    f"continue probabilities multiply to {surv}; s_t must be > 0 "
                    f"(stop stream {stop_stream!r}): re-record the run, or leave it out"
                )
            chosen.append(cid)
            ss.append(surv)
            vectors.append((ids, probs))
    if not chosen:
        own = sorted({r.name for r in run.records if type(r) is Selection})
        raise _NoSelections(
            f"{where}: no selections of stream {stream!r}; this run holds streams "
            f"{own or 'none'}: pass the document stream as stream= (--stream), or leave the "
            "run out", run_id)

    y_values = y_table.of(task, where)
    m_values = m_table.of(task, where)
    y_row: list[float] = []
    m_row: list[float] = []
    for t, cid in enumerate(chosen, start=1):
        for table, values, row in ((y_table, y_values, y_row), (m_table, m_values, m_row)):
            v = _lookup(values, cid)
            name = "outcome" if table is y_table else "prediction"
            key = (f"candidate_id={cid}" + (f", task={task}" if table.by_task is not None
                                            else ""))
            if v is None:
                raise ValueError(
                    f"{where}, round {t}: the selected candidate {cid!r} has no {name} in "
                    f"`{table.what}`; add a row for it ({key})"
                )
            if math.isnan(v):
                raise ValueError(
                    f"{where}, round {t}: the selected candidate {cid!r} has a NaN {name} in "
                    f"`{table.what}`; every opened document needs its {name} ({key})"
                )
            row.append(v)

    if pool is not None:
        if task is None or task not in pool:
            raise ValueError(f"{where}: `pool` has no entry for task {task!r}; give every "
                             "task's candidate ids")
        universe: tuple[Any, ...] = tuple(pool[task])
        pool_key: Any = ("pool", task)
    elif m_table.by_task is not None:
        universe = tuple(m_values)
        pool_key = ("predictions", task)
    else:
        seen: dict[Any, None] = {}
        for h in logged:
            seen.update(dict.fromkeys(ids_cache.get(h) or _decode_ids(trace, h, where)))
        universe = tuple(seen)
        pool_key = None
    try:
        support = sampling_design(vectors, chosen, pool=universe, replacement=replacement)
    except ValueError as exc:
        hint = ("; pass the whole candidate pool of the task (`pool`, or a task column in "
                "the predictions)" if "`pool`" in str(exc) else "")
        raise ValueError(f"{where}: {exc}{hint}") from None
    if support.rho > 0:
        reachable: tuple[Any, ...] = tuple(c for c in universe if c in support.reachable)
        m_bar = _mean_prediction(reachable, m_values, m_table, where)
        n_pool = len(reachable)
        theta = _theta_star(universe, y_values)
    else:
        cached = summary_cache.get(pool_key) if pool_key is not None else None
        if cached is None:
            cached = (_mean_prediction(universe, m_values, m_table, where),
                      _theta_star(universe, y_values))
            if pool_key is not None:
                summary_cache[pool_key] = cached
        m_bar, theta = cached
        n_pool = len(universe)

    rows.y.append(y_row)
    rows.m.append(m_row)
    rows.p.append(list(support.p))  # renormalised only under a forced "without"
    rows.in_support.append(support.in_support)
    rows.forms.append(support.replacement)
    if support.dropped or support.conflicts or support.renormalised > 0:
        rows.troubled.append((where, support))
    rows.s.append(ss)
    rows.m_bar.append(m_bar)
    rows.n_pool.append(n_pool)
    rows.rho.append(support.rho)
    rows.theta.append(theta)
    condition = meta.get("ranking", meta.get("condition"))
    cluster = meta.get("cluster", task)
    rows.labels.append((
        run_id, trace.path, task, start.system if start is not None else None,
        None if condition is None else str(condition),
        start.seed if start is not None else None,
        None if cluster is None else str(cluster), meta.get("replicate"),
    ))


def _decode_ids(trace: Trace, h: bytes, where: str) -> tuple[Any, ...]:
    try:
        return tuple(_ids_decoder.decode(trace.blob(h)))
    except (KeyError, msgspec.DecodeError) as exc:
        raise ValueError(f"{where}: a candidate pool cannot be read ({exc}); run agentlog "
                         "verify on the file") from None


def _mean_prediction(
    ids: Sequence[Any], values: Mapping[Any, float], table: _Table, where: str
) -> float:
    if not ids:
        raise ValueError(f"{where}: the candidate pool is empty")
    total = 0.0
    for cid in ids:
        v = _lookup(values, cid)
        if v is None or math.isnan(v):
            raise ValueError(
                f"{where}: candidate {cid!r} of the pool has {'no' if v is None else 'a NaN'} "
                f"prediction in `{table.what}`; m̄ averages the predictions over the whole "
                "pool ([SSC] eq. 6): give every candidate a prediction, or pass `pool`"
            )
        total += v
    return total / len(ids)


def _theta_star(ids: Sequence[Any], values: Mapping[Any, float]) -> float:
    total = 0.0
    for cid in ids:
        v = _lookup(values, cid)
        if v is None or math.isnan(v):
            return math.nan
        total += v
    return total / len(ids) if ids else math.nan
