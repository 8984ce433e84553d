"""`causal-skip`: split a causally masked key loop at the diagonal: the key blocks before it
run without the mask, the diagonal blocks keep it, and the blocks after it are not visited.

    for j in 0 .. S / BN {                   for j in 0 .. m0 / BN {            # no mask
      keys = j * BN + arange(0, BN)            ...s...
      s = where(keys[None, :] <= rows[:, None], s, -inf)
      ...online softmax of s...        ->    }
    }                                        for j in m0 / BN .. (m0 + BM) / BN {
                                               keys = j * BN + arange(0, BN)
                                               s = where(keys[None, :] <= rows[:, None], s, -inf)
                                               ...
                                             }

with `where BM % BN == 0` added (unless the clauses say it already). A query block of causal
attention (rows m0 .. m0 + BM - 1) sees the keys up to its last row only: the blocks after the
diagonal are masked on every lane, and the blocks before it on none. Skipping the former halves
the work of the whole grid; dropping the select on the latter saves a compare and a select per
score.

What is recognised, precisely: a loop of the body's top level, step 1, whose body selects
`where(mask, s, c)` (c a float constant: -inf for attention's scores) with `mask = keys[None,
:] <= rows[:, None]` (or `rows[:, None] >= keys[None, :]`), `keys = j * BN + arange(0, BN)` for
the loop variable j, and `rows = m0 + arange(0, BM)` for a scalar m0 computed before the loop.
Then:

- *The split points are right.* The bounds prover (verifier.symbolic: z3 over every program id,
  loop iteration and lane, at the program's parameter values, under the `where` clauses with
  the new one) shows that the mask is true on every lane of a block j < m0 / BN, false on
  every lane of a block j >= (m0 + BM) / BN, and that the loop's own bounds hold both split
  points (`lower <= m0 / BN`, `(m0 + BM) / BN <= upper`: the new loops visit no block the old
  one did not).
- *Dropping the masked blocks changes nothing.* In a block whose mask is false on every lane
  (every select gives its constant) each carried value must come out as it went in. This is checked op by op over the body, with
  what each value is in such an iteration: -inf, 0 or 1 on every lane, a carried value
  unchanged, a finite value, or unknown (a rule not listed refuses):
  `max(-inf) = -inf`; `maximum(m, -inf) = m` (m not NaN); `x - m = -inf` for x = -inf and m
  finite; `m - m = 0` (m finite); `exp(-inf) = exp2(-inf) = 0`; `exp(0) = 1`; `x * 1 = x`;
  `x + 0 = x`; `sum(0) = 0`; `dot(0, v) = 0` and `dot(0, v, a) = a` for v loaded (finite);
  `where(mask, x, y) = y`. The online softmax is exactly such a body:

      m_new = maximum(m_i, max(s, axis = 1))    = m_i
      p = exp(s - m_new[:, None])               = 0
      alpha = exp(m_i - m_new)                  = 1
      l_i = l_i * alpha + sum(p, axis = 1)      = l_i
      acc = acc * alpha[:, None] + dot<f32>(cast<bf16>(p), vt)   = acc

  A plain sum of masked scores is refused with -inf on the masked lanes (`acc + sum(-inf)` is
  -inf, not acc) and taken with 0 (`acc + sum(where(mask, x, 0.0))`: `sum(0) = 0`). The body
  must have no effect (a store in a skipped block would be lost).
- *The running max is finite by then.* `m - m = 0` and `-inf - m = -inf` need m finite (with
  m = -inf both are NaN). A carried value counts as finite where it is the running max over
  the masked scores (`m = maximum(m, max(where(mask, ...), axis = 1))`, started at -inf or a
  finite constant) and the prover shows that every row r of the tile has a key the mask admits
  in a block that is kept (its own: block r / BN, between the loop's start and the diagonal's
  end). Blocks run in order, so by the first dropped block each row has met a finite score, and
  a dropped block leaves m as it is.

Numerics: exact. The blocks kept compute what they did (before the diagonal `where(true, s,
-inf)` is `s`), and a dropped block was the identity, bitwise, where the inputs (and so the
scores and the loaded values) are finite, but for the sign of a zero: `acc + 0` is `+0` where
acc was `-0` (acc underflowing to -0 through `acc * alpha` in the last block kept). An inf or
NaN in a value row past the diagonal made the input program's `0 * v` NaN; the result never
reads it.

The proofs are at the program's parameter values, as the verifier's are: the verifier proves
the new loops' loads in bounds again at each preset, and the interpreter and the harness check
the new clause at launch. Tile level only. The loops keep the input loop's hints: apply
`pipeline` after this tactic to pipeline the first loop only (the diagonal one runs BM / BN
times).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from xdsl.dialects.builtin import ArrayAttr
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from kir import symexpr as sx
from kir.diagnostics import Diagnostic
from kir.dialect.structure import ForOp, KernelOp, YieldOp
from kir.dialect.tile import (
    ArangeOp,
    BinaryOp,
    BroadcastOp,
    CastOp,
    CompareOp,
    ConstOp,
    DotOp,
    ExpandDimsOp,
    FullOp,
    LoadOp,
    ReduceOp,
    ReshapeOp,
    SymValueOp,
    TransOp,
    UnaryOp,
    WhereOp,
    ZerosOp,
)
from kir.dialect.traits import has_effect, is_pure
from kir.dialect.types import ScalarType, SymAttr, dtype_of, shape_of
from kir.dtypes import DTYPES
from kir.program import Program, set_span, span_of
from kir.spans import copy_source_notes
from tactics import _grid, ir
from tactics.base import Tactic, not_applicable
from tactics.registry import register

NAME = "causal-skip"


# ---- the pattern ---------------------------------------------------------------------------------


@dataclass
class Causal:
    """A key loop with a causal mask: `where(keys[None, :] <= rows[:, None], s, -inf)` (or
    another constant on the masked lanes)."""

    loop: ForOp
    mask: SSAValue
    selects: list[WhereOp]  # the selects of a constant on the mask, in the loop's body
    start: SSAValue  # m0: rows = m0 + arange(0, BM)
    rows: sx.SymExpr  # BM
    keys: sx.SymExpr  # BN: keys = j * BN + arange(0, BN)


def _plus_arange(v: SSAValue) -> tuple[SSAValue, sx.SymExpr] | None:
    """(base, E) when the 1-D tile `v` is `base + arange(0, E)` (either order), base a scalar."""
    owner = v.owner
    if not (isinstance(owner, BinaryOp) and owner.fn.data == "add"):
        return None
    for tile, base in ((owner.rhs, owner.lhs), (owner.lhs, owner.rhs)):
        arange = tile.owner
        if (
            isinstance(arange, ArangeOp)
            and isinstance(base.type, ScalarType)
            and sx.fold(arange.start.data).as_int() == 0
        ):
            return base, arange.end.data
    return None


def _expanded(v: SSAValue, axis: int) -> SSAValue | None:
    """x when `v` is x with a new axis at `axis` (`x[None, :]` is axis 0, `x[:, None]` axis 1)."""
    owner = v.owner
    if isinstance(owner, ExpandDimsOp) and owner.axis.data == axis and len(shape_of(owner.operand.type)) == 1:
        return owner.operand
    return None


def _is_extent(v: SSAValue, extent: sx.SymExpr) -> bool:
    """Whether the scalar `v` is the extent written as a symbol or a number."""
    owner = v.owner
    if isinstance(owner, SymValueOp):
        return sx.same(sx.Sym(owner.symbol.data), extent)
    if isinstance(owner, ConstOp) and DTYPES[owner.dtype].is_int:
        return sx.fold(extent).as_int() == owner.number
    return False


def _times_loop_var(v: SSAValue, loop: ForOp, extent: sx.SymExpr) -> bool:
    """Whether `v` is `j * E` (either order) for the loop's variable j."""
    owner = v.owner
    j = loop.body.block.args[0]
    if not (isinstance(owner, BinaryOp) and owner.fn.data == "mul"):
        return False
    return (owner.lhs is j and _is_extent(owner.rhs, extent)) or (owner.rhs is j and _is_extent(owner.lhs, extent))


def _before_loop(v: SSAValue, loop: ForOp) -> bool:
    """Whether `v` is computed in the loop's block, before it (so a new loop there can use it)."""
    owner = v.owner
    return (
        isinstance(owner, Operation) and owner.parent_block() is loop.parent_block() and owner.is_before_in_block(loop)
    )


def causal_mask(cond: SSAValue, loop: ForOp) -> tuple[SSAValue, sx.SymExpr, sx.SymExpr] | None:
    """(m0, BM, BN) when `cond` is `keys[None, :] <= rows[:, None]` with `keys = j * BN +
    arange(0, BN)` and `rows = m0 + arange(0, BM)`, m0 computed before the loop."""
    op = cond.owner
    if not isinstance(op, CompareOp):
        return None
    if op.predicate.data == "le":
        key_side, row_side = op.lhs, op.rhs
    elif op.predicate.data == "ge":
        key_side, row_side = op.rhs, op.lhs
    else:
        return None
    keys, rows = _expanded(key_side, 0), _expanded(row_side, 1)
    if keys is None or rows is None:
        return None
    k, r = _plus_arange(keys), _plus_arange(rows)
    if k is None or r is None:
        return None
    (key_base, bn), (start, bm) = k, r
    if not _times_loop_var(key_base, loop, bn) or not _before_loop(start, loop):
        return None
    return start, bm, bn


def _is_fill(v: SSAValue) -> bool:
    """Whether `v` is a float constant (what a select puts on the masked lanes)."""
    owner = v.owner
    return isinstance(owner, ConstOp) and DTYPES[owner.dtype].is_float


def candidates(program: Program) -> list[Causal]:
    """The loops of the body's top level with a causal mask, in the order of the text."""
    out = []
    for loop in program.kernel.body.block.ops:
        if not isinstance(loop, ForOp):
            continue
        found: Causal | None = None
        for op in loop.body.block.ops:
            if not (isinstance(op, WhereOp) and _is_fill(op.rhs)):
                continue
            if found is not None and op.cond is found.mask:
                found.selects.append(op)
            elif found is None and len(shape_of(op.res.type)) == 2:
                mask = causal_mask(op.cond, loop)
                if mask is not None:
                    found = Causal(loop, op.cond, [op], *mask)
        if found is not None:
            out.append(found)
    return out


# ---- a block masked on every lane ----------------------------------------------------------------

NEG_INF, ZERO, ONE, FINITE = "-inf", "0", "1", "finite"  # every lane -inf, 0, 1; finite lanes
UNIFORM = (NEG_INF, ZERO, ONE)


@dataclass(frozen=True)
class Same:
    """The value is a carried value as it entered the iteration (`finite`: known finite)."""

    arg: BlockArgument
    finite: bool


Fact = str | Same | None  # None: nothing known


def _finite(f: Fact) -> bool:
    return f in (ZERO, ONE, FINITE) or (isinstance(f, Same) and f.finite)


def _shaped(f: Fact, result: SSAValue) -> Fact:
    """What a result equal to `f` (broadcast to the result's shape) is."""
    if isinstance(f, Same):
        if result.type == f.arg.type:
            return f
        return FINITE if f.finite else None
    return f


@dataclass
class Masked:
    """What each value of a loop's body is in an iteration whose mask is false on every lane,
    every carried value entering as it is (the running maxima among them finite)."""

    loop: ForOp
    mask: SSAValue
    finite: set[BlockArgument]
    memo: dict[SSAValue, Fact] = field(default_factory=dict)

    def of(self, v: SSAValue) -> Fact:
        if v not in self.memo:
            self.memo[v] = self._of(v)
        return self.memo[v]

    def _of(self, v: SSAValue) -> Fact:
        if isinstance(v, BlockArgument):
            if v.block is self.loop.body.block and v.index > 0:
                return Same(v, v in self.finite)
            return None
        op = v.owner
        if isinstance(op, ConstOp):
            return _constant(op)
        if isinstance(op, ZerosOp):
            return ZERO
        if isinstance(op, FullOp):
            return self.of(op.value)
        if isinstance(op, LoadOp):
            return FINITE if op.mask is None else None  # inputs are finite
        if isinstance(op, WhereOp):
            if op.cond is self.mask:
                return self.of(op.rhs)  # false on every lane
            a, b = self.of(op.lhs), self.of(op.rhs)
            return a if a == b and (a in UNIFORM or a == FINITE) else None
        if isinstance(op, ExpandDimsOp | BroadcastOp | TransOp | ReshapeOp):
            f = self.of(op.operand)
            return f if f in UNIFORM or f == FINITE else (FINITE if _finite(f) else None)
        if isinstance(op, CastOp):
            f = self.of(op.operand)
            return f if f in UNIFORM and DTYPES[dtype_of(op.res.type)].is_float else None
        if isinstance(op, ReduceOp):
            return _reduced(op.fn.data, self.of(op.operand))
        if isinstance(op, UnaryOp):
            f = self.of(op.operand)
            if op.fn.data in ("exp", "exp2"):
                return {NEG_INF: ZERO, ZERO: ONE}.get(f) if isinstance(f, str) else None
            return None
        if isinstance(op, BinaryOp):
            return self._binary(op)
        if isinstance(op, DotOp):
            a, b = self.of(op.lhs), self.of(op.rhs)
            if not ((a == ZERO and _finite(b)) or (b == ZERO and _finite(a))):
                return None
            return ZERO if op.acc is None else _shaped(self.of(op.acc), op.res)  # acc + 0
        return None

    def _binary(self, op: BinaryOp) -> Fact:
        a, b = self.of(op.lhs), self.of(op.rhs)
        fn = op.fn.data
        for x, y in ((a, b), (b, a)):
            if fn == "maximum" and y == NEG_INF and (_finite(x) or x == NEG_INF):
                return _shaped(x, op.res)  # maximum(x, -inf) = x, x not NaN
            if fn == "add" and y == ZERO:
                return _shaped(x, op.res)
            if fn == "mul" and y == ONE:
                return _shaped(x, op.res)
            if fn == "mul" and y == ZERO and _finite(x):
                return ZERO
        if fn == "sub":
            if b == ZERO:
                return _shaped(a, op.res)
            if a == NEG_INF and _finite(b):
                return NEG_INF
            if isinstance(a, Same) and a == b and a.finite and op.res.type == a.arg.type:
                return ZERO
        return None


def _constant(op: ConstOp) -> Fact:
    if not DTYPES[op.dtype].is_float:
        return None
    n = float(op.number)
    if n == float("-inf"):
        return NEG_INF
    if n != n or n == float("inf"):
        return None
    return {0.0: ZERO, 1.0: ONE}.get(n, FINITE)


def _reduced(fn: str, f: Fact) -> Fact:
    if fn in ("max", "min"):
        return f if f in UNIFORM or f == FINITE else (FINITE if _finite(f) else None)
    if fn == "sum" and f == ZERO:
        return ZERO
    return None


def running_maxima(found: Causal) -> set[BlockArgument]:
    """The carried values that are a running max over the masked scores, along the keys
    (`m = maximum(m, max(where(mask, s, -inf), axis = 1))`), started at -inf or a finite
    constant: finite once each row has met a key the mask admits."""
    body = found.loop.body.block
    last = body.last_op
    assert isinstance(last, YieldOp)
    out = set()
    for arg, init, value in zip(body.args[1:], found.loop.inits, last.values, strict=True):
        update = value.owner
        if not (isinstance(update, BinaryOp) and update.fn.data == "maximum"):
            continue
        other = update.rhs if update.lhs is arg else update.lhs if update.rhs is arg else None
        reduce = other.owner if other is not None else None
        if not (
            isinstance(reduce, ReduceOp)
            and reduce.fn.data == "max"
            and reduce.axis.data == 1
            and reduce.operand in [w.res for w in found.selects]
            and reduce.res.type == arg.type
        ):
            continue
        start = init.owner
        fill = start.value.owner if isinstance(start, FullOp) else None
        if isinstance(start, ZerosOp) or (
            isinstance(fill, ConstOp) and _constant(fill) in (NEG_INF, ZERO, ONE, FINITE)
        ):
            out.add(arg)
    return out


def _identity_reasons(program: Program, found: Causal) -> list[Diagnostic]:
    loop = found.loop
    effect = next((op for op in loop.body.block.walk() if op is not loop and has_effect(op)), None)
    if effect is not None:
        return [
            not_applicable(
                NAME,
                "effect",
                ir.span(program, effect),
                "the key loop writes memory: a skipped block's write would be lost",
                "the tactic skips blocks whose iteration only updates carried values",
            )
        ]
    masked = Masked(loop, found.mask, running_maxima(found))
    last = loop.body.block.last_op
    assert isinstance(last, YieldOp)
    for arg, value in zip(loop.body.block.args[1:], last.values, strict=True):
        fact = masked.of(value)
        if not (isinstance(fact, Same) and fact.arg is arg):
            return [
                not_applicable(
                    NAME,
                    "not-identity",
                    ir.span(program, loop),
                    f"`{arg.name_hint}` is not left as it is by a block whose scores are all masked, "
                    "so the blocks after the diagonal cannot be dropped",
                    "the tactic drops them where each carried value is an online-softmax update "
                    "(m = maximum(m, max(s)); p = exp(s - m); alpha = exp(m_old - m); l = l * alpha + sum(p); "
                    "acc = acc * alpha + dot(p, v)): the identity on scores of -inf",
                )
            ]
    return []


# ---- the proofs -----------------------------------------------------------------------------------


def divisibility(found: Causal) -> sx.SymExpr:
    """`BM % BN == 0`: the diagonal is whole blocks."""
    return sx.Bin("==", sx.Bin("%", found.rows, found.keys), sx.Int(0))


def _needs_clause(program: Program, found: Causal) -> bool:
    clause = divisibility(found)
    if sx.fold(clause).as_int() is not None:  # numbers alone: decided by the values
        return False
    return not any(sx.same(sx.fold(w.data), sx.fold(clause)) for w in program.kernel.where.data)


def _proof_reasons(program: Program, found: Causal) -> list[Diagnostic]:
    import z3

    from verifier.context import Context  # z3: only for a loop of the right shape
    from verifier.symbolic import c_div, readable

    loop = found.loop
    clause = divisibility(found)
    ctx = Context(program)
    if ctx.static(sx.Bin("%", found.rows, found.keys)) not in (0, None):
        return [
            not_applicable(
                NAME,
                "where",
                ir.clause(program, "where"),
                f"the query block is not whole key blocks: {found.rows} % {found.keys} != 0 at the parameters' values",
                f"the diagonal is {found.rows} / {found.keys} key blocks: choose tiles with {found.rows} a multiple "
                f"of {found.keys}",
            )
        ]
    sym = ctx.symbolic
    j = sym.value(loop.body.block.args[0])
    m0 = sym.value(found.start)
    lo, hi = sym.value(loop.lower), sym.value(loop.upper)
    mask_shape = tuple(shape_of(found.mask.type))
    lanes = sym.lanes(mask_shape, "causal-skip")
    cond = sym.at(found.mask, lanes)
    tainted = next((t for t in (j, m0, lo, hi, cond) if t.tainted), None)
    if tainted is not None:
        return [
            not_applicable(
                NAME,
                "bounds",
                ir.span(program, loop),
                f"the prover cannot follow the mask or the loop's bounds: {tainted.why}",
                "the rows' start and the loop's bounds are integer expressions of the program ids and shapes",
            )
        ]
    bn, bm = sym.sym(found.keys), sym.sym(found.rows)
    first = c_div(m0.expr, bn)
    end = c_div(m0.expr + bm, bn)
    where = sym.bool_sym(clause)
    row, key = lanes
    position = m0.expr + row  # the row's own key
    own_block = c_div(position, bn)
    own_lane = position - own_block * bn
    own = z3.substitute(cond.expr, (j.expr, own_block), (key, own_lane))
    claims = [
        (lo.expr <= first, [], "the loop starts after the first diagonal block"),
        (end <= hi.expr, [], "the loop stops before the end of the diagonal"),
        (cond.expr, [j.expr < first], "a block before the diagonal has masked keys"),
        (z3.Not(cond.expr), [j.expr >= end], "a block after the diagonal has keys the mask admits"),
        (
            z3.And(lo.expr <= own_block, own_block < end, own_lane >= 0, own_lane < bn, own),
            [],
            "a row does not meet a key the mask admits in the blocks kept (its running max could stay -inf)",
        ),
    ]
    for claim, assume, what in claims:
        cex = sym.counterexample(claim, [where, *assume])
        if cex is not None:
            d = not_applicable(
                NAME,
                "bounds",
                ir.span(program, loop),
                f"{what}, for rows {found.start.name_hint or 'm0'} + arange(0, {found.rows}) and "
                f"key blocks of {found.keys}",
                "the tactic splits for j in 0 .. S / BN at m0 / BN and (m0 + BM) / BN",
            )
            return [replace(d, counterexample=readable(cex, len(program.kernel.grid.data)))]
    if sym.holds(lo.expr >= first, [where]) and sym.holds(hi.expr <= end, [where]):
        return [
            not_applicable(
                NAME,
                "diagonal-only",
                ir.span(program, loop),
                "the loop visits the diagonal blocks only: nothing to skip or unmask",
            )
        ]
    return []


# ---- the tactic ----------------------------------------------------------------------------------


def _reasons(program: Program, found: Causal) -> list[Diagnostic]:
    step = found.loop.step.owner
    if not (isinstance(step, ConstOp) and step.number == 1):
        return [
            not_applicable(
                NAME,
                "step",
                ir.span(program, found.loop),
                "the key loop's step is not 1: its blocks do not run in order one by one",
            )
        ]
    return _proof_reasons(program, found) or _identity_reasons(program, found)


def applicable(program: Program) -> Causal | None:
    """The first loop the tactic splits."""
    return next((c for c in candidates(program) if not _reasons(program, c)), None)


def _check(program: Program, target: str) -> list[Diagnostic]:
    explicit = ir.explicit_level(
        NAME,
        program,
        "where its rings and barriers count the loop's iterations",
        f"apply {NAME} to the tile-level program it came from",
    )
    if explicit:
        return explicit
    found = candidates(program)
    if not found:
        loops = ir.loops(program)
        return [
            not_applicable(
                NAME,
                "no-causal-mask",
                ir.span(program, loops[0]) if loops else program.span(),
                "no loop selects where(keys[None, :] <= rows[:, None], s, -inf) over key blocks "
                "keys = j * BN + arange(0, BN) for rows = m0 + arange(0, BM)"
                if loops
                else "the kernel has no loop",
            )
        ]
    first: list[Diagnostic] = []
    for causal in found:
        reasons = _reasons(program, causal)
        if not reasons:
            return []
        first = first or reasons
    return first


def _erase_if_dead(value: SSAValue) -> None:
    """Erase the pure op that made `value` when nothing uses it any more, and so on up."""
    op = value.owner
    if not isinstance(op, Operation) or op.regions or not is_pure(op) or any(r.uses for r in op.results):
        return
    operands = list(op.operands)
    block = op.parent_block()
    assert block is not None
    block.erase_op(op)
    for v in operands:
        _erase_if_dead(v)


def _expression_start(value: SSAValue, block: Block) -> Operation | None:
    """The first op of the expression that makes `value` inline (its unnamed, single-use ops in
    `block`), or the op itself; None when `value` is not made in `block`."""
    first = value.owner
    if not isinstance(first, Operation) or first.parent_block() is not block:
        return None
    stack = [first]
    while stack:
        op = stack.pop()
        for v in op.operands:
            owner = v.owner
            if (
                isinstance(owner, Operation)
                and owner.parent_block() is block
                and v.name_hint is None
                and v.has_one_use()
            ):
                if owner.is_before_in_block(first):
                    first = owner
                stack.append(owner)
    return first


def _sink(block: Block, before: Operation, into: ForOp) -> None:
    """Move the pure ops of `block` before `before` that only `into` uses (directly or through
    one another) to just before `into`: `rows` is computed next to the loop that reads it."""
    moved: list[Operation] = []
    chosen: set[Operation] = set()
    ops = list(block.ops)
    for op in reversed(ops[: ops.index(before)]):
        if op.regions or not is_pure(op) or not op.results:
            continue
        users = [use.operation for r in op.results for use in r.uses]
        if users and all(u in chosen or into.is_ancestor(u) for u in users):
            moved.append(op)
            chosen.add(op)
    for op in reversed(moved):
        op.detach()
        block.insert_op_before(op, into)


def _rewrite(program: Program) -> None:
    found = applicable(program)
    assert found is not None  # the precondition held
    loop = found.loop
    block = loop.parent_block()
    assert block is not None
    span = ir.span(program, loop)
    # the masked loop over the diagonal blocks: a copy, after the loop
    diagonal = loop.clone()
    set_span(diagonal, span_of(loop))
    for old, new in zip(_inner(loop), _inner(diagonal), strict=True):
        copy_source_notes(old, new)
    block.insert_op_after(diagonal, loop)
    for result, later in zip(loop.res, diagonal.res, strict=True):
        result.replace_all_uses_with(later)
    # the unmasked loop: up to the first diagonal block, without the selects; its new bound
    # goes where the old one was written (before the loop's literal bounds, as the parser
    # puts them)
    old_upper = loop.upper
    emit = _grid.Emitter(block, _expression_start(old_upper, block), span)
    upper = emit.binary("div", found.start, emit.static(found.keys))
    loop.operands = [loop.lower, upper, loop.step, *loop.inits]
    for select in found.selects:
        select.res.replace_all_uses_with(select.lhs)
        operands = list(select.operands)
        loop.body.block.erase_op(select)
        for v in operands:
            _erase_if_dead(v)
    _sink(block, loop, diagonal)
    emit = _grid.Emitter(block, diagonal, span)
    lower = emit.binary("div", found.start, emit.static(found.keys))
    end = emit.binary("div", emit.binary("add", found.start, emit.static(found.rows)), emit.static(found.keys))
    diagonal.operands = [lower, end, emit.const(1), *loop.res]
    _erase_if_dead(old_upper)
    if _needs_clause(program, found):
        kernel: KernelOp = program.kernel
        kernel.where = ArrayAttr([*kernel.where.data, SymAttr(divisibility(found))])


def _inner(op: Operation) -> Iterator[Operation]:
    for region in op.regions:
        for block in region.blocks:
            for inner in block.ops:
                yield from inner.walk()


CAUSAL_SKIP = register(
    Tactic(
        name=NAME,
        summary="split a causally masked key loop at the diagonal: unmasked before, masked on it, none after",
        explain=__doc__ or "",
        params=(),
        numerics="exact",
        check=_check,
        rewrite=_rewrite,
        examples=("kir tactics apply benchmarks/tasks/causal_attention/seed.kir causal-skip",),
    )
)
