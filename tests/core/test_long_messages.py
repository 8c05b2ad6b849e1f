"""Exception messages are kept up to ``MAX_MESSAGE_CHARS``, cut where no credential is
halved, with the known secrets removed from the whole message first."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentlog as al
from agentlog._scrub import MAX_MESSAGE_CHARS, bounded_text, exception_attributes, scrub_error


class Huge(Exception):
    pass


def test_a_window_raising_a_50_mb_message_keeps_a_readable_trace(tmp_path: Path) -> None:
    """Before: the whole message was scrubbed (7-17 s on the exception's way out) and
    stored, and the default reader refused the file as a compression bomb."""
    exc = Huge("z" * 50_000_000)

    @al.window("boom")
    def boom() -> None:
        raise exc

    path = tmp_path / "t.zst"
    with al.record(path, seed=1), pytest.raises(Huge) as raised:
        boom()
    assert raised.value is exc  # the agent's exception, untouched
    assert al.verify(path).ok  # default limits
    (view,) = al.read(path).windows("boom")
    message = view.exit.error_message
    assert message is not None and len(message) < 100
    assert message.endswith("[50000000 more characters cut by agentlog]")


def test_a_credential_at_the_cut_is_dropped_whole_never_kept_in_part() -> None:
    key = "sk-" + "a" * 40
    text = "x " * (MAX_MESSAGE_CHARS // 2 - 2) + key + " tail" * 10_000
    assert text.index(key) < MAX_MESSAGE_CHARS < text.index(key) + len(key)
    out = scrub_error(ValueError(text))
    assert "sk-" not in out and "aaaa" not in out
    assert out.startswith("x x ") and out.endswith("more characters cut by agentlog]")
    assert len(out) <= MAX_MESSAGE_CHARS + 60


def test_known_secrets_past_the_cut_and_straddling_it_are_removed_first() -> None:
    secret = "correct horse battery staple 9134"  # a declared secret with spaces
    start = MAX_MESSAGE_CHARS - 10  # "correct horse battery" would survive a plain cut
    text = "y" * (start - 1) + " " + secret + " " + "w " * 50_000
    out = bounded_text(text, {secret})
    assert "correct horse" not in out and "<redacted>" in out
    assert bounded_text("short " + secret, {secret}) == "short " + secret  # scrub_text's job


def test_a_message_within_the_bound_is_unchanged_and_the_stack_is_bounded_too() -> None:
    assert scrub_error(ValueError("plain message")) == "plain message"
    try:
        raise Huge("q " * 1_000_000)
    except Huge as exc:
        attrs = exception_attributes(exc, scrub_error(exc))
    assert len(attrs["exception.message"]) <= MAX_MESSAGE_CHARS + 60
    assert len(attrs["exception.stacktrace"]) <= MAX_MESSAGE_CHARS + 60
    assert attrs["exception.stacktrace"].startswith("Traceback")
