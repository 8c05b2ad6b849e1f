"""A minimal reader of agentlog traces, written from docs/spec/trace-format.md alone (issue 36).

Standard library, msgpack and zstandard only, never agentlog. ``read(path)`` decodes a complete
file of format version 1 or 2 (sections 1, 2) by field name with defaults, and recomputes what
its records claim: hashes (3.1, 3.2), receipts (3.3) and draws (4.5). verifier.py checks the
rest, field types and choices included.
"""

import hashlib
import math
import struct

import msgpack
import zstandard


class FormatError(Exception):
    """The file breaks the format (sections 1, 2 and 5)."""


# Section 1: per format version, the file header and what precedes each frame's header16.
HEADERS = {1: (b"AGNTLOG\1", b""), 2: (struct.pack("<II", 0x184D2A5A, 8) + b"AGNTLOG\2",
                                      struct.pack("<II", 0x184D2A5B, 16))}
M64, PHI, C1, C2 = 2**64 - 1, 0x9E3779B97F4A7C15, 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53
TOL = 64 * 2.0**-53  # section 4.5: how far a recorded draw may differ from a regenerated one
GENS = ("fmix64-gumbel/1", "fmix64-gumbel/2", "fmix64-gumbel/3")
TAGS = {"str": 0x5354520000000001, "bytes": 0x4259540000000002, "int": 0x494E540000000003,
        "negative int": 0x4E45470000000004}  # section 4.3: the tag t of an id, by its type
# Section 2.2, per tag: name, then fields "name:type" in array order; those after "|" may be
# missing (default None for a "?" type, else 0 / False / "artifact").
SCHEMA = {int(t): s.split() for t, s in (line.split(" ", 1) for line in """\
1 RunStart run:i run_id:s system:s seed:i task:s? meta:m t_ns:i generator:s agentlog_version:s | parent_run:s? pid:i parent_window:i? root_run:s?
2 WindowEnter run:i window:i name:s parent:i t_ns:i entry_hash:b entry:b? | args_hash:b? after:s? link_hash:b? expected_hash:b? thread:i steps:m? function:s? secret_args:l? method:B
3 WindowExit run:i window:i name:s t_ns:i status:i exit_hash:b exit:b? receipt:b wall_ns:i | error_type:s? error_message:s? tool_calls:i llm_calls:i input_tokens:i output_tokens:i cost:f? selections:i
4 Selection run:i window:i name:s step:i owner:s pool:b n:i probs:b draws:b choice:i n_zero:i generator:s | top_k:i? top_p:f? raw_probs:b? t_ns:i policy_probs:b? steer:s? forced:B observed:i?
5 Continuation run:i window:i name:s step:i p:f u:f decision:B | t_ns:i policy_p:f? steer:s? forced:B
6 LLMCall run:i window:i t_ns:i provider:s model:s request:b response:b | cache_key:b? input_tokens:i output_tokens:i latency_ns:i cost:f? status:i error_type:s? error_message:s? fingerprint:s? operation:s? in_process:B cache:s? response_model:s? response_id:s? finish_reasons:l?
7 ToolCall run:i window:i name:s t_ns:i wall_ns:i status:i | args_hash:b? result_hash:b? error_type:s? error_message:s? args:b? result:b? served:B result_type:s?
8 Score run:i window:i name:s value:f | channel:s? layout:i? wave:i? state_hash:b? transition:i? t_ns:i
9 Blob hash:b data:b | kind:s
10 RunEnd run:i t_ns:i status:i receipt:b n_windows:i n_selections:i n_continuations:i | dropped:i error_type:s? digest:b? keyed:B chain:i?""".splitlines())}  # noqa: E501
DEFAULTS = {"i": 0, "B": False, "s": "artifact"}
# Section 3.1: the (hash, inline bytes) fields of each record type's artifacts.
ARTIFACTS = {"WindowEnter": [("entry_hash", "entry")], "WindowExit": [("exit_hash", "exit")],
             "ToolCall": [("args_hash", "args"), ("result_hash", "result")]}


def frame_spans(data: bytes) -> tuple[int, list[tuple[int, tuple | None, bytes]]]:
    """A file's format version (section 1.3), and each frame's byte offset, header16 fields
    and payload (1.1, 1.2); the fields are None, and the list ends, where no header starts."""
    version = 1 if data[:1] == b"A" else 2
    file_head, frame_head = HEADERS[version]
    if not data.startswith(file_head):
        raise FormatError(f"bad magic or version: {data[:16].hex()}")
    at, size, spans = len(file_head), len(frame_head) + 16, []
    while at < len(data) and (not spans or spans[-1][1]):
        head = data[at:at + size]
        whole = len(head) == size and head.startswith(frame_head)
        fields = struct.unpack("<IIII", head[-16:]) if whole else None
        spans.append((at, fields, data[at + size:at + size + fields[0]] if fields else b""))
        at += size + (fields[0] if fields else 0)
    return version, spans


def decode_record(array: object) -> dict:
    """A record's fields by name, defaults filled in and extras ignored (sections 2.1, 2.2);
    an int in a float field is read as a float, and verifier.py checks the other types."""
    if not (isinstance(array, list) and array and type(array[0]) is int and array[0] in SCHEMA):
        raise FormatError(f"not a record with a known tag: {str(array)[:60]}")
    name, *fields = SCHEMA[array[0]]
    if len(array) <= fields.index("|"):
        raise FormatError(f"{name} needs {fields.index('|')} fields, has {len(array) - 1}")
    record: dict = {"type": name}
    for position, (field, kind) in enumerate((f.split(":") for f in fields if f != "|"), 1):
        value = array[position] if position < len(array) else DEFAULTS.get(kind)
        record[field] = float(value) if kind[0] == "f" and type(value) is int else value
    return record


def frame_records(payload: bytes, n: int) -> list[dict]:
    """The n records of a frame: one zstd frame holding one msgpack array (sections 1.1, 2.1)."""
    try:
        content = zstandard.ZstdDecompressor().decompress(payload, allow_extra_data=False)
        arrays = msgpack.unpackb(content, raw=False)  # bytes after the array are an error
    except (zstandard.ZstdError, ValueError) as exc:
        raise FormatError(f"a frame's payload does not decode: {exc}") from exc
    if not isinstance(arrays, list) or len(arrays) != n:
        raise FormatError(f"a frame's content is not an array of its {n} records")
    return [decode_record(array) for array in arrays]


def fmix(x: int) -> int:
    """MurmurHash3's 64-bit finaliser (section 4.1), of its argument mod 2^64."""
    x &= M64
    for c in (C1, C2):
        x = (x ^ x >> 33) * c & M64
    return x ^ x >> 33


def b64(data: bytes) -> int:
    """B64 of section 4.1: BLAKE2b-64, read as a little-endian u64."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def noise_seed(seed: int, task: str | None, generator: str) -> int:
    """The noise seed σ (section 4.2): generator /3 folds the task in."""
    if generator != GENS[2] or task is None:
        return seed & M64
    return fmix(seed & M64 ^ fmix(b64(b"agentlog-task\0" + task.encode())))


def step_base(sigma: int, stream: str, step: int) -> int:
    """base(σ, stream, step) of section 4.4."""
    return fmix(fmix(sigma ^ b64(stream.encode())) ^ fmix(step + PHI))


def uniform(key: int, base: int) -> float:
    """uniform(k, base) of section 4.4, exact in binary64."""
    return ((fmix(key ^ base) >> 11) + 0.5) * 2.0**-53


def pool_keys(pool: bytes, generator: str) -> list[int]:
    """key(c) of each id c of a pool Blob (section 4.3); /1 re-encodes each id shortest."""
    keys = []
    for c in msgpack.unpackb(pool, raw=False):
        if generator == GENS[0]:
            keys.append(b64(msgpack.packb(c)))
            continue
        if isinstance(c, int):  # a negative id as its two's complement
            b, t = (c & M64).to_bytes(8, "little"), TAGS["int" if c >= 0 else "negative int"]
        else:
            b, t = c.encode() if isinstance(c, str) else c, TAGS[type(c).__name__]
        h, padded = 0, b + bytes(-len(b) % 8)
        for j, w in enumerate(struct.unpack(f"<{len(padded) // 8}Q", padded)):
            x = w * (2 * j + 1) * PHI & M64
            h ^= (x ^ x >> 29) * C1 & M64
        keys.append(fmix(h ^ fmix(len(b) ^ t)))
    return keys


def gumbel_draws(keys: list[int], sigma: int, stream: str, step: int) -> list[float]:
    """A selection's Gumbel draws, one per candidate key (section 4.5)."""
    base = step_base(sigma, stream, step)
    return [-math.log(-math.log(uniform(k, base))) for k in keys]


def floats(b: bytes | None) -> list[float]:
    """A numeric vector (section 2.1): little-endian binary64 values back to back."""
    return list(struct.unpack(f"<{len(b or b'') // 8}d", b or b""))


def check(records: list[dict]) -> dict:
    """Recompute the hashes (sections 3.1, 3.2), receipts (3.3) and draws (4.5; posterior ones,
    4.6, are verifier.py's) that records of open runs (2.3) claim; a problem is (section 7's
    kind, record index), and ``blobs`` the data of each Blob that hashes to its name."""
    blobs = {r["hash"]: r["data"] for r in records
             if r["type"] == "Blob" and hashlib.sha256(r["data"]).digest() == r["hash"]}
    runs, problems, checked = {}, [], {"receipts": 0, "draws": 0}
    for index, r in enumerate(records):
        kind, run = r["type"], runs.get(r.get("run"))
        if kind == "WindowExit" and run and r["window"] not in run["open"]:
            run = None  # an exit without an open entry is outside the receipt chain (3.3)
        found = [("blob-hash", kind == "Blob" and r["hash"] not in blobs)]
        for h, inline in ARTIFACTS.get(kind, []) if run else []:
            found.append(("artifact-hash", r[inline] is not None
                          and hashlib.sha256(r[inline]).digest() != r[h]))
        if kind == "RunStart":
            receipt = hashlib.sha256(b"agentlog-receipt/1" + r["run_id"].encode()).digest()
            runs[r["run"]] = {**r, "open": {}, "receipt": receipt}
        elif run and kind == "WindowEnter":
            run["open"][r["window"]] = r["entry_hash"]
        elif run and kind == "WindowExit":
            name = r["name"].encode()
            found.append(("receipt", r["receipt"] != hashlib.sha256(
                run["receipt"] + struct.pack("<I", len(name)) + name
                + run["open"].pop(r["window"]) + r["exit_hash"]).digest()))
            run["receipt"] = r["receipt"]  # the next receipt follows the stored one
            checked["receipts"] += 1
        elif run and kind == "Selection" and r["observed"] is None and r["generator"] in GENS:
            keys = pool_keys(blobs[r["pool"]], r["generator"]) if r["pool"] in blobs else []
            draws = floats(r["draws"])
            if len(keys) == len(draws) == r["n"] > 0:
                sigma = noise_seed(run["seed"], run["task"], r["generator"])
                regenerated = gumbel_draws(keys, sigma, r["name"], r["step"])
                found.append(("draws", any(abs(g - e) > TOL * (1 + abs(g))
                                           for g, e in zip(draws, regenerated, strict=True))))
                checked["draws"] += len(draws)
        elif run and kind == "RunEnd":
            found.append(("receipt", runs.pop(r["run"])["receipt"] != r["receipt"]))
        problems += [(problem, index) for problem, failed in found if failed]
    return {"problems": problems, "checked": checked, "blobs": blobs}


def read(path: str) -> dict:
    """Decode a complete file (sections 1, 2) and check its records (sections 3, 4)."""
    with open(path, "rb") as f:
        version, spans = frame_spans(f.read())
    records = []
    for at, fields, payload in spans:
        if fields is None or len(payload) < fields[0]:
            raise FormatError(f"no whole frame at byte {at} (verifier.py reads cut-off tails)")
        records += frame_records(payload, fields[1])
    return {"version": version, "frames": len(spans), "records": records, **check(records)}
