"""The core credential scrubber, for the packages built on the core (adapters, replay).

The same functions every trace and span path uses (one scrubber, one set of rules): names
that hold credentials (``api_key``, ``Authorization``, ``*_password``, ...), credential
formats inside strings (``sk-…`` keys, ``Bearer …`` tokens, the userinfo of URLs) and
known secret values. The rules: docs/how-to/secrets.md.

Examples:
    >>> from agentlog.scrubbing import is_credential_name, scrub_value
    >>> scrub_value({"max_tokens": 4, "extra_body": {"api_key": "abcd1234"}})
    {'max_tokens': 4, 'extra_body': {'api_key': '<redacted>'}}
    >>> is_credential_name("X-Api-Key"), is_credential_name("max_tokens")
    (True, False)
"""

from __future__ import annotations

from ._scrub import (
    REDACTED,
    is_credential_name,
    may_change,
    may_hold_secret,
    scrub_text,
    scrub_value,
)

__all__ = ["REDACTED", "is_credential_name", "may_change", "may_hold_secret", "scrub_text",
           "scrub_value"]
