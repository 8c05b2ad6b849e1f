"""Typed trace records: the tagged union written into every trace frame.

Each frame of a trace file holds one msgpack array of these records. They are
``msgspec.Struct`` types encoded ``array_like`` (positional, no field names on disk)
with a small integer tag as the first element, so a small record costs a few dozen
bytes before compression.

Schema-evolution contract (every format version: v1 and v2 differ in framing, not in records;
the trace-format specification in the docs defines both):

* Never reorder, rename, retype or remove an existing field; never reuse a tag.
* New fields are appended at the end of a record and must have a default, so that
  old files decode (missing trailing fields take the default) and old readers can
  read new files (msgspec ignores extra trailing array elements).
* A new record type takes a new tag; readers built before it raise
  ``TraceFormatError`` naming the unknown tag rather than guessing.
* Anything that changes how existing bytes are interpreted bumps
  ``FORMAT_VERSION`` in ``_trace_format`` and gets a committed golden fixture
  under ``tests/fixtures/traces/vN/``.

Hashes are raw 32-byte SHA-256 digests. Numeric vectors are raw little-endian bytes
(``<f8`` unless stated), decoded with ``numpy.frombuffer`` without copying.
Times are integer nanoseconds (``time.time_ns()`` for wall-clock stamps,
``perf_counter_ns`` differences for durations).
"""

from __future__ import annotations

from typing import Any

import msgspec

# Window exit statuses.
EXIT_OK = 0
EXIT_FAILED = 1  # an exception escaped the window: the declared failure exit (⊥)
EXIT_CLOSED = 2  # a generator window closed early (close(), GC) before exhaustion

_OPTS = {"array_like": True, "frozen": True, "tag_field": "k", "omit_defaults": False}


class RunStart(msgspec.Struct, tag=1, **_OPTS):
    """Opens a run. ``run`` is the run's index inside this file; records refer to it."""

    run: int
    run_id: str  # globally unique (uuid4 hex)
    system: str
    seed: int
    task: str | None
    meta: dict[str, Any]
    t_ns: int
    generator: str  # noise generator id, e.g. "splitmix64-gumbel/1"
    agentlog_version: str
    parent_run: str | None = None  # run_id of the enclosing run when record() nests
    pid: int = 0
    # Where a nested run was opened, so that its spans find their parent even when it is
    # stored in another file: the enclosing run's window id (-1: outside any window) and
    # the outermost run's id (whose trace the spans join). None in root runs and older
    # traces.
    parent_window: int | None = None
    root_run: str | None = None


# gc=False: ``steps`` (a dict) and ``secret_args`` (a list) would make every entry a
# GC-tracked object, and thousands of them wait in a writer's queue: each young-generation
# collection would walk them all (measured: +11-17 % per window). No field can hold a
# reference back to a record, so an entry can never be part of a cycle.
class WindowEnter(msgspec.Struct, tag=2, gc=False, **_OPTS):
    """A window opened. The entry artifact is sealed: its hash is fixed here."""

    run: int
    window: int  # window id, unique within the run
    name: str
    parent: int  # enclosing window id, -1 at top level
    t_ns: int
    entry_hash: bytes
    entry: bytes | None  # canonical encoding inline, or None when stored as a Blob
    args_hash: bytes | None = None  # bound-arguments artifact when ``entry=`` projects
    after: str | None = None  # declared predecessor window name
    link_hash: bytes | None = None  # hash compared against the predecessor's exit
    expected_hash: bytes | None = None  # the predecessor's exit hash (None: no predecessor)
    thread: int = 0
    # What a replay needs to re-enter this instance (all None/False in older traces):
    # {stream: step of its next draw} when the window opened (None: nothing drawn yet, so
    # every stream was at step 0), the decorated function as "module:qualname", the names
    # of its secret arguments (sealed as "<redacted>", to be supplied again), and whether it
    # is a method (its ``self``/``cls`` is not in the entry).
    steps: dict[str, int] | None = None
    function: str | None = None
    secret_args: list[str] | None = None
    method: bool = False


class WindowExit(msgspec.Struct, tag=3, **_OPTS):
    """A window closed (``status`` EXIT_OK, EXIT_FAILED or EXIT_CLOSED)."""

    run: int
    window: int
    name: str
    t_ns: int
    status: int
    exit_hash: bytes
    exit: bytes | None  # canonical encoding inline, or None when stored as a Blob
    # sha256(prev receipt ‖ name ‖ entry hash ‖ exit hash). Recorders hand the writer b""
    # and its thread fills the receipt in, in file order (TraceWriter._seal).
    receipt: bytes
    wall_ns: int
    error_type: str | None = None
    error_message: str | None = None
    tool_calls: int = 0
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    selections: int = 0


class Selection(msgspec.Struct, tag=4, **_OPTS):
    """One ``select`` draw: the full probability vector, the draws and the choice."""

    run: int
    window: int
    name: str  # stream name
    step: int
    owner: str  # "model" | "scaffold"
    pool: bytes  # hash of the Blob holding the candidate ids (canonical list)
    n: int
    probs: bytes  # <f8, length n (after truncation, when top_k/top_p were used)
    draws: bytes  # <f8 Gumbel draws, length n
    choice: int  # index into the pool
    n_zero: int  # candidates with probability exactly 0
    generator: str
    top_k: int | None = None
    top_p: float | None = None
    raw_probs: bytes | None = None  # the vector before truncation, when truncated
    t_ns: int = 0
    policy_probs: bytes | None = None  # the agent's own vector when a steer replaced it
    steer: str | None = None  # the steer (intervention) that acted on this draw
    forced: bool = False  # the choice was forced by the steer, not drawn
    # The choice made outside agentlog (a served model's sampled answer) that this record
    # observed: its draws are then the posterior Gumbel noise given (agent's vector,
    # observed), keyed as every draw (agentlog._posterior), not the prior's.
    observed: int | None = None

    @property
    def drawn(self) -> str:
        """``"posterior"`` when the draws were sampled given an observed choice
        (``select(..., observed=)``), else ``"prior"``."""
        return "prior" if self.observed is None else "posterior"


class Continuation(msgspec.Struct, tag=5, **_OPTS):
    """One ``proceed`` decision: continue iff u < p."""

    run: int
    window: int
    name: str
    step: int
    p: float
    u: float
    decision: bool
    t_ns: int = 0
    policy_p: float | None = None  # the agent's own p when a steer replaced it
    steer: str | None = None
    forced: bool = False  # the decision was forced by the steer, not drawn


class LLMCall(msgspec.Struct, tag=6, **_OPTS):
    """One model call, secrets removed. Adapters fill it."""

    run: int
    window: int
    t_ns: int
    provider: str
    model: str
    request: bytes  # canonical encoding, secrets removed
    response: bytes  # canonical encoding
    cache_key: bytes | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ns: int = 0
    cost: float | None = None
    status: int = 0  # 0 ok, 1 failed
    error_type: str | None = None
    error_message: str | None = None
    fingerprint: str | None = None
    # What the call's span needs that the payloads do not say in one provider-independent
    # place (older traces read these defaults; the span builder then infers from payloads).
    operation: str | None = None  # GenAI operation name; None: inferred from the request
    in_process: bool = False  # served in-process (vLLM offline): an INTERNAL span
    cache: str | None = None  # "hit", "miss" or "off" when the call went through a cache
    response_model: str | None = None
    response_id: str | None = None
    finish_reasons: list[str] | None = None


class ToolCall(msgspec.Struct, tag=7, **_OPTS):
    """One call of an ``@al.tool`` function; ``status`` 2 means refused by a sealed window."""

    run: int
    window: int
    name: str
    t_ns: int
    wall_ns: int
    status: int  # 0 ok, 1 failed, 2 refused (sealed window)
    args_hash: bytes | None = None
    result_hash: bytes | None = None
    error_type: str | None = None
    error_message: str | None = None
    # The scrubbed canonical arguments and result inline when small (None when stored as
    # the Blob named by the hash, or in older traces, which kept small ones as hashes only).
    args: bytes | None = None
    result: bytes | None = None
    # Answered from a recording by a frozen replay (``agentlog.reentry.serving_tools``):
    # the tool itself was not called.
    served: bool = False
    # "module:qualname" of the result's type (status 0): a replay serving the result checks
    # that it rebuilt this type from the tool's return annotation. Information only: no
    # code is ever imported by this name.
    result_type: str | None = None


class Score(msgspec.Struct, tag=8, **_OPTS):
    """A readout of a window (or of a run when ``window`` is -1)."""

    run: int
    window: int
    name: str
    value: float
    channel: str | None = None
    layout: int | None = None
    wave: int | None = None
    state_hash: bytes | None = None
    transition: int | None = None
    t_ns: int = 0


class Blob(msgspec.Struct, tag=9, **_OPTS):
    """A content-addressed artifact: ``hash == sha256(data)``. Stored once per file."""

    hash: bytes
    data: bytes
    kind: str = "artifact"  # "artifact" | "pool"


class RunEnd(msgspec.Struct, tag=10, **_OPTS):
    """Closes a run with the head of its receipt chain and its record counts.

    A recorder hands the writer ``receipt=b""``: the writer thread fills in the chain's
    head and the counts (windows closed, selections, continuations), all taken over the
    run's records in file order; ``verify`` recounts them.
    """

    run: int
    t_ns: int
    status: int  # 0 ok, 1 the run body raised
    receipt: bytes
    n_windows: int
    n_selections: int
    n_continuations: int
    dropped: int = 0
    error_type: str | None = None
    # The run digest (agentlog._digest): every field of every record of the run, in file
    # order; None in traces written before it existed. ``keyed``: HMAC under record(key=).
    digest: bytes | None = None
    keyed: bool = False
    # A keyed run's place among the file's keyed runs (1, 2, ...), which its HMAC also
    # covers with the digest of the keyed run before it (agentlog._digest); None for a
    # run without a key and in traces written before the chain.
    chain: int | None = None


Record = (
    RunStart | WindowEnter | WindowExit | Selection | Continuation | LLMCall | ToolCall | Score
    | Blob | RunEnd
)
RECORD_TYPES: tuple[type[msgspec.Struct], ...] = (
    RunStart, WindowEnter, WindowExit, Selection, Continuation, LLMCall, ToolCall, Score, Blob,
    RunEnd,
)
