"""Traces as a Parquet dataset at scale: export throughput, query time, estimator time and
peak RSS at 10⁵, 10⁶ and 10⁷ trajectories.

Run: ``python tests/benchmarks/bench_dataset.py [--sizes 100000 1000000 10000000]
[--export-runs 100000] [--ray]``. Not collected by pytest; prints a Markdown table (the
README's) and one line per measurement.

* **export**: ``--export-runs`` runs (a RunStart, one window with 4 selections over a
  10-candidate pool, 3 continuations, one score, RunEnd; written with the writer
  directly, 1,000 runs a file) → ``agentlog.dataset.to_parquet``; runs/s. Reference in
  the same run: reading the same files (``agentlog.records.iter_runs``), the floor any
  exporter pays.
* **generated datasets** of N runs: 10 systems × 100 tasks × N/1,000 seeds, one score per
  run, written as ``to_parquet`` writes (same schema, partitions and metadata: the schema
  is taken from a real export) without traces behind them; building 10⁷ trajectories as
  trace files first would take hours on this machine.
* **query**: DuckDB, runs ⋈ scores, mean score per system: time and peak RSS.
* **reliability**: ``agentlog estimate reliability DIR --by system`` (the dataset path's
  per-run stage, then the per-group algebra; 200 bootstrap draws; the table, not
  ``--json``, which lists every run).
* **certify**: ``certify.from_dataset`` (a plan of one readout) then ``certify.certify``.
* **ray** (``--ray``): the same two with ``--executor ray`` on a local Ray runtime.

Each measurement runs in a fresh child process that reports its wall time and its own
peak RSS (VmHWM); the reference child imports agentlog and pyarrow only. Growth should be
linear in N: the table prints time per million runs beside the totals.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).parent))
import numpy as np
from _rss import run_child
from _tempdir import bench_dir

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


def generate(out: Path, n_runs: int, schemas: dict[str, object]) -> float:
    """A dataset of ``n_runs`` runs with one score each, as ``to_parquet`` lays it out."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from agentlog import __version__
    from agentlog.dataset import SCHEMA_VERSION

    t0 = time.perf_counter()
    seeds = n_runs // (N_SYSTEMS * N_TASKS)
    rng = np.random.default_rng(1)
    system_mean = np.linspace(0.4, 0.6, N_SYSTEMS)
    task_effect = rng.normal(0, 0.1, N_TASKS)
    meta = {b"agentlog.dataset_schema": str(SCHEMA_VERSION).encode(),
            b"agentlog.version": __version__.encode(), b"agentlog.sources": b"[]"}
    n = 0
    for s in range(N_SYSTEMS):
        for t in range(N_TASKS):
            run_ids = [f"{s:03d}{t:04d}{k:025d}" for k in range(seeds)]
            values = system_mean[s] + task_effect[t] + rng.normal(0, 0.1, seeds)
            columns = {
                "runs": {"run": np.arange(seeds), "run_id": run_ids, "seed": np.arange(seeds),
                         "meta": ["{}"] * seeds, "complete": np.ones(seeds, bool),
                         "status": np.zeros(seeds, np.int64),
                         "source": [f"gen/sys{s}-task{t}.zst"] * seeds,
                         "source_sha256": ["0" * 64] * seeds, "generator": ["g"] * seeds},
                "scores": {"run": np.arange(seeds), "run_id": run_ids,
                           "window": np.full(seeds, -1), "name": ["q"] * seeds,
                           "value": values, "seq": np.ones(seeds, np.int64)},
            }
            for kind, data in columns.items():
                schema = schemas[kind]
                names = [f.name for f in schema if f.name not in ("system", "task")]
                table = pa.table({name: (data[name] if name in data else
                                         pa.nulls(seeds, schema.field(name).type))
                                  for name in names}).cast(pa.schema(
                                      [schema.field(name) for name in names]))
                folder = out / kind / f"system=sys{s}" / f"task=task{t}"
                folder.mkdir(parents=True, exist_ok=True)
                table = table.replace_schema_metadata({**meta, b"agentlog.table":
                                                       kind.encode()})
                pq.write_table(table, folder / "part-gen-0.parquet", compression="zstd")
            n += seeds
    return time.perf_counter() - t0


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


def child(body: str, *args: str) -> tuple[float, float, list[str]]:
    out = run_child(body, *args)
    if "RESULT" in out:  # Ray's raylet may print its own lines on the driver's stdout first
        out = out[len(out) - out[::-1].index("RESULT"):]
    return float(out[0]), int(out[1]) / 1024, out[2:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000,
                                                                 10_000_000])
    parser.add_argument("--export-runs", type=int, default=100_000)
    parser.add_argument("--ray", action="store_true", help="also --executor ray")
    parser.add_argument("--reliability-up-to", type=int, default=10_000_000,
                        help="largest size estimate reliability runs at (~0.8 GB per 10^6)")
    parser.add_argument("--certify-up-to", type=int, default=10_000_000,
                        help="largest size certify.from_dataset runs at (~0.7 GB per 10^6)")
    args = parser.parse_args(argv)
    rows: list[tuple[str, str, str, str]] = []
    with bench_dir("agentlog-bench-dataset-") as tmp:
        folder = Path(tmp)
        _, ref_mb, _ = child(REFERENCE)
        print(f"reference child (imports agentlog, pyarrow): {ref_mb:.0f} MB")
        traces = folder / "traces"
        traces.mkdir()
        write_traces(traces, args.export_runs)
        read_s, read_mb, _ = child(READ_ONLY, str(traces))
        n = args.export_runs
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
        from agentlog.dataset import read_table

        schemas = {kind: read_table(folder / "exported-system,task", kind).schema
                   for kind in ("runs", "scores")}
        for size in args.sizes:
            ds = folder / f"gen-{size}"
            gen_s = generate(ds, size, schemas)
            print(f"generated {size:,} runs in {gen_s:.0f} s")
            per = 1e6 / size
            q_s, q_mb, _ = child(QUERY, str(ds))
            rows.append((f"{size:,} runs: DuckDB mean per system", f"{q_s:.1f} s "
                         f"({q_s * per:.1f} s/M)", f"{q_mb:.0f} MB", ""))
            measured = 3
            if size <= args.reliability_up_to:
                r_s, r_mb, _ = child(RELIABILITY, str(ds))
                rows.append((f"{size:,} runs: estimate reliability", f"{r_s:.1f} s "
                             f"({r_s * per:.1f} s/M)", f"{r_mb:.0f} MB", ""))
            else:
                measured -= 1
            if size <= args.certify_up_to:
                c_s, c_mb, rest = child(CERTIFY, str(ds))
                rows.append((f"{size:,} runs: certify.from_dataset (+ certify)",
                             f"{c_s:.1f} s ({c_s * per:.1f} s/M) + {float(rest[0]):.1f} s",
                             f"{c_mb:.0f} MB", ""))
            else:
                measured -= 1
            if args.ray:
                r_s, r_mb, _ = child(RELIABILITY, str(ds), "--executor", "ray")
                rows.append((f"{size:,} runs: estimate reliability, Ray", f"{r_s:.1f} s",
                             f"{r_mb:.0f} MB (driver)", ""))
                c_s, c_mb, rest = child(CERTIFY, str(ds), "ray")
                rows.append((f"{size:,} runs: certify.from_dataset, Ray", f"{c_s:.1f} s",
                             f"{c_mb:.0f} MB (driver)", ""))
            for row in rows[-(measured + 2 if args.ray else measured):]:
                print(" | ".join(row))
            import shutil

            shutil.rmtree(ds)
    print()
    print("| what | time | peak RSS | reference in the same run |")
    print("|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(json.dumps({"reference_mb": ref_mb}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
