"""The inline executor: each job evaluated in the caller's process, one at a time (the
candidate itself still runs in the harness's checker process, with its timeout)."""

from __future__ import annotations

from concurrent.futures import Future

from agent.execute.base import Executor, Job, run_job
from agent.execute.failed import failed_record
from agent.pipeline import Record


class InlineExecutor(Executor):
    name = "inline"

    def submit(self, job: Job) -> Future[Record]:
        future: Future[Record] = Future()
        try:
            future.set_result(run_job(job))
        except Exception as err:  # noqa: BLE001 - a job's failure is its Record
            future.set_result(failed_record(job, "executor.failed", f"{type(err).__name__}: {err}"))
        return future
