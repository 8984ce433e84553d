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
    """Lower a program for a backend, or raise `KirError` with the reasons it cannot."""
    scheduled = run_passes(program, to, params)  # the passes its hints and the backend call for, in order
    program = scheduled.program
    emitter = emitter_of(to)
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
