"""``verify``: recompute everything a trace claims and list what does not hold.

Checks, per file:

* every Blob's SHA-256, every inline entry/exit artifact against its hash, every
  referenced Blob present;
* the receipt chain of every run, recomputed from its genesis, and the RunEnd head;
* ``after=`` continuity: a window's entry equals its declared predecessor's exit
  (a mismatch or a missing predecessor is a *bypass*);
* every probability vector finite, non-negative, normalised, of the declared size;
  every Gumbel draw equal to its value regenerated from (seed, task, stream, step,
  candidate id) under the run's noise generator (the task counts from ``fmix64-gumbel/3``
  on); every choice equal to ``argmax(log p + g)`` of its recorded draws (unless forced
  by a declared steer);
* every continuation's uniform regenerated from (seed, task, stream, step) and its
  decision equal to ``u < p``;
* structure: runs that never ended, windows that never closed, repeated steps, a
  RunEnd whose counts of windows, selections and continuations differ from its run's
  records, a file without a run, records outside any run, empty frames and a
  truncated tail;
* the run digest (``RunEnd.digest``): SHA-256, or HMAC-SHA256 under the run's key,
  over the exact bytes of every record of the run, so that an edit of any field an
  estimator reads (a probability, a score, a status, the metadata) is detected. A run
  without a digest is a problem when the trace shows that its writer always wrote one
  (``DIGEST_ERA_GENERATORS``); only runs of writers older than the digest verify
  without it, with a note;
* the chain of keyed runs (``RunEnd.chain``, ``agentlog._digest``): each keyed run's
  place, and with the key its HMAC over the digest of the keyed run before it, so that
  a removed, reordered or duplicated keyed run is a problem. The report's
  ``chain_head`` names the last keyed run; checked against a head stored earlier
  (``expect_head=``), it also catches keyed runs cut from the end of the file;
* losses are named by what the trace records: records dropped under backpressure
  (``RunEnd.dropped``, gaps in a stream's steps, a process that went on writing after
  a run stopped), apart from a crash or a writer that could not write any more.

``verify`` streams the file: it holds one frame (at most ``ReadLimits.max_held_bytes``
of decompressed data, read as zero-copy views, metadata left undecoded), the state of the
runs still open (their open windows, their streams' steps), a bounded cache of candidate
pools (read back from the file when it no longer holds one) and one hash per Blob,
whatever the size of the file. Selections and continuations are checked in batches, in
numpy passes of at most ``CHUNK`` candidates (``agentlog._verify.batch``). At most
``MAX_PROBLEMS_PER_KIND`` problems of each kind are listed (the first in record order);
the rest are counted.

Examples:
    >>> import agentlog as al
    >>> with al.record("agentlog-verify-doc.zst", seed=1):
    ...     _ = al.proceed(0.5, name="stop")
    >>> al.verify("agentlog-verify-doc.zst").ok
    True
"""

from __future__ import annotations

import os

from agentlog._digest import key_bytes
from agentlog._errors import TraceFormatError
from agentlog._frames import FrameIterator, trace_path
from agentlog._trace_format import ReadLimits
from agentlog._verify.batch import Pools
from agentlog._verify.checker import DIGEST_ERA_GENERATORS, MAX_PROBLEMS_PER_KIND, _Verifier
from agentlog._verify.report import Problem, VerifyReport, parse_chain_head

__all__ = ["DIGEST_ERA_GENERATORS", "MAX_PROBLEMS_PER_KIND", "Problem", "VerifyReport",
           "parse_chain_head", "verify", "verify_many"]


def verify(
    path: str | os.PathLike[str],
    *,
    key: str | bytes | None = None,
    expect_head: str | None = None,
    limits: ReadLimits | None = None,
) -> VerifyReport:
    """Verify one trace file, streaming it (memory: one frame plus per-run state).

    Args:
        path: the trace file.
        key: the secret the runs were recorded with (``record(..., key=...)``): their
            digests are then checked as HMACs, which nobody without the key can forge.
            Without it, a keyed digest is not checked (a note says so).
        expect_head: a ``chain_head`` reported for this file earlier (needs ``key``):
            the file must still hold that keyed run at that place. Without it, keyed
            runs cut from the end of the file leave a shorter chain that verifies.
        limits: the reader's bounds (``ReadLimits``).

    Raises:
        ValueError: ``expect_head`` is not ``"<position>:<64 hex digits>"``, or is given
            without ``key``.
        TraceFormatError: only when the file cannot be read (not a trace, corrupted
            before its tail, hostile sizes).
        OSError: the file cannot be opened.
    """

    secret = key_bytes(key)
    head = parse_chain_head(expect_head, keyed=secret is not None)
    report = VerifyReport(path=trace_path(path, "al.verify"))
    with FrameIterator(report.path, limits=limits, raw=True, views=True) as frames:
        checker = _Verifier(report, secret, Pools(frames.path, frames.limits), head)
        try:
            for frame in frames:
                if frame.raws:
                    assert frame.payload is not None
                    checker.frame(frame.records, frame.raws, frame.payload, frame.offset)
                else:
                    checker.empty_frames += 1
                del frame  # let it go before the next frame is decoded
        finally:
            checker.pools.close()
    report.truncated = bool(frames.truncated)
    report.bytes_dropped = int(frames.bytes_dropped)
    report.records = frames.records
    report.frames = frames.frames
    checker.finish(header_only=frames.format_version is not None and not frames.frames)
    if report.truncated:
        report.problems.append(
            Problem(
                "truncated",
                f"the file ends inside a frame: {report.bytes_dropped} bytes dropped after "
                f"{report.records} records (a crash or an unfinished copy)",
            )
        )
    return report


def verify_many(paths: list[str]) -> list[VerifyReport | TraceFormatError]:
    """Verify several files; an unreadable one yields its ``TraceFormatError``."""
    out: list[VerifyReport | TraceFormatError] = []
    for p in paths:
        try:
            out.append(verify(p))
        except TraceFormatError as exc:
            out.append(exc)
    return out
