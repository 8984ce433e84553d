"""Lowering passes: IR-to-IR transformations from the tile level towards the explicit level.

A pass is a frozen dataclass whose fields are its options (as xdsl passes are) with one verb,
`apply(program) -> PassResult`. It never changes its input: it clones the program, rewrites the
clone, and returns it with the diagnostics that explain what it refused to do (warnings; a pass
that cannot transform a loop leaves it as it was, which is always correct).

- `pipeline.PipelinePass`: a `pipeline(stages = S)` loop becomes sm_80-style cp.async copies
  into an S-stage shared ring.
- `warp_specialize.WarpSpecializePass`: the plan for `warp_specialize` loops (not done yet).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kir.diagnostics import Diagnostic
from kir.program import Program


@dataclass(frozen=True)
class PassResult:
    program: Program
    diagnostics: list[Diagnostic] = field(default_factory=list)
