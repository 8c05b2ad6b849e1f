"""Canonical encoding, hashing and decoding sealed entries back into arguments."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Annotated, Any, ClassVar

import msgspec
import numpy as np
import pydantic
import pytest
from hypothesis import strategies as st

import agentlog as al
from agentlog._encoding import REDACTED, ArgumentBinder, decode, encode, encode_arguments


@dataclasses.dataclass
class Bundle:
    ids: list[str]
    scores: np.ndarray


class Query(pydantic.BaseModel):
    text: str
    k: int = 3


class Budget(msgspec.Struct):
    rounds: int
    limits: tuple[int, int]


def test_equal_values_encode_equally_whatever_the_key_order() -> None:
    assert encode({"b": 1, "a": {"y": 2, "x": 3}}) == encode({"a": {"x": 3, "y": 2}, "b": 1})
    assert encode({3, 1, 2}) == encode({2, 3, 1})


def test_numpy_arrays_round_trip_with_dtype_and_shape() -> None:
    for arr in (np.arange(6, dtype=">i4").reshape(2, 3), np.array([], dtype=np.float32),
                np.eye(2, dtype=np.complex128), np.array(True)):
        out = decode(encode(arr))
        assert out.dtype == arr.dtype.newbyteorder("<") or out.dtype == arr.dtype
        assert out.shape == arr.shape
        np.testing.assert_array_equal(out, arr)
    # byte order does not change the sealed value
    assert encode(np.arange(3, dtype=">i4")) == encode(np.arange(3, dtype="<i4"))


def test_unsupported_objects_fail_naming_the_argument_and_suggesting_entry() -> None:
    with pytest.raises(al.ArtifactEncodingError, match=r"window 'w', argument `db`.*entry="):
        encode_arguments({"q": "x", "db": object()}, window="w")


def test_sealed_entry_decodes_back_into_arguments_that_reinvoke_the_function() -> None:
    def answer(q: Query, bundle: Bundle, budget: Budget, weights: np.ndarray,
               tags: tuple[str, ...], *, depth: int = 2) -> str:
        return f"{q.text}:{len(bundle.ids)}:{budget.rounds}:{weights.sum()}:{tags}:{depth}"

    call = (Query(text="why"), Bundle(["a", "b"], np.array([0.5, 0.25])),
            Budget(rounds=4, limits=(1, 2)), np.arange(3.0), ("x", "y"))
    binder = ArgumentBinder(answer)
    data = encode_arguments(binder.bind(call, {"depth": 5}), window="answer")
    args, kwargs = al.decode_arguments(answer, data)
    assert answer(*args, **kwargs) == answer(*call, depth=5)
    assert isinstance(args[0], Query) and isinstance(args[1], Bundle)
    assert isinstance(args[2], Budget) and args[2].limits == (1, 2)
    assert args[4] == ("x", "y")


def test_defaults_are_applied_so_equivalent_calls_seal_the_same_entry() -> None:
    def f(q: str, budget: int = 3) -> None: ...

    binder = ArgumentBinder(f)
    assert encode(binder.bind(("q",), {})) == encode(binder.bind(("q", 3), {}))
    assert encode(binder.bind(("q",), {})) == encode(binder.bind((), {"q": "q", "budget": 3}))


def test_secret_parameters_are_redacted_and_must_be_resupplied() -> None:
    def call(prompt: str, api_key: Annotated[str, al.Secret]) -> str:
        return prompt

    binder = ArgumentBinder(call)
    data = encode_arguments(binder.bind(("hi", "sk-CANARY"), {}), window="w")
    assert b"sk-CANARY" not in data and REDACTED.encode() in data
    with pytest.raises(ValueError, match=r"`api_key` .* is secret"):
        al.decode_arguments(call, data)
    args, _ = al.decode_arguments(call, data, secrets={"api_key": "sk-2"})
    assert args == ("hi", "sk-2")


def test_secret_names_must_be_parameters() -> None:
    def f(x: int) -> int:
        return x

    with pytest.raises(ValueError, match=r"`secret` names \['token'\]"):
        ArgumentBinder(f, secret=("token",))


def test_methods_seal_their_arguments_without_self() -> None:
    class Agent:
        def run(self, q: str) -> str:
            return q

    binder = ArgumentBinder(Agent.run)
    assert binder.bind((Agent(), "q"), {}) == {"q": "q"}


_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False)
    | st.text(max_size=8) | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                  max_size=3),
    max_leaves=8,
)


def test_a_window_with_a_mutable_default_seals_it_in_its_entry(tmp_path: Any) -> None:
    @al.window("m")
    def mutable_default(x: int, seen: list[int] = [1]) -> int:  # noqa: B006
        return x

    with al.record(tmp_path / "t.zst", seed=1):
        mutable_default(3)
    (enter,) = [w.enter for w in al.read(tmp_path / "t.zst").windows("m")]
    assert enter.entry == encode({"x": 3, "seen": [1]})


# ------------------------------------------------- one policy for values we cannot seal


def test_paths_complex_enums_and_sets_have_canonical_encodings() -> None:
    import enum

    class Color(enum.Enum):
        RED = "red"

    assert decode(encode(pathlib.Path("/data/x.txt"))) == "/data/x.txt"
    assert decode(encode(1.5 - 2j)) == 1.5 - 2j
    assert encode(Color.RED) == encode("red")
    mixed = {1, "a", b"z", (2, 3)}
    assert encode(mixed) == encode(set(reversed(list(mixed))))  # order-independent
    assert encode(frozenset({"b", "a"})) == encode(["a", "b"])


def test_values_supported_before_keep_their_exact_bytes() -> None:
    # Pinned bytes: hashes in traces written by earlier versions must not change.
    assert encode({"b": 1, "a": [1.5, None, True]}).hex() == "82a16193cb3ff8000000000000c0c3a16201"
    assert encode({3, 1, 2}) == encode([1, 2, 3])
    assert encode(Query(text="why")) == encode({"k": 3, "text": "why"})


def test_a_secretstr_is_sealed_as_redacted() -> None:
    class Cfg(pydantic.BaseModel):
        model: str
        key: pydantic.SecretStr

    data = encode(Cfg(model="m", key=pydantic.SecretStr("sk-live-0123456789abcdef")))
    assert decode(data) == {"key": REDACTED, "model": "m"}


def test_a_path_argument_round_trips_through_replay_decoding() -> None:
    def load(path: pathlib.Path, limit: int = 2) -> str:
        return path.name

    data = encode_arguments(ArgumentBinder(load).bind((pathlib.Path("/d/f.csv"),), {}),
                            window="load")
    args, _ = al.decode_arguments(load, data)
    assert args == (pathlib.Path("/d/f.csv"), 2)


def test_encode_lenient_marks_only_the_unsupported_value() -> None:
    from agentlog._encoding import encode_lenient

    class Handle:
        pass

    data, replaced = encode_lenient({"q": "x", "db": Handle(), "n": [1, 2]})
    assert decode(data) == {"db": {"unsealable": "Handle"}, "n": [1, 2], "q": "x"}
    assert replaced == ["Handle"]
    assert encode_lenient({"q": "x"}) == (encode({"q": "x"}), [])


def test_an_unsealable_argument_warns_once_per_window_and_the_call_proceeds(
    tmp_path: Any,
) -> None:
    class Conn:
        pass

    @al.window("query")
    def query(conn: Conn, sql: str) -> int:
        return len(sql)

    path = tmp_path / "run.zst"
    with pytest.warns(al.InstrumentationWarning, match=r"window 'query' entry: no canonical "
                      r"encoding for Conn.*strict=True") as caught, al.record(path):
        assert query(Conn(), "select 1") == 8
        assert query(Conn(), "select 22") == 9
    assert len([w for w in caught if "query" in str(w.message)]) == 1
    views = al.read(path).windows("query")
    assert [decode(v.entry_bytes) for v in views] == [
        {"conn": {"unsealable": "Conn"}, "sql": "select 1"},
        {"conn": {"unsealable": "Conn"}, "sql": "select 22"},
    ]
    assert al.verify(path).ok


def test_pydantic_models_with_secrets_and_paths_no_longer_break_the_host(
    tmp_path: Any,
) -> None:
    class Cfg(pydantic.BaseModel):
        model: str
        key: pydantic.SecretStr

    @al.window("run")
    def run(cfg: Cfg, out: pathlib.Path, scale: complex) -> str:
        return cfg.model

    path = tmp_path / "run.zst"
    with al.record(path):
        assert run(Cfg(model="m", key=pydantic.SecretStr("hunter2-abc")), pathlib.Path("o"),
                   1j) == "m"
    (view,) = al.read(path).windows("run")
    assert decode(view.entry_bytes) == {"cfg": {"key": REDACTED, "model": "m"}, "out": "o",
                                        "scale": 1j}
    assert b"hunter2-abc" not in path.read_bytes()


def test_an_unsealable_tool_argument_is_a_marker_unless_strict(tmp_path: Any) -> None:
    class Conn:
        pass

    @al.tool("db")
    def db(conn: Conn) -> int:
        return 1

    path = tmp_path / "run.zst"
    with pytest.warns(al.InstrumentationWarning, match="tool 'db' arguments"), al.record(path):
        assert db(Conn()) == 1
    (call,) = [r for r in al.read(path).records if type(r).__name__ == "ToolCall"]
    assert call.args_hash is not None
    with al.record(tmp_path / "strict.zst", strict=True), pytest.raises(
        al.ArtifactEncodingError, match="tool 'db' arguments"
    ):
        db(Conn())


def _nested(depth: int) -> Any:
    obj: Any = "leaf"
    for _ in range(depth):
        obj = [obj]
    return obj


def _holding_itself() -> dict[str, Any]:
    d: dict[str, Any] = {"name": "loop"}
    d["self"] = d
    return d


@pytest.mark.parametrize("make", [lambda: _nested(100_000), _holding_itself,
                                  lambda: {"api_key": _nested(5_000)}],
                         ids=["nested-100k", "holds-itself", "credential-over-nested"])
def test_a_value_nested_too_deep_or_holding_itself_is_a_marker_and_the_call_proceeds(
        tmp_path: Any, make: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: msgspec's RecursionError escaped from the window into the agent's call
    (the window and tool paths caught only TypeError, ValueError and the like)."""
    from agentlog import _encoding

    monkeypatch.setattr(_encoding, "_warned_unsealable", set())  # it warns once a process
    value = make()

    @al.window("deep")
    def deep(x: Any) -> Any:
        return x

    @al.tool("echo")
    def echo(x: Any) -> Any:
        return x

    path = tmp_path / "run.zst"
    with pytest.warns(al.InstrumentationWarning, match=r"nested too deep, or holding itself"
                      ), al.record(path):
        assert deep(value) is value
        assert echo(value) is value
    (view,) = al.read(path).windows("deep")
    assert decode(view.entry_bytes) == {"unsealable": "dict"}  # the argument map
    assert decode(view.exit_bytes) == {"unsealable": type(value).__name__}
    assert al.verify(path).ok
    with al.record(tmp_path / "strict.zst", strict=True), pytest.raises(
            al.ArtifactEncodingError, match="recursion"):
        deep(value)


def test_encode_names_a_value_nested_too_deep_in_its_error() -> None:
    from agentlog._encoding import encode_lenient

    with pytest.raises(al.ArtifactEncodingError, match=r"argument `x`.*recursion"):
        encode(_holding_itself(), what="argument `x`")
    data, bad = encode_lenient([_holding_itself()])
    assert decode(data) == {"unsealable": "list"}
    assert bad == ["list (nested too deep, or holding itself)"]


def test_a_value_whose_own_code_fails_while_encoded_is_a_marker_never_an_exception(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: a model_dump that raised (or an __lt__ in a set) raised into the call."""
    from agentlog import _encoding

    monkeypatch.setattr(_encoding, "_warned_unsealable", set())

    class BrokenModel:
        model_fields: ClassVar[dict[str, Any]] = {"a": None}

        def model_dump(self, **kwargs: Any) -> Any:
            raise RuntimeError("sk-" + "s" * 30)  # a message that must not travel

    class Unordered:
        def __lt__(self, other: object) -> bool:
            raise RuntimeError("no order")

        def __hash__(self) -> int:
            return id(self)

    @al.window("odd")
    def odd(x: Any) -> str:
        return "ran"

    path = tmp_path / "run.zst"
    with pytest.warns(al.InstrumentationWarning, match="no canonical encoding") as caught, \
            al.record(path):
        assert odd(BrokenModel()) == "ran"
        assert odd({Unordered(), Unordered()}) == "ran"
    assert all("sssss" not in str(w.message) for w in caught)
    first, second = al.read(path).windows("odd")
    assert decode(first.entry_bytes) == {"x": {"unsealable": "BrokenModel"}}
    # The set's items cannot be ordered: the argument map as a whole is the marker.
    assert decode(second.entry_bytes) == {"unsealable": "dict"}
    with pytest.raises(al.ArtifactEncodingError, match="BrokenModel raised RuntimeError"):
        encode(BrokenModel())
