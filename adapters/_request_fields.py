"""Registered, versioned field lists that say which parts of a model request form its cache key.

A cache key must change exactly when the content a model would produce may change: the
provider, base URL, model, messages, every sampling parameter, tools, response format,
logprobs settings, the channel and an explicit draw index. It must not change with message
ids, timeouts, retries, credentials, headers, user or provenance tags, or stream options
that do not change the content. Each provider's rules are a ``RequestFields`` registered
under ``(provider, version)``; its ``fingerprint`` is the SHA-256 of the rules themselves,
so a test can pin every version's fingerprint and refuse an edit that forgot to bump the
version (an old cache would otherwise silently serve answers to a different question).

Top-level fields the list does not name are *included* (fail-safe: a parameter a newer SDK
added may change the content; a needless miss is cheaper than a wrong hit). ``None``
top-level values and the SDKs' "not given" sentinels count as absent, as the providers
treat them (a nested ``None`` is kept: inside a message or a schema it is content).

Examples:
    >>> from agentlog.adapters import request_key
    >>> a = request_key("openai.chat", {"model": "m", "messages": [], "timeout": 5})
    >>> b = request_key("openai.chat", {"model": "m", "messages": [], "timeout": 60})
    >>> a.hex == b.hex, a.canonical["request"]
    (True, {'messages': [], 'model': 'm'})
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from agentlog.scrubbing import is_credential_name, may_change, scrub_value

__all__ = [
    "CacheKey",
    "RequestFields",
    "register_request_fields",
    "registered_request_fields",
    "request_fields",
    "request_key",
]

_json = msgspec.json.Encoder(order="sorted")
_json_dec = msgspec.json.Decoder()

# Fields no provider's content depends on: transport, credentials, provenance, streaming.
_TRANSPORT = ("timeout", "max_retries", "idempotency_key")
_AUTH = ("api_key", "auth_token", "organization", "project", "headers", "extra_headers",
         "default_headers", "authorization", "http_client")
_STREAM = ("stream", "stream_options")


@dataclass(frozen=True)
class RequestFields:
    """The key rules of one provider's requests, version ``version``.

    Attributes:
        provider: provider id, e.g. ``"openai.chat"``.
        version: key version; bump it whenever any other attribute changes.
        include: top-level request fields that are part of the key (documentation of what
            is known to matter; unknown fields are included too).
        exclude: top-level request fields dropped from the key, each for a stated reason.
        message_lists: fields holding a list of messages/items whose ``message_exclude``
            keys are dropped (e.g. the ``id`` of a Responses input item).
        message_exclude: keys dropped from each item of a ``message_lists`` field.
        reasons: why each excluded field does not change the content.
    """

    provider: str
    version: int
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    message_lists: tuple[str, ...] = ("messages", "input")
    message_exclude: tuple[str, ...] = ("id",)
    reasons: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        both = set(self.include) & set(self.exclude)
        if both:
            raise ValueError(f"{self.provider} v{self.version}: fields {sorted(both)} are both "
                             "included and excluded; list each field once")
        missing = [f for f in self.exclude if f not in self.reasons]
        if missing:
            raise ValueError(f"{self.provider} v{self.version}: excluded fields {missing} have "
                             "no reason; say in `reasons` why each cannot change the content")
        object.__setattr__(self, "_exclude_set", frozenset(self.exclude))
        object.__setattr__(self, "_lists_set", frozenset(self.message_lists))
        object.__setattr__(self, "_msg_exclude_set", frozenset(self.message_exclude))

    @property
    def fingerprint(self) -> str:
        """SHA-256 (hex) of the rules, independent of ``version`` and of the reasons' wording."""
        rules = {"provider": self.provider, "include": sorted(self.include),
                 "exclude": sorted(self.exclude), "message_lists": sorted(self.message_lists),
                 "message_exclude": sorted(self.message_exclude), "unknown": "include",
                 "absent": ["top-level None", "NotGiven", "Omit"], "base_url": "rstrip('/')",
                 "numbers": "top-level integral floats as ints",
                 "in messages": "sentinels and non-finite numbers as null"}
        return hashlib.sha256(_json.encode(rules)).hexdigest()


_set = object.__setattr__  # CacheKey's own __setattr__ refuses every write


class CacheKey:
    """The exact-input key of one model request (immutable).

    Attributes:
        hex: SHA-256 of the canonical encoding, hexadecimal.
        digest: the same 32 bytes (what an ``LLMCall`` record stores as ``cache_key``).
        canonical: the dict that was hashed: ``provider``, ``version``, ``draw``, ``channel``
            and ``request`` (only the fields the key rules keep), as JSON values; treat it
            as read-only.
        encoded: the canonical encoding itself (sorted-key JSON, UTF-8).
        provider: provider id.
        version: version of the field list used.
        model: the request's model name, when it has one.
        clean: True when the core credential scrubber found nothing to remove in the
            canonical request (every value passed its prefilter): a recorder may store
            ``canonical`` without scrubbing it again, applying only its own known secret
            values and redact hook. False when a value was scrubbed or dropped, or the key
            was not made by ``request_key``.
    """

    __slots__ = ("_canonical", "clean", "digest", "encoded", "hex", "model", "provider",
                 "version")

    _canonical: dict[str, Any] | None
    clean: bool
    digest: bytes
    encoded: bytes
    hex: str
    model: str | None
    provider: str
    version: int

    def __init__(self, *, encoded: bytes, provider: str, version: int,
                 model: str | None, clean: bool = False) -> None:
        digest = hashlib.sha256(encoded).digest()
        # One slot store each (a loop over (name, value) pairs cost ~1 µs more per key).
        _set(self, "encoded", encoded)
        _set(self, "digest", digest)
        _set(self, "hex", digest.hex())
        _set(self, "provider", provider)
        _set(self, "version", version)
        _set(self, "model", model)
        _set(self, "clean", bool(clean))
        _set(self, "_canonical", None)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"CacheKey is immutable; cannot set {name!r}")

    @property
    def canonical(self) -> dict[str, Any]:
        """The canonical request, decoded from ``encoded`` on first use."""
        value = self._canonical
        if value is None:
            value = _json_dec.decode(self.encoded)
            _set(self, "_canonical", value)
        return value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CacheKey) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __repr__(self) -> str:
        return f"CacheKey({self.provider} v{self.version}, model={self.model!r}, {self.hex[:16]})"


_lock = threading.Lock()
_registry: dict[tuple[str, int], RequestFields] = {}
_latest: dict[str, RequestFields] = {}


def register_request_fields(rules: RequestFields) -> RequestFields:
    """Register the key rules of ``(rules.provider, rules.version)``; newest version wins.

    Re-registering the same version with the same rules is a no-op.

    Raises:
        ValueError: that version is already registered with different rules (bump
            ``version`` instead: entries keyed under the old rules must stay findable).
    """
    key = (rules.provider, rules.version)
    with _lock:
        old = _registry.get(key)
        if old is not None:
            if old.fingerprint != rules.fingerprint:
                raise ValueError(
                    f"request fields {rules.provider} v{rules.version} are already registered "
                    f"with fingerprint {old.fingerprint[:12]}, the new rules have "
                    f"{rules.fingerprint[:12]}; register them as version {rules.version + 1}")
            return old
        _registry[key] = rules
        latest = _latest.get(rules.provider)
        if latest is None or rules.version > latest.version:
            _latest[rules.provider] = rules
    return rules


def request_fields(provider: str, version: int | None = None) -> RequestFields:
    """The registered rules of ``provider`` (its newest version unless ``version`` is given).

    Raises:
        ValueError: no such provider or version is registered.
    """
    rules = _latest.get(provider) if version is None else _registry.get((provider, version))
    if rules is None:
        known = ", ".join(sorted(_latest))
        what = provider if version is None else f"{provider} v{version}"
        raise ValueError(f"`provider`: no request fields registered for {what!r}; registered "
                         f"providers: {known}. Register them with register_request_fields()")
    return rules


def registered_request_fields() -> list[RequestFields]:
    """Every registered ``RequestFields``, sorted by provider and version."""
    with _lock:
        return [_registry[k] for k in sorted(_registry)]


def _sentinel(value: Any) -> bool:
    # The SDKs' sentinels (openai's NotGiven/Omit, anthropic's too) mean "not sent".
    return type(value).__name__ in ("NotGiven", "Omit")


def _absent(value: Any) -> bool:
    return value is None or _sentinel(value)


def _plain(value: Any, where: str) -> Any:
    """A JSON-compatible copy of ``value`` (tuples to lists, pydantic models dumped)."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"request field `{where}` is {value!r}; a cache key needs finite "
                             "numbers")
        return int(value) if value.is_integer() else value
    if isinstance(value, Mapping):
        # Nested None stays: inside a message or a JSON schema it is content, not omission.
        return {str(k): _plain(v, f"{where}.{k}") for k, v in value.items()
                if not _sentinel(v)}
    if isinstance(value, list | tuple):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    dump = getattr(value, "model_dump", None)
    if dump is not None and not isinstance(value, type):
        return _plain(dump(mode="json", exclude_none=True), where)
    schema = getattr(value, "model_json_schema", None)
    if schema is not None and isinstance(value, type):
        # client.chat.completions.parse(response_format=MyModel): the schema is the content.
        return {"pydantic_schema": _plain(schema(), where)}
    raise ValueError(f"request field `{where}` has a value of type {type(value).__qualname__}, "
                     "which has no canonical JSON form; pass plain dicts, lists, strings and "
                     "numbers (or exclude the field from the key rules)")


def _key_hook(value: Any) -> Any:
    # Only reached, inside message lists, for what msgspec cannot encode itself.
    if _sentinel(value):
        return None
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    dump = getattr(value, "model_dump", None)
    if dump is not None and not isinstance(value, type):
        return dump(mode="json", exclude_none=True)
    raise TypeError(f"no canonical JSON form for a value of type {type(value).__qualname__}")


_json_key = msgspec.json.Encoder(order="sorted", enc_hook=_key_hook)


def _request_part(rules: RequestFields, request: Mapping[str, Any]) -> dict[str, Any]:
    exclude: frozenset[str] = rules._exclude_set  # type: ignore[attr-defined]
    lists: frozenset[str] = rules._lists_set  # type: ignore[attr-defined]
    msg_exclude: frozenset[str] = rules._msg_exclude_set  # type: ignore[attr-defined]
    out: dict[str, Any] = {}
    for name, value in request.items():
        kind = type(value)
        if (kind is str or kind is int or kind is bool) and name != "base_url":
            if name not in exclude:
                out[name] = value  # what _plain keeps of these, without the call
            continue
        if name in exclude or _absent(value):
            continue
        if name == "base_url":
            out[name] = str(value).rstrip("/")
        elif name in lists and isinstance(value, list | tuple):
            # Messages are most of a request's bytes: only their ids are dropped here and the
            # C encoder does the rest (walking them in Python would triple the key's cost).
            out[name] = [{k: v for k, v in item.items() if k not in msg_exclude}
                         if isinstance(item, Mapping) else item for item in value]
        else:
            out[name] = _plain(value, name)
    return out


def request_key(provider: str, request: Mapping[str, Any], *, draw: int = 0,
                channel: str | None = None) -> CacheKey:
    """The exact-input cache key of one request.

    Args:
        provider: ``"openai.chat"``, ``"openai.responses"``, ``"anthropic.messages"``,
            ``"vllm.generate"``, ``"vllm.chat"`` or a provider registered by the user.
        request: the keyword arguments of the SDK call as a plain dict, plus ``base_url``.
        draw: which sample of this exact request this is (k samples are k entries).
        channel: the evaluation channel id the call serves, if any.

    Raises:
        ValueError: unknown provider, a negative ``draw``, or a kept field without a
            canonical JSON form (the message names the field).
    """
    if isinstance(draw, bool) or not isinstance(draw, int) or draw < 0:
        raise ValueError(f"`draw` must be a non-negative int (which sample of this request), "
                         f"got {draw!r}")
    if channel is not None and not isinstance(channel, str):
        raise ValueError(f"`channel` must be a channel id string or None, got {channel!r}")
    rules = request_fields(provider)
    try:
        return _request_key(rules, provider, request, draw, channel)
    except RecursionError:
        raise ValueError(
            f"{provider} request: a field is nested too deep or holds itself (a list or "
            "dict that contains itself); a cache key needs a finite JSON value") from None


def _request_key(rules: RequestFields, provider: str, request: Mapping[str, Any], draw: int,
                 channel: str | None) -> CacheKey:
    part = _request_part(rules, request)
    try:
        request_part, clean = _without_secrets(part)
        if channel is not None and may_change(channel, channel.encode("utf-8", "surrogatepass")):
            clean = False  # kept as given (it names the key), but a recorder scrubs it
        canonical = {"provider": provider, "version": rules.version, "draw": draw,
                     "channel": channel, "request": request_part}
        encoded = _json_key.encode(canonical)
    except (TypeError, ValueError, OverflowError):
        # Walk the messages value by value to name the field that has no JSON form.
        for name in rules.message_lists:
            if name in part:
                _plain(part[name], name)
        raise
    model = request_part.get("model")
    return CacheKey(encoded=encoded, provider=provider, version=rules.version,
                    model=model if isinstance(model, str) else None, clean=clean)


_MISSING: Any = object()
# JSON Schema keywords whose keys name properties or definitions (a tool's ``password``
# parameter, a ``Credentials`` model), not credentials.
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})


def _without_secrets(part: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """``part`` ready to encode, with every credential removed by the core scrubber.

    Returns it with ``clean``: True when no value needed the scrubber (``CacheKey.clean``).

    The key is stored (SQLite, the trace's ``LLMCall``): a credential placed anywhere in a
    request, e.g. ``extra_body={"api_key": ...}`` or a key pasted into a message, must not
    reach it. Each top-level value is tested on its own bytes (the field names themselves,
    such as ``max_tokens``, would trip the prefilter on every request), and only a value that
    may hold a credential is walked; a container is encoded once and embedded as
    ``msgspec.Raw``, so the whole request is still encoded once. A request the scrubber
    leaves unchanged keeps its exact encoding: keys stored before this rule still serve,
    and one that held a credential got a key nothing computes any more.
    """
    out: dict[str, Any] = {}
    clean = True
    for name, value in part.items():
        if is_credential_name(name):  # cached there: the same few names on every call
            continue  # e.g. a proxy's ``my_service_api_key=...`` passed as a keyword
        if isinstance(value, str):
            if may_change(value, value.encode("utf-8", "surrogatepass")):
                clean = False
                value = _without_credentials(scrub_value(value), value, in_schema=False)
            out[name] = value
        elif isinstance(value, dict | list):
            data = _json_key.encode(value)
            # may_change, not the stem prefilter: a prompt says "key" or "token" often,
            # and only the scrubber's markers and credential-named keys can change it.
            if may_change(value, data):
                clean = False
                scrubbed = _without_credentials(scrub_value(value), value, in_schema=False)
                if scrubbed is not value:
                    data = _json_key.encode(scrubbed)
            out[name] = msgspec.Raw(data)
        else:
            out[name] = value
    return out, clean


def _without_credentials(scrubbed: Any, original: Any, *, in_schema: bool) -> Any:
    """``scrubbed`` (the core scrubber's copy of ``original``) without credential-named keys.

    The scrubber replaces a credential-named value by ``"<redacted>"``; in a cache key the
    field is dropped instead, as the top-level credentials are, so two requests that differ
    only in a credential share one entry. Unchanged subtrees are ``original`` itself and are
    not walked again. A credential-named key directly under a JSON Schema ``properties``
    (or ``$defs``, ...) names a tool parameter or a model, not a secret: its schema is
    content and stays (scrubbed).
    """
    if scrubbed is original:
        return original
    if isinstance(scrubbed, dict):
        source = original if isinstance(original, Mapping) else {}
        out: dict[Any, Any] = {}
        for name, value in scrubbed.items():
            before = source.get(name, _MISSING)
            if isinstance(name, str) and is_credential_name(name):
                if in_schema and isinstance(before, Mapping):
                    out[name] = _without_credentials(scrub_value(before), before,
                                                     in_schema=False)
                continue
            out[name] = _without_credentials(value, before, in_schema=name in _SCHEMA_MAPS)
        return out
    if isinstance(scrubbed, list):
        items = (list(original) if isinstance(original, list | tuple)
                 and len(original) == len(scrubbed) else [_MISSING] * len(scrubbed))
        return [_without_credentials(v, o, in_schema=False)
                for v, o in zip(scrubbed, items, strict=True)]
    return scrubbed


def _reasons(names: Iterable[str], why: str) -> dict[str, str]:
    return dict.fromkeys(names, why)


_COMMON_REASONS = {
    **_reasons(_TRANSPORT, "transport: how long or how often the client tries, not what"),
    **_reasons(_AUTH, "credentials and headers: who asks, never what is asked"),
    **_reasons(_STREAM, "delivery: a streamed call is cached as its accumulated response"),
    "user": "provenance tag: who the end user is",
    "metadata": "provenance tags stored with the request",
    "safety_identifier": "provenance tag for abuse monitoring",
    "prompt_cache_key": "routing hint for the provider's prefix cache",
    "prompt_cache_retention": "how long the provider keeps its prefix cache",
    "store": "whether the provider stores the response for later retrieval",
    "use_tqdm": "progress display",
    "priority": "scheduling order inside the engine",
}

_OPENAI_EXCLUDE = (*_TRANSPORT, *_AUTH, *_STREAM, "user", "metadata", "safety_identifier",
                   "prompt_cache_key", "prompt_cache_retention", "store")

OPENAI_CHAT_V1 = RequestFields(
    provider="openai.chat", version=1,
    include=("base_url", "model", "messages", "temperature", "top_p", "n", "max_tokens",
             "max_completion_tokens", "seed", "stop", "presence_penalty", "frequency_penalty",
             "logit_bias", "logprobs", "top_logprobs", "tools", "tool_choice",
             "parallel_tool_calls", "response_format", "functions", "function_call",
             "reasoning_effort", "modalities", "audio", "prediction", "web_search_options",
             "verbosity", "service_tier", "extra_body", "extra_query"),
    exclude=_OPENAI_EXCLUDE,
    reasons=_COMMON_REASONS,
)

OPENAI_RESPONSES_V1 = RequestFields(
    provider="openai.responses", version=1,
    include=("base_url", "model", "input", "instructions", "temperature", "top_p",
             "top_logprobs", "max_output_tokens", "max_tool_calls", "tools", "tool_choice",
             "parallel_tool_calls", "text", "reasoning", "include", "truncation",
             "previous_response_id", "conversation", "prompt", "background", "service_tier",
             "extra_body", "extra_query"),
    exclude=_OPENAI_EXCLUDE,
    reasons=_COMMON_REASONS,
)

ANTHROPIC_MESSAGES_V1 = RequestFields(
    provider="anthropic.messages", version=1,
    include=("base_url", "model", "messages", "system", "max_tokens", "stop_sequences",
             "temperature", "top_p", "top_k", "tools", "tool_choice", "thinking", "betas",
             "service_tier", "container", "mcp_servers", "context_management",
             "extra_body", "extra_query"),
    exclude=(*_TRANSPORT, *_AUTH, *_STREAM, "metadata"),
    reasons=_COMMON_REASONS,
)

OPENAI_COMPLETIONS_V1 = RequestFields(
    provider="openai.completions", version=1,
    include=("base_url", "model", "prompt", "suffix", "temperature", "top_p", "n",
             "max_tokens", "seed", "stop", "presence_penalty", "frequency_penalty",
             "logit_bias", "logprobs", "echo", "best_of", "extra_body", "extra_query"),
    exclude=_OPENAI_EXCLUDE,
    reasons=_COMMON_REASONS,
)

OPENAI_EMBEDDINGS_V1 = RequestFields(
    provider="openai.embeddings", version=1,
    include=("base_url", "model", "input", "dimensions", "encoding_format", "extra_body",
             "extra_query"),
    exclude=_OPENAI_EXCLUDE,
    reasons=_COMMON_REASONS,
)

VLLM_GENERATE_V1 = RequestFields(
    provider="vllm.generate", version=1,
    include=("model", "revision", "tokenizer", "dtype", "prompts", "sampling_params",
             "lora_request", "guided_options_request"),
    exclude=("use_tqdm", "priority"),
    reasons=_COMMON_REASONS,
)

VLLM_CHAT_V1 = RequestFields(
    provider="vllm.chat", version=1,
    include=("model", "revision", "tokenizer", "dtype", "messages", "sampling_params",
             "chat_template", "chat_template_content_format", "chat_template_kwargs",
             "add_generation_prompt", "continue_final_message", "tools", "mm_processor_kwargs",
             "lora_request"),
    exclude=("use_tqdm", "priority"),
    reasons=_COMMON_REASONS,
)

for _rules in (OPENAI_CHAT_V1, OPENAI_RESPONSES_V1, OPENAI_COMPLETIONS_V1,
               OPENAI_EMBEDDINGS_V1, ANTHROPIC_MESSAGES_V1, VLLM_GENERATE_V1, VLLM_CHAT_V1):
    register_request_fields(_rules)
