"""The public names are a contract: tests, examples and users call exactly these."""

from __future__ import annotations

import agentlog as al

EXPECTED = [
    "AdapterError", "AgentlogError", "AgentlogWarning", "AppImportError", "AppNotGivenError",
    "ArtifactEncodingError", "BlobNotFoundError", "CacheMiss", "ChannelVersionError",
    "DegenerateDataWarning", "IncompleteFaceError", "InstrumentationWarning",
    "MissingDependencyError", "ModelHTTPError", "NoLogprobsError", "NotRegisteredError",
    "ReadLimits",
    "RegistryCollisionWarning", "ReplayDivergenceError", "ReplayError", "Run",
    "SealedWindowError", "Secret", "SharedNoiseWarning", "StateDecodeError",
    "StreamClosedError", "Trace", "TraceFormatError", "TracePathError", "VerifyReport",
    "WindowHandle", "WindowNotFoundError", "WindowRef", "WindowState", "__version__",
    "atool_call", "channel", "current_run", "current_window", "decode_arguments", "flush",
    "iter_frames", "iter_records", "last_window", "llm_call", "open_window",
    "posterior_draws", "proceed", "read", "read_traces", "record", "score", "scorer",
    "select", "settle", "tool", "tool_call", "verify", "window",
]


def test_channel_and_scorer_load_the_replay_package_only_when_used() -> None:
    import subprocess
    import sys

    code = ("import sys, agentlog as al; before = 'agentlog.replay' in sys.modules; "
            "import agentlog.replay as r; print(before, al.channel is r.channel, "
            "al.scorer is r.scorer)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["False", "True", "True"]


def test_all_is_sorted_and_fixed() -> None:
    assert al.__all__ == sorted(al.__all__) == EXPECTED


def test_every_exported_name_exists() -> None:
    for name in al.__all__:
        assert getattr(al, name) is not None


def test_the_exception_tree_matches_the_style_guide() -> None:
    assert issubclass(al.CacheMiss, al.ReplayError)
    assert issubclass(al.ReplayDivergenceError, al.ReplayError)
    assert issubclass(al.MissingDependencyError, ImportError)
    assert issubclass(al.TracePathError, ValueError)
    assert issubclass(al.SharedNoiseWarning, al.AgentlogWarning)
    for err in (al.TraceFormatError, al.TracePathError, al.SealedWindowError, al.ReplayError,
                al.IncompleteFaceError, al.AdapterError, al.MissingDependencyError):
        assert issubclass(err, al.AgentlogError)


def test_estimator_modules_load_on_attribute_access() -> None:
    """``agentlog.estimators.cess`` works after a bare ``import agentlog.estimators``."""
    import subprocess
    import sys

    code = (
        "import sys, agentlog.estimators as e;"
        "before = 'agentlog.estimators.cess' in sys.modules;"
        "print(before, e.cess.__name__, callable(e.reliability.summary),"
        " set(e.__all__) <= set(dir(e)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["False", "agentlog.estimators.cess", "True", "True"]


def test_an_unknown_estimator_is_an_attribute_error_naming_the_known_ones() -> None:
    import pytest

    import agentlog.estimators as est

    with pytest.raises(AttributeError,
                       match=r"has no attribute 'nonexistent'; its estimators are \['asv'"):
        est.nonexistent  # noqa: B018
