"""The records of a trace and every value in them, through one public module.

A trace file holds a tagged union of ``msgspec.Struct`` records (``RunStart``,
``WindowEnter``, ``WindowExit``, ``Selection``, ``Continuation``, ``LLMCall``,
``ToolCall``, ``Score``, ``Blob``, ``RunEnd``). Their vectors are raw float64 bytes and
their artifacts canonical msgpack; this module turns each back into a value:

* vectors: ``probs(sel)``, ``draws(sel)``, ``raw_probs(sel)``, ``policy_probs(sel)``
  (zero-copy read-only numpy arrays);
* candidates: ``trace.candidates(sel)`` and ``trace.chosen(sel)`` on a ``Trace``, or
  ``decode_pool(blob.data)`` while streaming;
* artifacts: ``WindowView.entry_value()`` / ``.exit_value()``, ``decode_artifact(bytes)``
  for any canonical encoding (``encode_artifact(value)`` makes one: what is hashed),
  ``agentlog.decode_arguments`` to rebuild a call, ``artifact_differences(a, b)``: the leaf
  paths where two decoded artifacts (argument maps) differ (``ABSENT`` where one lacks it);
* streaming: ``agentlog.iter_records(path)`` / ``agentlog.iter_frames(path)``, and
  ``iter_runs(source)``: one run at a time (``TraceRun(trace, run)``), what the
  estimators' ``from_traces`` loaders use; ``trace_files(source)`` lists the files (and
  Traces) a source names, resolved but unread.

Examples:
    >>> import agentlog as al
    >>> from agentlog.records import Selection, probs
    >>> @al.window("pick")
    ... def pick(q: str) -> str:
    ...     return ["d1", "d2"][al.select([0.25, 0.75], candidates=["d1", "d2"], name="doc")]
    >>> with al.record("agentlog-records-doc.zst", seed=3):
    ...     _ = pick("q")
    >>> trace = al.read("agentlog-records-doc.zst")
    >>> (sel,) = trace.selections()
    >>> (window,) = trace.windows()
    >>> probs(sel).tolist(), trace.candidates(sel), trace.chosen(sel) == window.exit_value()
    ([0.25, 0.75], ['d1', 'd2'], True)
    >>> window.entry_value()
    {'q': 'q'}
"""

from __future__ import annotations

from ._differences import ABSENT
from ._differences import differences as artifact_differences
from ._encoding import decode as decode_artifact
from ._encoding import encode as encode_artifact
from ._frames import Frame, FrameIterator, trace_sha256
from ._reader import TraceRun, iter_runs, trace_files
from ._records import (
    EXIT_CLOSED,
    EXIT_FAILED,
    EXIT_OK,
    RECORD_TYPES,
    Blob,
    Continuation,
    LLMCall,
    Record,
    RunEnd,
    RunStart,
    Score,
    Selection,
    ToolCall,
    WindowEnter,
    WindowExit,
)
from ._trace import BlobNotFoundError, RunView, Transition, WindowView
from ._vectors import decode_pool, draws, policy_probs, probs, raw_probs
from ._verify.report import parse_chain_head

__all__ = [
    "ABSENT",
    "EXIT_CLOSED",
    "EXIT_FAILED",
    "EXIT_OK",
    "RECORD_TYPES",
    "Blob",
    "BlobNotFoundError",
    "Continuation",
    "Frame",
    "FrameIterator",
    "LLMCall",
    "Record",
    "RunEnd",
    "RunStart",
    "RunView",
    "Score",
    "Selection",
    "ToolCall",
    "TraceRun",
    "Transition",
    "WindowEnter",
    "WindowExit",
    "WindowView",
    "artifact_differences",
    "decode_artifact",
    "decode_pool",
    "draws",
    "encode_artifact",
    "iter_runs",
    "parse_chain_head",
    "policy_probs",
    "probs",
    "raw_probs",
    "trace_files",
    "trace_sha256",
]
