"""Identity-keyed noise: same (seed, stream, step, id) → same draw, in any order/process."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from agentlog import _noise, _pools

IDS = [f"doc-{i}" for i in range(200)]


def test_draws_follow_candidates_not_positions_when_the_pool_is_reversed() -> None:
    forward = _noise.gumbel(_pools.pool(IDS, len(IDS)).keys, 7, "doc", 3)
    backward = _noise.gumbel(_pools.pool(IDS[::-1], len(IDS)).keys, 7, "doc", 3)
    np.testing.assert_array_equal(forward, backward[::-1])


def test_draws_follow_candidates_under_any_permutation_and_subset() -> None:
    rng = np.random.default_rng(0)
    order = rng.permutation(len(IDS))
    shuffled = [IDS[i] for i in order]
    full = _noise.gumbel(_pools.pool(IDS, len(IDS)).keys, 11, "doc", 0)
    perm = _noise.gumbel(_pools.pool(shuffled, len(IDS)).keys, 11, "doc", 0)
    np.testing.assert_array_equal(perm, full[order])
    sub = _noise.gumbel(_pools.pool(IDS[:5], 5).keys, 11, "doc", 0)
    np.testing.assert_array_equal(sub, full[:5])


def test_draws_are_identical_in_a_fresh_process() -> None:
    code = (
        "from agentlog import _noise, _pools; ids=[f'doc-{i}' for i in range(50)];"
        "print(_noise.gumbel(_pools.pool(ids,50).keys, 123, 'doc', 9).tobytes().hex());"
        "print(repr(_noise.uniform(123, 'stop', 4)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    ids = [f"doc-{i}" for i in range(50)]
    assert out[0] == _noise.gumbel(_pools.pool(ids, 50).keys, 123, "doc", 9).tobytes().hex()
    assert float(out[1]) == _noise.uniform(123, "stop", 4)


def test_seed_stream_step_and_type_of_id_all_change_the_draw() -> None:
    keys = _pools.pool(IDS, len(IDS)).keys
    base = _noise.gumbel(keys, 1, "doc", 0)
    for other in (_noise.gumbel(keys, 2, "doc", 0), _noise.gumbel(keys, 1, "docs", 0),
                  _noise.gumbel(keys, 1, "doc", 1)):
        assert not np.any(base == other)
    assert _noise.candidate_key(1) != _noise.candidate_key("1")


def test_gumbel_draws_pass_a_kolmogorov_smirnov_test_across_steps() -> None:
    keys = _pools.pool(IDS, len(IDS)).keys
    draws = np.concatenate([_noise.gumbel(keys, 5, "doc", s) for s in range(100)])
    assert stats.kstest(draws, stats.gumbel_r.cdf).pvalue > 1e-3
    # consecutive steps are not correlated (the Philox counter pitfall)
    a = _noise.gumbel(keys, 5, "doc", 10)
    b = _noise.gumbel(keys, 5, "doc", 11)
    r = np.corrcoef(a, b)[0, 1]
    assert abs(r) < 4 / np.sqrt(len(IDS))


def test_continuation_uniforms_are_uniform_and_independent_of_other_streams() -> None:
    u = np.array([_noise.uniform(9, "stop", s) for s in range(20_000)])
    assert ((u > 0) & (u < 1)).all()
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    # SE of the mean of U(0,1) over n draws is sqrt(1/12/n)
    assert abs(u.mean() - 0.5) < 4 * np.sqrt(1 / 12 / u.size)
    assert _noise.uniform(9, "stop", 0) != _noise.uniform(9, "halt", 0)


def test_gumbel_max_samples_from_the_probability_vector() -> None:
    p = np.array([0.5, 0.3, 0.15, 0.05])
    keys = _pools.pool(["a", "b", "c", "d"], 4).keys
    n = 20_000
    counts = np.zeros(4)
    for step in range(n):
        counts[np.argmax(np.log(p) + _noise.gumbel(keys, 3, "doc", step))] += 1
    se = np.sqrt(p * (1 - p) / n)
    assert np.all(np.abs(counts / n - p) < 4 * se)


def test_pool_rejects_duplicate_ids_and_objects() -> None:
    with pytest.raises(ValueError, match="`candidates` must be unique ids; 'a' appears"):
        _pools.pool(["a", "b", "a"], 3)
    with pytest.raises(TypeError, match="`candidates` must hold str, int or bytes ids"):
        _pools.pool([object()], 1)
    # Unhashable ids: before, a bare "unhashable type: 'list'" from the cache lookup.
    for ids in ([["a"], ["b"]], [{"a": 1}, "b"]):
        with pytest.raises(TypeError, match=r"must hold str, int or bytes ids; found "
                           r"(list|dict)"):
            _pools.pool(ids, 2)


@pytest.mark.parametrize("ids", [["a", "b\udc80c"], ["a\0x", "\ud800"], ["ok", "\ud800", 3]])
def test_a_str_id_without_a_utf8_encoding_gets_a_clear_error(ids: list) -> None:
    # Every keying path: NUL-joined str ids, str ids holding a NUL, mixed types.
    with pytest.raises(ValueError, match=r"UTF-8 encoding; id 1 .* a lone surrogate"):
        _pools.pool(ids, len(ids))


def test_integer_array_pools_match_integer_list_pools() -> None:
    arr = np.arange(10, 20, dtype=np.int64)
    assert _pools.pool(arr, 10).hash == _pools.pool(list(range(10, 20)), 10).hash
    np.testing.assert_array_equal(_pools.pool(arr, 10).keys,
                                  _pools.pool(list(range(10, 20)), 10).keys)


def test_step_base_equals_its_definition_for_remembered_and_other_steps() -> None:
    def reference(seed: int, stream: str, step: int) -> int:
        f = _noise.fmix64
        return f(f((seed & (2**64 - 1)) ^ _noise.stream_key(stream)) ^ f(step + _noise._PHI))

    steps = [70_000, 3, 0, 65_535, 65_536, 2**64 + 5, -1, -(2**63), 12_345, 1, 2]
    for step in steps + list(range(0, 200_000, 997)):
        for seed in (0, 7, -5, 2**64 - 1):
            assert _noise.step_base(seed, "doc", step) == reference(seed, "doc", step), step
    assert len(_noise._step_words) <= _noise._STEP_WORDS


def test_a_list_enters_the_list_cache_once_its_pool_is_seen_again_and_misses_once_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Empty caches: a freed list of an earlier test may have left an entry at this id, and
    # the pool cache would know the pool already.
    for cache in ("_list_cache", "_pool_cache"):
        monkeypatch.setattr(_pools, cache, _pools._Cache(_pools._CACHE_BYTES))
    ids = [f"once-{i}" for i in range(50)]
    first = _pools.pool(ids, 50)
    assert id(ids) not in _pools._list_cache  # a pool drawn once costs no entry
    second = _pools.pool(ids, 50)  # the pool caches know it: now the list has an entry
    assert second.keys is first.keys and second.hash == first.hash  # keys not made again
    assert _pools._list_cache[id(ids)] is second  # no copy of the list: only its pool
    assert _pools.pool(ids, 50) is second
    ids[0] = "changed"  # mutated in place: no longer its pool's objects, so a new pool
    changed = _pools.pool(ids, 50)
    assert changed.ids[0] == "changed" and changed.hash != first.hash
    np.testing.assert_array_equal(changed.keys[1:], first.keys[1:])
    ids[0] = "".join(["once-", "0"])  # an equal id, another object: the same pool again
    assert ids[0] is not first.ids[0]
    back = _pools.pool(ids, 50)
    assert back.hash == first.hash and back.ids == first.ids
    ids.append("one-more")  # a longer list is another pool
    assert _pools.pool(ids, 51).ids[-1] == "one-more"
    assert _pools._same_items([], ()) and not _pools._same_items(["a"], ())


def test_the_pool_caches_are_bounded_in_bytes_as_well_as_in_entries(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: 512 fresh pools of 100,000 ids stayed cached, ~7 GB of RSS after 500 steps."""
    for big in (_pools._pool_cache, _pools._list_cache, _pools._v1_pool_keys):
        assert isinstance(big, _pools._Cache) and big.max_bytes == _pools._CACHE_BYTES
    # A quarter of the budget, so that a dozen pools (~9 MB each) overflow it.
    monkeypatch.setattr(_pools, "_pool_cache", _pools._Cache(_pools._CACHE_BYTES // 4))
    n = 100_000
    for k in range(12):  # what select does with a new pool of a retrieval agent's step
        ids = [f"doc-{k}-{i:06d}" for i in range(n)]
        pool = _pools.pool(ids, n)
        assert _pools.pool(ids, n).keys is pool.keys  # cached while the cache holds it
        assert _pools._pool_bytes(pool, "\0".join(ids)) >= 72 * n
    cache = _pools._pool_cache
    assert 0 < cache.total <= _pools._CACHE_BYTES // 4
    assert sum(cache.sizes.values()) == cache.total and set(cache.sizes) == set(cache)
    cached = [entry.keys for entry in cache.values()]
    assert 0 < sum(len(keys) == n for keys in cached) < 12  # the oldest were evicted
    assert _pools._list_cache.total <= _pools._CACHE_BYTES
    cache.clear()  # and its count with it
    assert cache.total == 0 and not cache.sizes and not cache


def test_an_entry_larger_than_the_budget_is_not_kept_and_the_draws_do_not_change(
        monkeypatch: pytest.MonkeyPatch) -> None:
    small = _pools._Cache(max_bytes=10_000)
    monkeypatch.setattr(_pools, "_pool_cache", small)
    ids = [f"big-{i}" for i in range(1000)]  # over the budget (~90 KB)
    first = _pools.pool(ids, 1000)
    assert len(small) == 0 and small.total == 0
    again = _pools.pool(list(ids), 1000)
    assert again.keys is not first.keys and again.hash == first.hash
    np.testing.assert_array_equal(again.keys, first.keys)
    tiny = [_pools.pool([f"t{k}-{i}" for i in range(3)], 3) for k in range(400)]
    assert 0 < len(small) < 400 and small.total <= 10_000  # evicted by bytes, oldest first
    assert list(small.values())[-1].keys is tiny[-1].keys


def test_a_str_pools_encoding_keys_and_hash_are_their_definitions() -> None:
    """The encoding is the pool's Blob in the trace, its hash names the pool, its keys are
    ``candidate_key_v2``'s: at word and length edges, past 65,536 ids, in UTF-8, with a NUL,
    over many blocks of the keying passes and with ids longer than a block."""
    block = _noise._KEY_BLOCK_BYTES
    pools = [["a"], ["x" * 31, "x" * 32, "x" * 255, "x" * 256, "x" * 65_535, "y" * 65_536],
             [f"d{i}" for i in range(15)], [f"d{i}" for i in range(16)],
             [f"d{i}" for i in range(70_000)], ["é", "日本語", "a\0b", "", "🙂" * 9],
             ["z" * (block + 5), "", "b" * (block - 1), "c", "é" * block, "d"]]
    for ids in pools:
        for given in (list(ids), tuple(ids)):
            got = _pools.pool(given, len(ids))
            encoded = _noise._id_encoder.encode(tuple(ids))
            assert got.encoded == encoded and got.ids == tuple(ids)
            assert got.hash == hashlib.sha256(encoded).digest()
            assert got.keys.tolist() == [_noise.candidate_key_v2(c) for c in ids]


def test_a_repeated_str_id_is_refused_and_a_key_collision_is_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="'b' appears more than once"):
        _pools.pool(["a", "b", "c", "b"], 4)
    # Two distinct ids whose keys collide (forced: every key equal) are a valid pool: the
    # ids themselves decide.
    monkeypatch.setattr(_pools, "_joined_keys", lambda joined, n: np.zeros(n, np.uint64))
    monkeypatch.setattr(_pools, "_pool_cache", _pools._Cache(_pools._CACHE_BYTES))
    assert _pools.pool(["p", "q", "r"], 3).ids == ("p", "q", "r")
    with pytest.raises(ValueError, match="'q' appears more than once"):
        _pools.pool(["p", "q", "q"], 3)


def test_a_key_inserted_twice_is_counted_once() -> None:
    from agentlog._bounded_cache import BoundedCache, insert

    cache = BoundedCache(max_bytes=1_000)
    insert(cache, "k", 1, 10, 300)
    insert(cache, "k", 2, 10, 400)  # two threads that missed the same key
    assert dict(cache) == {"k": 2} and cache.total == 400 and cache.sizes == {"k": 400}


def test_the_generator_1_key_cache_is_bounded_in_bytes(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    monkeypatch.setattr(_noise, "_KEY_CACHE_BYTES", 100_000)
    long_ids = [f"https://example.org/{i}/" + "x" * 1_000 for i in range(400)]
    keys = [_noise.candidate_key(c) for c in long_ids]
    assert len(_noise._key_cache) < 400 and _noise._key_cache_bytes[0] <= 100_000 + 1_200
    assert [_noise.candidate_key(c) for c in long_ids] == keys  # the same keys again


def test_the_pool_cache_counts_about_the_bytes_its_entries_keep(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool's entry keeps its ids, keys, encoding and NUL-joined name; the cache's count
    (``_pool_bytes``) is within a quarter of what tracemalloc sees it keep."""
    import gc
    import tracemalloc

    cache = _pools._Cache(_pools._CACHE_BYTES)
    monkeypatch.setattr(_pools, "_pool_cache", cache)
    monkeypatch.setattr(_pools, "_list_cache", _pools._Cache(_pools._CACHE_BYTES))
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for k in range(40):  # the lists go; the cache keeps the pools
            _pools.pool([f"doc-{k}-{i:05d}" for i in range(2000)], 2000)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(cache) == 40
    assert 0.8 * kept <= cache.total <= 1.25 * kept, (cache.total, kept)
