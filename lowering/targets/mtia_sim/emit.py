"""The mtia-sim backend: KIR to C++ against the simulated accelerator's interface
(`lowering/targets/mtia_sim/mtia_sim.hpp`, documented in docs/hardware/mtia-sim.md), compiled with g++ by
`lowering.targets.mtia_sim.compile` and run on numpy arrays by `lowering.targets.mtia_sim.runtime`.

One KIR program is one C++ function run by one processing element (PE); the launcher runs the
grid over the 64 PEs with `mtia::run_grid`. The element semantics and the tile level are
`cbase.KernelGen` with one thread: a tile is a row-major array (the vector unit's registers),
and what the GPU backends exchange through shared memory is a local scratch array here.

Every op also tells the runtime what it costs (the manual's timing model, section 4):

- elementwise ops on tiles run on the **vector unit**; transcendentals, float division, `%` and
  `pow` on the **SFU**; reductions, scans, arg-reductions and top-k on the **reduction engine**;
  `dot` on the **DPE** (`mtia::matmul` computes it);
- a `load` of a global tensor is a blocking read through the PE's device-memory port (the
  control processor stalls until the data arrives); a `store` is a posted write; atomics are
  blocking read-modify-writes; each counts the 32-byte bursts its elements touch;
- shared buffers are **local SRAM** (`smem` allocates, `load` and `store` of a shared view are
  vector-unit accesses, checked against DMAs in flight); `cp.async` is a **DMA** into SRAM,
  `cp.async.commit()` closes a DMA group, `cp.async.wait(n)` waits on the DMA counter;
  `barrier()` and `fence.async()` order nothing on a single thread of control and cost nothing.

Each command names the cycle its operands are ready (`kir_rdy[i]`, one slot per value), so the
engines overlap where the data allows. mbarriers, TMA, wgmma and warp roles have no
counterpart on this chip and are refused (`lower.unsupported`).
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue

from kir.diagnostics import Span
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import ScalarType, SmemType, TileType, dtype_of
from kir.dtypes import DTYPES
from kir.program import Program, span_of
from kir.targets import spec
from lowering.emit import cbase
from lowering.emit.base import Lowered
from lowering.emit.cbase import CDialect, CEmitter, Cyclic, Instance, KernelGen, Scalar, Tile, Unsupported

MTIA = CDialect(
    name="mtia-sim",
    headers=("mtia_sim.hpp",),
    kernel_qualifier="static",
    shared="",
    barrier="",
    types=cbase.c_types("_Float16", "::mtia::bf16"),
    to_float={"bf16": "::mtia::bf16_to_f32", "f16": "::mtia::f16_to_f32"},
    from_float={"bf16": "::mtia::f32_to_bf16", "f16": "::mtia::f32_to_f16"},
    from_double={"bf16": "::mtia::f64_to_bf16", "f16": "::mtia::f64_to_f16"},
    from_bits={"bf16": "::mtia::bf16_bits", "f16": "::mtia::f16_bits"},
    thread_index="0",
    block_index=("kir_pid[0]", "kir_pid[1]", "kir_pid[2]"),
    grid_size=("kir_grid[0]", "kir_grid[1]", "kir_grid[2]"),
    warp_size=1,
)

# What the CUDA intrinsics of cbase.COMMON_HELPERS are on the host.
HOST_PRELUDE = r"""
#define KIR_DEV static inline
#define __launch_bounds__(a, b)
static inline float __uint_as_float(unsigned int b) { float f; memcpy(&f, &b, 4); return f; }
static inline double __longlong_as_double(long long b) { double d; memcpy(&d, &b, 8); return d; }
static constexpr int kir_cdiv(int a, int b) { return (a + b - 1) / b; }
static constexpr int kir_min(int a, int b) { return a < b ? a : b; }
static constexpr int kir_max(int a, int b) { return a > b ? a : b; }
"""

SFU_UNARY = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "erf", "sigmoid", "tanh", "sin", "cos"}
SFU_BINARY = {"div", "rem", "pow"}  # on floats


class MtiaGen(KernelGen):
    _acc: str | None  # the access being emitted (a store's or an atomic's), for `touch`

    def __init__(self, program: Program, params: dict[str, int]):
        super().__init__(program, params, MTIA)
        self.threads = 1
        self.instance = Instance(1, "0", "true", cta=True, unit_sync="")
        self.handlers.update(
            {
                ex.SmemAllocOp: self.op_smem,
                ex.SizeofOp: self.op_sizeof,
                ex.CpAsyncOp: self.op_cp_async,
                ex.CpAsyncCommitOp: lambda op: self.w.line("kir_pe.dma_commit();", op),
                ex.CpAsyncWaitOp: lambda op: self.w.line(
                    f"kir_pe.dma_wait({self.pending_count(op)}, {self.call(op)});", op
                ),
                ex.CtaBarrierOp: lambda op: None,  # one thread of control: nothing to order
                ex.FenceAsyncOp: lambda op: None,
            }
        )
        self.rdy: dict[SSAValue, int] = {}
        self.nrdy = 0
        self.calls: list[Span | None] = []
        self.bufs: dict[SSAValue, tuple[str, str, tuple[int, ...]]] = {}  # C offset name, dtype, shape
        self.allowed = frozenset(spec("mtia-sim").dtypes)
        self.access: str | None = None  # the ::mtia::Access of the global load being emitted

    # ---- calls and readiness ------------------------------------------------------------------

    def call(self, op: Operation) -> int:
        """The id of a runtime call (errors name it; the runtime maps it back to the op)."""
        self.calls.append(span_of(op))
        return len(self.calls) - 1

    def slot(self, v: SSAValue) -> int:
        i = self.nrdy
        self.nrdy += 1
        self.rdy[v] = i
        return i

    def deps(self, values) -> str:
        refs = sorted({f"kir_rdy[{self.rdy[v]}]" for v in values if v is not None and v in self.rdy})
        if not refs:
            return "0"
        return refs[0] if len(refs) == 1 else f"::mtia::max_of({{{', '.join(refs)}}})"

    def ready_line(self, res: SSAValue, expr: str, op: Operation) -> None:
        self.w.line(f"kir_rdy[{self.slot(res)}] = {expr};", op)

    # ---- dispatch -----------------------------------------------------------------------------

    def emit_op(self, op: Operation) -> None:
        if type(op) not in self.handlers:
            raise Unsupported(
                op,
                f"the mtia-sim backend cannot lower `{op.name}`: the chip has no mbarriers, TMA, wgmma or warp roles",
                "copy with cp.async (a DMA into local SRAM), wait with cp.async.wait, multiply with dot "
                "(docs/hardware/mtia-sim.md)",
            )
        for r in op.results:
            dt = dtype_of(r.type) if isinstance(r.type, ScalarType | TileType) else None
            if dt is not None and dt not in self.allowed:
                raise Unsupported(op, f"mtia-sim has no {dt} (its dtypes: {', '.join(sorted(self.allowed))})")
        super().emit_op(op)
        prev, self.current_op = self.current_op, op
        try:
            self.timing(op)
        finally:
            self.current_op = prev

    def timing(self, op: Operation) -> None:
        """The cost of ops whose handler does not account for itself."""
        if isinstance(op, tl.LoadOp | tl.StoreOp | tl.AtomicOp | st.ForOp | st.IfOp | st.YieldOp | ex.CpAsyncOp):
            return
        if not op.results:
            return
        res = op.results[0]
        x = self.vals.get(res)
        operands = [v for v in op.operands if v in self.rdy]
        if x is None or isinstance(op, tl.ConstOp | tl.SymValueOp | tl.ProgramIdOp | tl.NumProgramsOp):
            return
        deps = self.deps(operands)
        if isinstance(op, tl.ReduceOp | tl.ArgReduceOp | tl.ScanOp | tl.TopKOp):
            src = self.val(op.operands[0])
            count = cbase._prod(src.shape)  # type: ignore[union-attr]
            if isinstance(op, tl.TopKOp):
                count *= max(1, (src.shape[-1] - 1).bit_length())  # type: ignore[union-attr]
            self.ready_line(res, f"kir_pe.reduce({count}, {deps})", op)
            for r in op.results[1:]:
                self.rdy[r] = self.rdy[res]
            return
        if isinstance(x, Scalar) or x.lazy or isinstance(op, tl.ExpandDimsOp | tl.ReshapeOp | ex.ConvertLayoutOp):
            if not operands:
                return
            if len(operands) == 1 and not isinstance(x, Scalar):
                for r in op.results:
                    self.rdy[r] = self.rdy[operands[0]]
                return
            self.ready_line(res, f"kir_pe.scalar({deps})", op)
            return
        n = cbase._prod(x.shape)
        if isinstance(op, tl.DotOp):
            m, k = self.val(op.lhs).shape  # type: ignore[union-attr]
            wide = DTYPES[dtype_of(op.lhs.type)].nbytes >= 4
            self.ready_line(res, f"kir_pe.dpe({m}, {x.shape[1]}, {k}, {str(wide).lower()}, {deps})", op)
        else:
            sfu = (isinstance(op, tl.UnaryOp) and op.fn.data in SFU_UNARY) or (
                isinstance(op, tl.BinaryOp) and op.fn.data in SFU_BINARY and DTYPES[x.dtype].is_float
            )
            if sfu:
                self.ready_line(res, f"kir_pe.sfu({n}, {deps})", op)
            elif isinstance(op, tl.RandOp):  # Philox4x32-10: ~8 vector integer ops a round
                self.ready_line(res, f"kir_pe.vector({n * 80}, 4, {deps})", op)
            else:
                self.ready_line(res, f"kir_pe.vector({n}, {DTYPES[x.dtype].nbytes}, {deps})", op)

    # ---- structure: readiness through loops and branches --------------------------------------

    def op_for(self, op: st.ForOp) -> None:
        bounds = [v for v in (op.lower, op.upper, op.step) if v in self.rdy]
        if bounds:
            self.w.line(f"kir_pe.need({self.deps(bounds)});", op)
        args = op.body.block.args[1:]
        for init, arg, res in zip(op.inits, args, op.res, strict=True):
            i = self.slot(arg)
            self.rdy[res] = i
            self.w.line(f"kir_rdy[{i}] = {self.deps([init])};", op)
        super().op_for(op)

    def op_if(self, op: st.IfOp) -> None:
        if op.cond in self.rdy:
            self.w.line(f"kir_pe.need({self.deps([op.cond])});", op)
        for r in op.res:
            self.slot(r)
        super().op_if(op)

    def assign_yield(self, block, dests, op: Operation) -> None:
        super().assign_yield(block, dests, op)
        last = block.last_op
        targets = list(op.body.block.args[1:]) if isinstance(op, st.ForOp) else list(op.results)
        values = list(last.values)
        if not targets:
            return
        temps = [self.deps([v]) for v in values]
        if len(targets) == 1:
            self.w.line(f"kir_rdy[{self.rdy[targets[0]]}] = {temps[0]};", op)
            return
        self.w.line("{", op)
        for k, t in enumerate(temps):
            self.w.line(f"    const uint64_t kir_y{k} = {t};", op)
        for k, tgt in enumerate(targets):
            self.w.line(f"    kir_rdy[{self.rdy[tgt]}] = kir_y{k};", op)
        self.w.line("}", op)

    # ---- local SRAM ---------------------------------------------------------------------------

    def op_smem(self, op: ex.SmemAllocOp) -> None:
        if op.parent_op() is not self.kernel:
            raise Unsupported(op, "the mtia-sim backend allocates SRAM buffers at the top level of the kernel only")
        t = op.res.type
        assert isinstance(t, SmemType)
        shape = self.static_shape(t)
        dt = dtype_of(t)
        name = self.fresh(f"kir_buf_{self.name_for(op.res)}")
        nbytes = cbase._prod(shape) * DTYPES[dt].nbytes
        self.w.line(f"const uint64_t {name} = kir_pe.sram_alloc({nbytes}, {self.call(op)});", op)
        self.bufs[op.res] = (name, dt, shape)

    def op_sizeof(self, op: ex.SizeofOp) -> None:
        _, dt, _ = self.bufs[op.mem]
        origin, extents, _ = self.view(op.mem, op.access.data, op.indices, op)
        self.vals[op.res] = Scalar(str(cbase._prod(extents) * DTYPES[dt].nbytes), "i32")

    def buf_linear(self, mem: SSAValue, coords: list[str]) -> str:
        _, _, shape = self.bufs[mem]
        terms = []
        for k, c in enumerate(coords):
            inner = cbase._prod(shape[k + 1 :])
            terms.append(f"({c})" if inner == 1 else f"({c}) * {inner}")
        return " + ".join(terms) if terms else "0"

    def smem_offset(self, mem: SSAValue, coords: list[str]) -> str:
        name, dt, _ = self.bufs[mem]
        return f"({name} + (uint64_t)({self.buf_linear(mem, coords)}) * {DTYPES[dt].nbytes})"

    def smem_ref(self, mem: SSAValue, coords: list[str]) -> str:
        _, dt, _ = self.bufs[mem]
        return f"*reinterpret_cast<{self.c.ctype(dt)}*>(kir_sram + {self.smem_offset(mem, coords)})"

    def view(self, mem: SSAValue, access, indices, op: Operation) -> tuple[list[str], list[int], bool]:
        """(origin coordinates, extent per buffer dimension, whether it is a box): a gather
        with index tiles is not a box and spans the whole buffer."""
        _, _, shape = self.bufs[mem]
        indices = list(indices)
        origin: list[str] = []
        extents: list[int] = []
        box = True
        for d, n in enumerate(shape):
            if d >= len(access.dims):
                origin.append("0")
                extents.append(n)
                continue
            v = indices[d]
            if isinstance(v.type, TileType):
                box = False
                origin.append("0")
                extents.append(n)
            elif access.dims[d] is None:
                origin.append(self.val(v).name)
                extents.append(1)
            else:
                origin.append(self.val(v).name)
                extents.append(self.static(access.dims[d], "the slice extent"))
        return origin, extents, box

    def sram_range(self, mem: SSAValue, access, indices, op: Operation) -> tuple[str, str]:
        """C++ [lo, hi) byte range of SRAM an access touches (its bounding box)."""
        name, dt, shape = self.bufs[mem]
        origin, extents, box = self.view(mem, access, indices, op)
        if not box:
            return name, f"{name} + {cbase._prod(shape) * DTYPES[dt].nbytes}"
        last = [f"{o} + {e - 1}" if e > 1 else o for o, e in zip(origin, extents, strict=True)]
        return self.smem_offset(mem, origin), f"{self.smem_offset(mem, last)} + {DTYPES[dt].nbytes}"

    # ---- memory ops ---------------------------------------------------------------------------

    def index_operands(self, op: Operation) -> list[SSAValue]:
        vals = list(op.indices)
        if getattr(op, "mask", None) is not None:
            vals.append(op.mask)
        return vals

    def op_load(self, op: tl.LoadOp) -> None:
        if isinstance(op.mem.type, SmemType):
            super().op_load(op)
            lo, hi = self.sram_range(op.mem, op.access.data, op.indices, op)
            deps = self.deps(self.index_operands(op))
            self.ready_line(op.res, f"kir_pe.sram_read({lo}, {hi}, {deps}, {self.call(op)})", op)
            return
        # a global load: every element read also touches the device-memory access it is part of
        self.access = self.fresh("kir_mem")
        self.w.line(f"::mtia::Access {self.access};", op)
        super().op_load(op)
        self.ready_line(op.res, f"kir_pe.load({self.access}, {self.deps(self.index_operands(op))})", op)
        self.access = None

    def load_scalar(self, op: tl.LoadOp, ref: str, mask: str | None, other: str) -> None:
        if self.access is None:
            super().load_scalar(op, ref, mask, other)
        else:
            self.w.line(self.load_element(op, self.declare(op.res, op).name, ref, mask, other), op)

    def load_element(self, op: tl.LoadOp, dst: str, ref: str, mask: str | None, other: str) -> str:
        if self.access is None:
            return super().load_element(op, dst, ref, mask, other)
        size = DTYPES[dtype_of(op.res.type)].nbytes
        read = f"{dst} = {ref}; {self.access}.touch(&{ref}, {size});"
        return read if mask is None else f"if ({mask}) {{ {read} }} else {dst} = {other};"

    def op_store(self, op: tl.StoreOp) -> None:
        deps = self.deps([op.value, *self.index_operands(op)])
        if isinstance(op.mem.type, SmemType):
            super().op_store(op)
            lo, hi = self.sram_range(op.mem, op.access.data, op.indices, op)
            self.w.line(f"kir_pe.sram_write({lo}, {hi}, {deps}, {self.call(op)});", op)
            return
        shape = self.access_shape(op)
        acc = self.fresh("kir_mem")
        self.w.line(f"::mtia::Access {acc};", op)
        self._acc = acc
        try:
            if not shape:
                value = self.val(op.value)
                ref = self.element_ref(op, op.mem, op.access.data, op.indices, [], ())
                line = f"{{ {ref} = {value.name}; {self.touch(op, ref)} }}"
                if op.mask is not None:
                    line = f"if ({self.val(op.mask).name}) {line}"
                self.w.line(line, op)
            else:
                value = self.val(op.value)
                layout = value.layout if isinstance(value, Tile) and value.shape == shape else Cyclic(1, "0")
                self.store_tile(op, shape, layout)
        finally:
            self._acc = None
        self.w.line(f"kir_pe.store({acc}, {deps});", op)

    def touch(self, op: Operation, ref: str) -> str:
        size = DTYPES[dtype_of(op.mem.type)].nbytes
        return f"{self._acc}.touch(&{ref}, {size});"

    def store_tile(self, op: tl.StoreOp, shape: tuple[int, ...], layout: object) -> None:
        if isinstance(op.mem.type, SmemType):
            super().store_tile(op, shape, layout)
            return
        staged = self.begin_exchange([op.value, *self.memory_operands(op)], shape, layout, op)
        idx, _, closers = self.open_slots(layout, shape, op)
        val = self.fetch(op.value, shape, layout, idx)
        mask = self.mask_at(op, shape, layout, idx)
        ref = self.element_ref(op, op.mem, op.access.data, op.indices, idx, shape, layout)
        body = f"{{ {ref} = {val}; {self.touch(op, ref)} }}"
        self.w.line(f"if ({mask}) {body}" if mask else body, op)
        self.close(closers)
        self.end_exchange(staged, op)

    def op_atomic(self, op: tl.AtomicOp) -> None:
        acc = self.fresh("kir_mem")
        self.w.line(f"::mtia::Access {acc};", op)
        self._acc = acc
        try:
            super().op_atomic(op)
        finally:
            self._acc = None
        deps = self.deps([op.value, *self.index_operands(op)])
        self.ready_line(op.res, f"kir_pe.atomic({acc}, {deps})", op)

    def atomic_line(self, op: tl.AtomicOp, dst: str, ref: str, val: str, dt: str, mask: str | None) -> None:
        """A read-modify-write in program order (one thread of control: nothing to race with)."""
        w = self.w
        fn = op.fn.data
        if mask is not None:
            w.line(f"{dst} = {self.c.zero(dt)};", op)
            w.line(f"if ({mask}) {{", op)
            w.indent()
        w.line(f"{dst} = {ref};", op)
        combine = {"add": "add", "max": "maximum", "min": "minimum", "xchg": None}[fn]
        w.line("{", op)
        w.line(f"    const {self.c.ctype(dt)} kir_o = {dst}, kir_v = {val};", op)
        new = "kir_v" if combine is None else self.c.binary(combine, "kir_o", "kir_v", dt)
        w.line(f"    {ref} = {new};", op)
        w.line(f"    {self.touch(op, ref)}", op)
        w.line("}", op)
        if mask is not None:
            self.close(1)

    def op_cp_async(self, op: ex.CpAsyncOp) -> None:
        _, dt, shape_buf = self.bufs[op.dst]
        size = DTYPES[dt].nbytes
        shape = tuple(self.static(d, "the copy extent") for d in op.src_access.data.dims if d is not None)
        dma = self.fresh("kir_dma")
        self.w.line(f"::mtia::DmaCopy {dma}({self.call(op)});", op)
        layout = Cyclic(1, "0")
        masks = [op.mask] if op.mask is not None and isinstance(op.mask.type, TileType) else []
        staged = self.begin_exchange(masks, shape, layout, op)
        idx, _, closers = self.open_slots(layout, shape, op)
        src = self.element_ref(op, op.src, op.src_access.data, op.src_indices, idx, shape, layout)
        coords = self.coords(op.dst_access.data, op.dst_indices, idx, shape, len(shape_buf), layout)
        dst = self.smem_ref(op.dst, coords)
        off = self.smem_offset(op.dst, coords)
        mask = self.mask_at(op, shape, layout, idx)
        move = f"{{ {dst} = {src}; {dma}.move(&{src}, {off}, {size}); }}"
        if mask is None:
            self.w.line(move, op)
        else:
            self.w.line(f"if ({mask}) {move} else {dst} = {self.c.zero(dt)};", op)
        self.close(closers)
        self.end_exchange(staged, op)
        deps = self.deps([*op.src_indices, *op.dst_indices, *([op.mask] if op.mask is not None else [])])
        self.w.line(f"kir_pe.dma_start({dma}, {deps});", op)

    # ---- dot on the DPE -----------------------------------------------------------------------

    def op_dot(self, op: tl.DotOp) -> None:
        a, b = self.val(op.lhs), self.val(op.rhs)
        acc_dt = dtype_of(op.res.type)
        in_dt = dtype_of(op.lhs.type)
        if not (DTYPES[acc_dt].is_float and DTYPES[in_dt].is_float) or acc_dt == "f64" or in_dt == "f64":
            super().op_dot(op)
            return
        assert isinstance(a, Tile) and isinstance(b, Tile)
        m, k = a.shape
        n = b.shape[1]
        c = self.c
        w = self.w
        res = self.declare(op.res, op)
        assert isinstance(res, Tile)
        w.line("{", op)
        w.indent()
        ptrs = []
        for v, x in ((op.lhs, a), (op.rhs, b)):
            if x.lazy or x.name in self.exchanged:
                p = self.scratch(c.ctype(in_dt), cbase._prod(x.shape), DTYPES[in_dt].nbytes)
                self.store_to_scratch(v, p, op)
                ptrs.append(p)
            else:
                ptrs.append(x.name)
        out = self.scratch("float", m * n, 4)
        w.line(f"::mtia::matmul({ptrs[0]}, {ptrs[1]}, {out}, {m}, {n}, {k});", op)
        idx, lin, closers = self.open_slots(res.layout, res.shape, op)
        s = f"{out}[{lin}]"
        if op.acc is not None:
            s = f"({s} + {c.cast(self.fetch(op.acc, res.shape, res.layout, idx), acc_dt, 'f32')})"
        w.line(f"{res.name}[kir_i] = {c.cast(s, 'f32', acc_dt)};", op)
        self.close(closers)
        w.dedent()
        w.line("}", op)
        self.scratch_top = 0

    # ---- the kernel ---------------------------------------------------------------------------

    def sync(self, op: Operation | None = None) -> None:
        """One thread of control: exchanges need no barrier."""

    def helpers(self) -> list[str]:
        return [HOST_PRELUDE, cbase.COMMON_HELPERS.replace("#define KIR_DEV __device__ __forceinline__", "")]

    def extra_params(self) -> list[str]:
        return ["::mtia::Pe& kir_pe", "const int* kir_pid", "const int* kir_grid"]

    def prologue_decls(self) -> list[tuple[str, str]]:
        decls = [(self.param_name(p), f"constexpr int {self.param_name(p)} = {v};") for p, v in self.params.items()]
        return decls + [
            (
                "kir_smem",
                f"alignas(64) static unsigned char kir_smem[{max(16, self.scratch_base + self.scratch_max)}];",
            ),
            ("kir_sram", "unsigned char* kir_sram = kir_pe.sram();"),
            ("kir_rdy", f"uint64_t kir_rdy[{max(1, self.nrdy)}] = {{}};"),
        ]

    def options(self, smem_bytes: int) -> dict:
        return {
            "calls": list(self.calls),
            "sram_bytes": sum(cbase._prod(s) * DTYPES[d].nbytes for _, d, s in self.bufs.values()),
        }

    def launcher(self, lowered: Lowered) -> str:
        """`kir_launch(args, symbols, out, err, errlen)`: run the grid; out[0] is the cycle count
        (on an error: the offending call and the related one, and 1 is returned)."""
        lines = [
            "",
            "// ---- launcher (lowering/emit/mtia.py) ----",
            'extern "C" int kir_launch(void** kir_args, const long long* kir_syms, unsigned long long* kir_out,',
            "                          char* kir_err, int kir_errlen) {",
        ]
        for p, v in self.params.items():
            lines.append(f"    constexpr int {self.param_name(p)} = {v};")
        for k, s in enumerate(self.shape_symbols):
            lines.append(f"    const int {self.symbol_name(s)} = (int)kir_syms[{k}];")
        grid = [self.c_sym(g.data) for g in self.kernel.grid.data]
        grid += ["1"] * (3 - len(grid))
        lines.append(f"    const int kir_grid[3] = {{{', '.join(grid)}}};")
        call_args = []
        for k, (_name, arg) in enumerate(self.kernel.args):
            g = self.globals[arg]
            const = "" if arg.type.is_out else "const "
            call_args.append(f"({const}{self.c.ctype(g.dtype)}*)kir_args[{k}]")
        call_args += [self.symbol_name(s) for s in self.shape_symbols]
        call_args += ["kir_pe", "kir_pid", "kir_grid"]
        lines += [
            "    (void)kir_syms;",
            "    try {",
            "        ::mtia::Launch kir_r = ::mtia::run_grid(kir_grid, [&](::mtia::Pe& kir_pe, const int* kir_pid) {",
            f"            {lowered.entry}({', '.join(call_args)});",
            "        });",
            "        kir_out[0] = kir_r.cycles;",
            "        for (int e = 0; e < ::mtia::ENGINES; ++e) kir_out[1 + e] = kir_r.stats.busy[e];",
            "        kir_out[5] = kir_r.stats.dma_bytes;",
            "        kir_out[6] = kir_r.stats.direct_bytes;",
            "        kir_out[7] = kir_r.stats.store_bytes;",
            "        kir_out[8] = kir_r.stats.stall;",
            "        return 0;",
            "    } catch (const ::mtia::Error& e) {",
            '        snprintf(kir_err, kir_errlen, "%s\\n%s", e.rule.c_str(), e.message.c_str());',
            "        kir_out[0] = (unsigned long long)(long long)e.call;",
            "        kir_out[1] = (unsigned long long)(long long)e.other;",
            "        return 1;",
            "    }",
            "}",
        ]
        return "\n".join(lines) + "\n"

    def generate(self) -> Lowered:
        lowered = super().generate()
        lowered.source += self.launcher(lowered)
        lowered.num_warps = 1
        return lowered


class MtiaEmitter(CEmitter):
    name = "mtia-sim"
    levels = ("tile", "explicit")
    dialect = MTIA

    def generate(self, program: Program, params: dict[str, int]) -> Lowered:
        return MtiaGen(program, params).generate()
