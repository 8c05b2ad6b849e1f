"""Registries of named, versioned objects, and how a ``"module:qualname"`` is resolved.

Windows, channels, scorers and interventions are registered under a short name and kept by
their ``module:qualname`` id, with their creation arguments and a hash of their version
(``Registry``, ``Registered``). ``@agentlog.channel`` and ``@agentlog.scorer`` register
into ``CHANNELS`` and ``SCORERS``; ``resolve`` imports the object a user named by
``"module:qualname"`` (never a name read from a trace).

Examples:
    >>> from agentlog.registry import resolve
    >>> resolve("os.path:join", what="function") is __import__("os").path.join
    True
"""

from __future__ import annotations

import pkgutil
from typing import Any

from agentlog._channels import (
    CHANNELS,
    SCORERS,
    Channel,
    ScoreContext,
    Scorer,
    channel,
    get_channel,
    get_scorer,
    registry,
    scorer,
)
from agentlog._registry import Registered, Registry, object_id

__all__ = [
    "CHANNELS",
    "SCORERS",
    "Channel",
    "Registered",
    "Registry",
    "ScoreContext",
    "Scorer",
    "channel",
    "get_channel",
    "get_scorer",
    "object_id",
    "registry",
    "resolve",
    "scorer",
]


def resolve(spec: str, *, what: str = "object") -> Any:
    """The object named by ``spec``, ``"module:qualname"`` (``pkgutil.resolve_name``).

    Args:
        spec: e.g. ``"mypkg.jobs:score_unit"``; the module is imported.
        what: what the object is, for the error messages (``"job"``, ``"design"``...).

    Raises:
        ValueError: ``spec`` is not ``"module:qualname"``.
        ImportError: the module cannot be imported (the message says how to fix it).
        AttributeError: the module has no such attribute.
    """
    if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
        raise ValueError(f"a {what} is named 'module:qualname' (e.g. 'mypkg.jobs:score_unit'); "
                         f"found {spec!r}")
    module = spec.split(":", 1)[0]
    try:
        return pkgutil.resolve_name(spec)
    except ImportError as exc:
        raise ImportError(
            f"cannot import module {module!r} of {what} {spec!r}: {exc}. Install the "
            "package that defines it, or run from the folder that holds it (PYTHONPATH)"
        ) from exc
    except AttributeError:
        raise AttributeError(
            f"module {module!r} has no {spec.split(':', 1)[1]!r} ({what} {spec!r}); check the "
            "name, and that the module defines it at import time") from None
