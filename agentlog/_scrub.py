"""Credential scrubbing: the one place that decides what never reaches a trace or a span.

Every path that encodes user data passes through here: window entries and exits, tool
arguments and results, ``record(meta=...)``, model requests and responses, and the
messages of exceptions raised in windows, tools and model calls (a provider's 401
often echoes the key it refused). Three rules:

* **Credential names.** A mapping key (dict key, dataclass / Struct / pydantic field,
  HTTP header) whose normalised form (lower case, ``-`` read as ``_``) is one of
  ``CREDENTIAL_NAMES`` or ends with one of ``CREDENTIAL_SUFFIXES`` has its value replaced
  by ``"<redacted>"``, at any depth. Names are matched exactly, never as substrings:
  ``max_tokens``, ``max_completion_tokens``, ``top_logprobs``, ``prompt_tokens``,
  ``input_tokens``, ``total_tokens``, ``eos_token_id`` and the like survive (an
  exact-input cache is keyed on them).
* **Model content.** One exemption from the names rule: ``token`` in a mapping that also
  has a ``logprob`` key is a logprob entry's token text (OpenAI Chat and Responses,
  vLLM's server), not a credential, so a model response keeps its log-probabilities.
  Anywhere else ``token`` is a credential name, at any depth. Its value still passes
  the formats and known-values rules below. Counts (``*_tokens``) and ids
  (``token_ids``, ``logprob_token_ids``) are not credential names in the first place.
* **Credential formats.** Inside any string: OpenAI/Anthropic keys (``sk-…``),
  ``Bearer …`` tokens, the userinfo of URLs (``https://user:pass@host`` →
  ``https://<redacted>@host``) and credential-named query parameters (``?api_key=…``).
  Messages (``scrub_text``) are also scrubbed of GitHub (``ghp_…``, ``github_pat_…``),
  Hugging Face (``hf_…``), Slack (``xox?-…``), AWS (``AKIA…``) and Google (``AIza…``)
  keys, JWTs, and ``name=value`` pairs with a credential name.
* **Known values.** Every value redacted by name, every argument declared secret and
  every pydantic ``SecretStr`` sealed in a run is remembered (``remember``) for that run,
  and any later occurrence of it, e.g. in an exception message, is replaced too.

API for adapters: ``scrub_value(obj, known)`` for payloads, ``scrub_text(text, known)``
for messages, ``scrub_error(exc, known, redact)`` for exceptions, ``is_credential_name``.

Examples:
    >>> from agentlog._scrub import scrub_value, scrub_text
    >>> scrub_value({"max_tokens": 64, "headers": {"Authorization": "Bearer abc"}})
    {'max_tokens': 64, 'headers': {'Authorization': '<redacted>'}}
    >>> scrub_text("GET https://bob:hunter22@example.org/x failed")
    'GET https://<redacted>@example.org/x failed'
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
import time
import traceback
import warnings
from collections.abc import Callable, Collection, Mapping
from itertools import chain, compress, repeat
from operator import contains, is_
from typing import Any

import msgspec

from ._errors import InstrumentationWarning

REDACTED = "<redacted>"

#: Normalised key names (lower case, ``-`` → ``_``) whose values are credentials.
CREDENTIAL_NAMES: frozenset[str] = frozenset({
    "access_key", "access_token", "anthropic_api_key", "api_key", "api_secret", "api_token",
    "apikey", "auth", "auth_token", "authorization", "aws_secret_access_key",
    "aws_session_token", "azure_ad_token", "bearer", "bearer_token", "client_secret",
    "cookie", "credential", "credentials", "github_token", "hf_token", "id_token",
    "ocp_apim_subscription_key", "openai_api_key", "passphrase", "passwd", "password",
    "private_key", "proxy_authorization", "refresh_token", "secret", "secret_access_key",
    "secret_key", "security_token", "session_token", "set_cookie", "subscription_key",
    "token", "x_amz_security_token", "x_api_key", "x_auth_token", "x_goog_api_key",
    "pwd", "signing_key", "signing_secret", "encryption_key", "master_key", "webhook_secret",
})
#: Name endings that mark a credential (``openai_api_key``, ``db_password``, ``bot_token``,
#: ``dbPassword`` once camelCase is split, ...).
CREDENTIAL_SUFFIXES: tuple[str, ...] = (
    "_access_token", "_api_key", "_api_token", "_apikey", "_auth_token", "_client_secret",
    "_credentials", "_passphrase", "_password", "_private_key", "_refresh_token", "_secret",
    "_secret_key", "_session_token", "_token", "_pwd", "_passwd", "_signing_key",
    "_encryption_key",
)
#: Names ending in ``_token`` that are not credentials: a tokenizer's special tokens and
#: pagination cursors (``max_tokens`` and the usage counts end in ``_tokens``: kept).
NOT_CREDENTIALS: frozenset[str] = frozenset({
    "bos_token", "eos_token", "pad_token", "unk_token", "sep_token", "cls_token",
    "mask_token", "stop_token", "start_token", "end_token", "next_token", "page_token",
    "next_page_token", "continuation_token", "decoder_start_token",
})
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

# Values remembered for a run are replaced wherever they appear later; very short ones
# would replace ordinary words. Declared secrets are the user's word, so they may be
# shorter than values merely found under a credential name.
MIN_DECLARED_LEN = 4
MIN_FOUND_LEN = 8
MAX_KNOWN = 1024  # per run: memory stays bounded whatever the agent passes
_MAX_DEPTH = 256

_TOKEN_CHARS = r"[A-Za-z0-9._~+/=-]"
_SK = re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{16,}")  # OpenAI sk-/sk-proj-, sk-ant-
_FORMATS = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"(?:gh[pousr]_|github_pat_)[A-Za-z0-9_]{16,}"
    r"|hf_[A-Za-z0-9]{16,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"
    r"|AKIA[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_-]{30,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r")"
)
_BEARER = re.compile(r"(?<![A-Za-z0-9])([Bb]earer\s+)" + _TOKEN_CHARS + r"{8,}")
_USERINFO = re.compile(r"(://)[^/\s@\"'<>]+@")
_QUERY = re.compile(
    r"([?&;](?:api[_-]?key|key|access[_-]?token|token|auth|password|secret)=)"
    r"[^&#\s\"'<>]+",
    re.IGNORECASE,
)


def _alternation(names: Collection[str]) -> str:
    return "|".join(n.replace("_", "[_-]") for n in sorted(names, key=len, reverse=True))


# ``api_key=...``, ``"password": "..."``, ``Authorization: ...`` inside free text (error
# messages, reprs of configs): exact names, or any name with a credential suffix. Only
# applied to messages, not to payload strings, where prose like "token: 3" is data.
_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_-])((?:(?:[A-Za-z0-9]+[_-])+(?:"
    + _alternation([s.lstrip("_") for s in CREDENTIAL_SUFFIXES])
    + r")|(?:" + _alternation(CREDENTIAL_NAMES) + r"))"
    r"['\"]?\s*[:=]\s*['\"]?)(?!<redacted>)[^\s'\",;}\]&]+",
    re.IGNORECASE,
)

# ``token=...``, ``dbPassword=...`` inside any string, payloads included (a connection
# string in meta): only the ``=`` form with a value of 6 characters or more, which prose
# does not use ("token: 3" stays). Names as in ``_ASSIGNMENT``, camelCase forms too.
# The name is whole segments ending in "_" or "-", then an optional camelCase head, then a
# credential stem: no nested quantifier over the same characters, so a long word is
# scanned in linear time (``(?:[A-Za-z0-9]+[_-]?)+`` backtracked exponentially).
_PAIR = re.compile(
    r"(?<![A-Za-z0-9_-])((?:[A-Za-z0-9]+[_-])*[A-Za-z0-9]*?(?:"
    + _alternation([s.lstrip("_") for s in CREDENTIAL_SUFFIXES] + sorted(CREDENTIAL_NAMES))
    + r")=)(?!<redacted>)[^\s'\",;}\]&<>]{6,}",
    re.IGNORECASE,
)

# The prefilter on canonical bytes, read as Latin-1 and lower-cased: every credential
# name above contains one of these stems, and every format scrub_value redacts one of
# these markers ("sk-", "bearer", the "://" and "@" of URL userinfo, the names of query
# parameters). Length bytes of msgpack headers are any byte ("@" is a str of 64), so a
# lone "@" is not enough. A miss means scrub_value would change nothing, so the hot path keeps the
# bytes it already has. Longer stems scan faster (the search skips by needle length).
_NEEDLES = ("key", "token", "auth", "pass", "pwd", "secret", "cookie", "bearer", "credential",
            "sk-", "://@")  # the last: both "://" and "@"
# Below this many bytes no credential fits: a credential-named key with a value of 4
# characters or more ({"auth": "abcd"}) takes 11, the shortest URL userinfo
# ("://u:pass@") 10, the formats more. Tiny exits (ints, flags, short ids) skip the scan.
_MIN_SECRET_BYTES = 10


def is_credential_name(key: str) -> bool:
    """True when a field or header named ``key`` holds a credential (exact names only)."""
    exact = type(key) is str  # a str subclass may lower itself its own way: not cached
    verdict = _name_verdicts.get(key) if exact else None
    if verdict is None:
        verdict = _credential(key.lower())
        if not verdict and not key.islower():  # dbPassword -> db_password
            verdict = _credential(_CAMEL.sub("_", str(key)).lower())
        if exact and len(key) <= 64:  # bounded: short names, 4,096 of them
            if len(_name_verdicts) >= 4096:
                _name_verdicts.clear()
            _name_verdicts[key] = verdict
    return verdict


def _credential(low: str) -> bool:
    k = low.replace("-", "_")
    return k in CREDENTIAL_NAMES or (k.endswith(CREDENTIAL_SUFFIXES)
                                     and k not in NOT_CREDENTIALS)


# The verdicts of names seen so far: a request's field names, a payload's keys, the same
# few on every call (lowering and ten suffix tests cost ~0.5 µs a name).
_name_verdicts: dict[str, bool] = {}


def remember(known: set[str] | None, value: Any, *, declared: bool = False) -> None:
    """Add a secret value (and the str leaves of a container) to a run's known secrets."""
    if known is None:
        return
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return
    if isinstance(value, str):
        if len(value) >= (MIN_DECLARED_LEN if declared else MIN_FOUND_LEN) and (
            len(known) < MAX_KNOWN and value != REDACTED
        ):
            known.add(value)
        # "Bearer <token>": the token alone is what a provider echoes.
        head, _, tail = value.partition(" ")
        if tail and head.lower() in ("bearer", "basic", "token"):
            remember(known, tail, declared=declared)
            if head.lower() == "basic":  # and what the token encodes: "user:password"
                pair = _basic_pair(tail)
                if pair is not None:
                    remember(known, pair, declared=declared)
                    remember(known, pair.partition(":")[2], declared=declared)
        return
    secret = _secret_value(value)
    if secret is not None:
        remember(known, secret, declared=True)
    elif isinstance(value, Mapping):
        for v in value.values():
            remember(known, v, declared=declared)
    elif isinstance(value, list | tuple | set | frozenset):
        for v in value:
            remember(known, v, declared=declared)


def _basic_pair(token: str) -> str | None:
    """The ``user:password`` a Basic-auth token encodes, or None when it encodes none."""
    try:
        pair = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    return pair if ":" in pair else None


def _secret_value(obj: Any) -> str | bytes | None:
    """The clear value of a pydantic ``SecretStr``/``SecretBytes`` (duck-typed), else None."""
    get = getattr(obj, "get_secret_value", None)
    if get is None or isinstance(obj, type):
        return None
    try:
        value = get()
    except Exception:
        return None
    return value if isinstance(value, str | bytes) else None


def may_hold_secret(data: bytes, known: Collection[str] | None = None) -> bool:
    """Cheap test on canonical bytes: False guarantees ``scrub_value`` changes nothing."""
    if known and holds_known(data, known):
        return True
    if len(data) < _MIN_SECRET_BYTES:  # the common tiny exit: no copy at all
        return False
    # bytes.lower() first: it is ASCII-only and 20x faster than str.lower() on text with
    # bytes >= 0x80 (every msgpack header), which takes the full Unicode path.
    return _has_needle(data.lower().decode("latin-1")) or _KELVIN in data


# str.lower() turns one non-ASCII character into an ASCII letter of a stem: the Kelvin
# sign into "k" (U+0130 gives "i" plus a combining dot, which no stem matches). The
# scrubber's own stem test lowers str, so "api_\u212aey=..." is scrubbed; bytes.lower()
# does not fold it, and the prefilters count its UTF-8 bytes instead.
_KELVIN = "\u212a".encode()


# From this size on, ``may_change``'s four markers and its walk over the keys cost less
# than ``may_hold_secret``'s ten stems over every byte (measured: 3.6 µs per stem on a
# 4 KB prompt; a 5 KB document entry paid +36 µs). Below it the stems' scan is the cheaper
# test, with its exit for tiny payloads.
LONG_PAYLOAD = 256


def may_change_payload(obj: Any, data: bytes, known: Collection[str] | None = None) -> bool:
    """The cheaper sound prefilter for ``data``, the canonical bytes of ``obj``.

    False guarantees that ``scrub_value(obj, known)`` returns ``obj`` unchanged, as each of
    ``may_hold_secret`` (short payloads) and ``may_change`` (long ones) does.
    """
    if len(data) < LONG_PAYLOAD:
        return may_hold_secret(data, known)
    # Both are sound, so the payload is walked only when both say it may change: a value
    # may_change does not walk (a dataclass, a pydantic model) still gets the stems' test.
    return may_change(obj, data, known) and may_hold_secret(data, known)


def holds_known(data: bytes, known: Collection[str]) -> bool:
    """Whether one of the secret values ``known`` occurs in ``data`` (as UTF-8 bytes)."""
    # bytes in bytes (memmem): decoding 4 KB of prompt to search it as text cost ~4 µs.
    encoded = _encoded_secrets
    for secret in _snapshot(known):
        needle = encoded.get(secret)
        if needle is None:
            needle = secret.encode("utf-8", "surrogatepass")
            if len(encoded) < _MAX_ENCODED_SECRETS:
                encoded[secret] = needle
        if needle in data:
            return True
    return False


# Each known secret's UTF-8 bytes, made once (the known sets are bounded; so is this).
_encoded_secrets: dict[str, bytes] = {}
_MAX_ENCODED_SECRETS = 4096


def may_change(obj: Any, data: bytes, known: Collection[str] | None = None) -> bool:
    """A sharper ``may_hold_secret`` for payloads full of ``token`` (model calls).

    ``data`` is ``obj``'s canonical encoding. False guarantees that ``scrub_value(obj,
    known)`` returns ``obj`` unchanged. Without the markers a string rule needs (``sk-``,
    ``bearer``, ``://`` with ``@``, a query name such as ``key=``) and without a known
    secret, only the names rule can apply, and a walk over the mapping keys that copies
    nothing and caches each name's verdict decides. A model response names ``prompt_tokens`` and a
    logprob entry's ``token`` many times: without this every call would pay the copying
    walk over every string and number.
    """
    if known and holds_known(data, known):
        return True
    # No size shortcut here: {"token": None} is 8 bytes and the names rule redacts it.
    # The markers are searched in the raw bytes: ``_SK`` and ``_BEARER`` are case-sensitive
    # ("sk-", "[Bb]earer"), so lowering 4 KB of prompt first would only cost time, and a
    # one-literal regex search runs about twice as fast as ``in`` on CPython 3.11.
    if (_SK_MARK(data) is not None or _BEARER_MARK(data) is not None
            or (b"=" in data and _query_mark(data))
            or (b"@" in data and b"://" in data)):
        # A string rule may apply; each needs one of the stems (and so does every
        # credential name), so without a stem nothing can change.
        return _has_needle(data.lower().decode("latin-1")) or _KELVIN in data
    # No string rule can fire: only a credential-named key could, and the walk decides
    # (cheaper than the ten stem searches on a long prompt). A str has no keys.
    return type(obj) is not str and _has_credential_key(obj, 0)


_SK_MARK = re.compile(rb"sk-").search
_BEARER_MARK = re.compile(rb"earer").search
# ``_QUERY``'s parameter names all end in one of these before their "=". A lone b"=" was
# the marker before, but it is also the byte 0x3d, found in nearly every msgpack body
# with a few hundred floats or ints (a logprob response, a vLLM body's token ids), which
# then paid the copying walk (~5 ms for 20 x 20 logprobs). On str, ``re.IGNORECASE``
# also folds the Kelvin sign and the long s to "k" and "s": their UTF-8 bytes count too.
_QUERY_NAME_ENDS = (b"key", b"token", b"auth", b"password", b"secret", b"pwd", b"passwd")
_UNICODE_FOLDS = (_KELVIN, "\u017f".encode())  # K (Kelvin), ſ (long s)


def _query_mark(data: bytes) -> bool:
    """Whether ``_QUERY`` could match a string encoded in ``data`` (True when unsure)."""
    # A look at the 8 bytes before each "=" (about one in 256 bytes of floats): an
    # IGNORECASE alternation over a 16 KB body cost ~1 ms, ~25x this loop. Past
    # _MAX_EQUALS of them (base64 padding, "=====" rules) it gives up: True, as before.
    if _KELVIN in data or _UNICODE_FOLDS[1] in data:
        return True
    at = data.find(b"=")
    for _ in range(_MAX_EQUALS):
        if at < 0:
            return False
        if data[max(at - 8, 0):at].lower().endswith(_QUERY_NAME_ENDS):
            return True
        at = data.find(b"=", at + 1)
    return at >= 0


_MAX_EQUALS = 64


_PLAIN = (str, int, float, bool, type(None), bytes)
_PLAIN_TYPES: frozenset[type] = frozenset(_PLAIN)
# The types the walk looks into; any other (a Mapping that is not a dict, a set, a Struct,
# a dataclass, a pydantic model, a SecretStr, a str subclass) makes it answer "unsure".
_WALKED_TYPES: frozenset[type] = _PLAIN_TYPES | {dict, list, tuple}
# Key names already found not to be credentials: a dict whose keys are all here costs one
# set difference in C instead of a Python loop over its keys. Bounded; "token" (a
# credential name) never enters it, so the logprob exemption is decided per mapping.
_safe_names: set[str] = set()
_MAX_SAFE_NAMES = 4096
# The same names plus "token", for mappings that also hold "logprob" (the exemption).
_safe_logprob_names: set[str] = {"token"}


def _is_credential_or_learned(name: str) -> bool:
    """``is_credential_name(name)``; a name that is not one joins the safe names (bounded)."""
    if is_credential_name(name):
        return True
    if len(_safe_names) < _MAX_SAFE_NAMES:
        _safe_names.add(name)
        _safe_logprob_names.add(name)
    return False


def _has_credential_key(obj: Any, depth: int) -> bool:
    """Whether ``_scrub``'s names rule could fire in ``obj`` (True when unsure)."""
    if depth > _MAX_DEPTH:
        return True
    kind = type(obj)
    if kind is dict:
        if _has_credential_name(obj):
            return True
        values: Any = obj.values()
    elif kind is list or kind is tuple:
        if len(obj) >= _BATCH:
            return _level_has_credential_key(obj, depth + 1)
        values = obj
    else:
        # Other mappings, sets, Structs, dataclasses, pydantic models, SecretStr: the walk.
        return kind not in _PLAIN
    for v in values:
        t = type(v)
        if t is dict or t is list or t is tuple:
            if _has_credential_key(v, depth + 1):
                return True
        elif t not in _PLAIN:
            return True
    return False


# From this many items on, a list is walked by ``_level_has_credential_key``; below it the
# few C calls per depth cost more than the Python loop over the items (measured).
_BATCH = 8


def _level_has_credential_key(level: Collection[Any], depth: int) -> bool:
    """``_has_credential_key`` for the values of ``level``, all at ``depth``.

    The values are walked one depth at a time: all the values at one depth are one list,
    and the per-item work (their types, the dicts' key sets, the next depth's values) runs
    in C through ``map``, ``compress`` and ``chain``. A model response is mostly lists of
    logprob entries (20 tokens x 20 top logprobs: ~420 small dicts), on which the Python
    loop per dict above pays a call and two set tests per dict and per ``bytes`` list.
    """
    while True:
        types = set(map(type, level))
        if types <= _PLAIN_TYPES:
            return False
        if not types <= _WALKED_TYPES or depth > _MAX_DEPTH:
            # _scrub redacts every container below _MAX_DEPTH, and walks the other types.
            return True
        dicts: Any = ()
        if dict in types:
            dicts = (level if len(types) == 1
                     else list(compress(level, map(is_, map(type, level), repeat(dict)))))
            if not _dicts_keep_their_keys(dicts):
                return True
        values = chain.from_iterable(map(dict.values, dicts))
        if list in types or tuple in types:
            seqs = compress(level, map(_SEQUENCE_TYPES.__contains__, map(type, level)))
            values = chain(values, chain.from_iterable(seqs))
        level = list(values)
        depth += 1


_SEQUENCE_TYPES: frozenset[type] = frozenset({list, tuple})


def _dicts_keep_their_keys(dicts: Collection[dict[Any, Any]]) -> bool:
    """True when ``_scrub_map`` redacts no key of any of ``dicts`` (exact dicts)."""
    # One set of every key, built in C: a set test per dict cost ~0.2 µs each.
    names = set().union(*dicts)
    if _safe_names.issuperset(names):
        return True
    # A list of logprob entries: each keeps its "token" (it also holds "logprob").
    if _safe_logprob_names.issuperset(names) and all(map(contains, dicts, repeat(_LOGPROB))):
        return True
    return not any(map(_has_credential_name, dicts))


def _has_credential_name(obj: dict[Any, Any]) -> bool:
    """Whether ``_scrub_map`` redacts a key of ``obj`` (True when unsure)."""
    # issuperset iterates the dict's keys in C (``keys() - set`` would iterate the set).
    # A logprob entry ({"token", "logprob", "bytes", "top_logprobs"}) keeps its
    # "token" (the exemption), so its names are tested against the set that adds it.
    if _safe_names.issuperset(obj) or (
            _LOGPROB in obj and _safe_logprob_names.issuperset(obj)):
        return False
    for k in obj:
        if type(k) is not str:
            if isinstance(k, str):
                # A str subclass: _scrub_map tests its name (the walk before this one
                # skipped it, and {S("api_key"): ...} was redacted behind a False).
                return True
            continue  # an int or other non-str key is never a credential name
        if k in _safe_names or (k == _LOGPROB_TOKEN and _LOGPROB in obj):
            continue
        if _is_credential_or_learned(k):
            return True
    return False


def _snapshot(known: Collection[str]) -> tuple[str, ...]:
    # tuple(set) runs in C, but not atomically: the tuple's allocation can start a garbage
    # collection, whose finalizers run Python code and may let another thread add a secret
    # ("Set changed size during iteration", seen once in a many-thread test). A retry
    # sees the set after that thread's add; the set only grows, and only to MAX_KNOWN.
    for _ in range(_SNAPSHOT_TRIES - 1):
        try:
            return tuple(known)
        except RuntimeError:
            time.sleep(0)  # let the adding thread finish its add
    return tuple(known)


_SNAPSHOT_TRIES = 16


def _has_needle(low: str) -> bool:
    # Ten substring searches on a str, not one regex and not bytes: on CPython 3.11 an
    # alternation costs the regex engine work at every position (2-10x slower, measured
    # on 100-byte and 5-KB payloads) and ``in`` on bytes several times more than on str.
    return ("key" in low or "token" in low or "auth" in low or "pass" in low or "pwd" in low
            or "secret" in low or "cookie" in low or "bearer" in low or "credential" in low
            or "sk-" in low or ("@" in low and "://" in low))


def scrub_text(text: str, known: Collection[str] | None = None, *,
               assignments: bool = True) -> str:
    """``text`` with known secret values, credential formats and URL userinfo redacted.

    ``assignments`` (for messages; payload strings keep it off) also redacts the
    provider key formats beyond ``sk-`` and ``name=value`` / ``"name": value`` pairs whose
    name is a credential name.
    """
    if known:
        text = _without_known(text, known)
    text = _USERINFO.sub(r"\1" + REDACTED + "@", text)
    text = _QUERY.sub(r"\1" + REDACTED, text)
    text = _BEARER.sub(r"\1" + REDACTED, text)
    text = _SK.sub(REDACTED, text)
    if "=" in text:
        text = _PAIR.sub(lambda m: m.group(1) + REDACTED if _pair_is_credential(m.group(1))
                         else m.group(0), text)
    if assignments:
        text = _FORMATS.sub(REDACTED, text)
        text = _ASSIGNMENT.sub(r"\1" + REDACTED, text)
    return text


def _pair_is_credential(name_eq: str) -> bool:
    return is_credential_name(name_eq[:-1])  # the exclusions (eos_token=...) hold here too


def _without_known(text: str, known: Collection[str]) -> str:
    """``text`` with every known secret value replaced, the longest first."""
    for secret in sorted(_snapshot(known), key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def scrub_value(obj: Any, known: set[str] | None = None) -> Any:
    """A copy of ``obj`` with credentials redacted (see the module docstring).

    Returns ``obj`` itself when nothing had to change, so an object without credentials
    keeps its exact canonical encoding (and hash). Containers that changed come back as
    dicts / lists; dataclasses, msgspec Structs and pydantic models that held a
    credential come back as the dict of their fields. Values redacted by name are added
    to ``known``.
    """
    return _scrub(obj, known, 0)


# The field of a logprob entry that the model-content exemption keeps (module docstring).
_LOGPROB_TOKEN = "token"
_LOGPROB = "logprob"


def _scrub_map(items: Any, known: set[str] | None, depth: int,
               logprob_entry: bool = False) -> dict[Any, Any] | None:
    """The scrubbed dict of ``items`` (key, value pairs), or None when nothing changed."""
    out: dict[Any, Any] = {}
    changed = False
    for k, v in items:
        if isinstance(k, str) and is_credential_name(k) and not (
            logprob_entry and k == _LOGPROB_TOKEN
        ):
            remember(known, v)
            new: Any = REDACTED
        else:
            new = _scrub(v, known, depth + 1)
        changed = changed or new is not v
        out[k] = new
    return out if changed else None


def _scrub(obj: Any, known: set[str] | None, depth: int) -> Any:
    if isinstance(obj, str):
        return _scrub_str(obj, known)
    if obj is None or isinstance(obj, bool | int | float | bytes):
        return obj
    if depth > _MAX_DEPTH:  # deeper than any real payload: nothing below it is written
        return REDACTED
    # Exact types first: the ABC check below costs more than the rest of a small walk.
    if type(obj) is dict or isinstance(obj, Mapping):
        scrubbed = _scrub_map(obj.items(), known, depth, _LOGPROB in obj)
        return obj if scrubbed is None else scrubbed
    if isinstance(obj, list | tuple | set | frozenset):
        items = [_scrub(v, known, depth + 1) for v in obj]
        if all(a is b for a, b in zip(items, obj, strict=True)):
            return obj
        if isinstance(obj, set | frozenset):
            return type(obj)(items) if all(_hashable(i) for i in items) else items
        return items
    if _secret_value(obj) is not None:
        remember(known, _secret_value(obj), declared=True)
        return obj  # encoded as "<redacted>" by the canonical encoder
    if isinstance(obj, msgspec.Struct):
        scrubbed = _scrub_map(msgspec.structs.asdict(obj).items(), known, depth)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        scrubbed = _scrub_map(
            ((f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)), known, depth
        )
    elif hasattr(type(obj), "model_fields") and hasattr(obj, "model_dump"):
        try:
            dumped = obj.model_dump(mode="python")
        except Exception:
            return obj  # the encoder will report it
        scrubbed = _scrub_map(dumped.items(), known, depth)
    else:
        return obj
    return obj if scrubbed is None else scrubbed


def _hashable(x: Any) -> bool:
    try:
        hash(x)
    except TypeError:
        return False
    return True


def _scrub_str(text: str, known: set[str] | None) -> str:
    if not _has_needle(text.lower()) and not (
        known and any(s in text for s in _snapshot(known))
    ):
        return text  # the four regex passes below cost far more than this test
    out = scrub_text(text, known, assignments=False)
    return text if out == text else out


def safe_str(exc: BaseException) -> str:
    """``str(exc)``, or a marker when the exception's ``__str__`` itself fails."""
    try:
        return str(exc)
    except Exception as err:
        return f"<str() of {type(exc).__name__} raised {type(err).__name__}>"


#: The longest exception message (or stack) a record or span keeps, in characters.
MAX_MESSAGE_CHARS = 65_536
# Where a cut message may end: after one of these, never inside a token-like run.
_CUT_AFTER = " \t\n\r\f\v\"'<>,;()[]{}"


def bounded_text(text: str, known: Collection[str] | None = None) -> str:
    """``text`` cut to ``MAX_MESSAGE_CHARS``, ready for ``scrub_text``, with a note of the cut.

    A provider error may carry a whole response body, and an agent may raise an exception
    with megabytes of message: scrubbing 50 MB took 7–17 s on the agent's exception path,
    and a frame of it decompressed past what a reader accepts. The known secret values are
    replaced in the whole text first (one C search each), then the text is cut after its
    last delimiter before the bound, so that no credential is kept half (a credential
    format cut in two would no longer match its rule).
    """
    if len(text) <= MAX_MESSAGE_CHARS:
        return text
    if known:
        text = _without_known(text, known)
        if len(text) <= MAX_MESSAGE_CHARS:
            return text
    head = text[:MAX_MESSAGE_CHARS]
    head = head[:max(map(head.rfind, _CUT_AFTER)) + 1]
    return f"{head}… [{len(text) - len(head)} more characters cut by agentlog]"


def scrub_error(exc: BaseException, known: Collection[str] | None = None,
                redact: Callable[[Any], Any] | None = None) -> str:
    """The message of ``exc`` as it may be written: scrubbed, then through ``redact``.

    A message longer than ``MAX_MESSAGE_CHARS`` is cut first (``bounded_text``). A
    ``redact`` hook that fails or returns something other than a str gives
    ``"<redacted>"``, never the unredacted message.
    """
    text = scrub_text(bounded_text(safe_str(exc), known), known)
    if redact is None:
        return text
    try:
        out = redact(text)
    except Exception as err:
        warnings.warn(
            f"record(redact=...) raised {type(err).__name__} on an exception message; the "
            f"message was replaced by {REDACTED!r} rather than written unredacted",
            InstrumentationWarning,
            stacklevel=3,
        )
        return REDACTED
    return scrub_text(out, known) if isinstance(out, str) else REDACTED


def exception_attributes(exc: BaseException, message: str,
                         known: Collection[str] | None = None) -> dict[str, str]:
    """OpenTelemetry ``exception`` event attributes with a scrubbed message and stack.

    Replaces ``span.record_exception(exc)``, which copies ``str(exc)`` (and the traceback,
    whose last line repeats it) into the span unscrubbed.
    """
    stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    stack = bounded_text(stack.replace(safe_str(exc), message), known)
    return {
        "exception.type": type(exc).__name__,  # as the SDK writes it
        "exception.message": message,
        "exception.stacktrace": scrub_text(stack, known),
    }
