"""Re-entering a sealed window: stream offsets, secrets, methods, ``entry=`` projections."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pytest

import agentlog as al
from agentlog.records import Continuation, Selection, WindowView
from agentlog.replay import reenter_arguments, resume_streams, window_function
from agentlog.replay.lowlevel import recorded_generator, stream_offsets

POOL = [f"d{i}" for i in range(7)]


@al.window("reentry_pick")
def pick(pool: list[str], rounds: int = 3) -> list[str]:
    """Draws from both streams, so a replay that starts them elsewhere diverges."""
    out: list[str] = []
    for t in range(rounds):
        if t and not al.proceed(0.6, name="stop"):
            break
        probs = np.linspace(1.0, 2.0, len(pool))
        i = al.select(probs / probs.sum(), candidates=pool, name="doc")
        out.append(pool[i])
    return out


def draws_of(trace: al.Trace, run: int, window: int) -> list[tuple[Any, ...]]:
    """(kind, stream, step, draw bytes, outcome) of every draw a window made, in order."""
    out: list[tuple[Any, ...]] = []
    for rec in trace.runs[run].records:
        if type(rec) is Selection and rec.window == window:
            out.append(("select", rec.name, rec.step, bytes(rec.draws), rec.choice))
        elif type(rec) is Continuation and rec.window == window:
            out.append(("proceed", rec.name, rec.step, rec.u, rec.decision))
    return out


def record_at_step_3(path: Path, seed: int = 11, generator: str | None = None) -> WindowView:
    extra = {} if generator is None else {"generator": generator}
    with al.record(path, seed=seed, mode="w", **extra):
        for _ in range(3):  # the run's doc stream is at step 3 when the window opens
            al.select([0.5, 0.5], candidates=["x", "y"], name="doc")
        al.proceed(0.5, name="stop")
        pick(POOL, 5)
        pick(POOL, rounds=2)  # a keyword call: the general (non-inlined) entry path
    return al.read(path).windows("reentry_pick")[0]


def test_a_window_records_the_stream_steps_at_its_entry(tmp_path: Path) -> None:
    path = tmp_path / "src.zst"
    view = record_at_step_3(path)
    trace = al.read(path)
    first, second = trace.windows("reentry_pick")
    assert first.enter.steps == {"doc": 3, "stop": 1}
    n_doc = sum(1 for r in draws_of(trace, 0, first.window) if r[0] == "select")
    n_stop = sum(1 for r in draws_of(trace, 0, first.window) if r[0] == "proceed")
    assert second.enter.steps == {"doc": 3 + n_doc, "stop": 1 + n_stop}
    assert stream_offsets(view) == {"doc": 3, "stop": 1}
    assert first.enter.function == f"{__name__}:pick"
    assert al.verify(path).ok


def test_a_window_entered_with_nothing_drawn_records_no_offsets(tmp_path: Path) -> None:
    with al.record(tmp_path / "a.zst", seed=1):
        pick(POOL)
    (view,) = al.read(tmp_path / "a.zst").windows("reentry_pick")
    assert view.enter.steps is None and stream_offsets(view) == {}


@pytest.mark.parametrize("which", [0, 1])
def test_a_window_recorded_at_step_3_reenters_with_its_recorded_draws(
        tmp_path: Path, which: int) -> None:
    src = tmp_path / "src.zst"
    record_at_step_3(src)
    source = al.read(src)
    view = source.windows("reentry_pick")[which]
    fn = window_function(view)
    args, kwargs = reenter_arguments(view)
    seed = source.runs[0].start.seed  # type: ignore[union-attr]
    with al.record(tmp_path / "replay.zst", seed=seed, mode="w"), \
            resume_streams(stream_offsets(view)):
        assert fn(*args, **kwargs) == view.exit_value()
    replay = al.read(tmp_path / "replay.zst")
    (again,) = replay.windows("reentry_pick")
    recorded = draws_of(source, 0, view.window)
    assert recorded and draws_of(replay, 0, again.window) == recorded
    assert again.entry_hash == view.entry_hash and again.exit_hash == view.exit_hash
    assert al.verify(tmp_path / "replay.zst").ok


def test_resume_streams_of_a_view_checks_the_generator_the_source_drew_with(
        tmp_path: Path) -> None:
    src = tmp_path / "src.zst"
    view = record_at_step_3(src, generator="fmix64-gumbel/1")  # an older trace's generator
    assert recorded_generator(view) == "fmix64-gumbel/1"
    args, kwargs = reenter_arguments(view)
    wrong = (r"draws with noise generator 'fmix64-gumbel/3', but the window was recorded "
             r"with 'fmix64-gumbel/1'.*al\.record\(\.\.\., generator='fmix64-gumbel/1'\)")
    with al.record(tmp_path / "wrong.zst", seed=11, mode="w"), pytest.raises(
            ValueError, match=wrong), resume_streams(view):
        pass
    with al.record(tmp_path / "right.zst", seed=11, mode="w",
                   generator=recorded_generator(view)), resume_streams(view) as steps:
        assert steps == stream_offsets(view)
        assert pick(*args, **kwargs) == view.exit_value()
    (again,) = al.read(tmp_path / "right.zst").windows("reentry_pick")
    assert draws_of(al.read(tmp_path / "right.zst"), 0, again.window) == draws_of(
        al.read(src), 0, view.window)


def test_without_the_offsets_the_reentered_window_draws_other_noise(tmp_path: Path) -> None:
    """The control of the test above: the offsets are what makes the draws equal."""
    src = tmp_path / "src.zst"
    view = record_at_step_3(src)
    args, kwargs = reenter_arguments(view)
    with al.record(tmp_path / "plain.zst", seed=11, mode="w"):
        pick(*args, **kwargs)
    replay = al.read(tmp_path / "plain.zst")
    (again,) = replay.windows("reentry_pick")
    assert draws_of(replay, 0, again.window)[0][2] == 0  # the first draw is at step 0
    assert draws_of(replay, 0, again.window) != draws_of(al.read(src), 0, view.window)


def test_resume_streams_refuses_a_run_that_already_drew_past_the_offset(
        tmp_path: Path) -> None:
    with al.record(tmp_path / "a.zst", seed=1):
        for _ in range(4):
            al.select([0.5, 0.5], name="doc")
        with pytest.raises(ValueError, match=r"already drew stream 'doc' up to step 3.*"
                                             r"run of its own"), resume_streams({"doc": 2}):
            pass
        with pytest.raises(ValueError, match=r"stream 'doc'.*starts it at step 0"), \
                resume_streams({"stop": 5}):
            pass
        with pytest.raises(ValueError, match=r"offset of 'doc' must be an int >= 0; "
                                             r"found -1"), resume_streams({"doc": -1}):
            pass
        with resume_streams({"doc": 9}):  # ahead of the run: fine
            assert al.select([0.5, 0.5], name="doc") in (0, 1)
    sels = al.read(tmp_path / "a.zst").selections("doc")
    assert [s.step for s in sels] == [0, 1, 2, 3, 9]


def test_resume_streams_outside_a_run_says_to_open_one() -> None:
    with pytest.raises(RuntimeError, match=r"needs a run: call it inside `with al.record"), \
            resume_streams({"doc": 1}):
        pass


def test_an_older_trace_counts_the_offsets_from_the_runs_draws(tmp_path: Path) -> None:
    """Before WindowEnter.steps existed (function None), the file order gives them."""
    import msgspec

    path = tmp_path / "src.zst"
    view = record_at_step_3(path)
    old = msgspec.structs.replace(view.enter, steps=None, function=None)
    trace = al.read(path)
    run = trace.runs[0]
    run.records[run.records.index(trace.windows("reentry_pick")[0].enter)] = old
    old_view = WindowView(old, trace)
    with pytest.raises(ValueError, match=r"recorded before agentlog stored stream offsets; "
                                         r"pass trace="):
        stream_offsets(old_view)
    assert stream_offsets(old_view, trace) == {"doc": 3, "stop": 1}


# ---------------------------------------------------------------------------- secrets


@al.window("reentry_login", secret=("session",))
def login(user: str, session: str, api_key: str, pin: Annotated[str, al.Secret]) -> str:
    return f"{user}:{len(session)}:{len(api_key)}:{len(pin)}"


def record_login(path: Path) -> WindowView:
    with al.record(path, seed=0, mode="w"):
        login("ada", "s-123456", "sk-abcdefghijklmnop", "4242")
    return al.read(path).windows("reentry_login")[0]


def test_the_entry_records_which_arguments_were_secret(tmp_path: Path) -> None:
    view = record_login(tmp_path / "a.zst")
    assert view.enter.secret_args == ["api_key", "pin", "session"]
    assert view.entry_value() == {"user": "ada", "session": "<redacted>",
                                  "api_key": "<redacted>", "pin": "<redacted>"}


def test_decode_arguments_refuses_a_declared_secret_it_was_not_given(tmp_path: Path) -> None:
    """window(secret=...) used to decode as the literal "<redacted>"."""
    view = record_login(tmp_path / "a.zst")
    with pytest.raises(ValueError, match=r"argument `session` of login is secret: it was "
                                         r"recorded as '<redacted>'.*secrets=\{'session': "
                                         r"\.\.\.\} or the environment variable "
                                         r"AGENTLOG_SECRET_SESSION"):
        al.decode_arguments(login, view.entry_bytes, secrets={"api_key": "k", "pin": "1"})
    # the undecorated function knows nothing of window(secret=): the recorded names do
    plain = login.__wrapped__  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=r"argument `session`"):
        al.decode_arguments(plain, view.entry_bytes, secrets={"api_key": "k", "pin": "1"},
                            secret_names=view.enter.secret_args or ())


def test_reenter_arguments_requires_every_secret_and_takes_them_from_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    view = record_login(tmp_path / "a.zst")
    with pytest.raises(ValueError, match=r"argument `api_key`.*AGENTLOG_SECRET_API_KEY"):
        reenter_arguments(view, secrets={"session": "s-123456"})
    with pytest.raises(ValueError, match=r"argument `pin`.*AGENTLOG_SECRET_PIN"):
        reenter_arguments(view, secrets={"session": "s-1", "api_key": "sk-1"})
    monkeypatch.setenv("AGENTLOG_SECRET_API_KEY", "sk-abcdefghijklmnop")
    monkeypatch.setenv("AGENTLOG_SECRET_PIN", "4242")
    args, kwargs = reenter_arguments(view, secrets={"session": "s-123456"})
    assert window_function(view)(*args, **kwargs) == view.exit_value()


def test_a_redacted_value_is_refused_even_when_the_parameter_is_not_declared(
        tmp_path: Path) -> None:
    @al.window("reentry_plain")
    def echo(note: str) -> str:
        return note

    with al.record(tmp_path / "a.zst", seed=0):
        echo("<redacted>")  # what a scrubbed argument looks like in an entry
    (view,) = al.read(tmp_path / "a.zst").windows("reentry_plain")
    with pytest.raises(ValueError, match=r"argument `note` of .*echo is secret"):
        reenter_arguments(view)
    assert reenter_arguments(view, secrets={"note": "<redacted>"}) == (("<redacted>",), {})


def test_the_reentry_modules_export_sorted_fixed_lists() -> None:
    import agentlog.reentry as reentry
    import agentlog.replay.interventions as interventions

    assert reentry.__all__ == sorted(reentry.__all__) == [
        "DRAW_TOLERANCE", "RecordedTool", "Steer", "ToolLookup", "ToolServing",
        "choice_agrees", "continuation_uniform", "current_steer", "first_draw_disagreement",
        "first_posterior_disagreement", "function_id", "gumbel_draws", "noise_seed",
        "observing", "posterior_gumbel_draws", "recorded_tools", "registered_window",
        "secret_env_name", "serving_tools", "start_streams", "steering", "stream_origin",
        "tool_args_hash",
    ]
    assert interventions.__all__ == [  # ruff's order: the constant first
        "ALTER_FACTOR", "STEERS", "Alter", "Compose", "FixedHorizon", "ForceRecorded",
        "NeverStop", "Permute", "Reverse", "Steer", "StopAt", "Temperature", "Uniform", "compose",
        "decision_label", "identity", "parse_decision",
    ]
    for module in (reentry, interventions):
        assert all(getattr(module, name) is not None for name in module.__all__)


@al.window("reentry_shared")
def shared_a(x: int) -> str:
    return f"a{x}"


@al.window("reentry_shared")
def shared_b(x: int) -> str:
    return f"b{x}"


def test_a_window_name_shared_by_two_functions_is_found_by_the_recorded_function(
        tmp_path: Path) -> None:
    from agentlog.reentry import registered_window

    with al.record(tmp_path / "a.zst", seed=0):
        shared_a(1)
        shared_b(2)
    a, b = al.read(tmp_path / "a.zst").windows("reentry_shared")
    assert (a.enter.function, b.enter.function) == (f"{__name__}:shared_a",
                                                    f"{__name__}:shared_b")
    assert window_function(a)(1) == "a1" and window_function(b)(1) == "b1"
    with pytest.raises(KeyError, match=r"'reentry_shared' is registered by 2 functions "
                                       r"\(tests\.core\.test_reentry:shared_a, "
                                       r"tests\.core\.test_reentry:shared_b\) and the trace "
                                       r"does not say which"):
        registered_window("reentry_shared")
    with pytest.raises(KeyError, match=r"was recorded from tests\.core\.test_reentry:nowhere, "
                                       r"which is not registered.*--app tests\.core\."
                                       r"test_reentry"):
        registered_window("reentry_shared", "tests.core.test_reentry:nowhere")
    with pytest.raises(KeyError, match=r"no window 'reentry_unknown' is registered"):
        registered_window("reentry_unknown")


def test_window_entries_holding_offsets_are_not_tracked_by_the_gc() -> None:
    """Thousands of entries wait in a writer's queue; tracked, each young-generation
    collection would walk them all (their dict and list fields would make them tracked)."""
    import gc

    from agentlog.records import WindowEnter

    rec = WindowEnter(0, 0, "w", -1, 1, b"h" * 32, b"e", None, None, None, None, 0,
                      {"doc": 3}, "m:f", ["api_key"], False)
    assert not gc.is_tracked(rec)


def test_entries_opened_between_two_draws_share_one_offsets_snapshot() -> None:
    from agentlog.testing import record_in_memory

    with record_in_memory(seed=1):
        run = al.current_run()
        assert run is not None and run.stream_steps() is None
        al.select([0.5, 0.5], name="doc")
        first = run.stream_steps()
        assert first == {"doc": 1} and run.stream_steps() is first  # no new dict
        al.proceed(0.5, name="stop")
        second = run.stream_steps()
        assert second == {"doc": 1, "stop": 1} and first == {"doc": 1}  # never mutated
        with resume_streams({"doc": 4, "stop": 1}):
            assert run.stream_steps() == {"doc": 4, "stop": 1}
