"""The credentials a wrapped model client was built with, in every form a server may echo.

``client_secrets`` collects them once per wrapped client (its API key, credential default
headers, ``base_url`` userinfo); ``al.llm_call`` takes them as the call's known secrets,
and ``stored_body`` removes their exact values from a body before the model cache stores
it.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from agentlog.scrubbing import REDACTED, is_credential_name

__all__ = ["client_secrets", "request_secrets", "stored_body"]


# A header whose name says it carries a credential, beyond the credential names themselves
# (``Helicone-Auth``, ``X-Portkey-Api-Key``, ``X-Signature``); ``User-Agent``,
# ``X-Stainless-*`` and ``OpenAI-Organization`` are not.
_CREDENTIAL_HEADER = re.compile(r"key|token|auth|secret|pass|pwd|cookie|credential|signature",
                                re.IGNORECASE)
_SCHEMES = ("bearer", "basic", "token")


def client_secrets(client: Any, secret_attrs: Sequence[str] = ()) -> tuple[str, ...]:
    """Every credential ``client`` was built with, in each form a server may echo back.

    A provider (or a proxy in front of it) that refuses a call often quotes what it was
    sent: the API key, a default header (``X-Api-Key``), or the ``Authorization: Basic``
    header that the HTTP client makes from a ``base_url`` with ``user:password@``. These
    values are handed to ``al.llm_call`` as the call's known secrets, so they are removed
    from its recorded request, response and error message, from its span, and from the
    bodies the model cache stores. Forms: the attributes ``secret_attrs`` (``api_key``),
    the values of the client's default headers whose name marks a credential (and the
    token after ``Bearer``/``Basic``, with a Basic token's decoded ``user:password`` and
    password), and the URL's userinfo: ``user:password``, the password, raw, decoded and
    percent-encoded, and the base64 of ``user:password`` as Basic auth sends it (the user
    name alone only when there is no password: a key given as the user name).
    """
    found: list[str] = []
    for attr in secret_attrs:
        value = getattr(client, attr, None)
        if isinstance(value, str):
            found.append(value)
    try:
        headers = getattr(client, "default_headers", None)
        items = list(headers.items()) if isinstance(headers, Mapping) else []
    except Exception:  # a client whose headers cannot be listed keeps its other secrets
        items = []
    for name, value in items:
        if isinstance(name, str) and isinstance(value, str) and (
                is_credential_name(name) or _CREDENTIAL_HEADER.search(name)):
            found.extend(_header_forms(value))
    found.extend(_userinfo_forms(str(getattr(client, "base_url", "") or "")))
    return tuple(dict.fromkeys(v for v in found if v and v != REDACTED))


def request_secrets(headers: Any, url: str) -> tuple[str, ...]:
    """The credentials one HTTP request carries, in each form a server may echo back: the
    values of its credential headers (``Authorization``, ``X-Api-Key``, ...) and the
    userinfo of its URL (the forms ``client_secrets`` lists)."""
    found: list[str] = []
    try:
        items = list(headers.items())
    except Exception:  # headers that cannot be listed: the URL's userinfo still counts
        items = []
    for name, value in items:
        if isinstance(name, str) and isinstance(value, str) and (
                is_credential_name(name) or _CREDENTIAL_HEADER.search(name)):
            found.extend(_header_forms(value))
    found.extend(_userinfo_forms(url))
    return tuple(dict.fromkeys(v for v in found if v and v != REDACTED))


def _header_forms(value: str) -> list[str]:
    forms = [value]
    scheme, _, token = value.strip().partition(" ")
    token = token.strip()
    if token and scheme.lower() in _SCHEMES:
        forms.append(token)
        if scheme.lower() == "basic":
            try:
                pair = base64.b64decode(token, validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                return forms
            user, _, password = pair.partition(":")
            forms.extend([pair, password] if password else [user])
    return forms


def _userinfo_forms(url: str) -> list[str]:
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return []
    userinfo, at, _ = netloc.rpartition("@")
    if not at or not userinfo:
        return []
    raw_user, _, raw_password = userinfo.partition(":")
    user, password = unquote(raw_user), unquote(raw_password)
    forms = [userinfo, f"{user}:{password}"]
    if password:
        forms += [raw_password, password, quote(password, safe=""), quote(password)]
    else:
        forms += [raw_user, user, quote(user, safe="")]
    for pair in {f"{user}:{password}", userinfo}:
        token = base64.b64encode(pair.encode()).decode()
        forms += [token, token.rstrip("=")]
    return forms


def stored_body(body: dict[str, Any], secrets: Sequence[str]) -> dict[str, Any]:
    """``body`` as the model cache may store it: without the client's own credentials.

    Only their exact values are replaced (a response that echoes the key a proxy was
    sent); everything else stays as the server sent it, so a cache hit answers as the
    live call did. Returns ``body`` itself when it holds none of them.
    """
    if not secrets or not isinstance(body, dict):
        return body
    try:
        text = json.dumps(body, ensure_ascii=False)
    except (TypeError, ValueError):
        return body
    present = [s for s in secrets if len(s) >= 4 and s in text]
    if not present:
        return body
    present.sort(key=len, reverse=True)
    return _without(body, present)  # type: ignore[no-any-return]


def _without(obj: Any, secrets: list[str]) -> Any:
    if isinstance(obj, str):
        for secret in secrets:
            if secret in obj:
                obj = obj.replace(secret, REDACTED)
        return obj
    if isinstance(obj, dict):
        return {_without(k, secrets): _without(v, secrets) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_without(v, secrets) for v in obj]
    return obj
