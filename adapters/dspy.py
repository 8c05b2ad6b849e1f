"""DSPy programs, recorded: a callback that makes each module call and tool call a window
and each LM call an ``LLMCall``.

``RecordingCallback`` is a DSPy ``BaseCallback`` (``dspy.configure(callbacks=[...])``):

* each module call (``Predict``, ``ChainOfThought``, your ``dspy.Module``) is a window
  ``"dspy.module.<class>"`` (entry: its inputs; exit: its outputs, or the failure of its
  exception), each tool call a window ``"dspy.tool.<name>"``;
* each LM call is an ``LLMCall`` of the window around it (provider ``dspy.<provider>``,
  the model, the messages and settings sent, the completions returned, its latency).

DSPy calls callbacks in the caller's thread and context, so what a module does counts
into its window. DSPy's LMs reach providers through their own engines (lm15, litellm),
not through agentlog's HTTP transport: their calls are recorded here but not served by
agentlog's exact-input cache. A cache-backed DSPy LM needs DSPy's engine API
(``dspy.LM(engine=...)``, replacing ``BaseLM.forward``, deprecated in DSPy 3.4).

Example:
    >>> from agentlog.adapters.dspy import RecordingCallback
    >>> RecordingCallback().__class__.__mro__[1].__name__
    'BaseCallback'
"""

from __future__ import annotations

import threading
import time
from typing import Any

import agentlog as al

from ._recording import require

_callback = require("dspy.utils.callback", "dspy")

__all__ = ["RecordingCallback"]


def _plain(value: Any) -> Any:
    """A DSPy value as plain data: a ``Prediction`` by its fields, models dumped."""
    to_dict = getattr(value, "toDict", None)
    if callable(to_dict):
        try:
            return _plain(to_dict())
        except Exception:  # a value that cannot list itself: its text stands for it
            return str(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return _plain(dump(mode="json"))
        except Exception:
            return str(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


class RecordingCallback(_callback.BaseCallback):  # type: ignore[misc,name-defined]
    """Records each DSPy module and tool call as a window, each LM call as an ``LLMCall``
    (module docs)."""

    def __init__(self) -> None:
        super().__init__()
        self._open: dict[str, al.WindowHandle] = {}
        self._lm: dict[str, tuple[Any, Any, int]] = {}
        self._lock = threading.Lock()

    def _start(self, call_id: str, name: str, inputs: Any) -> None:
        handle = al.open_window(name, _plain(inputs))
        with self._lock:
            self._open[call_id] = handle

    def _end(self, call_id: str, outputs: Any, exception: BaseException | None) -> None:
        with self._lock:
            handle = self._open.pop(call_id, None)
        if handle is None:
            return
        if exception is not None:
            handle.fail(exception)
        else:
            handle.close(exit=_plain(outputs))

    def on_module_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        # DSPy hands a module call's arguments as {"args": [...], "kwargs": {...}}: the
        # entry is the keyword arguments a program passes (positional ones kept beside).
        if set(inputs) == {"args", "kwargs"} and isinstance(inputs["kwargs"], dict):
            args = list(inputs["args"] or ())
            inputs = {**({"args": args} if args else {}), **inputs["kwargs"]}
        self._start(call_id, f"dspy.module.{type(instance).__name__}", inputs)

    def on_module_end(self, call_id: str, outputs: Any | None,
                      exception: BaseException | None = None) -> None:
        self._end(call_id, outputs, exception)

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        with self._lock:
            self._lm[call_id] = (instance, _plain(inputs), time.perf_counter_ns())

    def on_lm_end(self, call_id: str, outputs: Any | None,
                  exception: BaseException | None = None) -> None:
        with self._lock:
            started = self._lm.pop(call_id, None)
        if started is None:
            return
        instance, inputs, t0 = started
        model = str(getattr(instance, "model", None) or type(instance).__name__)
        provider = model.partition("/")[0] if "/" in model else "dspy"
        al.llm_call(f"dspy.{provider}", model, request=inputs,
                    response=None if exception is not None else {"outputs": _plain(outputs)},
                    latency_ns=time.perf_counter_ns() - t0, error=exception)

    def on_tool_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        name = getattr(instance, "name", None) or type(instance).__name__
        self._start(call_id, f"dspy.tool.{name}", inputs)

    def on_tool_end(self, call_id: str, outputs: Any | None,
                    exception: BaseException | None = None) -> None:
        self._end(call_id, outputs, exception)
