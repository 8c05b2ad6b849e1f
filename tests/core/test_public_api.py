"""The public names are a contract: tests, examples and users call exactly these."""

from __future__ import annotations

import agentlog as al

EXPECTED = [
    "AdapterError", "AgentlogError", "AgentlogWarning", "ArtifactEncodingError", "CacheMiss",
    "DegenerateDataWarning", "IncompleteFaceError", "InstrumentationWarning",
    "MissingDependencyError", "ReadLimits", "ReplayDivergenceError", "ReplayError", "Run",
    "SealedWindowError", "Secret", "Trace", "TraceFormatError", "VerifyReport", "WindowRef",
    "WindowState", "__version__", "current_run", "current_window", "decode_arguments", "flush",
    "iter_frames", "iter_records", "last_window", "proceed",
    "read", "read_traces", "record", "score", "select", "tool", "verify", "window",
]


def test_all_is_sorted_and_fixed() -> None:
    assert al.__all__ == sorted(al.__all__) == EXPECTED


def test_every_exported_name_exists() -> None:
    for name in al.__all__:
        assert getattr(al, name) is not None


def test_the_exception_tree_matches_the_style_guide() -> None:
    assert issubclass(al.CacheMiss, al.ReplayError)
    assert issubclass(al.ReplayDivergenceError, al.ReplayError)
    assert issubclass(al.MissingDependencyError, ImportError)
    for err in (al.TraceFormatError, al.SealedWindowError, al.ReplayError,
                al.IncompleteFaceError, al.AdapterError, al.MissingDependencyError):
        assert issubclass(err, al.AgentlogError)
