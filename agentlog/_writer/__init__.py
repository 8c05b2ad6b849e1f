"""Writing trace files: one concept, one folder.

* ``writer``: ``TraceWriter``, the queue a caller puts records into and the frames a pool
  thread cuts, compresses, hashes and writes;
* ``seal``: the receipt chain and run digests, advanced on the writer thread in file order;
* ``frames``: cutting, encoding and writing frames (the writer thread's side);
* ``queue``: the queues a writer holds its records in (normal, holding, dropping);
* ``pool``: the pool threads that service every open writer, and what happens at exit,
  on SIGTERM and after a fork;
* ``shared``: one writer per file in a process, shared by its runs, and kept between them;
* ``file``: opening a trace file for writing (regular files only, one writing process,
  ``mode="x" | "a" | "w"``, a torn tail cut off).
"""

from agentlog._writer.writer import (
    CLOSE_TIMEOUT,
    DURABILITY_RANK,
    FLUSH_TIMEOUT,
    MAX_QUEUE_BYTES,
    TraceWriter,
)

__all__ = ["CLOSE_TIMEOUT", "DURABILITY_RANK", "FLUSH_TIMEOUT", "MAX_QUEUE_BYTES", "TraceWriter"]
