"""``agentlog.records.artifact_differences``: the one description of how two argument maps
differ, which a cache miss and a refused shared entry both print."""

from __future__ import annotations

from agentlog.records import ABSENT, artifact_differences


def test_leaf_paths_that_differ_in_value_type_or_presence_are_listed_in_order() -> None:
    mine = {"model": "m", "sampling": {"temperature": 0.3, "top_p": 1}, "tools": ["a", "b"]}
    other = {"model": "m", "sampling": {"temperature": 1.0, "top_p": 1.0}, "tools": ["a"],
             "seed": 7}
    assert artifact_differences(mine, other) == {
        "sampling.temperature": (0.3, 1.0),
        "sampling.top_p": (1, 1.0),  # equal numbers, another type: another request
        "seed": (ABSENT, 7),
        "tools[1]": ("b", ABSENT),
    }
    assert artifact_differences(mine, mine) == {}


def test_empty_containers_are_leaves() -> None:
    assert artifact_differences({"a": {}, "b": []}, {"a": {"x": 1}, "b": []}) == {
        "a": ({}, ABSENT), "a.x": (ABSENT, 1)}
