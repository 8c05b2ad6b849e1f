"""Noise generators /1, /2, /3: bulk keys equal the per-id definition; old traces still verify.

Generator ``fmix64-gumbel/2`` keys a new pool in numpy passes over a byte matrix; its
per-id definition (``candidate_key_v2``) is the reference every bulk path is held to.
Generator ``fmix64-gumbel/3`` (new runs) keys ids as /2 does and folds the run's task into
its seed. Generators ``fmix64-gumbel/1`` (BLAKE2b-64 per id) and /2 are what traces
recorded before use: they verify, and ``record(generator=...)`` reproduces their draws.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import msgspec
import numpy as np
import pytest

import agentlog as al
from agentlog import _noise, _pools
from agentlog.records import Continuation, RunStart, Selection

FIXTURES = Path(__file__).parents[1] / "fixtures" / "traces"
WITNESS = FIXTURES / "generator1" / "selections.zst"
WITNESS_V2 = FIXTURES / "generator2" / "selections.zst"

POOLS: list[list[object]] = [
    [f"doc-{i:06d}" for i in range(300)],                 # one length, a multiple of 8 + 2
    [f"doc-{i:04d}" for i in range(16)],                  # one length, exactly 8 bytes
    [f"d{i}" for i in range(1, 2000, 13)],                # many lengths
    ["", "a", "a\x00", "\x00a", "\x00" * 8, "\x00" * 9],  # empty, NULs inside and at the end
    ["é", "naïve", "日本語", "🙂" * 3, "x"],               # non-ASCII: keyed over UTF-8
    ["L" * 513, "L" * 512, "L" * 4000],                   # longer than the cached constants
    [0, 1, -1, 2**63 - 1, -(2**63), 7],                   # int64 range
    [2**64 - 1, 2**63, 0, 3],                             # past int64, all non-negative
    [2**64 - 1, -1],                                      # both signs past int64
    [b"", b"\x00", b"a", b"a\x00", b"\xff" * 9, b"x" * 70],
    ["1", 1, b"1"],                                        # mixed types
]


def _reference(ids: list[object]) -> np.ndarray:
    return np.array([_noise.candidate_key_v2(c) for c in ids], dtype=np.uint64)  # type: ignore[arg-type]


@pytest.mark.parametrize("ids", POOLS, ids=lambda p: repr(p[:2])[:30])
def test_bulk_keys_equal_the_per_id_definition_for_every_kind_of_pool(ids: list[object]) -> None:
    keys = _pools.pool(ids, len(ids)).keys
    np.testing.assert_array_equal(keys, _reference(ids))
    assert len(set(keys.tolist())) == len(ids)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32,
                                   np.uint64])
def test_integer_arrays_key_like_the_same_python_ints(dtype: type) -> None:
    values = np.array([0, 1, 2, 100, 127], dtype=dtype)
    if np.issubdtype(dtype, np.signedinteger):
        values[1] = -1
    np.testing.assert_array_equal(_pools.pool(values, 5).keys, _reference(values.tolist()))
    big = np.array([2**64 - 1, 2**63, 5], dtype=np.uint64)
    np.testing.assert_array_equal(_pools.pool(big, 3).keys, _reference(big.tolist()))


def test_a_key_does_not_depend_on_the_pool_it_is_in() -> None:
    # Rows are padded to the pool's longest id: the padding must not reach the key.
    short = _pools.pool(["a", "bb"], 2).keys
    long = _pools.pool(["a", "bb", "c" * 100], 3).keys
    np.testing.assert_array_equal(short, long[:2])


def test_type_sign_and_trailing_nul_all_change_the_key() -> None:
    k = _noise.candidate_key_v2
    assert len({k(1), k("1"), k(b"1")}) == 3
    assert k(-1) != k(2**64 - 1)
    assert k("a") != k("a\x00") and k(b"") != k("") and k(b"") != k(0)


def test_keys_of_generator_2_are_pinned() -> None:
    # The trace format's noise contract: same (seed, stream, step, id) -> same draw in any
    # agentlog version. These digests were taken when the generator was introduced; a
    # change here breaks every recorded trace's verification and replay.
    ids: list[object] = ["doc-1", "é", "", 0, -1, 2**64 - 1, b"\x00"]
    keys = np.array([_noise.candidate_key_v2(c) for c in ids], dtype="<u8")  # type: ignore[arg-type]
    draws = _noise.gumbel(keys, 123, "doc", 9).astype("<f8")
    assert hashlib.sha256(keys.tobytes()).hexdigest()[:16] == KEYS_V2
    assert hashlib.sha256(draws.tobytes()).hexdigest()[:16] == DRAWS_V2


KEYS_V2 = "cc873bf5c39c4794"
DRAWS_V2 = "e43fdedf7df4ca46"

_CHILD = """
import json, sys
import agentlog as al
path, generator = sys.argv[1], sys.argv[2]
pools = json.loads(sys.argv[3])
with al.record(path, seed=42, generator=generator):
    for k, pool in enumerate(pools):
        al.select([1 / len(pool)] * len(pool), candidates=pool, name=f"s{k}")
"""


@pytest.mark.parametrize("generator", _noise.GENERATORS)
def test_the_same_seed_stream_step_and_id_give_the_same_draw_in_another_process(
    tmp_path: Path, generator: str
) -> None:
    pools = [[f"doc-{i}" for i in range(50)], [3, -4, 2**63], ["x", "y"]]
    child = tmp_path / "child.zst"
    subprocess.run([sys.executable, "-c", _CHILD, str(child), generator, json.dumps(pools)],
                   check=True, capture_output=True, text=True)
    here = tmp_path / "here.zst"
    with al.record(here, seed=42, generator=generator):
        for k, pool in enumerate(pools):
            al.select([1 / len(pool)] * len(pool), candidates=pool, name=f"s{k}")
    theirs, ours = al.read(child).selections(), al.read(here).selections()
    assert [s.generator for s in theirs] == [generator] * 3
    assert [s.draws for s in theirs] == [s.draws for s in ours]
    assert al.verify(child).problems == []


@pytest.mark.parametrize("task", [None, "q-1"])
def test_generators_give_different_draws_for_the_same_ids(tmp_path: Path,
                                                          task: str | None) -> None:
    ids = [f"doc-{i}" for i in range(20)]
    draws = {}
    for generator in _noise.GENERATORS:
        path = tmp_path / f"{generator.replace('/', '_')}.zst"
        with al.record(path, seed=1, task=task, generator=generator):
            al.select([0.05] * 20, candidates=ids, name="doc")
        trace = al.read(path)
        assert [r.generator for r in trace.records if isinstance(r, RunStart)] == [generator]
        draws[generator] = trace.selections()[0].draws
    assert draws[_noise.GENERATOR_V1] != draws[_noise.GENERATOR_V2]
    # /3 keys ids as /2 does: only the task, folded into the seed, tells them apart
    assert (draws[_noise.GENERATOR_V2] == draws[_noise.GENERATOR_ID]) is (task is None)


def test_new_runs_record_generator_3() -> None:
    assert _noise.GENERATOR_ID == "fmix64-gumbel/3"
    assert al.record("unused.zst").generator == _noise.GENERATOR_ID


def test_an_unknown_generator_is_refused_with_the_known_ones_named() -> None:
    with pytest.raises(ValueError, match=r"`generator` must be one of 'fmix64-gumbel/1', "
                                         r"'fmix64-gumbel/2', 'fmix64-gumbel/3'; found "
                                         r"'philox/9'"):
        al.record("unused.zst", generator="philox/9")


def _witness_calls() -> list[tuple[str, list[float], object]]:
    spec = importlib.util.spec_from_file_location("make_generator1",
                                                  FIXTURES / "make_generator1.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.calls()  # type: ignore[no-any-return]


def test_a_trace_recorded_with_generator_1_still_verifies() -> None:
    report = al.verify(WITNESS)
    assert report.problems == []
    assert report.checked["selections"] == 14
    assert {s.generator for s in al.read(WITNESS).selections()} == {_noise.GENERATOR_V1}


def test_record_with_generator_1_reproduces_an_old_trace_draw_for_draw(tmp_path: Path) -> None:
    trace = al.read(WITNESS)
    old = trace.selections()
    (start,) = [r for r in trace.records if isinstance(r, RunStart)]
    path = tmp_path / "again.zst"
    with al.record(path, seed=start.seed, generator=start.generator):
        for stream, probs, pool in _witness_calls():
            al.select(probs, candidates=pool, name=stream)  # type: ignore[arg-type]
    new = al.read(path).selections()
    assert [(s.name, s.step, s.pool, s.draws, s.choice) for s in new] == [
        (s.name, s.step, s.pool, s.draws, s.choice) for s in old]


def test_a_trace_recorded_with_generator_2_still_verifies() -> None:
    report = al.verify(WITNESS_V2)
    assert report.problems == []
    assert report.checked["selections"] == 14 and report.checked["continuations"] == 3
    assert {s.generator for s in al.read(WITNESS_V2).selections()} == {_noise.GENERATOR_V2}


def test_record_with_generator_2_reproduces_an_old_trace_draw_for_draw(tmp_path: Path) -> None:
    """The witness was recorded before /3 (by make_generator2.py at e620041), with a task:
    /2 ignores it, so the same seed gives the old draws and stop uniforms."""
    trace = al.read(WITNESS_V2)
    (start,) = [r for r in trace.records if isinstance(r, RunStart)]
    assert start.task == "fixture"
    path = tmp_path / "again.zst"
    with al.record(path, seed=start.seed, task=start.task, generator=start.generator):
        for stream, probs, pool in _witness_calls():
            al.select(probs, candidates=pool, name=stream)  # type: ignore[arg-type]
        for _ in range(3):
            al.proceed(0.5, name="stop")
    new = al.read(path)

    def draws(t: al.Trace) -> list[tuple[object, ...]]:
        return [(s.name, s.step, s.pool, s.draws, s.choice) for s in t.selections()]

    def uniforms(t: al.Trace) -> list[float]:
        return [r.u for r in t.records if isinstance(r, Continuation)]

    assert draws(new) == draws(trace)
    assert uniforms(new) == uniforms(trace) == [0.4761454721001403, 0.3305190386503704,
                                                0.33297823821991474]


def test_verify_reports_a_selection_of_an_unknown_generator(tmp_path: Path) -> None:
    from agentlog._writer import TraceWriter

    path = tmp_path / "t.zst"
    with al.record(path, seed=3):
        al.select([0.5, 0.5], candidates=["a", "b"], name="doc")
    forged = tmp_path / "forged.zst"
    with TraceWriter(forged) as w:
        for r in al.read(path).records:
            if isinstance(r, Selection):
                r = msgspec.structs.replace(r, generator="philox/9")
            w.put(r)
    kinds = [(p.kind, p.message) for p in al.verify(forged).problems]
    assert ("generator", "select 'doc' step 0: noise generator 'philox/9' is not one this "
            "agentlog regenerates: upgrade agentlog") in kinds


def test_equal_keys_of_distinct_ids_are_not_taken_for_a_repeated_id(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    # Uniqueness is proven by distinct keys; equal keys fall back to comparing the ids.
    monkeypatch.setattr(_noise, "pool_keys", lambda ids, array=None, kinds=None: np.zeros(
        len(ids), dtype=np.uint64))
    monkeypatch.setattr(_noise, "_joined_keys", lambda joined, n: np.zeros(n, np.uint64))
    assert _pools.pool(("p", "q", "r"), 3).ids == ("p", "q", "r")
    assert _pools.pool((1, 2, 3), 3).ids == (1, 2, 3)
    with pytest.raises(ValueError, match="`candidates` must be unique ids; 'p' appears"):
        _pools.pool(("p", "q", "p"), 3)
    with pytest.raises(ValueError, match="`candidates` must be unique ids; 2 appears"):
        _pools.pool((1, 2, 2), 3)


NUL_JOINED_POOLS: list[list[str]] = [
    [f"d{i}" for i in range(1000)],                      # 2 to 4 bytes: one word, masked
    [f"doc-{i:04d}" for i in range(64)],                 # exactly one word each
    [f"document-{i}" for i in range(300)],               # two words, many lengths
    ["", "a", "ab" * 4, "abc" * 3, "x" * 255, "y" * 256],  # empty, word edges, table edge
    ["é", "naïve", "日本語", "🙂" * 3, "Ωmega-long-id"],   # UTF-8 lengths, not characters
    ["L" * 513, "M" * 4000, "n"],                        # longer than the cached constants
    ["ab", "c", "def"],                                  # total as if one length: it is not
    ["é" * 5, "ü" * 5],                                  # one length in bytes, 10 each
    [f"id-{i:013d}" for i in range(40)],                 # one length over two words
    ["same-len"] + [f"other{i}" for i in range(3)],      # 8 bytes, then 6
]


@pytest.mark.parametrize("ids", NUL_JOINED_POOLS, ids=lambda p: repr(p[:2])[:30])
def test_keys_from_the_nul_joined_ids_equal_the_per_id_definition(ids: list[str]) -> None:
    joined = _noise.nul_joined(ids)
    assert joined == "\0".join(ids)
    np.testing.assert_array_equal(_noise._joined_keys(joined, len(ids)), _reference(ids))  # type: ignore[arg-type]
    np.testing.assert_array_equal(_noise.pool_keys(tuple(ids)), _reference(ids))  # type: ignore[arg-type]


def test_only_str_pools_free_of_nul_are_named_by_their_joined_ids() -> None:
    assert _noise.nul_joined(["a", "b"]) == "a\0b"
    assert _noise.nul_joined(["a\0b"]) is None  # would read as two ids
    assert _noise.nul_joined(["a", 1]) is None and _noise.nul_joined([b"a"]) is None
    # so a pool with a NUL inside an id is not the pool of the ids around it
    one, two = _pools.pool(["a\0b"], 1), _pools.pool(["a", "b"], 2)
    assert one.ids == ("a\0b",) and two.ids == ("a", "b") and one.hash != two.hash
    np.testing.assert_array_equal(one.keys, _reference(["a\0b"]))


def test_a_pool_is_the_same_whether_given_as_a_list_a_tuple_or_a_str_array() -> None:
    ids = [f"q{i}" for i in range(40)]
    pools = [_pools.pool(ids, 40), _pools.pool(tuple(ids), 40),
             _pools.pool(np.array(ids), 40)]
    assert {p.hash for p in pools} == {pools[0].hash}
    assert all(p.ids == tuple(ids) for p in pools)
    # the Blob is the canonical msgpack list of the ids, whatever sequence carried them
    assert pools[0].encoded == msgspec.msgpack.encode(ids)
    assert pools[0].hash == hashlib.sha256(msgspec.msgpack.encode(ids)).digest()


def test_a_str_subclass_id_keys_and_encodes_like_the_str() -> None:
    class Doc(str):
        pass

    ids = ["s-a", "s-b", "s-c"]
    mine = _pools.pool([Doc(i) for i in ids], 3)
    np.testing.assert_array_equal(mine.keys, _reference(ids))  # type: ignore[arg-type]
    assert mine.encoded == msgspec.msgpack.encode(ids)
