"""A selection's vectors (zero-copy float64 views) and the ids of a candidate pool Blob."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from agentlog._errors import TraceFormatError
from agentlog._records import Selection

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["decode_pool", "draws", "policy_probs", "probs", "raw_probs"]


# -- vectors ---------------------------------------------------------------------------


def _vector(sel: Selection, data: bytes, field: str, n: int | None) -> npt.NDArray[np.float64]:
    import numpy as np

    if len(data) % 8 or (n is not None and len(data) != 8 * n):
        expected = f"{8 * n} bytes (n={n} float64)" if n is not None else "a multiple of 8 bytes"
        raise TraceFormatError(
            f"selection {sel.name!r} step {sel.step} (run {sel.run}, window {sel.window}): "
            f"`{field}` should hold {expected}, found {len(data)} bytes"
        )
    return np.frombuffer(data, dtype="<f8")


def probs(sel: Selection) -> npt.NDArray[np.float64]:
    """The selection's probability vector, zero-copy (a read-only view of the record)."""
    return _vector(sel, sel.probs, "probs", sel.n)


def draws(sel: Selection) -> npt.NDArray[np.float64]:
    """The selection's Gumbel draws, zero-copy (a read-only view of the record)."""
    return _vector(sel, sel.draws, "draws", sel.n)


def raw_probs(sel: Selection) -> npt.NDArray[np.float64] | None:
    """The vector before top-k/top-p truncation, or None when none was applied."""
    if sel.raw_probs is None:
        return None
    return _vector(sel, sel.raw_probs, "raw_probs", None)


def policy_probs(sel: Selection) -> npt.NDArray[np.float64] | None:
    """The agent's own vector when a steer replaced it, or None when none did."""
    if sel.policy_probs is None:
        return None
    return _vector(sel, sel.policy_probs, "policy_probs", None)


# msgpack tells str from bytes, but one msgspec union cannot hold both: check by hand.
_pool_decoder = msgspec.msgpack.Decoder(list[Any])


def decode_pool(data: bytes, *, where: str = "a candidate pool") -> list[str | int | bytes]:
    """The candidate ids held by a pool Blob's ``data`` (a canonical msgpack list).

    Raises:
        TraceFormatError: the data is not a list of str, int or bytes ids.
    """
    try:
        ids: list[Any] = _pool_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise TraceFormatError(
            f"expected {where} to be a msgpack list of candidate ids (str, int or bytes); "
            f"it does not decode: {exc}"
        ) from exc
    bad = next((c for c in ids if not isinstance(c, str | int | bytes)), None)
    if bad is not None:
        raise TraceFormatError(
            f"expected {where} to be a msgpack list of candidate ids (str, int or bytes); "
            f"it holds a {type(bad).__name__}"
        )
    return ids
