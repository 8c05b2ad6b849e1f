"""Canonical encoding of entry/exit artifacts, hashing, and decoding back into arguments.

An artifact is encoded with msgspec's msgpack encoder in ``order="sorted"`` mode: dict
keys, set items and dataclass/Struct fields are sorted, so equal values give equal
bytes whatever their insertion order. Supported beyond msgpack's own types:

* numpy arrays: an ext value (code ``NDARRAY_EXT``) holding ``[dtype, shape, data]`` with
  the dtype forced little-endian and the data C-contiguous;
* numpy scalars (as their Python value), dataclasses, ``msgspec.Struct``, enums (their
  value);
* pydantic models (``model_dump(mode="python")``; decoded with ``model_validate``), whose
  ``SecretStr``/``SecretBytes`` fields are sealed as ``"<redacted>"``;
* ``pathlib`` paths (their ``os.fspath`` string), ``complex`` (an ext value, code
  ``COMPLEX_EXT``, holding two little-endian float64), and sets whose items do not sort
  among themselves (ordered by the items' canonical bytes).

Anything else fails with ``ArtifactEncodingError`` naming the argument and suggesting an
``entry=`` projection; ``encode_lenient`` instead seals such a value as the marker
``{"unsealable": "<type name>"}`` (what windows and tools do unless
``record(strict=True)``). Values that were supported before keep their exact bytes, so
hashes in existing traces do not change. Hashes are SHA-256 of the canonical bytes.

Examples:
    >>> from agentlog._encoding import encode, digest
    >>> encode({"b": 1, "a": 2}) == encode({"a": 2, "b": 1})
    True
"""

from __future__ import annotations

import hashlib
import inspect
import os
import pathlib
import struct
import typing
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any, get_args, get_origin, get_type_hints

import msgspec
import numpy as np

from ._errors import ArtifactEncodingError, InstrumentationWarning
from ._scrub import REDACTED, is_credential_name, may_change_payload, remember, scrub_value
from ._state import current_run_var

#: What msgspec raises for a value it cannot encode: an unsupported type or int, a set it
#: cannot order, or (RecursionError) a container nested past its depth limit or holding
#: itself. Every encode of user data catches these, so such a value becomes a marker or
#: an ``ArtifactEncodingError``, never an exception in the agent's call.
ENCODE_ERRORS: tuple[type[Exception], ...] = (
    TypeError, NotImplementedError, OverflowError, ValueError, RecursionError)

NDARRAY_EXT = 1
COMPLEX_EXT = 2
UNSEALABLE = "unsealable"
_MAX_NDIM = 64
_MAX_SET_DEPTH = 256


class Secret:
    """Marks a parameter as secret: ``api_key: Annotated[str, al.Secret]``.

    A secret argument is replaced by ``"<redacted>"`` before the entry is encoded, so it
    never reaches a trace file or a span. Replay must supply it again.
    """


_inner = msgspec.msgpack.Encoder()


def _enc_hook(obj: Any) -> Any:
    try:
        return _supported(obj)
    except ENCODE_ERRORS:
        raise
    except Exception as exc:  # the value's own code failed (a model_dump, an __fspath__)
        raise _raised_while_encoding(obj, exc) from None


def _raised_while_encoding(obj: Any, exc: Exception) -> TypeError:
    """The encoding error for ``obj`` whose own code raised ``exc``: no encoding, never an
    exception in the agent's call. Its message is the user's and may hold a secret: only
    the types are named."""
    return TypeError(f"encoding a {type(obj).__qualname__} raised {type(exc).__qualname__}")


def _supported(obj: Any) -> Any:
    """The encodable form of a value msgspec does not encode itself (``_enc_hook``)."""
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise NotImplementedError("numpy object arrays have no canonical encoding")
        dtype = obj.dtype.newbyteorder("<") if obj.dtype.byteorder == ">" else obj.dtype
        data = np.ascontiguousarray(obj, dtype=dtype).tobytes()
        return msgspec.msgpack.Ext(NDARRAY_EXT, _inner.encode([dtype.str, list(obj.shape), data]))
    if isinstance(obj, np.generic):
        return obj.item()
    dump = getattr(obj, "model_dump", None)
    if dump is not None and hasattr(type(obj), "model_fields"):
        return dump(mode="python")
    if isinstance(obj, pathlib.PurePath):
        return os.fspath(obj)
    if isinstance(obj, complex):
        return msgspec.msgpack.Ext(COMPLEX_EXT, struct.pack("<dd", obj.real, obj.imag))
    get_secret = getattr(obj, "get_secret_value", None)
    if get_secret is not None and type(obj).__name__ in ("SecretStr", "SecretBytes"):
        run = current_run_var.get()
        if run is not None:  # a provider error may echo it later: scrub it there too
            remember(run.secrets, get_secret(), declared=True)
        return REDACTED
    raise NotImplementedError(f"objects of type {type(obj).__qualname__} are not supported")


_encoder = msgspec.msgpack.Encoder(enc_hook=_enc_hook, order="sorted")


def _ext_hook(code: int, data: memoryview) -> Any:
    if code == COMPLEX_EXT:
        if len(data) != 16:
            raise ValueError(f"complex ext carries {len(data)} bytes; expected 16")
        real, imag = struct.unpack("<dd", data)
        return complex(real, imag)
    if code != NDARRAY_EXT:
        raise ValueError(
            f"unknown msgpack ext code {code}; expected {NDARRAY_EXT} (ndarray) or "
            f"{COMPLEX_EXT} (complex)"
        )
    dtype_str, shape, raw = msgspec.msgpack.decode(data, type=tuple[str, list[int], bytes])
    dtype = np.dtype(dtype_str)
    if dtype.hasobject or len(shape) > _MAX_NDIM or any(s < 0 for s in shape):
        raise ValueError(f"refusing ndarray ext with dtype {dtype_str!r} and shape {shape}")
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if count * dtype.itemsize != len(raw):
        raise ValueError(
            f"ndarray ext declares {count} items of {dtype_str} but carries {len(raw)} bytes"
        )
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


_decoder = msgspec.msgpack.Decoder(ext_hook=_ext_hook)


def _order_sets(obj: Any, depth: int = 0) -> Any:
    """``obj`` with every set whose items do not sort replaced by a list in canonical order.

    Only reached when the plain encoder failed, so values it supports keep their bytes.
    """
    if depth > _MAX_SET_DEPTH:
        return obj
    if isinstance(obj, set | frozenset):
        items = [_order_sets(v, depth + 1) for v in obj]
        try:
            return sorted(items)
        except TypeError:
            return sorted(items, key=lambda v: _encoder.encode(v))
    if isinstance(obj, dict):
        return {k: _order_sets(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_order_sets(v, depth + 1) for v in obj]
    return obj


def _encode_ordered(obj: Any, encoder: msgspec.msgpack.Encoder) -> bytes:
    try:
        try:
            return encoder.encode(obj)
        except TypeError:  # maybe a set of mixed types ("'<' not supported between ...")
            ordered = _order_sets(obj)
            if ordered is obj:
                raise
            return encoder.encode(ordered)
    except ENCODE_ERRORS:
        raise
    except Exception as exc:  # code of the value run while encoding it (an __lt__ in a set)
        raise _raised_while_encoding(obj, exc) from None


def encode(obj: Any, *, what: str = "artifact") -> bytes:
    """Canonical bytes of ``obj``; ``what`` names it in the error (e.g. "argument `doc`")."""
    try:
        return _encode_ordered(obj, _encoder)
    except ENCODE_ERRORS as exc:
        raise ArtifactEncodingError(
            f"{what}: cannot seal a value of type {type(obj).__qualname__}: {exc}. Supported: "
            "None, bool, int, float, complex, str, bytes, lists, tuples, dicts, sets, enums, "
            "paths, numpy arrays, dataclasses, msgspec Structs and pydantic models. Project "
            "it to something supported with `entry=` (e.g. @al.window(..., entry=lambda doc: "
            "doc.id)), or let record(strict=False) seal it as an 'unsealable' marker."
        ) from None


def _type_name(obj: Any) -> str:
    # A class defined in a function reads "f.<locals>.Conn": the marker names "Conn".
    return type(obj).__qualname__.rsplit("<locals>.", 1)[-1]


def unsealable_marker(obj: Any) -> dict[str, str]:
    """The marker sealed in place of a value that has no canonical encoding."""
    return {UNSEALABLE: _type_name(obj)}


def encode_lenient(obj: Any) -> tuple[bytes, list[str]]:
    """Canonical bytes of ``obj`` with each unsupported value sealed as a marker.

    Returns the bytes and the type names that were replaced (empty when ``encode`` would
    have succeeded, in which case the bytes are the same).
    """
    try:
        return _encode_ordered(obj, _encoder), []
    except ENCODE_ERRORS:
        pass
    replaced: list[str] = []

    def hook(value: Any) -> Any:
        try:
            return _enc_hook(value)
        except (NotImplementedError, TypeError, ValueError):
            replaced.append(_type_name(value))
            return unsealable_marker(value)

    lenient = msgspec.msgpack.Encoder(enc_hook=hook, order="sorted")
    try:
        return _encode_ordered(obj, lenient), replaced
    except RecursionError:
        # Nested past msgspec's depth limit, or a container that holds itself.
        return (_encoder.encode(unsealable_marker(obj)),
                [f"{_type_name(obj)} (nested too deep, or holding itself)"])
    except ENCODE_ERRORS:
        # e.g. an int beyond 64 bits, a non-str dict key: the whole value becomes a marker
        return _encoder.encode(unsealable_marker(obj)), [_type_name(obj)]


def seal_clean(obj: Any, known: set[str] | None = None, *, what: str = "artifact",
               strict: bool = True) -> tuple[bytes, list[str]]:
    """Canonical bytes of ``obj`` scrubbed of credentials, and the unsealable type names.

    The scrubber runs only when the cheap byte test says a credential may be there, and
    an ``obj`` without one keeps its exact bytes. ``strict`` raises
    ``ArtifactEncodingError`` on a value without a canonical encoding; otherwise that
    value is sealed as ``{"unsealable": "<type>"}`` and its type name returned.
    """
    data, bad = (encode(obj, what=what), []) if strict else encode_lenient(obj)
    if may_change_payload(obj, data, known):
        clean = scrub_value(obj, known)
        if clean is not obj:
            data, bad = (encode(clean, what=what), []) if strict else encode_lenient(clean)
    return data, bad


_warned_unsealable: set[str] = set()


def warn_unsealable(what: str, types: list[str]) -> None:
    """Warn once per ``what`` (a window's entry, a tool's result, ...) that markers were sealed."""
    if what in _warned_unsealable:
        return
    _warned_unsealable.add(what)
    warnings.warn(
        f"{what}: no canonical encoding for {', '.join(sorted(set(types)))}; sealed as an "
        f"{{{UNSEALABLE!r}: <type>}} marker and the call proceeds. Project it with "
        "`entry=`/`exit=` to keep it, or pass record(strict=True) to raise instead.",
        InstrumentationWarning,
        stacklevel=4,
    )


def encode_arguments(arguments: Mapping[str, Any], *, window: str) -> bytes:
    """Canonical bytes of a bound-argument map, naming the offending argument on failure."""
    try:
        return _encode_ordered(arguments, _encoder)
    except ENCODE_ERRORS:
        for name, value in arguments.items():
            encode(value, what=f"window {window!r}, argument `{name}`")
        raise


def decode(data: bytes | memoryview) -> Any:
    """Decode canonical bytes (arrays come back as read-only numpy arrays)."""
    return _decoder.decode(data)


def digest(data: bytes) -> bytes:
    """SHA-256 of canonical bytes."""
    return hashlib.sha256(data).digest()


def seal(obj: Any, *, what: str = "artifact") -> tuple[bytes, bytes]:
    """``(canonical bytes, sha256)`` of an artifact."""
    data = encode(obj, what=what)
    return data, hashlib.sha256(data).digest()


# --------------------------------------------------------------------------- arguments


def _is_secret_annotation(annotation: Any) -> bool:
    if get_origin(annotation) is typing.Annotated:
        return any(m is Secret or isinstance(m, Secret) for m in annotation.__metadata__)
    return False


class ArgumentBinder:
    """Turns ``(args, kwargs)`` of a call into the map of its effective arguments.

    Defaults are applied so that ``f(q)`` and ``f(q, budget=3)`` with ``budget=3`` by default
    seal the same entry. A leading ``self``/``cls`` is left out (it is the object, not an
    input). Secret parameters — declared ones and those with a credential name
    (``api_key``, ``token``, ``password``, ...: ``agentlog._scrub.CREDENTIAL_NAMES``) — are
    replaced by ``REDACTED``.
    """

    __slots__ = ("_names", "_secrets", "_signature", "_skip_first", "parameters")

    def __init__(self, fn: Callable[..., Any], *, secret: Iterable[str] = ()) -> None:
        signature = inspect.signature(fn)
        params = list(signature.parameters.values())
        self._skip_first = bool(params) and params[0].name in ("self", "cls")
        self.parameters = params[1:] if self._skip_first else params
        try:
            hints = get_type_hints(fn, include_extras=True)
        except Exception:  # unresolvable forward references: no annotation-driven secrets
            hints = {}
        secrets = set(secret)
        unknown = secrets - {p.name for p in params}
        if unknown:
            raise ValueError(
                f"`secret` names {sorted(unknown)} that are not parameters of "
                f"{getattr(fn, '__qualname__', fn)}; parameters are {[p.name for p in params]}"
            )
        secrets |= {name for name, hint in hints.items() if _is_secret_annotation(hint)}
        secrets |= {p.name for p in params if is_credential_name(p.name)}
        self._secrets = frozenset(secrets)
        self._signature = signature
        self._names = tuple(p.name for p in params)

    @property
    def secrets(self) -> frozenset[str]:
        """Declared, ``Annotated[..., Secret]`` and credential-named parameters."""
        return self._secrets

    @property
    def skips_first(self) -> bool:
        """True for a method: the leading ``self``/``cls`` is not part of the entry."""
        return self._skip_first

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any],
             known: set[str] | None = None) -> dict[str, Any]:
        """The effective-argument map; secret values go to ``known`` (the run's secrets)."""
        try:
            ba = self._signature.bind(*args, **kwargs)
        except TypeError:  # the real call raises its own TypeError; keep what was passed
            bound = dict(zip(self._names, args, strict=False)) | dict(kwargs)
        else:
            ba.apply_defaults()
            bound = dict(ba.arguments)
        if self._skip_first:
            bound.pop(self._names[0], None)
        if self._secrets:
            for name in self._secrets:
                if name in bound:
                    remember(known, bound[name], declared=True)
                    bound[name] = REDACTED
        return bound


def _convert(value: Any, annotation: Any) -> Any:
    if annotation is inspect.Parameter.empty or annotation is Any:
        return value
    if get_origin(annotation) is typing.Annotated:
        annotation = get_args(annotation)[0]
    if isinstance(annotation, type):
        if issubclass(annotation, np.ndarray):
            return value
        if issubclass(annotation, pathlib.PurePath) and isinstance(value, str):
            return annotation(value)
        validate = getattr(annotation, "model_validate", None)
        if validate is not None and hasattr(annotation, "model_fields"):
            return validate(value)

    def dec_hook(tp: Any, obj: Any) -> Any:
        if isinstance(tp, type) and isinstance(obj, tp):
            return obj
        validate = getattr(tp, "model_validate", None)
        if validate is not None:
            return validate(obj)
        raise NotImplementedError

    return msgspec.convert(value, type=annotation, dec_hook=dec_hook, strict=False)


SECRET_ENV_PREFIX = "AGENTLOG_SECRET_"


def secret_env_name(name: str) -> str:
    """The environment variable a replay reads a secret argument from: ``api_key`` ->
    ``AGENTLOG_SECRET_API_KEY``."""
    return SECRET_ENV_PREFIX + "".join(c if c.isalnum() else "_" for c in name).upper()


def decode_arguments(
    fn: Callable[..., Any],
    data: bytes,
    *,
    secrets: Mapping[str, Any] | None = None,
    secret_names: Iterable[str] = (),
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Rebuild ``(args, kwargs)`` that re-invoke ``fn`` from a sealed entry's bytes.

    Annotated parameters are converted back to their declared types (dataclasses, Structs,
    pydantic models, tuples, numpy arrays, ...). Secret parameters were never stored: each
    must be supplied, in ``secrets`` or in the environment variable
    ``AGENTLOG_SECRET_<NAME>`` (``api_key`` -> ``AGENTLOG_SECRET_API_KEY``). Secret are the
    parameters declared with ``window(secret=...)`` (when ``fn`` is the decorated window),
    ``Annotated[..., Secret]`` or a credential name, those named in ``secret_names`` (the
    entry's ``WindowEnter.secret_args``), and any whose sealed value is ``"<redacted>"``.
    For a method (``self``/``cls`` first) the result leaves the instance out: prepend it.
    Replay is built on this function.

    Raises:
        ValueError: a secret is not supplied (the message names the argument and both ways
            to supply it), the bytes are not an argument map, or an argument is missing.
    """
    raw = decode(data)
    if not isinstance(raw, dict):
        raise ValueError(
            f"expected a sealed argument map (dict) for {getattr(fn, '__qualname__', fn)}, "
            f"found {type(raw).__name__}; was the window declared with an `entry=` projection? "
            "Projected entries cannot re-invoke the function: use the stored bound arguments "
            "(agentlog.replay.reenter_arguments)."
        )
    spec = getattr(fn, "__agentlog_window__", None)
    binder = getattr(spec, "binder", None)
    if not isinstance(binder, ArgumentBinder):
        binder = ArgumentBinder(fn)
    secret_params = set(binder.secrets) | set(secret_names)
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception:
        hints = {}
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    secrets = dict(secrets or {})
    env = os.environ
    for param in binder.parameters:
        name = param.name
        if name in secrets:
            value = secrets.pop(name)
        elif secret_env_name(name) in env:
            value = env[secret_env_name(name)]
        elif name in secret_params or (isinstance(raw.get(name), str) and raw[name] == REDACTED):
            raise ValueError(
                f"argument `{name}` of {getattr(fn, '__qualname__', fn)} is secret: it was "
                f"recorded as {REDACTED!r}, not its value. Supply it again with "
                f"secrets={{{name!r}: ...}} or the environment variable "
                f"{secret_env_name(name)}"
            )
        elif name in raw:
            value = _convert(raw[name], hints.get(name, param.annotation))
        elif param.default is not inspect.Parameter.empty or param.kind in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        ):
            continue
        else:
            raise ValueError(
                f"sealed entry of {getattr(fn, '__qualname__', fn)} has no argument `{name}`; "
                f"found {sorted(raw)}"
            )
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            args.extend(value)
        elif param.kind is inspect.Parameter.VAR_KEYWORD:
            kwargs.update(value)
        elif param.kind is inspect.Parameter.KEYWORD_ONLY:
            kwargs[name] = value
        else:
            args.append(value)
    return tuple(args), kwargs


# --------------------------------------------------------------------------- headers

# Kept for callers of the earlier names; the rules live in ``_scrub``.
is_secret_key = is_credential_name
scrub = scrub_value
