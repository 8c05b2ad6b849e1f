"""``may_change`` on logprob-heavy model responses: the batched walk stays sound.

A chat response with logprobs is mostly lists of logprob entries (``{"token", "logprob",
"bytes"}``), a vLLM body lists of rows (``{"id", "logprob", "rank", "text"}``). The keys
are walked with long lists one depth at a time; these tests pin that the answer is still
the scrubber's: ``may_change(obj, data) is False`` implies ``scrub_value(obj) is obj``.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog._encoding import encode
from agentlog._scrub import REDACTED, _query_mark, may_change, may_hold_secret, scrub_value

CANARY = "Zq7-logprob-walk-canary-3391"


def check(obj: Any) -> bool:
    return may_change(obj, encode(obj))


def chat(tokens: int, top: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)

    def entry() -> dict[str, Any]:
        text = rng.choice(["A", " the", "é", "\n"])
        return {"token": text, "logprob": -rng.random() * 10, "bytes": list(text.encode())}

    content = [{**entry(), "top_logprobs": [entry() for _ in range(top)]}
               for _ in range(tokens)]
    return {"id": "c-1", "choices": [{"index": 0, "logprobs": {"content": content}}],
            "usage": {"prompt_tokens": 9, "completion_tokens": tokens}}


def test_a_response_with_random_logprobs_needs_no_copying_walk() -> None:
    """Before: nearly every such body holds the byte 0x3d ("=") in some float or int, so
    ``may_change`` took the string-rule branch, found "token" and said True."""
    body = chat(20, 20, seed=3)
    data = encode(body)
    assert b"=" in data
    assert may_change(body, data) is False
    assert scrub_value(body) is body


def test_a_credential_key_in_one_entry_of_a_long_list_is_found() -> None:
    body = chat(3, 12, seed=4)
    top = body["choices"][0]["logprobs"]["content"][2]["top_logprobs"]
    top[7]["api_key"] = CANARY
    assert check(body)
    assert scrub_value(body)["choices"][0]["logprobs"]["content"][2]["top_logprobs"][7][
        "api_key"] == REDACTED


def test_token_without_logprob_in_a_long_list_of_entries_is_a_credential() -> None:
    rows = [{"token": "A", "logprob": -1.0} for _ in range(15)] + [{"token": CANARY}]
    assert check({"rows": rows})
    assert scrub_value({"rows": rows})["rows"][-1] == {"token": REDACTED}
    assert not check({"rows": rows[:-1]})


def test_a_str_subclass_key_is_tested_like_the_scrubber_tests_it() -> None:
    """Before: the walk skipped every key whose type was not exactly str, and
    ``{S("api_key"): ...}`` was redacted behind a False."""

    class Name(str):
        pass

    for obj in ({Name("api_key"): CANARY}, {"rows": [{Name("api_key"): CANARY}] * 9}):
        assert check(obj)
        assert scrub_value(obj) is not obj


def test_a_nesting_deeper_than_the_scrubbers_limit_through_long_lists_is_unsure() -> None:
    def nested(depth: int) -> Any:
        obj: Any = 1
        for _ in range(depth):
            obj = [obj, *range(8)]  # a long list at every depth: the batched walk
        return obj

    assert check(nested(300))  # _scrub redacts what lies below its depth limit
    assert scrub_value(nested(300)) != nested(300)
    assert not check(nested(200))


def test_query_names_folded_from_non_ascii_letters_still_count_as_a_marker() -> None:
    # re.IGNORECASE folds the Kelvin sign to "k" and the long s to "s" on str.
    # Before: bytes.lower() kept the Kelvin sign, no stem was found, and both prefilters
    # said False for a value scrub_value redacts.
    for text in ("x?api_\u212aey=zz9yy8", "key x?\u017fecret=zz9yy8", "x?API_KEY=zz9yy8"):
        assert _query_mark(text.encode())
        assert check({"url": text})
        assert may_hold_secret(encode({"url": text}))
        assert scrub_value({"url": text}) != {"url": text}
    assert not _query_mark(b"\x81\xa1a=\xcb?\xf8 max_tokens")


ENTRY_KEYS = st.sampled_from(["token", "logprob", "bytes", "top_logprobs", "id", "rank",
                              "text", "api_key", "x-api-key", "tokens", "token_ids"])
TEXTS = st.sampled_from(["A", " the", "plain", "sk-" + "a" * 20, "Bearer abcdefgh12345678",
                         "?api_key=zz", "x?api_\u212aey=zz", "https://u:p@h/", "tok=1"])
LEAVES = (st.none() | st.integers(-5, 300) | st.floats(allow_nan=False) | TEXTS
          | st.booleans())
BYTES = st.none() | st.lists(st.integers(0, 255), max_size=4)
LOGPROB_ENTRY = st.fixed_dictionaries(
    {"token": TEXTS, "logprob": st.floats(-30, 0), "bytes": BYTES},
    optional={"top_logprobs": st.lists(st.fixed_dictionaries(
        {"token": TEXTS, "logprob": st.floats(-30, 0), "bytes": BYTES}), max_size=10)})
# An entry with an extra key (a credential name among them), or "token" without "logprob".
ODD_ENTRY = st.dictionaries(ENTRY_KEYS, LEAVES | BYTES, max_size=4)
VLLM_ROW = st.fixed_dictionaries({"id": st.integers(0, 70000), "logprob": st.floats(-30, 0)
                                  | st.none(), "rank": st.integers(1, 20), "text": TEXTS})
ENTRIES = (st.lists(LOGPROB_ENTRY, min_size=6, max_size=14)
           | st.lists(VLLM_ROW, min_size=6, max_size=14)
           | st.lists(LOGPROB_ENTRY | ODD_ENTRY | LEAVES | BYTES, min_size=6, max_size=14)
           | st.tuples(*([LOGPROB_ENTRY] * 8)))
VALUES = st.recursive(
    LEAVES | ENTRIES,
    lambda inner: st.lists(inner, max_size=10) | st.dictionaries(ENTRY_KEYS, inner,
                                                                  max_size=3),
    max_leaves=6)


@settings(max_examples=200, deadline=None)
@given(VALUES)
def test_may_change_false_guarantees_the_scrubber_changes_nothing_on_logprob_lists(
        obj: Any) -> None:
    if not may_change(obj, encode(obj)):
        assert scrub_value(obj) is obj


def test_the_query_marker_looks_before_every_equals_sign_and_gives_up_when_many() -> None:
    rng = random.Random(5)
    floats = encode([rng.random() for _ in range(400)])
    assert b"=" in floats and not _query_mark(floats)
    assert _query_mark(floats + b"?TOKEN=")
    assert _query_mark(b"=" * 70 + b"plain")  # past the bound: unsure
    assert not _query_mark(b"=" * 60 + b"plain")
    tail = {"doc": "a=b " * 100 + "see ?api_key=zz9yy8xx7"}
    assert check(tail)
    assert scrub_value(tail)["doc"].endswith("?api_key=<redacted>")
