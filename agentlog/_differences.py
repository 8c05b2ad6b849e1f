"""How two argument maps differ, path by path: what a cache miss and a refused shared entry
both tell the user (``adapters._cache``, ``estimators._admissibility``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ABSENT: Any = object()  # a path one of the two maps does not have


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        if not value:
            out[prefix] = {}
        for k, v in value.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list):
        if not value:
            out[prefix] = []
        for i, v in enumerate(value):
            _flatten(v, f"{prefix}[{i}]", out)
    else:
        out[prefix] = value


def differences(mine: Mapping[str, Any], other: Mapping[str, Any]
                ) -> dict[str, tuple[Any, Any]]:
    """``{"sampling.temperature": (0.3, 1.0), "tools[1]": (ABSENT, "search")}``: each leaf
    path whose value (or its type: ``1`` against ``1.0``) differs, in sorted order."""
    a: dict[str, Any] = {}
    b: dict[str, Any] = {}
    _flatten(mine, "", a)
    _flatten(other, "", b)
    pairs = ((path, a.get(path, ABSENT), b.get(path, ABSENT))
             for path in sorted(a.keys() | b.keys()))
    return {path: (x, y) for path, x, y in pairs if x != y or type(x) is not type(y)}
