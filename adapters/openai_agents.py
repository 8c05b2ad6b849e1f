"""The OpenAI Agents SDK (``openai-agents``), recorded: a window per model turn and per tool
call, model calls through the recording transport, tools served under a frozen replay.

Three pieces, each usable alone:

* ``model_provider(client, cache=...)``: for ``RunConfig(model_provider=...)``. The SDK's
  ``OpenAIProvider`` over a wrapped ``AsyncOpenAI`` (``agentlog.adapters.openai.wrap``:
  every model call recorded, and served by the cache), whose models run each turn
  (``get_response`` and ``stream_response``) inside a window ``"agents.turn"`` (entry: the
  model, instructions and input items; exit: the output items).
* ``function_tool(fn)``: the SDK's ``@function_tool`` over ``@al.tool`` in a window
  ``"agents.tool.<name>"``: the call is recorded with its arguments and result, and a
  frozen replay serves the result as the type the function returns.
* ``RecordingHooks``: the SDK's ``RunHooks`` (``Runner.run(..., hooks=...)``), for the
  tools ``function_tool`` does not make: built-in tools (web search, MCP, agents as
  tools) get a window ``"agents.tool.<name>"`` from ``on_tool_start``/``on_tool_end``
  (entry: the call's id, name and arguments; exit: its result). The SDK runs hooks in
  tasks of their own, so a hook's window records the tool's identity and timing, not
  the calls the tool makes (those count into the turn around it).

* ``TracingProcessor``: the SDK's own tracing (``agents.add_trace_processor`` or
  ``agents.set_trace_processors``) as the run's framework identity: each agent span a
  window ``"agents.agent.<name>"`` around its turns (exit: the tools and handoffs it
  had), each handoff a window ``"agents.handoff"`` (entry: the agent handing off; exit:
  the agent it handed to), each guardrail a window ``"agents.guardrail.<name>"`` (exit:
  whether it tripped); a span that ended with an error fails its window. Model and tool
  calls stay with ``model_provider``, ``function_tool`` and ``RecordingHooks`` (the
  processor records none: no call twice).

The SDK traces to OpenAI's uploader by default; offline, replace the processors
(``agents.set_trace_processors([openai_agents.TracingProcessor()])``;
``add_trace_processor`` keeps OpenAI's) or turn tracing off
(``RunConfig(tracing_disabled=True)``, which also stops ``TracingProcessor``).

Examples:
    >>> from agentlog.adapters import openai_agents
    >>> hooks = openai_agents.RecordingHooks()  # Runner.run(agent, input, hooks=hooks)
    >>> type(hooks).__mro__[1].__name__
    'RunHooks'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import agentlog as al

from ._framework import OpenWindows, plain
from ._recording import require

F = TypeVar("F", bound=Callable[..., Any])

_sdk = require("agents", "openai-agents")

__all__ = ["RecordingHooks", "TracingProcessor", "function_tool", "model_provider"]


class _SpanError(Exception):
    """The error an SDK span ended with (its message), failing the span's window."""


class TracingProcessor(_sdk.TracingProcessor):  # type: ignore[misc,name-defined]
    """The SDK's agent, handoff and guardrail spans as windows (module docs).

    The SDK calls a processor where a span starts and ends, in the agent loop's own
    context, so an agent window holds the turns and tools of that agent; windows are
    keyed by span id (parallel runs interleave safely).
    """

    def __init__(self) -> None:
        super().__init__()
        self._windows = OpenWindows()

    def on_trace_start(self, trace: Any) -> None:
        pass

    def on_trace_end(self, trace: Any) -> None:
        pass

    def on_span_start(self, span: Any) -> None:
        data = span.span_data
        kind = getattr(data, "type", None)
        if kind == "agent":
            self._windows.start(span.span_id, f"agents.agent.{data.name}",
                                {"agent": data.name, "output_type": data.output_type})
        elif kind == "handoff":
            self._windows.start(span.span_id, "agents.handoff",
                                {"from_agent": data.from_agent})
        elif kind == "guardrail":
            self._windows.start(span.span_id, f"agents.guardrail.{data.name}",
                                {"guardrail": data.name})

    def on_span_end(self, span: Any) -> None:
        data = span.span_data
        kind = getattr(data, "type", None)
        if kind not in ("agent", "handoff", "guardrail"):
            return
        error = getattr(span, "error", None)
        if error:
            message = error.get("message") if isinstance(error, dict) else str(error)
            self._windows.end(span.span_id, exception=_SpanError(str(message)))
        elif kind == "agent":
            self._windows.end(span.span_id, {"tools": data.tools, "handoffs": data.handoffs})
        elif kind == "handoff":
            self._windows.end(span.span_id, {"to_agent": data.to_agent})
        else:
            self._windows.end(span.span_id, {"triggered": data.triggered})

    def shutdown(self) -> None:
        pass

    def force_flush(self) -> None:
        pass


class RecordingHooks(_sdk.RunHooks):  # type: ignore[misc,name-defined]
    """``RunHooks`` that record each call of a tool ``function_tool`` did not make as a
    window.

    Parallel tool calls are told apart by the SDK's run context and tool call id; an
    ``on_tool_end`` without its start (a hook raised) does nothing.
    """

    def __init__(self) -> None:
        super().__init__()
        self._windows = OpenWindows()

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        if getattr(tool, "__agentlog_tool__", False):
            return  # function_tool records it in its own window
        call_id = getattr(context, "tool_call_id", None)
        self._windows.start(("tool", id(context), call_id, tool.name), f"agents.tool.{tool.name}",
                    {"call_id": call_id, "tool": tool.name,
                     "arguments": getattr(context, "tool_arguments", None)})

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: object) -> None:
        self._windows.end(("tool", id(context), getattr(context, "tool_call_id", None), tool.name),
                  result)


class _TurnModel(_sdk.Model):  # type: ignore[misc,name-defined]
    """A model whose every turn is a window ``agents.turn`` (the SDK's public ``Model``)."""

    def __init__(self, inner: Any, name: str | None) -> None:
        self._inner = inner
        self._name = name

    def _entry(self, system_instructions: str | None, input: Any) -> Any:
        return plain({"model": self._name, "instructions": system_instructions,
                       "input": input})

    async def get_response(self, system_instructions: Any, input: Any, *args: Any,
                           **kwargs: Any) -> Any:
        async with al.open_window("agents.turn", self._entry(system_instructions, input)
                                  ) as turn:
            response = await self._inner.get_response(system_instructions, input, *args,
                                                      **kwargs)
            turn.close(exit=plain(getattr(response, "output", None)))
            return response

    async def stream_response(self, system_instructions: Any, input: Any, *args: Any,
                              **kwargs: Any) -> Any:
        turn = al.open_window("agents.turn", self._entry(system_instructions, input))
        last: Any = None
        try:
            async for event in self._inner.stream_response(system_instructions, input, *args,
                                                           **kwargs):
                last = event
                yield event
        except BaseException as exc:
            turn.fail(exc)
            raise
        response = getattr(last, "response", None)
        turn.close(exit=plain(getattr(response, "output", None)))

    async def close(self) -> None:
        closer = getattr(self._inner, "close", None)
        if closer is not None:
            await closer()

    def __getattr__(self, name: str) -> Any:  # anything else the SDK asks its model
        return getattr(self._inner, name)


class _TurnProvider(_sdk.ModelProvider):  # type: ignore[misc,name-defined]
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def get_model(self, model_name: str | None) -> Any:
        return _TurnModel(self._inner.get_model(model_name), model_name)


def model_provider(client: Any = None, *, cache: Any = None,
                   use_responses: bool | None = None, **wrap_options: Any) -> Any:
    """A ``ModelProvider`` for ``RunConfig(model_provider=...)``: the SDK's
    ``OpenAIProvider`` over ``client`` wrapped by ``adapters.openai.wrap``, each model
    turn in a window ``agents.turn``.

    Args:
        client: an ``openai.AsyncOpenAI`` (default: one made from the environment).
        cache: the model cache (``ModelCache`` or its path) every call goes through.
        use_responses: the SDK's choice of API: True the Responses API, False Chat
            Completions (an OpenAI-compatible server such as vLLM); None the SDK's default.
        wrap_options: ``channel``, ``prices``, ``capture_content`` of ``wrap``.
    """
    from . import openai as openai_adapter

    openai = require("openai", "openai")
    wrapped = openai_adapter.wrap(client if client is not None else openai.AsyncOpenAI(),
                                  cache=cache, **wrap_options)
    return _TurnProvider(_sdk.OpenAIProvider(openai_client=wrapped,
                                             use_responses=use_responses))


def function_tool(fn: F | None = None, *, name: str | None = None, **options: Any) -> Any:
    """``agents.function_tool`` over ``al.tool`` in a window ``agents.tool.<name>``:
    recorded, and served under a frozen replay as the type ``fn`` returns (its return
    annotation). ``options`` go to the SDK's decorator (``name_override`` is ``name``)."""
    def decorate(f: F) -> Any:
        tool_name = name or f.__name__
        recorded = al.window(f"agents.tool.{tool_name}")(al.tool(tool_name)(f))
        made = _sdk.function_tool(recorded, name_override=tool_name, **options)
        made.__agentlog_tool__ = True  # RecordingHooks leaves it to this window
        return made

    return decorate if fn is None else decorate(fn)
