"""Inspect AI eval logs as agentlog traces (``agentlog import inspect LOG... --out DIR``).

``import_logs(logs, out)`` reads Inspect eval logs (``.eval``/``.json`` files, or folders
of them) with inspect_ai's public API and writes one trace per log into folder ``out``,
named after the log (``..._qa_ABC.eval`` → ``..._qa_ABC.zst``).

Examples:
    >>> from agentlog.adapters.inspect_ai import import_logs
    >>> import_logs(["no-such-logs/"], "traces")
    Traceback (most recent call last):
    ...
    ValueError: no-such-logs: no such file or folder; pass Inspect eval logs ...

================================  =====================================================
Inspect                           agentlog
================================  =====================================================
eval log (a task × a model)       one trace file
sample × epoch                    one run: ``system=f"{task}/{model}"`` (sample ids
                                  repeat across tasks), ``task=str(sample id)``,
                                  ``seed=epoch``, ``meta``: provenance (below)
the sample's solver phase         window ``"inspect.sample"``: entry ``{"input",
                                  "target"}``, exit the output's completion; a sample
                                  error fails it (⊥)
``ModelEvent``                    ``LLMCall``: provider and model from ``provider/model``;
                                  request: the generate config's set fields,
                                  ``messages``, ``tools``, ``tool_choice``; response: the
                                  ``ModelOutput`` (choices, logprobs, usage); its tokens,
                                  time and cache read/write (``"hit"``/``"miss"``)
no events in the log              one ``LLMCall`` of ``sample.output`` (request
                                  ``{"input": sample input}``)
``ToolEvent``                     ``ToolCall``; a tool error fails it
                                  (``InspectLoggedError``: its type and message)
``sample.scores[name]``           run-level ``Score(name, channel=name)``; a dict value
                                  one per key, ``f"{name}/{key}"``
``choices=["A", …]``: the final   ``Selection`` of stream ``choice_stream`` in the
output's logprobs at the answer   sample's window: the vector over the labels
                                  (``choice_probs``), ``observed=`` the label the model
                                  sampled, drawn ``"posterior"`` (paired counterfactuals:
                                  ``agentlog counterfactual``)
================================  =====================================================

The window closes where Inspect's scoring phase begins: a model-graded scorer's calls are
run-level calls. Scores convert as ``inspect_ai.scorer.value_to_float()`` converts them
("C" 1, "P" 0.5, "I" and "N" 0, yes/no, true/false, numeric text, numbers); a value it
would turn into 0 with a warning (other text, lists, None) or a non-finite number is left
out and counted (``ImportResult.skipped``, ``notes``): no number is invented. Message ids
(random in each Inspect run) are left out of entries and requests: a sample has the same
entry under every model, so two imported systems form an exact cell for ``certify``.

Provenance (``meta``): ``source`` (``"inspect_ai"``), ``inspect_log`` (file name),
``inspect_log_sha256``, ``inspect_version``, ``eval_id``, ``run_id``, ``task``, ``model``
(what ``estimate reliability --by model`` groups by), ``sample_id``, ``epoch``, ``limit``
(when the sample hit one), and ``model_args``, ``generate_config``, ``model_base_url``
with credentials redacted (``agentlog.scrubbing``); a value redacted there is removed
wherever else it occurs.

Imported runs can be estimated on (``agentlog estimate reliability``, ``agentlog
certify``), not replayed: no function is registered for their windows, so nothing
re-enters them, and their model calls never went through agentlog's cache. Record times
are the import's; latencies are Inspect's. A ``.eval`` log is read 512 samples at a time
(memory does not grow with its samples); a ``.json`` log is one JSON document, read whole.
A trace appears under its name only complete (it is written as ``.NAME.partial`` first);
an existing trace is replaced only with ``overwrite=True``.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal, NamedTuple

import agentlog as al
from agentlog.scrubbing import scrub_value

from ._framework import plain
from ._import_files import (
    QUEUE_BYTES,
    file_sha256,
    out_folder,
    trace_targets,
    written_whole,
)
from ._recording import require

_log = require("inspect_ai.log", "inspect")
_scorer = require("inspect_ai.scorer", "inspect")

__all__ = ["ImportResult", "InspectLoggedError", "import_logs"]

WINDOW = "inspect.sample"
LOG_SUFFIXES = (".eval", ".json")
_MANIFEST = "logs.json"  # the log-folder manifest Inspect writes beside its logs
_SCORE_WORDS = {"yes", "no", "true", "false"}
_to_float = _scorer.value_to_float()
_CACHE: dict[str | None, Literal["hit", "miss"]] = {"read": "hit", "write": "miss"}
_FIXES = "pass Inspect eval logs (.eval or .json) or folders holding them"


class InspectLoggedError(Exception):
    """An error an Inspect log records (a model call's, a tool call's, a sample's): the
    error type of the failed agentlog record, its message Inspect's."""


@dataclass(frozen=True)
class ImportResult:
    """What ``import_logs`` wrote.

    Attributes:
        files: the trace files written, one per Inspect log, in the order of the logs.
        runs: runs written, one per Inspect sample and epoch.
        samples: distinct samples (per log, by sample id) the runs cover.
        llm_calls: ``LLMCall`` records written.
        tool_calls: ``ToolCall`` records written.
        scores: ``Score`` records written.
        skipped: score values left out because they are not finite numbers.
        notes: one line per log and score name with skipped values (how many, an
            example), per log that did not finish (only its samples were imported), and
            per log whose samples gave no choice (why).
        choices: observed selections written (``choices=``).
    """

    files: tuple[Path, ...]
    runs: int
    samples: int
    llm_calls: int
    tool_calls: int
    scores: int
    skipped: int
    notes: tuple[str, ...]
    choices: int = 0


@dataclass
class _Tally:
    runs: int = 0
    samples: int = 0
    llm_calls: int = 0
    tool_calls: int = 0
    scores: int = 0
    skipped: dict[tuple[str, str], list[Any]] = field(default_factory=dict)  # [n, example]
    notes: list[str] = field(default_factory=list)
    choices: int = 0
    no_choice: dict[tuple[str, str], int] = field(default_factory=dict)  # (log, why) -> n

    def skip(self, log: str, name: str, value: Any) -> None:
        self.skipped.setdefault((log, name), [0, value])[0] += 1

    def result(self, files: list[Path]) -> ImportResult:
        skipped = [f"{log}: score {name!r}: {n} value(s) not a finite number (e.g. "
                   f"{str(example)[:40]!r}), left out" for (log, name), (n, example)
                   in self.skipped.items()]
        unchosen = [f"{log}: {n} sample(s) without a choice: {why}"
                    for (log, why), n in self.no_choice.items()]
        return ImportResult(
            files=tuple(files), runs=self.runs, samples=self.samples,
            llm_calls=self.llm_calls, tool_calls=self.tool_calls, scores=self.scores,
            skipped=sum(n for n, _ in self.skipped.values()),
            notes=(*self.notes, *skipped, *unchosen), choices=self.choices)


def import_logs(
    logs: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    progress: Callable[[int, int], None] | None = None,
    choices: Sequence[str] | None = None,
    choice_stream: str = "answer",
) -> ImportResult:
    """Write each Inspect eval log of ``logs`` as an agentlog trace into folder ``out``.

    Args:
        logs: ``.eval``/``.json`` log files, or folders (every log below them).
        out: the folder to write to (created when missing); one ``<log stem>.zst`` per log.
        overwrite: replace traces already in ``out``; without it they are refused.
        progress: called as ``progress(samples done, samples in all)`` after each sample.
        choices: the option labels of a multiple-choice eval (``["A", "B", "C", "D"]``):
            each sample's final output then also gives a ``Selection`` of stream
            ``choice_stream``: the vector over the labels read from the logprobs at the
            first position listing one (``choice_probs``), observed at the label the model
            sampled, so its draws are the posterior Gumbel noise and counterfactuals of
            the answer are paired with it. A sample whose output has no logprobs, lists
            no label, sampled a token that is not a label, or gave the sampled label no
            probability gets none; each reason is counted in ``notes``.
        choice_stream: the stream name of those selections.

    Returns:
        An ``ImportResult``: the files, runs, calls and scores written, values skipped.

    Raises:
        ValueError: a path that is missing or not an Inspect log, a folder without logs,
            two logs that would write one trace, ``out`` not a folder.
        agentlog.TracePathError: a trace to write exists and ``overwrite`` is False.
        agentlog.MissingDependencyError: inspect_ai is not installed (at import).
    """
    files = _log_files([logs] if isinstance(logs, str | os.PathLike) else list(logs))
    folder = out_folder(out)
    targets = trace_targets(files, folder, overwrite=overwrite, command="inspect")
    labels = _choice_labels(choices)
    headers = [_header(f) for f in files]  # every log checked before anything is written
    total = sum(len(h.spec.dataset.sample_ids) * h.epochs for h in headers)
    folder.mkdir(parents=True, exist_ok=True)
    tally = _Tally()
    for src, header, dst in zip(files, headers, targets, strict=True):
        # A fresh context: the imported runs never nest in a run the caller is recording.
        contextvars.Context().run(_import_log, src, header, dst, tally, total, progress,
                                  _Choices(labels, choice_stream) if labels else None)
    return tally.result(targets)


class _Choices(NamedTuple):
    labels: tuple[str, ...]
    stream: str


def _choice_labels(choices: Sequence[str] | None) -> tuple[str, ...]:
    if choices is None:
        return ()
    if isinstance(choices, str):
        raise ValueError(f"`choices` must be a list of option labels, e.g. ['A', 'B']; found "
                         f"the string {choices!r}")
    labels = tuple(str(c).strip() for c in choices)
    if len(labels) < 2 or len(set(labels)) != len(labels) or not all(labels):
        raise ValueError(f"`choices` must be at least two distinct, non-empty option labels; "
                         f"found {list(choices)!r}")
    return labels


def _log_files(paths: list[str | os.PathLike[str]]) -> list[Path]:
    if not paths:
        raise ValueError(f"no Inspect eval logs given; {_FIXES}")
    found: dict[Path, Path] = {}
    for given in map(Path, paths):
        if given.is_dir():
            below = sorted(p for p in given.rglob("*") if p.suffix in LOG_SUFFIXES
                           and p.name != _MANIFEST and p.is_file())
            if not below:
                raise ValueError(f"{given}: a folder without Inspect eval logs (no *.eval or "
                                 "*.json file below it); pass the folder Inspect wrote its "
                                 "logs to (its --log-dir, ./logs by default)")
        elif not given.exists():
            raise ValueError(f"{given}: no such file or folder; {_FIXES}")
        elif given.suffix not in LOG_SUFFIXES:
            raise ValueError(f"{given}: not an Inspect eval log: expected a .eval or .json "
                             f"file, found {given.suffix or 'a file without extension'}; "
                             f"{_FIXES}")
        else:
            below = [given]
        for p in below:
            found.setdefault(p.resolve(), p)
    return list(found.values())


_CHUNK = 512  # .eval samples read together: a few parses of the zip directory each


class _Header(NamedTuple):
    """What an import keeps of a log's header (not its per-sample reductions)."""

    spec: Any  # inspect_ai.log.EvalSpec
    status: str
    epochs: int


def _header(path: Path) -> _Header:
    try:
        header = _log.read_eval_log(str(path), header_only=True)
    except Exception as exc:  # inspect_ai's zip, JSON and validation errors, translated
        raise ValueError(f"{path}: not a readable Inspect eval log ({type(exc).__name__}: "
                         f"{str(exc)[:200]}); {_FIXES}, as inspect_ai writes them") from exc
    if header.eval.dataset.sample_ids is None:
        raise ValueError(f"{path}: the log lists no sample ids (an old inspect_ai wrote it); "
                         "read it and write it again with inspect_ai (read_eval_log, then "
                         "write_eval_log), then import it")
    return _Header(header.eval, header.status, header.eval.config.epochs or 1)


def _samples(path: Path, header: _Header) -> Iterator[Any]:
    """The samples by id, then epoch (those a log that did not finish lacks left out); a
    ``.eval`` log's ``_CHUNK`` at a time (``read_eval_log_samples`` holds the whole header,
    and ``read_eval_log_sample`` parses the zip's directory at each call: quadratic)."""
    keys = [(sample_id, epoch) for sample_id in header.spec.dataset.sample_ids
            for epoch in range(1, header.epochs + 1)]
    if path.suffix == ".json":  # one JSON document, which inspect_ai reads whole
        log = _read(path, partial(_log.read_eval_log, str(path), resolve_attachments="core"))
        held = {(str(s.id), s.epoch): s for s in log.samples or ()}
        for sample_id, epoch in keys:
            sample = held.pop((str(sample_id), epoch), None)
            if sample is not None:
                yield sample
        return
    for at in range(0, len(keys), _CHUNK):
        chunk = keys[at:at + _CHUNK]
        samples = _read(path, partial(_log.read_eval_log_samples_by_id, str(path), chunk,
                                      concurrency=1, resolve_attachments="core"))
        if samples is None:  # a sample of the chunk is missing: read them one by one
            samples = [_read(path, partial(_log.read_eval_log_sample, str(path), id=i,
                                           epoch=e, resolve_attachments="core"))
                       for i, e in chunk]
        yield from (s for s in samples if s is not None)
        del samples


def _read(path: Path, read: Callable[[], Any]) -> Any:
    """``read()``; None for a sample the log lacks (IndexError), a ValueError naming the
    log for anything else inspect_ai raises."""
    try:
        return read()
    except IndexError:
        return None
    except Exception as exc:
        raise ValueError(f"{path}: a sample cannot be read ({type(exc).__name__}: "
                         f"{str(exc)[:200]}); check that the log is complete") from exc


def _import_log(src: Path, header: _Header, dst: Path, tally: _Tally, total: int,
                progress: Callable[[int, int], None] | None,
                choices: _Choices | None) -> None:
    spec = header.spec
    if header.status != "success":
        tally.notes.append(f"{src.name}: the eval's status is {header.status!r}: imported "
                           "the samples it holds")
    known: set[str] = set()  # secret values the scrubber found by name: removed everywhere
    provenance = {
        "source": "inspect_ai", "inspect_log": src.name, "inspect_log_sha256": file_sha256(src),
        "inspect_version": spec.packages.get("inspect_ai"), "eval_id": spec.eval_id,
        "run_id": spec.run_id, "task": spec.task, "model": spec.model,
        "model_args": scrub_value(plain(spec.model_args), known),
        "generate_config": scrub_value(_json(spec.model_generate_config), known),
        "model_base_url": scrub_value(spec.model_base_url, known),
    }
    redact = partial(scrub_value, known=known) if known else None
    last_id: Any = object()
    with written_whole(dst) as partial_path:
        for sample in _samples(src, header):
            meta = {**provenance, "sample_id": sample.id, "epoch": sample.epoch}
            if sample.limit is not None:
                meta["limit"] = sample.limit.type
            with al.record(partial_path, system=f"{spec.task}/{spec.model}",
                           task=str(sample.id), seed=sample.epoch, mode="a", meta=meta,
                           redact=redact, max_queue_bytes=QUEUE_BYTES):
                _import_sample(sample, spec.model, src.name, tally, choices)
            tally.runs += 1
            if sample.id != last_id:  # ids come in order, each with all its epochs
                tally.samples += 1
                last_id = sample.id
            if progress is not None:
                progress(tally.runs, total)


def _import_sample(sample: Any, model: str, log: str, tally: _Tally,
                   choices: _Choices | None) -> None:
    window = al.open_window(WINDOW, entry={"input": _input(sample.input),
                                           "target": _json(sample.target)})
    chosen = choices is None

    def close() -> None:
        nonlocal chosen
        if not chosen:  # the answer is the solver's decision: inside its window
            chosen = True
            assert choices is not None
            _choice(sample.output, choices, log, tally)
        _close(window, sample)

    for event in sample.events:
        if event.event == "span_begin" and event.type == "scorers":
            close()
        elif event.event == "model" and not event.pending:
            _model_call(event)
            tally.llm_calls += 1
        elif event.event == "tool" and not event.pending:
            _tool_call(event)
            tally.tool_calls += 1
    if not sample.events and sample.output.choices:  # a log written without its events
        _llm_call(model, {"input": _input(sample.input)}, sample.output, None)
        tally.llm_calls += 1
    close()  # once: a no-op when the scoring phase closed it
    for name, score in (sample.scores or {}).items():
        values = score.value.items() if isinstance(score.value, dict) else [(None, score.value)]
        for key, value in values:
            scored = name if key is None else f"{name}/{key}"
            number = _number(value)
            if number is None:
                tally.skip(log, scored, value)
            else:
                al.score(scored, number, channel=name)
                tally.scores += 1


def _choice(output: Any, choices: _Choices, log: str, tally: _Tally) -> None:
    """The observed answer of a multiple-choice sample as a posterior ``Selection``."""
    from ._choice import choice_probs_from_positions

    def skip(why: str) -> None:
        tally.no_choice[log, why] = tally.no_choice.get((log, why), 0) + 1

    first = output.choices[0] if output is not None and output.choices else None
    content = first.logprobs.content if first is not None and first.logprobs else None
    if not content:
        skip("its output has no logprobs (generate with logprobs=True, top_logprobs=N)")
        return
    positions = [[(t.token, t.logprob) for t in (lp.top_logprobs or [])]
                 or [(lp.token, lp.logprob)] for lp in content]
    try:
        cp = choice_probs_from_positions(positions, [lp.token for lp in content],
                                         choices.labels, source="inspect_ai.logprobs")
    except al.NoLogprobsError:
        skip(f"no output position lists one of the labels {list(choices.labels)}")
        return
    token = cp.token.strip() if isinstance(cp.token, str) else cp.token
    if token not in choices.labels:
        skip("the sampled token at the answer position is not one of the labels")
        return
    observed = choices.labels.index(token)
    if not cp.probs[observed] > 0:
        skip("the sampled label has no probability in the listed logprobs")
        return
    al.select(cp.probs, candidates=list(choices.labels), name=choices.stream, owner="model",
              observed=observed)
    tally.choices += 1


def _close(window: al.WindowHandle, sample: Any) -> None:
    if sample.error is not None:
        window.fail(InspectLoggedError(sample.error.message))
    else:
        window.close(exit=sample.output.completion)


def _number(value: Any) -> float | None:
    """``value_to_float()`` of a value it converts; None where it would give 0 for a value
    it cannot read (with a warning), and for NaN and infinities."""
    readable = isinstance(value, bool | int | float) or (isinstance(value, str) and (
        value in (_scorer.CORRECT, _scorer.INCORRECT, _scorer.PARTIAL, _scorer.NOANSWER)
        or value.lower() in _SCORE_WORDS or _finite_text(value)))
    if not readable:
        return None
    try:
        number = float(_to_float(value))
    except OverflowError:  # an int too large for a float
        return None
    return number if math.isfinite(number) else None


def _finite_text(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _json(value: Any) -> Any:
    """An Inspect value as plain JSON data: pydantic models by their set fields."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    return plain(value)


def _input(messages: Any) -> Any:
    """Messages without their ids, which Inspect draws at random in every run."""
    if isinstance(messages, str):
        return messages
    return [m.model_dump(mode="json", exclude_none=True, exclude={"id"}) for m in messages]


def _model_call(event: Any) -> None:
    request = {**_json(event.config), "messages": _input(event.input),
               "tools": _json(event.tools), "tool_choice": _json(event.tool_choice)}
    _llm_call(event.model, request, event.output, event.working_time,
              error=None if event.error is None else InspectLoggedError(event.error),
              cache=_CACHE.get(event.cache))


def _llm_call(name: str, request: dict[str, Any], output: Any, seconds: float | None, *,
              error: BaseException | None = None,
              cache: Literal["hit", "miss"] | None = None) -> None:
    """One ``LLMCall`` of Inspect's ``provider/model`` answering ``request`` with ``output``."""
    provider, _, model = name.partition("/")
    usage = output.usage
    if output.time is not None:
        seconds = output.time
    al.llm_call(
        provider if model else "inspect", model or name, request=request,
        response=_json(output), input_tokens=usage.input_tokens if usage else 0,
        output_tokens=usage.output_tokens if usage else 0,
        latency_ns=int((seconds or 0.0) * 1e9), error=error,
        response_model=output.model or None,
        finish_reasons=[c.stop_reason for c in output.choices], cache=cache)


def _tool_call(event: Any) -> None:
    def call() -> Any:
        if event.error is not None:
            raise InspectLoggedError(f"{event.error.type}: {event.error.message}")
        return _json(event.result)

    with contextlib.suppress(InspectLoggedError):  # recorded as the call's error
        al.tool_call(event.function, dict(event.arguments), call)
