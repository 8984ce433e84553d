"""Executors: `submit(job) -> Future[Record]`. `inline` evaluates in the caller's process,
`pool` each evaluation in a process of its own with a timeout (N at a time). Both run the one
pipeline (`agent.pipeline.evaluate`) on the same job and give the same Records."""

from agent.execute.base import EXECUTORS, Executor, Job, make_executor

__all__ = ["EXECUTORS", "Executor", "Job", "make_executor"]
