"""Exceptions and warnings raised by agentlog: every one of them is defined here.

The tree::

    AgentlogError
    ├── TraceFormatError          a trace file is not what its format promises (with byte offset)
    ├── TracePathError            a path cannot be recorded to: not a regular file, held by
    │                             another writer, or an existing trace ``mode=`` protects
    │                             (also a ValueError)
    ├── BlobNotFoundError         a record references a hash no Blob record of the trace holds
    │                             (also a KeyError)
    ├── SealedWindowError         a tool was called inside a window that forbids it
    ├── ArtifactEncodingError     an entry/exit artifact has no canonical encoding
    │                             (also a TypeError)
    ├── ReplayError
    │   ├── CacheMiss             a frozen replay asked for a model call that was never recorded
    │   └── ReplayDivergenceError a replay did not reproduce the recorded choices
    ├── AppNotGivenError          no app module was named for a replay (also a ValueError)
    ├── AppImportError            the app module named for a replay cannot be imported
    │                             (also an ImportError)
    ├── WindowNotFoundError       no instance of the window asked for is in the traces
    │                             (also a ValueError)
    ├── StateDecodeError          a sealed state of one transition cannot be read back
    │                             (also a ValueError)
    ├── ChannelVersionError       a worker's channel or scorer is not the version the replay
    │                             was planned with
    ├── IncompleteFaceError       an ASV face lacks one of its four corners (also a ValueError)
    ├── NotRegisteredError        no window, channel, scorer or intervention is registered
    │                             under that name (also a KeyError)
    ├── AdapterError              a model-client adapter failed
    │   ├── ModelHTTPError        a model endpoint answered with an HTTP error (recorded)
    │   └── NoLogprobsError       a response carries no log-probabilities to read a vector from
    ├── StreamClosedError         recorded, never raised: the caller closed or dropped a model
    │                             stream before its end
    └── MissingDependencyError    an optional dependency is not installed (also an ImportError)

    AgentlogWarning
    ├── InstrumentationWarning    agentlog could not record; the host program goes on
    ├── DegenerateDataWarning     an estimator's input is degenerate (zero variance, ...)
    ├── SharedNoiseWarning        runs of different tasks drew the same random numbers
    └── RegistryCollisionWarning  two objects were registered under one short name

Every class is exported by ``agentlog`` and reports it as its ``__module__``; the packages
that raise one re-export it too (``agentlog.replay.WindowNotFoundError``).
Every message says what was expected, what was found, where, and what to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class AgentlogError(Exception):
    """Base class of every error agentlog raises on purpose."""


class TraceFormatError(AgentlogError):
    """A trace file does not follow the agentlog trace format.

    Attributes:
        path: the file, when known.
        offset: byte offset in the file where the problem was found, when known.
    """

    def __init__(self, message: str, *, path: str | None = None, offset: int | None = None):
        where = []
        if path is not None:
            where.append(str(path))
        if offset is not None:
            where.append(f"byte offset {offset}")
        full = f"{', '.join(where)}: {message}" if where else message
        super().__init__(full)
        self.path = path
        self.offset = offset


class TracePathError(AgentlogError, ValueError):
    """``record()`` refused a path: nothing was written and the file is untouched."""


class BlobNotFoundError(AgentlogError, KeyError):
    """A hash is referenced but no Blob record with it is in the trace."""

    def __str__(self) -> str:
        # KeyError's str() would quote the message.
        return str(self.args[0]) if self.args else ""


class SealedWindowError(AgentlogError):
    """A tool was called inside a window that declared it forbidden (``forbid=``)."""


class ArtifactEncodingError(AgentlogError, TypeError):
    """An object has no canonical encoding, so it cannot be sealed or hashed."""


class ReplayError(AgentlogError):
    """Base class of replay failures."""


class CacheMiss(ReplayError):
    """A frozen replay requested a model call that is not in the recorded calls or cache.

    Attributes:
        key: hex cache key of the request that missed, when known.
        differences: the fields (paths such as ``request.temperature``) in which the request
            differs from the nearest stored request of the same provider and model; empty
            when none was stored.
    """

    def __init__(self, message: str, *, key: str | None = None,
                 differences: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.key = key
        self.differences = differences


class ReplayDivergenceError(ReplayError):
    """A replay that had to reproduce the recording made a different choice.

    Attributes:
        record: index of the diverging record in its run's records (None: the recording
            has no draw at that stream and step).
        stream, step: the ``select``/``proceed`` stream and step where it diverged.
        field: what differed (``"choice"``, ``"decision"``, ``"candidates"``, ...).
        recorded, replayed: both values.
    """

    def __init__(self, message: str, *, record: int | None = None, stream: str | None = None,
                 step: int | None = None, field: str | None = None, recorded: Any = None,
                 replayed: Any = None) -> None:
        super().__init__(message)
        self.record = record
        self.stream = stream
        self.step = step
        self.field = field
        self.recorded = recorded
        self.replayed = replayed


class AppNotGivenError(AgentlogError, ValueError):
    """No app module was named (flag, ``pyproject.toml`` or ``$AGENTLOG_APP``).

    Attributes:
        recorded: the modules the trace's windows were recorded from, when stored.
    """

    def __init__(self, message: str, *, recorded: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.recorded = tuple(recorded)


class AppImportError(AgentlogError, ImportError):
    """The app module the user named could not be imported.

    Attributes:
        module: the module name.
        source: where the name came from (``"--app"``, a ``pyproject.toml`` path, or
            ``"$AGENTLOG_APP"``).
    """

    def __init__(self, message: str, *, module: str, source: str) -> None:
        super().__init__(message)
        self.module = module
        self.source = source


class WindowNotFoundError(AgentlogError, ValueError):
    """No instance of the window asked for is in the traces.

    Attributes:
        window: the name asked for.
        present: the window names the traces hold.
    """

    def __init__(self, message: str, *, window: str, present: Sequence[str]) -> None:
        super().__init__(message)
        self.window = window
        self.present = tuple(present)


class StateDecodeError(AgentlogError, ValueError):
    """A sealed state of one transition could not be read back (its unit fails alone)."""


class ChannelVersionError(AgentlogError):
    """The worker's channel or scorer is not the version the replay was planned with."""


class IncompleteFaceError(AgentlogError, ValueError):
    """An ASV face is missing a corner; three corners identify nothing ([ASV] Prop. 1)."""


class NotRegisteredError(AgentlogError, KeyError):
    """No window, channel, scorer or intervention is registered under the name or id asked
    for (import the app module that registers it).

    A ``KeyError`` whose ``str()`` is the full message (``KeyError`` would quote it).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class AdapterError(AgentlogError):
    """A model-client adapter could not record or serve a call."""


class ModelHTTPError(AdapterError):
    """Recorded (never raised) when a model endpoint answered with an HTTP error status;
    the caller's SDK raises its own error from the same response.

    Attributes:
        status_code: the HTTP status (401, 429, 500, ...).
    """

    def __init__(self, message: str, *, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


class NoLogprobsError(AdapterError):
    """The response carries no log-probabilities to read a candidate vector from."""


class StreamClosedError(AgentlogError):
    """Recorded (never raised) when a caller closed or dropped a stream before its end."""


class MissingDependencyError(AgentlogError, ImportError):
    """An optional dependency is needed for this feature but is not installed."""


class AgentlogWarning(UserWarning):
    """Base class of agentlog warnings."""


class InstrumentationWarning(AgentlogWarning):
    """agentlog could not record something; the host program continues unchanged."""


class DegenerateDataWarning(AgentlogWarning):
    """An estimator received degenerate input (zero variance, empty cohort, ...)."""


class SharedNoiseWarning(AgentlogWarning):
    """Runs of different tasks drew the same random numbers, so the tasks are not independent.

    Runs recorded with noise generators /1 and /2 under one seed share every stop uniform
    and every Gumbel draw of the ids their pools share, whatever their task: an estimator
    that treats tasks as independent samples then rests on correlated ones.
    """


class RegistryCollisionWarning(AgentlogWarning):
    """Two different objects were registered under one short name; the last one wins."""
