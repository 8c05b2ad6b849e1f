"""``agentlog.adapters.inspect_ai`` and ``agentlog import inspect``: eval logs written by
inspect_ai itself (mockllm models, ``@task``s, a ``@tool``, real scorers) read back as
agentlog traces, one run per sample and epoch.

The logs are written in a child interpreter (``write_logs``): ``inspect_ai.eval`` sets up
process-wide state (a root logging handler, a ``.env`` read, event-loop streams left to
the garbage collector) that must not leak into the other tests. mockllm answers through
``custom_outputs`` with its usage set: its default output would count tokens with a
tiktoken encoding downloaded from the network.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard

pytest.importorskip("inspect_ai")

from inspect_ai.log import read_eval_log, read_eval_log_samples, write_eval_log
from inspect_ai.scorer import value_to_float

import agentlog as al
from agentlog.adapters.inspect_ai import ImportResult, import_logs
from agentlog.cli import _app
from agentlog.records import LLMCall, Score, ToolCall, decode_artifact, iter_runs
from tests.cli._cli import invoke

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-test-ABCDEF1234567890abcdef"
MODELS = ("mockllm/model", "mockllm/other")


# ----------------------------------------------------------------------------- the logs


def write_logs(folder: str, kind: str) -> None:
    """Run the evals of ``kind`` with inspect_ai, logs into ``folder`` (in the child).

    ``main``: tasks ``qa`` (3 samples; ``includes()`` and a dict-valued scorer, one key of
    which is text no number can be read from) and ``tools`` (a model that calls ``add``,
    then ``divide``, which fails) under two mockllm models with 2 epochs (.eval logs); and
    ``flaky`` (a sample whose solver raises) as a .json log in ``json/``.
    ``large:N``: one task of N samples, one epoch.
    """
    from inspect_ai import Task, task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import (
        Logprob,
        Logprobs,
        ModelOutput,
        ModelUsage,
        TopLogprob,
        get_model,
    )
    from inspect_ai.scorer import Score, Target, includes, match, mean, scorer
    from inspect_ai.solver import Generate, TaskState, generate, solver, use_tools
    from inspect_ai.tool import ToolError, tool

    def reply(input: Any, tools: Any, tool_choice: Any, config: Any) -> Any:
        turns = sum(m.role == "tool" for m in input)
        if tools and turns < 2:
            call = ("add", {"x": 1, "y": 2}) if turns == 0 else ("divide", {"x": 1, "y": 0})
            out = ModelOutput.for_tool_call("mockllm", *call)
        else:
            out = ModelOutput.from_content("mockllm", f"echo: {input[-1].text}")
            out.choices[0].logprobs = Logprobs(content=[Logprob(
                token="echo", logprob=-0.25, top_logprobs=[
                    TopLogprob(token="echo", logprob=-0.25),
                    TopLogprob(token="say", logprob=-1.5)])])
        n_in = sum(len(m.text.split()) for m in input) + 1
        n_out = len(out.completion.split()) + 1
        out.usage = ModelUsage(input_tokens=n_in, output_tokens=n_out,
                               total_tokens=n_in + n_out)
        return out

    @scorer(metrics=[mean()])
    def echo_length() -> Any:
        async def score(state: TaskState, target: Target) -> Score:
            text = state.output.completion
            return Score(value={"chars": float(len(text)), "echoed": text.startswith("echo"),
                                "verdict": "maybe"})
        return score

    @tool
    def add() -> Any:
        async def execute(x: int, y: int) -> int:
            """Add two numbers.

            Args:
                x: the first number.
                y: the second number.
            """
            return x + y
        return execute

    @tool
    def divide() -> Any:
        async def execute(x: int, y: int) -> float:
            """Divide two numbers.

            Args:
                x: the dividend.
                y: the divisor.
            """
            if y == 0:
                raise ToolError("division by zero")
            return x / y
        return execute

    @solver
    def breaks_on_boom() -> Any:
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            if state.sample_id == "boom":
                raise RuntimeError("the solver broke")
            return state
        return solve

    @task
    def qa() -> Task:
        return Task(dataset=[Sample(input="Say hi", target="hi", id="a"),
                             Sample(input="What is 2+2?", target="4", id=2),
                             Sample(input="Name a colour", target="red", id="c")],
                    solver=[generate()], scorer=[includes(), echo_length()])

    @task
    def tools() -> Task:
        return Task(dataset=[Sample(input="Add 1 and 2", target="3", id="t1")],
                    solver=[use_tools(add(), divide()), generate()], scorer=match())

    @task
    def flaky() -> Task:
        return Task(dataset=[Sample(input="fine", target="fine", id="ok"),
                             Sample(input="boom", target="boom", id="boom")],
                    solver=[breaks_on_boom(), generate()], scorer=includes())

    @task
    def large(n: int) -> Task:
        return Task(dataset=[Sample(input=f"question {i} " + "word " * 40, target="word",
                                    id=i) for i in range(n)],
                    solver=[generate()], scorer=includes())

    options: dict[str, Any] = {"display": "none", "log_dir": folder}
    if kind == "main":
        models = [get_model(MODELS[0], custom_outputs=reply, auth_token=SECRET),
                  get_model(MODELS[1], custom_outputs=reply)]
        inspect_eval([qa(), tools()], model=models, epochs=2, **options)
        inspect_eval(flaky(), model=models[0], log_format="json", fail_on_error=False,
                     **{**options, "log_dir": f"{folder}/json"})
    else:
        n = int(kind.removeprefix("large:"))
        inspect_eval(large(n), model=get_model(MODELS[0], custom_outputs=reply),
                     max_samples=100, **options)


def _write_in_child(folder: Path, kind: str) -> Path:
    code = ("import sys; from tests.adapters.test_inspect_import import write_logs; "
            "write_logs(sys.argv[1], sys.argv[2])")
    done = subprocess.run([sys.executable, "-c", code, str(folder), kind], cwd=ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "INSPECT_LOG_LEVEL": "error"})
    assert done.returncode == 0, done.stderr[-3000:]
    for log in folder.rglob("*.eval"):
        assert read_eval_log(str(log), header_only=True).status == "success", log
    return folder


@pytest.fixture(scope="session")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_in_child(tmp_path_factory.mktemp("inspect") / "logs", "main")


@pytest.fixture(scope="session")
def imported(logs: Path, tmp_path_factory: pytest.TempPathFactory) -> ImportResult:
    return import_logs([logs], tmp_path_factory.mktemp("imported") / "traces")


def _log_of(trace: Path, logs: Path) -> Path:
    (log,) = [p for p in logs.rglob(f"{trace.stem}.*") if p.suffix in (".eval", ".json")]
    return log


def _pairs(imported: ImportResult, logs: Path) -> Iterator[tuple[Path, Any, Any, Any]]:
    """(log file, log header, sample, run) for every run of every imported trace."""
    for trace in imported.files:
        log = _log_of(trace, logs)
        header = read_eval_log(str(log), header_only=True)
        samples = _samples_by_run(log)
        runs = [r.run for r in iter_runs(trace)]
        assert len(runs) == len(samples), trace
        for run in runs:
            yield log, header, samples.pop((run.start.task, run.start.seed)), run


def _samples_by_run(log: Path) -> dict[tuple[str, int], Any]:
    """The log's samples by the (task, seed) of the run each is imported as."""
    return {(str(s.id), s.epoch): s
            for s in read_eval_log_samples(str(log), all_samples_required=False)}


def _of(run: Any, kind: type) -> list[Any]:
    return [r for r in run.records if type(r) is kind]


# ----------------------------------------------------------------------------- the mapping


def test_each_sample_and_epoch_is_one_run_with_the_logs_system_task_and_seed(
        imported: ImportResult, logs: Path) -> None:
    assert len(imported.files) == 5  # qa and tools × two models, flaky (.json)
    assert (imported.runs, imported.samples) == (3 * 2 * 2 + 1 * 2 * 2 + 2, 3 * 2 + 2 + 2)
    seen = set()
    for _, header, sample, run in _pairs(imported, logs):
        start = run.start
        assert start.system == f"{header.eval.task}/{header.eval.model}"
        assert (start.task, start.seed) == (str(sample.id), sample.epoch)
        seen.add((start.system, start.task, start.seed))
    assert ("qa/mockllm/other", "2", 2) in seen and ("tools/mockllm/model", "t1", 1) in seen
    assert len(seen) == imported.runs


def test_run_meta_is_the_provenance_of_the_log(imported: ImportResult, logs: Path) -> None:
    for log, header, sample, run in _pairs(imported, logs):
        meta = run.start.meta
        assert meta["inspect_log"] == log.name
        assert meta["inspect_log_sha256"] == hashlib.sha256(log.read_bytes()).hexdigest()
        assert (meta["eval_id"], meta["run_id"], meta["task"], meta["model"]) == (
            header.eval.eval_id, header.eval.run_id, header.eval.task, header.eval.model)
        assert (meta["sample_id"], meta["epoch"]) == (sample.id, sample.epoch)
        assert meta["inspect_version"] == header.eval.packages["inspect_ai"]
        assert meta["source"] == "inspect_ai"


def test_no_secret_of_the_models_arguments_reaches_a_trace(imported: ImportResult) -> None:
    redacted = 0
    for trace in imported.files:
        with trace.open("rb") as f:
            data = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True).read()
        assert SECRET.encode() not in data and SECRET[:12].encode() not in data
        for _, run in iter_runs(trace):
            redacted += run.start.meta["model_args"].get("auth_token") == "<redacted>"
    assert redacted == 3 * 2 + 1 * 2 + 2  # every run of mockllm/model


def test_scores_are_the_logs_values_through_value_to_float(imported: ImportResult,
                                                           logs: Path) -> None:
    to_float = value_to_float()
    for _, _, sample, run in _pairs(imported, logs):
        expected = {}
        for name, score in (sample.scores or {}).items():
            if isinstance(score.value, dict):
                expected |= {(f"{name}/{k}", name): to_float(v) for k, v in score.value.items()
                             if k != "verdict"}
            else:
                expected[(name, name)] = to_float(score.value)
        scores = _of(run, Score)
        assert {(s.name, s.channel): s.value for s in scores} == expected
        assert len(scores) == len(expected) and all(s.window == -1 for s in scores)
    values = {s.value for t in imported.files for s in al.read(t).scores("includes")}
    assert values == {0.0, 1.0}  # "C" and "I" both occur


def test_a_score_value_that_is_no_number_is_skipped_and_counted(
        imported: ImportResult) -> None:
    assert imported.skipped == 3 * 2 * 2  # echo_length's "verdict" in every qa run
    qa_notes = [n for n in imported.notes if "'echo_length/verdict'" in n]
    assert len(qa_notes) == 2 and all("6 value(s) not a finite number" in n and "'maybe'" in n
                                      for n in qa_notes)


def test_llm_calls_are_the_model_events_with_their_tokens_and_logprobs(
        imported: ImportResult, logs: Path) -> None:
    total = 0
    for _, _, sample, run in _pairs(imported, logs):
        events = [e for e in sample.events if e.event == "model"]
        calls = _of(run, LLMCall)
        assert [(c.provider + "/" + c.model, c.input_tokens, c.output_tokens)
                for c in calls] == [(e.model, e.output.usage.input_tokens,
                                     e.output.usage.output_tokens) for e in events]
        for call, event in zip(calls, events, strict=True):
            request, response = decode_artifact(call.request), decode_artifact(call.response)
            assert [m["content"] for m in request["messages"]] == [m.text for m in event.input]
            assert [t["name"] for t in request["tools"]] == [t.name for t in event.tools]
            assert response["completion"] == event.output.completion
            assert call.window == 0 and call.status == 0
            if event.output.choices[0].logprobs is not None:
                (logprob,) = response["choices"][0]["logprobs"]["content"]
                assert (logprob["token"], logprob["logprob"]) == ("echo", -0.25)
                assert [t["token"] for t in logprob["top_logprobs"]] == ["echo", "say"]
        total += len(calls)
    assert total == imported.llm_calls == 3 * 2 * 2 + 3 * 2 * 2 + 1


def test_tool_calls_are_the_tool_events_and_a_tool_error_is_a_failed_call(
        imported: ImportResult, logs: Path) -> None:
    total = 0
    for _, _, sample, run in _pairs(imported, logs):
        events = [e for e in sample.events if e.event == "tool"]
        calls = _of(run, ToolCall)
        assert [c.name for c in calls] == [e.function for e in events]
        for call, event in zip(calls, events, strict=True):
            assert decode_artifact(call.args) == event.arguments
            if event.error is None:
                assert call.status == 0 and decode_artifact(call.result) == event.result
            else:
                assert (call.status, call.error_type) == (1, "InspectLoggedError")
                assert call.error_message == f"{event.error.type}: {event.error.message}"
                assert "division by zero" in call.error_message
        total += len(calls)
    assert total == imported.tool_calls == 2 * 2 * 2  # add, divide; 2 models × 2 epochs


def test_the_sample_window_holds_the_solver_and_a_failed_sample_fails_it(
        imported: ImportResult, logs: Path) -> None:
    failed = 0
    for _, _, sample, run in _pairs(imported, logs):
        (window,) = run.windows
        assert window.name == "inspect.sample"
        assert window.entry_value() == {"input": sample.input, "target": sample.target}
        if sample.error is None:
            assert window.exit.status == 0
            assert window.exit_value() == sample.output.completion
            assert window.exit.llm_calls == len([e for e in sample.events
                                                 if e.event == "model"])
        else:
            assert (window.exit.status, window.exit.error_type) == (1, "InspectLoggedError")
            assert "the solver broke" in window.exit.error_message
            failed += 1
    assert failed == 1


def test_the_same_sample_seals_the_same_entry_under_both_models(imported: ImportResult) -> None:
    entries: dict[tuple[str, str, int], set[bytes]] = {}
    for trace in imported.files:
        for _, run in iter_runs(trace):
            key = (run.start.meta["task"], run.start.task, run.start.seed)
            entries.setdefault(key, set()).add(run.windows[0].entry_hash)
    assert all(len(hashes) == 1 for hashes in entries.values())
    assert sum(k[0] == "qa" for k in entries) == 3 * 2


def test_every_imported_trace_verifies(imported: ImportResult) -> None:
    for trace in imported.files:
        assert al.verify(trace).ok, trace
    assert not list(imported.files[0].parent.glob(".*"))  # no partial file left behind


def test_a_log_without_events_gives_one_call_from_the_sample_output(
        logs: Path, tmp_path: Path) -> None:
    (source,) = sorted(logs.glob("*_qa_*.eval"))[:1]
    log = read_eval_log(str(source))
    assert log.samples is not None
    for sample in log.samples:
        sample.events = []
    write_eval_log(log, str(tmp_path / "bare.eval"))
    result = import_logs([tmp_path / "bare.eval"], tmp_path / "out")
    assert (result.runs, result.llm_calls, result.tool_calls) == (6, 6, 0)
    samples = _samples_by_run(tmp_path / "bare.eval")
    for _, run in iter_runs(result.files[0]):
        sample = samples.pop((run.start.task, run.start.seed))
        (call,) = _of(run, LLMCall)
        assert (call.input_tokens, call.output_tokens) == (
            sample.output.usage.input_tokens, sample.output.usage.output_tokens)
        assert decode_artifact(call.request) == {"input": sample.input}
        assert decode_artifact(call.response)["completion"] == sample.output.completion
    assert al.verify(result.files[0]).ok


def test_a_log_missing_some_samples_imports_the_others_in_order(
        logs: Path, tmp_path: Path) -> None:
    """An eval that stopped early lists samples its log does not hold: the chunk that
    cannot be read whole is read sample by sample, and the missing one is left out."""
    (source,) = sorted(logs.glob("*_qa_*.eval"))[:1]
    log = read_eval_log(str(source))
    assert log.samples is not None and len(log.samples) == 6
    gone = log.samples.pop(2)
    write_eval_log(log, str(tmp_path / "cut.eval"))
    result = import_logs([tmp_path / "cut.eval"], tmp_path / "out")
    got = [(run.start.task, run.start.seed) for _, run in iter_runs(result.files[0])]
    want = [(str(s.id), s.epoch) for s in log.samples]
    assert got == sorted(want, key=lambda k: (
        [str(i) for i in log.eval.dataset.sample_ids].index(k[0]), k[1]))
    assert (str(gone.id), gone.epoch) not in got and result.runs == 5


def test_an_import_inside_a_recorded_run_writes_runs_of_their_own(
        logs: Path, tmp_path: Path) -> None:
    with al.record(tmp_path / "outer.zst", task="outer"):
        result = import_logs(logs / "json", tmp_path / "out")
    starts = [r.run.start for r in iter_runs(result.files[0])]
    assert [start.parent_run for start in starts] == [None, None]
    assert len(al.read(tmp_path / "outer.zst").runs) == 1


# ----------------------------------------------------------------------------- bad input


def test_bad_inputs_say_what_was_expected_and_found(logs: Path, tmp_path: Path) -> None:
    (tmp_path / "junk.eval").write_bytes(b"not a zip")
    (tmp_path / "notes.json").write_text('{"hello": 1}')
    (tmp_path / "notes.txt").write_text("hi")
    (tmp_path / "empty").mkdir()
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"missing\.eval: no such file or folder; pass "
                                         r"Inspect eval logs \(\.eval or \.json\)"):
        import_logs([tmp_path / "missing.eval"], out)
    for bad in ("junk.eval", "notes.json"):
        with pytest.raises(ValueError, match=rf"{bad}: not a readable Inspect eval log \("):
            import_logs([tmp_path / bad], out)
    with pytest.raises(ValueError, match=r"notes\.txt: not an Inspect eval log: expected a "
                                         r"\.eval or \.json file, found \.txt"):
        import_logs([tmp_path / "notes.txt"], out)
    with pytest.raises(ValueError, match=r"empty: a folder without Inspect eval logs"):
        import_logs([tmp_path / "empty"], out)
    with pytest.raises(ValueError, match=r"no Inspect eval logs given"):
        import_logs([], out)
    assert not out.exists()  # nothing written for a bad input


def test_an_existing_trace_is_replaced_only_with_overwrite(logs: Path, tmp_path: Path) -> None:
    first = import_logs(logs / "json", tmp_path)
    (trace,) = first.files
    before = trace.read_bytes()
    with pytest.raises(al.TracePathError, match=r"exists; an import never replaces a trace "
                                                r"silently: pass overwrite=True"):
        import_logs(logs / "json", tmp_path)
    assert trace.read_bytes() == before
    again = import_logs(logs / "json", tmp_path, overwrite=True)
    assert again.files == first.files and len(al.read(trace).runs) == 2  # replaced, not appended


def test_two_logs_of_one_name_are_refused(logs: Path, tmp_path: Path) -> None:
    (source,) = list((logs / "json").glob("*.json"))
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / source.name).write_bytes(source.read_bytes())
    with pytest.raises(ValueError, match="would both be written to"):
        import_logs([source, tmp_path / "copy"], tmp_path / "out")


# ----------------------------------------------------------------------------- the CLI


def test_the_cli_imports_a_folder_and_prints_what_it_wrote(logs: Path, tmp_path: Path) -> None:
    out = tmp_path / "traces"
    result = invoke("import", "inspect", logs, "--out", out)
    assert result.exit_code == 0, result.output
    assert "5 trace(s) written to" in result.stdout
    assert "18 runs (10 samples, each epoch a run), 25 model calls, 8 tool calls" in result.stdout
    assert "! 12 score value(s) skipped: not finite numbers" in result.stdout
    assert len(list(out.glob("*.zst"))) == 5
    assert all(f.name in result.stdout for f in out.glob("*.zst"))


def test_the_cli_refuses_bad_input_with_exit_2(logs: Path, tmp_path: Path) -> None:
    missing = invoke("import", "inspect", tmp_path / "nope.eval", "--out", tmp_path / "o")
    assert missing.exit_code == 2 and "nope.eval: no such file or folder" in missing.stderr
    (tmp_path / "junk.eval").write_bytes(b"junk")
    junk = invoke("import", "inspect", tmp_path / "junk.eval", "--out", tmp_path / "o")
    assert junk.exit_code == 2 and "not a readable Inspect eval log" in junk.stderr
    assert invoke("import", "inspect", logs / "json", "--out", tmp_path / "o").exit_code == 0
    again = invoke("import", "inspect", logs / "json", "--out", tmp_path / "o")
    assert again.exit_code == 2 and "pass overwrite=True (agentlog import inspect --overwrite)" \
        in again.stderr
    assert "Traceback" not in again.output + junk.output + missing.output
    assert invoke("import", "inspect", logs / "json", "--out", tmp_path / "o",
                  "--overwrite").exit_code == 0


def test_without_inspect_ai_the_cli_names_the_pip_line(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "agentlog.adapters.inspect_ai")
    result = invoke("import", "inspect", tmp_path, "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert "pip install 'agentlog[inspect]'" in result.stderr


def test_the_import_groups_help_line_is_the_commands_docstring_summary() -> None:
    for name, (module, attribute, line) in _app.IMPORT_COMMANDS.items():
        command = _app.load_command(name, module, attribute)
        assert " ".join((command.help or "").split("\n\n")[0].split()).startswith(line)
    assert "inspect" in invoke("import", "--help").stdout


def test_reliability_runs_on_the_imported_traces(imported: ImportResult, logs: Path) -> None:
    result = invoke("estimate", "reliability", imported.files[0].parent, "--score", "includes",
                    "--by", "model", "--json")
    assert result.exit_code == 0, result.output
    groups = {g["labels"]["model"]: g for g in json.loads(result.stdout)["groups"]}
    to_float = value_to_float()
    logged: dict[str, list[float]] = {}
    for log in (p for p in logs.rglob("*") if p.suffix in (".eval", ".json")):
        model = read_eval_log(str(log), header_only=True).eval.model
        logged.setdefault(model, []).extend(
            to_float(s.scores["includes"].value) for s in _samples_by_run(log).values()
            if s.scores and "includes" in s.scores)
    assert {m: len(v) for m, v in logged.items()} == {MODELS[0]: 7, MODELS[1]: 6}
    for model, values in logged.items():
        assert groups[model]["n"] == len(values)
        assert groups[model]["mean"] == pytest.approx(sum(values) / len(values))


# ----------------------------------------------------------------------------- memory


def _streaming_peak(log_dir: Path, out: Path) -> tuple[int, ImportResult]:
    """The traced peak of an import from its first sample on, and its result."""
    def progress(done: int, total: int) -> None:
        if done == 1:
            tracemalloc.reset_peak()

    gc.collect()
    tracemalloc.start()
    try:
        result = import_logs(log_dir, out, progress=progress)
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


def _held_bytes(log_dir: Path) -> int:
    """What holding every sample of the log in ``log_dir`` takes."""
    (log,) = log_dir.glob("*.eval")
    gc.collect()
    tracemalloc.start()
    try:
        held = list(read_eval_log_samples(str(log), resolve_attachments="core"))
        assert held
        return tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


@pytest.mark.slow
def test_a_large_log_is_imported_in_memory_that_does_not_grow_with_its_samples(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Samples stream a chunk at a time: 4x the samples do not take ~4x the memory, and
    importing them holds less than a quarter of what the large log's samples take.

    Traced from the first sample on: before it inspect_ai reads the log's header, with the
    per-sample score reductions it always loads (its cost, the same for any reader). Each
    chunk's read parses the log's zip directory, so the peak grows a little with the log's
    size: the 2x bound leaves it room, materialising would not fit it.
    """
    # Chunks far smaller than the logs, as 512 is far smaller than a log of 10⁵ samples.
    monkeypatch.setattr("agentlog.adapters.inspect_ai._CHUNK", 32)
    small = _write_in_child(tmp_path / "small", "large:300")
    large = _write_in_child(tmp_path / "large", "large:1200")
    import_logs(small, tmp_path / "warm-up")  # one-time costs (lazy imports, schemas) first
    peak_small, result_small = _streaming_peak(small, tmp_path / "out-small")
    peak_large, result_large = _streaming_peak(large, tmp_path / "out-large")
    assert (result_small.runs, result_large.runs) == (300, 1200)
    held_large = _held_bytes(large)
    assert peak_large < 2 * peak_small, (peak_small, peak_large)
    assert peak_large < held_large / 4, (peak_large, held_large)
