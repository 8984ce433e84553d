"""`lower(program, to, params) -> Lowered`: the one way into lowering. The passes that the
program's hints and the target call for run first (`lowering.passes.schedule`, in its
documented order), then the target's emitter (`lowering.targets`) writes the code.

It lives above the emitter base and the passes, which the passes' own imports of the emitters
(the Gluon layouts) would otherwise make a circle.
"""

from __future__ import annotations

from kir.diagnostics import Diagnostic, KirError
from kir.program import Program
from lowering.emit.base import Lowered, emitter_of
from lowering.passes.schedule import run_passes


def lower(program: Program, to: str, params: dict[str, int] | None = None) -> Lowered:
    """Lower a program of one kernel for a backend, or raise `KirError` with the reasons it
    cannot. A program of several kernels is lowered kernel by kernel (`Program.kernels()`)."""
    emitter = emitter_of(to)  # the name is judged before the program is looked at
    if program.is_multi:
        raise KirError(
            Diagnostic(
                "lower.multi",
                "error",
                program.span(),
                f"`{program.name}` is one of {len(program.kernels())} kernels: each is lowered on its own",
                "lower each of `program.kernels()`",
            )
        )
    scheduled = run_passes(program, to, params)  # the passes its hints and the backend call for, in order
    program = scheduled.program
    unknown = set(params or {}) - set(program.params)
    if unknown:
        raise KirError(Diagnostic("lower.param", "error", program.span(), f"no parameter {', '.join(sorted(unknown))}"))
    # Refusals can depend on parameters (tile sizes): judge the program being lowered.
    refusals = emitter.accepts(program.with_params(**params) if params else program)
    if any(d.is_error for d in refusals):
        raise KirError(refusals + scheduled.diagnostics)
    values = {**program.params, **(params or {})}
    lowered = emitter.emit(program, values)
    lowered.diagnostics = scheduled.diagnostics + lowered.diagnostics
    return lowered
