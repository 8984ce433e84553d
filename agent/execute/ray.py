"""The Ray executor: every job a Ray task, on an existing cluster (`address`, or Ray's own
RAY_ADDRESS) or on a local one started here (`workers` CPUs) and shut down on close. The job
crosses as JSON and its Record comes back as JSON, so a worker needs only KIR installed, not
the caller's objects.

A job for a GPU backend asks for a GPU (`gpus_per_job`, one by default): Ray runs one such task
at a time per GPU, so timings never share a device; a CPU-only job (the simulator, the
interpreters) asks for one CPU. As in the pool, nothing is retried: a task that raises or
whose worker dies is a Record saying so (executor.crashed), and a task that outlives the job's
timeout plus the margin is cancelled with its worker killed (executor.timeout). The timeout
counts from the task's submission, and a job is submitted only when a slot of its kind (CPU or
GPU) is free, so time spent queueing behind other jobs of this executor is not counted."""

from __future__ import annotations

import logging
import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import ray

from agent.execute.base import CPU_BACKENDS, Executor, Job
from agent.execute.failed import failed_record
from agent.execute.pool import MARGIN_S
from agent.pipeline import Record

CANCEL_GRACE_S = 10.0  # for the harness to stop its checker after the task is interrupted


@ray.remote(max_retries=0)
def _evaluate(job_json: dict[str, Any]) -> dict[str, Any]:
    """One job in a Ray worker: its Record's JSON (an exception of the evaluation is a Record too,
    as in the pool's job process)."""
    from agent.execute.base import run_job

    job = Job.from_json(job_json)
    try:
        record = run_job(job)
    except Exception as err:  # noqa: BLE001 - the job's failure is its Record
        record = failed_record(job, "executor.failed", f"{type(err).__name__}: {err}")
    return record.to_json()


class RayExecutor(Executor):
    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        workers: int | None = None,
        gpus_per_job: float | None = None,
        margin: float = MARGIN_S,
    ) -> None:
        self.margin = margin
        self.gpus_per_job = 1.0 if gpus_per_job is None else gpus_per_job
        address = address or os.environ.get("RAY_ADDRESS")
        self._started = False
        if not ray.is_initialized():
            if address:
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            else:
                # a cluster of our own: nothing to report to Ray's usage statistics server
                os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
                ray.init(
                    address="local", num_cpus=workers, include_dashboard=False, log_to_driver=False,
                    logging_level=logging.WARNING, ignore_reinit_error=True,
                )  # fmt: skip
                self._started = True
        resources = ray.cluster_resources()
        cpus = max(1, int(resources.get("CPU", 1)))
        gpus = int(resources.get("GPU", 0) / self.gpus_per_job) if self.gpus_per_job > 0 else 0
        self.cpu_slots = max(1, min(cpus, workers)) if workers else cpus
        self.gpu_slots = gpus
        # one waiting thread per job in flight: at most as many jobs of a kind as its slots
        self._cpu = ThreadPoolExecutor(self.cpu_slots, thread_name_prefix="kir-ray-cpu")
        self._gpu = ThreadPoolExecutor(max(1, self.gpu_slots), thread_name_prefix="kir-ray-gpu")

    def submit(self, job: Job) -> Future[Record]:
        job = replace(job, task=str(Path(job.task).resolve()))  # a worker's directory is not ours
        if job.backend in CPU_BACKENDS:
            return self._cpu.submit(self._run, job, {"num_cpus": 1})
        if not self.gpu_slots:  # Ray would hold the task forever as infeasible
            future: Future[Record] = Future()
            hint = f"run on a cluster with GPUs, or on a CPU backend ({', '.join(CPU_BACKENDS)})"
            message = f"the Ray cluster has no GPU for a {job.backend} job"
            future.set_result(failed_record(job, "executor.failed", message, hint))
            return future
        return self._gpu.submit(self._run, job, {"num_cpus": 1, "num_gpus": self.gpus_per_job})

    def _run(self, job: Job, resources: dict[str, float]) -> Record:
        limit = job.timeout + self.margin
        ref = _evaluate.options(**resources).remote(job.to_json())
        done, _ = ray.wait([ref], timeout=limit)
        if not done:
            _cancel(ref)
            return failed_record(job, "executor.timeout", f"the evaluation did not end within {limit:.0f} s")
        try:
            data = ray.get(ref)
        except ray.exceptions.RayError as err:  # the task raised, its worker or node died, ...
            return failed_record(job, "executor.crashed", f"the Ray task failed: {_summary(err)}")
        try:
            return Record.from_json(data)
        except (ValueError, KeyError, TypeError) as bad:
            return failed_record(job, "executor.crashed", f"the Ray task sent no Record: {bad}")

    def close(self) -> None:
        self._cpu.shutdown(wait=True)
        self._gpu.shutdown(wait=True)
        if self._started:
            ray.shutdown()
            self._started = False


def _cancel(ref: ray.ObjectRef) -> None:
    """A KeyboardInterrupt in the task first: it unwinds through the harness, whose `finally`
    kills the checker's whole session (a worker killed outright would leave the checker, in a
    session of its own, running). Then the worker is killed if the task is still there; Ray
    starts a new one for the next job."""
    ray.cancel(ref)
    done, _ = ray.wait([ref], timeout=CANCEL_GRACE_S)
    if not done:
        ray.cancel(ref, force=True)


def _summary(err: BaseException) -> str:
    """The error's kind and its last line (a RayTaskError's text is the remote traceback)."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[-1] if lines else ''}"[:500]


__all__ = ["RayExecutor"]
