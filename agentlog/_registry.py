"""Registries of named, versioned objects: channels, scorers, steers, windows.

A replay names the code it runs by a short name (``--channel quote``); the registry maps
that name to the object the user's app module registered, keyed by its ``module:qualname``
so that two objects sharing a short name are noticed (``RegistryCollisionWarning``) instead
of the last one silently winning. Each registration remembers its creation arguments, as
Inspect AI's registry does, and its ``hash`` covers the kind, the id, the canonical
encoding of those arguments and a digest of the object's source code: a score stored with
that hash says exactly which version of the channel produced it.

Examples:
    >>> from agentlog.registry import Registry
    >>> channels = Registry("channel")
    >>> def quote(state):
    ...     return str(state)
    >>> entry = channels.register("quote", quote, {"template": "Q: {view}"})
    >>> entry.name, entry.id.endswith(":quote"), len(entry.hash)
    ('quote', True, 64)
    >>> channels.get("quote") is entry
    True
"""

from __future__ import annotations

import hashlib
import inspect
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from agentlog._encoding import decode as decode_artifact
from agentlog._encoding import encode as encode_artifact
from agentlog._errors import ArtifactEncodingError, NotRegisteredError, RegistryCollisionWarning

__all__ = [
    "NotRegisteredError",
    "Registered",
    "Registry",
    "RegistryCollisionWarning",
    "object_id",
]



@dataclass(frozen=True)
class Registered:
    """One registered object and the identity a replayed result stores.

    Attributes:
        kind: what it is: ``"channel"``, ``"scorer"``, ``"steer"`` or ``"window"``.
        name: the user's short name (``"quote"``).
        id: ``"module:qualname"`` of the registered object.
        obj: the object itself.
        params: its creation arguments, canonical (a read-only mapping as decoded from
            agentlog's canonical encoding: tuples come back as lists).
        hash: hex SHA-256 over (kind, id, canonical params, source digest).
        source_digest: hex SHA-256 of the object's source code, or None where
            ``inspect.getsource`` cannot find it (a lambda typed at a REPL, a builtin).
    """

    kind: str
    name: str
    id: str
    obj: Any
    params: Mapping[str, Any]
    hash: str
    source_digest: str | None = None


def object_id(obj: Any) -> str:
    """``"module:qualname"`` of a function or class, or of an instance's class."""
    target = obj if hasattr(obj, "__qualname__") else type(obj)
    module = getattr(target, "__module__", None) or "<unknown>"
    return f"{module}:{target.__qualname__}"


def _source_digest(obj: Any) -> str | None:
    target = obj if (inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismethod(obj)
                     ) else type(obj)
    try:
        source = inspect.getsource(target)
    except (OSError, TypeError):  # no file behind it (REPL, builtin, C extension)
        return None
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def _canonical_params(kind: str, name: str, params: Mapping[str, Any]) -> tuple[bytes, Any]:
    if not isinstance(params, Mapping):
        raise TypeError(
            f"{kind} {name!r}: `params` must be a mapping of creation arguments, got "
            f"{type(params).__qualname__}; pass e.g. {{'template': ..., 'model': ...}}"
        )
    bad = [key for key in params if not isinstance(key, str)]
    if bad:
        raise TypeError(
            f"{kind} {name!r}: creation-argument names must be strings, got {bad!r}"
        )
    try:
        data = encode_artifact(dict(params), what=f"{kind} {name!r} creation arguments")
    except ArtifactEncodingError as exc:
        raise ArtifactEncodingError(
            f"{exc} The arguments are hashed into the {kind}'s version: pass plain data "
            "(a callable by its 'module:qualname' string, a model by its name)."
        ) from None
    return data, decode_artifact(data)


class Registry:
    """Objects of one kind, by short name and by ``module:qualname``.

    Args:
        kind: what the registry holds (``"channel"``, ``"scorer"``, ``"steer"``,
            ``"window"``); it names the objects in warnings and errors.
        shared_names: several objects may share a short name, each reachable by its id
            (windows: a test module and an app may both define ``retrieval``).

    Thread-safe: registration happens at import time, which may be on any thread.
    """

    def __init__(self, kind: str, *, shared_names: bool = False) -> None:
        self.kind = kind
        self.shared_names = shared_names
        self._lock = threading.Lock()
        self._by_name: dict[str, list[str]] = {}  # name -> ids, in registration order
        self._by_id: dict[str, Registered] = {}

    def register(self, name: str, obj: Any, params: Mapping[str, Any] | None = None, *,
                 id: str | None = None) -> Registered:
        """Register ``obj`` under ``name`` with its creation arguments ``params``.

        Re-registering the same ``module:qualname`` (a module reload) replaces it
        silently. A different object under a name already taken warns
        ``RegistryCollisionWarning`` and the last one wins, unless the registry was made
        with ``shared_names=True`` (windows): then both stay reachable by their ids, and
        the name alone finds the last one registered (``get``) or all of them (``ids``).

        Args:
            name: the short name.
            obj: the object.
            params: its creation arguments (plain data).
            id: the ``module:qualname`` to file it under (default ``object_id(obj)``).

        Returns:
            The ``Registered`` entry, with its version ``hash``.

        Raises:
            TypeError: ``name`` is not a non-empty string or ``params`` is not a mapping
                with string keys.
            agentlog.ArtifactEncodingError: ``params`` has no canonical encoding.
        """
        if not isinstance(name, str) or not name:
            raise TypeError(
                f"a {self.kind} needs a non-empty string name, got {name!r}; e.g. "
                f"@al.{self.kind}(\"quote\")"
            )
        data, canonical = _canonical_params(self.kind, name, params or {})
        oid = object_id(obj) if id is None else id
        source = _source_digest(obj)
        identity = encode_artifact([self.kind, oid, data, source], what=f"{self.kind} identity")
        entry = Registered(kind=self.kind, name=name, id=oid, obj=obj,
                           params=MappingProxyType(canonical),
                           hash=hashlib.sha256(identity).hexdigest(), source_digest=source)
        with self._lock:
            ids = self._by_name.setdefault(name, [])
            previous = self._by_id.get(ids[-1]) if ids else None
            if oid in ids:
                ids.remove(oid)
            if not self.shared_names:  # the name finds the last one; ids find them all
                ids.clear()
            ids.append(oid)
            self._by_id[oid] = entry
        if previous is not None and previous.id != oid and not self.shared_names:
            warnings.warn(
                f"{self.kind} name {name!r} was registered by {previous.id} and is now "
                f"registered again by {oid}; the last one wins. Give one of them another "
                f"name, or refer to it by its id ({previous.id!r}).",
                RegistryCollisionWarning, stacklevel=3,
            )
        return entry

    def get(self, name_or_id: str) -> Registered:
        """The entry registered under a short name (the last one, where names are shared),
        or under a ``module:qualname`` id.

        Raises:
            NotRegisteredError: nothing is registered under it; the message lists what is.
        """
        with self._lock:
            ids = self._by_name.get(name_or_id)
            entry = self._by_id[ids[-1]] if ids else self._by_id.get(name_or_id)
            known = sorted(self._by_name)
        if entry is None:
            listed = ", ".join(known) if known else "none"
            raise NotRegisteredError(
                f"no {self.kind} named {name_or_id!r} is registered (registered "
                f"{self.kind}s: {listed}). Pass the module that registers it with --app "
                f"MODULE (in Python: app=\"MODULE\"), or import it before replaying."
            )
        return entry

    def unregister(self, name: str) -> None:
        """Forget the entry registered under ``name`` (no-op when there is none).

        For tests and interactive sessions; an app registers at import time and never
        needs it.
        """
        with self._lock:
            for oid in self._by_name.pop(name, ()):
                self._by_id.pop(oid, None)

    def ids(self, name: str) -> list[str]:
        """The ids registered under ``name``, in registration order (one, unless the
        registry shares names)."""
        with self._lock:
            return list(self._by_name.get(name, ()))

    def names(self) -> list[str]:
        """The registered short names, sorted."""
        with self._lock:
            return sorted(self._by_name)

    def __contains__(self, name_or_id: object) -> bool:
        with self._lock:
            return name_or_id in self._by_name or name_or_id in self._by_id

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_name)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, names={self.names()!r})"
