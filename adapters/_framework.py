"""What the framework adapters share: framework values as plain data, and the windows a
framework's start/end hooks open and close by the framework's call id."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import agentlog as al

__all__ = ["OpenWindows", "plain"]


def plain(value: Any) -> Any:
    """A framework value as plain data a window can seal: pydantic models and objects
    with ``model_dump``/``toDict`` (DSPy)/``dict`` (smolagents) by what they dump,
    dataclasses by their fields, containers element by element, anything else (a
    datetime, LangChain's ``TextAccessor``) by its text."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    for method in ("model_dump", "toDict", "dict"):
        dump = getattr(value, method, None)
        if callable(dump):
            try:
                return plain(dump(mode="json") if method == "model_dump" else dump())
            except Exception:  # a value that cannot dump itself: its text stands for it
                return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return str(value)


class OpenWindows:
    """Windows opened by a framework's start hook and ended by its end hook, by the call
    id the framework gives both (thread-safe: hooks of parallel calls interleave)."""

    def __init__(self) -> None:
        self._open: dict[Any, al.WindowHandle] = {}
        self._lock = threading.Lock()

    def start(self, key: Any, name: str, entry: Any) -> None:
        handle = al.open_window(name, plain(entry))
        with self._lock:
            self._open[key] = handle

    def end(self, key: Any, exit: Any = None, exception: BaseException | None = None) -> None:
        """Close the window of ``key`` with ``exit``, or fail it with ``exception``; an end
        without its start (a hook that raised) does nothing."""
        with self._lock:
            handle = self._open.pop(key, None)
        if handle is None:
            return
        if exception is not None:
            handle.fail(exception)
        else:
            handle.close(exit=plain(exit))
