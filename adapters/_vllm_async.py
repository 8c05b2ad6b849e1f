"""vLLM's async engine (``vllm.AsyncLLMEngine``, which is ``vllm.v1.engine.AsyncLLM``).

``AsyncLLM.generate(prompt, sampling_params, request_id, ...)`` returns an async generator
of ``RequestOutput``s, one per engine step, the last one ``finished``. The wrapped method
returns an async generator too:

* recording only (no cache): each output is passed to the caller as the engine yields it
  (same objects, same order, no buffering); the call is recorded once, when the generator
  ends (the final output), fails, or is closed early (what was received, marked with
  ``StreamClosedError``). With ``output_kind=DELTA`` the deltas are joined into the body a
  cumulative request would end with.
* with a cache: the generator yields one ``RequestOutput``, the final one. A miss runs the
  request to its end and stores its final output (the engine's own final object is
  yielded); a hit yields the stored final output, rebuilt, with the caller's
  ``request_id``. Concurrent identical requests share one engine request. (The
  intermediate outputs are not replayed: vLLM updates them in place, so by the end of
  the request they no longer show their step.)

The cache key is the same as ``LLM.generate``'s for the same prompt and sampling
parameters (provider ``vllm.generate``), so an offline run and a served run share entries.
``request_id``, ``trace_headers``, ``priority``, ``data_parallel_rank``, ``session_id``
and ``kv_hints`` name, route or schedule the request and are not part of the key.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from agentlog import StreamClosedError

from ._recording import CallOptions, Config

# Keyword arguments of AsyncLLM.generate that never change the content of the output.
_NOT_CONTENT = frozenset({"request_id", "trace_headers", "priority", "data_parallel_rank",
                          "session_id", "kv_hints"})


def wrap_generate(engine: Any, config: Config, info: Mapping[str, Any],
                  key_of: Callable[..., Any], to_body: Callable[[Any, Mapping[str, Any]],
                                                                dict[str, Any]],
                  rebuild: Callable[[Mapping[str, Any]], Any],
                  record: Callable[..., None]) -> None:
    """Replace ``engine.generate`` by a recording, caching async generator function.

    ``key_of``, ``to_body``, ``rebuild`` and ``record`` are the offline adapter's own (one
    key, one body format and one record shape for offline and async calls).
    """
    from . import _recording

    original = engine.generate
    original = getattr(original, "__wrapped__", original)  # wrapping twice never stacks

    def generate(prompt: Any, sampling_params: Any = None, request_id: Any = None,
                 *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        if args or _recording.bypassed(config.cache):
            return original(prompt, sampling_params, request_id, *args, **kwargs)  # type: ignore[no-any-return]
        options = _recording._options.get() or CallOptions()
        channel = options.channel if options.channel is not None else config.channel
        keyed = {k: v for k, v in kwargs.items() if k not in _NOT_CONTENT}
        key = key_of("vllm.generate", info, prompt, sampling_params, keyed, options, channel,
                     chat=False)
        call = _AsyncCall(config, info, key, to_body, record, _is_delta(sampling_params))
        call.request_id = request_id
        def run() -> AsyncIterator[Any]:
            return original(prompt, sampling_params, request_id, **kwargs)  # type: ignore[no-any-return]

        if config.cache is not None and config.cache.mode != "off":
            return _cached(run, call, rebuild)
        return _live(run(), call)

    generate.__wrapped__ = original  # type: ignore[attr-defined]
    generate.__doc__ = original.__doc__
    engine.generate = generate


def _is_delta(sampling_params: Any) -> bool:
    kind = getattr(sampling_params, "output_kind", None)
    return getattr(kind, "name", None) == "DELTA"


class _AsyncCall:
    """One async request: its key, clock and outputs so far; records itself once."""

    def __init__(self, config: Config, info: Mapping[str, Any], key: Any,
                 to_body: Callable[[Any, Mapping[str, Any]], dict[str, Any]],
                 record: Callable[..., None], delta: bool) -> None:
        self.config, self.info, self.key = config, info, key
        self.to_body, self._record, self.delta = to_body, record, delta
        self.t0 = time.perf_counter_ns()
        self.body: dict[str, Any] | None = None
        self.items = 0
        self.done = False
        self.request_id: Any = None
        # The generator may be finalised by asyncio's async-generator hook, in a task that
        # does not carry the caller's run: the record is made in the caller's context.
        self.context = contextvars.copy_context()

    def add(self, output: Any) -> None:
        self.items += 1
        body = self.to_body(output, self.info)
        self.body = body if not self.delta or self.body is None else _join(self.body, body)

    def finish(self, status: str | None, error: BaseException | None = None) -> None:
        if self.done:
            return
        self.done = True
        self.context.run(self._record, "vllm.generate", "text_completion", self.config,
                         self.info, self.key, self.body, status, error, self.t0)

    def closed_early(self) -> None:
        self.finish(None, StreamClosedError(
            f"the caller closed the stream after {self.items} item(s), before its end"))


def _join(into: dict[str, Any], delta: Mapping[str, Any]) -> dict[str, Any]:
    """A DELTA output appended to the accumulated body (text, ids and logprobs extend)."""
    out = {**into, "finished": delta["finished"]}
    slots = {o["index"]: dict(o) for o in into["outputs"]}
    for o in delta["outputs"]:
        old = slots.get(o["index"])
        if old is None:
            slots[o["index"]] = dict(o)
            continue
        old["text"] += o["text"]
        old["token_ids"] = [*old["token_ids"], *o["token_ids"]]
        if o["logprobs"] is not None:
            old["logprobs"] = [*(old["logprobs"] or []), *o["logprobs"]]
        for name in ("cumulative_logprob", "finish_reason", "stop_reason"):
            old[name] = o[name]
    out["outputs"] = [slots[i] for i in sorted(slots)]
    return out


async def _live(inner: AsyncIterator[Any], call: _AsyncCall) -> AsyncIterator[Any]:
    try:
        async for output in inner:
            call.add(output)
            yield output
    except GeneratorExit:
        call.closed_early()
        raise
    except BaseException as exc:  # CancelledError too: the engine aborts, we record it
        call.finish(None, exc)
        raise
    finally:
        # Closing the engine's generator is what makes vLLM abort an unfinished request.
        aclose = getattr(inner, "aclose", None)
        if aclose is not None:
            await aclose()
    call.finish(None)


async def _cached(run: Callable[[], AsyncIterator[Any]], call: _AsyncCall,
                  rebuild: Callable[[Mapping[str, Any]], Any]) -> AsyncIterator[Any]:
    produced: list[Any] = []

    async def fetch() -> dict[str, Any]:
        async for output in run():
            produced.append(output)
            call.add(output)
        if call.body is None:
            raise RuntimeError("the vLLM engine produced no output for this request")
        return call.body

    try:
        served = await call.config.cache.acall(call.key, fetch)
    except BaseException as exc:
        call.finish("miss", exc)
        raise
    call.body = served.response
    call.finish(served.status)
    if produced:
        # vLLM updates a cumulative request's output objects in place as it goes, so the
        # earlier ones, held until the request ended, no longer show their step: the
        # caller gets the final output alone, as on a hit.
        yield produced[-1]
        return
    output = rebuild(served.response)
    if call.request_id is not None:
        output.request_id = call.request_id  # the caller's id, not the recorded one's
    yield output
