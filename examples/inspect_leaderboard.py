"""A leaderboard evaluated with Inspect AI, certified by agentlog.

``write_logs(folder)`` runs a small arithmetic task (30 samples, 2 epochs) under three
mockllm models that answer correctly at different rates (no API key, no network), with
Inspect's own ``eval``, which writes one ``.eval`` log per model into ``folder``. Then::

    $ python -m agentlog.examples.inspect_leaderboard logs/
    $ agentlog import inspect logs/ --out traces/
    $ agentlog certify traces/ --plan examples/plans/inspect_arith.toml

gives the board: each model's accuracy and certified rank interval, each pair certified,
equivalent or undecided. The comparison window is the imported ``inspect.sample``: every
model entered the same samples, so each pair is an exact cell.
"""

from __future__ import annotations

import sys
from typing import Any

N_SAMPLES = 30
EPOCHS = 2
# model -> how its answer goes wrong: the sample numbers whose key falls under it
WRONG_BELOW = {"mockllm/strong": 1, "mockllm/medium": 3, "mockllm/weak": 6}


def _key(a: int, b: int) -> int:
    return (a * 7 + b * 3) % 10


def write_logs(folder: str) -> None:
    """Evaluate the three models on the task with ``inspect_ai.eval``; logs in ``folder``."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    samples = [Sample(input=f"What is {a} + {b}? Answer with the number.", target=str(a + b),
                      id=f"q{a:02d}-{b:02d}")
               for a, b in ((i, (i * 13) % 17) for i in range(N_SAMPLES))]

    def answers(wrong_below: int) -> Any:
        def reply(input: Any, tools: Any, tool_choice: Any, config: Any) -> Any:
            text = input[-1].text
            a, b = (int(w.rstrip("?")) for w in text.split()[2:5:2])
            answer = a + b + (1 if _key(a, b) < wrong_below else 0)
            out = ModelOutput.from_content("mockllm", str(answer))
            # Usage given, so Inspect counts no tokens itself (its tokenizer would download
            # an encoding).
            out.usage = ModelUsage(input_tokens=len(text.split()), output_tokens=1,
                                   total_tokens=len(text.split()) + 1)
            return out
        return reply

    task = Task(name="arith", dataset=samples, solver=[generate()], scorer=match())
    models = [get_model(name, custom_outputs=answers(k)) for name, k in WRONG_BELOW.items()]
    inspect_eval(task, model=models, epochs=EPOCHS, display="none", log_dir=folder)


if __name__ == "__main__":
    write_logs(sys.argv[1] if len(sys.argv) > 1 else "logs")
