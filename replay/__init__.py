"""Replay of recorded runs: channel replay, paired interventions, frozen/branch/rerun modes.

Not implemented yet (see the project's issues). The seams it will use exist in the core:
``agentlog.decode_arguments`` re-invokes a window from its sealed entry, and
``agentlog._steering.steering`` steers ``select``/``proceed`` through a context variable.
"""

__all__: list[str] = []
