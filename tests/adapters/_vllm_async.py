"""Async-engine vLLM checks, run by tests/adapters/test_vllm_async.py inside the vLLM venv.

``python _vllm_async.py MODEL_DIR WORK_DIR`` starts one ``vllm.AsyncLLMEngine`` on the tiny
model, generates once unwrapped (the reference), then through
``agentlog.adapters.vllm.wrap``: recording only, closed early, DELTA outputs, a cache
(miss, hit, single flight) and a frozen replay from the trace. It prints one JSON line of
observations prefixed with ``RESULT ``; the test decides pass or fail.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any


def _view(output: Any) -> dict[str, Any]:
    o = output.outputs[0]
    return {"text": o.text, "token_ids": list(o.token_ids), "finished": bool(output.finished),
            "request_id": output.request_id, "type": type(output).__name__}


async def main(model_dir: Path, work: Path) -> dict[str, Any]:
    from vllm import AsyncEngineArgs, AsyncLLMEngine, SamplingParams
    from vllm.sampling_params import RequestOutputKind

    import agentlog as al
    from agentlog.adapters import call_options
    from agentlog.adapters import vllm as vllm_adapter
    from agentlog.replay import ModelCache

    engine = AsyncLLMEngine.from_engine_args(AsyncEngineArgs(
        model=str(model_dir), dtype="float32", max_model_len=256, enforce_eager=True, seed=0,
        max_logprobs=-1))
    out: dict[str, Any] = {}
    prompt = "user : which option is right ? A B C D"

    def greedy(**kw: Any) -> Any:
        return SamplingParams(**{"temperature": 0.0, "max_tokens": 6, "logprobs": 3,
                                 "seed": 1, "ignore_eos": True, **kw})

    async def collect(gen: Any) -> list[dict[str, Any]]:
        return [_view(o) async for o in gen]

    yielded: list[tuple[int, dict[str, Any]]] = []
    original = engine.generate

    def spy(*args: Any, **kwargs: Any) -> Any:
        async def gen() -> Any:
            async for output in original(*args, **kwargs):
                yielded.append((id(output), _view(output)))  # what the engine yields, when
                yield output
        return gen()

    async def seen(gen: Any) -> list[Any]:
        return [(id(o), _view(o)) async for o in gen]

    try:
        out["reference"] = await collect(engine.generate(prompt, greedy(), "ref-1"))
        engine.generate = spy
        vllm_adapter.wrap(engine)
        out["outside_run"] = await collect(engine.generate(prompt, greedy(), "out-1"))
        trace = work / "live.zst"

        @al.window("ask", entry=lambda *a, **k: 0, exit=lambda r: 0)
        async def ask() -> None:
            yielded.clear()
            live = await seen(engine.generate(prompt, greedy(), "live-1"))
            out["live_same_objects"] = live == yielded
            out["live"] = [view for _, view in live]
            gen = engine.generate(prompt, greedy(), "early-1")
            first = await gen.__anext__()
            out["early_first"] = _view(first)
            await gen.aclose()
            out["after_close"] = await collect(engine.generate(prompt, greedy(), "after-1"))
            out["delta"] = await collect(engine.generate(
                prompt, greedy(output_kind=RequestOutputKind.DELTA), "delta-1"))

        with al.record(trace, seed=1):
            await ask()
        calls = al.read(trace).llm_calls()
        out["live_records"] = [_record(c) for c in calls]

        cache = ModelCache(work / "cache.sqlite3")
        vllm_adapter.wrap(engine, cache=cache)
        cached_trace = work / "cached.zst"

        @al.window("ask", entry=lambda *a, **k: 0, exit=lambda r: 0)
        async def ask_cached() -> None:
            out["miss"] = await collect(engine.generate(prompt, greedy(), "miss-1"))
            out["hit"] = await collect(engine.generate(prompt, greedy(), "hit-1"))
            with call_options(draw=3):
                before = cache.stats()["upstream_calls"]
                flights = await asyncio.gather(*[collect(engine.generate(
                    prompt, greedy(), f"flight-{i}")) for i in range(4)])
                out["flight_upstream"] = cache.stats()["upstream_calls"] - before
                out["flight_finals"] = [f[-1]["text"] for f in flights]

        with al.record(cached_trace, seed=1):
            await ask_cached()
        out["cache_stats"] = cache.stats()
        cache.close()
        out["cached_records"] = [_record(c) for c in al.read(cached_trace).llm_calls()]

        # Frozen replay: served from the recorded trace, the engine never asked.
        vllm_adapter.wrap(engine, cache=ModelCache.from_traces([cached_trace]))
        out["frozen"] = await collect(engine.generate(prompt, greedy(), "frozen-1"))
        try:
            await collect(engine.generate(prompt, greedy(max_tokens=2), "frozen-2"))
            out["frozen_miss"] = None
        except al.CacheMiss as exc:
            out["frozen_miss"] = str(exc)
    finally:
        engine.shutdown()
    return out


def _record(call: Any) -> dict[str, Any]:
    import msgspec

    body = msgspec.msgpack.decode(call.response) if call.response else None
    return {"provider": call.provider, "status": call.status, "error_type": call.error_type,
            "error_message": call.error_message, "output_tokens": call.output_tokens,
            "input_tokens": call.input_tokens, "fingerprint": call.fingerprint,
            "text": None if not body else body["outputs"][0]["text"],
            "token_ids": None if not body else body["outputs"][0]["token_ids"],
            "finished": None if not body else body["finished"],
            "logprob_rows": None if not body or body["outputs"][0]["logprobs"] is None
            else len(body["outputs"][0]["logprobs"]),
            "cache_key": None if call.cache_key is None else call.cache_key.hex()}


if __name__ == "__main__":  # vLLM's engine processes re-import this module: keep the guard
    result = asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2])))
    print("RESULT " + json.dumps(result), flush=True)
