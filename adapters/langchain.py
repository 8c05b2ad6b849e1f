"""LangChain v1 agents (``create_agent``) and LangGraph graphs, recorded: a window per
model turn, per tool call and per graph node; tools served under a frozen replay.

``AgentlogMiddleware`` is an ``AgentMiddleware`` (``create_agent(..., middleware=[...])``):

* ``wrap_model_call`` / ``awrap_model_call`` run each model turn inside a window
  ``"langchain.turn"`` (entry: the model, system message and messages; exit: the
  response's messages). The model's own HTTP calls are recorded when its client is
  agentlog's (``ChatOpenAI(http_client=agentlog.adapters.http_client())``).
* ``wrap_tool_call`` / ``awrap_tool_call`` run each tool call inside a window
  ``"langchain.tool.<name>"`` as ``al.tool_call``: its arguments and ``ToolMessage`` are
  recorded, and a frozen replay serves the recorded ``ToolMessage`` without running the
  tool.

``AgentlogCallbackHandler`` is a LangChain callback handler for LangGraph graphs
(``graph.invoke(inputs, config={"callbacks": [AgentlogCallbackHandler()]})``): each node
run is a window ``"langgraph.<node>"`` (entry: the state it received; exit: the update it
returned, or the failure of its exception). It runs inline (``run_inline``), in the
node's own context, so the model and tool calls a node makes count into its window, sync
and async.

LangChain's values that are not plain data (messages, ``TextAccessor``) are sealed as
their ``model_dump`` or their text.

Example:
    >>> from agentlog.adapters.langchain import AgentlogMiddleware
    >>> AgentlogMiddleware().name
    'AgentlogMiddleware'
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import agentlog as al

from ._framework import OpenWindows, plain
from ._recording import require

_middleware = require("langchain.agents.middleware", "langchain")
_messages = require("langchain_core.messages", "langchain")
_callbacks = require("langchain_core.callbacks", "langchain")

__all__ = ["AgentlogCallbackHandler", "AgentlogMiddleware"]


def _turn_entry(request: Any) -> Any:
    model = request.model
    return plain({"model": getattr(model, "model_name", None) or type(model).__name__,
                   "system": getattr(request.system_message, "content", None),
                   "messages": request.messages})


def _turn_exit(response: Any) -> Any:
    return plain(getattr(response, "result", response))


def _tool_name(request: Any) -> str:
    return str(request.tool_call.get("name") or "tool")


class AgentlogMiddleware(_middleware.AgentMiddleware):  # type: ignore[misc,name-defined]
    """Records each model turn and tool call of a ``create_agent`` agent (module docs)."""

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        with al.open_window("langchain.turn", _turn_entry(request)) as turn:
            response = handler(request)
            turn.close(exit=_turn_exit(response))
            return response

    async def awrap_model_call(self, request: Any,
                               handler: Callable[[Any], Awaitable[Any]]) -> Any:
        async with al.open_window("langchain.turn", _turn_entry(request)) as turn:
            response = await handler(request)
            turn.close(exit=_turn_exit(response))
            return response

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        name = _tool_name(request)
        arguments = dict(request.tool_call.get("args") or {})
        with al.open_window(f"langchain.tool.{name}", plain(arguments)) as window:
            result = al.tool_call(name, arguments, lambda: handler(request),
                                  returns=_returns(request))
            window.close(exit=plain(result))
            return result

    async def awrap_tool_call(self, request: Any,
                              handler: Callable[[Any], Awaitable[Any]]) -> Any:
        name = _tool_name(request)
        arguments = dict(request.tool_call.get("args") or {})
        async with al.open_window(f"langchain.tool.{name}", plain(arguments)) as window:
            result = await al.atool_call(name, arguments, lambda: handler(request),
                                         returns=_returns(request))
            window.close(exit=plain(result))
            return result


def _returns(request: Any) -> Any:
    """The type a served tool result is rebuilt as: the ``ToolMessage`` a tool call
    gives (a tool returning a ``Command`` is served only as it was recorded)."""
    return _messages.ToolMessage


class AgentlogCallbackHandler(_callbacks.BaseCallbackHandler):  # type: ignore[misc,name-defined]
    """Records each LangGraph node run as a window (module docs)."""

    run_inline = True  # in the node's context, so what the node does counts into it

    def __init__(self) -> None:
        super().__init__()
        self._windows = OpenWindows()

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: Any,
                       parent_run_id: Any = None, metadata: Any = None, **kwargs: Any) -> None:
        node = (metadata or {}).get("langgraph_node")
        if not node or kwargs.get("name") != node:
            return  # not a node's own run (the graph, a runnable inside a node)
        self._windows.start(run_id, f"langgraph.{node}", inputs)

    def on_chain_end(self, outputs: Any, *, run_id: Any, **kwargs: Any) -> None:
        self._windows.end(run_id, outputs)

    def on_chain_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
        self._windows.end(run_id, exception=error)
