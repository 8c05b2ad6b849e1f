"""Long payloads (a retrieved document, a long prompt) take ``may_change``'s prefilter.

From ``LONG_PAYLOAD`` bytes on, windows, tools and model calls test a payload with the
scrubber's markers and a walk over its keys instead of the ten stems over every byte.
Every credential the scrubber redacts in a short payload must still be redacted in a long
one, through every path: the inlined window, the general window path, tool results and
nested values the walk does not enter (dataclasses).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog._encoding import encode
from agentlog._scrub import LONG_PAYLOAD, may_change_payload, scrub_value

KEY = "sk-" + "L0ngPayloadCanary" * 2
PROSE = "The key finding of the well-known paper is that tokens pass through. " * 60


def _trace_bytes(path: Path) -> bytes:
    from tests.adapters._trace_text import trace_plaintext

    return trace_plaintext(path)


@dataclasses.dataclass
class Doc:
    text: str
    api_key: str


SECRETS = [
    f"{PROSE} here is my key {KEY} thanks",
    f"{PROSE} Authorization: Bearer abcdefgh12345678abcdefgh",
    f"{PROSE} see https://user:hunter2pass@example.com/x",
    f"{PROSE} fetch https://example.com/x?api_key=zz9yy8xx7",
]
LEAKS = [KEY, "abcdefgh12345678abcdefgh", "hunter2pass", "zz9yy8xx7"]


@pytest.mark.parametrize("case", range(len(SECRETS)))
def test_a_credential_inside_a_long_document_argument_is_redacted(
        trace_path: Path, case: int) -> None:
    text = SECRETS[case]
    assert len(encode(text)) >= LONG_PAYLOAD

    @al.window("read")
    def read(doc: str) -> int:  # the inlined path: positional, no projections
        return len(doc)

    @al.window("read_kw")
    def read_kw(doc: str, *, k: int = 1) -> int:  # keyword call: the general path
        return len(doc) + k

    @al.window("echo")
    def echo(doc: str) -> str:  # the exit carries the document back
        return doc

    with al.record(trace_path, seed=1):
        assert read(text) == len(text)
        assert read_kw(doc=text, k=2) == len(text) + 2
        assert echo(text) == text
    assert LEAKS[case].encode() not in _trace_bytes(trace_path)


def test_a_long_entry_whose_parameter_is_a_credential_name_is_redacted(
        trace_path: Path) -> None:
    @al.window("call")
    def call(prompt: str, api_key: str) -> str:
        return prompt[:3]

    with al.record(trace_path, seed=1):
        assert call(PROSE, "zq-plain-looking-credential-99") == PROSE[:3]
    assert b"zq-plain-looking-credential-99" not in _trace_bytes(trace_path)


def test_a_credential_field_of_a_dataclass_in_a_long_payload_is_redacted(
        trace_path: Path) -> None:
    @al.window("index")
    def index(doc: Doc) -> Doc:
        return doc

    @al.tool("lookup")
    def lookup(q: str) -> Doc:
        return Doc(PROSE, "zq-dataclass-credential-77")

    doc = Doc(PROSE, "zq-dataclass-credential-77")
    with al.record(trace_path, seed=1):
        assert index(doc) is doc
        assert lookup("q").api_key == "zq-dataclass-credential-77"
    assert b"zq-dataclass-credential-77" not in _trace_bytes(trace_path)


def test_may_change_payload_false_guarantees_the_scrubber_changes_nothing() -> None:
    from hypothesis import HealthCheck, assume, given, settings
    from hypothesis import strategies as st

    keys = st.sampled_from(["token", "logprob", "max_tokens", "api_key", "content", "text",
                            "bytes", "top_logprobs", "url", "password", "doc"])
    fillers = st.sampled_from([PROSE[:300], PROSE])
    marks = st.sampled_from(["plain", KEY, "Bearer abcdefgh12345678", "bearer abcdefgh1234",
                             "https://u:p@h/", "?api_key=zz", "key=v", "x@y", "tokens"])
    texts = st.builds(lambda a, b: a + b, fillers, marks)
    leaves = st.none() | st.integers(-5, 5) | texts
    values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(keys, inner, max_size=3), max_leaves=8)

    @settings(max_examples=300, deadline=None,
              suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
    @given(values)
    def prop(obj: Any) -> None:
        data = encode(obj)
        # The long branch is the new one; short payloads keep may_hold_secret, whose
        # tiny-payload exit lets e.g. {"token": None} through (nothing in it to leak).
        assume(len(data) >= LONG_PAYLOAD)
        if not may_change_payload(obj, data):
            assert scrub_value(obj) is obj

    prop()


def test_a_snapshot_of_the_known_secrets_survives_a_concurrent_add() -> None:
    # tuple(set) can fail with "Set changed size during iteration" when a collection
    # during the copy lets another thread add a secret; the snapshot retries.
    from agentlog import _scrub

    class Racing(set[str]):
        fails = 2

        def __iter__(self) -> Any:
            if Racing.fails:
                Racing.fails -= 1
                raise RuntimeError("Set changed size during iteration")
            return super().__iter__()

    known = Racing({"zq-secret-value-1"})
    assert _scrub._snapshot(known) == ("zq-secret-value-1",)
    assert Racing.fails == 0
    assert _scrub.scrub_text("x zq-secret-value-1 y", Racing({"zq-secret-value-1"})) == (
        f"x {_scrub.REDACTED} y")
