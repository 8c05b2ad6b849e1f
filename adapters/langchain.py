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

``graph_config(config)`` adds the handler and the current run's id to a graph's config;
LangGraph copies that id into every checkpoint it writes. A run resumed or forked from a
checkpoint (time travel: ``graph.invoke(None, {"configurable": {"thread_id": ...,
"checkpoint_id": ...}})``, or after ``graph.update_state``) is then a branch of the run
that wrote it: ``al.record(..., meta=fork_meta(graph, config))`` links the two
(``meta["langgraph.fork"]``: the parent run, the thread, the checkpoint, its step, and
whether the state was edited since).

LangChain's values that are not plain data (messages, ``TextAccessor``) are sealed as
their ``model_dump`` or their text.

Examples:
    >>> from agentlog.adapters.langchain import AgentlogMiddleware
    >>> AgentlogMiddleware().name
    'AgentlogMiddleware'
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import agentlog as al

from ._framework import OpenWindows, plain
from ._recording import require

_middleware = require("langchain.agents.middleware", "langchain")
_messages = require("langchain_core.messages", "langchain")
_callbacks = require("langchain_core.callbacks", "langchain")

__all__ = ["FORK_META", "RUN_ID_KEY", "AgentlogCallbackHandler", "AgentlogMiddleware",
           "afork_meta", "fork_meta", "graph_config"]

RUN_ID_KEY = "agentlog_run_id"  # in a graph config's metadata, hence in its checkpoints
FORK_META = "langgraph.fork"  # the run meta key fork_meta() fills


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


def graph_config(config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``config`` for ``graph.invoke``/``stream`` (and their async forms) with an
    ``AgentlogCallbackHandler`` added to its callbacks and the current run's id in its
    metadata (``RUN_ID_KEY``), which LangGraph writes into each checkpoint of the run.
    Outside a run the config only gains the handler."""
    out = dict(config or {})
    callbacks = out.get("callbacks")
    if callbacks is None:
        out["callbacks"] = [AgentlogCallbackHandler()]
    elif isinstance(callbacks, list):
        out["callbacks"] = [*callbacks, AgentlogCallbackHandler()]
    else:  # a callback manager: LangChain adds handlers to it
        callbacks.add_handler(AgentlogCallbackHandler(), inherit=True)
    run = al.current_run()
    if run is not None:
        out["metadata"] = {**(out.get("metadata") or {}), RUN_ID_KEY: run.run_id}
    return out


def fork_meta(graph: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    """The run meta linking a run resumed or forked from the checkpoint ``config`` names
    (its ``thread_id``, and ``checkpoint_id``; without one, the thread's latest) to the
    run that wrote that checkpoint: ``{FORK_META: {"parent_run", "thread_id",
    "checkpoint_id", "from_checkpoint", "step", "edited"}}``. ``from_checkpoint`` is the
    checkpoint the parent run wrote; ``edited`` is true when ``update_state`` checkpoints
    lie between it and ``checkpoint_id`` (the branch starts from an edited state).

    Raises:
        ValueError: the thread has no such checkpoint, or no checkpoint on its way back
            was written by a run recorded with ``graph_config``.
    """
    snapshot = graph.get_state(config)
    return _fork(config, snapshot, lambda parent: graph.get_state(parent))


async def afork_meta(graph: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    """``fork_meta`` for a graph whose checkpointer is async (``aget_state``)."""
    chain = []
    snapshot = await graph.aget_state(config)
    while snapshot is not None and snapshot.metadata is not None:
        chain.append(snapshot)
        if RUN_ID_KEY in snapshot.metadata or snapshot.parent_config is None:
            break
        snapshot = await graph.aget_state(snapshot.parent_config)
    rest = iter(chain[1:])  # the parents, already read: _fork walks the same way back
    return _fork(config, chain[0] if chain else None, lambda _: next(rest, None))


def _fork(config: Mapping[str, Any], snapshot: Any,
          parent_of: Callable[[Any], Any]) -> dict[str, Any]:
    configurable = config.get("configurable") or {}
    thread = configurable.get("thread_id")
    if snapshot is None or not snapshot.metadata:
        raise ValueError(f"no checkpoint of thread {thread!r} at {config!r}: pass the config "
                         "of a checkpoint the graph's checkpointer holds "
                         "(graph.get_state_history(config))")
    start = snapshot.config["configurable"]
    edited = False
    while RUN_ID_KEY not in snapshot.metadata:
        edited = edited or snapshot.metadata.get("source") in ("update", "fork")
        parent = snapshot.parent_config
        snapshot = None if parent is None else parent_of(parent)
        if snapshot is None or not snapshot.metadata:
            raise ValueError(
                f"checkpoint {start.get('checkpoint_id')!r} of thread {thread!r} was not "
                "written by a recorded run: invoke the graph with "
                "config=agentlog.adapters.langchain.graph_config(...) inside al.record so "
                "its checkpoints name their run")
    return {FORK_META: {
        "parent_run": snapshot.metadata[RUN_ID_KEY], "thread_id": thread,
        "checkpoint_id": start.get("checkpoint_id"),
        "from_checkpoint": snapshot.config["configurable"].get("checkpoint_id"),
        "step": snapshot.metadata.get("step"), "edited": edited}}
