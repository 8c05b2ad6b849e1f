"""The generic registry: names to versioned objects, keyed by module:qualname."""

from __future__ import annotations

import hashlib
import importlib
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.records import encode_artifact
from agentlog.registry import Registered, Registry, object_id
from agentlog.replay import (
    NotRegisteredError,
    RegistryCollisionWarning,
)


def first(state: Any) -> str:
    return str(state)


def second(state: Any) -> str:
    return repr(state)


class ViewClass:
    def __call__(self, state: Any) -> str:
        return "x"


def test_register_returns_an_entry_with_kind_name_id_params_and_a_sha256_hash() -> None:
    reg = Registry("channel")
    entry = reg.register("quote", first, {"template": "Q: {view}", "layouts": (0, 1)})
    assert isinstance(entry, Registered)
    assert (entry.kind, entry.name, entry.id) == ("channel", "quote", f"{__name__}:first")
    assert entry.obj is first
    assert dict(entry.params) == {"template": "Q: {view}", "layouts": [0, 1]}
    assert len(entry.hash) == 64 and int(entry.hash, 16) >= 0
    assert reg.get("quote") is entry and reg.get(entry.id) is entry
    assert reg.names() == ["quote"] and "quote" in reg and len(reg) == 1


def test_the_hash_is_sha256_of_kind_id_canonical_params_and_source_digest() -> None:
    import inspect

    entry = Registry("scorer").register("margin", first, {"b": 2, "a": 1})
    source = hashlib.sha256(inspect.getsource(first).encode()).hexdigest()
    params = encode_artifact({"a": 1, "b": 2})
    expected = hashlib.sha256(encode_artifact(["scorer", entry.id, params, source])).hexdigest()
    assert entry.source_digest == source
    assert entry.hash == expected


def test_the_hash_changes_with_any_parameter_and_not_with_their_order() -> None:
    reg = Registry("channel")
    base = reg.register("c", first, {"model": "m1", "template": "t"}).hash
    assert reg.register("c", first, {"template": "t", "model": "m1"}).hash == base
    assert reg.register("c", first, {"model": "m2", "template": "t"}).hash != base
    assert reg.register("c", first, {"model": "m1", "template": "t", "layouts": 4}).hash != base
    assert reg.register("c", first, None).hash != base


def test_the_hash_differs_between_kinds_for_the_same_object() -> None:
    a = Registry("channel").register("x", first).hash
    b = Registry("scorer").register("x", first).hash
    assert a != b


def _load(tmp_path: Path, name: str, body: str) -> Any:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))
    sys.path.insert(0, str(tmp_path))
    try:
        sys.modules.pop(name, None)
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))


def test_the_hash_covers_the_source_code_of_the_registered_object(tmp_path: Path) -> None:
    reg = Registry("channel")
    (tmp_path / "v1").mkdir()
    (tmp_path / "v2").mkdir()
    mod = _load(tmp_path / "v1", "agentlog_reg_src_mod", "def view(state):\n    return 'v1'\n")
    before = reg.register("v", mod.view).hash
    # The same module:qualname with an edited body: a new version of the channel.
    mod2 = _load(tmp_path / "v2", "agentlog_reg_src_mod", "def view(state):\n    return 'v2'\n")
    after = reg.register("v", mod2.view).hash
    assert object_id(mod.view) == object_id(mod2.view)
    assert before != after
    sys.modules.pop("agentlog_reg_src_mod", None)


def test_an_object_without_source_gets_no_digest_and_still_a_hash() -> None:
    reg = Registry("scorer")
    entry = reg.register("len", len)
    assert entry.source_digest is None
    assert entry.id == "builtins:len" and len(entry.hash) == 64


def test_a_class_instance_is_keyed_by_its_class() -> None:
    entry = Registry("scorer").register("cls", ViewClass())
    assert entry.id == f"{__name__}:ViewClass"
    assert entry.source_digest is not None


def test_same_name_from_a_different_object_warns_and_the_last_one_wins() -> None:
    reg = Registry("channel")
    reg.register("quote", first)
    with pytest.warns(RegistryCollisionWarning,
                      match=r"channel name 'quote' was registered by .*:first and is now "
                            r"registered again by .*:second; the last one wins"):
        entry = reg.register("quote", second)
    assert reg.get("quote") is entry and entry.obj is second
    # The overwritten object stays reachable by its id.
    assert reg.get(f"{__name__}:first").obj is first


def test_a_registry_with_shared_names_keeps_every_object_under_a_name_without_warning(
        ) -> None:
    reg = Registry("window", shared_names=True)
    a = reg.register("retrieval", first)
    b = reg.register("retrieval", second)  # filterwarnings=error: no collision warning
    assert reg.ids("retrieval") == [a.id, b.id]
    assert reg.get(a.id) is a and reg.get(b.id) is b and reg.get("retrieval") is b
    reg.register("retrieval", first)  # a reload moves it to the end, once
    assert reg.ids("retrieval") == [b.id, a.id] and len(reg) == 1
    reg.unregister("retrieval")
    assert reg.ids("retrieval") == [] and a.id not in reg and b.id not in reg


def test_windows_live_in_the_one_registry_with_their_function_ids() -> None:
    from agentlog._window.registry import WINDOWS, registered_window

    @al.window("registry-test-window")
    def step(x: int) -> int:
        return x

    entry = WINDOWS.get(f"{__name__}:{step.__qualname__}")
    assert (entry.kind, entry.name, entry.obj) == ("window", "registry-test-window", step)
    assert entry.source_digest is not None and len(entry.hash) == 64
    assert registered_window("registry-test-window", entry.id) is step
    WINDOWS.unregister("registry-test-window")
    with pytest.raises(NotRegisteredError, match="no window 'registry-test-window'"):
        registered_window("registry-test-window")


def test_re_registering_the_same_id_replaces_it_silently() -> None:
    reg = Registry("channel")
    reg.register("quote", first, {"v": 1})
    # filterwarnings=error: any warning here would fail the test.
    entry = reg.register("quote", first, {"v": 2})
    assert reg.get("quote") is entry and dict(entry.params) == {"v": 2}


def test_get_of_an_unknown_name_lists_the_registered_names_and_says_to_pass_app() -> None:
    reg = Registry("channel")
    reg.register("quote", first)
    reg.register("direct", second)
    with pytest.raises(NotRegisteredError,
                       match=r"no channel named 'gen' is registered \(registered channels: "
                             r"direct, quote\)\. Pass the module that registers it with "
                             r"--app MODULE") as info:
        reg.get("gen")
    assert isinstance(info.value, KeyError)
    with pytest.raises(KeyError, match=r"registered channels: none"):
        Registry("channel").get("quote")


def test_params_without_a_canonical_encoding_are_refused_with_what_to_pass() -> None:
    with pytest.raises(al.ArtifactEncodingError,
                       match=r"channel 'c' creation arguments: cannot seal.*pass plain data"):
        Registry("channel").register("c", first, {"readout": threading.Lock()})


@pytest.mark.parametrize(("name", "params", "message"), [
    ("", None, r"a channel needs a non-empty string name, got ''"),
    (3, None, r"a channel needs a non-empty string name, got 3"),
    ("c", [("a", 1)], r"channel 'c': `params` must be a mapping of creation arguments, got list"),
    ("c", {1: "a"}, r"channel 'c': creation-argument names must be strings, got \[1\]"),
])
def test_bad_names_and_params_are_refused(name: Any, params: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        Registry("channel").register(name, first, params)


def test_the_params_of_an_entry_are_read_only() -> None:
    entry = Registry("channel").register("c", first, {"a": 1})
    with pytest.raises(TypeError):
        entry.params["a"] = 2  # type: ignore[index]


def test_concurrent_registration_keeps_every_name() -> None:
    reg = Registry("scorer")

    def work(i: int) -> None:
        for j in range(50):
            reg.register(f"s{i}-{j}", first)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(reg.names()) == 200


def test_unregister_forgets_a_name_and_its_id() -> None:
    reg = Registry("channel")
    entry = reg.register("quote", first)
    reg.unregister("quote")
    reg.unregister("never-registered")
    assert "quote" not in reg and entry.id not in reg and reg.names() == []
