"""What the grid tactics (grouped-order, persistent, reverse-order) share: a program's grid and
program ids, static expressions written as run-time ops, and fresh names.

A grid tactic changes which program computes which tile: it rewrites the `grid(...)` clause and
stands new scalar ops in for the `program_id(a)` (and `num_programs(a)`) ops of the body. The
new ops take the span of the first `program_id` op they stand for, so that a diagnostic about
them points at the line that read the program id. The module's name starts with `_`: it is not a
tactic, and the registry does not import it as one.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Block, Operation, SSAValue

from kir import symexpr as sx
from kir.diagnostics import Diagnostic, Span
from kir.dialect.tile import BinaryOp, ConstOp, DotOp, NumProgramsOp, ProgramIdOp, SymValueOp
from kir.dialect.types import SymAttr, syms
from kir.program import Program, set_span
from tactics import ir


class Emitter:
    """Inserts new ops before one op of a block (or at its end), each with one span."""

    def __init__(self, block: Block, before: Operation | None, span: Span | None):
        self.block, self.before, self.span = block, before, span

    def __call__(self, op: Operation, name: str | None = None) -> SSAValue:
        set_span(op, self.span)
        if self.before is None:
            self.block.add_op(op)
        else:
            self.block.insert_op_before(op, self.before)
        result = op.results[0]
        if name is not None:
            result.name_hint = name
        return result

    def binary(self, fn: str, lhs: SSAValue, rhs: SSAValue, name: str | None = None) -> SSAValue:
        return self(BinaryOp(fn, lhs, rhs), name)

    def const(self, value: int) -> SSAValue:
        return self(ConstOp(value, "i32"))

    def static(self, expr: sx.SymExpr, name: str | None = None) -> SSAValue:
        """A static expression (shape symbols, parameters, integers) as i32 run-time ops:
        `cdiv(a, b)` is `(a + b - 1) / b`, as the grid clause means it (sizes are positive)."""
        expr = sx.fold(expr)
        if isinstance(expr, sx.Int):
            return self(ConstOp(expr.value, "i32"), name)
        if isinstance(expr, sx.Sym):
            return self(SymValueOp(expr.name), name)
        assert isinstance(expr, sx.Bin), expr
        if expr.op == "cdiv":
            top = self.binary("sub", self.binary("add", self.static(expr.lhs), self.static(expr.rhs)), self.const(1))
            return self.binary("div", top, self.static(expr.rhs), name)
        fn = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "rem", "min": "minimum", "max": "maximum"}[expr.op]
        return self.binary(fn, self.static(expr.lhs), self.static(expr.rhs), name)


def grid(program: Program) -> list[sx.SymExpr]:
    return [a.data for a in program.kernel.grid.data]


def set_grid(program: Program, extents: list[sx.SymExpr]) -> None:
    program.kernel.grid = syms(extents)


I32_MAX = 2**31 - 1  # programs on a grid axis (CUDA's gridDim.x; HIP's is no larger)


def bound_i32(program: Program, extents: list[sx.SymExpr]) -> None:
    """`where E <= 2147483647` for each extent that is a product of shapes: an index the rewrite
    computes in i32 from it (a flattened tile number, a band's row) relies on it, as the old
    grid's launch did (bounds.index-overflow proves the rest)."""
    kernel = program.kernel
    have = {str(w.data) for w in kernel.where.data}
    new = []
    for e in extents:
        if isinstance(e, sx.Int | sx.Sym):
            continue  # a constant, or one shape symbol (which the verifier takes to fit in i32)
        clause = SymAttr(sx.Bin("<=", e, sx.Int(I32_MAX)))
        if str(clause.data) not in have:
            have.add(str(clause.data))
            new.append(clause)
    kernel.where = ArrayAttr([*kernel.where.data, *new])


def program_ids(program: Program) -> list[ProgramIdOp]:
    """Every `program_id(a)` op of the body, in the order of the text."""
    return [op for op in program.kernel.walk() if isinstance(op, ProgramIdOp)]


def num_programs(program: Program) -> list[NumProgramsOp]:
    return [op for op in program.kernel.walk() if isinstance(op, NumProgramsOp)]


def has_dot(program: Program) -> bool:
    return any(isinstance(op, DotOp) for op in program.kernel.walk())


def taken_names(program: Program) -> set[str]:
    """Every name the program uses: parameters, shape symbols, arguments, values."""
    kernel = program.kernel
    names = set(kernel.params) | set(kernel.shape_symbols) | {n for n, _ in kernel.args}
    for op in kernel.walk():
        for result in op.results:
            if result.name_hint:
                names.add(result.name_hint)
        for region in op.regions:
            for block in region.blocks:
                names |= {a.name_hint for a in block.args if a.name_hint}
    return names


def fresh(base: str, taken: set[str]) -> str:
    """`base`, or `base_1`, `base_2`... the first that `taken` lacks (added to it)."""
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}_{i}"
    taken.add(name)
    return name


def add_param(program: Program, base: str, value: int) -> str:
    """A new compile-time parameter with a name the program does not use yet; its name."""
    name = fresh(base, taken_names(program))
    kernel = program.kernel
    kernel.param_names = ArrayAttr([*kernel.param_names.data, StringAttr(name)])
    kernel.param_defaults = ArrayAttr([*kernel.param_defaults.data, IntAttr(value)])
    return name


def stand_in(program: Program, axis_values: dict[int, SSAValue], keep: Operation | None = None) -> None:
    """Every `program_id(a)` op of the body (but `keep`, the one the new values are computed
    from) replaced by `axis_values[a]`, and every `num_programs(a)` by the old grid's extent
    `a` (computed where it was read). Call it before the grid clause is rewritten."""
    extents = grid(program)
    for op in program_ids(program):
        if op is not keep and op.axis.data in axis_values:
            op.res.replace_all_uses_with(axis_values[op.axis.data])
            block = op.parent_block()
            assert block is not None
            block.erase_op(op)
    for count in num_programs(program):
        block = count.parent_block()
        assert block is not None
        value = Emitter(block, count, ir.span(program, count)).static(extents[count.axis.data])
        count.res.replace_all_uses_with(value)
        block.erase_op(count)


def explicit_reason(tactic: str, program: Program) -> list[Diagnostic]:
    """A grid tactic's reason at the explicit level (its roles and rings are written for the grid)."""
    return ir.explicit_level(
        tactic,
        program,
        "where its roles and rings are written for its grid",
        f"apply {tactic} to the tile-level program it came from",
    )
