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

Examples:
    >>> from agentlog.adapters.dspy import RecordingCallback
    >>> RecordingCallback().__class__.__mro__[1].__name__
    'BaseCallback'
"""

from __future__ import annotations

import threading
import time
from typing import Any

import agentlog as al

from ._framework import OpenWindows, plain
from ._recording import require

_callback = require("dspy.utils.callback", "dspy")

__all__ = ["RecordingCallback"]


class RecordingCallback(_callback.BaseCallback):  # type: ignore[misc,name-defined]
    """Records each DSPy module and tool call as a window, each LM call as an ``LLMCall``
    (module docs)."""

    def __init__(self) -> None:
        super().__init__()
        self._windows = OpenWindows()
        self._lm: dict[str, tuple[Any, Any, int]] = {}
        self._lock = threading.Lock()

    def on_module_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        # DSPy hands a module call's arguments as {"args": [...], "kwargs": {...}}: the
        # entry is the keyword arguments a program passes (positional ones kept beside).
        if set(inputs) == {"args", "kwargs"} and isinstance(inputs["kwargs"], dict):
            args = list(inputs["args"] or ())
            inputs = {**({"args": args} if args else {}), **inputs["kwargs"]}
        self._windows.start(call_id, f"dspy.module.{type(instance).__name__}", inputs)

    def on_module_end(self, call_id: str, outputs: Any | None,
                      exception: BaseException | None = None) -> None:
        self._windows.end(call_id, outputs, exception)

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        with self._lock:
            self._lm[call_id] = (instance, plain(inputs), time.perf_counter_ns())

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
                    response=None if exception is not None else {"outputs": plain(outputs)},
                    latency_ns=time.perf_counter_ns() - t0, error=exception)

    def on_tool_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        name = getattr(instance, "name", None) or type(instance).__name__
        self._windows.start(call_id, f"dspy.tool.{name}", inputs)

    def on_tool_end(self, call_id: str, outputs: Any | None,
                    exception: BaseException | None = None) -> None:
        self._windows.end(call_id, outputs, exception)
