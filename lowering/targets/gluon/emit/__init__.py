"""The Gluon backend: explicit-level KIR for sm_90 as a `triton.experimental.gluon` kernel.

Written against triton 3.6.0 exactly (Gluon's API moves between releases). The emitted module
holds one `@gluon.jit` function per warp role, then the kernel. Every generated line records
the KIR op it comes from (`Lowered.line_spans`), so a compile error in emitted code points at
the KIR source.

How KIR maps onto Gluon:

| KIR | Gluon |
| --- | --- |
| `smem(bf16[S, BM, BK], swizzle = 128)` | `gl.allocate_shared_memory(gl.bfloat16, [S, BM, BK], NVMMASharedLayout(128, 16))` |
| `mbarrier(S, count = c)` | an `[S, 1]` int64 buffer with `MBarrierLayout`, each entry `mbarrier.init(..., count=c)` |
| `expect` / `arrive` / `wait(parity)` | `mbarrier.expect` / `mbarrier.arrive` / `mbarrier.wait(bar, parity)` |
| `tma.load(a[box], as[s], signal = full[s])` | `tma.async_copy_global_to_shared(a_desc, coords, full.index(s), as_.index(s))`; `a_desc` is a host-side `TensorDescriptor` over `a` with the box as block shape and the destination's shared layout |
| `tma.load(q[b, h, r0 : r0 + BM, 0 : HD], ...)` (rank > 2) | the same, with `q_desc` over q's rows (its leading dimensions merged, `lowering/targets/gluon/runtime.py`'s `row_view`) and coordinates `[(b * H + h) * S + r0, 0]` |
| `tma.store`, `tma.store_wait` | `tma.async_copy_shared_to_global`, `tma.store_wait` |
| `max(s, axis = 1)`, `sum`, `min`, `prod` | `gl.reduce(s, 1, kir_max)` (a combine function propagating NaN), `gl.sum(p, axis=1)`, `gl.reduce(..., kir_min)`, `gl.reduce(..., kir_prod)`; bf16/f16/fp8 reduce in f32 and round once |
| `wgmma(A, B, acc)` / `wgmma.wait(n)` | `warpgroup_mma(A, B, acc, is_async=True)` / `warpgroup_mma_wait(n, deps=(pending accumulators,))` |
| `fence.async()` | `fence_async_shared()` |
| roles | `gl.warp_specialize` partitions (below) |
| `role_rank()` | the partition function's `RANK: gl.constexpr` argument |
| `store(c[block], v)` | `gl.store` of pointers in a `BlockedLayout`, `v` converted to it (`gl.convert_layout`) |

Layouts: a wgmma accumulator (and every tile that flows into or out of it through loops and
elementwise ops) gets `NVMMADistributedLayout(version=[3, 0], warps_per_cta, instr_shape=[16,
n, 256 / bits])`; other tiles get a `BlockedLayout` of 16-byte vectors; global stores and loads
address memory through a blocked layout.

Roles and `gl.warp_specialize`. KIR runs a role body once per listed unit (warp or warpgroup),
each unit its own instance with its own arrivals. Gluon's `warp_specialize` has one default
partition (running on the kernel's `num_warps` warps, which Triton requires to be a multiple
of four) and any number of worker partitions, each with its own warp count and register
budget. So every *unit* of every role becomes one partition running the role's function with
its `RANK` as a constexpr: for `examples/gemm_hopper_ws.kir`,

    default partition: mma, RANK 0   (4 warps; Triton leaves it 232 registers)
    worker 0:          load, RANK 0  (4 warps, 40 registers)
    worker 1:          mma, RANK 1   (4 warps, 232 registers)

The two consumer warpgroups stay two instances with an M = BM / 2 accumulator each (not one
8-warp partition with M = BM), so `empty` keeps its count of 2: Gluon's `mbarrier.arrive` is one
arrival per partition (one thread after the partition's own barrier), exactly KIR's one
arrival per unit; likewise `expect` and `tma.load` are issued once per partition. The
warpgroup unit with the largest register budget becomes the default partition (Triton gives
the default partition the registers the workers leave, computed from `maxnreg`; the launch's
`num_warps` is its warp count). When no role has warpgroup units (all `warps(...)`), an idle
four-warp default partition is added and every unit is a worker. Physical warp ids differ
from KIR's (`warpgroups(1, 2)` become warps 0-3 and 8-11), which no KIR semantics depends on.
Top-level statements before the last role run in the parent region (on the default
partition's warps, before the workers start); statements after the last role run there once
every partition has joined.

Gathers: a load from a global tensor through index tiles (`load(x[b, rows[:, None],
cols[None, :]])`, as an im2col tile) adds each index times its stride to the base pointer, the
index tiles broadcasting in the load's layout (they join its layout class). A tile that
`expand_dims` (`v[:, None]`) widens takes `gl.SliceLayout(axis, L)` of the layout L of what it
widens into, so the expansion moves nothing; if it already has another layout (the layouts pass
wrote one, or it widens into two layouts), it is converted first.

Reductions: reducing axis a of a tile in layout L gives a tile in `gl.SliceLayout(a, L)`, so the
class of a reduction's result takes that slice (the first reduction's, when several feed one
class), ahead of the expansion rule above: the online softmax's row maximum `m_new` is made in
`SliceLayout(1, L_s)` of the scores' wgmma layout and `m_new[:, None]` widens back into it for
free; widening it against an accumulator of another wgmma shape (`acc * alpha[:, None]`)
converts between the two row slices, which hold the same rows in the same threads (Triton
emits no data movement for it). A 1-D tile reduces to a scalar.

What the backend refuses (`lower.unsupported`, at the op): scans, arg-reductions, reshapes and
explicit broadcasts of tiles, `dot` (write `wgmma`), atomics, scattered stores, gathers from
shared memory, the `gather` op (`gl.gather` gives its result
the index's layout, which the layout pass does not model yet), `cp.async` (sm_80), a CTA `barrier()` inside a role (a partition can only
synchronize its own warps), a wgmma in a role of fewer than four warps, TMA boxes that do not
slice exactly the last two dimensions (the others indexed by scalars) or of a tensor whose
declared strides keep its leading dimensions from merging into rows, and tiles whose shape
depends on a shape symbol.

The package: `writer.py` writes the kernel and its role functions, handing each op to its
handler in `expressions.py`, `tiles.py`, `memory.py`, `sync.py` (mbarriers, fences, TMA),
`wgmma.py` or `control.py` (loops, branches, partitions); `layouts.py` chooses the register
layouts (lowering.passes.layouts writes the same choice into the IR) and spells them;
`module.py` writes the module around the functions and the launch description; `refusals.py`
is what `accepts` refuses; `values.py` and `tables.py` hold the value types and the names. What
the Triton backend writes alike is in `lowering.emit.pyexpr`.
"""

from __future__ import annotations

from kir.diagnostics import Diagnostic
from kir.program import Program
from lowering.emit.base import Emitter, Lowered, level_refusal

from .layouts import mma_layout
from .refusals import refusals
from .tables import GL_DTYPE, SIG_DTYPE, TARGET
from .values import fold_int
from .writer import GluonWriter

__all__ = ["GL_DTYPE", "SIG_DTYPE", "TARGET", "GluonEmitter", "_fold", "_mma_layout"]

# the names tests/lowering/test_gluon.py knows them by
_fold = fold_int
_mma_layout = mma_layout


class GluonEmitter(Emitter):
    name = "gluon"
    levels = ("explicit",)

    def accepts(self, program: Program) -> list[Diagnostic]:
        out = level_refusal(program, self.name, self.levels)
        if out:
            return out
        target = program.kernel.target.data
        if target != TARGET:
            out.append(
                Diagnostic(
                    "lower.target",
                    "error",
                    program.clause_spans.get("target", program.span()),
                    f"the gluon backend targets {TARGET} (Hopper); this kernel targets {target}",
                    f"write `target {TARGET}`, or lower it with the backend of its target",
                )
            )
        return out + refusals(program)

    def emit(self, program: Program, params: dict[str, int]) -> Lowered:
        lowered = GluonWriter(program, params).run()
        lowered.backend = self.name  # the target's name (a copy of the folder has its own)
        return lowered
