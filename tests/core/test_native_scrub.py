"""The optional C walk ``agentlog._native_scrub`` against the Python walk and the scrubber.

``may_change`` asks the walk whether the scrubber's names rule could fire in a payload;
the C walk returns the names it has not seen (Python classifies them) or True when it
cannot vouch. These tests hold its verdicts to the Python walk's, which stays the
fallback without a compiler, and ``False`` to ``scrub_value`` leaving the payload as is.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog import _scrub
from agentlog._encoding import encode
from agentlog._scrub import scrub_value

walk = _scrub._unknown_key_names

pytestmark = pytest.mark.skipif(walk is None, reason="agentlog._native_scrub was not built")


class Name(str):
    pass


class Opaque:
    pass


def test_it_returns_the_names_not_yet_known_to_be_safe() -> None:
    body = {"id": "c-1", "usage": {"prompt_tokens": 3}, "rows": [{"fresh_name": 1}, (2, 3)]}
    assert walk(body, set(), 256) == {"id", "usage", "prompt_tokens", "rows", "fresh_name"}
    assert walk(body, {"id", "usage", "rows"}, 256) == {"prompt_tokens", "fresh_name"}
    assert walk([1, "a", None, 2.5, b"x", True], set(), 256) == set()


def test_token_is_exempt_only_in_a_mapping_that_also_has_logprob() -> None:
    safe = {"logprob", "bytes"}
    assert walk({"token": "A", "logprob": -0.1, "bytes": [65]}, safe, 256) == set()
    assert walk({"token": "A", "bytes": [65]}, safe, 256) == {"token"}
    assert walk([{"token": "A", "logprob": -1.0}, {"token": "sk"}], safe, 256) == {"token"}
    # Only the exact name: "Token" is a name like any other, classified by Python.
    assert walk({"Token": "A", "logprob": -0.1}, safe, 256) == {"Token"}


@pytest.mark.parametrize("obj", [
    {Name("api_key"): "x"},                 # a str subclass key: the scrubber tests it
    {Name("never_seen_name_3391"): "x"},
    {"a": Opaque()},                        # a value the walk does not look into
    [{"a": {1, 2}}],                        # a set
    Opaque(),
    {"a": [{"b": Name("text")}]},           # a str subclass value
])
def test_it_is_unsure_of_what_it_does_not_look_into(obj: Any) -> None:
    assert walk(obj, set(), 256) is True
    assert _scrub._py_has_credential_key(obj, 0) is True


def test_a_str_subclass_key_equal_to_a_safe_name_is_safe_as_in_the_python_walk() -> None:
    assert walk({Name("id"): 1}, {"id"}, 256) == set()
    assert walk({Name("id"): 1}, set(), 256) is True


def test_non_str_keys_are_never_credential_names() -> None:
    assert walk({1: "a", (2, 3): "b", None: "c"}, set(), 256) == set()


def nested(depth: int) -> Any:
    obj: Any = 1
    for _ in range(depth):
        obj = [obj]
    return obj


@pytest.mark.parametrize("depth", [0, 1, 255, 256, 257, 258, 400])
def test_the_depth_limit_is_the_python_walks(depth: int) -> None:
    for obj in (nested(depth), {"a": nested(depth)}):
        assert _scrub._has_credential_key(obj, 0) is _scrub._py_has_credential_key(obj, 0)
    # The innermost list of nested(257) is 256 levels down: the deepest the scrubber walks.
    assert (walk(nested(depth), set(), _scrub._MAX_DEPTH) is True) is (depth > 257)


def test_a_key_whose_eq_changes_the_dict_during_the_logprob_lookup_is_survived() -> None:
    class Evil:
        def __init__(self, target: dict[Any, Any]) -> None:
            self.target = target

        def __hash__(self) -> int:
            return hash("logprob")

        def __eq__(self, other: object) -> bool:
            self.target.clear()  # the walk holds the key and value it is looking at
            return False

    for _ in range(50):
        d: dict[Any, Any] = {}
        d[Evil(d)] = [1, 2]
        d["token"] = "text"
        d["other"] = {"x": 1}
        assert walk(d, set(), 256) in (True, {"token"}, {"token", "other", "x"})


def test_arguments_are_checked() -> None:
    with pytest.raises(TypeError):
        walk({}, ["not", "a", "set"], 256)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        walk({}, set())  # type: ignore[call-arg]


# The str subclass keys' texts equal no other key (a dict would merge Name("a") and "a",
# and hypothesis then draws inconsistently).
KEYS = st.sampled_from(["token", "logprob", "bytes", "text", "api_key", "x-api-key", "id",
                        "Token", "max_tokens", "password", "prompt_tokens"]) | st.text(
    "abcxyz_", max_size=6) | st.integers(-3, 3) | st.builds(
    Name, st.sampled_from(["Sub-1", "SUB_API_KEY"]))
LEAVES = (st.none() | st.integers() | st.floats() | st.booleans() | st.binary(max_size=4)
          | st.sampled_from(["A", "sk-" + "a" * 20, "plain", "Bearer abcdefgh12345678"])
          | st.builds(Opaque) | st.builds(Name, st.just("v")))
VALUES = st.recursive(
    LEAVES,
    lambda inner: (st.lists(inner, max_size=9) | st.lists(inner, max_size=3).map(tuple)
                   | st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=25)


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_its_verdict_is_the_python_walks(obj: Any) -> None:
    assert _scrub._has_credential_key(obj, 0) is _scrub._py_has_credential_key(obj, 0)


PLAIN_VALUES = st.recursive(
    st.none() | st.integers(-2**63, 2**64 - 1) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=9) | st.dictionaries(KEYS.filter(
        lambda k: type(k) is str), inner, max_size=4),
    max_leaves=25)


@settings(max_examples=300, deadline=None)
@given(PLAIN_VALUES)
def test_false_means_the_scrubber_changes_nothing(obj: Any) -> None:
    if not _scrub.may_change(obj, encode(obj)):
        assert scrub_value(obj) is obj
