"""Fixtures of the recording core's tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import agentlog._writer.frames as frames_mod


@pytest.fixture
def stalled(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Frames block in the OS write until the returned event is set (then all go through)."""
    release = threading.Event()
    real = frames_mod._writev

    def stuck(fd: int, parts: list[bytes]) -> int:
        release.wait(30)
        return real(fd, parts)

    monkeypatch.setattr(frames_mod, "_writev", stuck)
    yield release
    release.set()
