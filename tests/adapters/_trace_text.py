"""Read a trace file's records as plain bytes, to search them for secrets."""

from __future__ import annotations

from typing import Any


def trace_plaintext(path: Any) -> bytes:
    """The file header and every frame's decompressed content, concatenated.

    A secret must be searched for here, not in the file: zstd may Huffman-code a literal,
    so an absent substring of the compressed bytes proves nothing.
    """
    import struct

    import zstandard

    with open(path, "rb") as f:
        data = f.read()
    out, at, unzip = [data[:8]], 8, zstandard.ZstdDecompressor()
    while at + 16 <= len(data):
        length = struct.unpack_from("<I", data, at)[0]
        out.append(unzip.decompress(data[at + 16:at + 16 + length]))
        at += 16 + length
    return b"".join(out)
