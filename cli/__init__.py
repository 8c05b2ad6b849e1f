"""The ``agentlog`` command line (installed as ``agentlog.cli``).

Example::

    $ agentlog demo                      # record the bundled agent, offline
    $ agentlog inspect agentlog-demo/deep-research_q0_agent_s0.zst
    $ agentlog verify agentlog-demo/     # exit 0 ok, 1 problems, 2 bad input

``main()`` is the console script; ``app`` is the typer application.
"""

from ._app import app, main

__all__ = ["app", "main"]
