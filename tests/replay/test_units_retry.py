"""Retry of transient failures, the model cache's counts, and the progress bar."""

from __future__ import annotations

import io
import random
import statistics
from pathlib import Path
from typing import Any

import pytest

import agentlog as al
from agentlog.replay import (
    ExecutionOptions,
    ModelCache,
    RetryPolicy,
    Unit,
    UnitContext,
    UnitScore,
    is_transient,
    read_units,
    request_key,
    run_units,
)
from agentlog.replay._progress import Progress


class FakeClock:
    """Records the engine's sleeps instead of sleeping."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


class StatusError(Exception):
    """An SDK error with an HTTP status, as openai's and anthropic's carry it."""

    def __init__(self, status_code: int, retry_after: str | None = None) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code
        self.response = _Response(status_code, retry_after)


class _Response:
    def __init__(self, status_code: int, retry_after: str | None) -> None:
        self.status_code = status_code
        self.headers = {} if retry_after is None else {"retry-after": retry_after}


class RateLimitError(Exception):
    """Named like the SDKs' rate-limit error, without a status."""


class Flaky:
    """Fails the first ``n`` attempts of every unit with ``error()``."""

    def __init__(self, n: int, error: Any) -> None:
        self.n = n
        self.error = error
        self.calls: dict[str, int] = {}

    def __call__(self, unit: Unit, ctx: UnitContext) -> list[UnitScore]:
        self.calls[unit.key] = self.calls.get(unit.key, 0) + 1
        assert ctx.attempt == self.calls[unit.key]
        if ctx.attempt <= self.n:
            raise self.error()
        return [UnitScore("v", float(unit.payload["x"]))]


def _run(job: Any, tmp_path: Path, policy: RetryPolicy, n: int = 1) -> Any:
    return run_units([Unit(f"u{i}", {"x": i}) for i in range(n)], job,
                     out=tmp_path / "o.zst",
                     execution=ExecutionOptions(retry=policy, progress=False))


@pytest.mark.parametrize("error", [
    lambda: StatusError(429), lambda: StatusError(503), lambda: StatusError(500),
    lambda: StatusError(408), lambda: StatusError(409), lambda: TimeoutError("read"),
    lambda: ConnectionResetError("reset"), RateLimitError,
])
def test_transient_errors_are_retried_with_backoff_until_the_unit_succeeds(
        tmp_path: Path, error: Any) -> None:
    clock = FakeClock()
    job = Flaky(2, error)
    summary = _run(job, tmp_path, RetryPolicy(max_attempts=4, base=1.0, cap=10.0, seed=3,
                                              sleep=clock.sleep))
    assert (summary.done, summary.failed, summary.retries) == (1, 0, 2)
    assert job.calls == {"u0": 3}
    assert len(clock.sleeps) == 2
    assert 0 <= clock.sleeps[0] <= 1.0 and 0 <= clock.sleeps[1] <= 2.0
    assert read_units(tmp_path / "o.zst")["u0"].attempts == 3


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_a_client_error_that_will_not_change_is_not_retried(tmp_path: Path,
                                                           status: int) -> None:
    clock = FakeClock()
    job = Flaky(1, lambda: StatusError(status))
    summary = _run(job, tmp_path, RetryPolicy(sleep=clock.sleep))
    assert (summary.done, summary.failed) == (0, 1)
    assert (summary.failures[0].attempts, summary.failures[0].transient) == (1, False)
    assert summary.failures[0].error_type == "StatusError"
    assert clock.sleeps == [] and job.calls == {"u0": 1}


def test_a_cache_miss_of_a_frozen_replay_is_not_retried(tmp_path: Path) -> None:
    cache_path = tmp_path / "cache.sqlite3"
    ModelCache(cache_path).close()  # an empty cache file
    clock = FakeClock()
    summary = run_units([Unit("u0", {"x": 1})], "tests.replay._unit_jobs:cached_score",
                        out=tmp_path / "o.zst", cache=cache_path, frozen=True,
                        execution=ExecutionOptions(retry=RetryPolicy(sleep=clock.sleep),
                                                   progress=False))
    assert summary.failed == 1 and summary.failures[0].error_type == "CacheMiss"
    assert summary.failures[0].attempts == 1 and clock.sleeps == []
    assert (summary.cache_hits, summary.cache_misses, summary.live_calls) == (0, 1, 0)


def test_a_unit_that_stays_transiently_failed_is_recorded_after_max_attempts(
        tmp_path: Path) -> None:
    clock = FakeClock()
    summary = _run(Flaky(99, lambda: StatusError(429)), tmp_path,
                   RetryPolicy(max_attempts=3, sleep=clock.sleep))
    (failure,) = summary.failures
    assert (failure.attempts, failure.transient, failure.error_type) == (3, True, "StatusError")
    assert len(clock.sleeps) == 2 and summary.retries == 2
    assert read_units(tmp_path / "o.zst")["u0"].status == "failed"


def test_the_servers_retry_after_is_waited_at_least_but_never_past_the_cap(
        tmp_path: Path) -> None:
    clock = FakeClock()
    _run(Flaky(2, lambda: StatusError(429, retry_after="7")), tmp_path,
         RetryPolicy(base=0.01, cap=5.0, sleep=clock.sleep))
    assert clock.sleeps == [5.0, 5.0]
    clock = FakeClock()
    (tmp_path / "second").mkdir()
    _run(Flaky(1, lambda: StatusError(503, retry_after="2")), tmp_path / "second",
         RetryPolicy(base=0.01, cap=5.0, sleep=clock.sleep))
    assert clock.sleeps == [2.0]


def test_an_attempt_past_the_timeout_is_retried_like_a_timeout(tmp_path: Path) -> None:
    import asyncio

    attempts: list[int] = []

    async def slow_once(unit: Unit, ctx: UnitContext) -> list[UnitScore]:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            await asyncio.Event().wait()  # never set: only the timeout ends it
        return [UnitScore("v", 1.0)]

    clock = FakeClock()
    summary = run_units([Unit("u0")], slow_once, out=tmp_path / "o.zst",
                        execution=ExecutionOptions(timeout=0.05,
                                                   retry=RetryPolicy(sleep=clock.sleep),
                                                   progress=False))
    assert (summary.done, attempts, len(clock.sleeps)) == (1, [1, 2], 1)


def test_full_jitter_is_uniform_below_the_doubling_ceiling() -> None:
    """Mean of U(0, c) is c/2 with standard error c/sqrt(12 n): checked within 5 SE."""
    policy = RetryPolicy(base=0.5, cap=8.0)
    assert [policy.ceiling(k) for k in range(1, 8)] == [0.5, 1, 2, 4, 8, 8, 8]
    rng = random.Random(20261201)
    n = 4000
    for k in (1, 3, 6):
        c = policy.ceiling(k)
        draws = [policy.delay(k, rng=rng) for _ in range(n)]
        assert all(0.0 <= d <= c for d in draws)
        se = c / (12 * n) ** 0.5
        assert abs(statistics.fmean(draws) - c / 2) < 5 * se


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"max_attempts": 0}, r"`max_attempts` must be an int >= 1; found 0"),
    ({"base": -1.0}, r"`base` must be a finite number of seconds >= 0; found -1.0"),
    ({"cap": float("inf")}, r"`cap` must be a finite number of seconds >= 0; found inf"),
    ({"base": 2.0, "cap": 1.0}, r"`cap` \(1.0\) must be >= `base` \(2.0\)"),
])
def test_a_bad_retry_policy_is_refused(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RetryPolicy(**kwargs)


def test_errors_are_classified_by_status_then_by_type() -> None:
    class APIConnectionError(Exception):
        pass

    class WithStatus(Exception):
        status = 502

    class Wrapped(Exception):
        def __init__(self) -> None:
            self.response = _Response(429, None)

    assert [is_transient(e) for e in (StatusError(429), StatusError(500), WithStatus(),
                                      Wrapped(), APIConnectionError(), TimeoutError(),
                                      ConnectionRefusedError(), RateLimitError())] == [True] * 8
    assert [is_transient(e) for e in (StatusError(400), StatusError(404), ValueError("x"),
                                      KeyError("k"), al.CacheMiss("m"))] == [False] * 5


# ------------------------------------------------------------------------ the model cache


def test_a_rerun_with_the_cache_is_served_from_it_and_the_summary_counts_it(
        tmp_path: Path) -> None:
    cache = tmp_path / "cache.sqlite3"
    units = [Unit(f"u{i}", {"x": i}) for i in range(5)]
    job = "tests.replay._unit_jobs:cached_score"
    first = run_units(units, job, out=tmp_path / "a.zst", cache=cache,
                      execution=ExecutionOptions(progress=False))
    assert (first.cache_hits, first.cache_misses, first.live_calls) == (0, 5, 5)
    second = run_units(units, job, out=tmp_path / "b.zst", cache=cache,
                       execution=ExecutionOptions(progress=False))
    assert (second.cache_hits, second.cache_misses, second.live_calls) == (0 + 5, 0, 0)
    frozen = run_units(units, job, out=tmp_path / "c.zst", cache=cache, frozen=True,
                       execution=ExecutionOptions(progress=False))
    assert (frozen.done, frozen.cache_hits, frozen.live_calls) == (5, 5, 0)
    values = {k: u.scores[0].value for k, u in read_units(tmp_path / "c.zst").items()}
    assert values == {f"u{i}": i / 10 for i in range(5)}


def test_without_a_cache_a_job_s_model_calls_are_counted_as_live(tmp_path: Path) -> None:
    summary = run_units([Unit(f"u{i}", {"x": i}) for i in range(3)],
                        "tests.replay._unit_jobs:cached_score", out=tmp_path / "o.zst",
                        execution=ExecutionOptions(progress=False))
    assert (summary.cache_hits, summary.cache_misses, summary.live_calls) == (0, 0, 3)


def test_a_frozen_replay_refuses_a_writable_cache_or_a_missing_file(tmp_path: Path) -> None:
    units = [Unit("u0", {"x": 1})]
    with ModelCache(tmp_path / "rw.sqlite3") as writable, pytest.raises(
            ValueError, match=r"`frozen=True` needs a read-only cache; `cache` is in mode "
                              r"'read-write'"):
        run_units(units, "tests.replay._unit_jobs:cached_score", out=tmp_path / "o.zst",
                  cache=writable, frozen=True, execution=ExecutionOptions(progress=False))
    with pytest.raises(FileNotFoundError, match=r"does not exist; a frozen replay serves"):
        run_units(units, "tests.replay._unit_jobs:cached_score", out=tmp_path / "o.zst",
                  cache=tmp_path / "none.sqlite3", frozen=True,
                  execution=ExecutionOptions(progress=False))


def test_the_cache_key_is_what_the_job_gives_not_the_unit_key(tmp_path: Path) -> None:
    """Two units asking the same model call share one cache entry (one live call)."""
    key = request_key("openai.chat", {"model": "m", "messages": [], "temperature": 0})

    def job(unit: Unit, ctx: UnitContext) -> list[UnitScore]:
        result = ctx.cached(key, lambda: {"v": 1.0})
        return [UnitScore("v", result.response["v"])]

    summary = run_units([Unit("a"), Unit("b")], job, out=tmp_path / "o.zst",
                        cache=tmp_path / "c.sqlite3",
                        execution=ExecutionOptions(concurrency=1, progress=False))
    assert (summary.cache_hits, summary.live_calls) == (1, 1)


# ------------------------------------------------------------------------ progress bar


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_shows_done_total_and_failures_on_a_terminal() -> None:
    stream = _Tty()
    bar = Progress(10, enabled=True, stream=stream)
    bar.advance(4, 1)
    bar.advance(6, 2)
    bar.close()
    text = stream.getvalue()
    assert "10/10" in text and "3 failed" in text


def test_no_progress_bar_when_not_a_terminal_or_not_asked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert not Progress(10, enabled=True, stream=io.StringIO()).enabled
    assert not Progress(10, enabled=False, stream=_Tty()).enabled
    run_units([Unit("u0", {"x": 0})], "tests.replay._unit_jobs:score_states",
              out=tmp_path / "o.zst", execution=ExecutionOptions(progress=True))
    assert capsys.readouterr().err == ""
