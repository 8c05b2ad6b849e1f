"""smolagents agents, recorded: each model turn and each tool call a window, tools served
under a frozen replay.

``instrument(agent)`` records an existing ``ToolCallingAgent`` or ``CodeAgent`` in place
(it returns the agent): its model's ``generate``/``generate_stream`` run inside a window
``"smolagents.turn"`` (entry: the messages; exit: the message the model returned), and
each of its tools' ``forward`` inside a window ``"smolagents.tool.<name>"`` as
``al.tool_call`` (arguments and result recorded; a frozen replay serves the result
without running the tool). ``record_model`` and ``record_tool`` do one object each.

The model's HTTP calls are recorded, and served by the cache, when its client is
agentlog's: ``OpenAIServerModel(..., client_kwargs={"http_client":
agentlog.adapters.http_client()})``.

Limit: smolagents runs the tool calls of one step in its own thread pool when a step makes
several at once; those threads do not see the run, so such calls are not recorded (an
``InstrumentationWarning`` says so). Set ``max_tool_threads=1`` to keep them recorded.

Examples:
    >>> from agentlog.adapters import smolagents as smol
    >>> callable(smol.instrument)
    True
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterator
from typing import Any

import agentlog as al

from ._framework import plain
from ._recording import require

require("smolagents", "smolagents")

__all__ = ["instrument", "record_model", "record_tool"]


def record_model(model: Any) -> Any:
    """Run ``model``'s ``generate`` and ``generate_stream`` inside a window
    ``"smolagents.turn"`` each (in place; returns ``model``; twice does not stack)."""
    if getattr(model, "__agentlog_recorded__", False):
        return model
    generate = model.generate

    @functools.wraps(generate)
    def recorded(messages: Any, *args: Any, **kwargs: Any) -> Any:
        with al.open_window("smolagents.turn", {"messages": plain(messages)}) as turn:
            message = generate(messages, *args, **kwargs)
            turn.close(exit=plain(message))
            return message

    model.generate = recorded
    stream = getattr(model, "generate_stream", None)
    if stream is not None:
        @functools.wraps(stream)
        def recorded_stream(messages: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
            turn = al.open_window("smolagents.turn", {"messages": plain(messages)})
            deltas = []
            try:
                for delta in stream(messages, *args, **kwargs):
                    deltas.append(plain(delta))
                    yield delta
            except GeneratorExit:  # the agent stopped reading (it raised, or broke off)
                turn.fail(al.StreamClosedError(
                    f"the agent closed the model's stream after {len(deltas)} deltas"))
                raise
            except BaseException as exc:
                turn.fail(exc)
                raise
            turn.close(exit=deltas)

        model.generate_stream = recorded_stream
    model.__agentlog_recorded__ = True
    return model


def record_tool(tool: Any) -> Any:
    """Run ``tool``'s ``forward`` as ``al.tool_call`` inside a window
    ``"smolagents.tool.<name>"`` (in place; returns ``tool``; twice does not stack)."""
    if getattr(tool, "__agentlog_recorded__", False):
        return tool
    forward = tool.forward
    signature = inspect.signature(forward)
    params = list(signature.parameters.values())
    if params and params[0].name == "self" and not inspect.ismethod(forward):
        # smolagents' @tool keeps the function with its `self` and calls it without one
        signature = signature.replace(parameters=params[1:])
    name = str(tool.name)

    @functools.wraps(forward)
    def recorded(*args: Any, **kwargs: Any) -> Any:
        try:
            arguments = dict(signature.bind(*args, **kwargs).arguments)
        except TypeError:  # the call will fail as the tool fails: record it as given
            arguments = {"args": list(args), **kwargs}
        sealed = plain(arguments)
        with al.open_window(f"smolagents.tool.{name}", sealed) as window:
            result = al.tool_call(name, sealed, lambda: forward(*args, **kwargs))
            window.close(exit=plain(result))
            return result

    tool.forward = recorded
    tool.__agentlog_recorded__ = True
    return tool


def instrument(agent: Any) -> Any:
    """Record ``agent``'s model turns and tool calls (in place; returns ``agent``)."""
    record_model(agent.model)
    for tool in list(getattr(agent, "tools", {}).values()):
        record_tool(tool)
    return agent
