"""An independent reader of agentlog traces, written from docs/spec/trace-format.md alone.

Standard library, msgpack and zstandard only (never agentlog). ``read(path, key=)`` decodes a
file (spec sections 1, 2, 5, 6) and recomputes what its records claim (sections 3, 4). It is
longer than issue 36's ~150 lines because it keeps every check of those sections.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import struct
import zlib

import msgpack
import zstandard


class FormatError(Exception):
    """The file breaks the format somewhere other than a truncated tail (section 5)."""


# Section 1: per format version, the file header and what precedes each frame's header16.
HEADERS = {1: (b"AGNTLOG\1", b""), 2: (struct.pack("<II", 0x184D2A5A, 8) + b"AGNTLOG\2",
                                      struct.pack("<II", 0x184D2A5B, 16))}
M64, PHI, C1, C2 = 2**64 - 1, 0x9E3779B97F4A7C15, 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53
CONT, TOL = 0xC0FFEE5DEECE66, 64 * 2.0**-53  # section 4.5: a continuation's key, the tolerance
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
# Section 2.1's msgpack types, matched exactly: a bool is not an int, an int is read as a float.
TYPES = {"i": (int,), "s": (str,), "b": (bytes,), "f": (float, int), "B": (bool,),
         "m": (dict,), "l": (list,)}
TAIL = ("run", "t_ns", "status", "receipt", "n_windows", "n_selections", "n_continuations",
        "dropped", "error_type")  # the RunEnd fields its digest covers, in this order (3.4)


def decode_record(arr: object) -> dict:
    """A record's fields by name, defaults filled in and extras ignored (section 2.1)."""
    if not isinstance(arr, list) or not arr or type(arr[0]) is not int or arr[0] not in SCHEMA:
        raise FormatError(f"not a record with a known tag: {str(arr)[:60]}")
    name, *fields = SCHEMA[arr[0]]
    if len(arr) <= fields.index("|"):
        raise FormatError(f"{name} needs {fields.index('|')} fields, has {len(arr) - 1}")
    out: dict = {"type": name}
    for j, (field, t) in enumerate(f.split(":") for f in fields if f != "|"):
        v = arr[j + 1] if j + 1 < len(arr) else None if t.endswith("?") else DEFAULTS[t]
        if type(v) not in TYPES[t[0]] and not (v is None and t.endswith("?")):
            raise FormatError(f"{name}.{field}: expected type {t}, found {v!r:.40}")
        out[field] = float(v) if t[0] == "f" and v is not None else v
    return out


def decode_payload(payload: bytes, n: int, crc: int) -> list[tuple[dict, bytes]]:
    """Each record of a frame with its exact msgpack bytes (sections 1.1, 2.1 and 5)."""
    if zlib.crc32(payload) != crc:
        raise FormatError("frame payload CRC mismatch")
    try:
        params = zstandard.get_frame_parameters(payload)
        if params.content_size >= zstandard.CONTENTSIZE_ERROR or not params.has_checksum:
            raise FormatError("zstd frame without content size or checksum")
        content = zstandard.ZstdDecompressor().decompress(
            payload, max_output_size=params.content_size, allow_extra_data=False)
        unpacker, records = msgpack.Unpacker(raw=False, max_buffer_size=len(content) + 1), []
        unpacker.feed(content)
        if unpacker.read_array_header() != n:
            raise FormatError("record count differs from the frame header's")
        for _ in range(n):
            start = unpacker.tell()
            records.append((decode_record(unpacker.unpack()), content[start:unpacker.tell()]))
    except (zstandard.ZstdError, ValueError, msgpack.UnpackException) as exc:
        raise FormatError(f"payload does not decode: {exc}") from exc
    if unpacker.tell() != len(content):
        raise FormatError("bytes after the frame's array")
    return records


def read(path: str, key: bytes | None = None) -> dict:
    """Decode a file up to its last complete frame (sections 1, 5, 6) and check it (3, 4)."""
    with open(path, "rb") as f:
        data = f.read()
    version: int | None = 1 if data[:1] == b"A" else 2  # section 1.3
    file_head, frame_head = HEADERS[version]
    if len(data) < len(file_head) and file_head.startswith(data):  # cut inside the header
        version = None
    elif not data.startswith(file_head):
        raise FormatError(f"bad magic or version: {data[:len(file_head)].hex()}")
    at, size, frames = len(file_head) if version else 0, len(frame_head) + 16, []
    while version and len(data) - at >= size:  # fewer bytes than a frame header: a cut tail
        head = data[at:at + size]
        length, n, crc, head_crc = struct.unpack("<IIII", head[-16:])
        if not head.startswith(frame_head) or zlib.crc32(head[-16:-4]) != head_crc:
            if not any(data[at:]):  # zeros where a frame should start: what a power loss leaves
                break
            raise FormatError(f"bad frame header at byte {at}")
        if length > 256 << 20 or n > 1 << 18:  # refused before allocating anything (6)
            raise FormatError(f"frame header at byte {at} declares sizes over the limits")
        if len(data) - at - size < length:  # the payload was cut
            break
        payload = data[at + size:at + size + length]
        frames.append((payload, decode_payload(payload, n, crc)))
        at += size + length
    return {"version": version, "frames": len(frames), "truncated": not version or at < len(data),
            "bytes_dropped": len(data) - at, "records": [r for _, rs in frames for r, _ in rs],
            **check(frames, key)}


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
    """The key of each id of a pool Blob (section 4.3)."""
    keys = []
    for c in msgpack.unpackb(pool, raw=False):
        if generator == GENS[0]:  # the id's shortest encoding: its bytes in a canonical pool
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


def draws(p: list[float], obs: int | None, keys: list[int], sigma: int, stream: str, step: int
          ) -> list[float]:
    """Gumbel draws (section 4.5), or the posterior ones given the observed choice (4.6)."""
    base = step_base(sigma, stream + ("" if obs is None else "\0posterior"), step)
    g = [-math.log(-math.log(uniform(k, base))) for k in keys]
    if obs is None:
        return g
    top = math.log(sum(p)) - math.log(-math.log(uniform(keys[obs], step_base(
        sigma, stream + "\0posterior-max", step))))
    for i, pi in enumerate(p):
        if pi > 0:  # -logaddexp(-M, -(log p_i + g_i)) - log p_i, in a form that cannot overflow
            a, b = -top, -(math.log(pi) + g[i])
            g[i] = -(max(a, b) + math.log1p(math.exp(-abs(a - b)))) - math.log(pi)
    g[obs] = top - math.log(p[obs])
    return g


def floats(b: bytes | None) -> list[float]:
    """A numeric vector (section 2.1): little-endian binary64 values back to back."""
    return list(struct.unpack(f"<{len(b or b'') // 8}d", b or b""))


def check(frames: list[tuple[bytes, list[tuple[dict, bytes]]]], key: bytes | None) -> dict:
    """Recompute what the records claim (sections 3, 4), naming problems as section 7 does."""
    problems, runs, chain = [], {}, (0, bytes(32))  # chain: the last keyed run's (chain, digest)
    checked = dict.fromkeys(("receipts", "digests", "draws", "uniforms"), 0)
    records = [(f, k, r) for f, (_, recs) in enumerate(frames) for k, (r, _) in enumerate(recs)]
    blobs = {r["hash"]: r["data"] for _, _, r in records
             if r["type"] == "Blob" and hashlib.sha256(r["data"]).digest() == r["hash"]}

    def flag(kind: str, failed: bool = True) -> None:
        """Report a problem (section 7) at the record being checked."""
        if failed:
            problems.append((kind, index))

    def artifact(h: bytes | None, inline: bytes | None, in_blob: bool = True) -> None:
        """Section 3.1: inline bytes hash to the hash, else (where stored) a Blob holds them."""
        if h is not None and inline is not None:
            flag("artifact-hash", hashlib.sha256(inline).digest() != h)
        elif h is not None:
            flag("missing-blob", in_blob and h not in blobs)

    for index, (f, k, r) in enumerate(records):  # noqa: B007 (flag() reports at index)
        t, run = r["type"], runs.get(r.get("run"))
        if t == "Blob":
            flag("blob-hash", r["hash"] not in blobs)
        elif t == "RunStart":
            flag("generator", r["generator"] not in GENS)
            runs[r["run"]] = {**r, "frame": f, "open": {}, "counts": [0, 0, 0],
                              "era": r["generator"] in GENS[1:], "receipt": hashlib.sha256(
                                  b"agentlog-receipt/1" + r["run_id"].encode()).digest()}
        elif run is None:  # outside any open run (section 2.3)
            continue
        elif t == "WindowEnter":
            artifact(r["entry_hash"], r["entry"])
            artifact(r["args_hash"], None)
            run["open"][r["window"]] = r["entry_hash"]
            run["era"] |= r["function"] is not None
        elif t == "WindowExit" and r["window"] in run["open"]:  # else outside the chain (3.3)
            run["counts"][0] += 1
            artifact(r["exit_hash"], r["exit"])
            name = r["name"].encode()
            flag("receipt", r["receipt"] != hashlib.sha256(
                run["receipt"] + struct.pack("<I", len(name)) + name
                + run["open"].pop(r["window"]) + r["exit_hash"]).digest())
            run["receipt"] = r["receipt"]  # the next receipt follows the stored one, not ours
            checked["receipts"] += 1
        elif t == "ToolCall":  # a tool's large artifacts are not stored (3.1)
            artifact(r["args_hash"], r["args"], in_blob=False)
            artifact(r["result_hash"], r["result"], in_blob=False)
        elif t == "Selection":
            run["counts"][1] += 1
            if r["pool"] not in blobs or r["generator"] not in GENS:
                flag("missing-blob" if r["pool"] not in blobs else "generator")
                continue
            keys = pool_keys(blobs[r["pool"]], r["generator"])
            g, obs = floats(r["draws"]), r["observed"]
            a = floats(r["policy_probs"] or r["probs"])  # the agent's vector (4.6)
            if len(keys) == len(g) == r["n"]:
                checked["draws"] += len(g)
                sigma = noise_seed(run["seed"], run["task"], r["generator"])
                regen = draws(a, obs, keys, sigma, r["name"], r["step"])
                bounds = [TOL * (1 + abs(x)) if obs is None else 4 * TOL * (1 + abs(x) + (
                    abs(math.log(q)) if q > 0 else 0)) for x, q in zip(g, a, strict=True)]
                flag("draws", not all(abs(x - y) <= e for x, y, e in zip(g, regen, bounds,
                                                                        strict=True)))
        elif t == "Continuation":
            run["counts"][2] += 1
            if run["generator"] in GENS:
                checked["uniforms"] += 1
                sigma = noise_seed(run["seed"], run["task"], run["generator"])
                flag("draws", r["u"] != uniform(CONT, step_base(sigma, r["name"], r["step"])))
            flag("decision", not r["forced"] and r["decision"] != (r["u"] < r["p"]))
        elif t == "RunEnd":
            del runs[r["run"]]
            flag("receipt", r["receipt"] != run["receipt"])
            flag("counts", [r[field] for field in TAIL[4:7]] != run["counts"])
            d, keyed, link = r["digest"], r["keyed"], b""
            if d is None or (key is not None and not keyed):  # section 7: era, keyed or key
                flag("digest", bool(run["era"] or keyed or key))
            if r["chain"] is not None and d is not None:  # section 3.5
                flag("chain", not keyed or r["chain"] != chain[0] + 1)
                if keyed:
                    link = b"agentlog-chain/1" + struct.pack("<Q", r["chain"]) + chain[1]
                    chain = (r["chain"], d)
            if d is not None and (not keyed or key is not None):  # section 3.4
                checked["digests"] += 1
                rid = run["run_id"].encode()
                covered = [p for p, recs in frames[run["frame"]:f]
                           if any(x.get("run") == r["run"] for x, _ in recs)]
                covered += [raw for x, raw in frames[f][1][:k] if x.get("run") == r["run"]]
                msg = b"".join([b"agentlog-digest/1", struct.pack("<I", len(rid)), rid, *covered,
                                msgpack.packb([r[field] for field in TAIL]), link])
                mac = hmac.new(key, msg, "sha256") if keyed else hashlib.sha256(msg)
                flag("digest", mac.digest() != d)
    return {"problems": problems, "checked": checked, "chain": chain}
