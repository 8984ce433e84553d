"""`warp_specialize` lowered to a producer role and consumer roles (sm_90). NOT IMPLEMENTED YET:
`WarpSpecializePass.apply` returns the program unchanged with a `lower.warp-specialize` warning
on each hinted loop.

The plan (the target is the shape of examples/gemm_hopper_ws.kir):
1. Qualify the loop as `PipelinePass` does (top level, constant step, no writes or explicit ops
   in the body, global loads at the body's top level) and additionally require every load to be
   a TMA box: a block access, or a gather through contiguous ranges turned into one (shared with
   pipeline.py), unmasked or masked only by bounds that the TMA's zero fill reproduces (`rows < M`
   against the tensor's own extent); a mask of any other form is refused.
2. Allocate per load `smem(T[S, ...])`, and `full = mbarrier(S, count = 1)`,
   `empty = mbarrier(S, count = C)` with C the number of consumer units.
3. `role load warpgroups(0) regs(40)`: the loop with, per iteration k and stage s = k % S,
   `wait(empty[s], parity = (k / S + 1) % 2)`, `expect(full[s], bytes = sum of sizeof(ring[s]))`,
   then one `tma.load(<box of iteration k>, ring[s], signal = full[s])` per load.
4. `role mma warpgroups(1, ...) regs(232)`: the loop with the loads replaced by
   `wait(full[s], parity = (k / S) % 2)` and `load(ring[s])` (or, when the body is a `dot` of the
   two tiles, `wgmma(ring_a[s], ring_b[s], acc)` + `wgmma.wait(0)`), then `arrive(empty[s])`;
   the carried values and the code after the loop live in the consumer role, split by
   `role_rank()` rows when there are several consumer warpgroups.
5. Check the result with `kir.interp.run` (race and deadlock detection) in the tests, as for
   the pipeline pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from kir.diagnostics import Diagnostic
from kir.dialect.structure import ForOp
from kir.program import Program, span_of
from lowering.passes import PassResult

RULE = "lower.warp-specialize"


@dataclass(frozen=True)
class WarpSpecializePass:
    """Split `warp_specialize` loops into producer and consumer roles (not implemented yet)."""

    stages: int | None = None

    def apply(self, program: Program) -> PassResult:
        out = program.clone()
        diagnostics = [
            Diagnostic(
                RULE,
                "warning",
                span_of(op),
                "warp specialization is not implemented yet; the loop is left unchanged",
                "write the roles and mbarriers yourself (see examples/gemm_hopper_ws.kir)",
            )
            for op in out.kernel.walk()
            if isinstance(op, ForOp) and op.warp_specialize is not None
        ]
        return PassResult(out, diagnostics)
