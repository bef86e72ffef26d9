"""Tasks of the traversal experiments on Dask: a local cluster of one-thread worker processes on
loopback by default, or a running scheduler (``--scheduler ADDRESS``) whose workers have
``gpurtl`` installed. Each finished task's result is handed to the caller as it arrives, so an
interrupted run keeps what finished (the callers store it; ``--resume`` skips it)."""

import signal
import time

__all__ = ["dask_setup", "run_tasks"]


def dask_setup(worker):
    """Run in each local-cluster worker process as it starts (Dask's preload hook): ignore
    SIGINT, which the terminal sends to the whole process group; the run closes the cluster."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_tasks(task, todo, args, keep, *, scheduler=None, workers=1, what="tasks"):
    """Run ``task(*args(item))`` for every item of ``todo`` on Dask and call ``keep(result)``
    in this process as each one finishes. ``scheduler``: a scheduler's address (default a
    local cluster of ``workers`` processes). A scheduler that cannot be reached is a
    :class:`~gpurtl.sim.core.files.UsageError`; lost tasks (a killed worker) end the run with
    :class:`~gpurtl.sim.experiments.ExperimentFailed` once the others are kept."""
    from dask.distributed import Client, LocalCluster, as_completed
    from distributed.client import FutureCancelledError
    from distributed.scheduler import KilledWorker

    from ...core.files import UsageError
    from .. import ExperimentFailed

    cluster = client = None
    try:
        if scheduler:
            try:
                client = Client(scheduler, timeout="30s")
            except (OSError, TimeoutError) as error:
                raise UsageError(f"cannot reach the Dask scheduler {scheduler}: {error}") from None
        else:
            cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=":0",
                silence_logs=40,
                preload=[__name__],
            )
            client = Client(cluster)
        stamp = time.time_ns()
        futures = [
            client.submit(task, *args(item), key=f"gpurtl-{task.__name__}-{k}-{stamp}")
            for k, item in enumerate(todo)
        ]
        lost = []
        for future in as_completed(futures):
            try:
                keep(future.result())
            except (KilledWorker, FutureCancelledError) as error:
                lost.append(f"{type(error).__name__}: {error}")
        if lost:
            raise ExperimentFailed(
                f"{len(lost)} {what} lost ({lost[0]}); the finished ones are stored: run again "
                "with --resume"
            )
    finally:
        if client is not None:
            client.close(timeout=10)
        if cluster is not None:
            cluster.close(timeout=10)
