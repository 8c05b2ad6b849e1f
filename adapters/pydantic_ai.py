"""pydantic-ai agents, recorded: a capability that makes each model request and each tool
call a window, and serves tools under a frozen replay.

``AgentlogCapability`` is a pydantic-ai capability (``Agent(..., capabilities=[...])``):

* ``wrap_model_request`` runs each model request inside a window ``"pydantic_ai.turn"``
  (entry: the model and the messages sent; exit: the response's parts). The model's HTTP
  calls are recorded, and served by the cache, when its provider is given agentlog's
  client (``OpenAIProvider(http_client=agentlog.adapters.async_http_client())``).
* ``wrap_tool_execute`` runs each tool call inside a window ``"pydantic_ai.tool.<name>"``
  as ``al.atool_call``: its arguments and result are recorded, and a frozen replay
  serves the recorded result without running the tool.

pydantic-ai's own OpenTelemetry instrumentation (``agent.instrument = True``,
``Agent.instrument_all()``) nests under agentlog's window spans: both trace to the current
span of the context. One span per model call reaches the backend (``spans``): by default
(``"auto"``) pydantic-ai's when its instrumentation is on for the run, else agentlog's;
``"framework"`` never emits agentlog's model span; ``"both"`` always does (two spans per
call under pydantic-ai's instrumentation, and a backend that sums tokens over spans counts
them twice). agentlog's window and run spans are emitted either way.

Examples:
    >>> from agentlog.adapters.pydantic_ai import AgentlogCapability
    >>> type(AgentlogCapability()).__name__
    'AgentlogCapability'
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import agentlog as al

from ._framework import plain
from ._recording import require
from ._transport import framework_traces_models

_capabilities = require("pydantic_ai.capabilities", "pydantic-ai")

__all__ = ["AgentlogCapability"]


def _instrumented(ctx: Any) -> bool:
    """Whether pydantic-ai's own instrumentation traces this run (``Agent(instrument=...)``
    or ``Agent.instrument_all()``): its run context then holds a real tracer."""
    from opentelemetry.trace import NoOpTracer

    tracer = getattr(ctx, "tracer", None)
    return tracer is not None and not isinstance(tracer, NoOpTracer)


def _turn_entry(request_context: Any) -> Any:
    model = getattr(request_context, "model", None)
    return plain({"model": getattr(model, "model_name", None) or type(model).__name__,
                   "messages": [_parts(m) for m in request_context.messages]})


def _parts(message: Any) -> Any:
    """A message's (or a response's) parts without their timestamps (a replay sends them
    anew)."""
    parts = [plain(part) for part in getattr(message, "parts", ())]
    return [{k: v for k, v in p.items() if k != "timestamp"} if isinstance(p, dict) else p
            for p in parts]


@dataclass
class AgentlogCapability(_capabilities.AbstractCapability):  # type: ignore[misc,name-defined]
    """Records each model request and tool call of a pydantic-ai agent (module docs).

    Attributes:
        spans: whose span each model call gets: ``"auto"`` (pydantic-ai's when its
            instrumentation is on, else agentlog's), ``"framework"`` or ``"both"``.
    """

    spans: Literal["auto", "framework", "both"] = "auto"

    def __post_init__(self) -> None:
        if self.spans not in ("auto", "framework", "both"):
            raise ValueError(f"`spans` must be 'auto', 'framework' or 'both'; found "
                             f"{self.spans!r}")

    async def wrap_model_request(self, ctx: Any, *, request_context: Any,
                                 handler: Callable[[Any], Awaitable[Any]]) -> Any:
        traced: bool | None = None  # "auto", not instrumented: as al.llm_call decides
        if self.spans == "both":
            traced = False
        elif self.spans == "framework" or _instrumented(ctx):
            traced = True
        async with al.open_window("pydantic_ai.turn", _turn_entry(request_context)) as turn:
            with framework_traces_models(traced):
                response = await handler(request_context)
            turn.close(exit=_parts(response))
            return response

    async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any,
                                handler: Callable[[Any], Awaitable[Any]]) -> Any:
        name = str(call.tool_name)
        arguments = plain(args) if isinstance(args, dict) else {"input": plain(args)}
        async with al.open_window(f"pydantic_ai.tool.{name}", arguments) as window:
            result = await al.atool_call(name, arguments, lambda: handler(args))
            window.close(exit=plain(result))
            return result
