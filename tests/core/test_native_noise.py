"""The optional C kernel ``agentlog._native`` against the numpy passes and the definition.

Every word it computes is held bit for bit to the numpy path (``_to_uniforms``,
``_joined_keys_numpy``) and to the per-id reference ``candidate_key_v2``; a select with the
kernel switched off records the same draws and choices.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest

import agentlog as al
from agentlog import _noise, _pools, _select
from agentlog._records import Selection
from tests.conftest import of_type

native = _noise._native


pytestmark = pytest.mark.skipif(native is None, reason="agentlog._native was not built")


@pytest.mark.parametrize("n", [1, 2, 7, 31, 32, 33, 200, 1000])
def test_uniform_row_equals_the_numpy_passes(n: int) -> None:
    rng = np.random.default_rng(n)
    keys = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
    bases = [int(b) for b in rng.integers(0, 2**64 - 1, size=9, dtype=np.uint64,
                                          endpoint=True)] + [0, 2**64 - 1]
    got = np.empty((len(bases), n))
    for r, base in enumerate(bases):
        native.uniform_row(keys, base, got[r])
    want = _noise._to_uniforms(keys ^ np.array(bases, dtype=np.uint64)[:, None])
    assert got.tobytes() == want.tobytes()
    for r, base in enumerate(bases):
        assert _noise.uniforms(keys, base).tobytes() == want[r].tobytes()
    assert got.min() > 0.0 and got.max() < 1.0


def test_uniform_row_reads_unaligned_keys() -> None:
    keys = np.random.default_rng(5).integers(0, 2**63, size=50, dtype=np.uint64)
    raw = b"x" + keys.tobytes()
    unaligned = np.frombuffer(raw, dtype=np.uint64, offset=1)
    assert unaligned.ctypes.data % 8 != 0
    assert _noise.uniforms(unaligned, 77).tobytes() == _noise._to_uniforms(
        keys ^ np.uint64(77)).tobytes()


@pytest.mark.parametrize("first", [0, 5, 65_530, 2**40, 2**64 - 3])
@pytest.mark.parametrize("rows", [1, 3, 8])
def test_step_rows_make_each_steps_base_as_step_base_does(first: int, rows: int) -> None:
    keys = np.random.default_rng(rows).integers(0, 2**63, size=70, dtype=np.uint64)
    out = np.empty((rows, 70))
    native.step_rows(keys, _noise.seed_stream_word(11, "doc"), first, out)
    bases = [_noise.step_base(11, "doc", (first + r) % 2**64) for r in range(rows)]
    want = _noise._to_uniforms(keys ^ np.array(bases, dtype=np.uint64)[:, None])
    assert out.tobytes() == want.tobytes()


def test_check_probs_gives_the_sum_and_smallest_entry_or_none_when_not_finite() -> None:
    rng = np.random.default_rng(2)
    for n in (1, 7, 200, 5000):
        p = rng.dirichlet(np.ones(n))
        total, lo = native.check_probs(p)
        assert lo == p.min() and abs(total - 1.0) < n * 2**-52  # a running sum's error bound
    for bad in (np.nan, np.inf, -np.inf):
        assert native.check_probs(np.array([0.5, bad, 0.5])) is None
    assert native.check_probs(np.array([0.5, -0.25, 0.75])) == (1.0, -0.25)
    with pytest.raises(ValueError, match="p must hold 8-byte words"):
        native.check_probs(b"abc")


@pytest.mark.parametrize("bad, message", [(np.nan, "must be finite; found nan at index 1"),
                                          (-0.5, "must be non-negative; found -0.5 at index 1")])
def test_select_still_names_a_bad_entry_with_the_kernels_check(bad: float, message: str,
                                                                tmp_path: Path) -> None:
    p = np.array([0.5, bad, 0.5, 0.5])
    with al.record(tmp_path / "t.zst", seed=1), pytest.raises(ValueError, match=message):
        al.select(p, candidates=["a", "b", "c", "d"], name="doc")
    # A strided view takes the numpy path and gets the same answer.
    wide = np.zeros(8)
    wide[::2] = [0.25, 0.25, 0.25, 0.25]
    with al.record(tmp_path / "u.zst", seed=1):
        assert al.select(wide[::2], candidates=["a", "b", "c", "d"], name="doc") in range(4)


def _random_id(rng: random.Random) -> str:
    alphabet = "ab-_.:/0123456789éß→𝔘中"  # 1- to 4-byte UTF-8 characters
    return "".join(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 3, 7, 8, 9, 15, 16,
                                                                    17, 40, 130])))


@pytest.mark.parametrize("seed", range(6))
def test_joined_keys_equal_the_numpy_passes_and_the_definition(seed: int) -> None:
    rng = random.Random(seed)
    ids = list(dict.fromkeys(_random_id(rng) for _ in range(300)))
    if seed == 0:
        ids.append("x" * 700)  # past the 64 precomputed position constants
    joined = "\0".join(ids)
    got = _noise._joined_keys(joined, len(ids))
    assert got.tobytes() == _noise._joined_keys_numpy(joined, len(ids)).tobytes()
    assert got.tolist() == [_noise.candidate_key_v2(c) for c in ids]


def test_generated_ids_of_one_length_key_as_the_definition() -> None:
    ids = [f"doc-{i:05d}" for i in range(1000)]
    got = _noise._joined_keys("\0".join(ids), len(ids))
    assert got.tolist() == [_noise.candidate_key_v2(c) for c in ids]


@pytest.mark.parametrize("seed", range(6))
def test_str_pool_encodes_as_msgspec_and_keys_as_the_definition(seed: int) -> None:
    rng = random.Random(seed)
    ids = list(dict.fromkeys(_random_id(rng) for _ in range(rng.choice([3, 15, 16, 300]))))
    ids += ["x" * rng.choice([31, 32, 255, 256, 700]), "a\0b"]  # header sizes; a NUL
    for given in (ids, tuple(ids)):
        encoded, as_tuple = native.str_pool(given)
        assert encoded == _noise._id_encoder.encode(tuple(ids)) and as_tuple == tuple(ids)
    given_tuple = tuple(ids)
    assert native.str_pool(given_tuple)[1] is given_tuple  # a tuple is not copied
    keys = np.empty(len(ids), dtype=np.uint64)
    assert native.str_pool_keys(encoded, len(ids), _noise._TAG_STR, keys) is True
    assert keys.tolist() == [_noise.candidate_key_v2(c) for c in ids]
    doubled = native.str_pool(ids + ids[:1])[0]
    assert native.str_pool_keys(doubled, len(ids) + 1, _noise._TAG_STR,
                                np.empty(len(ids) + 1, dtype=np.uint64)) is False


def test_past_a_million_ids_str_pool_keys_leaves_the_repeat_check_to_the_caller() -> None:
    n = (1 << 20) + 1
    ids = [f"{i:x}" for i in range(n)]
    encoded = native.str_pool(ids)[0]
    keys = np.empty(n, dtype=np.uint64)
    assert native.str_pool_keys(encoded, n, _noise._TAG_STR, keys) is None
    assert keys[-1] == _noise.candidate_key_v2(ids[-1])
    assert native.str_pool_keys(native.str_pool(ids[:-1])[0], n - 1, _noise._TAG_STR,
                                keys[:-1]) is True
    assert len(_pools.pool(ids, n).ids) == n
    ids[-1] = ids[0]
    with pytest.raises(ValueError, match="'0' appears more than once"):
        _pools.pool(ids, n)


def test_str_pool_leaves_every_other_pool_to_the_general_path() -> None:
    class Name(str):
        pass

    for other in (["a", 1], [b"a"], ["a", Name("b")], ["ok", "\ud800"], "ab", iter(["a"]),
                  np.array(["a"])):
        assert native.str_pool(other) is None


def test_same_items_compares_identity_and_refuses_other_types() -> None:
    a, b = "".join(["x", "1"]), "".join(["x", "1"])
    assert native.same_items([a, 1], (a, 1)) and not native.same_items([b, 1], (a, 1))
    assert not native.same_items([a], (a, 1)) and native.same_items([], ())
    with pytest.raises(TypeError):
        native.same_items((a,), (a,))
    with pytest.raises(TypeError):
        native.same_items([a], [a])


def test_str_pool_reads_a_copy_of_a_list() -> None:
    ids = [f"d{i}" for i in range(5)]
    encoded, as_tuple = native.str_pool(ids)
    ids[0] = "changed"
    assert as_tuple[0] == "d0" and _noise._id_encoder.encode(as_tuple) == encoded


def test_str_pool_keys_refuses_what_is_not_an_array_of_n_str() -> None:
    out = np.empty(2, dtype=np.uint64)
    good = native.str_pool(["a", "b"])[0]
    for bad, found in ((b"", "no array header"), (b"\xc0", "no array header"),
                       (b"\x93\xa1a\xa1b\xa1c", "another length"),
                       (b"\x92\xa1a\x01", "item 1 is not one"),
                       (b"\x92\xa1a\xa3bc", "item 1 is not one"),  # runs past the end
                       (b"\x92\xa1a\xd9", "item 1 is not one"),
                       (good + b"\x00", "1 bytes are left")):
        with pytest.raises(ValueError, match=found):
            native.str_pool_keys(bad, 2, 1, out)
    with pytest.raises(ValueError, match="out must hold 2 uint64 keys"):
        native.str_pool_keys(good, 2, 1, np.empty(3, dtype=np.uint64))


def test_plain_probs_passes_exactly_the_vectors_the_general_check_passes_unchanged() -> None:
    base = np.array([0.1, 0.2, 0.3, 0.4])
    cases = [base, base.copy(), np.array([1.0]), np.array([0.0, 1.0]), base + 9e-7 / 4,
             base + 2e-6 / 4, np.array([1.5, -0.5]), np.array([np.nan, 1.0]),
             np.array([np.inf, 0.0]), base.reshape(2, 2), np.repeat(base, 2)[::2],
             base.astype(">f8"), base.astype(np.float32), np.array([], dtype=np.float64),
             base.tolist(), np.array([-0.0, 1.0])]
    readonly = base.copy()
    readonly.flags.writeable = False
    cases.append(readonly)
    for p in cases:
        lo = native.plain_probs(p, _select.SUM_TOLERANCE)
        try:
            checked, want_lo = _select._select_iv(p, False, "s")
        except (TypeError, ValueError):
            assert lo is None, p
            continue
        if lo is not None:  # passed as it is, with the same smallest entry
            assert checked is p and lo == want_lo
        else:  # left to the general check: it converts (or copies) what is not plain
            assert type(p) is not np.ndarray or p.dtype != np.float64 or p.ndim != 1 or (
                not p.flags.c_contiguous) or p.dtype.byteorder == ">", p


def test_the_kernel_refuses_wrong_shapes_and_values_with_a_clear_error() -> None:
    keys = np.arange(4, dtype=np.uint64)
    with pytest.raises(ValueError, match="out must hold 4 float64 values"):
        native.uniform_row(keys, 1, np.empty(8))
    with pytest.raises(ValueError, match="keys must hold 8-byte words"):
        native.uniform_row(b"abc", 1, np.empty(0))
    with pytest.raises(OverflowError):
        native.uniform_row(keys, 2**64, np.empty(4))
    with pytest.raises(OverflowError):
        native.uniform_row(keys, -1, np.empty(4))
    with pytest.raises(TypeError):
        native.uniform_row(keys, "1", np.empty(4))
    with pytest.raises(ValueError, match="body must hold 3 NUL-ended ids; found 2"):
        native.joined_keys(b"a\0b\0", 3, 1, np.empty(3, dtype=np.uint64))
    with pytest.raises(ValueError, match="1 bytes are left"):
        native.joined_keys(b"a\0b\0c", 2, 1, np.empty(2, dtype=np.uint64))
    with pytest.raises(ValueError, match="out must hold 2 uint64 keys"):
        native.joined_keys(b"a\0b\0", 2, 1, np.empty(3, dtype=np.uint64))
    with pytest.raises(TypeError):  # a read-only output buffer
        native.joined_keys(b"a\0", 1, 1, b"\0" * 8)


def _record_draws(path: Path, *, pools: list[list[str]], n_small: int
                  ) -> list[tuple[int, bytes]]:
    choices = []
    with al.record(path, seed=3, task="t"):
        for ids in pools:
            for _ in range(3):
                choices.append(al.select(np.full(len(ids), 1.0 / len(ids)), candidates=ids,
                                         name="doc"))
        small = [f"s{i}" for i in range(n_small)]
        for _ in range(4):
            choices.append(al.select(np.full(n_small, 1.0 / n_small), candidates=small,
                                     name="small"))
    selections = of_type(al.read(path), Selection)
    assert [s.choice for s in selections] == choices
    return [(s.choice, bytes(s.draws)) for s in selections]


def test_a_select_without_the_kernel_records_the_same_draws_and_choices(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pools = [[f"d{k}-{i}" for i in range(n)] for k, n in enumerate([200, 50, 200, 1000])]
    with_kernel = _record_draws(tmp_path / "a.zst", pools=pools, n_small=10)
    monkeypatch.setattr(_noise, "_native", None)
    monkeypatch.setattr(_pools, "_native", None)
    monkeypatch.setattr(_pools, "_same_items", _pools._same_items_py)
    monkeypatch.setattr(_select, "_SMALL_DRAWS", _noise.SMALL_POOL)
    monkeypatch.setattr(_select, "_check_probs", None)
    monkeypatch.setattr(_select, "_plain_probs", None)
    monkeypatch.setattr(_select, "_gumbel_argmax", None)
    _pools._pool_cache.clear()
    _pools._str_pool_cache.clear()
    _pools._list_cache.clear()
    _noise._blocks.clear()
    without = _record_draws(tmp_path / "b.zst", pools=pools, n_small=10)
    assert with_kernel == without


def _numpy_argmax(p: np.ndarray, draws: np.ndarray) -> int:
    with np.errstate(divide="ignore"):
        return int((np.log(p) + draws).argmax())


def test_gumbel_argmax_picks_numpys_index_and_the_first_of_equal_scores() -> None:
    rng = np.random.default_rng(7)
    for _ in range(20_000):
        n = int(rng.integers(1, 300))
        p = rng.dirichlet(np.ones(n) * rng.choice([0.05, 1.0, 20.0]))
        draws = rng.gumbel(size=n)
        if rng.random() < 0.3:
            p[rng.integers(0, n, size=int(rng.integers(1, n + 1)))] = 0.0
            if not p.any():
                p[0] = 1.0
        assert native.gumbel_argmax(p, draws) == _numpy_argmax(p, draws)
    equal = np.full(6, 1 / 6)
    assert native.gumbel_argmax(equal, np.zeros(6)) == 0 == _numpy_argmax(equal, np.zeros(6))
    zeros_first = np.array([0.0, 0.0, 0.5, 0.5])
    assert native.gumbel_argmax(zeros_first, np.array([9.0, 9.0, 1.0, 1.0])) == 2


def test_gumbel_argmax_agrees_with_the_choice_check_in_near_ties() -> None:
    """Scores one or two units in the last place apart: the C library's log and numpy's may
    order them differently, within what ``choice_agrees`` (verify, replay) allows."""
    from agentlog._draw_match import choice_agrees

    rng = np.random.default_rng(11)
    for _ in range(5_000):
        p = rng.dirichlet(np.ones(2))
        log_p = np.log(p)
        g0 = float(rng.gumbel())
        target = log_p[0] + g0 - log_p[1]  # the draw that ties candidate 1 with 0
        g1 = float(np.nextafter(target, np.inf * rng.choice([-1, 1])))
        draws = np.array([g0, g1])
        choice = native.gumbel_argmax(p, draws)
        assert choice in (0, 1) and choice_agrees(log_p, draws, choice)


def test_gumbel_argmax_leaves_other_buffers_to_numpy() -> None:
    p, g = np.array([0.5, 0.5]), np.array([0.1, 0.2])
    assert native.gumbel_argmax(p, g) == 1
    strided_p, strided_g = np.full(4, 0.5)[::2], np.arange(4.0)[::2]  # not C-contiguous
    for bad_p, bad_g in ((strided_p, g), (p, strided_g), (p.astype(np.float32), g), (p, g[:1]),
                         (np.empty(0), np.empty(0)), ([0.5, 0.5], g), (p, b"12345678" * 2),
                         (np.ones((1, 2)) / 2, g)):
        assert native.gumbel_argmax(bad_p, bad_g) is None


def test_gumbel_argmax_entropy_is_the_argmax_and_the_entropy_bit_for_bit() -> None:
    """One pass for select's span path: the same index as gumbel_argmax and the same bits as
    entropy(p), the function export computes a stored vector's entropy with."""
    rng = np.random.default_rng(13)
    for _ in range(5_000):
        n = int(rng.integers(1, 257))
        p = rng.dirichlet(np.ones(n) * rng.choice([0.05, 1.0, 20.0]))
        if rng.random() < 0.3:
            p[rng.integers(0, n, size=int(rng.integers(1, n + 1)))] = 0.0
            if not p.any():
                p[0] = 1.0
        draws = rng.gumbel(size=n)
        choice, h = native.gumbel_argmax_entropy(p, draws)
        assert choice == native.gumbel_argmax(p, draws)
        assert h == native.entropy(p)  # exact: the live event and export agree
        positive = p[p > 0]
        truth = -math.fsum(x * math.log(x) for x in positive.tolist())
        # A sum of n terms in order: at most ~n units in the last place of the sum of
        # |p log p| (here <= log n + 1) away from the correctly rounded entropy.
        assert abs(h - truth) <= 4 * n * np.finfo(float).eps * (math.log(n) + 1)


def test_the_kernels_entropy_leaves_other_buffers_to_numpy() -> None:
    p, g = np.array([0.5, 0.5]), np.array([0.1, 0.2])
    assert native.entropy(p) == -math.log(0.5)
    for bad in (np.full(4, 0.5)[::2], p.astype(np.float32), np.empty(0), [0.5, 0.5],
                np.ones((1, 2)) / 2):
        assert native.entropy(bad) is None
        assert native.gumbel_argmax_entropy(bad, g[: len(bad)] if len(bad) else g) is None
    assert native.gumbel_argmax_entropy(p, g[:1]) is None
