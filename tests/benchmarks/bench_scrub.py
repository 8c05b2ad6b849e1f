"""What credential scrubbing costs a window, against the same window with it switched off.

Run: ``python tests/benchmarks/bench_scrub.py`` (prints a table; asserts nothing).

Each row times one window call (the caller's latency: batches of 1,000 calls, the writer
drained between batches) with the byte prefilter of ``agentlog._scrub`` on, interleaved
with the same window whose prefilters are replaced by ``lambda *args: False`` (what
the window cost before scrubbing existed). Payloads: a tiny entry (``f("q")``), a
100-byte entry and exit, a 5-KB retrieved document, a payload that holds a credential
(the scrubber's slow path: walk, redact, re-encode), and one whose bytes hold a stem
("token" of ``max_tokens``) but nothing to redact (the walk finds nothing; the bytes are
kept).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _tempdir import bench_dir
from _timing import interleaved, row

import agentlog as al
from agentlog._window import call as _window_open
from agentlog._window import decorator as _window


def tiny(q: str, k: int = 3) -> int:
    return k


def mid(question: str, docs: list[str], budget: int = 3) -> dict[str, Any]:
    return {"answer": question[:10], "docs": docs[:2]}


def doc(text: str) -> str:
    return text[:64]


def creds(request: dict[str, Any]) -> int:
    return len(request)


def generate(prompt: str, max_tokens: int = 64) -> str:
    return prompt[:5]


def main() -> None:
    with bench_dir("agentlog-bench-scrub-") as folder:
        measure(folder)


def measure(folder: str) -> None:
    windows = {name: al.window(name)(fn) for name, fn in
               (("tiny", tiny), ("mid", mid), ("doc", doc), ("creds", creds),
                ("generate", generate))}
    question = "what is the capital of france and why is it paris?"
    ids = [f"doc-{i}" for i in range(5)]
    text = "The quick brown fox jumps over the lazy dog near the river bank. " * 80
    request = {"url": "https://api.example.org/v1", "max_tokens": 64,
               "headers": {"Authorization": "Bearer abcdefghijklmnop", "Accept": "json"}}
    calls = [
        ("tiny entry f('q'), int exit", lambda: windows["tiny"]("q")),
        ("100-byte entry, 40-byte exit", lambda: windows["mid"](question, ids)),
        ("5-KB document entry, 64-byte exit", lambda: windows["doc"](text)),
        ("entry holding a Bearer header (slow path)", lambda: windows["creds"](request)),
        ("`max_tokens` argument (a stem, nothing to redact)",
         lambda: windows["generate"]("what is the capital of france?")),
    ]
    # Every prefilter the window paths call, whichever this checkout has (the benchmark
    # also runs against older checkouts for A/B rows).
    prefilters = [(module, name) for module in (_window, _window_open)
                  for name in ("may_hold_secret", "may_change_payload", "_long_entry_may_change")
                  if hasattr(module, name)]
    real = {(module, name): getattr(module, name) for module, name in prefilters}

    def off(*args: Any) -> bool:
        return False

    def switch(on: bool) -> None:
        for module, name in prefilters:
            setattr(module, name, real[module, name] if on else off)

    try:
        with al.record(os.path.join(folder, "s.zst"), seed=1):
            for label, call in calls:
                def without(call: Any = call) -> None:
                    switch(False)
                    call()

                def with_scrub(call: Any = call) -> None:
                    switch(True)
                    call()

                ref, own = interleaved(without, with_scrub, number=1_000, repeat=15,
                                       before=al.flush)
                print(row(f"{label}: prefilter off (reference)", ref))
                print(row(f"{label}: scrubbing on", own, ref, "off"))
                print(f"{'':<58} cost: {own[0] - ref[0]:+.2f} µs (min)")
    finally:
        switch(True)

if __name__ == "__main__":
    main()
