"""@al.channel / @al.scorer: registered, versioned channels and scorers."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest

import agentlog as al
from agentlog.records import encode_artifact
from agentlog.registry import registry
from agentlog.replay import (
    NotRegisteredError,
    RegistryCollisionWarning,
    ScoreContext,
    get_channel,
    get_scorer,
)


@pytest.fixture(autouse=True)
def _clean_registries() -> Iterator[None]:
    """Tests register under names of their own; drop them afterwards."""
    yield
    for reg in (registry("channel"), registry("scorer")):
        for name in reg.names():
            if name.startswith("t-"):
                reg.unregister(name)


def test_al_channel_and_al_scorer_are_the_replay_decorators() -> None:
    import agentlog.replay as replay

    assert al.channel is replay.channel and al.scorer is replay.scorer
    assert "channel" in al.__all__ and "scorer" in al.__all__


def test_a_channel_registers_its_view_and_creation_arguments() -> None:
    @al.channel("t-quote", scorer="t-margin", template="Q: {view}", model="m@rev1", layouts=4,
                temperature=0.0)
    def quote(state: Any) -> str | None:
        return "q"

    ch = get_channel("t-quote")
    assert ch.view is quote and quote(None) == "q"  # returned unchanged
    assert (ch.name, ch.scorer, ch.template, ch.model, ch.layouts) == (
        "t-quote", "t-margin", "Q: {view}", "m@rev1", 4)
    assert dict(ch.params) == {"temperature": 0.0}
    assert ch.id == f"{__name__}:test_a_channel_registers_its_view_and_creation_arguments." \
                    "<locals>.quote"
    assert get_channel(ch.id).hash == ch.hash


def test_the_channel_hash_is_the_registry_hash_over_all_creation_arguments() -> None:
    import inspect

    def view(state: Any) -> None:
        return None

    al.channel("t-h", scorer="s", template="T", model="m", layouts=2, k=1)(view)
    params = {"layouts": 2, "model": "m", "params": {"k": 1}, "scorer": "s", "template": "T"}
    source = hashlib.sha256(inspect.getsource(view).encode()).hexdigest()
    expected = hashlib.sha256(encode_artifact(
        ["channel", get_channel("t-h").id, encode_artifact(params), source])).hexdigest()
    assert get_channel("t-h").hash == expected


@pytest.mark.parametrize("change", [
    {"template": "T2"}, {"model": "m2"}, {"layouts": 3}, {"scorer": "s2"}, {"k": 2},
    {"extra": True},
])
def test_changing_any_creation_argument_changes_the_channel_hash(change: dict[str, Any]
                                                                 ) -> None:
    def view(state: Any) -> None:
        return None

    base: dict[str, Any] = {"scorer": "s", "template": "T", "model": "m", "layouts": 2, "k": 1}
    al.channel("t-v", **base)(view)
    before = get_channel("t-v").hash
    al.channel("t-v", **{**base, **change})(view)
    assert get_channel("t-v").hash != before


def test_the_same_channel_name_from_another_function_warns() -> None:
    @al.channel("t-dup", scorer="s")
    def first(state: Any) -> None:
        return None

    with pytest.warns(RegistryCollisionWarning, match=r"channel name 't-dup' was registered "
                                                      r"by .*first .*the last one wins"):
        @al.channel("t-dup", scorer="s")
        def second(state: Any) -> None:
            return None

    assert get_channel("t-dup").view is second


def test_a_scorer_registers_with_params_and_knows_whether_it_takes_a_context() -> None:
    @al.scorer("t-plain", scale=2.0)
    def plain(state: Any, view: str | None, layout: int) -> float:
        return 1.0

    @al.scorer("t-ctx")
    def with_context(state: Any, view: str | None, layout: int, *,
                     context: ScoreContext) -> float:
        return 1.0

    @al.scorer("t-async")
    async def asynchronous(state: Any, view: str | None, layout: int) -> float:
        return 1.0

    p, c, a = get_scorer("t-plain"), get_scorer("t-ctx"), get_scorer("t-async")
    assert dict(p.params) == {"scale": 2.0} and p.fn is plain
    assert (p.takes_context, c.takes_context, a.takes_context) == (False, True, False)
    assert (p.is_async, c.is_async, a.is_async) == (False, False, True)
    assert len({p.hash, c.hash, a.hash}) == 3


def test_an_unknown_channel_lists_the_registered_ones_and_says_to_pass_app() -> None:
    @al.channel("t-known", scorer="s")
    def known(state: Any) -> None:
        return None

    with pytest.raises(NotRegisteredError,
                       match=r"no channel named 't-unknown' is registered \(registered "
                             r"channels: .*t-known.*\)\. Pass the module that registers it "
                             r"with --app MODULE"):
        get_channel("t-unknown")
    with pytest.raises(NotRegisteredError, match=r"no scorer named 't-nope' is registered"):
        get_scorer("t-nope")


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"name": "", "scorer": "s"}, TypeError, r"@al.channel\(name\) needs a non-empty name"),
    ({"name": " q", "scorer": "s"}, TypeError, r"without surrounding spaces.*found ' q'"),
    ({"name": "q", "scorer": ""}, TypeError, r"channel 'q': `scorer` must name a registered "
                                             r"scorer"),
    ({"name": "q", "scorer": "s", "template": 3}, TypeError,
     r"channel 'q': `template` must be a str or None; found int"),
    ({"name": "q", "scorer": "s", "layouts": 0}, ValueError,
     r"channel 'q': `layouts` must be an int >= 1 \(the number of cyclic layouts\); found 0"),
    ({"name": "q", "scorer": "s", "layouts": True}, ValueError, r"found True"),
])
def test_bad_channel_arguments_are_refused(kwargs: dict[str, Any], error: type[Exception],
                                           message: str) -> None:
    with pytest.raises(error, match=message):
        al.channel(**kwargs)


def test_a_channel_parameter_without_a_canonical_encoding_is_refused_at_decoration() -> None:
    with pytest.raises(al.ArtifactEncodingError, match=r"channel 't-bad' creation arguments"):
        @al.channel("t-bad", scorer="s", readout=object())
        def bad(state: Any) -> None:
            return None


def test_decorating_a_non_callable_is_refused() -> None:
    with pytest.raises(TypeError, match=r"@al.scorer\('t-x'\) decorates score\(state, view, "
                                        r"layout\) -> float; found int"):
        al.scorer("t-x")(3)  # type: ignore[type-var]
