"""``cess.estimate``'s input checks and inputs hash after the one-pass screens (issue 16):
every malformed round is still named, and the hash is the same SHA-256 as before, also on
the large-input path that hashes beside the estimators."""

from __future__ import annotations

import hashlib
import re
import signal

import numpy as np
import pytest

from agentlog.context import ASYNC_SIGNALS
from agentlog.estimators import _cess, cess

NAN = np.nan
Y = [[0.8, -0.4, 0.8], [0.9, NAN, NAN], [1.0, 1.0, NAN]]
P = [[0.4, 0.25, 0.2], [0.1, NAN, NAN], [0.05, 0.05, NAN]]
S = [[1.0, 0.8, 0.4], [1.0, NAN, NAN], [1.0, 0.5, NAN]]
M = [[0.5, 0.0, 0.5], [0.0, NAN, NAN], [-0.5, -0.5, NAN]]
ARGS = {"y": Y, "p": P, "s": S, "m_chosen": M}


def _sha256(arrays: list[np.ndarray], config: str) -> str:
    """The documented hash, written out: SHA-256 of the config, then shape and float64
    bytes of each input in order."""
    h = hashlib.sha256(config.encode())
    for a in arrays:
        a = np.ascontiguousarray(a, dtype=np.float64)
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _run(**override: object) -> cess.CessResult:
    args = {**ARGS, **override}
    return cess.estimate(args["y"], args["p"], args["s"], args["m_chosen"], 0.1, 30,
                         budget=3, lam=0.5)


def _with(name: str, row: int, col: int, value: float) -> list[list[float]]:
    arr = [list(r) for r in ARGS[name]]  # type: ignore[arg-type]
    arr[row][col] = value
    return arr


@pytest.mark.parametrize(("name", "row", "col", "value", "message"), [
    # a value where y is NaN, in range: the range screen sees it
    ("p", 1, 1, 0.5, "`p` has a value at trajectory 1, round 2 where `y` is NaN"),
    # out of range where y is NaN: the range screen passes it, the NaN count does not
    ("p", 1, 2, 5.0, "`p` has a value at trajectory 1, round 3 where `y` is NaN"),
    ("s", 2, 2, -1.0, "`s` has a value at trajectory 2, round 3 where `y` is NaN"),
    # inf where y is NaN: not finite, as unobserved rounds are, but not NaN either
    ("m_chosen", 1, 1, np.inf, "`m_chosen` has a value at trajectory 1, round 2 where "),
    ("p", 0, 1, NAN, "`p` has NaN at trajectory 0, round 2 where `y` is observed"),
    ("m_chosen", 0, 2, -np.inf, "`m_chosen` must be finite on observed rounds; found -inf at "
                                "trajectory 0, round 3"),
    ("p", 2, 0, np.inf, "`p` must be finite on observed rounds; found inf at trajectory 2"),
    ("p", 0, 0, 0.0, "`p` must be in (0, 1] on observed rounds; found 0.0 at trajectory 0, "
                     "round 1"),
    ("s", 2, 1, 1.5, "`s` must be in (0, 1] on observed rounds; found 1.5 at trajectory 2, "
                     "round 2"),
])
def test_each_malformed_round_is_named(name: str, row: int, col: int, value: float,
                                       message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        _run(**{name: _with(name, row, col, value)})


def test_y_checks_are_unchanged() -> None:
    with pytest.raises(ValueError, match=re.escape("`y` must be finite on observed rounds")):
        _run(y=_with("y", 0, 1, -np.inf))
    with pytest.raises(ValueError, match=r"`y` must lie in `bounds` \[-1.0, 1.0\] \(the score "
                                         r"range of Π and eq. 10\); found 1.5 at trajectory 2, "
                                         r"round 2"):
        _run(y=_with("y", 2, 1, 1.5))
    with pytest.raises(ValueError, match=r"`y` has a NaN inside the observed prefix: "
                                         r"trajectory 0, round 2"):
        _run(y=_with("y", 0, 1, NAN))


def test_the_hash_is_the_sha256_of_config_shapes_and_bytes() -> None:
    res = _run()
    n = len(Y)
    arrays = [np.array(a) for a in (Y, P, S, M)] + [np.full(n, 0.1), np.full(n, 30.0),
                                                     np.full(n, 0.5)]
    config = "3|shrink-then-clip|prediction|-1.0|1.0|False"
    assert res.inputs_hash == _sha256(arrays, config)


def test_large_inputs_hashed_beside_the_estimators_give_the_same_hash_and_results() -> None:
    rng = np.random.default_rng(3)
    n, k = 80_000, 6  # 4 inputs x 3.8 MB + 3 vectors: past the 16 MB threshold
    T = rng.integers(1, k + 1, n)
    observed = np.arange(k)[None, :] < T[:, None]
    y = np.where(observed, rng.uniform(-1, 1, (n, k)), NAN)
    p = np.where(observed, rng.uniform(0.05, 1, (n, k)), NAN)
    s = np.where(observed, np.cumprod(1 - rng.uniform(0, 0.2, (n, k)), axis=1), NAN)
    m = np.where(observed, rng.uniform(-0.5, 0.5, (n, k)), NAN)
    m_bar = rng.uniform(-0.5, 0.5, n)
    total = sum(a.nbytes for a in (y, p, s, m)) + 3 * m_bar.nbytes
    assert total >= _cess._HASH_BESIDE_BYTES
    res = cess.estimate(y, p, s, m, m_bar, 30, budget=k, lam=0.25)
    config = f"{k}|shrink-then-clip|prediction|-1.0|1.0|False"
    assert res.inputs_hash == _sha256([y, p, s, m, m_bar, np.full(n, 30.0),
                                       np.full(n, 0.25)], config)
    # The same numbers as the small-input path, trajectory by trajectory.
    head = cess.estimate(y[:50], p[:50], s[:50], m[:50], m_bar[:50], 30, budget=k, lam=0.25)
    np.testing.assert_array_equal(res.estimate[:50], head.estimate)
    w = 1 / (30 * p * s)
    np.testing.assert_allclose(res.ipw, np.nansum(w * y, axis=1) / k, rtol=1e-12, atol=1e-15)
    assert y.flags.writeable and np.isnan(y).sum() == (~observed).sum()  # inputs untouched


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="no thread signal masks")
def test_the_thread_hashing_large_inputs_leaves_async_signals_to_the_main_thread(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: a Ctrl-C the kernel handed to the hashing thread reached Python only when
    the main thread, waiting in ``join``, came back to bytecode."""
    masks: list[set[int]] = []

    def inputs_hash(*arrays: np.ndarray, config: str) -> str:
        masks.append(set(signal.pthread_sigmask(signal.SIG_BLOCK, [])))
        return "hashed"

    monkeypatch.setattr(_cess, "inputs_hash", inputs_hash)
    big = np.zeros(_cess._HASH_BESIDE_BYTES // 8 + 1)
    assert _cess._hash_beside(big, config="c")() == "hashed"
    (mask,) = masks
    assert mask >= ASYNC_SIGNALS and signal.SIGINT in mask and signal.SIGTERM in mask
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # main: as it was
