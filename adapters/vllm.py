"""Record and cache the offline calls of a ``vllm.LLM`` engine (``generate`` and ``chat``).

``wrap(llm)`` returns the same engine with ``generate`` and ``chat`` recording every prompt
of a batch as its own ``LLMCall`` in the current window (request, output text and token
ids, usage, latency, sampled logprobs, serving fingerprint ``vllm-<version>-<dtype>-
<revision>``), counted into the window and emitted as an INTERNAL span (the engine runs
in-process). With ``cache=ModelCache(...)`` each prompt has its own exact-input key: hits
are served from the cache and only the missing prompts go to the engine, in one batch.
A served hit is a ``vllm.RequestOutput`` rebuilt from the stored body.

The async engine (``vllm.AsyncLLMEngine``, i.e. ``AsyncLLM``) is wrapped too: its
``generate`` stays an async generator of outputs, passed through as the engine yields them,
and the final output is recorded when the generator ends, fails or is closed early; under
a cache it yields the final output alone, fetched (a miss) or stored (a hit).

For vLLM's OpenAI-compatible server use ``agentlog.adapters.openai.wrap`` with its
``base_url``; ``choice_probs_from_vllm`` reads candidate vectors from both.

Example (needs vLLM and a model; see docs/how-to/model-adapters.md)::

    from vllm import LLM, SamplingParams
    from agentlog.adapters import vllm as vllm_adapter
    from agentlog.replay import ModelCache

    llm = vllm_adapter.wrap(LLM(model="my-model"), cache=ModelCache("runs/cache.sqlite3"))
    out = llm.generate(["Answer A-D: ..."], SamplingParams(max_tokens=1, logprobs=20))
    probs = vllm_adapter.choice_probs_from_vllm(out[0], ["A", "B", "C", "D"])
"""

from __future__ import annotations

import enum
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import agentlog as al

from . import _recording
from ._choice import ChoiceProbs, choice_probs_from_positions
from ._observed import observing
from ._recording import CallOptions, Config, Prices, require

__all__ = ["choice_probs_from_vllm", "wrap"]

LLMT = TypeVar("LLMT")

# SamplingParams fields that say how results are delivered or bookkept, never what they are.
_SP_SKIP = frozenset({"output_kind", "skip_clone", "detokenize"})


class _NeedsEngine(Exception):
    """Raised inside a cache lookup: this prompt must be generated (never stored)."""


def wrap(llm: LLMT, *, cache: Any = None, channel: str | None = None,
         prices: Prices | None = None, capture_content: bool = False) -> LLMT:
    """Record (and, with ``cache``, serve from the exact-input cache) every offline call.

    Args:
        llm: a ``vllm.LLM``, or the async engine ``vllm.AsyncLLMEngine`` (``AsyncLLM``,
            whose ``generate`` is then wrapped; see below); modified in place and returned.
        cache: an ``agentlog.replay.ModelCache`` every prompt goes through, the path of its
            SQLite file (opened as ``ModelCache(path)``, read-write), or None.
        channel: the evaluation channel id these calls serve (part of the cache key);
            ``agentlog.adapters.call_options`` overrides it per call.
        prices: ``{model: (USD per 1M input tokens, USD per 1M output tokens)}``.
        capture_content: put prompts and outputs on the spans (off by default).

    Raises:
        agentlog.MissingDependencyError: vLLM is not installed.
        TypeError: ``llm`` is neither a ``vllm.LLM`` nor a ``vllm.AsyncLLMEngine``, or
            ``cache`` is neither a ``ModelCache``, a path nor None.
        ValueError: ``cache`` is a path but not of a model cache (a folder, another file).
    """
    sdk = require("vllm", "vllm")
    config = Config(cache=cache, channel=channel, prices=prices,
                    capture_content=capture_content)
    async_engine = getattr(sdk, "AsyncLLMEngine", None)
    if async_engine is not None and isinstance(llm, async_engine):
        from ._vllm_async import wrap_generate

        wrap_generate(llm, config, _engine_info(llm.model_config, sdk), _key, _to_body,
                      _rebuild, _record)
        return llm
    if not isinstance(llm, sdk.LLM):
        raise TypeError(f"`llm` must be a vllm.LLM or vllm.AsyncLLMEngine; found "
                        f"{type(llm).__qualname__}. For vLLM's OpenAI-compatible server use "
                        "agentlog.adapters.openai.wrap")
    engine = _engine_info(llm.llm_engine.model_config, sdk)
    for name, provider, operation in (("generate", "vllm.generate", "text_completion"),
                                      ("chat", "vllm.chat", "chat")):
        original = getattr(llm, name)
        original = getattr(original, "__wrapped__", original)  # wrapping twice never stacks
        wrapper = _wrapper(llm, original, provider, operation, config, engine)
        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        wrapper.__doc__ = original.__doc__
        setattr(llm, name, wrapper)
    return llm


def _engine_info(model_config: Any, sdk: Any) -> dict[str, Any]:
    dtype = str(getattr(model_config, "dtype", "")).removeprefix("torch.")
    revision = getattr(model_config, "revision", None)
    model = str(getattr(model_config, "served_model_name", None) or model_config.model)
    return {
        "model": model,
        "revision": revision,
        "dtype": dtype,
        "fingerprint": f"vllm-{sdk.__version__}-{dtype}-{revision or 'local'}",
    }


def _wrapper(llm: Any, original: Callable[..., Any], provider: str, operation: str,
             config: Config, engine: Mapping[str, Any]) -> Callable[..., Any]:
    chat = provider == "vllm.chat"

    def call(prompts: Any, sampling_params: Any = None, *args: Any, **kwargs: Any) -> Any:
        if args or _recording.bypassed(config.cache):
            # Positional options beyond the first two are an old or odd calling style: pass
            # it through untouched rather than guess what each position means.
            return original(prompts, sampling_params, *args, **kwargs)
        batch = _as_batch(prompts, chat=chat)
        params = _params_per_prompt(llm, sampling_params, len(batch))
        options = _recording._options.get() or CallOptions()
        channel = options.channel if options.channel is not None else config.channel
        keys = [_key(provider, engine, prompt, sp, kwargs, options, channel, chat=chat)
                for prompt, sp in zip(batch, params, strict=True)]
        return _serve(original, batch, params, kwargs, keys, provider, operation, config,
                      engine)

    return call


def _as_batch(prompts: Any, *, chat: bool) -> list[Any]:
    if chat:
        # One conversation is a list of message dicts; a batch is a list of those.
        if isinstance(prompts, list | tuple) and prompts and isinstance(prompts[0], Mapping):
            return [list(prompts)]
        return list(prompts)
    if isinstance(prompts, str | Mapping):
        return [prompts]
    return list(prompts)


def _params_per_prompt(llm: Any, sampling_params: Any, n: int) -> list[Any]:
    if sampling_params is None:
        return [llm.get_default_sampling_params()] * n
    if isinstance(sampling_params, list | tuple):
        if len(sampling_params) != n:
            raise ValueError(f"`sampling_params`: {len(sampling_params)} given for {n} "
                             "prompts; pass one, or one per prompt")
        return list(sampling_params)
    return [sampling_params] * n


def _plain(value: Any) -> Any:
    """A JSON-compatible copy of a vLLM option value (structs, enums, arrays, sets)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return sorted((_plain(v) for v in value), key=repr)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return _plain(tolist())
    fields = getattr(value, "__struct_fields__", None)
    if fields is None and hasattr(value, "__dataclass_fields__"):
        fields = tuple(value.__dataclass_fields__)
    if fields is not None:
        return {f: _plain(getattr(value, f)) for f in fields if not f.startswith("_")}
    return repr(value)


def sampling_params_dict(sp: Any) -> dict[str, Any]:
    """The content-relevant fields of a ``SamplingParams`` as a plain dict (for the key)."""
    fields = getattr(sp, "__struct_fields__", None) or tuple(getattr(sp, "__dict__", {}))
    return {f: _plain(getattr(sp, f)) for f in fields
            if not f.startswith("_") and f not in _SP_SKIP}


def _key(provider: str, engine: Mapping[str, Any], prompt: Any, sp: Any,
         kwargs: Mapping[str, Any], options: CallOptions, channel: str | None, *,
         chat: bool) -> Any:
    from ._request_fields import request_key

    request: dict[str, Any] = {"model": engine["model"], "revision": engine["revision"],
                               "dtype": engine["dtype"],
                               "messages" if chat else "prompts": _plain(prompt),
                               "sampling_params": sampling_params_dict(sp)}
    for name, value in kwargs.items():
        if name in ("use_tqdm", "priority"):
            continue
        request[name] = _plain(value)
    return request_key(provider, request, draw=options.draw, channel=channel)


def _serve(original: Callable[..., Any], batch: list[Any], params: list[Any],
           kwargs: dict[str, Any], keys: list[Any], provider: str, operation: str,
           config: Config, engine: Mapping[str, Any]) -> list[Any]:
    cache = config.cache
    n = len(batch)
    results: list[Any] = [None] * n
    bodies: list[dict[str, Any] | None] = [None] * n
    statuses: list[str | None] = [None] * n
    missing: list[int] = list(range(n))
    t0 = time.perf_counter_ns()
    if cache is not None and cache.mode != "off":
        missing = []
        for i, key in enumerate(keys):
            try:
                served = cache.call(key, _needs_engine)
            except _NeedsEngine:
                missing.append(i)
                continue
            except BaseException as exc:  # a read-only miss: record it, then raise it
                _record(provider, operation, config, engine, key, None, "miss", exc, t0)
                raise
            bodies[i], statuses[i] = served.response, served.status
            results[i] = _rebuild(served.response)
    if missing:
        try:
            outputs = original([batch[i] for i in missing], [params[i] for i in missing],
                               **kwargs)
        except BaseException as exc:
            for i in missing:
                _record(provider, operation, config, engine, keys[i], None,
                        None if cache is None else "miss", exc, t0)
            raise
        for i, output in zip(missing, outputs, strict=True):
            body = _to_body(output, engine)
            results[i] = output
            if cache is None:
                bodies[i], statuses[i] = body, None
            else:
                stored = cache.call(keys[i], lambda body=body: body)
                bodies[i], statuses[i] = body, stored.status
    for i in range(n):
        _record(provider, operation, config, engine, keys[i], bodies[i], statuses[i], None, t0)
    return results


def _needs_engine() -> dict[str, Any]:
    raise _NeedsEngine


def _record(provider: str, operation: str, config: Config, engine: Mapping[str, Any],
            key: Any, body: dict[str, Any] | None, status: str | None,
            error: BaseException | None, t0: int) -> None:
    seen = observing()
    if seen is not None:
        seen.add(provider, engine["model"], engine["model"], engine["fingerprint"],
                 hit=status == "hit", failed=error is not None)
    if al.current_run() is None:
        return
    outputs = [] if body is None else body.get("outputs", [])
    al.llm_call(
        provider, engine["model"], request=key.canonical, response=body, operation=operation,
        input_tokens=0 if body is None else len(body.get("prompt_token_ids") or ()),
        output_tokens=sum(len(o.get("token_ids") or ()) for o in outputs),
        latency_ns=time.perf_counter_ns() - t0, prices=config.prices, error=error,
        response_model=engine["model"],
        response_id=None if body is None else body.get("request_id"),
        finish_reasons=[str(o.get("finish_reason")) for o in outputs],
        fingerprint=engine["fingerprint"], cache_key=key.digest,
        cache=status if status is not None or config.cache is None else "off",  # type: ignore[arg-type]
        capture_content=config.capture_content, kind="internal",
        request_checked=key.clean,  # the key's request passed the scrubber's rules
    )


def _logprob_rows(rows: Any) -> list[list[dict[str, Any]] | None] | None:
    if rows is None:
        return None
    out: list[list[dict[str, Any]] | None] = []
    for position in rows:
        if position is None:
            out.append(None)
            continue
        # Keys named like credentials (token_id) would be redacted by the recorder.
        out.append([{"id": int(tid), "logprob": _finite(lp.logprob), "rank": lp.rank,
                     "text": lp.decoded_token} for tid, lp in position.items()])
    return out


def _finite(value: float) -> float | None:
    # JSON has no -inf: an impossible token is stored as null and rebuilt as -inf.
    value = float(value)
    return value if math.isfinite(value) else None


def _to_body(output: Any, engine: Mapping[str, Any]) -> dict[str, Any]:
    """A ``RequestOutput`` as a JSON-compatible body (what the cache stores)."""
    return {
        "request_id": str(output.request_id),
        "prompt": output.prompt,
        "prompt_token_ids": None if output.prompt_token_ids is None
        else [int(t) for t in output.prompt_token_ids],
        "prompt_logprobs": _logprob_rows(output.prompt_logprobs),
        "outputs": [{
            "index": int(o.index), "text": o.text, "token_ids": [int(t) for t in o.token_ids],
            "cumulative_logprob": None if o.cumulative_logprob is None
            else _finite(o.cumulative_logprob),
            "logprobs": _logprob_rows(o.logprobs),
            "finish_reason": o.finish_reason,
            "stop_reason": o.stop_reason if isinstance(o.stop_reason, int | str | None)
            else str(o.stop_reason),
        } for o in output.outputs],
        "finished": bool(output.finished),
        "model": engine["model"],
        "system_fingerprint": engine["fingerprint"],
    }


def _rebuild_rows(rows: Sequence[Any] | None, logprob_cls: Any) -> Any:
    if rows is None:
        return None
    return [None if position is None else {
        int(e["id"]): logprob_cls(
            logprob=-math.inf if e["logprob"] is None else float(e["logprob"]),
            rank=e["rank"], decoded_token=e["text"])
        for e in position} for position in rows]


def _rebuild(body: Mapping[str, Any]) -> Any:
    """A ``vllm.RequestOutput`` from a stored body (a cache hit)."""
    from vllm.logprobs import Logprob
    from vllm.outputs import CompletionOutput, RequestOutput

    outputs = [CompletionOutput(
        index=o["index"], text=o["text"], token_ids=list(o["token_ids"]),
        cumulative_logprob=o["cumulative_logprob"],
        logprobs=_rebuild_rows(o["logprobs"], Logprob), finish_reason=o["finish_reason"],
        stop_reason=o["stop_reason"]) for o in body["outputs"]]
    return RequestOutput(request_id=body["request_id"], prompt=body["prompt"],
                         prompt_token_ids=body["prompt_token_ids"],
                         prompt_logprobs=_rebuild_rows(body["prompt_logprobs"], Logprob),
                         outputs=outputs, finished=body["finished"])


def choice_probs_from_vllm(output: Any, labels: Sequence[str | int], *,
                           position: int | None = None, choice: int = 0,
                           complete: bool = False) -> ChoiceProbs:
    """The candidate vector over ``labels`` from a vLLM offline output.

    ``agentlog.adapters.choice_probs`` dispatches here for vLLM outputs. vLLM lists, at each
    generated position, the top ``logprobs`` tokens plus the sampled one (``SamplingParams(
    logprobs=k)``), or exactly the ids asked for with ``logprob_token_ids`` (then pass
    ``complete=True``: every label was scored, so a label absent from the list has no
    upper bound to report).

    Args:
        output: a ``vllm.RequestOutput`` (or a one-element list of them, or its stored
            body) or a ``CompletionOutput``.
        labels: option strings (matched against the decoded token, whitespace stripped:
            " A" counts for "A") or vocabulary token ids (ints).
        position: the generated position to read; None: the first one listing a label.
        choice: which completion of an ``n > 1`` request.
        complete: the listed ids are the labels' own ids (``logprob_token_ids``).

    Raises:
        agentlog.adapters.NoLogprobsError: the output has no logprobs (request them with
            ``SamplingParams(logprobs=20)`` or ``logprob_token_ids=[...]``), or no position
            lists a label.
        ValueError: a batch of several outputs, or ``choice``/``position`` out of range.
    """
    completion = _completion(output, choice)
    by_id = bool(labels) and all(isinstance(lab, int) and not isinstance(lab, bool)
                                 for lab in labels)
    rows = completion.get("logprobs") if isinstance(completion, Mapping) \
        else _logprob_rows(completion.logprobs)
    token_ids = completion.get("token_ids") if isinstance(completion, Mapping) \
        else list(completion.token_ids)
    positions: list[list[tuple[Any, float]]] = []
    sampled: list[Any] = []
    for i, row in enumerate(rows or ()):
        entries = row or []
        positions.append([(e["id"] if by_id else e["text"],
                           -math.inf if e["logprob"] is None else float(e["logprob"]))
                          for e in entries])
        tid = token_ids[i] if token_ids is not None and i < len(token_ids) else None
        match = next((e for e in entries if e["id"] == tid), None)
        sampled.append(tid if by_id else None if match is None else match["text"])
    source = "vllm.offline.logprob_token_ids" if complete else "vllm.offline.logprobs"
    return choice_probs_from_positions(positions, sampled, labels, position=position,
                                       source=source, complete=complete)


def _completion(output: Any, choice: int) -> Any:
    if isinstance(output, list | tuple):
        if len(output) != 1:
            raise ValueError(f"`output` is a batch of {len(output)} vLLM outputs; pass one "
                             "of them (e.g. outputs[i])")
        output = output[0]
    outputs = output.get("outputs") if isinstance(output, Mapping) \
        else getattr(output, "outputs", None)
    if outputs is None:
        return output  # already a CompletionOutput
    if not 0 <= choice < len(outputs):
        raise ValueError(f"`choice` {choice} is out of range: the output has {len(outputs)} "
                         "completions")
    return outputs[choice]
