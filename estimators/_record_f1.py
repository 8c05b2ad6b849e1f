"""The ground-truth record F1 of [DMC] §4.3.

Duplicates and fabricated rows count in ``|S|`` but not in ``|U|``: they cut precision, not
recall.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RecordF1Result:
    """Ground-truth F1 of a submitted record set ([DMC] §4.3).

    With S the submitted rows, G the true record set and U the distinct true records in S:
    ``recall = |U|/|G|``, ``precision = |U|/|S|``, ``f1 = 2PR/(P + R)`` (0 when P + R = 0;
    precision is 0 for an empty submission). ``|S| = |U| + n_duplicates + n_fabricated``.

    Attributes:
        n_submitted: ``|S|``, every submitted row.
        n_truth: ``|G|``.
        n_correct: ``|U|``.
        n_duplicates: rows repeating a true record already submitted.
        n_fabricated: rows whose id is not in the truth (invented, totals or summary rows),
            repeats included.
    """

    precision: float
    recall: float
    f1: float
    n_submitted: int
    n_truth: int
    n_correct: int
    n_duplicates: int
    n_fabricated: int


def _record_ids(name: str, records: Iterable[Any]) -> list[Hashable]:
    if isinstance(records, str | bytes | Mapping):
        raise ValueError(f"`{name}` must be a sequence of record ids or of records with an "
                         f"'id'; found a {type(records).__name__}")
    ids: list[Hashable] = []
    for i, rec in enumerate(records):
        if isinstance(rec, Mapping):
            if "id" not in rec:
                raise ValueError(f"`{name}` record {i} has no 'id' field; found keys "
                                 f"{sorted(map(str, rec))[:5]}")
            rec = rec["id"]
        try:
            hash(rec)
        except TypeError:
            raise ValueError(f"`{name}` record {i}: the id must be hashable; found "
                             f"{type(rec).__name__}") from None
        ids.append(rec)
    return ids


def _record_f1_iv(submitted: Iterable[Any], truth: Iterable[Any]
                  ) -> tuple[list[Hashable], set[Hashable]]:
    sub = _record_ids("submitted", submitted)
    true_ids = _record_ids("truth", truth)
    if not true_ids:
        raise ValueError("`truth` is empty: recall is undefined without a ground-truth record")
    truth_set = set(true_ids)
    if len(truth_set) != len(true_ids):
        raise ValueError(f"`truth` repeats {len(true_ids) - len(truth_set)} id(s); the ground "
                         "truth is a set of distinct records")
    return sub, truth_set


def record_f1(submitted: Iterable[Any], truth: Iterable[Any]) -> RecordF1Result:
    """Precision, recall and F1 of submitted records against the ground truth ([DMC] §4.3).

    Args:
        submitted: the submitted rows, as ids or records with an ``"id"`` field, in order
            and with repeats.
        truth: the ground-truth record ids (or records), distinct.

    Returns:
        A ``RecordF1Result``. Omitted true rows cut recall; duplicates, totals rows and
        fabricated rows inflate ``|S|`` but not ``|U|``, cutting precision only.
    """
    sub, truth_set = _record_f1_iv(submitted, truth)
    seen: set[Hashable] = set()
    n_dup = n_fab = 0
    for rid in sub:
        if rid not in truth_set:
            n_fab += 1
        elif rid in seen:
            n_dup += 1
        else:
            seen.add(rid)
    u = len(seen)
    precision = u / len(sub) if sub else 0.0
    recall = u / len(truth_set)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return RecordF1Result(precision=precision, recall=recall, f1=f1, n_submitted=len(sub),
                          n_truth=len(truth_set), n_correct=u, n_duplicates=n_dup,
                          n_fabricated=n_fab)
