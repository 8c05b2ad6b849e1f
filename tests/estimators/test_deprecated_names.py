"""Names renamed in this release keep working for one release: each warns
``DeprecationWarning`` at the caller's line, then behaves as the new name."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest

import agentlog as al
from agentlog.estimators import asv, cess

RENAMED_CLASSES = [
    ("asv", "AsvSummary", "AsvSummaryResult"),
    ("asv", "AucDifference", "AucDifferenceResult"),
    ("asv", "RetryDisagreement", "RetryDisagreementResult"),
    ("cess", "PolicyEffects", "PolicyEffectsResult"),
    ("cess", "TraceEffects", "TraceEffectsResult"),
    ("certify", "Board", "BoardResult"),
    ("certify", "RankIntervals", "RankIntervalsResult"),
    ("certify", "SamplingRadius", "SamplingRadiusResult"),
    ("reliability", "DegradationCurve", "DegradationCurveResult"),
    ("reliability", "GroupedReliability", "GroupedReliabilityResult"),
    ("reliability", "NonDegeneracy", "NonDegeneracyResult"),
    ("reliability", "PassHatK", "PassHatKResult"),
    ("reliability", "RecordF1", "RecordF1Result"),
    ("reliability", "ReliabilityGap", "ReliabilityGapResult"),
    ("reliability", "ReliabilitySummary", "ReliabilitySummaryResult"),
]


@pytest.mark.parametrize(("module", "old", "new"), RENAMED_CLASSES)
def test_an_old_result_class_name_warns_and_is_the_new_class(module: str, old: str,
                                                             new: str) -> None:
    mod = importlib.import_module(f"agentlog.estimators.{module}")
    with pytest.warns(DeprecationWarning,
                      match=rf"`{module}\.{old}` is deprecated; use `{module}\.{new}`") as rec:
        cls = getattr(mod, old)
    assert cls is getattr(mod, new)
    assert rec[0].filename == __file__  # stacklevel: the line that read the old name
    assert old not in mod.__all__ and new in mod.__all__


def test_importing_an_old_name_warns_too() -> None:
    with pytest.warns(DeprecationWarning, match=r"`cess\.PolicyEffects` is deprecated"):
        from agentlog.estimators.cess import PolicyEffects  # noqa: F401


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'PolicyEffect'"):
        _ = cess.PolicyEffect  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def asv_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    @al.window("step")
    def step(x: int) -> int:
        return x + 1

    path = tmp_path_factory.mktemp("asv") / "t.zst"
    with al.record(path, seed=1, task="t"):
        _ = step(1)
        ref = al.last_window("step")
        for ch, (b, a) in {"direct": (0.1, 0.5), "quote": (0.2, 0.1)}.items():
            al.score("margin", b, channel=ch, transition=ref.id, state_hash=ref.entry_hash)
            al.score("margin", a, channel=ch, transition=ref.id, state_hash=ref.exit_hash)
    return path


def test_asv_from_trace_warns_at_the_caller_and_reads_as_from_traces(asv_trace: Path) -> None:
    with pytest.warns(DeprecationWarning, match=r"`asv\.from_trace` is deprecated; use "
                                                r"`asv\.from_traces` \(same arguments\)") as rec:
        old = asv.from_trace(asv_trace, channels=("direct", "quote"))  # type: ignore[attr-defined]
    assert rec[0].filename == __file__
    new = asv.from_traces(asv_trace, channels=("direct", "quote"))
    np.testing.assert_array_equal(old.face().interaction, new.face().interaction)
    assert old.transitions == new.transitions


@pytest.fixture(scope="module")
def cess_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cess") / "t.zst"
    with al.record(path, system="s", seed=1, task="q"):
        al.select([0.5, 0.25, 0.25], candidates=["a", "b", "c"], name="doc")
    return path


def test_cess_from_trace_warns_and_keeps_its_old_keyword(cess_trace: Path) -> None:
    tables = {"outcomes": {"a": 0.4, "b": -0.2, "c": 0.1},
              "predictions": {"a": 0.2, "b": 0.0, "c": 0.1}, "budget": 1}
    new = cess.from_traces(cess_trace, **tables)
    with pytest.warns(DeprecationWarning, match=r"`cess\.from_trace` is deprecated; use "
                                                r"`cess\.from_traces` \(same arguments\)") as rec:
        old = cess.from_trace(cess_trace, **tables)  # type: ignore[attr-defined]
    assert rec[0].filename == __file__
    np.testing.assert_array_equal(old.y, new.y)
    np.testing.assert_array_equal(old.p, new.p)
    with pytest.warns(DeprecationWarning, match=r"`cess\.from_trace` is deprecated"):
        by_keyword = cess.from_trace(trace_or_paths=cess_trace, **tables)  # type: ignore[attr-defined]
    np.testing.assert_array_equal(by_keyword.y, new.y)


def test_the_interval_methods_old_name_warns_and_gives_the_same_interval() -> None:
    rng = np.random.default_rng(3)
    s = asv.summarize(asv.face(*rng.normal(size=(4, 40))), trajectory=np.arange(40),
                      n_resamples=200)
    with pytest.warns(DeprecationWarning, match=r"`AsvSummaryResult\.interval` is deprecated; "
                                                r"use `AsvSummaryResult\.confidence_interval`"):
        old = s.interval("mean_interaction", method="percentile")
    assert old == s.confidence_interval("mean_interaction", method="percentile")
    audit = cess.audit({"m": rng.normal(size=24)}, rng.normal(size=24),
                       question=np.arange(24) % 12, n_resamples=200)
    with pytest.warns(DeprecationWarning, match=r"`AuditResult\.interval` is deprecated"):
        assert audit.interval("m", "mae") == audit.confidence_interval("m", "mae")
