"""The HIP C++ backend for AMD (CDNA: gfx90a, gfx942), tile level only: one `extern "C"
__global__` kernel per program, compiled with hipcc for gfx90a by `lowering.targets.hip.compile`.
There is no AMD GPU here: the code is compile-verified, never run.

It is the CUDA backend's tile-level generator (`cbase.KernelGen`) with the HIP row of the
dialect table (`HIP` below: `hip_bfloat16` and `__half` with our own conversions, 64-lane
wavefronts, `__syncthreads()`), and three differences of its own:

- **Shared memory (LDS)** is one static `__shared__` array sized at compile time (the scratch
  of the tile-level ops), so the code object states the LDS the kernel needs and the compiler's
  occupancy figure counts it; no launch-time dynamic LDS, no 1024-byte alignment slack (there
  is no swizzle to align for).
- **dot** uses the matrix cores (MFMA, gfx90a and gfx942) when the shapes fit an instruction:
  `__builtin_amdgcn_mfma_f32_32x32x8bf16_1k` / `..._32x32x8f16` / `..._32x32x2f32` for tiles
  whose M and N are multiples of 32, else the 16x16 forms (`..._16x16x16bf16_1k`,
  `..._16x16x16f16`, `..._16x16x4f32`), accumulating in f32. Both operands are staged in LDS
  as on CUDA; each wavefront computes whole output blocks, one block row of the result at a
  time, and the block row goes back to the threads' register tiles through LDS. A dot whose
  shape fits no instruction (or whose dtypes are not f16/bf16/f32 into f32, or a launch that
  is not whole wavefronts) is the shared base's FMA loop.
- **The hardware-explicit level** (TMA, wgmma, mbarriers, cp.async, roles) is refused with a
  `lower.level` diagnostic and a hint; the AMD targets have none of it (verifier/rules/target.py
  says so per op). fp8 dtypes are refused too: gfx90a has no fp8, and hipcc here compiles for
  gfx90a only (gfx942 goes through Triton).
"""

from __future__ import annotations

from kir.diagnostics import Diagnostic, KirError
from kir.dialect import tile as tl
from kir.dialect.types import ScalarType, TileType, dtype_of
from kir.dtypes import DTYPES
from kir.program import Program, span_of
from lowering.emit.base import Lowered, level_refusal
from lowering.emit.cbase import CDialect, CEmitter, KernelGen, Tile, c_types

HIP = CDialect(
    name="hip",
    headers=("hip/hip_runtime.h", "hip/hip_fp16.h", "hip/hip_bfloat16.h", "stdint.h"),
    kernel_qualifier='extern "C" __global__',
    shared="__shared__",
    barrier="__syncthreads()",
    types=c_types("__half", "hip_bfloat16"),
    to_float={"bf16": "kir_bf16_to_f32", "f16": "__half2float"},
    from_float={"bf16": "kir_f32_to_bf16", "f16": "__float2half_rn"},
    from_double={"bf16": "kir_f64_to_bf16", "f16": "kir_f64_to_f16"},
    from_bits={"bf16": "kir_bf16_bits", "f16": "__ushort_as_half"},
    warp_size=64,
)

# hip_bfloat16's own conversions are host-and-device C++ with a truncating mode; ours are the
# interpreter's: round to nearest even, NaN kept (quiet, with its sign). A double narrows in one
# rounding: first to float rounding to odd (exact enough for a second rounding to 16 bits),
# then to the 16-bit type rounding to nearest even.
HIP_HELPERS = r"""
KIR_DEV hip_bfloat16 kir_bf16_bits(unsigned short b) { hip_bfloat16 r; r.data = b; return r; }
KIR_DEV float kir_bf16_to_f32(hip_bfloat16 x) { return __uint_as_float((unsigned int)x.data << 16); }
KIR_DEV hip_bfloat16 kir_f32_to_bf16(float f) {
    unsigned int u = __float_as_uint(f);
    if (f != f) return kir_bf16_bits((unsigned short)((u >> 16) | 0x40));
    u += 0x7fffu + ((u >> 16) & 1u);
    return kir_bf16_bits((unsigned short)(u >> 16));
}
KIR_DEV float kir_f64_to_f32_odd(double d) {
    float f = (float)d;
    if (f != f || isinf(f) || (double)f == d) return f;
    unsigned int u = __float_as_uint(f);
    if (fabs((double)f) > fabs(d)) u -= 1u;  // toward zero, then set the sticky bit
    return __uint_as_float(u | 1u);
}
KIR_DEV hip_bfloat16 kir_f64_to_bf16(double d) { return kir_f32_to_bf16(kir_f64_to_f32_odd(d)); }
KIR_DEV __half kir_f64_to_f16(double d) { return __float2half_rn(kir_f64_to_f32_odd(d)); }
__host__ __device__ constexpr int kir_cdiv(int a, int b) { return (a + b - 1) / b; }
__host__ __device__ constexpr int kir_min(int a, int b) { return a < b ? a : b; }
__host__ __device__ constexpr int kir_max(int a, int b) { return a > b ? a : b; }
// HIP has no 16-bit atomicCAS: a CAS of the aligned 32-bit word that holds the half word
KIR_DEV unsigned short atomicCAS(unsigned short* p, unsigned short cmp, unsigned short val) {
    unsigned int* w = reinterpret_cast<unsigned int*>(reinterpret_cast<uintptr_t>(p) & ~(uintptr_t)3);
    const unsigned int shift = (reinterpret_cast<uintptr_t>(p) & 2) ? 16u : 0u;
    unsigned int old = *w, seen;
    do {
        seen = old;
        if ((unsigned short)(seen >> shift) != cmp) break;
        old = atomicCAS(w, seen, (seen & ~(0xffffu << shift)) | ((unsigned int)val << shift));
    } while (old != seen);
    return (unsigned short)(seen >> shift);
}
"""

# ---- MFMA ----------------------------------------------------------------------------------------

# (input dtype, M = N of one instruction) -> (builtin, K of one instruction, operand elements per
# lane, operand vector type). Operand types are those of clang's BuiltinsAMDGPU.def: bf16 as
# 4 x short (the `_1k` forms), f16 as 4 x _Float16, f32 as one float.
MFMA = {
    ("bf16", 32): ("__builtin_amdgcn_mfma_f32_32x32x8bf16_1k", 8, 4, "kir_short4"),
    ("f16", 32): ("__builtin_amdgcn_mfma_f32_32x32x8f16", 8, 4, "kir_half4"),
    ("f32", 32): ("__builtin_amdgcn_mfma_f32_32x32x2f32", 2, 1, "float"),
    ("bf16", 16): ("__builtin_amdgcn_mfma_f32_16x16x16bf16_1k", 16, 4, "kir_short4"),
    ("f16", 16): ("__builtin_amdgcn_mfma_f32_16x16x16f16", 16, 4, "kir_half4"),
    ("f32", 16): ("__builtin_amdgcn_mfma_f32_16x16x4f32", 4, 1, "float"),
}
MFMA_TYPES = r"""
typedef short kir_short4 __attribute__((ext_vector_type(4)));
typedef _Float16 kir_half4 __attribute__((ext_vector_type(4)));
typedef float kir_float4 __attribute__((ext_vector_type(4)));
typedef float kir_float16 __attribute__((ext_vector_type(16)));
"""
WAVE = 64
LDS_BYTES = 65536  # per workgroup on gfx90a and gfx942


def mfma_shape(in_dt: str, acc_dt: str, m: int, n: int, k: int, threads: int) -> int | None:
    """The M (= N) of the MFMA instruction a dot uses, or None for the FMA loop."""
    if acc_dt != "f32" or in_dt not in ("bf16", "f16", "f32") or threads % WAVE:
        return None
    for size in (32, 16):
        kk = MFMA[(in_dt, size)][1]
        if m % size == 0 and n % size == 0 and k % kk == 0:
            return size
    return None


class HipGen(KernelGen):
    def __init__(self, program: Program, params: dict[str, int]):
        super().__init__(program, params, HIP)
        self.mfma_used = False

    # ---- dot on the matrix cores -----------------------------------------------------------------

    def op_dot(self, op: tl.DotOp) -> None:
        a, b = self.val(op.lhs), self.val(op.rhs)
        assert isinstance(a, Tile) and isinstance(b, Tile)
        m, k = a.shape
        n = b.shape[1]
        in_dt, acc_dt = a.dtype, dtype_of(op.res.type)
        size = mfma_shape(in_dt, acc_dt, m, n, k, self.instance.threads)
        esize = DTYPES[in_dt].nbytes
        # A, B and one block row of the result in LDS at once
        if size is None or m * k * esize + k * n * esize + size * n * 4 + 64 > LDS_BYTES:
            super().op_dot(op)  # the FMA loop of the shared base
            return
        self.require_sync("dot")
        self.mfma_used = True
        builtin, kk, per_lane, vtype = MFMA[(in_dt, size)]
        c = self.c
        w = self.w
        res = self.declare(op.res, op)
        assert isinstance(res, Tile)
        threads = self.instance.threads
        waves = threads // WAVE
        nb = n // size  # blocks in one block row
        per_wave = -(-nb // waves)
        regs = size * size // WAVE  # accumulator floats per lane
        acc_t = "kir_float16" if size == 32 else "kir_float4"
        w.line("{", op)
        w.indent()
        pa = self.scratch(c.ctype(in_dt), m * k, esize)
        pb = self.scratch(c.ctype(in_dt), k * n, esize)
        pc = self.scratch("float", size * n, 4)
        self.store_to_scratch(op.lhs, pa, op)
        self.store_to_scratch(op.rhs, pb, op)
        self.sync(op)
        w.line(f"const int kir_wave = kir_tid / {WAVE}, kir_l = kir_tid % {WAVE};", op)
        # lane l feeds row (or column) l % size and the k values (l / size) * per_lane + 0..per_lane-1
        # of each step; it receives column l % size of the block and, in register r, row
        # 8 (r / 4) + 4 (l / 32) + r % 4 (32x32) or 4 (l / 16) + r (16x16)
        w.line(f"const int kir_r = kir_l % {size}, kir_kq = (kir_l / {size}) * {per_lane};", op)
        w.line(f"for (int kir_br = 0; kir_br < {m // size}; ++kir_br) {{", op)
        w.indent()
        w.line("#pragma unroll", op)
        w.line(f"for (int kir_j = 0; kir_j < {per_wave}; ++kir_j) {{", op)
        w.indent()
        w.line(f"const int kir_bc = kir_j * {waves} + kir_wave;", op)
        if nb % waves:
            w.line(f"if (kir_bc < {nb}) {{", op)
            w.indent()
        w.line(f"{acc_t} kir_d = {{}};", op)
        w.line(f"for (int kir_k0 = 0; kir_k0 < {k}; kir_k0 += {kk}) {{", op)
        w.indent()
        row_a = f"(kir_br * {size} + kir_r) * {k} + kir_k0 + kir_kq"
        col_b = f"kir_bc * {size} + kir_r"
        if per_lane == 1:
            w.line(f"const float kir_va = {pa}[{row_a}];", op)
            w.line(f"const float kir_vb = {pb}[(kir_k0 + kir_kq) * {n} + {col_b}];", op)
        else:
            w.line(f"{vtype} kir_va, kir_vb;", op)
            lane_t = "short" if in_dt == "bf16" else "_Float16"  # the builtin's element type, same bits
            for e in range(per_lane):
                w.line(f"kir_va[{e}] = kir_bitcast<{lane_t}>({pa}[{row_a} + {e}]);", op)
                w.line(f"kir_vb[{e}] = kir_bitcast<{lane_t}>({pb}[(kir_k0 + kir_kq + {e}) * {n} + {col_b}]);", op)
        w.line(f"kir_d = {builtin}(kir_va, kir_vb, kir_d, 0, 0, 0);", op)
        w.dedent()
        w.line("}", op)
        w.line("#pragma unroll", op)
        w.line(f"for (int kir_q = 0; kir_q < {regs}; ++kir_q) {{", op)
        if size == 32:
            w.line("    const int kir_row = 8 * (kir_q / 4) + 4 * (kir_l / 32) + kir_q % 4;", op)
        else:
            w.line("    const int kir_row = 4 * (kir_l / 16) + kir_q;", op)
        w.line(f"    {pc}[kir_row * {n} + {col_b}] = kir_d[kir_q];", op)
        w.line("}", op)
        if nb % waves:
            self.close(1)
        self.close(1)
        self.sync(op)
        # the block row's elements e = kir_br * size * n + (0 .. size * n) are those of this
        # thread's slots e / threads when threads divides size * n, else each slot checks
        chunk = size * n
        w.line("#pragma unroll", op)
        w.line(f"for (int kir_i = 0; kir_i < {self.slots(res.layout, res.shape)}; ++kir_i) {{", op)
        w.indent()
        w.line(f"const int kir_e = kir_i * {threads} + kir_tid - kir_br * {chunk};", op)
        w.line(f"if (kir_e >= 0 && kir_e < {chunk}) {{", op)
        w.indent()
        total = f"{pc}[kir_e]"
        if op.acc is not None:
            acc = self.fetch_at_linear(op.acc, res, f"kir_e + kir_br * {chunk}")
            total = f"{total} + {c.cast(acc, acc_dt, 'f32')}"
        w.line(f"{res.name}[kir_i] = {total};", op)
        self.close(2)
        self.sync(op)
        self.close(1)
        w.dedent()
        w.line("}", op)
        self.scratch_top = 0

    def fetch_at_linear(self, v, res: Tile, lin: str) -> str:
        """The accumulator operand at the result's element of linear index `lin`, in the loop
        over the result's slots."""
        x = self.val(v)
        if isinstance(x, Tile) and not x.lazy and x.shape == res.shape and x.layout == res.layout:
            return f"{x.name}[kir_i]"
        idx = self.delinearize(f"({lin})", res.shape)
        return self.fetch(v, res.shape, res.layout, idx)

    # ---- the kernel ------------------------------------------------------------------------------

    def helpers(self) -> list[str]:
        return [*super().helpers(), HIP_HELPERS, *([MFMA_TYPES] if self.mfma_used else [])]

    def prologue_decls(self) -> list[tuple[str, str]]:
        # one static LDS array: the code object then states the kernel's LDS
        lds = max(16, self.scratch_base + self.scratch_bytes())
        out = []
        for name, text in super().prologue_decls():
            if name == "kir_smem_raw":
                continue
            if name == "kir_smem":
                if text.startswith("//"):
                    continue
                text = f"__shared__ __align__(16) unsigned char kir_smem[{lds}];"
            out.append((name, text))
        return out

    def options(self, smem_bytes: int) -> dict:
        lds = self.scratch_base + self.scratch_bytes()
        return {"smem_bytes": 0, "lds_bytes": lds, "threads": self.threads, "arch": "gfx90a"}


class HipEmitter(CEmitter):
    name = "hip"
    levels = ("tile",)
    dialect = HIP

    def generate(self, program: Program, params: dict[str, int]) -> Lowered:
        return HipGen(program, params).generate()

    def emit(self, program: Program, params: dict[str, int]) -> Lowered:
        refusals = level_refusal(program, self.name, self.levels)
        if refusals:
            d = refusals[0]
            raise KirError(
                Diagnostic(
                    d.rule,
                    d.severity,
                    d.span,
                    d.message,
                    "the AMD targets have no TMA, wgmma, mbarriers, cp.async or warp roles: write the tile "
                    "level (load, dot, store, pipeline hints), or lower it with gluon or cuda for sm_90",
                )
            )
        refused = fp8_refusals(program)
        if refused:
            raise KirError(refused)
        return super().emit(program, params)


def fp8_refusals(program: Program) -> list[Diagnostic]:
    """fp8 where it first appears (an argument, or the op that makes it): gfx90a has none."""
    kernel = program.kernel
    for name, v in kernel.args:
        if dtype_of(v.type).startswith("f8"):
            return [_fp8_refusal(f"argument `{name}` is {dtype_of(v.type)}", span_of(kernel) or program.span())]
    for op in kernel.walk():
        for v in op.results:
            if isinstance(v.type, TileType | ScalarType) and dtype_of(v.type).startswith("f8"):
                return [_fp8_refusal(f"`{op.name}` makes {dtype_of(v.type)}", span_of(op) or program.span())]
    return []


def _fp8_refusal(what: str, span) -> Diagnostic:
    return Diagnostic(
        "lower.unsupported",
        "error",
        span,
        f"{what}: the hip backend has no fp8 (gfx90a has none, and hipcc here compiles for gfx90a only)",
        "compute in bf16 or f16, or lower it with triton for gfx942",
    )
