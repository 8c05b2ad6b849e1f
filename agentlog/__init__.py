"""agentlog: sealed, replayable traces of LLM agents, and estimators you can trust.

Example:
    >>> import agentlog as al
    >>> @al.window("retrieval")
    ... def retrieve(question: str) -> list[str]:
    ...     i = al.select([0.7, 0.3], candidates=["d1", "d2"], name="doc")
    ...     return [["d1", "d2"][i]]
    >>> with al.record("agentlog-doctest.zst", system="demo", seed=7, task="q-1"):
    ...     docs = retrieve("what is x?")
    >>> trace = al.read("agentlog-doctest.zst")
    >>> [w.name for w in trace.windows()]
    ['retrieval']

Importing agentlog never imports scipy, POT, openai, anthropic, vllm, ray or matplotlib.
"""

from typing import TYPE_CHECKING, Any

from ._encoding import Secret, decode_arguments
from ._errors import (
    AdapterError,
    AgentlogError,
    AgentlogWarning,
    ArtifactEncodingError,
    CacheMiss,
    DegenerateDataWarning,
    IncompleteFaceError,
    InstrumentationWarning,
    MissingDependencyError,
    ReplayDivergenceError,
    ReplayError,
    SealedWindowError,
    TraceFormatError,
    TracePathError,
)
from ._frames import iter_frames, iter_records
from ._llm import llm_call
from ._reader import read, read_traces
from ._recorder import flush, record, score
from ._select import proceed, select
from ._state import Run, WindowRef, WindowState, current_run, current_window, last_window
from ._tool import tool
from ._trace import Trace
from ._trace_format import ReadLimits
from ._verify import VerifyReport, verify
from ._version import __version__
from ._window import window

if TYPE_CHECKING:
    from .replay import channel, scorer

__all__ = [
    "AdapterError",
    "AgentlogError",
    "AgentlogWarning",
    "ArtifactEncodingError",
    "CacheMiss",
    "DegenerateDataWarning",
    "IncompleteFaceError",
    "InstrumentationWarning",
    "MissingDependencyError",
    "ReadLimits",
    "ReplayDivergenceError",
    "ReplayError",
    "Run",
    "SealedWindowError",
    "Secret",
    "Trace",
    "TraceFormatError",
    "TracePathError",
    "VerifyReport",
    "WindowRef",
    "WindowState",
    "__version__",
    "channel",
    "current_run",
    "current_window",
    "decode_arguments",
    "flush",
    "iter_frames",
    "iter_records",
    "last_window",
    "llm_call",
    "proceed",
    "read",
    "read_traces",
    "record",
    "score",
    "scorer",
    "select",
    "tool",
    "verify",
    "window",
]


def __getattr__(name: str) -> Any:
    # `al.channel` / `al.scorer` live in agentlog.replay: imported on first use, so that
    # `import agentlog` stays as light as it was (no sqlite3, no asyncio).
    if name in ("channel", "scorer"):
        from . import replay

        return getattr(replay, name)
    raise AttributeError(f"module 'agentlog' has no attribute {name!r}")
