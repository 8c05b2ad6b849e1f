"""Run and window state, held in ``ContextVar``s (the recorder's only global state).

A ``Run`` is what ``record()`` opens; a ``WindowState`` is one open window. Both are
plain objects carried by context variables, so asyncio tasks inherit them and threads
see them only when the work was submitted with a copied context
(``agentlog.context.copy_context_executor``).
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import time
import warnings
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, NamedTuple

from ._errors import InstrumentationWarning
from ._noise import GENERATOR_ID, noise_seed

if TYPE_CHECKING:
    from ._writer import TraceWriter

RECEIPT_DOMAIN = b"agentlog-receipt/1"


def receipt_genesis(run_id: str) -> bytes:
    """receipt_0 = sha256("agentlog-receipt/1" ‖ UTF-8 run_id) (run ids are ASCII hex)."""
    return hashlib.sha256(RECEIPT_DOMAIN + run_id.encode("utf-8", "surrogatepass")).digest()


def receipt_key(window: str) -> bytes:
    """The window's part of a receipt: len(name) as u32 LE ‖ UTF-8 name."""
    name = window.encode("utf-8")
    return len(name).to_bytes(4, "little") + name


def receipt_next(prev: bytes, window: str, entry_hash: bytes, exit_hash: bytes) -> bytes:
    """receipt_k = sha256(receipt_{k-1} ‖ len(window) as u32 LE ‖ window ‖ entry ‖ exit).

    The length prefix keeps the concatenation unambiguous; the hashes are 32 bytes each.
    """
    return hashlib.sha256(prev + receipt_key(window) + entry_hash + exit_hash).digest()


_UNSET = object()


class Run:
    """One recorded run: what ``al.record(...)`` yields and ``al.current_run()`` returns.

    Attributes:
        run_id: globally unique id (uuid4 hex).
        index: the run's index inside its trace file.
        path: the trace file.
        system, seed, task, meta: as passed to ``record``.
        generator: the noise generator keying the run's draws (``record(generator=)``).
        noise_seed: the seed its draws are keyed by: ``seed`` with ``task`` folded in under
            generator ``"fmix64-gumbel/3"``, ``seed`` itself under /1 and /2
            (``agentlog.reentry.noise_seed``).
    """

    __slots__ = (
        "_next_steps",
        "_snapshot",
        "_steps",
        "_window_ids",
        "closed",
        "durability",
        "event_logger",
        "generator",
        "index",
        "last_exit",
        "link_exit",
        "lock",
        "meta",
        "noise_seed",
        "origins",
        "parent_run",
        "path",
        "redact",
        "run_id",
        "secrets",
        "seed",
        "span_events",
        "strict",
        "system",
        "t0_ns",
        "t0_perf",
        "task",
        "tracer",
        "writer",
    )

    def __init__(
        self,
        *,
        run_id: str,
        index: int,
        path: str,
        system: str,
        seed: int,
        task: str | None,
        meta: dict[str, Any],
        writer: TraceWriter,
        redact: Callable[[Any], Any] | None,
        durability: str,
        tracer: Any,
        parent_run: str | None,
        strict: bool = False,
        generator: str = GENERATOR_ID,
        event_logger: Any = None,
        span_events: bool = True,
    ) -> None:
        self.run_id = run_id
        self.generator = generator  # the noise generator keying this run's draws
        self.index = index
        self.path = path
        self.system = system
        self.seed = seed
        self.task = task
        # Computed once: select and proceed read it on every draw.
        self.noise_seed = noise_seed(seed, task, generator)
        self.meta = meta
        self.writer = writer
        self.lock = threading.Lock()
        self._window_ids = itertools.count()  # next() is atomic under the GIL
        self._steps: dict[str, itertools.count[int]] = {}
        # stream -> the step its next draw gets: what a window's entry records so that a
        # replay can start the streams where the recording stood (``stream_steps``).
        self._next_steps: dict[str, int] = {}
        # The last stream_steps() answer, shared by the entries of windows opened while
        # nothing is drawn (records are immutable; a new dict is made after a draw), so a
        # window entry allocates nothing in the common case. _UNSET: not computed yet.
        self._snapshot: dict[str, int] | object | None = _UNSET
        # The offsets a replay started the streams at (resume_steps): where a steer that
        # counts rounds of the re-entered window (a fixed horizon) starts counting.
        self.origins: dict[str, int] = {}
        # window name -> (window id, entry hash, exit hash) of its latest successful exit
        self.last_exit: dict[str, tuple[int, bytes, bytes]] = {}
        # generator window name -> (window id, hash of its list of yields): what an
        # ``after=`` successor links to, because a consumer receives the yields, not the
        # sealed ``{"yields": ..., "return": ...}`` exit (see ``agentlog._window.decorator``).
        self.link_exit: dict[str, tuple[int, bytes]] = {}
        self.redact = redact
        self.durability = durability
        self.tracer = tracer
        self.event_logger = event_logger  # log-based events (_spans.events), with the tracer
        self.span_events = span_events  # events also on spans (AGENTLOG_SPAN_EVENTS)
        self.t0_ns = time.time_ns()
        self.t0_perf = time.perf_counter_ns()
        self.closed = False
        self.parent_run = parent_run
        # Secret values seen in this run (declared arguments, credential-named fields):
        # scrubbed wherever they appear later, e.g. in an exception message.
        self.secrets: set[str] = set()
        self.strict = strict  # unsealable arguments raise instead of sealing a marker

    def next_step(self, stream: str) -> int:
        """The next step of a named stream (select/proceed), counted per run."""
        counter = self._steps.get(stream)
        if counter is None:
            with self.lock:
                counter = self._steps.setdefault(stream, itertools.count())
        step = next(counter)  # atomic under the GIL: two threads never share a step
        # A plain store, not under the lock: exact when one thread draws at a time (the
        # only case a replay can reproduce anyway); racing threads may leave it one short.
        self._next_steps[stream] = step + 1
        self._snapshot = _UNSET
        return step

    def stream_steps(self) -> dict[str, int] | None:
        """``{stream: next step}`` of every stream drawn so far; None before the first draw.

        A window's entry records it (``WindowEnter.steps``): a stream absent from it had
        not been drawn, so its next step was 0.
        """
        snap = self._snapshot
        if snap is _UNSET:
            steps = self._next_steps
            snap = self._snapshot = steps.copy() if steps else None
        return snap  # type: ignore[return-value]

    def resume_steps(self, offsets: dict[str, int]) -> None:
        """Continue each stream of ``offsets`` at its step (replay re-enters a window there).

        Raises:
            ValueError: a stream this run already drew is past its offset or missing from
                ``offsets``: the steps would repeat or differ from the recording's, so the
                re-entry needs a run of its own.
        """
        for stream, start in offsets.items():
            if not isinstance(start, int) or isinstance(start, bool) or start < 0:
                raise ValueError(f"stream offset of {stream!r} must be an int >= 0; "
                                 f"found {start!r}")
        with self.lock:
            for stream, used in self._next_steps.items():
                begin = offsets.get(stream)
                if begin is None or begin < used:
                    raise ValueError(
                        f"run {self.run_id} already drew stream {stream!r} up to step "
                        f"{used - 1}, but the re-entered window starts it at "
                        f"{'step 0 (it had not been drawn)' if begin is None else begin}: "
                        "re-enter each window in a run of its own (a fresh al.record), "
                        "before any select/proceed of that run"
                    )
            self.origins = dict(offsets)
            self._snapshot = _UNSET
            for stream, start in offsets.items():
                self._steps[stream] = itertools.count(start)
                if start:
                    self._next_steps[stream] = start

    def now_ns(self) -> int:
        """Wall-clock ns derived from one monotonic clock (cheaper than time.time_ns)."""
        return self.t0_ns + (time.perf_counter_ns() - self.t0_perf)

    def __repr__(self) -> str:
        return (f"Run(run_id={self.run_id!r}, system={self.system!r}, seed={self.seed}, "
                f"task={self.task!r}, path={self.path!r})")


class WindowState:
    """One open window. ``al.current_window()`` returns it.

    Resource counters start at their class defaults and become instance attributes only
    when something is counted: opening a window sets five attributes, not sixteen.
    """

    tool_calls = 0
    llm_calls = 0
    input_tokens = 0
    output_tokens = 0
    cost: float | None = None
    selections = 0
    span: Any = None
    t0_perf = 0
    entry_hash = b""
    closed = False  # set when its exit is recorded

    def __init__(
        self,
        run: Run,
        wid: int,
        name: str,
        parent: WindowState | None,
        forbid: frozenset[str],
    ) -> None:
        self.run = run
        self.id = wid
        self.name = name
        self.parent = parent
        self.forbid = forbid

    def add_usage(
        self,
        *,
        llm_calls: int = 0,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost: float | None = None,
        tool_calls: int = 0,
        selections: int = 0,
    ) -> None:
        """Count resources into this window (adapters call this for every model call).

        Thread-safe: work a window hands to a pool (``copy_context_executor``) counts into
        the same window from several threads, and ``x += n`` is not atomic under the GIL.
        """
        with self.run.lock:
            self.llm_calls += llm_calls
            self.input_tokens += input_tokens
            self.output_tokens += output_tokens
            self.tool_calls += tool_calls
            self.selections += selections
            if cost is not None:
                self.cost = (self.cost or 0.0) + cost

    def __repr__(self) -> str:
        return f"WindowState(name={self.name!r}, id={self.id}, run={self.run.run_id!r})"


current_run_var: ContextVar[Run | None] = ContextVar("agentlog_run", default=None)
current_window_var: ContextVar[WindowState | None] = ContextVar("agentlog_window", default=None)

# Number of runs open anywhere in the process. Decorated calls test this plain global
# first: with no recorder at all they skip even the ContextVar lookup.
active_runs = 0


_thread_warned = False


def warn_runless_thread(what: str) -> None:
    """Warn once per process that ``what`` ran outside every run while one is recorded.

    Called only when ``active_runs`` is non-zero and this context has no run: the typical
    cause is a plain ``ThreadPoolExecutor``, whose threads do not inherit context
    variables, so the call would vanish from the trace without a word.
    """
    global _thread_warned
    thread = threading.current_thread()
    if _thread_warned or thread is threading.main_thread():
        return
    _thread_warned = True  # set first: a warning filter that raises must not re-enter
    warnings.warn(
        f"{what} ran in thread {thread.name!r}, which sees no agentlog run, while a run is "
        "being recorded in this process: it was not recorded. Submit the work with "
        "agentlog.context.copy_context_executor() (or contextvars.copy_context().run) so "
        "that the thread records into the run. This warning is shown once per process.",
        InstrumentationWarning,
        stacklevel=3,
    )


def current_run() -> Run | None:
    """The run recorded in this context, or None."""
    return current_run_var.get()


def window_in(run: Run) -> WindowState | None:
    """The innermost open window of ``run`` in this context (None outside its windows)."""
    window = current_window()
    return window if window is not None and window.run is run else None


class WindowRef(NamedTuple):
    """A closed window of the current run: what a score of its states refers to."""

    id: int
    name: str
    entry_hash: bytes
    exit_hash: bytes


def last_window(name: str) -> WindowRef | None:
    """The latest window called ``name`` that exited successfully in the current run.

    Evaluators use it to score a transition's before and after states at record time:
    ``al.score("margin", v, channel="quote", transition=ref.id, state_hash=ref.exit_hash)``.
    None outside a run or before such a window exited.
    """
    run = current_run_var.get()
    if run is None:
        return None
    hit = run.last_exit.get(name)
    return None if hit is None else WindowRef(hit[0], name, hit[1], hit[2])


def current_window() -> WindowState | None:
    """The innermost open window in this context, or None."""
    window = current_window_var.get()
    # A window closed from another context (a framework callback on another thread) stays
    # current where it was opened: the records made there go to its nearest open parent.
    while window is not None and window.closed:
        window = window.parent
    return window
