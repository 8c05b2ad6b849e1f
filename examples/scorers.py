"""Two toy scorers for the validity card's probe battery ([DMC] §3.2, §4.3).

* ``shape_scorer`` grades shape and self-report only, like the ComtradeBench judge of
  [DMC] §3.2: the metadata fields are present, the self-reported ``row_count`` matches
  the number of records, the records are well-formed and there are some. A fabricated
  record set with self-consistent metadata scores as high as the correct one, so the
  battery flags it as not criterion-sensitive.
* ``ground_truth_scorer`` is the ground-truth F1 of §4.3 over record ids
  (``reliability.record_f1``): fabricated rows score 0, duplicates cut precision.

``probe_tasks()`` builds three seeded toy extraction tasks (ids ``{task}-{i:06d}`` as the
paper's generator emits them) with their correct submissions.

Examples:
    >>> from agentlog.estimators import reliability
    >>> from agentlog.examples import scorers
    >>> tasks = scorers.probe_tasks()
    >>> fabricated = reliability.probe_variants(tasks[0])["fabricated"]
    >>> scorers.shape_scorer(fabricated, tasks[0].truth), scorers.ground_truth_scorer(
    ...     fabricated, tasks[0].truth)
    (1.0, 0.0)
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from agentlog.estimators.reliability import (
    ProbeTask,
    Submission,
    record_f1,
)

METADATA_FIELDS = ("row_count", "query", "source")
RECORD_FIELDS = ("id", "reporter", "partner", "year", "value")


def shape_scorer(submission: Submission, truth: Sequence[Hashable]) -> float:
    """Shape and self-report only; ``truth`` is ignored (the flaw the battery exposes).

    A quarter each for: every metadata field present; ``row_count`` equal to the number of
    records; every record carrying every record field; at least one record.
    """
    del truth  # a shape scorer never looks at the ground truth
    meta = submission.metadata
    records = submission.records
    parts = [
        all(k in meta for k in METADATA_FIELDS),
        meta.get("row_count") == len(records),
        all(all(k in r for k in RECORD_FIELDS) for r in records),
        len(records) > 0,
    ]
    return float(sum(parts) / len(parts))


def ground_truth_scorer(submission: Submission, truth: Sequence[Hashable]) -> float:
    """Ground-truth F1 of the submitted record ids ([DMC] §4.3)."""
    return float(record_f1(submission.records, truth).f1)


def probe_tasks(n_tasks: int = 3, n_records: int = 12, *, seed: int = 0) -> list[ProbeTask]:
    """Seeded toy extraction tasks with their correct submissions and truth ids."""
    rng = np.random.default_rng(seed)
    countries = ["DEU", "FRA", "USA", "CHN", "BRA", "IND", "JPN", "ESP"]
    tasks = []
    for t in range(n_tasks):
        name = f"T{t + 1}"
        records = tuple(
            {"id": f"{name}-{i:06d}", "reporter": countries[int(rng.integers(8))],
             "partner": countries[int(rng.integers(8))], "year": 2020 + int(rng.integers(5)),
             "value": round(float(rng.lognormal(10, 1)), 2)}
            for i in range(n_records)
        )
        meta = {"row_count": n_records, "query": {"task": name, "flow": "imports"},
                "source": "mock-trade-api"}
        tasks.append(ProbeTask(name=name, correct=Submission(records, meta),
                               truth=tuple(r["id"] for r in records), count_key="row_count"))
    return tasks
