"""Types and shapes: the typing rules of KIR, each with its own id.

Most of these make a program ill-formed, so they are enforced where the IR is built: the op
constructors and `verify_` methods in `kir/dialect/*.py` raise `RuleViolation(rule=...)`, and the
parser (`kir/sema.py`) and builder (`kir/builder.py`) report the same ids at the offending
expression. The rules are registered here so that each id has its explanation and its pair of
examples (`kir rules`), and their checks yield nothing: a program that reaches the verifier has
already passed them.

A few typing facts can only be decided once compile-time parameters are bound (the element
count of `reshape(x, [BM * BN / 2])`, `topk(k = K)` against a tile of `BLOCK` lanes); those rules
also check here, with the parameter values the verifier was given.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kir.diagnostics import Diagnostic, Edit, Span
from kir.dialect import explicit as ex
from kir.dialect import tile as tl
from kir.dialect.types import MBarrierType, SmemType, TileType, shape_of, shape_text
from kir.dtypes import DTYPES
from verifier.context import Context
from verifier.engine import first_fix
from verifier.registry import rule
from verifier.rules.types_where import param_value, unsatisfiable_where


@dataclass(frozen=True)
class _ParseTimeRule:
    id: str
    summary: str
    explanation: str
    bad: str
    good: str
    check: Callable[[Context], Iterator[Diagnostic]] | None = None  # what the verifier adds


def _enforced_when_built(ctx) -> Iterator[Diagnostic]:
    """The parser and the op verifiers report this rule; a built program already obeys it."""
    return iter(())


def _grid_axes(ctx: Context) -> Iterator[Diagnostic]:
    """`program_id(a)` / `num_programs(a)` for an axis the grid does not have: the op parses
    (the grid is known only as a whole), and the interpreter gives 0 and 1, which silently
    makes every program along the missing axis the same."""
    rank = len(ctx.kernel.grid.data)
    for info in ctx.ops(tl.ProgramIdOp, tl.NumProgramsOp):
        axis = info.op.axis.data
        if axis < rank:
            continue
        call = "program_id" if isinstance(info.op, tl.ProgramIdOp) else "num_programs"
        span = ctx.program.clause_spans.get("grid")
        line = ctx.span(info.op)
        # the last axis of the grid first: an axis one past it is the usual slip
        edits = first_fix(
            ctx,
            "types.axis",
            line.line if line else 0,
            [ctx.replace_in(info.op, f"{call}({axis})", f"{call}({a})") for a in reversed(range(rank))][:4],
        )
        yield ctx.report(
            info.op,
            f"{call}({axis}) names grid axis {axis}, but the grid has {rank} axis{'es' if rank > 1 else ''} "
            f"(0 to {rank - 1}): it is always {0 if call == 'program_id' else 1}",
            hint=f"use grid axis {edits[0].text[len(call) + 1 : -1]}: `{edits[0].text}`" if edits else "",
            related=[(span, "the grid")] if span is not None else [],
            edits=edits,
        )


_VEC = """\
kernel scale<BLOCK = 256>(x: global f32[N], y: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
%s
}
"""

_MAT = """\
kernel tile2d<BM = 32, BN = 64>(x: global f32[M, N], b: global f32[M], y: out global f32[M, N])
  where M %% BM == 0, N %% BN == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  rows = program_id(0) * BM + arange(0, BM)
  cols = program_id(1) * BN + arange(0, BN)
%s
}
"""

_GEMM = """\
kernel gemm<BM = 64, BN = 64, BK = 32>(a: global bf16[M, K], b: global bf16[K, N], c: out global %s[M, N])
  where M %% BM == 0, N %% BN == 0, K %% BK == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
%s
}
"""


def _vec(*lines: str) -> str:
    return _VEC % "\n".join(f"  {line}" for line in lines)


def _mat(*lines: str) -> str:
    return _MAT % "\n".join(f"  {line}" for line in lines)


def _gemm(out_dtype: str, *lines: str) -> str:
    return _GEMM % (out_dtype, "\n".join(f"  {line}" for line in lines))


_GEMM_LOOP = (
    "for k in 0 .. K / BK {",
    "  at = load(a[m0 : m0 + BM, k * BK : k * BK + BK])",
    "  bt = load(b[k * BK : k * BK + BK, n0 : n0 + BN])",
)

PARSE_TIME_RULES = [
    _ParseTimeRule(
        "types.operand-dtype",
        "the operands of one op have different dtypes",
        """
Binary operators, comparisons, `where`, `maximum`/`minimum`/`pow`, `dot` and `wgmma` take
operands of one dtype, and `full`'s value and `load`'s `other` have the tile's or the tensor's
dtype. KIR has no implicit promotion: `x_f32 + y_bf16` could mean an f32 add (exact, slower)
or a bf16 add (rounded), and the two give different answers, so the program says which with
`cast<T>(...)`. Only bare literals adapt to their partner operand (`x * 2.0` is bf16 when `x`
is).
""",
        _vec("v = load(x[offs], mask = mask)", "w = cast<bf16>(v)", "store(y[offs], v * w, mask = mask)  # <-"),
        _vec("v = load(x[offs], mask = mask)", "w = cast<bf16>(v)", "store(y[offs], v * cast<f32>(w), mask = mask)"),
    ),
    _ParseTimeRule(
        "types.broadcast",
        "two shapes do not broadcast",
        """
Elementwise ops broadcast as numpy does: shapes are aligned on the right, and each pair of
dimensions must be equal or one of them 1. A [BM] tile against a [BM, BN] tile aligns BM with
BN, which is almost always a missing axis: write `bias[:, None]` to make it a column. The same
holds for the index tiles of one gather, the condition of `where`, and `broadcast(x, shape)`.
""",
        _mat(
            "v = load(x[rows[:, None], cols[None, :]])",
            "bias = load(b[rows])",
            "store(y[rows[:, None], cols[None, :]], v + bias)  # <-",
        ),
        _mat(
            "v = load(x[rows[:, None], cols[None, :]])",
            "bias = load(b[rows])",
            "store(y[rows[:, None], cols[None, :]], v + bias[:, None])",
        ),
    ),
    _ParseTimeRule(
        "types.dot-shape",
        "a matrix product's operands are not [M, K] and [K, N]",
        """
`dot<T>(a, b)` multiplies 2-D tiles `a: [M, K]` and `b: [K, N]`; `wgmma(A, B, acc)` multiplies
2-D shared views the same way into an `[M, N]` accumulator. An inner-dimension mismatch usually
means an operand is stored transposed (`b` as `[N, K]`): load it as it is and use `trans(b)`,
or index the other dimension first.
""",
        _gemm(
            "f32",
            "acc = zeros(f32[BM, BN])",
            *_GEMM_LOOP,
            "  acc = dot<f32>(bt, at, acc)  # <-",
            "}",
            "store(c[m0 : m0 + BM, n0 : n0 + BN], acc)",
        ).replace("BK = 32", "BK = 16"),
        _gemm(
            "f32",
            "acc = zeros(f32[BM, BN])",
            *_GEMM_LOOP,
            "  acc = dot<f32>(at, bt, acc)",
            "}",
            "store(c[m0 : m0 + BM, n0 : n0 + BN], acc)",
        ).replace("BK = 32", "BK = 16"),
    ),
    _ParseTimeRule(
        "types.dot-acc",
        "a dot's accumulator does not have the product's type",
        """
`dot<T>(a, b, acc)` accumulates into `acc` in the stated dtype T: the accumulator must be a
`T[M, N]` tile, exactly the type of the product. An accumulator made with the input dtype
(`zeros(bf16[BM, BN])` for bf16 inputs) or with its dimensions swapped is the usual slip;
make it `zeros(f32[BM, BN])` and cast once after the loop.
""",
        _gemm(
            "bf16",
            "acc = zeros(bf16[BM, BN])",
            *_GEMM_LOOP,
            "  acc = dot<f32>(at, bt, acc)  # <-",
            "}",
            "store(c[m0 : m0 + BM, n0 : n0 + BN], acc)",
        ),
        _gemm(
            "bf16",
            "acc = zeros(f32[BM, BN])",
            *_GEMM_LOOP,
            "  acc = dot<f32>(at, bt, acc)",
            "}",
            "store(c[m0 : m0 + BM, n0 : n0 + BN], cast<bf16>(acc))",
        ),
    ),
    _ParseTimeRule(
        "types.dot-precision",
        "a dot's precision is not one KIR has, or is not for its operands",
        """
`dot<f32>(a, b, precision = tf32)` lets an f32 product round each operand to TF32 (10
mantissa bits) and run on the tensor cores, as PyTorch's convolutions do by default and its
matrix products do when `torch.backends.cuda.matmul.allow_tf32` is set. The default,
`precision = ieee`, is an f32 product. TF32 is a rounding of f32 operands: a dot of bf16, f16,
fp8 or integer operands already runs on the matrix units and takes no precision.
""",
        _gemm(
            "f32",
            "acc = zeros(f32[BM, BN])",
            *_GEMM_LOOP,
            "  acc = dot<f32>(at, bt, acc, precision = tf32)  # <-",
            "}",
            "store(c[m0 : m0 + BM, n0 : n0 + BN], acc)",
        ),
        _gemm(
            "f32",
            "acc = zeros(f32[BM, BN])",
            *_GEMM_LOOP,
            "  acc = dot<f32>(cast<f32>(at), cast<f32>(bt), acc, precision = tf32)",
            "}",
            "store(c[m0 : m0 + BM, n0 : n0 + BN], acc)",
        ),
    ),
    _ParseTimeRule(
        "types.random",
        "`rand` or `randint` with a seed that is not one integer, or offsets that are not integers",
        """
`rand(seed, offsets)` and `randint(seed, offsets)` draw Philox4x32 numbers keyed by the seed and
counted by the offsets (`kir.random` computes the same ones for a reference). The seed is one
integer for the whole program: a tile of seeds would key each lane differently, which is a
different generator than the reference's. The offsets are 32- or 64-bit integers (a 64-bit
offset counts its high word too): a float has no counter to give, and an 8- or 16-bit offset
would repeat after a few hundred lanes.
""",
        _vec(
            "v = load(x[offs], mask = mask)",
            "keep = rand(offs, offs) >= 0.5  # <-",
            "store(y[offs], where(keep, v * 2.0, 0.0), mask = mask)",
        ),
        _vec(
            "v = load(x[offs], mask = mask)",
            "keep = rand(7, offs) >= 0.5",
            "store(y[offs], where(keep, v * 2.0, 0.0), mask = mask)",
        ),
    ),
    _ParseTimeRule(
        "types.store-dtype",
        "a value written to memory has another dtype than the memory",
        """
`store`, the atomics, `tma.load`/`tma.store` and `cp.async` never convert: the value (or the
source) must have the destination's dtype. Storing an f32 accumulator into a bf16 tensor
needs an explicit `cast<bf16>(acc)`, which also says where the rounding happens.
""",
        _gemm(
            "bf16",
            "acc = zeros(f32[BM, BN])",
            *_GEMM_LOOP,
            "  acc = dot<f32>(at, bt, acc)",
            "}",
            "store(c[m0 : m0 + BM, n0 : n0 + BN], acc)  # <-",
        ),
        _gemm(
            "bf16",
            "acc = zeros(f32[BM, BN])",
            *_GEMM_LOOP,
            "  acc = dot<f32>(at, bt, acc)",
            "}",
            "store(c[m0 : m0 + BM, n0 : n0 + BN], cast<bf16>(acc))",
        ),
    ),
    _ParseTimeRule(
        "types.store-shape",
        "a written value does not have the shape of its destination",
        """
The value of a `store` must have the access shape (or broadcast to it: a scalar fills the
whole access), and a TMA or cp.async box must have the shape of its shared destination. A
mismatch means a slice extent or an index tile is not the one intended: `c[m0 : m0 + BM,
n0 : n0 + BM]` for a [BM, BN] tile writes the wrong number of columns.
""",
        _gemm(
            "f32",
            "acc = zeros(f32[BM, BN])",
            *_GEMM_LOOP,
            "  acc = dot<f32>(at, bt, acc)",
            "}",
            "store(c[m0 : m0 + BM, n0 : n0 + BK], acc)  # <-",
        ),
        _gemm(
            "f32",
            "acc = zeros(f32[BM, BN])",
            *_GEMM_LOOP,
            "  acc = dot<f32>(at, bt, acc)",
            "}",
            "store(c[m0 : m0 + BM, n0 : n0 + BN], acc)",
        ),
    ),
    _ParseTimeRule(
        "types.mask",
        "a mask (or a where condition) is not i1, or does not broadcast to the access",
        """
A `mask =` of a load, store, atomic or cp.async is an `i1` scalar or tile that broadcasts to
the access shape; the condition of `where` is `i1`. A mask built for one dimension (`rows <
M`, shape [BM]) used on a [BM, BN] access aligns BM with BN: give it its axis with
`rmask[:, None]`. An integer tile is not a mask: compare it (`c != 0`).
""",
        _mat(
            "rmask = rows < M",
            "v = load(x[rows[:, None], cols[None, :]], mask = rmask)  # <-",
            "store(y[rows[:, None], cols[None, :]], v)",
        ),
        _mat(
            "rmask = rows < M",
            "v = load(x[rows[:, None], cols[None, :]], mask = rmask[:, None])",
            "store(y[rows[:, None], cols[None, :]], v)",
        ),
    ),
    _ParseTimeRule(
        "types.carried",
        "a loop-carried value changes type in the loop",
        """
A variable defined before a loop and reassigned in its body is carried from one iteration to
the next, so it must keep its type: the IR gives the loop one block argument of one type per
carried value. Reassigning `acc` with a bf16 value when it started as f32 would silently change
the precision of every later iteration; cast where the value leaves the loop instead, or use a
new name.
""",
        _vec(
            "v = load(x[offs], mask = mask)",
            "acc = zeros(f32[BLOCK])",
            "for i in 0 .. 4 {",
            "  acc = cast<bf16>(acc + v)  # <-",
            "}",
            "store(y[offs], acc, mask = mask)",
        ),
        _vec(
            "v = load(x[offs], mask = mask)",
            "acc = zeros(f32[BLOCK])",
            "for i in 0 .. 4 {",
            "  acc = acc + v",
            "}",
            "store(y[offs], acc, mask = mask)",
        ),
    ),
    _ParseTimeRule(
        "types.index",
        "an index is not an integer, or a tensor is indexed with the wrong number of indices",
        """
Indices are integer scalars or tiles (an `i32` scalar for an mbarrier, a parity or a byte
count). A global tensor is indexed in every dimension; a gather (index tiles) indexes every
dimension of shared memory too; no access has more indices than its memory has dimensions;
`x[:, None]` on a tile has one `:` per dimension. A flattened index into a 2-D tensor, or a
float offset, is the usual cause.
""",
        _mat(
            "v = load(x[rows[:, None], cols[None, :]])",
            "bias = load(b[rows, 0])  # <-",
            "store(y[rows[:, None], cols[None, :]], v + bias[:, None])",
        ),
        _mat(
            "v = load(x[rows[:, None], cols[None, :]])",
            "bias = load(b[rows])",
            "store(y[rows[:, None], cols[None, :]], v + bias[:, None])",
        ),
    ),
    _ParseTimeRule(
        "types.access-mix",
        "an access mixes slices with index tiles",
        """
An access is either a block (scalars and slices `s : s + E`, whose shape is the slice extents)
or a gather (scalars and index tiles, whose shape is the broadcast of the index tiles). Mixing
them has no single meaning for the result's shape, so it is refused: make the slice an index
tile (`c0 + arange(0, BN)`, with its own axis) or use slices only. TMA and cp.async copy boxes,
so they take no index tiles at all.
""",
        _mat(
            "n0 = program_id(1) * BN",
            "v = load(x[rows, n0 : n0 + BN])  # <-",
            "store(y[rows[:, None], cols[None, :]], v)",
        ),
        _mat(
            "n0 = program_id(1) * BN",
            "v = load(x[rows[:, None], cols[None, :]])",
            "store(y[rows[:, None], cols[None, :]], v)",
        ),
    ),
    _ParseTimeRule(
        "types.float-only",
        "an op is applied to a dtype kind it is not defined for",
        """
The math calls (`exp`, `log`, `sqrt`, `rsqrt`, `erf`, `sigmoid`, `tanh`, `sin`, `cos`, `floor`,
`ceil`, `exp2`, `log2`) and `pow` take floats; the bit operators `& | ^ << >>` and `~` take
integers or i1; `-` does not apply to unsigned or i1 values.
An index tile passed to `exp` is the common case: cast it (`cast<f32>(offs)`) first.
""",
        _vec("t = exp(offs)  # <-", "store(y[offs], t, mask = mask)"),
        _vec("t = exp(cast<f32>(offs))", "store(y[offs], t, mask = mask)"),
    ),
    _ParseTimeRule(
        "types.literal",
        "a literal does not fit the dtype its position gives it",
        """
A bare literal takes its dtype from its partner operand or its position (docs/language.md,
section 6) and must be representable in it: a real where an integer is expected (`offs + 1.5`),
an integer out of range (`300` as `u8`), a number where a boolean is expected. Write a
literal of the right kind, or state its dtype (`f32(1.5)`) and cast the other operand.
""",
        _vec(
            "v = load(x[offs], mask = mask)",
            "odd = offs % 2.0 == 1  # <-",
            "store(y[offs], where(odd, -v, v), mask = mask)",
        ),
        _vec("v = load(x[offs], mask = mask)", "odd = offs % 2 == 1", "store(y[offs], where(odd, -v, v), mask = mask)"),
    ),
    _ParseTimeRule(
        "types.axis",
        "an axis is out of range",
        """
`axis = a` of a reduction, scan or arg-reduction names a dimension of its tile (0 to rank - 1),
`x[:, None]` inserts at a position from 0 to rank, and `program_id(a)` / `num_programs(a)`
name a grid axis (0, 1 or 2) that the kernel's `grid(...)` has. A 1-D row reduced with
`axis = 1` is the common slip, and `program_id(1)` in a kernel launched on a 1-D grid (always
0) the other.
""",
        _vec(
            "v = load(x[offs], mask = mask, other = 0.0)",
            "s = sum(v, axis = 1)  # <-",
            "store(y[offs], v / s, mask = mask)",
        ),
        _vec(
            "v = load(x[offs], mask = mask, other = 0.0)", "s = sum(v, axis = 0)", "store(y[offs], v / s, mask = mask)"
        ),
        _grid_axes,
    ),
    _ParseTimeRule(
        "types.rank",
        "an op is given a value of the wrong rank",
        """
`trans` takes a 2-D tile; reductions, scans, `topk` and `convert_layout` take tiles, not
scalars. Reducing a value that is already a scalar (a second `sum` over a row sum) or
transposing a 1-D tile means the shapes are not the ones intended.
""",
        _vec(
            "v = load(x[offs], mask = mask, other = 0.0)",
            "s = sum(v, axis = 0)",
            "t = sum(s, axis = 0)  # <-",
            "store(y[offs], v / t, mask = mask)",
        ),
        _vec(
            "v = load(x[offs], mask = mask, other = 0.0)",
            "s = sum(v, axis = 0)",
            "t = s",
            "store(y[offs], v / t, mask = mask)",
        ),
    ),
    _ParseTimeRule(
        "types.value",
        "memory or a list is used where a value is expected",
        """
Global tensors, shared buffers and mbarriers are memory: they are only named inside an access
(`load(x[offs])`, `as[s]`, `full[s]`). Using one directly in arithmetic (`x * 2.0`) has no
value to compute with. Lists (`[BM, BN]`) are only shapes and layout parameters.
""",
        _vec("v = x * 2.0  # <-", "store(y[offs], v, mask = mask)"),
        _vec("v = load(x[offs], mask = mask) * 2.0", "store(y[offs], v, mask = mask)"),
    ),
    _ParseTimeRule(
        "types.static",
        "a run-time value is used where a static size is needed",
        """
Tile shapes, `arange` bounds, slice extents, the grid, `axis =`, `k =`, `pipeline(stages =
...)` and the pending counts of waits are static: integers, parameters and shape symbols. A
value computed by the program (a program id, a loaded length) cannot size a tile; use a
static bound and mask the lanes past the run-time length.
""",
        _vec("n = N - program_id(0) * BLOCK", "t = arange(0, n)  # <-", "store(y[offs], cast<f32>(t), mask = mask)"),
        _vec(
            "n = N - program_id(0) * BLOCK", "t = arange(0, BLOCK)", "store(y[offs], cast<f32>(t), mask = mask & t < n)"
        ),
    ),
    _ParseTimeRule(
        "types.branches",
        "a variable has different types on the two paths of an if",
        """
After an `if`, a variable assigned in a branch holds the value of the branch taken, so both
paths must give it one type (the IR makes it a result of the `if`). Cast in the branch to the
variable's type, or use a new name that is local to the branch.
""",
        _vec(
            "v = load(x[offs], mask = mask)",
            "if program_id(0) == 0 {  # <-",
            "  v = cast<bf16>(v)",
            "}",
            "store(y[offs], v, mask = mask)",
        ),
        _vec(
            "v = load(x[offs], mask = mask)",
            "if program_id(0) == 0 {",
            "  v = cast<f32>(cast<bf16>(v))",
            "}",
            "store(y[offs], v, mask = mask)",
        ),
    ),
    _ParseTimeRule(
        "types.loop-bound",
        "a loop bound or step is not an i32 or i64 scalar",
        """
`for i in LO .. HI step S` counts with integer scalars: a tile (one bound per lane) or a float
cannot bound a loop that every lane runs together. Reduce a tile to a scalar first
(`max(n, axis = 0)`) and mask the lanes that are done, or cast a float bound.
""",
        _vec(
            "v = load(x[offs], mask = mask)",
            "acc = v",
            "for i in 0 .. offs {  # <-",
            "  acc = acc * 0.5",
            "}",
            "store(y[offs], acc, mask = mask)",
        ),
        _vec(
            "v = load(x[offs], mask = mask)",
            "acc = v",
            "for i in 0 .. 4 {",
            "  acc = acc * 0.5",
            "}",
            "store(y[offs], acc, mask = mask)",
        ),
    ),
    _ParseTimeRule(
        "types.condition",
        "the condition of an if is not an i1 scalar",
        """
`if` branches the whole program (or role): its condition is one `i1` scalar. A tile mask has
one value per lane; reduce it (`max(mask, axis = 0)` for "any lane") or keep the per-lane
choice in `where(...)` and masks.
""",
        _vec(
            "v = load(x[offs], mask = mask)",
            "if mask {  # <-",
            "  v = v * 2.0",
            "}",
            "store(y[offs], v, mask = mask)",
        ),
        _vec(
            "v = load(x[offs], mask = mask)",
            "if max(mask, axis = 0) {",
            "  v = v * 2.0",
            "}",
            "store(y[offs], v, mask = mask)",
        ),
    ),
    _ParseTimeRule(
        "types.access",
        "an access names the wrong kind of memory",
        """
Each op takes one kind of memory: `tma.load` and `cp.async` copy from a global tensor into a
shared buffer, `tma.store` the other way, `wgmma` and `sizeof` take shared buffers, atomics
take global tensors, `wait`/`arrive`/`expect`/`signal =` take one mbarrier (`full[s]`).
""",
        """\
kernel stage<BM = 64>(x: global f32[M] align(16), y: out global f32[M])
  where M % BM == 0
  target sm_90 grid(M / BM) warps(4)
{
  buf = smem(f32[BM])
  bar = mbarrier(1, count = 1)
  m0 = program_id(0) * BM
  expect(bar[0], bytes = sizeof(buf[0 : BM]))
  tma.load(x[m0 : m0 + BM], bar[0], signal = bar[0])  # <-
  wait(bar[0], parity = 0)
  store(y[m0 : m0 + BM], load(buf[0 : BM]))
}
""",
        """\
kernel stage<BM = 64>(x: global f32[M] align(16), y: out global f32[M])
  where M % BM == 0
  target sm_90 grid(M / BM) warps(4)
{
  buf = smem(f32[BM])
  bar = mbarrier(1, count = 1)
  m0 = program_id(0) * BM
  expect(bar[0], bytes = sizeof(buf[0 : BM]))
  tma.load(x[m0 : m0 + BM], buf[0 : BM], signal = bar[0])
  wait(bar[0], parity = 0)
  store(y[m0 : m0 + BM], load(buf[0 : BM]))
}
""",
    ),
    _ParseTimeRule(
        "types.align",
        "an alignment is not a power of two",
        """
`align(N)` promises that a tensor's base address is a multiple of N bytes, which vectorized
and TMA accesses rely on. Hardware alignments are powers of two; any other N is a typo.
""",
        """\
kernel copy<BLOCK = 256>(
    x: global f32[N] align(12),  # <-
    y: out global f32[N],
)
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  store(y[offs], load(x[offs], mask = offs < N), mask = offs < N)
}
""",
        """\
kernel copy<BLOCK = 256>(
    x: global f32[N] align(16),
    y: out global f32[N],
)
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  store(y[offs], load(x[offs], mask = offs < N), mask = offs < N)
}
""",
    ),
    _ParseTimeRule(
        "types.swizzle",
        "a shared buffer's swizzle is not 0, 32, 64 or 128 bytes",
        """
The swizzle of a shared buffer is one of the hardware's patterns: 0 (none), 32, 64 or 128
bytes, matching the TMA and wgmma swizzle modes.
""",
        """\
kernel stage<BM = 64, BN = 64>(x: global f32[M, N], y: out global f32[M, N])
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  buf = smem(f32[BM, BN], swizzle = 96)  # <-
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  store(buf[0 : BM], load(x[m0 : m0 + BM, n0 : n0 + BN]))
  barrier()
  store(y[m0 : m0 + BM, n0 : n0 + BN], load(buf[0 : BM]))
}
""",
        """\
kernel stage<BM = 64, BN = 64>(x: global f32[M, N], y: out global f32[M, N])
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  buf = smem(f32[BM, BN], swizzle = 128)
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  store(buf[0 : BM], load(x[m0 : m0 + BM, n0 : n0 + BN]))
  barrier()
  store(y[m0 : m0 + BM, n0 : n0 + BN], load(buf[0 : BM]))
}
""",
    ),
    _ParseTimeRule(
        "types.evict",
        "a load's `evict` is not `first` or `last`, or is given to a load of shared memory",
        """
`load(x[...], evict = first)` and `evict = last` set the eviction priority of the lines a
global load brings into L1 and L2 (`eviction_policy` in Triton and Gluon, `ld.global.L1::evict_*`
with an L2 cache policy in CUDA C++): `first` for data read once, which should not push out
what is read again, `last` for data read again soon, such as the first pass over a row that a
second pass reads from cache. The policy changes no value. Shared memory is not cached, so a
shared-buffer load takes no policy.
""",
        """\
kernel scale<BLOCK = 256>(x: global f32[N], y: out global f32[N])
  target sm_90 grid((N + BLOCK - 1) / BLOCK) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  v = load(x[offs], mask = offs < N, evict = once)  # <-
  store(y[offs], v * 2.0, mask = offs < N)
}
""",
        """\
kernel scale<BLOCK = 256>(x: global f32[N], y: out global f32[N])
  target sm_90 grid((N + BLOCK - 1) / BLOCK) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  v = load(x[offs], mask = offs < N, evict = first)
  store(y[offs], v * 2.0, mask = offs < N)
}
""",
    ),
    _ParseTimeRule(
        "types.layout",
        "a register layout has the wrong number of parameters for its kind or rank",
        """
`blocked(size_per_thread, threads_per_warp, warps_per_cta, order)` gives four lists with one
entry per dimension of the tile; `mma(version, warps_per_cta, instr_shape)` gives three.
""",
        _mat(
            "v = load(x[rows[:, None], cols[None, :]])",
            "v = convert_layout(v, blocked([1, 4], [4, 8], [4, 1]))  # <-",
            "store(y[rows[:, None], cols[None, :]], v)",
        ),
        _mat(
            "v = load(x[rows[:, None], cols[None, :]])",
            "v = convert_layout(v, blocked([1, 4], [4, 8], [4, 1], [1, 0]))",
            "store(y[rows[:, None], cols[None, :]], v)",
        ),
    ),
]

for _r in PARSE_TIME_RULES:
    rule(
        _r.id,
        family="types",
        severity="error",
        summary=_r.summary,
        explanation=_r.explanation,
        bad=_r.bad,
        good=_r.good,
    )(_r.check or _enforced_when_built)


# ---- checks that need the parameter values ---------------------------------------------------


@rule(
    "types.reshape",
    family="types",
    severity="error",
    summary="a reshape changes the number of elements",
    explanation="""
`reshape(x, shape)` keeps the row-major order of the elements, so the new shape must hold
exactly as many elements as the old one. When both shapes are constants the parser rejects a
mismatch; when they depend on compile-time parameters (`[BM * BN / 2]`) the verifier checks
them with the parameter values of the instance being checked, so a tactic that changes `BN`
learns at once that the reshape no longer fits.
""",
    bad="""
kernel flat<BM = 16, BN = 32>(x: global f32[M, N], y: out global f32[M, N])
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  v = load(x[m0 : m0 + BM, n0 : n0 + BN])
  f = reshape(v, [BM * BN / 2])  # <-
  store(y[m0 : m0 + BM, n0 : n0 + BN], reshape(f * 2.0, [BM, BN]))
}
""",
    good="""
kernel flat<BM = 16, BN = 32>(x: global f32[M, N], y: out global f32[M, N])
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  v = load(x[m0 : m0 + BM, n0 : n0 + BN])
  f = reshape(v, [BM * BN])
  store(y[m0 : m0 + BM, n0 : n0 + BN], reshape(f * 2.0, [BM, BN]))
}
""",
)
def check_reshape(ctx) -> Iterator[Diagnostic]:
    edits: tuple[Edit, ...]
    for info in ctx.ops(tl.ReshapeOp):
        op = info.op
        before = ctx.elements(ctx.static_shape(op.operand.type))
        after = ctx.elements(ctx.static_shape(op.res.type))
        if before is None or after is None or before == after:
            continue
        line = ctx.span(op)
        hint, edits = "", ()
        for what, candidates in _reshape_fixes(ctx, op):
            edits = first_fix(ctx, "types.reshape", line.line if line else 0, candidates)
            if edits:
                hint = f"{what}: `{_edited_line(ctx, edits)}`"
                break
        yield ctx.report(
            op,
            f"reshape keeps the element count: {shape_text(shape_of(op.operand.type))} holds {before} elements "
            f"and {shape_text(shape_of(op.res.type))} holds {after} (with {_param_text(ctx, op)})",
            hint=hint,
            edits=edits,
        )


def _reshape_fixes(ctx: Context, op: tl.ReshapeOp) -> list[tuple[str, list[Edit]]]:
    """(what the fix does, its candidate edits): the reshape's own shape with a literal factor
    scaled, a plain factor first (`[BLOCK / 2, 4]` to `[BLOCK / 2, 2]`), a divisor next (`/ 2`
    dropped); for a reshape of a tile that a reshape before it miscounted, that one's fix."""
    out = [("keep the element count", _scaled_literals(ctx, op))]
    source = _made_by_reshape(op.operand)
    if source is not None:
        before = ctx.elements(ctx.static_shape(source.operand.type))
        after = ctx.elements(ctx.static_shape(source.res.type))
        if before is not None and before != after:
            line = ctx.span(source)
            out.append(
                (f"fix the reshape it reads, at line {line.line if line else '?'}", _scaled_literals(ctx, source))
            )
    return out


def _made_by_reshape(value, depth: int = 4) -> tl.ReshapeOp | None:
    """The reshape that made `value`'s shape, through elementwise ops (`f * 2.0`)."""
    owner = value.owner
    for _ in range(depth):
        if isinstance(owner, tl.ReshapeOp):
            return owner
        same = [
            v
            for v in getattr(owner, "operands", ())
            if isinstance(v.type, TileType) and v.type.shape == value.type.shape
        ]
        if not same:
            return None
        owner = same[0].owner
    return None


def _edited_line(ctx: Context, edits: tuple[Edit, ...]) -> str:
    """The line of the edits as they make it, without its indentation and comment."""
    line = edits[0].span.line
    text = (ctx.program.source or "").splitlines()[line - 1]
    for e in sorted(edits, key=lambda e: e.span.col, reverse=True):
        text = text[: e.span.col - 1] + e.text + text[e.span.end_col - 1 :]
    return text.split("#")[0].strip()


def _scaled_literals(ctx: Context, op: tl.ReshapeOp) -> list[Edit]:
    before = ctx.elements(ctx.static_shape(op.operand.type))
    after = ctx.elements(ctx.static_shape(op.res.type))
    span, text = ctx.span(op), ctx.text_of(op)
    shape = re.search(r"\[([^\[\]]*)\]\)$", text or "")
    if span is None or shape is None or not before or not after:
        return []
    plain, divisors = [], []
    for lit in re.finditer(r"(\s*/\s*)?\b(\d+)\b", shape.group(1)):
        value = int(lit.group(2))
        start = span.col + shape.start(1) + lit.start()
        if lit.group(1):  # a divisor: `/ 2` divides by 2 * after / before instead
            new = value * after
            if new % before == 0 and new // before >= 1:
                text_new = "" if new // before == 1 else f"{lit.group(1)}{new // before}"
                divisors.append(
                    Edit(Span(span.line, start, span.line, span.col + shape.start(1) + lit.end(), span.file), text_new)
                )
        else:
            new = value * before
            if new % after == 0 and new // after >= 1:
                at = span.col + shape.start(1) + lit.start(2)
                plain.append(Edit(Span(span.line, at, span.line, at + len(lit.group(2)), span.file), str(new // after)))
    return (plain + divisors)[:4]


@rule(
    "types.topk",
    family="types",
    severity="error",
    summary="topk selects more elements than its axis has, or fewer than one",
    explanation="""
`topk(x, k = K)` returns the K largest (or smallest) elements along the last axis, so K must be
between 1 and that axis's extent. The parser checks constants; the verifier checks K and the
extent once the compile-time parameters are bound.
""",
    bad="""
kernel top<BLOCK = 64, K = 128>(x: global f32[M, N], vals: out global f32[M, K])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  v = load(x[row, cols], mask = cols < N, other = -inf)
  best, idx = topk(v, k = K)  # <-
  store(vals[row, arange(0, K)], best)
}
""",
    good="""
kernel top<BLOCK = 64, K = 16>(x: global f32[M, N], vals: out global f32[M, K])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  v = load(x[row, cols], mask = cols < N, other = -inf)
  best, idx = topk(v, k = K)
  store(vals[row, arange(0, K)], best)
}
""",
)
def check_topk(ctx) -> Iterator[Diagnostic]:
    for info in ctx.ops(tl.TopKOp):
        op = info.op
        k = ctx.static(op.k.data)
        n = ctx.static(shape_of(op.operand.type)[-1])
        if k is None or n is None or 1 <= k <= n:
            continue
        line = ctx.span(op)
        names = sorted(op.k.data.symbols())
        # k as a parameter of its own: the widest it may be (its extent), or 1
        candidates = [param_value(ctx, names[0], v) for v in (n, 1) if v >= 1] if len(names) == 1 else []
        edits = first_fix(ctx, "types.topk", line.line if line else 0, candidates)
        yield ctx.report(
            op,
            f"topk: k = {k} must be between 1 and the axis extent {n} (with {_param_text(ctx, op)})",
            hint=f"give k a value from 1 to {n}: `{names[0]} {edits[0].text}`" if edits else "",
            edits=edits,
        )


@rule(
    "types.swizzle-width",
    family="types",
    severity="error",
    summary="a swizzled shared buffer's rows are narrower than its swizzle",
    explanation="""
A swizzle of W bytes permutes 16-byte chunks within each W-byte row segment (the TMA and wgmma
swizzle atom is 8 rows of W bytes), so the innermost dimension of a swizzled buffer must span a
whole number of W-byte segments: `bf16[S, BM, 32]` is 64 bytes a row, too narrow for
`swizzle = 128`; Triton's compiler aborts on it, and a hand-written layout would read the wrong
elements. Use a swizzle no wider than a row (64 here), or wider rows.
""",
    bad="""
kernel stage<BM = 64, BK = 32>(x: global bf16[M, K] align(16), y: out global bf16[M, K] align(16))
  where M % BM == 0, K % BK == 0
  target sm_90 grid(M / BM, K / BK) warps(4)
{
  buf = smem(bf16[BM, BK], swizzle = 128)  # <-
  m0 = program_id(0) * BM
  k0 = program_id(1) * BK
  store(buf[0 : BM], load(x[m0 : m0 + BM, k0 : k0 + BK]))
  barrier()
  store(y[m0 : m0 + BM, k0 : k0 + BK], load(buf[0 : BM]))
}
""",
    good="""
kernel stage<BM = 64, BK = 32>(x: global bf16[M, K] align(16), y: out global bf16[M, K] align(16))
  where M % BM == 0, K % BK == 0
  target sm_90 grid(M / BM, K / BK) warps(4)
{
  buf = smem(bf16[BM, BK], swizzle = 64)
  m0 = program_id(0) * BM
  k0 = program_id(1) * BK
  store(buf[0 : BM], load(x[m0 : m0 + BM, k0 : k0 + BK]))
  barrier()
  store(y[m0 : m0 + BM, k0 : k0 + BK], load(buf[0 : BM]))
}
""",
)
def check_swizzle_width(ctx) -> Iterator[Diagnostic]:
    for info in ctx.ops(ex.SmemAllocOp):
        t = info.op.res.type
        width = t.swizzle.data
        inner = ctx.static(t.shape.data[-1].data) if t.shape.data else None
        if not width or inner is None:
            continue
        row = inner * DTYPES[t.dtype.data].nbytes
        if row % width == 0:
            continue
        fits = max((w for w in (32, 64, 128) if row % w == 0), default=0)
        line = ctx.span(info.op)
        edits = first_fix(
            ctx,
            "types.swizzle-width",
            line.line if line else 0,
            [ctx.replace_in(info.op, f"swizzle = {width}", f"swizzle = {fits}")],
        )
        yield ctx.report(
            info.op,
            f"a {width}-byte swizzle needs rows of a multiple of {width} bytes; this buffer's rows are "
            f"{inner} {t.dtype.data} = {row} bytes (with {_param_text(ctx, info.op)})",
            hint=(
                f"use the widest swizzle the rows allow: `swizzle = {fits}`"
                if fits
                else "drop the swizzle: `swizzle = 0`"
            )
            if edits
            else "",
            edits=edits,
        )


@rule(
    "types.extent",
    family="types",
    severity="error",
    summary="a tile, shared buffer or mbarrier array has no elements once the parameters are bound",
    explanation="""
Every extent of a tile (`arange(0, BLOCK)`, `zeros(f32[BM, BN])`), of a shared buffer and of an
mbarrier array, and every mbarrier's arrival count, must be at least 1. A parameter of 0 or less
(`--param BLOCK=0`, a tactic that halved a tile once too often) makes an empty or negative tile:
the interpreter silently computes nothing, and the compilers reject it or emit a kernel that
reads out of bounds. The parser cannot know the parameters' values; the verifier checks them
once they are bound, at the first op that makes the empty type.
""",
    bad="""
kernel scale<BLOCK = 0>(x: global f32[N], y: out global f32[N])
  target sm_90 grid(cdiv(N, 256)) warps(4)
{
  offs = program_id(0) * 256 + arange(0, BLOCK)  # <-
  mask = offs < N
  store(y[offs], load(x[offs], mask = mask) * 2.0, mask = mask)
}
""",
    good="""
kernel scale<BLOCK = 256>(x: global f32[N], y: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  store(y[offs], load(x[offs], mask = mask) * 2.0, mask = mask)
}
""",
)
def check_extent(ctx) -> Iterator[Diagnostic]:
    seen: set[str] = set()  # each empty extent once, where it is first made (not at every tile of that shape)
    for info in ctx.ops():
        found = [_empty_extent(ctx, res.type) for res in info.op.results]
        if isinstance(info.op, ex.MBarrierAllocOp):
            count = info.op.count.data
            value = ctx.static(count)
            found.append((count, f"an arrival count of {value}") if value is not None and value < 1 else None)
        for extent, words in filter(None, found):
            if str(extent) in seen:
                continue
            seen.add(str(extent))
            values = ", ".join(f"{n} = {ctx.params[n]}" for n in sorted(extent.symbols()) if n in ctx.params)
            edits, name = _extent_fix(ctx, info.op, extent)
            yield ctx.report(
                info.op,
                f"`{extent}` is {words}{f' (with {values})' if values else ''}: nothing to compute with",
                hint=f"give {name} a value of at least 1: `{name} {edits[0].text}`" if edits else "",
                edits=edits,
            )


def _extent_fix(ctx: Context, op, extent) -> tuple[tuple[Edit, ...], str]:
    """The one parameter below 1 of `extent` set to a size the kernel's text uses (a power of
    two it writes as a literal, `cdiv(N, 256)`), or to 1; ((), "") where there is none."""
    low = [n for n in sorted(extent.symbols()) if ctx.params.get(n, 1) < 1 and n in ctx.kernel.params]
    if len(low) != 1:
        return (), ""
    literals = [int(v) for v in re.findall(r"\b(\d+)\b", ctx.program.source or "")]
    sizes = list(dict.fromkeys(v for v in literals if v >= 16 and v & (v - 1) == 0))
    line = ctx.span(op)
    candidates = [param_value(ctx, low[0], v) for v in [*sizes[:3], 1]]
    return first_fix(ctx, "types.extent", line.line if line else 0, candidates), low[0]


def _empty_extent(ctx, t):
    """(the extent, in words) of the first extent of `t` below 1 once the parameters are bound."""
    if isinstance(t, MBarrierType):
        size = ctx.static(t.size.data)
        return (t.size.data, f"{size} mbarriers") if size is not None and size < 1 else None
    if not isinstance(t, TileType | SmemType):
        return None
    for axis, (dim, extent) in enumerate(zip(t.shape.data, ctx.static_shape(t), strict=True)):
        if extent is not None and extent < 1:
            return dim.data, f"{extent}, the extent of dimension {axis} of {t}"
    return None


def _param_text(ctx, op) -> str:
    names: set[str] = set()
    for t in (*op.operands, *op.results):
        try:
            for d in shape_of(t.type):
                names |= d.symbols()
        except Exception:
            continue
    if hasattr(op, "k"):
        names |= op.k.data.symbols()
    shown = [f"{n} = {ctx.params[n]}" for n in sorted(names) if n in ctx.params]
    return ", ".join(shown) or "the parameters' values"


# ---- types.where ---------------------------------------------------------------------------------


@rule(
    "types.where",
    family="types",
    severity="error",
    summary="no shapes satisfy the kernel's `where` with these parameters",
    explanation="""
`where` states what the kernel assumes of its shapes and parameters; the verifier proves
everything else under those assumptions. When the parameters being checked contradict them
(`where ST >= 3` checked with ST = 2, or `where N % BLOCK == 0, N <= 64` with BLOCK = 128), no
shape satisfies them and every proof would hold vacuously: the verifier reports the clause that
fails and checks nothing else.
""",
    bad="""
kernel k<BLOCK = 256, S = 2>(x: global f32[N], y: out global f32[N])
  where N % BLOCK == 0, S >= 3  # <-
  target sm_90 grid(N / BLOCK) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  store(y[offs], load(x[offs]) * 2.0)
}
""",
    good="""
kernel k<BLOCK = 256, S = 3>(x: global f32[N], y: out global f32[N])
  where N % BLOCK == 0, S >= 3
  target sm_90 grid(N / BLOCK) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  store(y[offs], load(x[offs]) * 2.0)
}
""",
)
def where_unsatisfiable(ctx: Context) -> Iterator[Diagnostic]:
    yield from unsatisfiable_where(ctx)
