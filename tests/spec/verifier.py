"""The rest of what agentlog's ``verify`` checks, built on reader.py (docs/spec/trace-format.md).

Standard library, msgpack and zstandard only, never agentlog. ``read(path, key=)`` reads what
``reader.read`` reads, and also a damaged or cut-off file: it checks every CRC and the limits
of section 6 before decoding a frame, reads a cut-off tail as section 5 says, and refuses a
field whose msgpack type is not its schema's (2.1). ``check`` adds to ``reader.check`` the
problems section 7 names beyond hashes, receipts and draws: choices (4.5), stored Blobs (3.1,
3.2), unknown generators (4), windows that exit without entering and the RunEnd counts (3.3),
run digests and keyed MACs (3.4), the chain of keyed runs (3.5), posterior draws (4.6) and
continuations (4.5), and counts the digests and uniforms it recomputed.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import struct
import zlib

import msgpack
import reader  # the minimal reader, beside this file (its folder is on sys.path)
import zstandard

CONTINUATION_KEY = 0xC0FFEE5DEECE66  # section 4.5: the key of a continuation's uniform
# Section 6: the bounds a frame header is refused over, before anything is allocated.
MAX_PAYLOAD, MAX_RECORDS, MAX_CONTENT = 256 << 20, 1 << 18, 512 << 20
# Section 3.4: the RunEnd fields its digest's tail covers, in this order.
TAIL = ("run", "t_ns", "status", "receipt", "n_windows", "n_selections", "n_continuations",
        "dropped", "error_type")
# Section 2.1's msgpack types, matched exactly: a bool is not an int (reader.decode_record has
# read an int in a float field as a float).
TYPES = {"i": (int,), "s": (str,), "b": (bytes,), "f": (float,), "B": (bool,), "m": (dict,),
         "l": (list,)}
# Section 2.2: each record type's fields and their types, from reader.SCHEMA.
FIELDS = {name: [f.split(":") for f in fields if f != "|"]
          for name, *fields in reader.SCHEMA.values()}
# Section 3.1: the (hash, inline bytes) fields of the artifacts a Blob holds when not inline.
STORED = {"WindowEnter": [("entry_hash", "entry"), ("args_hash", None)],
          "WindowExit": [("exit_hash", "exit")]}


def read(path: str, key: bytes | None = None) -> dict:
    """Read a file up to its last complete frame (sections 1, 5, 6) and ``check`` it."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        version, spans = reader.frame_spans(data)
    except reader.FormatError:  # a file cut inside its header holds no record (section 1.3)
        if not any(head.startswith(data) for head, _ in reader.HEADERS.values()):
            raise
        version, spans = None, []
    file_head, frame_head = reader.HEADERS[version] if version else (b"", b"")
    frames, end, header_size = [], len(file_head), len(frame_head) + 16
    for at, fields, payload in spans:
        intact = fields is not None and zlib.crc32(struct.pack("<III", *fields[:3])) == fields[3]
        if not intact and len(data) - at >= header_size and any(data[at:]):
            raise reader.FormatError(f"bad frame header at byte {at}")
        if not intact:  # a cut frame header, or zeros where one should start (a power loss)
            break
        length, n, crc, _ = fields
        if length > MAX_PAYLOAD or n > MAX_RECORDS:
            raise reader.FormatError(f"the frame header at byte {at} declares sizes over limits")
        if len(payload) < length:  # the payload was cut
            break
        check_payload(payload, crc, at)
        frames.append((payload, typed(reader.frame_records(payload, n))))
        end = at + header_size + length
    return {"version": version, "frames": len(frames), "truncated": not version or end < len(data),
            "bytes_dropped": len(data) - end, **check(frames, key)}


def typed(records: list[dict]) -> list[dict]:
    """The records, each field of the msgpack type its schema names, nil only where it is
    optional (sections 2.1, 2.2); else a FormatError."""
    for r in records:
        for field, kind in FIELDS[r["type"]]:
            value = r[field]
            if type(value) not in TYPES[kind[0]] and not (value is None and kind.endswith("?")):
                raise reader.FormatError(f"{r['type']}.{field}: expected type {kind}, "
                                         f"found {value!r:.40}")
    return records


def check_payload(payload: bytes, crc: int, at: int) -> None:
    """A payload's CRC, then a zstd frame with its content size, within section 6's bound, and
    its checksum (sections 1.1, 5), before it is decompressed."""
    if zlib.crc32(payload) != crc:
        raise reader.FormatError(f"frame payload CRC mismatch in the frame at byte {at}")
    try:
        params = zstandard.get_frame_parameters(payload)
    except zstandard.ZstdError as exc:
        raise reader.FormatError(f"the frame at byte {at} is not a zstd frame: {exc}") from exc
    if params.content_size > MAX_CONTENT or not params.has_checksum:  # unknown size: 2^64-1
        raise reader.FormatError(f"the zstd frame at byte {at} has no content size or "
                                 "checksum, or declares more content than the limit")


def record_bytes(payload: bytes) -> list[bytes]:
    """The exact msgpack bytes of each record of a frame (section 2.1), as a digest covers them
    (3.4)."""
    content = zstandard.ZstdDecompressor().decompress(payload)
    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=len(content) + 1)
    unpacker.feed(content)
    raws = []
    for _ in range(unpacker.read_array_header()):
        start = unpacker.tell()
        unpacker.skip()
        raws.append(content[start:unpacker.tell()])
    return raws


def chain_link(position: int, previous: bytes) -> bytes:
    """What a chained keyed run's HMAC covers of its place (section 3.5)."""
    return b"agentlog-chain/1" + struct.pack("<Q", position) + previous


def run_digest(run_id: str, parts: list[bytes], key: bytes | None) -> bytes:
    """A run digest (section 3.4) over the run's ``parts`` (its payloads and records, the tail,
    the link): SHA-256, or HMAC-SHA256 under the key."""
    rid = run_id.encode()
    message = b"".join([b"agentlog-digest/1", struct.pack("<I", len(rid)), rid, *parts])
    return (hmac.new(key, message, "sha256") if key else hashlib.sha256(message)).digest()


def posterior_draws(agent: list[float], observed: int, keys: list[int], sigma: int,
                    stream: str, step: int) -> list[float]:
    """The draws given the observed choice under the agent's vector (section 4.6)."""
    draws = reader.gumbel_draws(keys, sigma, stream + "\0posterior", step)
    u_max = reader.uniform(keys[observed], reader.step_base(sigma, stream + "\0posterior-max",
                                                            step))
    top = math.log(sum(agent)) - math.log(-math.log(u_max))
    for i, a in enumerate(agent):
        if a > 0:  # -logaddexp(-M, -(log a_i + g_i)) - log a_i, in a form that cannot overflow
            x, y = -top, -(math.log(a) + draws[i])
            draws[i] = -(max(x, y) + math.log1p(math.exp(-abs(x - y)))) - math.log(a)
    draws[observed] = top - math.log(agent[observed])
    return draws


def choice_agrees(probs: list[float], draws: list[float], choice: int) -> bool:
    """The choice is an argmax of log p_i + g_i, ties within the logs' rounding (4.5)."""
    log_p = [math.log(p) if p > 0 else -math.inf for p in probs]
    score = [lp + g for lp, g in zip(log_p, draws, strict=True)]
    best = max(range(len(score)), key=score.__getitem__)
    slack = reader.TOL * (2 + sum(abs(log_p[i]) + abs(draws[i]) for i in (best, choice)))
    return math.isfinite(score[choice]) and score[best] - score[choice] <= slack


def choice_problems(r: dict) -> list[tuple]:
    """An unforced selection whose probabilities and draws are all there chose an argmax of
    log p_i + g_i (section 4.5), whatever its pool and generator."""
    probs, draws, n = reader.floats(r["probs"]), reader.floats(r["draws"]), r["n"]
    if r["forced"] or not (len(probs) == len(draws) == n > 0):
        return []
    return [("choice", not (0 <= r["choice"] < n and choice_agrees(probs, draws, r["choice"])))]


def selection_problems(r: dict, run: dict, blobs: dict, checked: dict) -> list[tuple]:
    """A selection's pool is stored and its generator known (sections 3.2, 4); with an observed
    choice, that is the choice unless a steer acted and the draws are its posterior ones (4.6)."""
    if r["pool"] not in blobs or r["generator"] not in reader.GENS:
        return [("missing-blob" if r["pool"] not in blobs else "generator", True)]
    agent, observed = reader.floats(r["policy_probs"] or r["probs"]), r["observed"]
    if observed is None:  # reader.check regenerates its draws
        return []
    if not (0 <= observed < len(agent) == r["n"] and agent[observed] > 0):
        return [("choice", True)]
    keys, draws = reader.pool_keys(blobs[r["pool"]], r["generator"]), reader.floats(r["draws"])
    found = [("choice", r["policy_probs"] is None and not r["forced"] and r["choice"] != observed)]
    if len(keys) == len(draws) == r["n"]:
        sigma = reader.noise_seed(run["seed"], run["task"], r["generator"])
        regenerated = posterior_draws(agent, observed, keys, sigma, r["name"], r["step"])
        found.append(("draws", any(
            abs(g - e) > 4 * reader.TOL * (1 + abs(g) + (abs(math.log(a)) if a > 0 else 0))
            for g, e, a in zip(draws, regenerated, agent, strict=True))))
        checked["draws"] += len(draws)
    return found


def continuation_problems(r: dict, run: dict, checked: dict) -> list[tuple]:
    """A continuation's u regenerates exactly under the run's generator (RunStart.generator),
    and its decision is u < p unless forced by a declared steer (section 4.5)."""
    found = []
    if run["generator"] in reader.GENS:
        sigma = reader.noise_seed(run["seed"], run["task"], run["generator"])
        u = reader.uniform(CONTINUATION_KEY, reader.step_base(sigma, r["name"], r["step"]))
        found.append(("draws", r["u"] != u))
        checked["uniforms"] += 1
    decided = r["steer"] is not None if r["forced"] else r["decision"] == (r["u"] < r["p"])
    return [*found, ("decision", not decided)]


def covered(frames: list[tuple[bytes, list[dict]]], place: list[tuple[int, int]], index: int,
            first_frame: int) -> list[bytes]:
    """What the digest of the run ended by record ``index`` covers before its tail (section
    3.4): the payload of every frame from its RunStart's to the one before its RunEnd's that
    holds a record of it, then the bytes of its records before the RunEnd in the RunEnd's."""
    last_frame, position = place[index]
    run = frames[last_frame][1][position]["run"]
    parts = [payload for payload, frame in frames[first_frame:last_frame]
             if any(r.get("run") == run for r in frame)]
    before = [k for k, r in enumerate(frames[last_frame][1][:position]) if r.get("run") == run]
    raws = record_bytes(frames[last_frame][0]) if before else []
    return parts + [raws[k] for k in before]


def run_end_problems(r: dict, run: dict, key: bytes | None, chain: tuple[int, bytes],
                     parts: list[bytes], checked: dict) -> tuple[list[tuple], tuple[int, bytes]]:
    """A RunEnd's digest (section 3.4) and its place in the chain of keyed runs (3.5); a run
    without a digest is a problem when its writer always wrote one, it is keyed or a key is
    given, and a keyed run checked without the key is neither recomputed nor counted (7)."""
    digest, keyed, found, link = r["digest"], r["keyed"], [], b""
    if digest is None or (key is not None and not keyed):
        found.append(("digest", bool(run["era"] or keyed or key)))
    if r["chain"] is not None and digest is not None:
        found.append(("chain", not keyed or r["chain"] != chain[0] + 1))
        if keyed:
            link = chain_link(r["chain"], chain[1])
            chain = (r["chain"], digest)
    if digest is not None and (not keyed or key is not None):
        checked["digests"] += 1
        tail = msgpack.packb([r[field] for field in TAIL])
        found.append(("digest", run_digest(run["run_id"], [*parts, tail, link],
                                           key if keyed else None) != digest))
    return found, chain


def check(frames: list[tuple[bytes, list[dict]]], key: bytes | None = None) -> dict:
    """``reader.check`` and the checks this module adds (see its docstring); ``chain`` is the
    last keyed run's (position, digest) in the chain of keyed runs (section 3.5)."""
    records = [record for _, frame in frames for record in frame]
    place = [(f, k) for f, (_, frame) in enumerate(frames) for k in range(len(frame))]
    result = reader.check(records)
    blobs, checked, problems = result["blobs"], result["checked"], result["problems"]
    checked.update(digests=0, uniforms=0)
    runs, chain = {}, (0, bytes(32))
    for index, r in enumerate(records):
        kind, run, found = r["type"], runs.get(r.get("run")), []
        if kind == "WindowExit" and run and r["window"] not in run["open"]:
            found.append(("exit-without-enter", True))
            run = None  # outside the receipt chain and the counts (section 3.3)
        if kind == "RunStart":
            found.append(("generator", r["generator"] not in reader.GENS))
            era = r["generator"] in reader.GENS[1:]  # a writer that always wrote a digest (7)
            runs[r["run"]] = {**r, "frame": place[index][0], "open": set(), "era": era,
                              "counts": [0, 0, 0]}
        for h, inline in STORED.get(kind, []) if run else []:
            stored = r[h] is not None and (inline is None or r[inline] is None)
            found.append(("missing-blob", stored and r[h] not in blobs))
        if run and kind == "WindowEnter":
            run["open"].add(r["window"])
            run["era"] |= r["function"] is not None
        elif run and kind == "WindowExit":
            run["open"].remove(r["window"])
            run["counts"][0] += 1
        elif run and kind == "Selection":
            run["counts"][1] += 1
            found += choice_problems(r) + selection_problems(r, run, blobs, checked)
        elif run and kind == "Continuation":
            run["counts"][2] += 1
            found += continuation_problems(r, run, checked)
        elif run and kind == "RunEnd":
            del runs[r["run"]]
            found.append(("counts", [r[field] for field in TAIL[4:7]] != run["counts"]))
            parts = covered(frames, place, index, run["frame"])
            run_end, chain = run_end_problems(r, run, key, chain, parts, checked)
            found += run_end
        problems += [(problem, index) for problem, failed in found if failed]
    return {**result, "records": records, "problems": problems, "checked": checked,
            "chain": chain}
