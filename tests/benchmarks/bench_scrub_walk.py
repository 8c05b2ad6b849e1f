"""``may_change`` on logprob-heavy model responses: the walk over the keys, old against new.

Run: ``python tests/benchmarks/bench_scrub_walk.py`` (prints a table; asserts nothing;
writes no file).

Every model call's request and response pass ``agentlog._scrub.may_change``; without a
string marker it walks every dict and list of the payload to decide whether a
credential-named key could be redacted. The reference is the previous walk (a recursive
Python loop over every dict), kept below verbatim and run in this same process on the
same ``_safe_names`` cache, in interleaved batches; time is the caller's CPU
(``time.thread_time``), so the other engineers' load on the machine counts less. Bodies:

* the ``bench_adapters.py`` response (one token, ten top logprobs);
* an OpenAI Chat response with 20 tokens x 20 top logprobs (~420 dicts);
* a vLLM adapter body: 20 positions x 20 rows ``{"id", "logprob", "rank", "text"}``.

Log-probabilities and token ids are seeded random numbers, as a model's are: their msgpack
bytes hold 0x3d ("=") somewhere, which the previous ``may_change`` took for the marker
of a ``?key=`` query string (it then ran the copying walk). Two rows per body: the walk
alone, and the prefilter followed by ``scrub_value`` when it says True (what ``_sealed``
pays after encoding).
"""

from __future__ import annotations

import os
import random
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _timing import cpu_us_per_call
from bench_adapters import BODY as ADAPTER_BODY

from agentlog import _scrub
from agentlog._encoding import encode
from agentlog._scrub import may_change, scrub_value

NEW_WALK = _scrub._has_credential_key

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def chat_body(tokens: int = 20, top: int = 20) -> dict[str, Any]:
    rng = random.Random(1)  # log-probabilities are arbitrary doubles, as a model's are

    def entry(i: int, j: int) -> dict[str, Any]:
        text = ALPHABET[(i + j) % 26] * 2
        return {"token": text, "logprob": -rng.random() * (j + 1),
                "bytes": list(text.encode())}

    content = [{**entry(i, 0), "top_logprobs": [entry(i, j) for j in range(top)]}
               for i in range(tokens)]
    return {
        "id": "chatcmpl-2", "object": "chat.completion", "created": 1764547200,
        "model": "gpt-4o-mini-2024-07-18", "system_fingerprint": "fp_1",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant",
                                 "content": "".join(e["token"] for e in content)},
                     "logprobs": {"content": content}}],
        "usage": {"prompt_tokens": 900, "completion_tokens": tokens,
                  "total_tokens": 900 + tokens,
                  "completion_tokens_details": {"reasoning_tokens": 0}},
    }


def vllm_body(positions: int = 20, top: int = 20) -> dict[str, Any]:
    rng = random.Random(2)
    rows = [[{"id": rng.randrange(150000), "logprob": -rng.random() * (j + 1), "rank": j + 1,
              "text": ALPHABET[(i + j) % 26]} for j in range(top)] for i in range(positions)]
    return {
        "request_id": "req-1", "prompt": "Which option is right?",
        "prompt_token_ids": [rng.randrange(150000) for _ in range(300)],
        "outputs": [{"index": 0, "text": "B" * positions,
                     "token_ids": [1000 + i for i in range(positions)],
                     "cumulative_logprob": -3.5, "logprobs": rows,
                     "finish_reason": "length", "stop_reason": None}],
        "finished": True,
    }


# The walk before this change (agentlog/_scrub.py at 33d4b51), the reference.
def old_has_credential_key(obj: Any, depth: int) -> bool:
    if depth > _scrub._MAX_DEPTH:
        return True
    kind = type(obj)
    if kind is dict:
        if not _scrub._safe_names.issuperset(obj) and not (
            _scrub._LOGPROB in obj and _scrub._safe_logprob_names.issuperset(obj)
        ):
            for k in obj:
                if k in _scrub._safe_names or type(k) is not str or (
                    k == _scrub._LOGPROB_TOKEN and _scrub._LOGPROB in obj
                ):
                    continue
                if _scrub.is_credential_name(k):
                    return True
                if len(_scrub._safe_names) < _scrub._MAX_SAFE_NAMES:
                    _scrub._safe_names.add(k)
                    _scrub._safe_logprob_names.add(k)
        values: Any = obj.values()
    elif kind is list or kind is tuple:
        values = obj
    else:
        return kind not in _scrub._PLAIN
    for v in values:
        t = type(v)
        if t is dict or t is list or t is tuple:
            if old_has_credential_key(v, depth + 1):
                return True
        elif t not in _scrub._PLAIN:
            return True
    return False


def paired(reference: Callable[[], object], fn: Callable[[], object], number: int,
           rounds: int = 15) -> tuple[float, float, float]:
    """(median reference µs, median new µs, median of the per-round ratios new/ref)."""
    ref, new, ratios = [], [], []
    for r in range(rounds):
        pair = [(reference, ref), (fn, new)]
        for fn_, out in pair if r % 2 == 0 else pair[::-1]:
            out.append(cpu_us_per_call(fn_, number))
        ratios.append(new[-1] / ref[-1])
    return statistics.median(ref), statistics.median(new), statistics.median(ratios)


def old_may_change(obj: Any, data: bytes) -> bool:
    """``may_change`` before this change (no known secrets): a lone b"=" was a marker."""
    if (_scrub._SK_MARK(data) is not None or _scrub._BEARER_MARK(data) is not None
            or b"=" in data or (b"@" in data and b"://" in data)):
        return _scrub._has_needle(data.lower().decode("latin-1"))
    return old_has_credential_key(obj, 0)


def main() -> None:
    print(f"load average {os.getloadavg()[0]:.2f}; caller CPU per call, 15 interleaved "
          "rounds, medians; reference: the previous code, same process\n")
    bodies = {"bench_adapters BODY (1 token x 10)": ADAPTER_BODY,
              "chat, 20 tokens x 20 top logprobs": chat_body(),
              "vLLM body, 20 positions x 20 rows": vllm_body()}
    for label, body in bodies.items():
        data = encode(body)
        number = 2000 if len(data) < 2000 else 200
        print(f"{label} ({len(data)} B; holds b'=': {b'=' in data}; old may_change "
              f"{old_may_change(body, data)}, new {may_change(body, data)})")
        ref, own, ratio = paired(lambda b=body: old_has_credential_key(b, 0),
                                 lambda b=body: NEW_WALK(b, 0), number)
        print(f"  {'the walk alone':<52} old {ref:8.2f} µs  new {own:8.2f} µs  "
              f"new/old {ratio:5.2f}")
        # What _sealed pays after the encoding: the prefilter, and the copying walk when
        # the prefilter says the payload may change.
        ref, own, ratio = paired(
            lambda b=body, d=data: old_may_change(b, d) and scrub_value(b),
            lambda b=body, d=data: may_change(b, d) and scrub_value(b), number)
        print(f"  {'may_change, then scrub_value if it says True':<52} old {ref:8.2f} µs  "
              f"new {own:8.2f} µs  new/old {ratio:5.2f}")
    print(f"\nload average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
