"""Print the test-vector tables of docs/spec/trace-format.md, computed by agentlog's own code.

Run from the repository root: ``python tests/spec/make_vectors.py``, and paste its output
over the tables of the spec's "Test vectors" section. test_spec_reader.py checks that
agentlog, the independent reader (tests/spec/reader.py) and its verifier
(tests/spec/verifier.py) reproduce every row.
"""

from __future__ import annotations

import hashlib
import zlib

import msgspec
import numpy as np

from agentlog import _digest, _noise, _posterior, _state
from agentlog.records import Score

GENS = (_noise.GENERATOR_V1, _noise.GENERATOR_V2, _noise.GENERATOR_ID)
IDS = ["doc-0001", "", "é", "日本語", "x" * 40, 0, 1, -1, 2**63 - 1, -(2**63), 2**64 - 1,
       b"", b"\x00", b"a" * 9, "1", b"1"]


def key_of(c: object, generator: str) -> int:
    return _noise.candidate_key(c) if generator == GENS[0] else _noise.candidate_key_v2(c)


def row(*cells: object) -> str:
    return "| " + " | ".join(f"`{c}`" for c in cells) + " |"


def main() -> None:
    print("| `input` | `crc32` |\n| --- | --- |")
    print(row(repr(b"123456789"), f"{zlib.crc32(b'123456789'):#010x}"))
    print("\n| `x` | `fmix64` |\n| --- | --- |")
    for x in (0, 1, 0x9E3779B97F4A7C15, 2**64 - 1):
        print(row(f"{x:#018x}", f"{_noise.fmix64(x):#018x}"))
    print("\n| `generator` | `seed` | `task` | `sigma` |\n| --- | --- | --- | --- |")
    for g, seed, task in ((GENS[2], 987654321, "fixture"), (GENS[1], 987654321, "fixture"),
                          (GENS[2], 7, None), (GENS[2], -1, "q-001"), (GENS[0], 42, "t")):
        sigma = _noise.noise_seed(seed, task, g) & (2**64 - 1)
        print(row(g, seed, repr(task), f"{sigma:#018x}"))
    print("\n| `generator` | `id` | `key` |\n| --- | --- | --- |")
    for g in GENS[:2]:
        for c in IDS:
            print(row(g, repr(c), f"{key_of(c, g):#018x}"))
    print("\n| `sigma` | `stream` | `step` | `base` |\n| --- | --- | --- | --- |")
    for sigma, stream, step in ((0, "doc", 0), (987654321, "s0", 1), (2**64 - 1, "日本", 70000)):
        print(row(f"{sigma:#018x}", repr(stream), step,
                  f"{_noise.step_base(sigma, stream, step):#018x}"))
    print("\n| `generator` | `seed` | `task` | `stream` | `step` | `id` | `u` | `g` |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for g, seed, task, stream, step, c in (
            (GENS[2], 7, "q-001", "doc", 0, "d1"), (GENS[2], 7, "q-001", "doc", 1, "d1"),
            (GENS[2], 7, None, "doc", 0, 3), (GENS[1], 987654321, "fixture", "s0", 0, "doc-0000"),
            (GENS[0], 987654321, "fixture", "s5", 1, b"1"), (GENS[2], 1, "t", "pick", 5, -7)):
        sigma = _noise.noise_seed(seed, task, g)
        base = _noise.step_base(sigma, stream, step)
        u = float(_noise.uniforms(np.array([key_of(c, g)], dtype=np.uint64), base)[0])
        gum = float(_noise.gumbel(np.array([key_of(c, g)], dtype=np.uint64), sigma, stream,
                                  step)[0])
        print(row(g, seed, repr(task), repr(stream), step, repr(c), repr(u), repr(gum)))
    print("\n| `generator` | `seed` | `task` | `stream` | `step` | `u` |")
    print("| --- | --- | --- | --- | --- | --- |")
    for g, seed, task, stream, step in ((GENS[2], 7, "q-001", "stop", 0),
                                        (GENS[2], 7, "q-001", "stop", 1),
                                        (GENS[1], 987654321, "fixture", "stop", 2)):
        u = _noise.uniform(_noise.noise_seed(seed, task, g), stream, step)
        print(row(g, seed, repr(task), repr(stream), step, repr(u)))
    print("\n| `generator` | `seed` | `task` | `stream` | `step` | `ids` | `probs` | `observed` "
          "| `draws` |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for ids, probs, k in ((["a", "b", "c"], [0.5, 0.3, 0.2], 2),
                          ([10, 11, 12], [0.0, 0.9, 0.1], 1)):
        g = GENS[2]
        sigma = _noise.noise_seed(7, "q-001", g)
        keys = np.array([key_of(c, g) for c in ids], dtype=np.uint64)
        d = _posterior.posterior_keyed(np.array(probs), k, keys, sigma, "ans", 3)
        print(row(g, 7, repr("q-001"), repr("ans"), 3, repr(ids), repr(probs), k,
                  repr([float(x) for x in d])))
    run_id = "0123456789abcdef0123456789abcdef"
    h0 = _state.receipt_genesis(run_id)
    e, x = hashlib.sha256(b"entry").digest(), hashlib.sha256(b"exit").digest()
    print("\n| `run_id` | `receipt_0` |\n| --- | --- |")
    print(row(run_id, h0.hex()))
    print("\n| `previous` | `window` | `entry_hash` | `exit_hash` | `receipt` |")
    print("| --- | --- | --- | --- | --- |")
    for prev, name in ((h0, "retrieval"), (bytes(32), "日本")):
        print(row(prev.hex(), repr(name), e.hex(), x.hex(),
                  _state.receipt_next(prev, name, e, x).hex()))
    print("\n| `run_id` | `key` | `chain` | `previous` | `payload` | `tail` | `digest` |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    payload = bytes.fromhex("28b52ffd")  # any bytes: the digest hashes them as they are
    tail = [0, 1_700_000_000_000_011_000, 0, h0, 1, 2, 3, 0, None]
    enc = _digest.run_end_tail(*tail)  # type: ignore[arg-type]
    plain = _digest.RunDigest(run_id)
    plain.update(payload)
    print(row(run_id, "None", "None", "None", payload.hex(), enc.hex(),
              plain.finish_bytes(enc).hex()))
    for chain, prev in ((1, _digest.CHAIN_START), (2, h0)):
        keyed = _digest.RunDigest(run_id, b"k3y")
        keyed.update(payload)
        print(row(run_id, repr(b"k3y"), chain, prev.hex(), payload.hex(), enc.hex(),
                  keyed.finish_bytes(enc + _digest.chain_link(chain, prev)).hex()))
    print("\n| `record` | `msgpack` |\n| --- | --- |")
    for rec in (Score(run=0, window=-1, name="f1", value=0.5, t_ns=7),):
        print(row(repr(msgspec.structs.asdict(rec)), msgspec.msgpack.encode(rec).hex()))


if __name__ == "__main__":
    main()
