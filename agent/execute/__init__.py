"""Executors: `submit(job) -> Future[Record]`. `inline` evaluates in the caller's process,
`pool` each evaluation in a process of its own with a timeout (N at a time), `ray` each as a
task on a Ray cluster (an existing one, or a local one it starts), a GPU job holding a GPU. All
three run the one pipeline (`agent.pipeline.evaluate`) on the same job and give the same
Records. `make_executor` imports the one asked for (Ray only when asked: `import ray` costs
every other command nothing)."""

from typing import Any

from agent.execute.base import CPU_BACKENDS, EXECUTORS, Executor, Job


def make_executor(name: str, workers: int = 2, **options: Any) -> Executor:
    if name == "inline":
        from agent.execute.inline import InlineExecutor

        return InlineExecutor()
    if name == "pool":
        from agent.execute.pool import PoolExecutor

        return PoolExecutor(workers)
    if name == "ray":
        from agent.execute.ray import RayExecutor

        return RayExecutor(address=options.get("address"), workers=workers)
    raise ValueError(f"no executor {name!r}: one of {', '.join(EXECUTORS)}")


__all__ = ["CPU_BACKENDS", "EXECUTORS", "Executor", "Job", "make_executor"]
