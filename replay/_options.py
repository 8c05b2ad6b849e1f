"""How replay work is executed: one frozen options object shared by the sync/async twins.

``run_units``/``arun_units``, ``replay_channels``/``areplay_channels`` and ``intervene``
take the same ``ExecutionOptions`` instead of repeating seven keyword arguments each, as
httpx's clients take one ``Timeout`` and one ``Limits``. The object checks its values when
it is made, so a bad ``concurrency`` fails where it is written, not inside an engine.

Examples:
    >>> from agentlog.replay import ExecutionOptions, RetryPolicy
    >>> opts = ExecutionOptions(concurrency=4, retry=RetryPolicy(max_attempts=2))
    >>> opts.executor, opts.concurrency, opts.replace(progress=False).progress
    ('local', 4, False)
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agentlog.retry import RetryPolicy

__all__ = ["ExecutionOptions"]


@dataclass(frozen=True)
class ExecutionOptions:
    """Where and how replay units run.

    Attributes:
        concurrency: units running at once (threads for a sync job; for Ray, tasks in
            flight).
        executor: ``"local"`` (asyncio, sync jobs in threads) or ``"ray"``.
        ray_address: an existing Ray cluster (``"auto"``, ``"ray://host:10001"``); None
            starts a local one.
        ray_num_cpus: CPUs of the local Ray cluster started when ``ray_address`` is None.
        retry: retry of transient failures.
        timeout: seconds one attempt may take (None: unbounded); a timed-out attempt is
            retried like a transient error.
        progress: show a progress bar on stderr (only when stderr is a terminal).

    Raises:
        ValueError, TypeError: a value out of range or of the wrong type (when made).
    """

    concurrency: int = 8
    executor: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    ray_num_cpus: int | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout: float | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        c = self.concurrency
        if isinstance(c, bool) or not isinstance(c, int) or c < 1:
            raise ValueError(f"`concurrency` must be an int >= 1; found {c!r}")
        if self.executor not in ("local", "ray"):
            raise ValueError(f"`executor` must be 'local' or 'ray'; found {self.executor!r}")
        if not isinstance(self.retry, RetryPolicy):
            raise TypeError(f"`retry` must be a RetryPolicy; found {type(self.retry).__name__}")
        t = self.timeout
        if t is not None and (isinstance(t, bool) or not isinstance(t, int | float) or t <= 0):
            raise ValueError(f"`timeout` must be a positive number of seconds or None; "
                             f"found {t!r}")
        n = self.ray_num_cpus
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ValueError(f"`ray_num_cpus` must be an int >= 1 or None; found {n!r}")
        if self.ray_address is not None and not isinstance(self.ray_address, str):
            raise TypeError(f"`ray_address` must be a string or None; found "
                            f"{type(self.ray_address).__name__}")

    def replace(self, **changes: Any) -> ExecutionOptions:
        """A copy with ``changes`` applied (checked like a new object)."""
        return dataclasses.replace(self, **changes)


_FIELDS = frozenset(f.name for f in dataclasses.fields(ExecutionOptions))


def execution_options(function: str, execution: ExecutionOptions | None,
                      legacy: Mapping[str, Any], default: ExecutionOptions,
                      ) -> ExecutionOptions:
    """The options of one call: ``execution``, or ``default`` with the keyword arguments
    the function took before ``ExecutionOptions`` existed (a ``DeprecationWarning``).

    Raises:
        TypeError: an unknown keyword (as Python says it), or both ``execution=`` and a
            legacy keyword.
    """
    unknown = sorted(set(legacy) - _FIELDS)
    if unknown:
        raise TypeError(f"{function}() got an unexpected keyword argument {unknown[0]!r}")
    if not legacy:
        if execution is not None and not isinstance(execution, ExecutionOptions):
            raise TypeError(f"{function}(): `execution` must be an ExecutionOptions; found "
                            f"{type(execution).__name__}")
        return default if execution is None else execution
    if execution is not None:
        raise TypeError(f"{function}(): pass either execution=ExecutionOptions(...) or the "
                        f"keywords {sorted(legacy)}, not both")
    given = dict(legacy)
    if given.get("retry", ...) is None:  # replay_channels took retry=None for the default
        given["retry"] = RetryPolicy()
    spelled = ", ".join(f"{k}=..." for k in sorted(legacy))
    warnings.warn(f"{function}({spelled}) is deprecated and will be removed in the next "
                  f"release; pass execution=ExecutionOptions({spelled})",
                  DeprecationWarning, stacklevel=3)
    return default.replace(**given)
