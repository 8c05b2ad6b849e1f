"""Child process for tests/core/test_crash_agent.py: an agent recording through the public API.

Usage: ``python _crash_agent.py OUT SEED``. Records windows with selections, continuations
and scores in a loop, calls ``al.flush()`` now and then and prints how many windows had
exited before that flush. The parent kills it with SIGKILL.
"""

from __future__ import annotations

import random
import sys
import time

import numpy as np

import agentlog as al

IDS = [f"doc-{i}" for i in range(40)]


@al.window("step")
def step(i: int, probs: np.ndarray) -> int:
    choice = al.select(probs, candidates=IDS, name="doc")
    al.proceed(0.5, name="stop")
    al.score("value", float(i))
    return choice


def main(out: str, seed: int) -> None:
    rng = random.Random(seed)
    probs = np.random.default_rng(seed).dirichlet(np.ones(len(IDS)))
    with al.record(out, system="crash", seed=seed, frame_interval=0.01):
        i = 0
        while True:
            step(i, probs)
            i += 1
            if rng.random() < 0.02:
                al.flush()
                print(i, flush=True)
            if rng.random() < 0.01:
                time.sleep(rng.random() * 0.003)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
