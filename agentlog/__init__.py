"""agentlog: sealed, replayable traces of LLM agents, and estimators you can trust.

Examples:
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

Importing agentlog never imports scipy, POT, openai, anthropic, vllm, ray or matplotlib,
and imports nothing else until a name is used: each public name loads its module on
first access (so ``agentlog --help`` starts without numpy).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._errors import (
    AdapterError,
    AgentlogError,
    AgentlogWarning,
    AppImportError,
    AppNotGivenError,
    ArtifactEncodingError,
    BlobNotFoundError,
    CacheMiss,
    ChannelVersionError,
    DegenerateDataWarning,
    IncompleteFaceError,
    InstrumentationWarning,
    MissingDependencyError,
    ModelHTTPError,
    NoLogprobsError,
    NotRegisteredError,
    RegistryCollisionWarning,
    ReplayDivergenceError,
    ReplayError,
    SealedWindowError,
    SharedNoiseWarning,
    StateDecodeError,
    StreamClosedError,
    TraceFormatError,
    TracePathError,
    WindowNotFoundError,
)
from ._version import __version__

if TYPE_CHECKING:
    from ._channels import channel, scorer
    from ._encoding import Secret, decode_arguments
    from ._frames import iter_frames, iter_records
    from ._llm import llm_call
    from ._posterior import posterior_draws
    from ._reader import read, read_traces, settle
    from ._recorder import flush, record, score
    from ._select import proceed, select
    from ._state import Run, WindowRef, WindowState, current_run, current_window, last_window
    from ._tool import atool_call, tool, tool_call
    from ._trace import Trace
    from ._trace_format import ReadLimits
    from ._verify import VerifyReport, verify
    from ._window import window
    from ._window.handle import WindowHandle, open_window

# Each public name -> the module defining it, imported on first use (PEP 562).
_LAZY: dict[str, str] = {
    "ReadLimits": "._trace_format",
    "Run": "._state",
    "Secret": "._encoding",
    "Trace": "._trace",
    "VerifyReport": "._verify",
    "WindowHandle": "._window.handle",
    "WindowRef": "._state",
    "WindowState": "._state",
    "atool_call": "._tool",
    "channel": "._channels",
    "current_run": "._state",
    "current_window": "._state",
    "decode_arguments": "._encoding",
    "flush": "._recorder",
    "iter_frames": "._frames",
    "iter_records": "._frames",
    "last_window": "._state",
    "llm_call": "._llm",
    "open_window": "._window.handle",
    "posterior_draws": "._posterior",
    "proceed": "._select",
    "read": "._reader",
    "read_traces": "._reader",
    "record": "._recorder",
    "score": "._recorder",
    "scorer": "._channels",
    "select": "._select",
    "settle": "._reader",
    "tool": "._tool",
    "tool_call": "._tool",
    "verify": "._verify",
    "window": "._window",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentlog' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "AdapterError",
    "AgentlogError",
    "AgentlogWarning",
    "AppImportError",
    "AppNotGivenError",
    "ArtifactEncodingError",
    "BlobNotFoundError",
    "CacheMiss",
    "ChannelVersionError",
    "DegenerateDataWarning",
    "IncompleteFaceError",
    "InstrumentationWarning",
    "MissingDependencyError",
    "ModelHTTPError",
    "NoLogprobsError",
    "NotRegisteredError",
    "ReadLimits",
    "RegistryCollisionWarning",
    "ReplayDivergenceError",
    "ReplayError",
    "Run",
    "SealedWindowError",
    "Secret",
    "SharedNoiseWarning",
    "StateDecodeError",
    "StreamClosedError",
    "Trace",
    "TraceFormatError",
    "TracePathError",
    "VerifyReport",
    "WindowHandle",
    "WindowNotFoundError",
    "WindowRef",
    "WindowState",
    "__version__",
    "atool_call",
    "channel",
    "current_run",
    "current_window",
    "decode_arguments",
    "flush",
    "iter_frames",
    "iter_records",
    "last_window",
    "llm_call",
    "open_window",
    "posterior_draws",
    "proceed",
    "read",
    "read_traces",
    "record",
    "score",
    "scorer",
    "select",
    "settle",
    "tool",
    "tool_call",
    "verify",
    "window",
]

# The errors name their public home, as httpx's do: a traceback shows
# ``agentlog.CacheMiss``, not the private module that defines it.
for _name in __all__:
    _obj = globals().get(_name)  # .get: a lazy name is not loaded by looking
    if isinstance(_obj, type) and issubclass(_obj, AgentlogError | AgentlogWarning):
        _obj.__module__ = __name__
del _name, _obj
