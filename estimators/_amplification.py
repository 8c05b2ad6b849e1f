"""The arithmetic shared by the bounds of [LBC]: amplifiers, constants and results.

``_amplify`` multiplies a term by a Lipschitz constant under the conventions below;
``_nonnegative`` checks a constant, distance or slack; ``_out`` returns a result as a float
or a read-only array; ``_hash`` fingerprints a certificate's or a fit's inputs.

Infinite constants are allowed and give an infinite bound. Where an infinite amplifier meets
a zero the product is decided by the path, never left as NaN: a term that is absent (an
entry declared equal to ``μ``, a constant window ``L_MX = 0``, a slack ``ξ_X = 0``, a channel
mismatch of ``0``) is charged ``0`` by every amplifier downstream, ``L_C = ∞`` and
``L_s = ∞`` included (``0·∞ = 0``); an infinite amplifier on any other path — a measured
``ε_inX = 0`` behind a non-constant window among them — gives ``∞``. An unbounded window
on a changed entry has no finite radius, which is how a backbone change inside a scaffold
window is refused ([LBC] §6.2).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
Value = float | FloatArray


def _out(a: FloatArray) -> Value:
    """A 0-d result as a Python float, anything else as a read-only array."""
    if a.ndim == 0:
        return float(a)
    a = np.array(a, dtype=np.float64)
    a.flags.writeable = False
    return a


def _amplify(L: FloatArray, v: FloatArray, active: BoolArray | bool = True) -> FloatArray:
    """``L·v`` on an active path; 0 on an exact one; ``L = 0`` → 0; ``L = ∞`` → ∞.

    The conventions of the module docstring: they replace the NaN of ``0·∞``.
    """
    with np.errstate(invalid="ignore"):
        out = np.asarray(L * v, dtype=np.float64)
    out = np.where(L == 0, 0.0, out)
    out = np.where(np.isinf(L), np.inf, out)
    return np.where(active, out, 0.0)


def _nonnegative(name: str, x: Any, *, allow_inf: bool = True) -> FloatArray:
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`{name}` must be a number or an array of numbers; {exc}") from None
    if np.isnan(arr).any():
        raise ValueError(f"`{name}` must not be NaN; a constant that is unknown has no "
                         "bound: declare it (math.inf if unbounded)")
    if (arr < 0).any():
        raise ValueError(f"`{name}` must be ≥ 0 (a Lipschitz constant, distance or slack); "
                         f"found {float(arr[arr < 0].ravel()[0]):g}")
    if not allow_inf and np.isinf(arr).any():
        raise ValueError(f"`{name}` must be finite; found inf")
    return arr


def _hash(*arrays: ArrayLike, config: str = "") -> str:
    h = hashlib.sha256(config.encode())
    for a in arrays:
        arr = np.ascontiguousarray(np.asarray(a, dtype=np.float64))
        h.update(str(arr.shape).encode())
        h.update(arr.tobytes())
    return h.hexdigest()
