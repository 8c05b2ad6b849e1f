"""An independent reader of agentlog traces, written from docs/spec/trace-format.md alone.

Standard library, msgpack and zstandard only (never agentlog). ``read(path, key=)`` parses a
file, checks its CRCs and lengths, decodes its records and recomputes what they claim. It is
nearer 300 lines than the spec's ~150 because it keeps the CRC, limit and truncated-tail
checks, all three noise generators and the posterior draws.
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
    """The file breaks the format somewhere other than a truncated tail."""


MAGIC, M64, PHI = b"AGNTLOG", 2**64 - 1, 0x9E3779B97F4A7C15
C1, C2, CONT = 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53, 0xC0FFEE5DEECE66
GENS = ("fmix64-gumbel/1", "fmix64-gumbel/2", "fmix64-gumbel/3")
TAGS = {str: 0x5354520000000001, bytes: 0x4259540000000002, int: 0x494E540000000003}
TOL = 64 * 2.0**-53
# Per tag: name, then fields "name:type" in array order; those after "|" may be missing
# (default None for a "?" type, else 0 / False / "artifact").
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
TAIL = ("run", "t_ns", "status", "receipt", "n_windows", "n_selections", "n_continuations",
        "dropped", "error_type")  # the RunEnd fields its digest covers, in this order
PY = {"i": int, "s": str, "b": bytes, "f": (float, int), "B": bool, "m": dict, "l": list}


def decode_record(arr: object) -> dict:
    if not isinstance(arr, list) or not arr or type(arr[0]) is not int or arr[0] not in SCHEMA:
        raise FormatError(f"not a record with a known tag: {str(arr)[:60]}")
    name, *fields = SCHEMA[arr[0]]
    need = fields.index("|")
    if len(arr) - 1 < need:
        raise FormatError(f"{name} needs {need} fields, has {len(arr) - 1}")
    out: dict = {"type": name}
    for j, (field, t) in enumerate(f.split(":") for f in fields if f != "|"):
        v = arr[j + 1] if j + 1 < len(arr) else (
            None if t.endswith("?") else {"i": 0, "B": False, "s": "artifact"}[t])
        if not (v is None and t.endswith("?")) and (
                not isinstance(v, PY[t[0]]) or (isinstance(v, bool) and t[0] != "B")):
            raise FormatError(f"{name}.{field}: expected type {t}, found {v!r:.40}")
        out[field] = float(v) if t[0] == "f" and v is not None else v
    return out


def file_version(data: bytes) -> int | None:
    """The format version, or None for a file truncated inside its header."""
    version = 1 if data[:1] == b"A" else 2
    prefix = MAGIC if version == 1 else struct.pack("<II", 0x184D2A5A, 8) + MAGIC
    if len(data) <= len(prefix) and prefix.startswith(data):
        return None
    if data[:len(prefix)] != prefix or len(data) <= len(prefix) or data[len(prefix)] != version:
        raise FormatError(f"bad magic or version {data[len(prefix):len(prefix) + 1]!r}")
    return version


def frame_header(head: bytes, version: int) -> tuple[int, int, int]:
    if version == 2 and head[:8] != struct.pack("<II", 0x184D2A5B, 16):
        raise FormatError("expected a frame header (skippable frame 0x184D2A5B)")
    length, n, crc, hcrc = struct.unpack("<IIII", head[-16:])
    if zlib.crc32(head[-16:-4]) != hcrc or length > 256 << 20 or n > 1 << 18:
        raise FormatError("frame header CRC mismatch or declared size over the limits")
    return length, n, crc


def decode_payload(payload: bytes, n: int, crc: int) -> list[tuple[dict, bytes]]:
    if zlib.crc32(payload) != crc:
        raise FormatError("frame payload CRC mismatch")
    try:
        params = zstandard.get_frame_parameters(payload)
        if params.content_size >= zstandard.CONTENTSIZE_ERROR or not params.has_checksum:
            raise FormatError("zstd frame without content size or checksum")
        content = zstandard.ZstdDecompressor().decompress(
            payload, max_output_size=params.content_size, allow_extra_data=False)
        unpacker = msgpack.Unpacker(raw=False, max_buffer_size=len(content) + 1)
        unpacker.feed(content)
        if unpacker.read_array_header() != n:
            raise FormatError("record count differs from the frame header's")
        records, at = [], unpacker.tell()
        for _ in range(n):
            rec = decode_record(unpacker.unpack())
            records.append((rec, content[at:unpacker.tell()]))
            at = unpacker.tell()
    except (zstandard.ZstdError, ValueError, msgpack.UnpackException) as exc:
        raise FormatError(f"payload does not decode: {exc}") from exc
    if at != len(content):
        raise FormatError("bytes after the frame's array")
    return records


def read(path: str, key: bytes | None = None) -> dict:
    with open(path, "rb") as f:
        data = f.read()
    version, frames = file_version(data), []
    at, hsize, truncated = 8 * (version or 0), 8 + 8 * (version or 2), version is None
    while not truncated and at < len(data):
        head, start = data[at:at + hsize], at + hsize
        try:  # a short header is a truncated tail (its length is then past the end)
            length, n, crc = frame_header(head, version) if len(head) == hsize else (
                len(data), 0, 0)
        except FormatError:
            if any(data[at:]):
                raise
            length = len(data)  # zero bytes after the last frame: a truncated tail too
        if truncated := len(data) - start < length:
            break
        payload, at = data[start:start + length], start + length
        frames.append((payload, decode_payload(payload, n, crc)))
    return {"version": version, "frames": len(frames), "truncated": truncated,
            "bytes_dropped": len(data) - at, "records": [r for _, rs in frames for r, _ in rs],
            **check(frames, key)}


def fmix(x: int) -> int:
    x &= M64
    x = ((x ^ x >> 33) * C1) & M64
    x = ((x ^ x >> 33) * C2) & M64
    return x ^ x >> 33


def b64(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def noise_seed(seed: int, task: str | None, generator: str) -> int:
    if generator != GENS[2] or task is None:
        return seed & M64
    return fmix((seed & M64) ^ fmix(b64(b"agentlog-task\0" + task.encode())))


def step_base(sigma: int, stream: str, step: int) -> int:
    return fmix(fmix(sigma ^ b64(stream.encode())) ^ fmix(step + PHI))


def uniform(key: int, base: int) -> float:
    return ((fmix(key ^ base) >> 11) + 0.5) * 2.0**-53


def pool_keys(data: bytes, generator: str) -> list[int]:
    """The key of each id of a pool (section 4.3): BLAKE2b-64 of its msgpack bytes under
    generator /1, else a hash of its typed bytes."""
    unpacker, keys = msgpack.Unpacker(raw=False), []
    unpacker.feed(data)
    for _ in range(unpacker.read_array_header()):
        at, c = unpacker.tell(), unpacker.unpack()
        if generator == GENS[0]:
            keys.append(b64(data[at:unpacker.tell()]))
            continue
        tag = TAGS[type(c)] if not isinstance(c, int) or c >= 0 else 0x4E45470000000004
        b = c.encode() if isinstance(c, str) else c if isinstance(c, bytes) else (
            c & M64).to_bytes(8, "little")
        h, pad = 0, b + bytes(-len(b) % 8)
        for j in range(0, len(pad), 8):  # word j // 8, weighted by the odd number j // 4 + 1
            x = int.from_bytes(pad[j:j + 8], "little") * (j // 4 + 1) * PHI & M64
            h ^= (x ^ x >> 29) * C1 & M64
        keys.append(fmix(h ^ fmix(len(b) ^ tag)))
    return keys


def draws(p: list[float], obs: int | None, keys: list[int], sigma: int, stream: str, step: int
          ) -> list[float]:
    """The Gumbel draws of a selection; given an observed choice, its posterior draws."""
    base = step_base(sigma, stream + ("" if obs is None else "\0posterior"), step)
    g = [-math.log(-math.log(uniform(k, base))) for k in keys]
    if obs is None:
        return g
    top = math.log(sum(p)) - math.log(-math.log(uniform(keys[obs], step_base(
        sigma, stream + "\0posterior-max", step))))
    for i, pi in enumerate(p):
        if pi > 0:
            a, b = -top, -(math.log(pi) + g[i])
            g[i] = -(max(a, b) + math.log1p(math.exp(-abs(a - b)))) - math.log(pi)
    g[obs] = top - math.log(p[obs])
    return g


def floats(b: bytes | None) -> list[float]:
    return list(struct.unpack(f"<{len(b or b'') // 8}d", b or b""))


def check(frames: list, key: bytes | None) -> dict:
    bad, runs, chain, i = [], {}, [0, bytes(32)], 0
    done = dict.fromkeys(("receipts", "digests", "draws", "uniforms"), 0)
    blobs = {r["hash"]: r["data"] for _, recs in frames for r, _ in recs
             if r["type"] == "Blob" and hashlib.sha256(r["data"]).digest() == r["hash"]}

    def art(h: bytes | None, inline: bytes | None, idx: int, need_blob: bool = True) -> None:
        if h is not None and (hashlib.sha256(inline).digest() != h if inline is not None
                              else need_blob and h not in blobs):
            bad.append(("artifact-hash" if inline is not None else "missing-blob", idx))
    for payload, recs in frames:
        for k, (r, _) in enumerate(recs):
            t, idx, st = r["type"], i + k, runs.get(r.get("run"))
            if t == "Blob" and r["hash"] not in blobs:
                bad.append(("blob-hash", idx))
            elif t == "RunStart":
                rid = r["run_id"].encode()
                runs[r["run"]] = {**r, "open": {}, "counts": [0, 0, 0],
                                  "parts": [b"agentlog-digest/1" + struct.pack("<I", len(rid))
                                            + rid],  # what the run digest covers, so far
                                  "receipt": hashlib.sha256(b"agentlog-receipt/1" + rid).digest(),
                                  "era": r["generator"] in GENS[1:],
                                  "sigma": noise_seed(r["seed"], r["task"], r["generator"])}
                bad += [("generator", idx)] * (r["generator"] not in GENS)
            elif st is None or t == "Blob":
                continue
            elif t == "WindowEnter":
                art(r["entry_hash"], r["entry"], idx)
                art(r["args_hash"], None, idx)
                st["open"][r["window"]] = r["entry_hash"]
                st["era"] |= r["function"] is not None
            elif t == "WindowExit" and r["window"] in st["open"]:
                st["counts"][0] += 1
                art(r["exit_hash"], r["exit"], idx)
                name = r["name"].encode()
                expected = hashlib.sha256(st["receipt"] + struct.pack("<I", len(name)) + name
                                          + st["open"].pop(r["window"]) + r["exit_hash"])
                st["receipt"], done["receipts"] = r["receipt"], done["receipts"] + 1
                bad += [("receipt", idx)] * (expected.digest() != r["receipt"])
            elif t == "ToolCall":
                art(r["args_hash"], r["args"], idx, False)
                art(r["result_hash"], r["result"], idx, False)
            elif t == "Selection":
                st["counts"][1] += 1
                g, gen, obs = floats(r["draws"]), r["generator"], r["observed"]
                if r["pool"] not in blobs or gen not in GENS:
                    bad.append(("missing-blob" if r["pool"] not in blobs else "generator", idx))
                    continue
                keys = pool_keys(blobs[r["pool"]], gen)
                a = floats(r["policy_probs"] or r["probs"])  # the agent's own vector
                if len(keys) == len(g) == r["n"]:  # (a posterior's draws are given it)
                    regen = draws(a, obs, keys, noise_seed(st["seed"], st["task"], gen),
                                  r["name"], r["step"])
                    tol = [TOL * (1 + abs(x)) if obs is None else 4 * TOL * (1 + abs(x) + (
                        abs(math.log(q)) if q > 0 else 0)) for x, q in zip(g, a, strict=True)]
                    done["draws"] += len(g)
                    bad += [("draws", idx)] * any(not abs(x - y) <= e for x, y, e in zip(
                        g, regen, tol, strict=True))
            elif t == "Continuation":
                st["counts"][2] += 1
                if st["generator"] in GENS:
                    done["uniforms"] += 1
                    u = uniform(CONT, step_base(st["sigma"], r["name"], r["step"]))
                    bad += [("draws", idx)] * (u != r["u"])
                bad += [("decision", idx)] * (not r["forced"] and r["decision"] != (
                    r["u"] < r["p"]))
            elif t == "RunEnd":
                del runs[r["run"]]
                bad += [("receipt", idx)] * (r["receipt"] != st["receipt"])
                bad += [("counts", idx)] * ([r[f] for f in TAIL[4:7]] != st["counts"])
                d, keyed, link = r["digest"], r["keyed"], b""
                if d is None or (key is not None and not keyed):
                    bad += [("digest", idx)] * bool(st["era"] or keyed or key)
                if r["chain"] is not None and d is not None:
                    bad += [("chain", idx)] * (not keyed or r["chain"] != chain[0] + 1)
                    if keyed:
                        link = b"agentlog-chain/1" + struct.pack("<Q", r["chain"]) + chain[1]
                        chain[:] = [r["chain"], d]
                if d is not None and (not keyed or key is not None):
                    done["digests"] += 1  # its earlier frames, its records here, tail, link
                    msg = b"".join([*st["parts"], *(raw for r2, raw in recs[:k] if r2.get(
                        "run", -2) == r["run"]), msgpack.packb([r[f] for f in TAIL]), link])
                    h = hmac.new(key or b"", msg, "sha256") if keyed else hashlib.sha256(msg)
                    bad += [("digest", idx)] * (h.digest() != d)
        for run in {r["run"] for r, _ in recs if r["type"] != "Blob"} & runs.keys():
            runs[run]["parts"].append(payload)
        i += len(recs)
    return {"problems": bad, "checked": done, "chain": tuple(chain)}
