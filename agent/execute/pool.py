"""The pool executor: every job in a process of its own (`python -m agent.execute.job`), at
most `workers` at a time. The job goes in on stdin as JSON; the Record comes back on a pipe
the child is handed by number, never on its stdout (what the candidate prints cannot forge
it). A child that outlives the job's timeout (plus a margin for the static stages) is killed
with its whole process group, and a child that dies without a Record becomes a Record that
says so: neither is retried, and the next job gets a new process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from agent.execute.base import Executor, Job
from agent.execute.failed import failed_record
from agent.pipeline import Record

ROOT = Path(__file__).resolve().parents[2]
MARGIN_S = 120.0  # parse, verify and cost before the harness's own timeout starts


class PoolExecutor(Executor):
    name = "pool"

    def __init__(self, workers: int = 2, margin: float = MARGIN_S) -> None:
        self.workers = max(1, workers)
        self.margin = margin
        self._threads = ThreadPoolExecutor(self.workers, thread_name_prefix="kir-pool")

    def submit(self, job: Job) -> Future[Record]:
        return self._threads.submit(self._run, job)

    def _run(self, job: Job) -> Record:
        read, write = os.pipe()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "agent.execute.job", "--record-fd", str(write)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(write,),
                env=env, start_new_session=True,  # its own group: a kill takes the harness's children too
            )  # fmt: skip
        finally:
            os.close(write)
        with os.fdopen(read, "rb") as records:
            try:
                _, err = proc.communicate(json.dumps(job.to_json()).encode(), timeout=job.timeout + self.margin)
            except subprocess.TimeoutExpired:
                _kill(proc)
                return failed_record(
                    job, "executor.timeout", f"the evaluation did not end within {job.timeout + self.margin:.0f} s"
                )
            data = records.read()
        if proc.returncode != 0 or not data:
            tail = err.decode(errors="replace")[-500:]
            return failed_record(
                job, "executor.crashed", f"the evaluation's process ended with status {proc.returncode}: {tail}"
            )
        try:
            return Record.from_json(json.loads(data))
        except (ValueError, KeyError, TypeError) as bad:
            return failed_record(job, "executor.crashed", f"the evaluation's process sent no Record: {bad}")

    def close(self) -> None:
        self._threads.shutdown(wait=True)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
