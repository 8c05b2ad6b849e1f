"""Traces as a Parquet dataset at scale: export throughput, query time, estimator time and
peak RSS at 10⁵, 10⁶ and 10⁷ trajectories.

Run: ``python tests/benchmarks/bench_dataset.py [--sizes 100000 1000000 10000000]
[--steps export query reliability certify cess asv] [--export-runs 100000] [--ray]``, or
``--check 2000`` to check the generator first. Not collected by pytest; prints a Markdown
table (the benchmarks page's) and one line per measurement.

* **export**: ``--export-runs`` runs (a RunStart, one window with 4 selections over a
  10-candidate pool, 3 continuations, one score, RunEnd; written with the writer
  directly, 1,000 runs a file) → ``agentlog.dataset.to_parquet``; runs/s. Reference in
  the same run: reading the same files (``agentlog.records.iter_runs``), the floor any
  exporter pays.
* **generated datasets** of N runs: 10 systems × 100 tasks × N/1,000 seeds, written as
  ``to_parquet`` writes them (a file per table and (system, task) partition; schemas,
  metadata and encodings taken from a real export) without traces behind them: building
  10⁷ trajectories as trace files first would take hours on this machine. A run
  (``Partition``): a ``retrieval`` window in which it selects documents of its task's
  10-candidate pool in 1–4 rounds (stream ``doc``, probability vectors drawn per run;
  half the systems sample without replacement), with a stop decision after each of the
  first three rounds (stream ``stop``, continue probability ~0.85), then a run score
  ``q`` and an evaluator's ``margin`` of the window's entry and exit states on the
  channels ``direct`` and ``quote``: on average 14.7 records, 3.2 selections, 2.6 stop
  decisions and 5 scores a run. ``--check N`` writes N such runs as trace files, exports them with
  ``to_parquet`` and compares the export's tables with the generated ones (the
  writer's receipt chains and the files' hashes aside), and ``cess`` / ``asv`` of both.
* **query**: DuckDB, runs ⋈ scores (``q`` and the channel scores), mean score per
  system: time and peak RSS.
* **reliability**: ``agentlog estimate reliability DIR --score q --by system`` (the
  dataset path's per-run stage, then the per-group algebra; 200 bootstrap draws; the
  table, not ``--json``, which lists every run).
* **certify**: ``certify.from_dataset`` (a plan of one readout, ``q``) then
  ``certify.certify``.
* **cess**: ``cess.from_dataset`` (budget 4; outcomes and predictions by task and
  candidate, CSV) then ``CessData.estimate``; the per-run stage rebuilds each run's
  selections and continuations.
* **asv**: ``asv.from_dataset`` (channels ``direct``, ``quote``; the window found from
  the scores) then the face and, up to ``--summarize-up-to``, ``asv.summarize`` (200
  resamples); the per-run stage rebuilds each run's windows and scores.
* **ray** (``--ray``, up to ``--ray-up-to``): the same with ``executor="ray"`` on a local
  Ray runtime.

Each measurement runs in a fresh child process that reports its wall time and its own
peak RSS (VmHWM); the reference child imports agentlog and pyarrow only. The cess and asv
children also report where the time goes (reading the tables, the per-run Python, the
driver) and the peak at each phase's end, and fail on an estimator's warning or a
non-finite estimate. Growth should be linear in N: the table prints time per million
runs beside the totals.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).parent))
import numpy as np
from _rss import run_child
from _tempdir import bench_dir
from numpy.typing import NDArray

from agentlog.records import (
    Blob,
    Continuation,
    RunEnd,
    RunStart,
    Score,
    Selection,
    WindowEnter,
    WindowExit,
)

N_SYSTEMS, N_TASKS = 10, 100
T0 = 1_732_900_000_000_000_000


# -- trace files for the export ---------------------------------------------------------


def write_traces(folder: Path, n_runs: int, per_file: int = 1_000) -> list[Path]:
    """``n_runs`` small runs, ``per_file`` to a trace, written with the writer directly."""
    from agentlog._writer import TraceWriter

    paths = []
    rng = np.random.default_rng(0)
    for first in range(0, n_runs, per_file):
        path = folder / f"runs-{first // per_file:05d}.zst"
        with TraceWriter(path, frame_interval=3600) as writer:
            _write_runs(writer.put, first, min(first + per_file, n_runs), rng)
        paths.append(path)
    return paths


def _write_runs(put: Any, first: int, last: int, rng: Any) -> None:
    import hashlib

    import msgspec

    from agentlog import _noise

    pool = msgspec.msgpack.encode([f"d{i}" for i in range(10)])
    pool_hash = hashlib.sha256(pool).digest()
    probs = np.full(10, 0.1).astype("<f8").tobytes()
    draws = np.zeros(10).astype("<f8").tobytes()
    state = hashlib.sha256(b"state").digest()
    put(Blob(hash=pool_hash, data=pool, kind="pool"))
    for i in range(first, last):
        run = i - first
        put(RunStart(run=run, run_id=f"{i:032x}", system=f"sys{i % N_SYSTEMS}", seed=i,
                     task=f"task{(i // N_SYSTEMS) % N_TASKS}", meta={}, t_ns=T0,
                     generator=_noise.GENERATOR_ID, agentlog_version="bench"))
        put(WindowEnter(run=run, window=0, name="step", parent=-1, t_ns=T0,
                        entry_hash=state, entry=None))
        for t in range(4):
            if t:
                put(Continuation(run=run, window=0, name="stop", step=t - 1, p=0.9, u=0.5,
                                 decision=True, t_ns=T0))
            put(Selection(run=run, window=0, name="doc", step=t, owner="model",
                          pool=pool_hash, n=10, probs=probs, draws=draws, choice=t,
                          n_zero=0, generator="g", t_ns=T0))
        put(WindowExit(run=run, window=0, name="step", t_ns=T0, status=0, exit_hash=state,
                       exit=None, receipt=b"", wall_ns=1))
        put(Score(run=run, window=-1, name="q", value=float(rng.random())))
        put(RunEnd(run=run, t_ns=T0, status=0, receipt=b"", n_windows=1, n_selections=4,
                   n_continuations=3))


# -- generated datasets -----------------------------------------------------------------

POOL = 10  # candidates in a task's pool
BUDGET = 4  # rounds a run selects in at most: CESS's budget K
WINDOW = "retrieval"  # the window holding a run's rounds, scored on both channels
CHANNELS = ("direct", "quote")
SCORES = 1 + 2 * len(CHANNELS)  # a run's scores: q, then x− and x+ on each channel
#: The tables of a generated dataset (an export of its runs writes no others).
GENERATED = ("runs", "windows", "selections", "continuations", "scores", "pools")
#: Columns the trace writer fills in itself (receipt chains) or that hash the trace file,
#: which the generator fills with random bytes or a placeholder: ``--check`` compares the
#: rest of each table with a real export.
WRITER_FILLED = {"runs": ("receipt", "source_sha256"), "windows": ("receipt",)}


@dataclass
class Partition:
    """The draws of the ``n`` runs of one (system, task) partition, in file order.

    A run enters the ``retrieval`` window, then in each round selects a document of its
    task's pool (stream ``doc``: Gumbel-max over a softmax of the outcome model's
    predictions, each run's own noise added; odd systems give an opened document
    probability 0, i.e. sample without replacement) and, after rounds 1 to ``BUDGET - 1``,
    draws whether to go on (stream ``stop``, continue probability ``cont_p``). It leaves the
    window and gets a run score ``q`` and, on each channel, an evaluator's ``margin`` of
    the window's entry (x−) and exit (x+) states.
    """

    system: int
    task: int
    q: NDArray[np.float64]  # (n,)
    probs: NDArray[np.float64]  # (n, BUDGET, POOL): each round's vector
    gumbel: NDArray[np.float64]  # (n, BUDGET, POOL)
    choice: NDArray[np.int64]  # (n, BUDGET)
    cont_p: NDArray[np.float64]  # (n, BUDGET - 1)
    cont_u: NDArray[np.float64]  # (n, BUDGET - 1)
    n_sel: NDArray[np.int64]  # (n,): rounds run
    n_cont: NDArray[np.int64]  # (n,): stop decisions drawn
    hashes: NDArray[np.uint8]  # (n, 4, 32): entry, exit, window receipt, run receipt
    margin: NDArray[np.float64]  # (n, channel, corner)

    @property
    def n(self) -> int:
        return int(self.q.shape[0])

    @property
    def file_name(self) -> str:
        return f"sys{self.system}-task{self.task}.zst"

    def run_ids(self) -> list[str]:
        return [f"{self.system:03d}{self.task:04d}{k:025d}" for k in range(self.n)]


def pool_ids(task: int) -> bytes:
    """A task's candidate pool as its pool Blob holds it (the ids, msgpack)."""
    import msgspec

    return msgspec.msgpack.encode([f"task{task}/d{i}" for i in range(POOL)])


def pool_hash(task: int) -> bytes:
    import hashlib

    return hashlib.sha256(pool_ids(task)).digest()


def task_values() -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Outcomes Y and the outcome model's predictions m of each task's candidates, shape
    ``(N_TASKS, POOL)``."""
    rng = np.random.default_rng(2)
    y = rng.beta(2, 5, (N_TASKS, POOL))
    return y, np.clip(y + rng.normal(0, 0.1, y.shape), 0, 1)


def write_value_tables(folder: Path) -> tuple[Path, Path]:
    """``outcomes.csv`` and ``predictions.csv`` (task, candidate_id, value), for CESS."""
    paths = []
    for name, values in zip(("outcomes", "predictions"), task_values(), strict=True):
        path = folder / f"{name}.csv"
        path.write_text("task,candidate_id,value\n" + "".join(
            f"task{t},task{t}/d{i},{float(values[t, i])!r}\n"
            for t in range(N_TASKS) for i in range(POOL)))
        paths.append(path)
    return paths[0], paths[1]


def partitions(n_runs: int) -> Iterator[Partition]:
    """The draws of ``n_runs`` runs, one (system, task) partition at a time."""
    seeds = n_runs // (N_SYSTEMS * N_TASKS)
    rng = np.random.default_rng(1)
    system_mean = np.linspace(0.4, 0.6, N_SYSTEMS)
    task_effect = rng.normal(0, 0.1, N_TASKS)
    _, predicted = task_values()
    rows = np.arange(seeds)
    for s in range(N_SYSTEMS):
        for t in range(N_TASKS):
            q = system_mean[s] + task_effect[t] + rng.normal(0, 0.1, seeds)
            logits = predicted[t] / (0.1 + 0.03 * s) + rng.normal(0, 0.3, (seeds, POOL))
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            probs = np.empty((seeds, BUDGET, POOL))
            gumbel = rng.gumbel(size=(seeds, BUDGET, POOL))
            choice = np.empty((seeds, BUDGET), np.int64)
            for j in range(BUDGET):
                probs[:, j] = p
                with np.errstate(divide="ignore"):
                    choice[:, j] = np.argmax(np.log(p) + gumbel[:, j], axis=1)
                if s % 2:  # without replacement: the opened document goes to 0
                    p = p.copy()
                    p[rows, choice[:, j]] = 0.0
                    p /= p.sum(axis=1, keepdims=True)
            cont_p = np.clip(0.8 + 0.01 * s + rng.normal(0, 0.05, (seeds, BUDGET - 1)),
                             0.5, 0.99)
            cont_u = rng.random((seeds, BUDGET - 1))
            n_sel = 1 + np.cumprod(cont_u < cont_p, axis=1).sum(axis=1)
            entry = 0.3 + rng.normal(0, 0.1, (seeds, 1)) + rng.normal(0, 0.05, (seeds, 2))
            gain = np.array([0.1 + 0.01 * s, 0.05]) + rng.normal(0, 0.05, (seeds, 2))
            yield Partition(
                system=s, task=t, q=q, probs=probs, gumbel=gumbel, choice=choice,
                cont_p=cont_p, cont_u=cont_u, n_sel=n_sel.astype(np.int64),
                n_cont=np.where(n_sel < BUDGET, n_sel, BUDGET - 1).astype(np.int64),
                hashes=rng.integers(0, 256, (seeds, 4, 32), dtype=np.uint8),
                margin=np.stack([entry, entry + gain], axis=2))


def write_partition_trace(folder: Path, part: Partition) -> None:
    """``part``'s runs as one trace file, written with the writer directly: what
    ``--check`` exports with ``to_parquet`` to compare the generated tables with."""
    from agentlog import _noise
    from agentlog._writer import TraceWriter

    gen, pool = _noise.GENERATOR_ID, pool_hash(part.task)
    with TraceWriter(folder / part.file_name, frame_interval=3600) as writer:
        put = writer.put
        put(Blob(hash=pool, data=pool_ids(part.task), kind="pool"))
        for r, run_id in enumerate(part.run_ids()):
            entry, exit_ = part.hashes[r, 0].tobytes(), part.hashes[r, 1].tobytes()
            n_sel, n_cont = int(part.n_sel[r]), int(part.n_cont[r])
            put(RunStart(run=r, run_id=run_id, system=f"sys{part.system}", seed=r,
                         task=f"task{part.task}", meta={}, t_ns=T0, generator=gen,
                         agentlog_version="bench"))
            put(WindowEnter(run=r, window=0, name=WINDOW, parent=-1, t_ns=T0,
                            entry_hash=entry, entry=None))
            for j in range(n_sel):
                probs = part.probs[r, j]
                put(Selection(run=r, window=0, name="doc", step=j, owner="model", pool=pool,
                              n=POOL, probs=probs.astype("<f8").tobytes(),
                              draws=part.gumbel[r, j].astype("<f8").tobytes(),
                              choice=int(part.choice[r, j]), n_zero=int((probs == 0).sum()),
                              generator=gen, t_ns=T0))
                if j < n_cont:
                    p, u = float(part.cont_p[r, j]), float(part.cont_u[r, j])
                    put(Continuation(run=r, window=0, name="stop", step=j, p=p, u=u,
                                     decision=u < p, t_ns=T0))
            put(WindowExit(run=r, window=0, name=WINDOW, t_ns=T0, status=0, exit_hash=exit_,
                           exit=None, receipt=b"", wall_ns=1, selections=n_sel))
            put(Score(run=r, window=-1, name="q", value=float(part.q[r])))
            for c, channel in enumerate(CHANNELS):
                for corner, state in enumerate((entry, exit_)):
                    put(Score(run=r, window=-1, name="margin",
                              value=float(part.margin[r, c, corner]), channel=channel,
                              state_hash=state, transition=0))
            put(RunEnd(run=r, t_ns=T0, status=0, receipt=b"", n_windows=1,
                       n_selections=n_sel, n_continuations=n_cont))


def _binary(data: NDArray[np.uint8]) -> Any:
    """The rows of ``data`` (n, width) as a binary column, no Python object per row."""
    import pyarrow as pa

    n, width = data.shape
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(np.ascontiguousarray(data))])


def _vectors(values: NDArray[np.float64]) -> Any:
    """The rows of ``values`` (n, POOL) as a ``list<double>`` column (a selection's vector)."""
    import pyarrow as pa

    n, width = values.shape
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values.ravel()))


def _repeat(values: list[Any], index: NDArray[np.intp], type_: Any) -> Any:
    """``values[i]`` for each ``i`` of ``index``, as a column of ``type_``."""
    import pyarrow as pa

    return pa.array(values, type_).take(pa.array(index))


def _masked(column: Any, null: NDArray[np.bool_]) -> Any:
    """``column`` with nulls where ``null`` is True."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.if_else(pa.array(null), pa.scalar(None, column.type), column)


def zeros(k: int) -> NDArray[np.int64]:
    return np.zeros(k, np.int64)


def ones(k: int) -> NDArray[np.int64]:
    return np.ones(k, np.int64)


def t0(k: int) -> NDArray[np.int64]:
    return np.full(k, T0, np.int64)


def partition_columns(part: Partition, source: str) -> dict[str, dict[str, Any]]:
    """The columns of ``part``'s rows of each table (None: a null column), as
    ``to_parquet`` writes the records of ``write_partition_trace``: a run's records
    numbered in file order (``seq``: start 0, window entry 1, then the rounds' selection
    and stop decision, the window's exit, the scores, the end)."""
    import pyarrow as pa

    from agentlog import _noise

    n, gen, string = part.n, _noise.GENERATOR_ID, pa.string()
    ids = pa.array(part.run_ids(), string)
    run = np.arange(n)
    steps = np.arange(BUDGET)
    sel_run, sel_step = np.nonzero(steps[None, :] < part.n_sel[:, None])
    cont_run, cont_step = np.nonzero(steps[None, :-1] < part.n_cont[:, None])
    n_s, n_c, n_q = len(sel_run), len(cont_run), n * SCORES
    probs = part.probs[sel_run, sel_step]
    choice = part.choice[sel_run, sel_step]
    p, u = part.cont_p[cont_run, cont_step], part.cont_u[cont_run, cont_step]
    exit_seq = 2 + part.n_sel + part.n_cont
    q_run = np.repeat(run, SCORES)
    q_at = np.tile(np.arange(SCORES), n)  # 0: q; then each channel's x−, x+
    is_q = q_at == 0
    # each score's state: none for q, the window's entry (x−) or exit (x+) for a channel's
    state = _masked(_binary(part.hashes[:, [0, *[0, 1] * len(CHANNELS)]].reshape(-1, 32)),
                    is_q)
    return {
        "runs": {
            "run": run, "run_id": ids, "seed": run, "meta": _repeat(["{}"], zeros(n), string),
            "generator": _repeat([gen], zeros(n), string),
            "agentlog_version": _repeat(["bench"], zeros(n), string), "parent_run": None,
            "pid": zeros(n), "t_start_ns": t0(n), "t_end_ns": t0(n),
            "complete": np.ones(n, bool), "status": zeros(n), "error_type": None,
            "n_windows": ones(n), "n_selections": part.n_sel, "n_continuations": part.n_cont,
            "dropped": zeros(n), "receipt": _binary(part.hashes[:, 3]),
            "n_records": exit_seq + 1 + SCORES + 1,
            "source": _repeat([source], zeros(n), string),
            "source_sha256": _repeat(["0" * 64], zeros(n), string)},
        "windows": {
            "run": run, "run_id": ids, "window": zeros(n),
            "name": _repeat([WINDOW], zeros(n), string), "parent": np.full(n, -1),
            "thread": zeros(n), "after": None, "status": zeros(n),
            "complete": np.ones(n, bool), "failed": np.zeros(n, bool), "t_enter_ns": t0(n),
            "t_exit_ns": t0(n), "wall_ns": ones(n), "entry_hash": _binary(part.hashes[:, 0]),
            "seq": ones(n), "exit_hash": _binary(part.hashes[:, 1]),
            "receipt": _binary(part.hashes[:, 2]), "error_type": None,
            "error_message": None, "tool_calls": zeros(n), "llm_calls": zeros(n),
            "input_tokens": zeros(n), "output_tokens": zeros(n), "cost": None,
            "selections": part.n_sel},
        "selections": {
            "run": sel_run, "run_id": ids.take(pa.array(sel_run)), "window": zeros(n_s),
            "name": _repeat(["doc"], zeros(n_s), string), "step": sel_step,
            "owner": _repeat(["model"], zeros(n_s), string), "n": np.full(n_s, POOL),
            "choice": choice, "chosen_p": probs[np.arange(n_s), choice],
            "n_zero": (probs == 0).sum(axis=1), "generator": _repeat([gen], zeros(n_s), string),
            "top_k": None, "top_p": None, "t_ns": t0(n_s),
            "pool": _repeat([pool_hash(part.task)], zeros(n_s), pa.binary()),
            "probs": _vectors(probs), "draws": _vectors(part.gumbel[sel_run, sel_step]),
            "raw_probs": None, "policy_probs": None, "steer": None,
            "forced": np.zeros(n_s, bool), "observed": None, "seq": 2 + 2 * sel_step},
        "continuations": {
            "run": cont_run, "window": zeros(n_c),
            "name": _repeat(["stop"], zeros(n_c), string), "step": cont_step, "p": p, "u": u,
            "decision": u < p, "t_ns": t0(n_c), "policy_p": None, "steer": None,
            "forced": np.zeros(n_c, bool), "seq": 3 + 2 * cont_step,
            "run_id": ids.take(pa.array(cont_run))},
        "scores": {
            "run": q_run, "window": np.full(n_q, -1),
            "name": _repeat(["q", "margin"], np.minimum(q_at, 1), string),
            "value": np.column_stack([part.q, part.margin.reshape(n, -1)]).ravel(),
            "channel": _repeat([None, *CHANNELS], (q_at + 1) // 2, string),
            "layout": None, "wave": None,
            "state_hash": state, "transition": pa.array(zeros(n_q), mask=is_q),
            "t_ns": zeros(n_q), "seq": exit_seq[q_run] + 1 + q_at,
            "run_id": ids.take(pa.array(q_run))},
        "pools": {"pool": pa.array([pool_hash(part.task)], pa.binary()),
                  "ids": pa.array([pool_ids(part.task)], pa.binary())},
    }


@dataclass
class Template:
    """What a real export writes that the generator copies: each table's schema (its
    partition columns left out) and its files' metadata."""

    schemas: dict[str, Any]
    metadata: dict[str, dict[bytes, bytes]]

    @classmethod
    def of(cls, dataset: Path) -> Template:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from agentlog.dataset import PARTITIONS, read_table

        schemas, metadata = {}, {}
        for kind in GENERATED:
            schema = read_table(dataset, kind).schema
            schemas[kind] = pa.schema([f for f in schema if f.name not in PARTITIONS])
            first = next((dataset / kind).rglob("*.parquet"))
            metadata[kind] = dict(pq.read_schema(first).metadata or {})
        return cls(schemas, metadata)

    def file_metadata(self, kind: str, source: str) -> dict[bytes, bytes]:
        """The metadata of a file of ``kind`` whose rows come from ``source`` (a pool's
        file names no source, as ``to_parquet`` writes it)."""
        meta = dict(self.metadata[kind])
        meta.pop(b"ARROW:schema", None)
        if kind != "pools":
            version = json.loads(meta[b"agentlog.sources"])[0]["format_version"]
            meta[b"agentlog.sources"] = json.dumps(
                [{"path": source, "sha256": "0" * 64, "format_version": version}]).encode()
        return meta


def template(folder: Path) -> Template:
    """The schemas and metadata of a real export (``to_parquet``, partitions system and
    task) of a few generated runs written as traces."""
    from itertools import islice

    from agentlog.dataset import to_parquet

    traces = folder / "template-traces"
    traces.mkdir()
    for part in islice(partitions(2_000), 2):
        write_partition_trace(traces, part)
    to_parquet(traces, folder / "template", partition_by=["system", "task"])
    return Template.of(folder / "template")


def generate(out: Path, n_runs: int, tmpl: Template, sources: str = "gen") -> float:
    """A dataset of ``n_runs`` runs (``partitions``) laid out as ``to_parquet`` lays it
    out: per table a file per (system, task) partition, written as it writes them (its
    schema, metadata and encodings). Memory holds one partition's rows; the runs'
    ``source`` is ``{sources}/sysS-taskT.zst``. Returns the seconds it took."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from agentlog.dataset import _encodings

    t_start = time.perf_counter()
    for part in partitions(n_runs):
        source = f"{sources}/{part.file_name}"
        for kind, data in partition_columns(part, source).items():
            schema = tmpl.schemas[kind]
            assert set(data) == set(schema.names), set(data) ^ set(schema.names)
            rows = next(len(v) for v in data.values() if v is not None)
            table = pa.table({f.name: pa.nulls(rows, f.type) if data[f.name] is None
                              else data[f.name] for f in schema}).cast(schema)
            table = table.replace_schema_metadata(tmpl.file_metadata(kind, source))
            folder = out / kind / f"system=sys{part.system}" / f"task=task{part.task}"
            folder.mkdir(parents=True, exist_ok=True)
            floats, others = _encodings(pa, table.schema)
            pq.write_table(table, folder / "part-gen-0.parquet", compression="zstd",
                           use_dictionary=others, use_byte_stream_split=floats)
    return time.perf_counter() - t_start


# -- --check: the generated tables against a real export --------------------------------


def check(folder: Path, n_runs: int, outcomes: Path, predictions: Path) -> list[str]:
    """What differs between a generated dataset of ``n_runs`` runs and ``to_parquet``'s
    export of the same runs written as traces (columns of ``WRITER_FILLED`` aside), and
    between ``cess`` / ``asv`` of the two (``from_dataset`` of the generated tables against
    ``from_traces`` of the traces); an estimator's warning, a non-finite estimate. Empty:
    nothing. Returns the problems found."""
    import warnings

    from agentlog.dataset import read_table, to_parquet
    from agentlog.estimators import asv, cess

    traces, exported, generated = (folder / n for n in ("traces", "exported", "generated"))
    traces.mkdir(parents=True)
    for part in partitions(n_runs):
        write_partition_trace(traces, part)
    to_parquet(traces, exported, partition_by=["system", "task"])
    generate(generated, n_runs, Template.of(exported), sources=str(traces))
    problems = []
    for kind in GENERATED:
        a, b = (read_table(d, kind) for d in (generated, exported))
        if a.num_rows != b.num_rows or a.schema != b.schema:
            problems.append(f"{kind}: {a.num_rows} rows, {a.schema} (export: {b.num_rows}, "
                            f"{b.schema})")
            continue
        keys = (["system", "task"] if kind == "pools" else
                ["run_id"] if kind == "runs" else ["run_id", "seq"])
        a, b = (t.sort_by([(k, "ascending") for k in keys]) for t in (a, b))
        problems += [f"{kind}.{name} differs from the export's" for name in a.column_names
                     if name not in WRITER_FILLED.get(kind, ())
                     and not a.column(name).equals(b.column(name))]
        folders = [sorted(str(p.parent.relative_to(d)) for p in (d / kind).rglob("*.parquet"))
                   for d in (generated, exported)]
        if folders[0] != folders[1]:
            problems.append(f"{kind}: its files lie in other folders than the export's")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kw: dict[str, Any] = {"outcomes": outcomes, "predictions": predictions,
                              "budget": BUDGET}
        want, got = cess.from_traces(traces, **kw), cess.from_dataset(generated, **kw)
        for name in ("y", "p", "s", "m_chosen", "m_bar", "n_pool", "rho", "theta_star",
                     "in_support", "run_id", "path", "task", "system", "replacement"):
            x, y = np.asarray(getattr(want, name)), np.asarray(getattr(got, name))
            if not np.array_equal(x, y, equal_nan=x.dtype.kind == "f"):
                problems.append(f"cess.from_dataset's {name} differs from from_traces'")
        est = got.estimate(lam=0.5)
        if len(got) != n_runs or not np.isfinite(est.estimate).all():
            problems.append(f"cess: {len(got)} runs, estimate {est.estimate[:5]}...")
        if set(got.replacement) != {"with", "without"} or not got.has_theta_star:
            problems.append(f"cess: forms {set(got.replacement)}, θ* known: "
                            f"{got.has_theta_star}")
        want_a = asv.from_traces(traces, channels=CHANNELS)
        got_a = asv.from_dataset(generated, channels=CHANNELS)
        pairs = [(want_a.trajectory, got_a.trajectory), (want_a.target, got_a.target),
                 (want_a.corners[0], got_a.corners[0])]
        if (want_a.transitions != got_a.transitions or got_a.waves != [0]
                or not all(np.array_equal(x, y) for x, y in pairs)):
            problems.append("asv.from_dataset's AsvData differs from from_traces'")
        face = got_a.face()
        summary = asv.summarize(face, trajectory=got_a.trajectory[face.kept],
                                target=got_a.target[face.kept], n_resamples=200)
        if len(face.interaction) != n_runs or not all(
                np.isfinite(v) for v in summary.values.values()):
            problems.append(f"asv: {len(face.interaction)} transitions, {summary.values}")
    problems += [f"warned: {w.category.__name__}: {w.message}" for w in caught]
    return problems


# -- measured children ------------------------------------------------------------------

REFERENCE = """
import time, pyarrow, agentlog
print("RESULT", 0.0, _peak_kb())
"""

EXPORT = """
import sys, time
from agentlog.dataset import to_parquet
t0 = time.perf_counter()
to_parquet(sys.argv[1], sys.argv[2], partition_by=sys.argv[3].split(",") if sys.argv[3] else ())
print("RESULT", time.perf_counter() - t0, _peak_kb())
"""

READ_ONLY = """
import sys, time
from agentlog.records import iter_runs
t0 = time.perf_counter()
n = sum(1 for _ in iter_runs(sys.argv[1]))
print("RESULT", time.perf_counter() - t0, _peak_kb())
"""

QUERY = """
import sys, time, duckdb
t0 = time.perf_counter()
d = sys.argv[1]
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")  # it would print on stdout
rows = con.sql(f\"\"\"
    select r.system, avg(s.value), count(*)
    from read_parquet('{d}/runs/**/*.parquet', hive_partitioning = true) r
    join read_parquet('{d}/scores/**/*.parquet', hive_partitioning = true) s using (run_id)
    group by r.system order by r.system\"\"\").fetchall()
assert len(rows) == 10
print("RESULT", time.perf_counter() - t0, _peak_kb())
"""

RELIABILITY = """
import contextlib, io, sys, time
from typer.main import get_command
from agentlog.cli._app import app
args = ["estimate", "reliability", sys.argv[1], "--score", "q", "--by", "system",
        "--resamples", "200", *sys.argv[2:]]
t0 = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        get_command(app).main(args, standalone_mode=False)
    except SystemExit as exc:
        assert exc.code in (0, None), exc.code
assert "Reliability beyond the mean" in out.getvalue(), out.getvalue()[:500]
print("RESULT", time.perf_counter() - t0, _peak_kb())
"""

CERTIFY = """
import sys, time
from agentlog.estimators import certify
plan = certify.Plan.from_toml('estimand = "bench"\\n[calibration]\\nn_resamples = 200\\n'
                              '[readouts.q]\\ntolerance = 0.05\\n')
kwargs = {"executor": sys.argv[2]} if len(sys.argv) > 2 else {}
t0 = time.perf_counter()
data = certify.from_dataset(sys.argv[1], plan=plan, **kwargs)
t1 = time.perf_counter()
board = certify.certify(data, plan=plan)
print("RESULT", t1 - t0, _peak_kb(), time.perf_counter() - t1)
"""


# The cess and asv children time their phases by wrapping the stage's functions: the
# per-run stage (``per_run_stage``: reading, the per-run Python, putting the rows in run
# order; under Ray its runtime's start too), and locally within it the reading of the
# tables (``read_table``) and the Python over the rebuilt runs (``_cess_stage`` /
# ``_asv_stage``); the driver's part is the rest of ``from_dataset``. Each phase's key
# ``..._mb`` is the child's peak RSS when the phase ended.
PHASES = """
import json, time, warnings
from agentlog import AgentlogWarning
from agentlog.estimators import _executor
_phase = {}
def _timed(module, name, key):
    fn = getattr(module, name)
    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _phase[key] = _phase.get(key, 0.0) + time.perf_counter() - t0
            _phase[key + "_mb"] = _peak_kb() / 1024
    setattr(module, name, timed)
def _report(caught, seconds, after, value):
    bad = [f"{w.category.__name__}: {w.message}" for w in caught
           if issubclass(w.category, AgentlogWarning)]
    assert not bad, bad
    print("RESULT", seconds, _peak_kb(), after, json.dumps({**_phase, "value": value}))
"""

CESS = PHASES + """
import sys
import numpy as np
from agentlog.estimators import _cess_dataset, cess
dataset, n, outcomes, predictions, *executor = sys.argv[1:]
_timed(_cess_dataset, "per_run_stage", "stage")
if not executor:  # under Ray the stage's functions run in Ray's workers
    _timed(_executor, "read_table", "read")
    _timed(_cess_dataset, "_cess_stage", "python")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    t0 = time.perf_counter()
    data = cess.from_dataset(dataset, outcomes=outcomes, predictions=predictions, budget=4,
                             **({"executor": executor[0]} if executor else {}))
    t1 = time.perf_counter()
    _phase["from_dataset_mb"] = _peak_kb() / 1024
    est = data.estimate(lam=0.5).estimate
assert len(data) == int(n) and np.isfinite(est).all(), (len(data), est)
_report(caught, t1 - t0, time.perf_counter() - t1, float(est.mean()))
"""

ASV = PHASES + """
import sys
import numpy as np
from agentlog.estimators import _asv_dataset, asv
dataset, n, summarize, *executor = sys.argv[1:]
_timed(_asv_dataset, "per_run_stage", "stage")
if not executor:
    _timed(_executor, "read_table", "read")
    _timed(_asv_dataset, "_asv_stage", "python")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    t0 = time.perf_counter()
    data = asv.from_dataset(dataset, channels=("direct", "quote"),
                            **({"executor": executor[0]} if executor else {}))
    t1 = time.perf_counter()
    _phase["from_dataset_mb"] = _peak_kb() / 1024
    face = data.face()
    value = float(np.mean(face.interaction))
    if summarize == "yes":  # the trajectory-block bootstrap: a (resamples, trajectories) array
        s = asv.summarize(face, trajectory=data.trajectory[face.kept],
                          target=data.target[face.kept], n_resamples=200)
        value = s.values["mean_interaction"]
assert len(face.interaction) == int(n) and np.isfinite(value), (len(face.interaction), value)
_report(caught, t1 - t0, time.perf_counter() - t1, value)
"""


def child(body: str, *args: str) -> tuple[float, float, list[str]]:
    try:
        out = run_child(body, *args)
    except subprocess.CalledProcessError as exc:  # the child's traceback, then the error
        print(exc.stderr[-4000:], file=sys.stderr)
        raise
    if "RESULT" in out:  # Ray's raylet may print its own lines on the driver's stdout first
        out = out[len(out) - out[::-1].index("RESULT"):]
    return float(out[0]), int(out[1]) / 1024, out[2:]


def phases(rest: list[str], seconds: float) -> tuple[float, str]:
    """The seconds after ``from_dataset`` and the phases of a cess or asv child, as text."""
    ph = json.loads(" ".join(rest[1:]))
    stage = ph["stage"]
    if "python" not in ph:  # Ray: the stage ran in its workers
        text = (f"per-run stage on Ray {stage:.1f} s (its runtime's start included), "
                f"driver {seconds - stage:.1f} s")
    else:
        text = (f"reading {ph['read']:.1f} s, per-run Python {ph['python']:.1f} s, run order "
                f"{stage - ph['read'] - ph['python']:.1f} s, driver {seconds - stage:.1f} s; "
                f"peak {ph['read_mb']:,.0f} MB after reading, {ph['python_mb']:,.0f} MB after "
                f"the per-run stage")
    return float(rest[0]), f"{text}; from_dataset's peak {ph['from_dataset_mb']:,.0f} MB"


STEPS = ("export", "query", "reliability", "certify", "cess", "asv")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000,
                                                                 10_000_000])
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS),
                        help="what to measure (default: all)")
    parser.add_argument("--export-runs", type=int, default=100_000)
    parser.add_argument("--ray", action="store_true", help="also --executor ray")
    parser.add_argument("--ray-up-to", type=int, default=10_000_000,
                        help="largest size the Ray variants run at")
    parser.add_argument("--reliability-up-to", type=int, default=10_000_000,
                        help="largest size estimate reliability runs at (~0.8 GB per 10^6)")
    parser.add_argument("--certify-up-to", type=int, default=10_000_000,
                        help="largest size certify.from_dataset runs at (~0.7 GB per 10^6)")
    parser.add_argument("--cess-up-to", type=int, default=1_000_000,
                        help="largest size cess.from_dataset runs at (~3 min and ~2 GB per "
                        "10^6 on 2 cores; its per-run rows ~1.3 GB per 10^6)")
    parser.add_argument("--asv-up-to", type=int, default=1_000_000,
                        help="largest size asv.from_dataset runs at (~1.5 min and ~2.3 GB at "
                        "10^6; ~15 min and ~17 GB at 10^7)")
    parser.add_argument("--summarize-up-to", type=int, default=1_000_000,
                        help="largest size the asv step also runs asv.summarize at (~1.5 min "
                        "and 3.9 GB with from_dataset's at 10^6 trajectories)")
    parser.add_argument("--check", type=int, metavar="N",
                        help="only check the generator on N runs (a multiple of 1,000): its "
                        "tables against to_parquet's export of the same runs, cess and asv "
                        "of both, then the cess and asv steps at N")
    args = parser.parse_args(argv)
    steps = set(args.steps)
    rows: list[tuple[str, str, str, str]] = []
    with bench_dir("agentlog-bench-dataset-") as tmp:
        folder = Path(tmp)
        outcomes, predictions = write_value_tables(folder)
        if args.check:
            problems = check(folder / "check", args.check, outcomes, predictions)
            for problem in problems:
                print("CHECK:", problem)
            print(f"check of {args.check:,} runs: "
                  f"{'FAILED' if problems else 'the generated tables are the export'}")
            if problems:
                return 1
            ds = folder / "check" / "generated"
            rows += estimator_rows(ds, args.check, outcomes, predictions, args, steps)
            for row in rows:
                print(" | ".join(row))
            return 0
        _, ref_mb, _ = child(REFERENCE)
        print(f"reference child (imports agentlog, pyarrow): {ref_mb:.0f} MB")
        if "export" in steps:
            rows += export_rows(folder, args.export_runs)
        tmpl = template(folder)
        for size in args.sizes:
            ds = folder / f"gen-{size}"
            gen_s = generate(ds, size, tmpl)
            disk = sum(p.stat().st_size for p in ds.rglob("*.parquet")) / 1e9
            print(f"generated {size:,} runs in {gen_s:.0f} s ({disk:.2f} GB)")
            before = len(rows)
            rows += scores_rows(ds, size, args, steps)
            rows += estimator_rows(ds, size, outcomes, predictions, args, steps)
            for row in rows[before:]:
                print(" | ".join(row))
            shutil.rmtree(ds)
    print()
    print("| what | time | peak RSS | reference in the same run |")
    print("|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(json.dumps({"reference_mb": ref_mb}))
    return 0


def export_rows(folder: Path, n: int) -> list[tuple[str, str, str, str]]:
    """``to_parquet`` of ``n`` runs' traces, by system and task and by system only."""
    rows = []
    traces = folder / "traces"
    traces.mkdir()
    write_traces(traces, n)
    read_s, read_mb, _ = child(READ_ONLY, str(traces))
    for layout in ("system,task", "system"):
        out = folder / f"exported-{layout}"
        export_s, export_mb, _ = child(EXPORT, str(traces), str(out), layout)
        files = sum(1 for _ in out.rglob("*.parquet"))
        print(f"export {n:,} runs by {layout}: {export_s:.1f} s ({n / export_s:,.0f} "
              f"runs/s, {files} files), peak {export_mb:.0f} MB; reading them only: "
              f"{read_s:.1f} s, {read_mb:.0f} MB")
        rows.append((f"export {n:,} runs (12 records each), partitions {layout} "
                     f"({files:,} files)", f"{export_s:.1f} s = {n / export_s:,.0f} runs/s",
                     f"{export_mb:.0f} MB",
                     f"reading the traces only: {read_s:.1f} s, {read_mb:.0f} MB"))
    return rows


def scores_rows(ds: Path, size: int, args: argparse.Namespace, steps: set[str]
                ) -> list[tuple[str, str, str, str]]:
    """DuckDB, ``estimate reliability`` and ``certify.from_dataset`` over ``ds``."""
    rows = []
    per = 1e6 / size
    ray = args.ray and size <= args.ray_up_to
    if "query" in steps:
        q_s, q_mb, _ = child(QUERY, str(ds))
        rows.append((f"{size:,} runs: DuckDB mean per system", f"{q_s:.1f} s "
                     f"({q_s * per:.1f} s/M)", f"{q_mb:.0f} MB", ""))
    if "reliability" in steps and size <= args.reliability_up_to:
        r_s, r_mb, _ = child(RELIABILITY, str(ds))
        rows.append((f"{size:,} runs: estimate reliability", f"{r_s:.1f} s "
                     f"({r_s * per:.1f} s/M)", f"{r_mb:.0f} MB", ""))
        if ray:
            r_s, r_mb, _ = child(RELIABILITY, str(ds), "--executor", "ray")
            rows.append((f"{size:,} runs: estimate reliability, Ray", f"{r_s:.1f} s",
                         f"{r_mb:.0f} MB (driver)", ""))
    if "certify" in steps and size <= args.certify_up_to:
        for how in ("local", "ray") if ray else ("local",):
            c_s, c_mb, rest = child(CERTIFY, str(ds), *(("ray",) if how == "ray" else ()))
            rows.append((f"{size:,} runs: certify.from_dataset (+ certify)"
                         + (", Ray" if how == "ray" else ""),
                         f"{c_s:.1f} s ({c_s * per:.1f} s/M) + {float(rest[0]):.1f} s",
                         f"{c_mb:.0f} MB" + (" (driver)" if how == "ray" else ""), ""))
    return rows


def estimator_rows(ds: Path, size: int, outcomes: Path, predictions: Path,
                   args: argparse.Namespace, steps: set[str]
                   ) -> list[tuple[str, str, str, str]]:
    """``cess.from_dataset`` (+ ``estimate``) and ``asv.from_dataset`` (+ ``face``, and
    ``summarize`` up to ``--summarize-up-to``) over ``ds``, locally and on Ray."""
    rows = []
    per = 1e6 / size
    hows = ("local", "ray") if args.ray and size <= args.ray_up_to else ("local",)
    summarize = "yes" if size <= args.summarize_up_to else "no"
    for step, up_to, body, what, extra in (
            ("cess", args.cess_up_to, CESS, "cess.from_dataset (+ estimate)",
             (str(outcomes), str(predictions))),
            ("asv", args.asv_up_to, ASV, "asv.from_dataset (+ face"
             + (", summarize)" if summarize == "yes" else ")"), (summarize,))):
        if step not in steps or size > up_to:
            continue
        for how in hows:
            s, mb, rest = child(body, str(ds), str(size), *extra,
                                *(("ray",) if how == "ray" else ()))
            after, text = phases(rest, s)
            print(f"{step} {how} {size:,}: {s:.1f} s + {after:.1f} s, peak {mb:,.0f} MB; "
                  f"{text}; estimate {json.loads(' '.join(rest[1:]))['value']:.4f}")
            rows.append((f"{size:,} runs: {what}" + (", Ray" if how == "ray" else ""),
                         f"{s:.1f} s ({s * per:.1f} s/M) + {after:.1f} s",
                         f"{mb:,.0f} MB" + (" (driver)" if how == "ray" else ""), text))
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
