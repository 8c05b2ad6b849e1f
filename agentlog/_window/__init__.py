"""Comparison windows: one concept, one folder.

* ``decorator``: ``@al.window``, wrapping sync and async functions, generators and async
  generators around one open/close path;
* ``call``: that path (``_open``/``_close``): the sealed entry, the exit, the span, the
  resource counters;
* ``registry``: decorated window functions by ``module:qualname``, for re-entry.
"""

from agentlog._window.decorator import window

__all__ = ["window"]
