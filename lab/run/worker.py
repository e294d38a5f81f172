"""The worker process side: a fresh interpreter that serves profile runs, one at a time.

It starts as ``python -c WORKER_CODE`` (see ``lab.pool.spawn`` for why not multiprocessing),
finds its end of the socketpair in ``PROFILER_LAB_WORKER_FD``, reads ``InitWorker``, imports
torch (through ``lab.run.runner``), warms up, says ``Ready(info=DeviceInfo)``, and then answers
each ``Task`` (its job a ``RunConfig``) with ``Progress`` stages and one ``Done`` (the
``RunResult``) or ``Failure``. Any other message, or the server's end closing, ends it.
"""

from __future__ import annotations

import dataclasses
import importlib
import os

from lab.core.config import ConfigError
from lab.core.devices import DeviceInfo
from lab.pool import ChildPipe, Done, Failure, Progress, Ready, Task, child_entry
from lab.run.estimate import check_estimate
from lab.run.protocol import FailureKind, InitWorker

__all__ = ["WORKER_CODE", "WORKER_FD_ENV", "cpu_worker_threads"]

# How a worker interpreter starts, and where it finds its end of the socketpair.
WORKER_CODE = "from lab.run.worker import _worker_entry; _worker_entry()"
WORKER_FD_ENV = "PROFILER_LAB_WORKER_FD"


def _worker_entry() -> None:
    """Entry point of a worker interpreter (see ``WORKER_CODE``): read the init message, serve."""
    # CUDA_VISIBLE_DEVICES and KINETO_LOG_LEVEL came in the environment, set before this
    # interpreter started, so torch (imported later, by lab.run.runner) sees only the pinned GPU.
    child_entry(WORKER_FD_ENV, _worker_main)


def cpu_worker_threads(cpu_count: int | None) -> int:
    """Intra-op threads for a CPU worker: every core but one, which the server keeps.

    With as many OpenMP threads as cores, one thread descheduled by the server (or a browser on
    the same box) stalls the others at the GEMM's barrier: on 2 busy cores a 64³ matmul was
    seen taking 40–90 ms instead of ~20 µs. One core fewer keeps runs steady and the page live.
    """
    return max(1, (cpu_count or 1) - 1)


def _leave_a_core_to_the_server() -> None:
    import torch

    torch.set_num_threads(cpu_worker_threads(os.cpu_count()))


def _worker_main(conn, init: InitWorker) -> None:
    """Warm up, then serve runs until told to stop or the server goes away."""
    pipe = ChildPipe(conn)
    try:
        runner = importlib.import_module("lab.run.runner")  # imports torch
        from lab.core.result import RunError
    except BaseException as error:  # noqa: BLE001 - report, then exit: nothing can run
        pipe.send(Ready(info=None, error=f"{type(error).__name__}: {error}", pid=os.getpid()))
        return
    if init.device == "cpu":
        _leave_a_core_to_the_server()
    info = None
    try:
        info = runner.warm_up("cpu" if init.device == "cpu" else "cuda", settings=init.settings)
        pipe.send(Ready(info=_physical(info, init.physical_index), pid=os.getpid()))
    except Exception as error:  # noqa: BLE001 - keep serving; each run reports its own error
        pipe.send(Ready(info=None, error=f"warm-up failed: {type(error).__name__}: {error}", pid=os.getpid()))
    while isinstance(message := pipe.recv(), Task):
        if not _serve_one(pipe, runner, init, message, expected=(ConfigError, RunError), info=info):
            return


def _serve_one(pipe: ChildPipe, runner, init: InitWorker, task: Task, *, expected,
               info: DeviceInfo | None) -> bool:
    """Run one request and send its outcome; False when this worker must exit.

    ``expected`` are the refusals and run failures after which the worker stays healthy;
    ``info`` is the warm-up's measurement, for the run-time limit (None: not measured).
    """
    run_id, config = task.ticket_id, task.job

    def on_stage(stage: str) -> None:
        pipe.send(Progress(ticket_id=run_id, stage=stage))

    try:
        # Also checked by the page and the queue; here too, as only the worker surely has rates.
        check_estimate(config, info, init.settings)
        result = runner.run_profile(config, settings=init.settings, on_stage=on_stage)
    except expected as error:
        kind = FailureKind.CONFIG if isinstance(error, ConfigError) else FailureKind.RUN
        pipe.send(Failure(ticket_id=run_id, kind=kind, error_type=type(error).__name__, message=str(error)))
        return True
    except Exception as error:  # noqa: BLE001
        # An unexpected failure may leave the profiler running or CUDA in a bad state;
        # report it and exit so the server starts a clean worker.
        name = type(error).__name__
        pipe.send(Failure(ticket_id=run_id, kind=FailureKind.RUN, error_type=name, message=f"{name}: {error}",
                          fatal=True))
        return False
    try:
        pipe.conn.send(Done(ticket_id=run_id, value=dataclasses.replace(
            result, device=_physical(result.device, init.physical_index))))
    except OSError:
        return False
    except Exception as error:  # noqa: BLE001 - e.g. an unpicklable field
        name = type(error).__name__
        pipe.send(Failure(ticket_id=run_id, kind=FailureKind.RUN, error_type=name,
                          message=f"the result could not be sent back ({name}: {error})"))
    return True


def _physical(info: DeviceInfo | None, physical_index: int) -> DeviceInfo | None:
    # Inside the worker the pinned GPU is cuda:0; the page shows the real index.
    if info is not None and info.kind == "cuda":
        return dataclasses.replace(info, index=physical_index)
    return info
