"""Credential names outside the exact lists, and ``name=value`` pairs inside strings.

An outside attack found ``bot_token``, ``private_token``, ``pwd``, ``dbPassword``,
``signing_key`` and a ``token=…`` pair inside a meta string reaching the trace. Usage
counts (``max_tokens``, ``input_tokens``) and a tokenizer's ``eos_token`` must stay.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import agentlog as al

CANARIES = {
    "bot_token": "xoxb-canary-bot-0001",
    "private_token": "glpat-canary-0002",
    "pwd": "canary-pwd-0003",
    "dbPassword": "canary-db-0004",
    "signing_key": "canary-signing-0005",
    "webhookSecret": "canary-webhook-0006",
}
PAIR = "canary-pair-0007"


@pytest.mark.parametrize("name", [*CANARIES, "X-Bot-Token", "clientPwd", "db_passwd"])
def test_widened_names_are_credentials(name: str) -> None:
    from agentlog._scrub import is_credential_name

    assert is_credential_name(name)


@pytest.mark.parametrize("name", ["max_tokens", "input_tokens", "total_tokens", "eos_token",
                                  "pad_token", "next_page_token", "token_count", "keys",
                                  "monkey", "passage"])
def test_counts_and_tokenizer_fields_are_not(name: str) -> None:
    from agentlog._scrub import is_credential_name

    assert not is_credential_name(name)


@al.window("connect")
def connect(settings: dict[str, object]) -> str:
    return f"connected with {len(settings)} settings"


def test_none_of_them_reaches_the_trace_and_counts_stay(tmp_path: Path) -> None:
    path = tmp_path / "t.zst"
    meta = {**CANARIES, "conn": f"host=db.internal token={PAIR} sslmode=require",
            "max_tokens": 512, "usage": {"input_tokens": 31, "output_tokens": 2},
            "eos_token": "</s>", "note": "token: 3 per call"}
    with al.record(path, seed=1, meta=meta, mode="w"):
        connect(dict(meta))
    al.flush()
    data = repr(list(al.iter_records(path)))
    for secret in [*CANARIES.values(), PAIR]:
        assert secret not in data, secret
    start = al.read(path).runs[0].start
    assert start is not None
    kept = start.meta
    assert kept["max_tokens"] == 512 and kept["usage"] == {"input_tokens": 31,
                                                           "output_tokens": 2}
    assert kept["eos_token"] == "</s>" and kept["note"] == "token: 3 per call"
    assert kept["conn"] == "host=db.internal token=<redacted> sslmode=require"
    assert all(kept[k] == "<redacted>" for k in CANARIES)
