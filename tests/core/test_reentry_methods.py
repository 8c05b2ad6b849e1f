"""Re-entering windows on methods and windows with ``entry=``; tools served from a trace."""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.records import WindowView, decode_artifact
from agentlog.reentry import tool_args_hash
from agentlog.replay import reenter_arguments, tool_result, window_function


class Planner:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    @al.window("reentry_method")
    def plan(self, question: str, depth: int = 2) -> str:
        return f"{self.prefix}{question}/{depth}"


def record_method(path: Path) -> WindowView:
    with al.record(path, seed=0, mode="w"):
        Planner("p:").plan("why", depth=3)
    return al.read(path).windows("reentry_method")[0]


def test_a_method_window_records_that_its_self_is_not_in_the_entry(tmp_path: Path) -> None:
    view = record_method(tmp_path / "a.zst")
    assert view.enter.method is True
    assert view.entry_value() == {"question": "why", "depth": 3}
    assert view.enter.function == f"{__name__}:Planner.plan"


def test_a_method_window_without_an_instance_says_what_to_pass(tmp_path: Path) -> None:
    view = record_method(tmp_path / "a.zst")
    with pytest.raises(ValueError, match=r"is a method \(.*Planner\.plan\): its `self` is not "
                                         r"recorded\. Pass instance=<the object>, or "
                                         r"instance=<a factory\(view\)"):
        reenter_arguments(view)


def test_a_method_window_reenters_with_an_instance_or_a_factory(tmp_path: Path) -> None:
    view = record_method(tmp_path / "a.zst")
    fn = window_function(view)
    args, kwargs = reenter_arguments(view, instance=Planner("p:"))
    assert fn(*args, **kwargs) == view.exit_value() == "p:why/3"
    seen: list[WindowView] = []

    def factory(v: WindowView) -> Planner:
        seen.append(v)
        return Planner("p:")

    args, kwargs = reenter_arguments(view, instance=factory)
    assert seen == [view] and fn(*args, **kwargs) == "p:why/3"
    args, _ = reenter_arguments(view, instance=functools.partial(lambda p, v: Planner(p), "q:"))
    assert fn(*args) == "q:why/3"


def test_instance_on_a_plain_function_window_is_refused(tmp_path: Path) -> None:
    @al.window("reentry_fn")
    def f(x: int) -> int:
        return x

    with al.record(tmp_path / "a.zst", seed=0):
        f(1)
    (view,) = al.read(tmp_path / "a.zst").windows("reentry_fn")
    with pytest.raises(ValueError, match=r"is not a method; drop instance="):
        reenter_arguments(view, instance=object())


class Doc:
    """No canonical encoding: only a projection can seal a window that takes it."""

    def __init__(self, text: str) -> None:
        self.text = text


@al.window("reentry_projected", entry=lambda docs, k, api_key: sorted(docs)[:k])
def top(docs: list[str], k: int, api_key: str) -> list[str]:
    return sorted(docs)[:k]


def test_a_projected_window_reenters_from_its_stored_argument_artifact(tmp_path: Path) -> None:
    with al.record(tmp_path / "a.zst", seed=0):
        top(["c", "a", "b"], 2, api_key="sk-live-0123456789abcdef")
    (view,) = al.read(tmp_path / "a.zst").windows("reentry_projected")
    assert view.entry_value() == ["a", "b"]
    stored = view.arguments_bytes
    assert stored is not None
    # scrubbed like every artifact: the key never reaches the file
    assert decode_artifact(stored) == {"docs": ["c", "a", "b"], "k": 2, "api_key": "<redacted>"}
    assert b"sk-live" not in (tmp_path / "a.zst").read_bytes()
    with pytest.raises(ValueError, match=r"argument `api_key`.*secrets=\{'api_key'"):
        reenter_arguments(view)
    args, kwargs = reenter_arguments(view, secrets={"api_key": "sk-live-0123456789abcdef"})
    assert args == (["c", "a", "b"], 2, "sk-live-0123456789abcdef") and kwargs == {}
    assert window_function(view)(*args, **kwargs) == view.exit_value()


def test_a_projected_window_whose_arguments_had_no_encoding_is_refused(tmp_path: Path) -> None:
    @al.window("reentry_unencodable", entry=lambda doc: doc.text)
    def read_doc(doc: Doc) -> str:
        return doc.text

    with al.record(tmp_path / "a.zst", seed=0):
        read_doc(Doc("hello"))
    (view,) = al.read(tmp_path / "a.zst").windows("reentry_unencodable")
    assert view.arguments_bytes is None
    with pytest.raises(ValueError, match=r"has an entry= projection and its arguments had no "
                                         r"canonical encoding, so they were not stored"):
        reenter_arguments(view)


# ------------------------------------------------------------------------------ tools


@al.tool("reentry_search", secret=("session",))
def search(query: str, session: str, n: int = 2) -> list[str]:
    if query == "boom":
        raise RuntimeError("search backend down")
    return [f"{query}-{i}" for i in range(n)]


@al.window("reentry_tools", secret=("session",))
def research(query: str, session: str) -> list[str]:
    out = search(query, session)
    out += search(query * 3000, session, n=1)  # a large argument and result: Blobs
    with contextlib.suppress(RuntimeError):
        search("boom", session)
    return out


def test_tool_arguments_and_results_are_stored_and_served(tmp_path: Path) -> None:
    path = tmp_path / "a.zst"
    with al.record(path, seed=0):
        research("q", "sess-secret-value")
    trace = al.read(path)
    (view,) = trace.windows("reentry_tools")
    small, large, failed = trace.tool_calls("reentry_search")
    assert failed.status == 1 and failed.result is None
    assert small.args is not None and small.result is not None  # inline (small)
    assert decode_artifact(small.args) == {"query": "q", "session": "<redacted>", "n": 2}
    assert large.args is None and large.result is None and trace.has_blob(large.result_hash)
    assert b"sess-secret-value" not in path.read_bytes()

    def lookup(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return tool_result(trace, run=view.run, window=view.window, name="reentry_search",
                           args_hash=tool_args_hash(search, args, kwargs))

    assert lookup(("q", "sess-secret-value"), {}) == ["q-0", "q-1"]
    assert lookup(("q" * 3000,), {"session": "other", "n": 1}) == ["q" * 3000 + "-0"]
    with pytest.raises(al.ReplayError, match=r"the recorded call failed \(RuntimeError: search "
                                             r"backend down\)"):
        lookup(("boom", "x"), {})
    with pytest.raises(al.CacheMiss, match=r"tool 'reentry_search' in run 0, window 0 of .*: no "
                                           r"call with arguments [0-9a-f]{16}… was recorded"):
        lookup(("other", "x"), {})


def test_tool_args_hash_refuses_a_function_that_is_not_a_tool() -> None:
    with pytest.raises(TypeError, match=r"is not an @al.tool function"):
        tool_args_hash(top, (), {})


def test_a_trace_without_stored_tool_results_is_a_cache_miss(tmp_path: Path) -> None:
    """Older traces hashed small results without storing them."""
    import msgspec

    from agentlog.replay._reentry import _served

    path = tmp_path / "a.zst"
    with al.record(path, seed=0):
        research("q", "s")
    trace = al.read(path)
    old = msgspec.structs.replace(trace.tool_calls("reentry_search")[0], args=None,
                                  result=None)
    with pytest.raises(al.CacheMiss, match=r"hashed but not stored \(a trace recorded before "
                                           r"agentlog kept tool results\)"):
        _served(trace, old, "tool 'reentry_search'")
