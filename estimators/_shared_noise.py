"""Runs of different tasks that drew the same random numbers.

Generators ``fmix64-gumbel/1`` and ``/2`` keyed a run's draws by its seed alone, so every
task recorded under one seed drew the same stop uniforms and the same Gumbel draw for
every id its pool shares with another's ([SSC] Appendix D pairs *systems* on one task by
such common random numbers; across tasks they make the tasks dependent). Generator /3
folds the task into the seed (``agentlog.reentry.noise_seed``). ``certify.from_traces``,
``cess.from_traces`` and ``cess.effects_from_traces`` feed the runs they use to one
``SharedNoise`` and warn (``al.SharedNoiseWarning``) when tasks share a noise seed.

Examples:
    >>> import warnings
    >>> from agentlog.records import RunStart
    >>> shared = SharedNoise()
    >>> for task in ("q-1", "q-2"):
    ...     shared.add(RunStart(run=0, run_id=task, system="a", seed=7, task=task, meta={},
    ...                         t_ns=0, generator="fmix64-gumbel/2", agentlog_version=""))
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     shared.warn(stacklevel=1)
    >>> print(caught[0].message)
    2 tasks share seed 7 under noise generator 'fmix64-gumbel/2' (q-1, q-2): their random ...
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

from agentlog import SharedNoiseWarning
from agentlog.records import RunStart
from agentlog.reentry import noise_seed

_NAMED = 3  # tasks named in the message


class SharedNoise:
    """The tasks of the runs an estimator uses, grouped by the seed their draws are keyed by."""

    def __init__(self) -> None:
        # noise seed -> (task labels, seeds, generators) of the runs drawing with it
        self._groups: dict[int, tuple[dict[str, None], set[int], set[str]]] = {}
        # seed -> task label -> (the run's task, a look-up of its generator)
        self._unresolved: dict[int, dict[str, tuple[object, Callable[[], str | None]]]] = {}

    def add(self, start: RunStart | None, task: object = None) -> None:
        """Count the run that ``start`` opens. ``task``: the estimator's label of its task
        (default ``start.task``); runs without one are not counted (nothing says they
        differ)."""
        if start is None:
            return
        label = start.task if task is None else task
        if label is not None:
            self._count(start.seed, start.task, start.generator, str(label))

    def add_unresolved(self, seed: int, task: object, generator: Callable[[], str | None],
                       label: object) -> None:
        """Count a run drawn with ``seed`` and ``task`` (a replay's arm, known from its
        provenance) whose generator takes a look-up (a file to open): ``warn`` calls
        ``generator()`` only when runs of another task label had the same seed."""
        if label is not None:
            self._unresolved.setdefault(seed, {}).setdefault(str(label), (task, generator))

    def _count(self, seed: int, task: object, generator: str, label: str) -> None:
        try:
            key = noise_seed(seed, task, generator)  # type: ignore[arg-type]
        except (ValueError, TypeError):  # an unknown generator, a task of another type:
            return  # nothing this agentlog can compare
        tasks, seeds, generators = self._groups.setdefault(key, ({}, set(), set()))
        tasks[label] = None
        seeds.add(seed)
        generators.add(generator)

    def warn(self, *, stacklevel: int) -> None:
        """Warn once if runs of two or more tasks drew with one noise seed.

        ``stacklevel`` as the caller would pass it to ``warnings.warn``.
        """
        for seed, labels in self._unresolved.items():
            if len(labels) > 1:
                for label, (task, generator_of) in labels.items():
                    generator = generator_of()
                    if generator is not None:
                        self._count(seed, task, generator, label)
        self._unresolved.clear()
        shared = sorted((g for g in self._groups.values() if len(g[0]) > 1),
                        key=lambda g: -len(g[0]))
        if not shared:
            return
        tasks, seeds, generators = shared[0]
        names = list(tasks)
        named = ", ".join(names[:_NAMED]) + (", …" if len(names) > _NAMED else "")
        seed_text = " and ".join(map(str, sorted(seeds)))
        plural = "s" if len(generators) > 1 else ""
        more = (f"; so do the tasks of {len(shared) - 1} other seed(s)" if len(shared) > 1
                else "")
        warnings.warn(
            f"{len(names)} tasks share seed {seed_text} under noise generator{plural} "
            f"{', '.join(map(repr, sorted(generators)))} ({named}){more}: their random draws "
            "(stop uniforms, Gumbel draws of the ids they share) are identical, so the tasks "
            "are not the independent samples the intervals assume. Re-record with this "
            "agentlog, which folds the task into the noise (al.record(..., task=...) on "
            "every run), or give each task its own seed",
            SharedNoiseWarning, stacklevel=stacklevel + 1,
        )
