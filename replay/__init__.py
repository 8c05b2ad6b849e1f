"""Replay of recorded runs, and the exact-input model cache that makes a replay frozen.

Every adapter call goes through a ``ModelCache``: the key is the SHA-256 of the canonical
encoding of a registered, versioned field list per provider (``request_key``), the store
is SQLite, and a recorded trace is itself a cache (``ModelCache.from_traces``).

Examples:
    >>> from agentlog.replay import ModelCache, request_key
    >>> key = request_key("openai.chat", {"model": "m", "messages": [], "temperature": 0})
    >>> with ModelCache(path=":memory:") as cache:
    ...     first = cache.call(key, lambda: {"id": "r1"})
    ...     again = cache.call(key, lambda: {"id": "r2"})
    >>> first.status, again.status, again.response
    ('miss', 'hit', {'id': 'r1'})

The execution engine (``run_units`` / ``arun_units``) runs resumable units of replay work
with bounded concurrency, retries and a progress bar, locally or on Ray, and writes each
finished unit as a sealed run of an output trace (``read_units`` reads them back).

Re-entering a sealed window (``reenter_arguments``, ``resume_streams``,
``window_function``, ``tool_result``) and the interventions a re-entry runs under
(``agentlog.replay.interventions``) are documented in their modules. Paired
interventions: a ``Design`` (selection × stopping levels × replicate seeds) expands to
arms (``Arm``), and ``intervene`` re-enters every sealed window instance under each arm and
seed as units of ``run_units`` (``cess.effects_from_traces`` reads the output). Per-step
attribution: ``alteration_arm(["doc@1"])`` changes one decision and nothing else
(``interventions.Alter``); ``agentlog.estimators.attribution`` reads those arms.
"""

from agentlog import NotRegisteredError, RegistryCollisionWarning
from agentlog import deprecation as _deprecation
from agentlog.adapters import (  # the exact-input cache lives below replay: adapters use it
    CacheKey,
    CacheMode,
    CacheResult,
    CacheStatus,
    ModelCache,
    RequestFields,
    default_cache_path,
    register_request_fields,
    registered_request_fields,
    request_fields,
    request_key,
)
from agentlog.registry import (
    Channel,
    ScoreContext,
    Scorer,
    channel,
    get_channel,
    get_scorer,
    scorer,
)
from agentlog.retry import RetryPolicy, is_transient

from ._app import (
    AppImportError,
    AppNotGivenError,
    resolve_app,
)
from ._channel_replay import (
    ChannelVersionError,
    RederivedReplay,
    areplay_channels,
    ascore_channel_unit,
    iter_channel_units,
    plan_channel_units,
    rederive_channel_replay,
    replay_channels,
    score_channel_unit,
)
from ._counterfactual import CounterfactualChoice, counterfactual_choices
from ._design import Arm, Design, alteration_arm, parse_design, replicate_seed
from ._executor import arun_units, run_units
from ._intervene import InterventionRun, intervene, reenter_job
from ._options import ExecutionOptions
from ._reentry import (
    reenter_arguments,
    resume_streams,
    tool_result,
    window_function,
)
from ._states import (
    FrozenTransition,
    State,
    StateDecodeError,
    WindowNotFoundError,
)
from ._unit_output import UnitOutput, read_units, sealed_units
from ._units import RunSummary, Unit, UnitContext, UnitFailure, UnitScore

__all__ = [
    "AppImportError",
    "AppNotGivenError",
    "Arm",
    "CacheKey",
    "CacheMode",
    "CacheResult",
    "CacheStatus",
    "Channel",
    "ChannelVersionError",
    "CounterfactualChoice",
    "Design",
    "ExecutionOptions",
    "FrozenTransition",
    "InterventionRun",
    "ModelCache",
    "NotRegisteredError",
    "RederivedReplay",
    "RegistryCollisionWarning",
    "RequestFields",
    "RetryPolicy",
    "RunSummary",
    "ScoreContext",
    "Scorer",
    "State",
    "StateDecodeError",
    "Unit",
    "UnitContext",
    "UnitFailure",
    "UnitOutput",
    "UnitScore",
    "WindowNotFoundError",
    "alteration_arm",
    "areplay_channels",
    "arun_units",
    "ascore_channel_unit",
    "channel",
    "counterfactual_choices",
    "default_cache_path",
    "get_channel",
    "get_scorer",
    "intervene",
    "is_transient",
    "iter_channel_units",
    "parse_design",
    "plan_channel_units",
    "read_units",
    "rederive_channel_replay",
    "reenter_arguments",
    "reenter_job",
    "register_request_fields",
    "registered_request_fields",
    "replay_channels",
    "replicate_seed",
    "request_fields",
    "request_key",
    "resolve_app",
    "resume_streams",
    "run_units",
    "score_channel_unit",
    "scorer",
    "sealed_units",
    "tool_result",
    "window_function",
]

# The built-in jobs are named by their public path ("agentlog.replay:score_channel_unit"),
# which replays write into every output unit: never a private module's.
for _job in (score_channel_unit, ascore_channel_unit, reenter_job):
    _job.__module__ = __name__
del _job

# Moved (one release of warnings): plumbing to agentlog.replay.lowlevel, the registry to
# agentlog.registry.
_MOVED = {
    **dict.fromkeys(("APP_ENV", "Job", "app_from_pyproject", "frozen_transitions",
                     "recorded_generator", "recorded_modules", "stream_offsets",
                     "trace_file_hash"), "agentlog.replay.lowlevel"),
    **dict.fromkeys(("Registered", "Registry", "object_id", "registry"), "agentlog.registry"),
}


__getattr__ = _deprecation.renamed_attributes(__name__, moved=_MOVED)
