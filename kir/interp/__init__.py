"""The numpy reference interpreter of KIR: the definition of what a program means.

    from kir.interp import run
    out = run(program, {"x": x, "y": y}, params={"BLOCK": 256})
    z = out["z"]

`run` executes every program of the grid (one program = one CTA), runs warp roles as
cooperating coroutines with real mbarrier and CTA-barrier semantics, and checks, independently
of the schedule, that shared-memory accesses are ordered (vector clocks). It returns every
tensor argument after the run and raises `KirError` with one located diagnostic on the first
error: `interp.bad-input`, `interp.where-violated`, `interp.out-of-bounds`,
`interp.uninitialized-read`, `interp.race`, `interp.missing-fence`, `interp.deadlock`,
`interp.timeout`, `interp.unsupported`, `interp.internal`, ...

Modules: `values` (element semantics of dtypes), `memory` (addressing), `sync` (vector clocks,
mbarriers, race shadow), `machine` (a CTA and its role scheduler), `ops` and `async_ops` (one
handler per op), `launch` (binding and the grid).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.utils.exceptions import VerifyException

from kir.diagnostics import Diagnostic, KirError
from kir.dialect.structure import KernelOp
from kir.interp import async_ops as _async_ops  # noqa: F401  (registers handlers)
from kir.interp import ops as _ops  # noqa: F401  (registers handlers)
from kir.interp.errors import InterpError, span_of
from kir.interp.launch import Launch, bind
from kir.interp.machine import Cta

__all__ = ["run"]


def run(
    program_or_kernel_op: Any,
    inputs: dict[str, np.ndarray],
    params: dict[str, int] | None = None,
    *,
    grid_limit: int | None = None,
    time_limit: float = 60.0,
    trace: bool = False,
) -> dict[str, np.ndarray]:
    """Run a `Program` (or its `KernelOp`) on `inputs` and return every tensor argument after
    the run, outputs filled. `grid_limit` runs only that many programs of a larger grid (the
    first and the last ones); `time_limit` (seconds) stops a run that takes too long; `trace`
    adds the last synchronization events of the failing CTA to an error's counterexample
    (`counterexample["trace"]`, see `kir.interp.trace`)."""
    kernel = getattr(program_or_kernel_op, "kernel", program_or_kernel_op)
    if not isinstance(kernel, KernelOp):
        raise KirError(
            Diagnostic(
                "interp.bad-input", "error", None, f"expected a Program or a KernelOp, not {type(kernel).__name__}"
            )
        )
    launch: Launch | None = None
    with np.errstate(all="ignore"):
        try:
            try:
                kernel.verify()
            except VerifyException as err:
                raise KirError(
                    Diagnostic("interp.invalid-ir", "error", span_of(kernel), f"the program is not valid IR: {err}")
                ) from None
            launch = bind(kernel, dict(inputs), dict(params or {}), time_limit)
            launch.trace = trace
            for pid in launch.program_ids(grid_limit):
                Cta(launch, pid).run()
        except InterpError as err:
            raise KirError(err.diagnostic) from None
        except KirError:
            raise
        except (Exception, RecursionError) as err:  # a bug of the interpreter, never of the caller
            op = launch.op if launch is not None else kernel
            raise KirError(
                Diagnostic(
                    "interp.internal",
                    "error",
                    span_of(op) or span_of(kernel),
                    f"internal error of the interpreter at `{getattr(op, 'name', '?')}`: {type(err).__name__}: {err}",
                    "this is a bug in kir.interp; please report it with the program",
                )
            ) from err
    return {name: t.data for name, t in launch.tensors.items()}
