"""Captured content in the OpenTelemetry GenAI message-list format.

``gen_ai.input.messages`` / ``gen_ai.output.messages`` are lists of messages, each a
``role`` and a list of typed ``parts`` (``text`` with its ``content``, ``tool_call`` with
``id``/``name``/``arguments``, ``tool_call_response`` with ``id``/``response``), and an
output message's ``finish_reason``. These functions read a stored request or response of
the shapes agentlog records (OpenAI Chat, Completions and Responses; Anthropic Messages;
an adapter's canonical request with its ``request`` inside) and return None for any
other shape, where the span then carries the stored JSON as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["input_messages", "output_messages"]

_TEXT = frozenset({"text", "input_text", "output_text"})


def _tool_call(call: Mapping[str, Any]) -> dict[str, Any]:
    function = call.get("function")
    if isinstance(function, Mapping):  # OpenAI Chat
        return {"type": "tool_call", "id": call.get("id"), "name": function.get("name"),
                "arguments": function.get("arguments")}
    return {"type": "tool_call", "id": call.get("call_id") or call.get("id"),
            "name": call.get("name"), "arguments": call.get("arguments", call.get("input"))}


def _parts(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    if not isinstance(content, list):
        return [{"type": "text", "content": str(content)}]
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, str):
            parts.append({"type": "text", "content": block})
        elif isinstance(block, Mapping):
            kind = block.get("type")
            if kind in _TEXT:
                parts.append({"type": "text", "content": block.get("text", "")})
            elif kind in ("tool_use", "function_call"):
                parts.append(_tool_call(block))
            elif kind == "tool_result":
                parts.append({"type": "tool_call_response", "id": block.get("tool_use_id"),
                              "response": block.get("content")})
            else:  # images, audio, thinking...: their own type, their fields as stored
                parts.append({**{k: v for k, v in block.items() if k != "type"},
                              "type": str(kind)})
    return parts


def _message(item: Mapping[str, Any]) -> dict[str, Any]:
    kind = item.get("type")
    if item.get("role") == "tool" or kind == "function_call_output":
        return {"role": "tool", "parts": [{
            "type": "tool_call_response", "id": item.get("tool_call_id") or item.get("call_id"),
            "response": item.get("content", item.get("output"))}]}
    if kind == "function_call":
        return {"role": "assistant", "parts": [_tool_call(item)]}
    parts = _parts(item.get("content"))
    parts += [_tool_call(c) for c in item.get("tool_calls") or () if isinstance(c, Mapping)]
    return {"role": str(item.get("role") or "user"), "parts": parts}


def input_messages(request: Any) -> list[dict[str, Any]] | None:
    """The messages a stored request sent, or None for a shape it does not know."""
    if not isinstance(request, Mapping):
        return None
    inner = request.get("request")
    req = inner if isinstance(inner, Mapping) else request
    out: list[dict[str, Any]] = []
    system = req.get("system", req.get("instructions"))
    if system:
        out.append({"role": "system", "parts": _parts(system)})
    messages = req.get("messages")
    if messages is None:
        given = req.get("input", req.get("prompt"))
        messages = [{"role": "user", "content": given}] if isinstance(given, str) else given
    if not isinstance(messages, list):
        return out or None
    out += [_message(m) for m in messages if isinstance(m, Mapping)]
    return out


def _output(parts: list[dict[str, Any]], finish: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "parts": parts}
    if finish is not None:
        message["finish_reason"] = str(finish)
    return message


def output_messages(response: Any) -> list[dict[str, Any]] | None:
    """The messages a stored response returned, or None for a shape it does not know."""
    if not isinstance(response, Mapping):
        return None
    choices = response.get("choices")
    if isinstance(choices, list):  # OpenAI Chat and Completions
        out = []
        for choice in choices:
            if not isinstance(choice, Mapping):
                continue
            message = choice.get("message")
            if isinstance(message, Mapping):
                parts = _parts(message.get("content"))
                parts += [_tool_call(c) for c in message.get("tool_calls") or ()
                          if isinstance(c, Mapping)]
            else:
                parts = _parts(choice.get("text"))
            out.append(_output(parts, choice.get("finish_reason")))
        return out
    if response.get("type") == "message" and isinstance(response.get("content"), list):
        return [_output(_parts(response["content"]), response.get("stop_reason"))]
    output = response.get("output")
    if isinstance(output, list):  # OpenAI Responses
        parts = []
        for item in output:
            if isinstance(item, Mapping) and item.get("type") == "message":
                parts += _parts(item.get("content"))
            elif isinstance(item, Mapping) and item.get("type") == "function_call":
                parts.append(_tool_call(item))
        return [_output(parts, response.get("status"))]
    return None
