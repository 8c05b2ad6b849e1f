"""The replay engine's plumbing: for tools built on agentlog, not for a study.

``agentlog.replay`` exports what a study uses (channels, designs, ``intervene``,
``run_units``, the cache); the pieces those are built from live here:

* ``APP_ENV``, ``app_from_pyproject``, ``recorded_modules``: how the app module that
  registers channels and windows is found (the ``--app`` option, ``$AGENTLOG_APP``,
  ``[tool.agentlog] app`` in pyproject.toml, the modules a trace recorded);
* ``frozen_transitions``, ``trace_file_hash``: the sealed transitions of a window read
  back from traces, and the hash replays store of each input file;
* ``recorded_generator``, ``stream_offsets``: re-entering a generator window at its
  recorded streams;
* ``Job``: the type of a unit job, ``job(unit, ctx) -> Sequence[UnitScore]``.

Examples:
    >>> from agentlog.replay.lowlevel import APP_ENV
    >>> APP_ENV
    'AGENTLOG_APP'
"""

from __future__ import annotations

from ._app import APP_ENV, app_from_pyproject, recorded_modules
from ._reentry import recorded_generator, stream_offsets
from ._states import frozen_transitions, trace_file_hash
from ._units import Job

__all__ = ["APP_ENV", "Job", "app_from_pyproject", "frozen_transitions", "recorded_generator",
           "recorded_modules", "stream_offsets", "trace_file_hash"]
