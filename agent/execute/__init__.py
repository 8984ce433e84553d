"""Executors: `submit(job) -> Future[Record]`. `inline` evaluates in the caller's process,
`pool` each evaluation in a process of its own with a timeout (N at a time), `ray` each as a
task on a Ray cluster (an existing one, or a local one it starts), a GPU job holding a GPU. All
three run the one pipeline (`agent.pipeline.evaluate`) on the same job and give the same
Records."""

from agent.execute.base import CPU_BACKENDS, EXECUTORS, Executor, Job, make_executor

__all__ = ["CPU_BACKENDS", "EXECUTORS", "Executor", "Job", "make_executor"]
