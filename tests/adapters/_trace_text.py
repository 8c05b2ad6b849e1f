"""Read a trace file's records as plain bytes, to search them for secrets."""

from __future__ import annotations

from typing import Any


def trace_plaintext(path: Any) -> bytes:
    """The file's bytes and every frame's decompressed content, concatenated.

    A secret must be searched for in the content, not only in the file: zstd may
    Huffman-code a literal, so an absent substring of the compressed bytes proves
    nothing. A trace file is a zstd stream (its headers are skippable frames), so the
    content is what any zstd reader gives.
    """
    import zstandard

    with open(path, "rb") as f:
        data = f.read()
        f.seek(0)
        content = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True).read()
    return data + content
