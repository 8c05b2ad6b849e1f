"""The C reader of SDK response bodies (``_fast_dump.c``) against pydantic's model_dump.

``dump_body`` reads a response model's set and extra fields in C when every model class
in it is vetted (no custom serializer, computed or excluded field, alias dumping), and
asks ``model_dump(mode="json", exclude_unset=True)`` otherwise. Every test here holds the
result to model_dump; the adapters' conftest does the same for every response recorded.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Annotated, Any

import pydantic
import pytest

from agentlog.adapters import _recording
from tests.adapters._providers import FakeProvider, anthropic_client, chat_body, openai_client

reader = _recording._dump_set_fields
pytestmark = pytest.mark.skipif(reader is None, reason="the C reader was not built")

ASK = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "A or B?"}],
       "logprobs": True, "top_logprobs": 5}


def read_in_c(obj: Any) -> dict[str, Any]:
    """dump_body's result, failing when it did not come from the C reader."""
    body = _recording.dump_body(obj)
    assert type(reader(obj, _recording._vetted)) is dict, "the C reader did not read it"
    return body


def test_the_sdks_responses_are_read_in_c_as_model_dump_reads_them() -> None:
    provider = FakeProvider()
    chat = openai_client(provider).chat.completions.create(**ASK)
    responses = openai_client(provider).responses.create(model="gpt-4.1-mini", input="hi")
    message = anthropic_client(provider).messages.create(
        model="claude-opus-4-7", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    for obj in (chat, responses, message):
        assert read_in_c(obj) == obj.model_dump(mode="json", exclude_unset=True)
    assert "_request_id" not in read_in_c(chat)  # in __dict__, not a field


class Leaf(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    x: float
    unset: int = 7
    items: tuple[int, ...] = ()


class Tree(pydantic.BaseModel):
    name: str
    leaves: list[Leaf]
    meta: dict[str, Any] | None = None


def test_set_fields_extras_tuples_and_non_finite_floats_as_model_dump_gives_them() -> None:
    tree = Tree.model_construct(name="t", leaves=[
        Leaf.model_construct(x=math.nan, items=(1, 2), note="extra"),
        Leaf(x=math.inf), Leaf.model_construct(x=-0.0)])
    body = read_in_c(tree)
    want = tree.model_dump(mode="json", exclude_unset=True)
    assert repr(body) == repr(want)  # nan == nan is False: compare the reprs
    assert body["leaves"][0] == {"x": body["leaves"][0]["x"], "items": [1, 2], "note": "extra"}
    assert "meta" not in body and "unset" not in body["leaves"][1]


class WithSerializer(pydantic.BaseModel):
    n: int

    @pydantic.field_serializer("n")
    def _n(self, n: int) -> str:
        return f"#{n}"


class WithComputed(pydantic.BaseModel):
    n: int

    @pydantic.computed_field  # type: ignore[prop-decorator]
    @property
    def twice(self) -> int:
        return 2 * self.n


class WithExcluded(pydantic.BaseModel):
    n: int
    hidden: str = pydantic.Field(default="h", exclude=True)


class WithAnnotatedSerializer(pydantic.BaseModel):
    n: list[Annotated[int, pydantic.PlainSerializer(lambda v: str(v))]]


class ByAlias(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(serialize_by_alias=True)
    n: int = pydantic.Field(alias="N")


class WithModelSerializer(pydantic.BaseModel):
    n: int

    @pydantic.model_serializer
    def _all(self) -> dict[str, Any]:
        return {"value": self.n}


class Holder(pydantic.BaseModel):
    inner: Any


@pytest.mark.parametrize("obj", [
    WithSerializer(n=1), WithComputed(n=2), WithExcluded(n=3, hidden="x"),
    WithAnnotatedSerializer(n=[4, 5]), ByAlias(N=6), WithModelSerializer(n=7),
    Holder(inner=WithSerializer(n=8)),            # a refused class below a plain one
    Holder(inner={1: "int key"}),                 # JSON mode turns the key into "1"
    Holder(inner=dt.datetime(2026, 12, 1, 12, 0)),  # an isoformat string in JSON mode
    Holder(inner=b"raw"), Holder(inner={"s": {1, 2}}),
], ids=lambda o: type(o).__name__ + ":" + type(getattr(o, "inner", None)).__name__)
def test_what_the_reader_cannot_vouch_for_is_left_to_model_dump(obj: Any) -> None:
    got = _recording.dump_body(obj)
    assert got == obj.model_dump(mode="json", exclude_unset=True)
    assert type(reader(obj, _recording._vetted)) is not dict


def test_a_model_nested_past_the_depth_limit_is_left_to_model_dump() -> None:
    deep: Any = "leaf"
    for _ in range(230):  # past the reader's 200 levels, within pydantic's 254
        deep = [deep]
    obj = Holder(inner=deep)
    assert reader(obj, _recording._vetted | {Holder}) is None
    assert _recording.dump_body(obj) == obj.model_dump(mode="json", exclude_unset=True)


def test_the_reader_returns_the_first_unvetted_class_then_reads_once_it_is_vetted() -> None:
    tree = Tree(name="t", leaves=[Leaf(x=1.0)])
    vetted: set[type] = set()
    assert reader(tree, vetted) is Tree
    vetted.add(Tree)
    assert reader(tree, vetted) is Leaf
    vetted.add(Leaf)
    assert reader(tree, vetted) == {"name": "t", "leaves": [{"x": 1.0}]}
    assert reader("not a model", vetted) is None and reader(3, vetted) is None
    with pytest.raises(TypeError):
        reader(tree, [Tree, Leaf])  # type: ignore[arg-type]


def _deep_client(depth: int) -> Any:
    import httpx2
    import openai


    nested: Any = "leaf"
    for _ in range(depth):
        nested = [nested]
    body = {**chat_body(), "nested_extra": nested}
    transport = httpx2.MockTransport(lambda request: httpx2.Response(200, json=body))
    return openai.OpenAI(api_key="sk-x", max_retries=0,
                         http_client=httpx2.Client(transport=transport))


@pytest.mark.parametrize("cached", [False, True])
def test_a_response_pydantic_cannot_dump_still_returns_and_is_recorded_without_body(
        tmp_path: Any, cached: bool) -> None:
    """Before: model_dump's "Maximum serialization depth exceeded" raised into the call,
    after the SDK had returned the response."""
    import agentlog as al
    from agentlog.adapters import openai as adapter
    from agentlog.replay import ModelCache

    with ModelCache(path=tmp_path / "c.sqlite") as cache:
        client = adapter.wrap(_deep_client(300), cache=cache if cached else None)
        with al.record(tmp_path / "t.zst", seed=1), pytest.warns(
                al.InstrumentationWarning, match="could not be read for the record"):
            reply = client.chat.completions.create(**ASK)
        assert reply.choices[0].message.content == chat_body()["choices"][0]["message"]["content"]
        if cached:
            # One upstream call, nothing stored: the next identical call goes upstream again.
            assert cache.stats()["upstream_calls"] == 1 and cache.stats()["hits"] == 0
    (call,) = al.read(tmp_path / "t.zst").llm_calls()
    assert call.status == 0 and call.model == "gpt-4o-mini"


def test_a_class_whose_vetting_fails_is_refused_and_dumped_by_pydantic(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def moved(cls: type) -> bool:
        raise AttributeError("__pydantic_core_schema__")  # a pydantic whose internals moved

    class Fresh(pydantic.BaseModel):
        n: int

    monkeypatch.setattr(_recording, "_plain_model_class", moved)
    assert _recording.dump_body(Fresh(n=1)) == {"n": 1}
    assert Fresh in _recording._refused and Fresh not in _recording._vetted


def test_the_class_verdicts_stay_bounded_with_a_class_made_per_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_recording, "_MAX_VERDICTS", 50)
    monkeypatch.setattr(_recording, "_vetted", set())
    for i in range(120):
        model = pydantic.create_model(f"Answer{i}", n=(int, ...))
        assert _recording.dump_body(model(n=i)) == {"n": i}
        assert len(_recording._vetted) <= 50
