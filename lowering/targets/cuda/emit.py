"""The CUDA C++ backend, both levels: one `extern "C" __global__` kernel per program, built for
sm_90a (Hopper) by `lowering.targets.cuda.compile` and run by `lowering.targets.cuda.runtime`.

Kernel signature: the tensors as typed pointers (KIR argument order), then the shape symbols as
`int` (in `Lowered.shape_symbols` order), then one `const __grid_constant__ CUtensorMap` per
TMA descriptor (`Lowered.options["launch"]["tma"]` says how the host builds each). Parameters
are `constexpr int` inside the kernel. The launch is `grid` x `threads` with
`options["launch"]["smem_bytes"]` bytes of dynamic shared memory.

The tile level is `cbase.KernelGen`. The hardware-explicit level maps KIR's ops one to one:

- **Shared memory** is one `extern __shared__` allocation, aligned to 1024 bytes at run time
  and carved at compile time: swizzled buffers on 1024-byte boundaries, then the mbarriers,
  then the scratch area of the tile-level ops. A swizzled buffer `T[..., R, C] swizzle(W)` is
  stored as the TMA writes it and as wgmma reads it: each [R, C] slab is cut into chunks W bytes
  wide ([R, W / sizeof(T)] each, one after another), rows W bytes apart inside a chunk, and the
  16-byte units of each row permuted by the hardware's XOR pattern (`kir_swz`). A TMA box with
  a swizzle is at most W bytes wide, so a copy into a wider buffer is one TMA per chunk.
- **mbarriers** are initialized by thread 0 (`mbarrier.init`), then `fence.mbarrier_init` and a
  CTA barrier. `wait` polls `mbarrier.try_wait.parity` in a loop; `expect` is
  `mbarrier.arrive.expect_tx`; `arrive` is `mbarrier.arrive`.
- **Roles** are one `if / else if` chain over warpgroups (or warps), each branch starting with
  `setmaxnreg` when the role has a register budget (the kernel has `__launch_bounds__(threads,
  1)`). A role runs once per unit: its effects on barriers and the TMA (`arrive`, `expect`,
  `tma.*`, a scalar store) are issued by one elected thread of the unit, and a role whose body
  holds no tile at all (a TMA producer) runs on that thread alone.
- **wgmma**: a KIR `wgmma` of an [M, K] by [K, N] product is `wgmma.fence`, then M/64 x K/16
  `wgmma.mma_async.m64nNk16` instructions back to back (A K-major, B N-major, both from
  shared-memory descriptors of the swizzled layout), then one `wgmma.commit_group`. A
  `trans(view)` operand flips its major-ness: `trans(B)` (stored [N, K]) is the K-major B
  (imm-trans-b 0, addressed and described as A is), `trans(A)` (stored [K, M]) the M-major A
  (imm-trans-a 1, addressed and described as B is);
  `wgmma.wait(n)` is `wgmma.wait_group n`. The accumulator is held in the wgmma register
  layout (`WgmmaAcc`): every tile that flows into a wgmma accumulator (its `zeros`, the loop
  that carries it, the casts of it) gets that layout, so the epilogue stores straight from it.
  An accumulator that starts as `zeros` is never zero-filled before its wgmmas (ptxas serializes
  wgmmas whose accumulator registers a non-wgmma instruction defines, C7515): the first
  instruction into each accumulator block passes scale-d 0 (D = A B) on the loop's first step,
  and the zeros are written only when the loop runs no step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from xdsl.ir import Block, Operation, SSAValue

from kir import symexpr as sx
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.traits import allocates
from kir.dialect.types import ScalarType, SmemType, TileType, dtype_of, shape_of
from kir.dtypes import DTYPES
from kir.program import Program
from lowering.emit import cbase
from lowering.emit.base import Lowered
from lowering.emit.cbase import (
    CDialect,
    CEmitter,
    Cyclic,
    Instance,
    KernelGen,
    Scalar,
    Tile,
    Unsupported,
)

CUDA = CDialect(
    name="cuda",
    headers=("cuda_runtime.h", "cuda.h", "cuda_bf16.h", "cuda_fp16.h", "cuda_fp8.h", "stdint.h", "string.h"),
    kernel_qualifier='extern "C" __global__',
    shared="__shared__",
    barrier="__syncthreads()",
    types=cbase.c_types("__half", "__nv_bfloat16", f8e4m3="__nv_fp8_e4m3", f8e5m2="__nv_fp8_e5m2"),
    to_float={"bf16": "__bfloat162float", "f16": "__half2float", "f8e4m3": "kir_f8_to_f32", "f8e5m2": "kir_f8_to_f32"},
    from_float={
        "bf16": "__float2bfloat16_rn",
        "f16": "__float2half_rn",
        "f8e4m3": "kir_to_f8e4m3",
        "f8e5m2": "kir_to_f8e5m2",
    },
    from_double={
        "bf16": "__double2bfloat16",
        "f16": "__double2half",
        "f8e4m3": "kir_to_f8e4m3",
        "f8e5m2": "kir_to_f8e5m2",
    },
    from_bits={
        "bf16": "__ushort_as_bfloat16",
        "f16": "__ushort_as_half",
        "f8e4m3": "kir_f8e4m3_bits",
        "f8e5m2": "kir_f8e5m2_bits",
    },
)

# fp8 conversions go through cuda_fp8.h's raw converters: out-of-range values give NaN (e4m3,
# which has no infinity) or infinity (e5m2), as ml_dtypes does, not the saturating constructor.
CUDA_HELPERS = r"""
KIR_DEV float kir_f8_to_f32(__nv_fp8_e4m3 x) { return (float)x; }
KIR_DEV float kir_f8_to_f32(__nv_fp8_e5m2 x) { return (float)x; }
KIR_DEV __nv_fp8_e4m3 kir_f8e4m3_bits(unsigned char b) { __nv_fp8_e4m3 r; r.__x = b; return r; }
KIR_DEV __nv_fp8_e5m2 kir_f8e5m2_bits(unsigned char b) { __nv_fp8_e5m2 r; r.__x = b; return r; }
KIR_DEV __nv_fp8_e4m3 kir_to_f8e4m3(float x) { return kir_f8e4m3_bits(__nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3)); }
KIR_DEV __nv_fp8_e5m2 kir_to_f8e5m2(float x) { return kir_f8e5m2_bits(__nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2)); }
KIR_DEV __nv_fp8_e4m3 kir_to_f8e4m3(double x) { return kir_f8e4m3_bits(__nv_cvt_double_to_fp8(x, __NV_NOSAT, __NV_E4M3)); }
KIR_DEV __nv_fp8_e5m2 kir_to_f8e5m2(double x) { return kir_f8e5m2_bits(__nv_cvt_double_to_fp8(x, __NV_NOSAT, __NV_E5M2)); }
__host__ __device__ constexpr int kir_cdiv(int a, int b) { return (a + b - 1) / b; }
__host__ __device__ constexpr int kir_min(int a, int b) { return a < b ? a : b; }
__host__ __device__ constexpr int kir_max(int a, int b) { return a > b ? a : b; }
template <typename T> struct alignas(2 * sizeof(T)) kir_pair { T a, b; };

// ---- shared memory, mbarriers, TMA (sm_90) ----
KIR_DEV uint32_t kir_smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
// the 16-byte units of each row are XOR-permuted by bits 7.. of the address (Swizzle<B, 4, 3>)
template <int MASK> KIR_DEV uint32_t kir_swz(uint32_t o) { return o ^ (((o >> 7) & MASK) << 4); }
KIR_DEV void kir_mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
KIR_DEV void kir_mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
KIR_DEV void kir_mbar_expect(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
KIR_DEV void kir_mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
KIR_DEV void kir_mbar_arrive_n(uint32_t bar, uint32_t n) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(n) : "memory");
}
// returns once the phase of parity `parity` has completed
KIR_DEV void kir_mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile(
            "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}
KIR_DEV void kir_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
KIR_DEV void kir_bar_sync(int id, int threads) { asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(threads) : "memory"); }
KIR_DEV void kir_bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int N> KIR_DEV void kir_bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory"); }
template <int SZ> KIR_DEV void kir_cp_async(uint32_t dst, const void* src, bool pred) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" :: "r"(dst), "l"(src), "n"(SZ), "r"(pred ? SZ : 0) : "memory");
}
KIR_DEV void kir_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> KIR_DEV void kir_cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }

// ---- wgmma (sm_90a) ----
// shared-memory matrix descriptor: start address, leading and stride byte offsets (16-byte
// units) and the swizzle mode (1: 128 B, 2: 64 B, 3: 32 B)
KIR_DEV uint64_t kir_wgmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo, uint32_t swizzle) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32)
        | ((uint64_t)swizzle << 62);
}
KIR_DEV void kir_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
KIR_DEV void kir_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> KIR_DEV void kir_wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }
// pins accumulator registers in place: the compiler may not move their reads or writes across
// this point (the wgmma writes them asynchronously until the wait)
template <int N> KIR_DEV void kir_fence_regs(float* r) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i]) :: "memory");
}
// ---- cache eviction policies: load(..., evict = first | last) (sm_80) ----
// the line's L1 eviction priority and an L2 policy covering the whole access (createpolicy)
#define KIR_LD_EVICT(E, W, C, R)                                                                 \
    asm volatile("{\n .reg .b64 pol;\n createpolicy.fractional.L2::evict_" E ".b64 pol, 1.0;\n"  \
                 " ld.global.L1::evict_" E ".L2::cache_hint." W " %0, [%1], pol;\n}\n"            \
                 : "=" C(R) : "l"(p))
template <bool FIRST, typename T> KIR_DEV T kir_ld_evict(const T* p) {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "a scalar element");
    T out;
    if constexpr (sizeof(T) == 8) {
        unsigned long long r;
        if (FIRST) KIR_LD_EVICT("first", "b64", "l", r); else KIR_LD_EVICT("last", "b64", "l", r);
        __builtin_memcpy(&out, &r, 8);
    } else if constexpr (sizeof(T) == 4) {
        unsigned int r;
        if (FIRST) KIR_LD_EVICT("first", "b32", "r", r); else KIR_LD_EVICT("last", "b32", "r", r);
        __builtin_memcpy(&out, &r, 4);
    } else if constexpr (sizeof(T) == 2) {
        unsigned short r;
        if (FIRST) KIR_LD_EVICT("first", "b16", "h", r); else KIR_LD_EVICT("last", "b16", "h", r);
        __builtin_memcpy(&out, &r, 2);
    } else {
        unsigned int r;  // a byte is loaded into a 32-bit register
        if (FIRST) KIR_LD_EVICT("first", "u8", "r", r); else KIR_LD_EVICT("last", "u8", "r", r);
        unsigned char b = (unsigned char)r;
        __builtin_memcpy(&out, &b, 1);
    }
    return out;
}

template <int R> KIR_DEV void kir_setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(R)); }
template <int R> KIR_DEV void kir_setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(R)); }
"""

SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}  # wgmma descriptor
SWIZZLE_MASK = {128: 7, 64: 3, 32: 1}


def _tma_helpers() -> str:
    out = []
    for rank in range(1, 6):
        cs = ", ".join(f"int c{i}" for i in range(rank))
        ops = ", ".join(f"%{i + 2}" for i in range(rank))
        args = ", ".join(f'"r"(c{i})' for i in range(rank))
        out.append(
            f"KIR_DEV void kir_tma_load_{rank}d(uint32_t dst, const CUtensorMap* map, {cs}, uint32_t bar) {{\n"
            f'    asm volatile("cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes'
            f' [%0], [%1, {{{ops}}}], [%{rank + 2}];"\n'
            f'        :: "r"(dst), "l"((uint64_t)map), {args}, "r"(bar) : "memory");\n}}'
        )
        ops = ", ".join(f"%{i + 1}" for i in range(rank))
        out.append(
            f"KIR_DEV void kir_tma_store_{rank}d(const CUtensorMap* map, {cs}, uint32_t src) {{\n"
            f'    asm volatile("cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group [%0, {{{ops}}}], [%{rank + 1}];"\n'
            f'        :: "l"((uint64_t)map), {args}, "r"(src) : "memory");\n}}'
        )
    return "\n".join(out) + "\n"


def _wgmma_name(n: int, ab: str, trans_a: int, trans_b: int) -> str:
    """The helper's name; the usual operands (A K-major, B N-major) keep the short name."""
    suffix = "" if (trans_a, trans_b) == (0, 1) else f"_ta{trans_a}_tb{trans_b}"
    return f"kir_wgmma_m64n{n}k16_{ab}{suffix}"


def _wgmma_helper(n: int, ab: str, trans_a: int = 0, trans_b: int = 1) -> str:
    """`kir_wgmma_m64n{n}k16_{ab}`: one wgmma.mma_async with the given imm-trans-a and
    imm-trans-b (0: the operand is K-major; 1: A M-major or B N-major). The default is A K-major
    and B N-major (imm-trans-b 1). `scale_d` is the instruction's scale-d predicate: D = A B + D
    when it is non-zero, D = A B (the registers of D only written) when it is zero."""
    regs = n // 2
    dlist = ", ".join(f"%{i}" for i in range(regs))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    return (
        f"KIR_DEV void {_wgmma_name(n, ab, trans_a, trans_b)}(float* d, uint64_t a, uint64_t b, int scale_d) {{\n"
        f"    asm volatile(\n"
        f'        "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{regs + 2}, 0;\\n"\n'
        f'        "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ab}.{ab} "\n'
        f'        "{{{dlist}}}, %{regs}, %{regs + 1}, p, 1, 1, {trans_a}, {trans_b};\\n}}\\n"\n'
        f"        : {outs}\n"
        f'        : "l"(a), "l"(b), "r"(scale_d));\n'
        f"}}\n"
    )


# ---- layouts and shared memory ---------------------------------------------------------------


@dataclass(frozen=True)
class WgmmaAcc:
    """The register layout of a wgmma accumulator [m, n] in one warpgroup: warp w holds rows
    16w .. 16w + 15 of each 64-row block, and lane l of it, for each 8-column block, the
    elements (l / 4, 2 (l % 4) + {0, 1}) and (l / 4 + 8, 2 (l % 4) + {0, 1}) of its 16 rows."""

    m: int
    n: int


@dataclass
class SmemBuf:
    offset: int
    dtype: str
    shape: tuple[int, ...]
    swizzle: int

    @property
    def esize(self) -> int:
        return DTYPES[self.dtype].nbytes

    @property
    def rows(self) -> int:
        return self.shape[-2] if len(self.shape) >= 2 else 1

    @property
    def nbytes(self) -> int:
        return cbase._prod(self.shape) * self.esize

    @property
    def atom(self) -> int:
        """Elements per row of one chunk (the whole row when unswizzled)."""
        return self.swizzle // self.esize if self.swizzle else self.shape[-1]

    @property
    def chunk_bytes(self) -> int:
        return self.rows * self.swizzle


@dataclass
class View:
    """A shared view: the origin's coordinates (C++) and the view's static shape."""

    buf: SmemBuf
    origin: list[str]
    shape: tuple[int, ...]
    full_width: bool  # the last dimension is taken whole


@dataclass
class TmaDesc:
    arg: str  # KIR argument name
    cname: str  # its C++ pointer
    dtype: str
    dims: list[str]  # C++, innermost first
    strides: list[str]  # bytes, C++, for dimensions 1..rank-1 (innermost first)
    box: list[int]  # innermost first
    swizzle: int
    param: str = ""


@dataclass
class LaunchInfo:
    threads: int
    smem_bytes: int
    grid: list[str]  # C++ over shape symbols and parameters
    params: dict[str, int]
    tma: list[TmaDesc] = field(default_factory=list)


# ---- the generator -------------------------------------------------------------------------------


class CudaGen(KernelGen):
    def __init__(self, program: Program, params: dict[str, int]):
        super().__init__(program, params, CUDA)
        self.handlers.update(
            {
                ex.SmemAllocOp: lambda op: None,  # carved before the body
                ex.MBarrierAllocOp: lambda op: None,  # initialized before the body
                ex.SizeofOp: self.op_sizeof,
                ex.ExpectOp: self.op_expect,
                ex.ArriveOp: self.op_arrive,
                ex.WaitOp: self.op_wait,
                ex.TmaLoadOp: self.op_tma_load,
                ex.TmaStoreOp: self.op_tma_store,
                ex.TmaStoreWaitOp: self.op_tma_store_wait,
                ex.CpAsyncOp: self.op_cp_async,
                ex.CpAsyncCommitOp: lambda op: self.w.line("kir_cp_async_commit();", op),
                ex.CpAsyncWaitOp: lambda op: self.w.line(f"kir_cp_async_wait<{self.pending_count(op)}>();", op),
                ex.CtaBarrierOp: lambda op: self.w.line(f"{self.dialect.barrier};", op),
                ex.FenceAsyncOp: lambda op: self.w.line("kir_fence_proxy_async();", op),
                ex.WgmmaOp: self.op_wgmma,
                ex.WgmmaWaitOp: self.op_wgmma_wait,
                st.RoleOp: self.op_role_misplaced,
                st.RoleRankOp: self.op_role_rank,
            }
        )
        self.smem: dict[SSAValue, SmemBuf] = {}
        self.mbars: dict[SSAValue, tuple[int, int, int]] = {}  # offset, count, size
        self.tma: list[TmaDesc] = []
        self.wgmma_shapes: set[tuple[int, str, int, int]] = set()  # N, dtype, imm-trans-a, imm-trans-b
        self.acc_shape: dict[SSAValue, tuple[sx.SymExpr, sx.SymExpr]] = {}
        self.wgmma_targets: list[tuple[str, int, Block | None]] = []
        self.wait_lines: list[tuple[int, Operation, str]] = []  # writer line, op, indentation
        self.smem_reading_roles: set[int] = set()  # ids of roles (or of None: the CTA) that ld shared buffers
        self.role_order: list[st.RoleOp] = []
        # wgmmas whose accumulator starts at zero: on the first step of this loop (None: always)
        self.zero_starts: dict[Operation, st.ForOp | None] = {}

    # ---- planning ---------------------------------------------------------------------------

    def plan(self) -> None:
        """Carve shared memory and choose the accumulator layouts before any code is written."""
        offset = 0
        for op in self.kernel.walk():
            if allocates(op) and op.parent_op() is not self.kernel:
                raise Unsupported(
                    op, "the cuda backend allocates shared buffers and mbarriers at the top level of the kernel only"
                )
            self.current_op = op
            if isinstance(op, ex.SmemAllocOp):
                t = op.res.type
                buf = SmemBuf(0, dtype_of(t), self.static_shape(t), t.swizzle.data)
                if buf.swizzle:
                    if len(buf.shape) < 2:
                        raise Unsupported(op, "a swizzled shared buffer has at least two dimensions")
                    if (buf.shape[-1] * buf.esize) % buf.swizzle:
                        raise Unsupported(
                            op,
                            f"a swizzle({buf.swizzle}) buffer needs rows of a multiple of {buf.swizzle} bytes; "
                            f"these are {buf.shape[-1] * buf.esize}",
                            f"widen the last dimension to a multiple of {buf.swizzle // buf.esize} elements, or use a smaller swizzle",
                        )
                align = 1024 if buf.swizzle else 128
                offset = -(-offset // align) * align
                buf.offset = offset
                offset += buf.nbytes
                self.smem[op.res] = buf
            elif isinstance(op, ex.MBarrierAllocOp):
                offset = -(-offset // 8) * 8
                size = self.static(op.res.type.size.data, "the mbarrier count")
                count = self.static(op.count.data, "the arrival count")
                self.mbars[op.res] = (offset, count, size)
                offset += 8 * size
        self.current_op = None
        self.scratch_base = -(-offset // 16) * 16
        self.plan_accumulators()
        for op in self.kernel.walk():
            if isinstance(op, tl.LoadOp) and isinstance(op.mem.type, SmemType):
                role: Operation | None = op
                while role is not None and not isinstance(role, st.RoleOp):
                    role = role.parent_op()
                self.smem_reading_roles.add(id(role))

    def plan_accumulators(self) -> None:
        """Tiles connected to a wgmma accumulator (through loops, branches and elementwise ops
        of the same shape) are held in the wgmma register layout."""
        parent: dict[SSAValue, SSAValue] = {}

        def find(v: SSAValue) -> SSAValue:
            while parent.get(v, v) is not v:
                v = parent[v]
            return v

        def union(a: SSAValue, b: SSAValue) -> None:
            parent.setdefault(a, a)
            parent.setdefault(b, b)
            ra, rb = find(a), find(b)
            if ra is not rb:
                parent[ra] = rb

        def same_shape(a: SSAValue, b: SSAValue) -> bool:
            sa, sb = shape_of(a.type), shape_of(b.type)
            return len(sa) == len(sb) and all(sx.same(x, y) for x, y in zip(sa, sb, strict=True))

        roots = []
        for op in self.kernel.walk():
            if isinstance(op, ex.WgmmaOp):
                union(op.acc, op.res)
                roots.append(op.acc)
            elif isinstance(op, st.ForOp):
                y = cast(st.YieldOp, op.body.block.last_op)  # a verified loop body ends with its yield
                for init, arg, res, out in zip(op.inits, op.body.block.args[1:], op.res, y.values, strict=True):
                    if isinstance(init.type, TileType):
                        union(init, arg)
                        union(arg, res)
                        union(res, out)
            elif isinstance(op, st.IfOp):
                for region in (op.then_body, op.else_body):
                    if region.blocks:
                        for r, out in zip(op.res, cast(st.YieldOp, region.block.last_op).values, strict=True):
                            if isinstance(r.type, TileType):
                                union(r, out)
            elif isinstance(
                op, tl.BinaryOp | tl.CompareOp | tl.UnaryOp | tl.WhereOp | tl.CastOp | tl.RandOp | ex.ConvertLayoutOp
            ):
                for v in op.operands:
                    if isinstance(v.type, TileType) and same_shape(v, op.results[0]):
                        union(v, op.results[0])
        acc_roots = {find(v) for v in roots}
        for v in parent:
            if find(v) in acc_roots:
                m, n = shape_of(v.type)
                self.acc_shape[v] = (m, n)

    # ---- layouts ------------------------------------------------------------------------------

    def layout_of(self, v: SSAValue) -> object:
        if v in self.acc_shape:
            m, n = (self.static(d, "the accumulator dimension") for d in self.acc_shape[v])
            if m % 64 or n % 8:
                raise Unsupported(self.current_op, f"a wgmma accumulator is [64 k, 8 j]; this one is [{m}, {n}]")
            return WgmmaAcc(m, n)
        return super().layout_of(v)

    def slots(self, layout: object, shape: tuple[int, ...]) -> int:
        if isinstance(layout, WgmmaAcc):
            return (layout.m // 64) * (layout.n // 2)
        return super().slots(layout, shape)

    def open_slots(self, layout: object, shape: tuple[int, ...], op: Operation) -> tuple[list[str], str, int]:
        if not isinstance(layout, WgmmaAcc):
            return super().open_slots(layout, shape, op)
        if self.instance.threads != 128:
            raise Unsupported(
                op,
                "a wgmma accumulator lives in one warpgroup: use it inside a role over warpgroups",
                "put the wgmma and its accumulator in a `role NAME warpgroups(...)`",
            )
        half = layout.n // 2
        decls = [
            (
                "kir_x0",
                f"const int kir_x0 = (kir_i / {half}) * 64 + kir_wl * 16 + (kir_lane >> 2) + ((kir_i >> 1) & 1) * 8;",
            ),
            ("kir_x1", f"const int kir_x1 = ((kir_i % {half}) >> 2) * 8 + (kir_lane & 3) * 2 + (kir_i & 1);"),
            ("kir_e", f"const int kir_e = kir_x0 * {layout.n} + kir_x1;"),
        ]
        self.open_loop(self.slots(layout, shape), decls, op)
        return ["kir_x0", "kir_x1"], "kir_e", 1

    # ---- shared memory --------------------------------------------------------------------------

    def phys(self, buf: SmemBuf, coords: list[str]) -> str:
        """Byte offset (from the aligned shared base) of an element, before the swizzle."""
        shape = buf.shape
        e = buf.esize
        if not buf.swizzle:
            return f"({buf.offset} + {self.linearize(coords, shape)} * {e})"
        outer = self.linearize(coords[:-2], shape[:-2]) if len(shape) > 2 else "0"
        r, col = coords[-2], coords[-1]
        slab = shape[-2] * shape[-1] * e
        atom = buf.atom
        parts = [str(buf.offset)]
        if outer != "0":
            parts.append(f"{outer} * {slab}")
        if shape[-1] > atom:
            parts.append(f"(({col}) / {atom}) * {buf.chunk_bytes}")
        parts.append(f"({r}) * {buf.swizzle}")
        parts.append(f"(({col}) % {atom}) * {e}" if shape[-1] > atom else f"({col}) * {e}")
        return "(" + " + ".join(parts) + ")"

    def smem_offset(self, mem: SSAValue, coords: list[str]) -> str:
        """Byte offset of an element from the aligned shared base, swizzle applied (for the
        generic loads and stores; the TMA and wgmma apply the swizzle themselves)."""
        buf = self.smem[mem]
        return self.swizzled(buf, self.phys(buf, coords))

    def smem_ref(self, mem: SSAValue, coords: list[str]) -> str:
        buf = self.smem[mem]
        return f"*reinterpret_cast<{self.c.ctype(buf.dtype)}*>(kir_smem + {self.smem_offset(mem, coords)})"

    def view(self, mem: SSAValue, access, indices, op: Operation) -> View:
        buf = self.smem.get(mem)
        if buf is None:
            raise Unsupported(op, "internal: not a shared buffer")
        origin: list[str] = []
        shape: list[int] = []
        indices = list(indices)
        full_width = True
        for d, n in enumerate(buf.shape):
            last = d == len(buf.shape) - 1
            if d >= len(access.dims):  # a trailing dimension, taken whole
                origin.append("0")
                shape.append(n)
                continue
            v = indices[d]
            if isinstance(v.type, TileType):
                raise Unsupported(op, "a shared view is indexed with scalars and slices")
            origin.append(self.val(v).name)
            if access.dims[d] is None:
                full_width = full_width and not last
            else:
                extent = self.static(access.dims[d], "the slice extent")
                shape.append(extent)
                if last and not (self.const_value(v) == 0 and extent == n):
                    full_width = False
        return View(buf, origin, tuple(shape), full_width)

    def smem_addr(self, view: View, coords: list[str] | None = None) -> str:
        return f"kir_smem_addr + {self.phys(view.buf, coords or view.origin)}"

    def mbar_addr(self, bar: SSAValue, index: SSAValue) -> str:
        off, _, _ = self.mbars[bar]
        return f"kir_smem_addr + {off} + 8 * ({self.val(index).name})"

    # ---- units and effects ------------------------------------------------------------------------

    def unit_sync_before(self, op: Operation) -> None:
        """Before one thread acts for its unit (an arrive releasing a buffer, a TMA copy
        overwriting one) in a unit whose threads also read shared buffers themselves, the
        unit's threads meet: KIR runs a unit's statements in order, so its reads come first."""
        inst = self.instance
        if not inst.single and id(inst.role) in self.smem_reading_roles:
            self.w.line(f"{inst.unit_sync};", op)

    def op_sizeof(self, op: ex.SizeofOp) -> None:
        view = self.view(op.mem, op.access.data, op.indices, op)
        self.vals[op.res] = Scalar(str(cbase._prod(view.shape) * view.buf.esize), "i32")

    def op_expect(self, op: ex.ExpectOp) -> None:
        closers = self.effect_open(op)
        self.w.line(f"kir_mbar_expect({self.mbar_addr(op.bar, op.bar_index)}, {self.val(op.nbytes).name});", op)
        self.close(closers)

    def op_arrive(self, op: ex.ArriveOp) -> None:
        self.unit_sync_before(op)
        closers = self.effect_open(op)
        addr = self.mbar_addr(op.bar, op.bar_index)
        n = op.count.data
        self.w.line(f"kir_mbar_arrive({addr});" if n == 1 else f"kir_mbar_arrive_n({addr}, {n});", op)
        self.close(closers)

    def op_wait(self, op: ex.WaitOp) -> None:
        self.w.line(f"kir_mbar_wait({self.mbar_addr(op.bar, op.bar_index)}, {self.val(op.parity).name});", op)

    # ---- TMA -------------------------------------------------------------------------------------

    def tma_box(
        self, op: Operation, g_val: SSAValue, g_access, g_indices, view: View
    ) -> tuple[cbase.GlobalArg, list[str], list[int], int, int]:
        """The TMA copy of a global box to or from a shared view: (global, coordinates and box
        innermost first, chunk width in elements, number of chunks)."""
        g = self.global_arg(g_val)
        buf = view.buf
        if sx.fold(g.strides[-1]) != sx.Int(1):
            raise Unsupported(op, "the TMA needs the tensor's last dimension contiguous (stride 1)")
        coords, box = [], []
        for d, v in enumerate(g_indices):
            coords.append(self.val(v).name)
            box.append(1 if g_access.dims[d] is None else self.static(g_access.dims[d], "the box extent"))
        if g_access.dims[-1] is None:
            raise Unsupported(op, "a TMA box slices the tensor's last dimension")
        if len(view.shape) > 2:
            raise Unsupported(op, "the cuda backend copies TMA boxes into one- or two-dimensional shared views")
        if not view.full_width:
            raise Unsupported(
                op, "a TMA copy covers whole rows of its shared buffer", "slice the buffer's leading dimensions only"
            )
        width = box[-1]
        e = buf.esize
        if buf.swizzle:
            atom = buf.atom
            chunks = width // atom
        else:
            atom, chunks = width, 1
            if (width * e) % 16:
                raise Unsupported(op, f"a TMA box row is a multiple of 16 bytes; this one is {width * e}")
        if any(b > 256 for b in [*box[:-1], atom]):
            raise Unsupported(op, f"a TMA box dimension is at most 256 elements (box {box})", "split the copy")
        rows = view.shape[0] if len(view.shape) == 2 else 1
        if cbase._prod(box[:-1]) != rows:
            raise Unsupported(op, f"the TMA box {box} does not match the shared view {list(view.shape)}")
        return g, coords[::-1], [atom, *box[:-1][::-1]], atom, chunks

    def tma_desc(self, g: cbase.GlobalArg, arg: str, box: list[int], swizzle: int) -> str:
        """The kernel parameter of the tensor map for (tensor, box, swizzle), made once."""
        e = DTYPES[g.dtype].nbytes
        dims = [self.c_sym(d) for d in g.shape[::-1]]
        strides = [f"(unsigned long long)({self.c_sym(s)}) * {e}" for s in g.strides[::-1][1:]]
        for t in self.tma:
            if t.arg == arg and t.box == box and t.swizzle == swizzle:
                return t.param
        desc = TmaDesc(arg, g.name, g.dtype, dims, strides, box, swizzle, f"kir_tmap{len(self.tma)}")
        self.tma.append(desc)
        return desc.param

    def op_tma_load(self, op: ex.TmaLoadOp) -> None:
        view = self.view(op.dst, op.dst_access.data, op.dst_indices, op)
        g, coords, box, atom, chunks = self.tma_box(op, op.src, op.src_access.data, op.src_indices, view)
        tmap = self.tma_desc(g, self.arg_name(op.src), box, view.buf.swizzle)
        bar = self.mbar_addr(op.bar, op.bar_index)
        self.unit_sync_before(op)
        closers = self.effect_open(op)
        for ch in range(chunks):
            dst = self.smem_addr(view, [*view.origin[:-1], str(ch * atom)])
            crd = [f"{coords[0]} + {ch * atom}" if ch else coords[0], *coords[1:]]
            self.w.line(f"kir_tma_load_{len(coords)}d({dst}, &{tmap}, {', '.join(crd)}, {bar});", op)
        self.close(closers)

    def op_tma_store(self, op: ex.TmaStoreOp) -> None:
        view = self.view(op.src, op.src_access.data, op.src_indices, op)
        g, coords, box, atom, chunks = self.tma_box(op, op.dst, op.dst_access.data, op.dst_indices, view)
        tmap = self.tma_desc(g, self.arg_name(op.dst), box, view.buf.swizzle)
        if not self.instance.single and not self.next_to_barrier(op, before=True):
            self.w.line(f"{self.instance.unit_sync};", op)  # every thread's writes are in
        closers = self.effect_open(op)
        for ch in range(chunks):
            src = self.smem_addr(view, [*view.origin[:-1], str(ch * atom)])
            crd = [f"{coords[0]} + {ch * atom}" if ch else coords[0], *coords[1:]]
            self.w.line(f"kir_tma_store_{len(coords)}d(&{tmap}, {', '.join(crd)}, {src});", op)
        self.w.line("kir_bulk_commit();", op)
        self.close(closers)

    def op_tma_store_wait(self, op: ex.TmaStoreWaitOp) -> None:
        closers = self.effect_open(op)
        self.w.line(f"kir_bulk_wait_read<{self.pending_count(op)}>();", op)
        self.close(closers)
        if not self.instance.single:
            self.w.line(f"{self.instance.unit_sync};", op)  # the issuing thread has seen it retire

    def arg_name(self, v: SSAValue) -> str:
        for name, a in self.kernel.args:
            if a is v:
                return name
        raise Unsupported(self.current_op, "internal: not a kernel argument")

    # ---- cp.async --------------------------------------------------------------------------------

    def op_cp_async(self, op: ex.CpAsyncOp) -> None:
        view = self.view(op.dst, op.dst_access.data, op.dst_indices, op)
        dt = view.buf.dtype
        size = view.buf.esize
        if size not in (4, 8):
            raise Unsupported(
                op,
                f"the cuda backend copies cp.async one element at a time, and cp.async moves 4, 8 or 16 bytes; {dt} has {size}",
                "use tma.load for 1- and 2-byte dtypes",
            )
        shape = view.shape
        layout = Cyclic(self.instance.threads, self.instance.tid)
        masks = [op.mask] if op.mask is not None and isinstance(op.mask.type, TileType) else []
        staged = self.begin_exchange(masks, shape, layout, op)
        idx, _, closers = self.open_slots(layout, shape, op)
        src = self.element_ref(op, op.src, op.src_access.data, op.src_indices, idx, shape, layout)
        coords = self.coords(op.dst_access.data, op.dst_indices, idx, shape, len(view.buf.shape), layout)
        dst = f"kir_smem_addr + {self.smem_offset(op.dst, coords)}"
        mask = self.mask_at(op, shape, layout, idx)
        if mask is None:
            self.w.line(f"kir_cp_async<{size}>({dst}, &{src}, true);", op)
        else:
            base = self.global_arg(op.src).name
            self.w.line(f"kir_cp_async<{size}>({dst}, {mask} ? (const void*)&{src} : (const void*){base}, {mask});", op)
        self.close(closers)
        self.end_exchange(staged, op)

    def swizzled(self, buf: SmemBuf, off: str) -> str:
        return f"kir_swz<{SWIZZLE_MASK[buf.swizzle]}>({off})" if buf.swizzle else off

    # ---- wgmma -----------------------------------------------------------------------------------

    @staticmethod
    def is_zeros(v: SSAValue) -> bool:
        """Whether `v` is `zeros(...)` or `full(..., 0)`."""
        owner = v.owner
        if isinstance(owner, tl.ZerosOp):
            return True
        if isinstance(owner, tl.FullOp) and isinstance(owner.value.owner, tl.ConstOp):
            return owner.value.owner.number == 0
        return False

    def zero_started_wgmma(self, op: st.ForOp, init: SSAValue, arg: SSAValue) -> ex.WgmmaOp | None:
        """The wgmma that starts from the loop-carried accumulator `arg` when it enters the loop
        as zeros (used by the loop alone), is used by that wgmma alone, and the wgmma runs on
        every step (it is in the loop's body, not in a branch): on the first step its input is
        the zeros, so it can discard its input instead."""
        if not self.is_zeros(init) or len(list(init.uses)) != 1 or len(list(arg.uses)) != 1:
            return None
        src = self.val(init)
        if not (isinstance(src, Tile) and src.lazy and isinstance(src.layout, WgmmaAcc)):
            return None
        user = next(iter(arg.uses)).operation
        if isinstance(user, ex.WgmmaOp) and user.acc is arg and user.parent_block() is op.body.block:
            return user
        return None

    def op_for(self, op: st.ForOp) -> None:
        """A loop that carries a wgmma accumulator from zeros: the zeros are not written into its
        registers (a non-wgmma instruction defining them makes ptxas serialize the wgmmas,
        C7515); the first step's wgmma discards the accumulator's input instead (scale-d 0), and
        the zeros are written only when the loop runs no step at all."""
        starts = [
            (init, arg, wg)
            for init, arg in zip(op.inits, op.body.block.args[1:], strict=True)
            if (wg := self.zero_started_wgmma(op, init, arg)) is not None
        ]
        lo, hi = (self.val(v).name for v in (op.lower, op.upper))
        for init, arg, wg in starts:
            storage = self.declare(init, op, self.name_for(arg), bind=False)
            self.w.line(f"if (!({lo} < {hi})) {{  // the loop runs no step: its result is the zeros", op)
            self.w.indent()
            self.copy(storage, init, op)
            self.w.dedent()
            self.w.line("}", op)
            self.vals[init] = storage  # the loop takes this storage over in place
            self.zero_starts[wg] = op
        super().op_for(op)

    def scale_d(self, op: ex.WgmmaOp) -> str:
        """The scale-d operand of the wgmma's first instruction into each accumulator block:
        0 where the accumulator is known to be zero, else 1 (D = A B + D)."""
        if op not in self.zero_starts:
            return "1"
        loop = self.zero_starts[op]
        if loop is None:
            return "0"
        return f"{self.val(loop.body.block.args[0]).name} != {self.val(loop.lower).name}"

    def op_wgmma(self, op: ex.WgmmaOp) -> None:
        inst = self.instance
        role = inst.role
        if inst.threads != 128 or (role is not None and role.unit.data != "warpgroups"):
            raise Unsupported(op, "wgmma is issued by one warpgroup: put it in a role over warpgroups")
        if op.a_in_registers:
            raise Unsupported(
                op,
                "the cuda backend takes wgmma's A operand from shared memory, not from registers",
                "store the tile to a swizzled shared buffer, fence.async(), and pass that view",
            )
        a = self.view(op.a, op.a_access.data, op.a_indices, op)
        b = self.view(op.b, op.b_access.data, op.b_indices, op)
        ab = a.buf.dtype
        if ab not in ("bf16", "f16") or dtype_of(op.acc.type) != "f32":
            raise Unsupported(
                op,
                f"the cuda backend issues wgmma on bf16 or f16 operands into an f32 accumulator (here {ab} into {dtype_of(op.acc.type)})",
                "stage the operands as bf16 or f16 and accumulate in f32",
            )
        ta, tb = op.is_trans_a, op.is_trans_b
        # the product is [M, K] x [K, N]; a trans(view) operand is stored transposed
        m, k = a.shape[::-1] if ta else a.shape
        n = b.shape[0] if tb else b.shape[1]
        for name, v in (("A", a), ("B", b)):
            if not v.buf.swizzle:
                raise Unsupported(
                    op, f"wgmma reads its {name} operand from a swizzled buffer (swizzle = 128, 64 or 32)"
                )
            if not v.full_width:
                raise Unsupported(
                    op, f"wgmma's {name} operand spans whole rows of its buffer", "slice the leading dimensions only"
                )
        if m % 64 or k % 16:
            raise Unsupported(op, f"wgmma takes M a multiple of 64 and K a multiple of 16 (here {m} x {k})")
        atom_a, atom_b = a.buf.atom, b.buf.atom
        if ta and 64 % atom_a:
            raise Unsupported(
                op,
                f"wgmma's M-major A operand takes 64-row blocks of whole {a.buf.swizzle}-byte chunks ({atom_a} columns)",
            )
        if not tb and n % atom_b:
            raise Unsupported(
                op,
                f"wgmma's B operand ({n} columns) is a whole number of {b.buf.swizzle}-byte chunks ({atom_b} columns)",
            )
        if tb and n % 8:
            raise Unsupported(op, f"wgmma's K-major B operand has a multiple of 8 rows (here {n})")
        step = 8 if tb else atom_b  # the N of one instruction: whole chunks when B is N-major
        n_instr = n if n <= 256 else max(x for x in range(step, 257, step) if n % x == 0)
        acc = self.val(op.acc)
        assert isinstance(acc, Tile)
        if not isinstance(acc.layout, WgmmaAcc):
            raise Unsupported(op, "internal: the accumulator is not in the wgmma layout")
        if acc.lazy:  # zeros(...) straight into the wgmma: give it registers
            zeros = self.is_zeros(op.acc)
            acc = self.declare(op.res, op)
            assert isinstance(acc, Tile)
            if zeros:
                self.zero_starts[op] = None  # the wgmma discards the registers' contents
            else:
                self.copy(acc, op.acc, op)
        elif self.single_use(op.acc, op) and acc.name not in self.views:
            self.vals[op.res] = acc  # the wgmma accumulates in place
        else:
            raise Unsupported(
                op,
                "the accumulator passed to wgmma is used again after it; wgmma updates it in place, asynchronously",
                "use only the wgmma's result afterwards (acc = wgmma(a, b, acc))",
            )
        slots = self.slots(acc.layout, acc.shape)
        imm_ta, imm_tb = int(ta), int(not tb)
        self.wgmma_shapes.add((n_instr, ab, imm_ta, imm_tb))
        if (acc.name, slots) not in [(t[0], t[1]) for t in self.wgmma_targets]:
            self.wgmma_targets.append((acc.name, slots, self.decl_block.get(acc.name)))
        w = self.w
        e = a.buf.esize
        wa, wb = a.buf.swizzle, b.buf.swizzle
        first_scale = self.scale_d(op)
        w.line(f"kir_fence_regs<{slots}>({acc.name});", op)
        w.line("kir_wgmma_fence();", op)
        w.line("{", op)
        w.indent()
        w.line(f"const uint32_t kir_a = {self.smem_addr(a)};", op)
        w.line(f"const uint32_t kir_b = {self.smem_addr(b)};", op)
        helper = _wgmma_name(n_instr, ab, imm_ta, imm_tb)
        for mt in range(m // 64):
            for kk in range(k // 16):
                kb = kk * 16 * e
                # K-major: rows of the MN dimension W bytes apart in a chunk, K steps along the
                # row (into the next chunk past W bytes). MN-major: K rows W bytes apart, MN
                # blocks of whole chunks (the leading byte offset is the chunk size).
                if ta:
                    a_off = kk * 16 * wa + (mt * 64 // atom_a) * a.buf.chunk_bytes
                    da = f"kir_wgmma_desc(kir_a + {a_off}, {a.buf.chunk_bytes}, {8 * wa}, {SWIZZLE_MODE[wa]})"
                else:
                    a_off = mt * 64 * wa + (kb // wa) * a.buf.chunk_bytes + kb % wa
                    da = f"kir_wgmma_desc(kir_a + {a_off}, 16, {8 * wa}, {SWIZZLE_MODE[wa]})"
                for nt in range(n // n_instr):
                    if tb:
                        b_off = nt * n_instr * wb + (kb // wb) * b.buf.chunk_bytes + kb % wb
                        db = f"kir_wgmma_desc(kir_b + {b_off}, 16, {8 * wb}, {SWIZZLE_MODE[wb]})"
                    else:
                        b_off = kk * 16 * wb + (nt * n_instr // atom_b) * b.buf.chunk_bytes
                        db = f"kir_wgmma_desc(kir_b + {b_off}, {b.buf.chunk_bytes}, {8 * wb}, {SWIZZLE_MODE[wb]})"
                    d_off = mt * (acc.layout.n // 2) + nt * (n_instr // 2)
                    scale = first_scale if kk == 0 else "1"
                    w.line(f"{helper}({acc.name} + {d_off}, {da}, {db}, {scale});", op)
        w.dedent()
        w.line("}", op)
        w.line("kir_wgmma_commit();", op)
        w.line(f"kir_fence_regs<{slots}>({acc.name});", op)

    def op_wgmma_wait(self, op: ex.WgmmaWaitOp) -> None:
        self.w.line(f"kir_wgmma_wait<{self.pending_count(op)}>();", op)
        self.w.line("KIR_WAIT_FENCES", op)  # filled in once every accumulator is known
        self.wait_lines.append((len(self.w.lines), op, self.w.indent_unit * self.w.depth))

    def resolve_wait_fences(self) -> None:
        for line_no, op, indent in self.wait_lines:
            ancestors = set()
            block = op.parent_block()
            while block is not None:
                ancestors.add(id(block))
                parent = block.parent_op()
                block = parent.parent_block() if parent is not None else None
            # an accumulator declared after the wait (later in the same loop body) is not in scope
            fences = [
                f"kir_fence_regs<{n}>({name});"
                for name, n, blk in self.wgmma_targets
                if (blk is None or id(blk) in ancestors) and self.decl_line.get(name, 0) < line_no
            ]
            self.w.lines[line_no - 1] = indent + (" ".join(fences) if fences else "// no accumulator in flight here")

    # ---- stores -------------------------------------------------------------------------------------

    def op_store(self, op: tl.StoreOp) -> None:
        """A store to a shared buffer by the unit's threads: KIR runs a unit's statements in
        order, but its elements are another thread's to read back (or were another thread's to
        read before), so the unit's threads meet around it, unless the program's own barrier
        (or the TMA store, which meets first) follows."""
        smem = isinstance(op.mem.type, SmemType) and not self.instance.single
        if smem and id(self.instance.role) in self.smem_reading_roles and not self.next_to_barrier(op, before=True):
            self.w.line(f"{self.instance.unit_sync};  // earlier reads of shared memory are done", op)
        super().op_store(op)
        if smem and not self.next_to_barrier(op, before=False):
            self.w.line(f"{self.instance.unit_sync};  // the stored elements are visible to the unit", op)

    @staticmethod
    def next_to_barrier(op: Operation, before: bool) -> bool:
        """Whether a CTA barrier (or, after `op`, a TMA store, which meets first) is adjacent
        to `op` in its block, fences and scalar arithmetic aside."""
        ops = list(cast(Block, op.parent_block()).ops)
        k = ops.index(op)
        seq = ops[:k][::-1] if before else ops[k + 1 :]
        for other in seq:
            scalar = other.results and all(isinstance(r.type, ScalarType) for r in other.results)
            if isinstance(other, ex.FenceAsyncOp) or (scalar and not isinstance(other, tl.LoadOp | tl.AtomicOp)):
                continue  # fences and scalar arithmetic touch no shared memory
            return isinstance(other, ex.CtaBarrierOp) or (not before and isinstance(other, ex.TmaStoreOp))
        return False

    # ---- stores from the accumulator layout ---------------------------------------------------------

    def pairs_adjacent(self, op: tl.StoreOp) -> bool:
        """Whether the memory holds the tile's neighbouring columns next to each other: a global
        tensor sliced in every dimension with a contiguous last one, or a shared buffer whose
        last dimension the tile's columns run along (its rows are contiguous, and a swizzle
        moves whole 16-byte units, which an aligned pair never straddles)."""
        access = op.access.data
        g = self.globals.get(op.mem)
        if g is not None:
            return all(d is not None for d in access.dims) and sx.fold(g.strides[-1]) == sx.Int(1)
        buf = self.smem.get(op.mem)
        if buf is None or buf.dtype != dtype_of(op.value.type):
            return False
        scalar_points = all(not isinstance(v.type, TileType) for v in op.indices)
        return scalar_points and (len(access.dims) < len(buf.shape) or access.dims[-1] is not None)

    def store_tile(self, op: tl.StoreOp, shape: tuple[int, ...], layout: object) -> None:
        value = self.val(op.value)
        pairable = (
            isinstance(layout, WgmmaAcc)
            and isinstance(value, Tile)
            and value.layout == layout
            and not value.lazy
            and op.mask is None
            and DTYPES[value.dtype].nbytes in (2, 4)
            and self.pairs_adjacent(op)
        )
        if not pairable:
            super().store_tile(op, shape, layout)
            return
        # two neighbouring columns per thread: one 2-element store when the address allows
        w = self.w
        ct = self.c.ctype(value.dtype)
        half = layout.n // 2
        decls = [
            (
                "kir_x0",
                f"const int kir_x0 = (kir_i / {half}) * 64 + kir_wl * 16 + (kir_lane >> 2) + ((kir_i >> 1) & 1) * 8;",
            ),
            ("kir_x1", f"const int kir_x1 = ((kir_i % {half}) >> 2) * 8 + (kir_lane & 3) * 2;"),
        ]
        self.open_loop(self.slots(layout, shape), decls, op, step=2)
        access = op.access.data
        ref = self.element_ref(op, op.mem, access, op.indices, ["kir_x0", "kir_x1"], shape, layout)
        pair = f"*reinterpret_cast<kir_pair<{ct}>*>(kir_p) = kir_pair<{ct}>{{{value.name}[kir_i], {value.name}[kir_i + 1]}};"
        w.line(f"{ct}* kir_p = &{ref};", op)
        if self.smem_pair_aligned(op):
            w.line(pair, op)
            self.close(1)
            return
        # in a swizzled buffer the second element's address is its own (a misaligned pair may
        # straddle two 16-byte units)
        second = (
            "kir_p[1]"
            if op.mem in self.globals
            else self.element_ref(op, op.mem, access, op.indices, ["kir_x0", "kir_x1 + 1"], shape, layout)
        )
        w.line(f"if ((reinterpret_cast<uintptr_t>(kir_p) & {2 * DTYPES[value.dtype].nbytes - 1}) == 0) {{", op)
        w.line(f"    {pair}", op)
        w.line("} else {", op)
        w.line(f"    kir_p[0] = {value.name}[kir_i];", op)
        w.line(f"    {second} = {value.name}[kir_i + 1];", op)
        w.line("}", op)
        self.close(1)

    def smem_pair_aligned(self, op: tl.StoreOp) -> bool:
        """Whether every pair of a store into a shared buffer starts on a pair boundary, known
        at compile time: the buffer's base is aligned (to 128 bytes at least), its rows are an
        even number of elements, and the slice of the last dimension starts at an even constant."""
        buf = self.smem.get(op.mem)
        if buf is None or (not buf.swizzle and buf.shape[-1] % 2):
            return False
        access = op.access.data
        if len(access.dims) < len(buf.shape):
            return True  # the last dimension is taken whole
        start = self.const_value(list(op.indices)[-1])
        return start is not None and start % 2 == 0

    # ---- roles ---------------------------------------------------------------------------------------

    def op_role_misplaced(self, op: st.RoleOp) -> None:
        raise Unsupported(op, "roles appear at the top level of the kernel")

    def op_role_rank(self, op: st.RoleRankOp) -> None:
        if self.instance.rank is None:
            raise Unsupported(op, "role_rank() is used inside a role")
        self.vals[op.res] = Scalar(self.instance.rank, "i32")

    def register_cap(self) -> int:
        """Registers per thread that `__launch_bounds__(threads, 1)` leaves each thread."""
        warps = -(-self.threads // 32)
        return min(255, (65536 // (warps * 32)) // 8 * 8)

    def check_register_budget(self, roles: list[st.RoleOp]) -> None:
        cap = self.register_cap()
        covered: dict[int, int] = {}
        for role in roles:
            unit = 128 if role.unit.data == "warpgroups" else 32
            for i in role.id_list:
                if (i + 1) * unit > self.threads:
                    raise Unsupported(
                        role,
                        f"role `{role.name_text}` names {role.unit.data[:-1]} {i}, beyond the kernel's {self.threads} threads",
                    )
                for t in range(i * unit // 32, (i + 1) * unit // 32):
                    covered[t] = role.regs.data if role.regs.data and role.unit.data == "warpgroups" else cap
        total = sum(covered.get(wid, cap) * 32 for wid in range(-(-self.threads // 32)))
        if total > 65536:
            raise Unsupported(
                roles[0],
                f"the roles' register budgets need {total} registers, more than the 65536 of an SM: setmaxnreg.inc would wait forever",
                "lower the budgets so that sum(regs x threads) fits in 65536",
            )

    def runs_single(self, role: st.RoleOp) -> bool:
        """A role whose body holds no tile (a TMA producer) runs on one elected thread of each
        unit: the unit's other threads would only repeat its waits."""
        for op in role.body.walk():
            if isinstance(
                op, ex.WgmmaOp | ex.WgmmaWaitOp | ex.CtaBarrierOp | ex.CpAsyncOp | ex.CpAsyncWaitOp | ex.CpAsyncCommitOp
            ):
                return False
            if any(isinstance(v.type, TileType) for v in [*op.operands, *op.results]):
                return False
        return True

    def emit_roles(self, roles: list[st.RoleOp]) -> None:
        self.check_register_budget(roles)
        cap = self.register_cap()
        w = self.w
        cta = self.instance
        for k, role in enumerate(roles):
            unit = role.unit.data
            size = 128 if unit == "warpgroups" else 32
            uvar = "kir_wg" if unit == "warpgroups" else "kir_warp"
            ids = role.id_list
            cond = " || ".join(f"{uvar} == {i}" for i in ids)
            w.line(f"{'if' if k == 0 else '} else if'} ({cond}) {{  // role {role.name_text}", role)
            w.indent()
            regs = role.regs.data
            if regs and unit == "warpgroups" and regs != cap:
                w.line(f"kir_setmaxnreg_{'inc' if regs > cap else 'dec'}<{regs}>();", role)
            elif regs and unit != "warpgroups":
                w.line(f"// regs({regs}) is not applied: setmaxnreg acts on whole warpgroups", role)
            if ids == list(range(ids[0], ids[0] + len(ids))):
                rank = f"{uvar} - {ids[0]}" if ids[0] else uvar
            else:
                rank = " : ".join(f"{uvar} == {i} ? {r}" for r, i in enumerate(ids[:-1])) + f" : {len(ids) - 1}"
            rank_name = self.fresh("kir_rank")
            if any(isinstance(o, st.RoleRankOp) for o in role.body.walk()):
                w.line(f"const int {rank_name} = {rank};", role)
            single = self.runs_single(role)
            tid = f"(kir_tid % {size})"
            sync = "__syncwarp()" if size == 32 else f"kir_bar_sync(1 + {uvar}, 128)"
            # each unit of the role has its own scratch area: the role's base, plus its rank
            # times the bytes one unit uses (both known once the body is written)
            at = f"kir_scr{k}_base + ({rank}) * kir_scr{k}_unit"
            self.instance = Instance(
                size,
                tid,
                f"{tid} == 0",
                cta=False,
                unit_sync=sync,
                single=single,
                role=role,
                rank=rank_name,
                scratch_at=at,
            )
            self.role_order.append(role)
            if single:
                w.line(f"if ({tid} == 0) {{  // the role holds no tile: one thread runs it", role)
                w.indent()
            self.emit_block(role.body.block)
            if single:
                self.close(1)
            w.dedent()
        w.line("}")
        self.instance = cta

    # ---- the kernel --------------------------------------------------------------------------------

    def emit_body(self) -> None:
        ops = list(self.kernel.body.block.ops)
        roles = [op for op in ops if isinstance(op, st.RoleOp)]
        w = self.w
        if self.mbars:
            w.line("if (kir_tid == 0) {")
            w.indent()
            for v, (off, count, size) in self.mbars.items():
                w.line(
                    f"for (int kir_j = 0; kir_j < {size}; ++kir_j) kir_mbar_init(kir_smem_addr + {off} + 8 * kir_j, {count});",
                    cast(Operation, v.owner),  # the barriers' allocation
                )
            w.line("kir_mbar_init_fence();")
            self.close(1)
            self.sync()
        if not roles:
            self.emit_block(self.kernel.body.block)
            return
        last = ops.index(roles[-1])
        for op in ops[:last]:
            if not isinstance(op, st.RoleOp):
                self.emit_op(op)
        self.sync()  # the roles start after the top-level statements before them
        self.emit_roles(roles)
        rest = ops[last + 1 :]
        if rest:
            self.sync()  # the statements after the roles run once every role has ended
            for op in rest:
                self.emit_op(op)

    def role_scratch(self) -> list[tuple[int, int, int]]:
        """Per role (in order): the base of its units' scratch areas, the bytes of one unit's
        area and of all of them. The CTA's own scratch overlaps them: the top-level code runs
        before the roles start and after they end."""
        out, base = [], 0
        for role in self.role_order:
            unit = -(-self.unit_scratch.get(id(role), 0) // 16) * 16
            total = unit * len(role.id_list)
            out.append((base, unit, total))
            base += total
        return out

    # ---- the kernel --------------------------------------------------------------------------------

    def finish(self) -> None:
        self.resolve_wait_fences()

    def helpers(self) -> list[str]:
        return [
            *super().helpers(),
            CUDA_HELPERS,
            _tma_helpers(),
            *(_wgmma_helper(*key) for key in sorted(self.wgmma_shapes)),
        ]

    def evicting(self, op: tl.LoadOp, ref: str) -> str:
        if op.evict is None:  # the op allows a policy on global tensors only
            return ref
        return f"kir_ld_evict<{'true' if op.evict.data == 'first' else 'false'}>(&{ref})"

    def extra_params(self) -> list[str]:
        return [f"const __grid_constant__ CUtensorMap {t.param}" for t in self.tma]

    def prologue_decls(self) -> list[tuple[str, str]]:
        decls = super().prologue_decls()
        for k, (base, unit, _) in enumerate(self.role_scratch()):
            decls.insert(0, (f"kir_scr{k}_unit", f"constexpr int kir_scr{k}_unit = {unit};"))
            decls.insert(0, (f"kir_scr{k}_base", f"constexpr int kir_scr{k}_base = {base};"))
        aligned = "unsigned char* kir_smem = kir_smem_raw + ((1024 - (kir_smem_u32(kir_smem_raw) & 1023)) & 1023);"
        decls = [(n, aligned if n == "kir_smem" and not t.startswith("//") else t) for n, t in decls]
        decls.append(("kir_smem_addr", "const uint32_t kir_smem_addr = kir_smem_u32(kir_smem);"))
        return decls

    def scratch_bytes(self) -> int:
        return max(self.scratch_max, sum(n for _, _, n in self.role_scratch()))

    def options(self, smem_bytes: int) -> dict:
        launch = LaunchInfo(
            threads=self.threads,
            smem_bytes=smem_bytes,
            grid=[self.c_sym(g.data) for g in self.kernel.grid.data],
            params=dict(self.params),
            tma=list(self.tma),
        )
        return {**super().options(smem_bytes), "launch": launch, "arch": "sm_90a"}


class CudaEmitter(CEmitter):
    name = "cuda"
    levels = ("tile", "explicit")
    dialect = CUDA

    def generate(self, program: Program, params: dict[str, int]) -> Lowered:
        return CudaGen(program, params).generate()
