"""Evaluation channels and scorers as registered, versioned objects ([ASV] §1, §3).

An evaluation channel is the full configuration that produces a measurement of a state:
the view added to it, the prompt template, the readout (a registered scorer), the model
and the cyclic layouts of the options. ``@al.channel("quote", scorer="margin", ...)``
registers a view function ``view(state) -> str | None`` (None: no added view, the direct
channel); ``@al.scorer("margin")`` registers ``score(state, view, layout) -> float``. Both
remember their creation arguments, so a channel's ``hash`` covers its view's code, template,
readout, model, layouts and parameters, and is stored with every replayed score.

A scorer that needs more than ``(state, view, layout)`` (its channel's template and model,
the wave, the replay's model cache) declares a keyword parameter ``context``: it then gets
a ``ScoreContext``.

Examples:
    >>> import agentlog as al
    >>> @al.scorer("doc-length")
    ... def length(state, view, layout):
    ...     return float(len(view if view is not None else str(state.value)))
    >>> @al.channel("doc-upper", scorer="doc-length", template="{view}", layouts=2)
    ... def upper(state):
    ...     return str(state.value).upper()
    >>> from agentlog.registry import get_channel
    >>> ch = get_channel("doc-upper")
    >>> ch.scorer, ch.layouts, dict(ch.params), len(ch.hash)
    ('doc-length', 2, {}, 64)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from agentlog._registry import Registered, Registry

if TYPE_CHECKING:  # annotations only: the core never imports the layers above it
    from agentlog.adapters import ModelCache
    from agentlog.replay import State

__all__ = [
    "CHANNELS",
    "SCORERS",
    "Channel",
    "ScoreContext",
    "Scorer",
    "channel",
    "get_channel",
    "get_scorer",
    "registry",
    "scorer",
]

F = TypeVar("F", bound=Callable[..., Any])

CHANNELS = Registry("channel")
SCORERS = Registry("scorer")


def registry(kind: str) -> Registry:
    """The replay's registry of ``"channel"`` or ``"scorer"`` objects.

    Raises:
        ValueError: another kind.
    """
    if kind == "channel":
        return CHANNELS
    if kind == "scorer":
        return SCORERS
    raise ValueError(f"`kind` must be 'channel' or 'scorer'; found {kind!r}")


class _Versioned:
    """``id`` and ``hash`` of a registered object, read off its registry entry."""

    registered: Registered

    @property
    def id(self) -> str:
        """``module:qualname`` of the registered function."""
        return self.registered.id

    @property
    def hash(self) -> str:
        """Hex SHA-256 of its version: its code and every creation argument."""
        return self.registered.hash


@dataclass(frozen=True)
class Channel(_Versioned):
    """A registered evaluation channel.

    Attributes:
        name: its short name (``"quote"``).
        view: ``view(state) -> str | None``; None means no added view.
        scorer: the name of the registered scorer that reads it out.
        template: the prompt template the scorer fills (None: the scorer has its own).
        model: the model (and revision) the scorer asks, when it asks one.
        layouts: how many cyclic layouts of the options the channel declares.
        params: every other creation argument (canonical).
        registered: its registry entry (``id``, ``hash``).
    """

    name: str
    view: Callable[[State], str | None]
    scorer: str
    template: str | None
    model: str | None
    layouts: int
    params: Mapping[str, Any]
    registered: Registered


@dataclass(frozen=True)
class Scorer(_Versioned):
    """A registered scorer: ``score(state, view, layout) -> float``.

    Attributes:
        name: its short name (``"margin"``), also the name of the scores it writes.
        fn: the function.
        params: its creation arguments (canonical).
        registered: its registry entry (``id``, ``hash``).
        takes_context: the function declares a ``context`` parameter.
        is_async: the function is a coroutine function.
    """

    name: str
    fn: Callable[..., Any]
    params: Mapping[str, Any]
    registered: Registered
    takes_context: bool
    is_async: bool


@dataclass(frozen=True)
class ScoreContext:
    """What a scorer declaring ``context`` receives besides ``(state, view, layout)``.

    Attributes:
        channel: the channel being scored (its template, model, params).
        scorer: the scorer itself (its params).
        layout: the cyclic layout index (also the third argument).
        wave: the acquisition wave: a repeat scoring pass of the same cells ([ASV] §4);
            model calls of wave ``w`` use draw index ``w`` in their cache key.
        cache: the replay's exact-input model cache (``agentlog.replay.ModelCache``), or
            None: wrap the scorer's model client with it (``adapters.openai.wrap(client,
            cache=context.cache)``) so a re-run is served from it and ``frozen=True``
            turns a miss into ``agentlog.CacheMiss``.
        unit: the key of the unit being scored.
    """

    channel: Channel
    scorer: Scorer
    layout: int
    wave: int
    cache: ModelCache | None = None
    unit: str = ""


def _check_name(kind: str, name: Any) -> None:
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise TypeError(f"@al.{kind}(name) needs a non-empty name without surrounding "
                        f"spaces, e.g. @al.{kind}(\"quote\"); found {name!r}")


def channel(name: str, *, scorer: str, template: str | None = None, model: str | None = None,
            layouts: int = 1, **params: Any) -> Callable[[F], F]:
    """Register a view function as evaluation channel ``name``.

    Args:
        name: the channel's short name (``--channel NAME``).
        scorer: the registered scorer that reads the channel out (its readout).
        template: the prompt template the scorer fills, when it uses one.
        model: the model (with revision) the scorer asks, when it asks one.
        layouts: the number of cyclic layouts of the options ([ASV] §1: each candidate in
            each position once); the replay scores every one, and the estimator averages
            them within the channel.
        **params: any other setting of the channel, hashed into its version (plain data).

    Returns:
        A decorator that registers ``view(state) -> str | None`` and returns it unchanged.

    Raises:
        TypeError: a bad name, a non-string template/model/scorer, or a non-callable view.
        ValueError: ``layouts`` < 1.
        agentlog.ArtifactEncodingError: a parameter has no canonical encoding.
    """
    _check_name("channel", name)
    if not isinstance(scorer, str) or not scorer:
        raise TypeError(f"channel {name!r}: `scorer` must name a registered scorer (e.g. "
                        f"scorer=\"margin\"); found {scorer!r}")
    for what, value in (("template", template), ("model", model)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"channel {name!r}: `{what}` must be a str or None; found "
                            f"{type(value).__name__}")
    if isinstance(layouts, bool) or not isinstance(layouts, int) or layouts < 1:
        raise ValueError(f"channel {name!r}: `layouts` must be an int >= 1 (the number of "
                         f"cyclic layouts); found {layouts!r}")

    def register(view: F) -> F:
        if not callable(view):
            raise TypeError(f"@al.channel({name!r}) decorates a view function "
                            f"view(state) -> str | None; found {type(view).__name__}")
        CHANNELS.register(name, view, {"scorer": scorer, "template": template,
                                       "model": model, "layouts": layouts,
                                       "params": dict(params)})
        return view

    return register


def scorer(name: str, **params: Any) -> Callable[[F], F]:
    """Register ``score(state, view, layout) -> float`` as scorer ``name``.

    Args:
        name: the scorer's short name; the replayed ``Score`` records carry it.
        **params: its settings, hashed into its version (plain data).

    Returns:
        A decorator that registers the function and returns it unchanged. A function
        declaring a ``context`` parameter is called with ``context=ScoreContext(...)``;
        an ``async def`` scorer is awaited.
    """
    _check_name("scorer", name)

    def register(fn: F) -> F:
        if not callable(fn):
            raise TypeError(f"@al.scorer({name!r}) decorates score(state, view, layout) -> "
                            f"float; found {type(fn).__name__}")
        SCORERS.register(name, fn, dict(params))
        return fn

    return register


def get_channel(name: str) -> Channel:
    """The registered channel ``name`` (or ``module:qualname``).

    Raises:
        agentlog.replay.NotRegisteredError: no such channel; the message lists them.
    """
    entry = CHANNELS.get(name)
    p = entry.params
    return Channel(name=entry.name, view=entry.obj, scorer=p["scorer"], template=p["template"],
                   model=p["model"], layouts=p["layouts"], params=p["params"],
                   registered=entry)


def _takes_context(fn: Callable[..., Any]) -> bool:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature
        return False
    return "context" in sig.parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())


def get_scorer(name: str) -> Scorer:
    """The registered scorer ``name`` (or ``module:qualname``).

    Raises:
        agentlog.replay.NotRegisteredError: no such scorer; the message lists them.
    """
    entry = SCORERS.get(name)
    fn = entry.obj
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None))  # noqa: B004 - callable() cannot tell async
    return Scorer(name=entry.name, fn=fn, params=entry.params, registered=entry,
                  takes_context=_takes_context(fn), is_async=is_async)
