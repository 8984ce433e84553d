"""A job is plain data (the candidate's text, where its task lives, the backend and preset,
the correctness seeds, the harness's options): it crosses to another process or machine as
JSON, and `run_job` turns it into a Record there. The executors (`inline`, `pool`, `ray`) differ
only in where `run_job` runs."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from typing import Any

from agent.pipeline import Candidate, Record, evaluate
from agent.tasks import load_task

EXECUTORS = ("inline", "pool", "ray")
# The backends that run without a GPU; a job for any other one holds a GPU while it runs (on Ray,
# a task asking for one: timings one at a time per GPU).
CPU_BACKENDS = ("mtia-sim", "interp", "triton-interp")


@dataclass(frozen=True)
class Job:
    key: str
    text: str
    task: str  # the task's folder
    backend: str
    preset: str = "test"
    target: str | None = None
    params: tuple[tuple[str, int], ...] = ()
    seeds: tuple[int, ...] | None = None
    harness: Mapping[str, Any] = field(default_factory=dict)
    timeout: float = 600.0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["params"] = dict(self.params)
        data["seeds"] = None if self.seeds is None else list(self.seeds)
        data["harness"] = dict(self.harness)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Job:
        values = dict(data)
        values["params"] = tuple(sorted(dict(values.get("params") or {}).items()))
        seeds = values.get("seeds")
        values["seeds"] = None if seeds is None else tuple(int(s) for s in seeds)
        return cls(**values)


# On a GPU shared by several checks (a search's pool, searches side by side), an allocation can
# fail because of the others: the reference's (`harness.device-memory`) or the candidate's copies
# (`harness.out-of-memory`). Such an evaluation is run again, after a wait, before it counts as
# the candidate's failure; a candidate that needs more than the device has fails every time.
TRANSIENT = frozenset({"harness.device-memory", "harness.out-of-memory"})
RETRIES = 2
RETRY_WAIT_S = 10.0


def run_job(job: Job, wait: Callable[[float], None] = time.sleep) -> Record:
    """The job through the one pipeline, up to the run (the harness's checker process, with
    the job's timeout, runs the candidate); on a GPU, again after a failure the shared device
    caused (`TRANSIENT`), at most `RETRIES` times."""
    attempt = 0
    while True:
        record = evaluate(
            Candidate(job.text, job.params, f"<{job.key[:12]}>"),
            until="run",
            backend=job.backend,
            target=job.target,
            task=load_task(job.task),
            preset=job.preset,
            seeds=None if job.seeds is None else list(job.seeds),
            timeout=job.timeout,
            harness=dict(job.harness),
        )
        if record.candidate != job.key:  # the job's text is the candidate it names
            raise ValueError(f"job {job.key[:12]} holds candidate {record.candidate[:12]}")
        transient = not record.ok and any(d.rule in TRANSIENT for d in record.errors)
        if not transient or job.backend in CPU_BACKENDS or attempt == RETRIES:
            return record
        attempt += 1
        wait(RETRY_WAIT_S * attempt)


class Executor(ABC):
    name: str

    @abstractmethod
    def submit(self, job: Job) -> Future[Record]:
        """Start the job; its future gives its Record, never an exception of the candidate's
        (a hang or a crash is a Record that says so)."""

    def map(self, jobs: list[Job]) -> list[Record]:
        """The jobs' Records, in the jobs' order."""
        futures = [self.submit(j) for j in jobs]
        return [f.result() for f in futures]

    def close(self) -> None:  # noqa: B027 - inline holds nothing
        pass

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
