"""Placeholder: the Ray executor lands in a later commit."""

from __future__ import annotations

from typing import Any


async def run_ray(*args: Any, **kwargs: Any) -> None:
    raise NotImplementedError("executor='ray' is not implemented yet")
