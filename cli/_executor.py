"""``--executor local|ray`` and ``--ray-address`` of ``certify``, ``estimate reliability``,
``estimate cess`` and ``estimate asv``.

``--executor ray`` runs the per-run stage of a Parquet dataset on Ray Data and the bootstrap
or calibration draws as Ray tasks (``agentlog.estimators.use_ray``); the results are the
local executor's, bit for bit. The runtime is the cluster of ``--ray-address``, else of
``RAY_ADDRESS``, else a local one started for the command and shut down after it.
"""

from __future__ import annotations

import contextlib
import enum
import sys
from collections.abc import Iterator
from typing import Annotated, Any

import typer

import agentlog as al

from ._output import BadInput


class Executor(enum.StrEnum):
    local = "local"
    ray = "ray"


def executor_option(work: str) -> Any:
    """``--executor``: where ``work`` runs."""
    return typer.Option(
        "--executor", help=f"Where {work} run: local (this process) or ray (a Ray cluster: "
        "--ray-address, else RAY_ADDRESS, else a local one for this command; needs "
        "pip install 'agentlog\\[ray]'). Same results.")


RayAddress = Annotated[str | None, typer.Option(
    "--ray-address", help="The Ray cluster of --executor ray (ray://HOST:10001, or auto / "
    "HOST:6379 from a node of a cluster started with `ray start --head`); default: "
    "RAY_ADDRESS, else a local cluster started and stopped for this command.",
    show_default=False)]


def ray_output_to_stderr(executor: str) -> contextlib.AbstractContextManager[Any]:
    """Under Ray, stdout goes to stderr for the block: Ray's driver prints its cluster's
    messages ("(raylet) WARNING: …") to stdout whatever log_to_driver says, and stdout
    holds the command's output (its --json) alone."""
    if executor == "ray":
        return contextlib.redirect_stdout(sys.stderr)
    return contextlib.nullcontext()


def needs_dataset(executor: Executor, dataset: object | None) -> None:
    """``--executor ray`` of a command whose only Ray work is a dataset's per-run stage
    (``estimate cess``, ``estimate asv``) with trace files (``dataset`` None) is
    ``BadInput``."""
    if dataset is None and executor == Executor.ray:
        raise BadInput("--executor ray runs the per-run stage of a Parquet dataset "
                       "(agentlog export --format parquet); pass the dataset folder, "
                       "or leave --executor out for trace files")


@contextlib.contextmanager
def executing(executor: Executor, ray_address: str | None) -> Iterator[str]:
    """The executor's name for the estimators, inside the Ray runtime it needs; a missing
    Ray, or a ``--ray-address`` without ``--executor ray``, is ``BadInput``."""
    if executor != Executor.ray:
        if ray_address is not None:
            raise BadInput("--ray-address names the cluster of --executor ray; pass "
                           "--executor ray too, or leave --ray-address out")
        yield "local"
        return
    from agentlog.estimators import use_ray

    with contextlib.ExitStack() as stack:
        # The command's output is printed after this block, once a runtime started here
        # is down.
        stack.enter_context(ray_output_to_stderr("ray"))
        try:
            stack.enter_context(use_ray(ray_address))
        except (al.MissingDependencyError, ValueError) as exc:
            raise BadInput(f"--executor ray: {exc}") from exc
        except ConnectionError as exc:
            raise BadInput(f"--executor ray: cannot join the Ray cluster "
                           f"{ray_address or 'of RAY_ADDRESS'} ({exc}); start it (ray start "
                           "--head) or pass another --ray-address") from exc
        yield "ray"
