"""Lowering passes: IR-to-IR transformations from the tile level towards the explicit level.

A pass is a frozen dataclass whose fields are its options (as xdsl passes are) with one verb,
`apply(program) -> PassResult`. It never changes its input: it clones the program, rewrites the
clone, and returns it with the diagnostics that explain what it refused to do (warnings; a pass
that cannot transform a loop leaves it as it was, which is always correct).

- `pipeline.PipelinePass(stages)`: a `pipeline(stages = S)` loop becomes sm_80-style cp.async
  copies into an S-stage shared ring.
- `warp_specialize.WarpSpecializePass(stages, consumers)`: the `warp_specialize` GEMM loop
  becomes a TMA producer role and wgmma consumer warpgroups with full/empty mbarrier rings
  (sm_90); the result must pass the verifier, or the loop stays.
- `layouts.LayoutPass(target)`: the register layouts the Gluon backend chooses, written into
  the tiles' types (the choice itself lives with the Gluon emitter, lowering/targets/gluon/emit/layouts.py).
- `legalize.LegalizePass(target)`: narrow-float transcendentals computed in f32, dots below the
  matrix instruction unrolled; explicit ops and dtypes the target lacks become errors.
- `loops`: what the two loop passes share (which loads become box copies, rewriting tools).
- `schedule`: which of these passes `lower()` runs for a program and a backend, and in what
  order (legalize -> warp_specialize -> pipeline -> layouts).

Every pass keeps spans (a new op has the span of what it stands for), and its output parses
back to the same IR and passes the verifier.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kir.diagnostics import Diagnostic
from kir.program import Program


@dataclass(frozen=True)
class PassResult:
    program: Program
    diagnostics: list[Diagnostic] = field(default_factory=list)
