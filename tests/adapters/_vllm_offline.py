"""Offline vLLM checks, run by tests/adapters/test_vllm_offline.py inside the vLLM venv.

``python _vllm_offline.py MODEL_DIR WORK_DIR`` loads the tiny model once, exercises
``agentlog.adapters.vllm.wrap`` (generate, chat, cache hits and misses, choice_probs, a
frozen replay from the recorded trace) and prints one JSON line of observations prefixed
with ``RESULT `` for the test to check. The test, not this script, decides pass or fail.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any


def main(model_dir: Path, work: Path) -> dict[str, Any]:
    from vllm import LLM, SamplingParams

    import agentlog as al
    from agentlog.adapters import choice_probs
    from agentlog.adapters import vllm as vllm_adapter
    from agentlog.replay import ModelCache

    option_ids = json.loads((model_dir / "agentlog_tiny.json").read_text())["option_ids"]
    llm = LLM(model=str(model_dir), dtype="float32", max_model_len=256, enforce_eager=True,
              seed=0, max_logprobs=-1)
    engine_prompts: list[int] = []
    chat_prompts: list[int] = []

    def spy(method: Any, seen: list[int]) -> Any:
        def engine(prompts: Any, sampling_params: Any = None, **kwargs: Any) -> Any:
            seen.append(len(prompts))  # how many prompts reached the engine
            return method(prompts, sampling_params, **kwargs)
        return engine

    llm.generate = spy(llm.generate, engine_prompts)  # type: ignore[method-assign]
    llm.chat = spy(llm.chat, chat_prompts)  # type: ignore[method-assign]
    cache = ModelCache(work / "cache.sqlite3")
    vllm_adapter.wrap(llm, cache=cache)
    greedy = SamplingParams(temperature=0.0, max_tokens=3, logprobs=20, seed=1)
    labels_sp = SamplingParams(temperature=0.0, max_tokens=1,
                               logprob_token_ids=list(option_ids.values()))
    everything = SamplingParams(temperature=0.0, max_tokens=1, logprobs=-1)
    prompts = ["user : which option is right ? A B C D", "the quick brown fox",
               "hello world , tell me"]
    out: dict[str, Any] = {}
    trace = work / "run.zst"

    @al.window("answer")
    def answer() -> None:
        first = llm.generate(prompts[:2], greedy)
        out["first_engine_batches"] = list(engine_prompts)
        again = llm.generate(prompts[:2], greedy)
        out["again_engine_batches"] = list(engine_prompts)
        out["same_text"] = [a.outputs[0].text == b.outputs[0].text
                            for a, b in zip(first, again, strict=True)]
        out["same_token_ids"] = [list(a.outputs[0].token_ids) == list(b.outputs[0].token_ids)
                                 for a, b in zip(first, again, strict=True)]
        out["same_logprobs"] = [
            [{k: v.logprob for k, v in pos.items()} for pos in a.outputs[0].logprobs]
            == [{k: v.logprob for k, v in pos.items()} for pos in b.outputs[0].logprobs]
            for a, b in zip(first, again, strict=True)]
        out["hit_type"] = type(again[0]).__name__
        mixed = llm.generate([prompts[0], prompts[2]], greedy)  # one hit, one miss
        out["mixed_engine_batches"] = list(engine_prompts)
        out["mixed_texts"] = [m.outputs[0].text for m in mixed]
        single = llm.generate(prompts[2], greedy)  # a bare string prompt, now a hit
        out["single_is_list"] = isinstance(single, list) and len(single) == 1
        with vllm_adapter_call_options(draw=1):
            llm.generate(prompts[0], greedy)  # a second draw is a new entry
        out["draw_engine_batches"] = list(engine_prompts)

        conv = [{"role": "user", "content": "which option is right ? A B C D"}]
        chat1 = llm.chat(conv, greedy)
        chat2 = llm.chat(conv, greedy)
        out["chat_prompt"] = chat1[0].prompt
        out["chat_same"] = chat1[0].outputs[0].text == chat2[0].outputs[0].text
        out["chat_engine_batches"] = list(chat_prompts)

        by_ids = llm.generate(prompts[0], labels_sp)
        full = llm.generate(prompts[0], everything)
        cp = choice_probs(by_ids[0], [int(i) for i in option_ids.values()])
        cp_text = vllm_adapter.choice_probs_from_vllm(by_ids[0], list(option_ids),
                                                      complete=True)
        cp_top = choice_probs(first[0], list(option_ids))
        dist = {tid: math.exp(lp.logprob) for tid, lp in full[0].outputs[0].logprobs[0].items()}
        truth = [dist[int(i)] for i in option_ids.values()]
        out["choice"] = {
            "probs": [float(p) for p in cp.probs], "sum": float(cp.probs.sum()),
            "unobserved_mass": cp.unobserved_mass, "label_mass": cp.label_mass,
            "missing": list(cp.missing), "position": cp.position, "source": cp.source,
            "text_probs": [float(p) for p in cp_text.probs],
            "text_missing_bound": cp_text.missing_bound,
            "truth_probs": [t / sum(truth) for t in truth], "truth_mass": sum(truth),
            "vocab_listed": len(dist), "vocab_mass": sum(dist.values()),
            "top_sum": float(cp_top.probs.sum()), "top_unobserved": cp_top.unobserved_mass,
            "top_missing": list(cp_top.missing),
        }
        chosen = al.select(cp, candidates=list(option_ids), name="option", owner="model")
        out["selected"] = chosen

    from agentlog.testing import capture_spans

    with capture_spans() as captured, al.record(trace, system="vllm-offline", seed=7,
                                                task="t1"):
        answer()
    spans = captured.spans
    by_id = {s.context.span_id: s for s in spans}
    model_spans = [s for s in spans if s.name.startswith(("text_completion ", "chat "))]
    out["spans"] = [{"name": s.name, "kind": s.kind.name,
                     "parent": by_id[s.parent.span_id].name if s.parent
                     and s.parent.span_id in by_id else None,
                     "provider": s.attributes.get("gen_ai.provider.name"),
                     "operation": s.attributes.get("gen_ai.operation.name"),
                     "cache": s.attributes.get("agentlog.cache"),
                     "has_key": "agentlog.cache_key" in s.attributes,
                     "input_tokens": s.attributes.get("gen_ai.usage.input_tokens")}
                    for s in model_spans]
    out["model_name"] = str(model_dir)
    cache.close()
    calls = al.read(trace).llm_calls()
    out["records"] = [{"provider": c.provider, "model": c.model, "fingerprint": c.fingerprint,
                       "input_tokens": c.input_tokens, "output_tokens": c.output_tokens,
                       "has_key": c.cache_key is not None, "status": c.status}
                      for c in calls]
    windows = al.read(trace).windows("answer")
    out["window_llm_calls"] = len([c for c in calls if c.window == windows[0].window])

    # Frozen replay: a fresh engine wrapper served only from the recorded trace.
    engine_prompts.clear()
    vllm_adapter.wrap(llm, cache=ModelCache.from_traces([trace]))
    replayed = llm.generate(prompts[:2], greedy)
    out["frozen_engine_batches"] = list(engine_prompts)
    out["frozen_texts_match"] = [r.outputs[0].text for r in replayed] == [
        c["outputs"][0]["text"] for c in _bodies(calls[:2])]
    try:
        llm.generate(prompts[0], SamplingParams(temperature=0.5, max_tokens=3, logprobs=20,
                                                seed=1))
        out["frozen_miss"] = None
    except al.CacheMiss as exc:
        out["frozen_miss"] = {"message": str(exc), "differences": list(exc.differences)}
    out["frozen_miss_engine_batches"] = list(engine_prompts)
    return out


def vllm_adapter_call_options(**kwargs: Any) -> Any:
    from agentlog.adapters import call_options

    return call_options(**kwargs)


def _bodies(calls: Any) -> list[dict[str, Any]]:
    import msgspec

    return [msgspec.msgpack.decode(c.response) for c in calls]


if __name__ == "__main__":  # vLLM's engine processes re-import this module: keep the guard
    result = main(Path(sys.argv[1]), Path(sys.argv[2]))
    print("RESULT " + json.dumps(result), flush=True)
