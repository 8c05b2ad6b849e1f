"""A smolagents tool and a scripted model (smolagents reads a tool's source: a module)."""

from __future__ import annotations

import json
from typing import Any

from smolagents import tool
from smolagents.models import (
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    Model,
)

CALLS: list[str] = []


@tool
def get_weather(city: str) -> str:
    """The weather of a city.

    Args:
        city: the city.
    """
    CALLS.append(city)
    return f"{city}: sunny"


class ScriptedModel(Model):
    """Calls get_weather, then gives the final answer."""

    def __init__(self) -> None:
        super().__init__(model_id="scripted")
        self.turns = 0

    def generate(self, messages: Any, stop_sequences: Any = None, response_format: Any = None,
                 tools_to_call_from: Any = None, **kwargs: Any) -> ChatMessage:
        self.turns += 1
        name, arguments = (("get_weather", {"city": "Oslo"}) if self.turns == 1
                           else ("final_answer", {"answer": "sunny in Oslo"}))
        return ChatMessage(role=MessageRole.ASSISTANT, content=None, tool_calls=[
            ChatMessageToolCall(id=f"call_{self.turns}", type="function",
                                function=ChatMessageToolCallFunction(name=name,
                                                                     arguments=arguments))])


class StreamingModel(ScriptedModel):
    """ScriptedModel's turns, streamed: the tool call arrives as two deltas (its name,
    then its arguments), as a provider streams it."""

    def generate_stream(self, messages: Any, stop_sequences: Any = None,
                        response_format: Any = None, tools_to_call_from: Any = None,
                        **kwargs: Any) -> Any:
        from smolagents.models import ChatMessageStreamDelta, ChatMessageToolCallStreamDelta
        from smolagents.monitoring import TokenUsage

        whole = ScriptedModel.generate(self, messages)  # not the recorded wrapper
        (call,) = whole.tool_calls
        yield ChatMessageStreamDelta(tool_calls=[ChatMessageToolCallStreamDelta(
            index=0, id=call.id, type="function",
            function=ChatMessageToolCallFunction(name=call.function.name, arguments=""))])
        yield ChatMessageStreamDelta(
            tool_calls=[ChatMessageToolCallStreamDelta(
                index=0, function=ChatMessageToolCallFunction(
                    name="", arguments=json.dumps(call.function.arguments)))],
            token_usage=TokenUsage(input_tokens=3, output_tokens=2))
