"""`specialize-where`: assume a divisibility (`where N % BLOCK == 0`) and drop what it makes
redundant: the masks that are then true on every lane, the selects on them, and gathers of
contiguous index tiles, which become block slices (`x[row, c0 + arange(0, B)]` ->
`x[row, c0 : c0 + B]`).

A mask such as `offs < N` guards the last, partial block of a row or a grid. Where the shape is
a multiple of the block, no block is partial: the mask is true everywhere, and the load or
store needs no predicate (one fewer compare and select per element, and a vector access whose
width does not depend on the mask's contiguity). Each mask is dropped only where the bounds
prover (verifier.symbolic: z3 over every program id, loop iteration and lane, with the
parameters' values) shows it true under the `where` clauses with the new one; a mask it cannot
prove true stays. With `N <= BLOCK`, `N % BLOCK == 0` means `N == BLOCK`: a program whose row is
one tile then has no masks at all.

A mask written as a conjunction (`rmask[:, None] & dmask[None, :]`, the `&` inline in the load,
store or select) is taken term by term: the terms proven true everywhere are dropped and the
rest kept (`mask = rmask[:, None]`), so that a mask over a dimension the clause makes whole
goes even where another dimension still needs one. A named conjunction (`mask = a & b`, used
by name) is one term: it may guard other accesses where the proof does not hold.

The clause is an assumption the interpreter and the harness check at launch (as fix-shape's):
on shapes that satisfy it the program computes bitwise what it did, where a lane that was
masked off did not exist; on others it refuses to run (`interp.where-violated`). A clause the
`where` clauses already imply (`N == NC * CH` implies `N % CH == 0`) is not written again.

A gather through index tiles that are each an `arange` plus a scalar start, one per dimension
in order (`rows[:, None]`, `cols[None, :]`), reads the block `start : start + extent` of each
dimension: the access is written as that block (a slice), which the lowering knows to be
contiguous without looking through the index arithmetic. The tiles read are the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from xdsl.dialects.builtin import ArrayAttr
from xdsl.ir import Operation, SSAValue

from kir import symexpr as sx
from kir.diagnostics import Diagnostic
from kir.dialect.structure import ForOp
from kir.dialect.tile import (
    ArangeOp,
    BinaryOp,
    ConstOp,
    ExpandDimsOp,
    LoadOp,
    StoreOp,
    SymValueOp,
    WhereOp,
)
from kir.dialect.traits import is_pure
from kir.dialect.types import Access, GlobalType, SymAttr, TileType, broadcast_shapes, dtype_of, shape_of
from kir.names import suggest
from kir.program import Program
from kir.spans import copy_source_notes
from tactics import ir
from tactics.base import Names, Param, Tactic, Value, not_applicable
from tactics.registry import register

NAME = "specialize-where"

Masked = LoadOp | StoreOp


def masked(program: Program) -> list[Operation]:
    """The loads and stores with a mask and the selects, in the order of the text."""
    return [
        op
        for op in program.kernel.walk()
        if (isinstance(op, Masked) and op.mask is not None) or isinstance(op, WhereOp)
    ]


def condition(op: Operation) -> SSAValue:
    assert isinstance(op, LoadOp | StoreOp | WhereOp)
    if isinstance(op, WhereOp):
        return op.cond
    assert op.mask is not None
    return op.mask


def conjuncts(cond: SSAValue) -> list[SSAValue]:
    """The terms of a conjunction written inline (`a & b & c`: unnamed `&` ops of i1 used
    once), in the order of the text; `[cond]` for anything else."""
    owner = cond.owner
    if (
        isinstance(owner, BinaryOp)
        and owner.fn.data == "and"
        and dtype_of(cond.type) == "i1"
        and cond.name_hint is None
        and cond.has_one_use()
    ):
        return conjuncts(owner.lhs) + conjuncts(owner.rhs)
    return [cond]


def names_in(value: SSAValue, seen: set[int] | None = None) -> set[str]:
    """The shape symbols and parameters that `value` is computed from (through the ops that
    make it and the bounds of the loops whose variables it uses)."""
    seen = set() if seen is None else seen
    out: set[str] = set()
    stack = [value]
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        owner = v.owner
        if isinstance(owner, Operation):
            if isinstance(owner, SymValueOp):
                out.add(owner.symbol.data)
            elif isinstance(owner, ArangeOp):
                out |= owner.start.data.symbols() | owner.end.data.symbols()
            stack.extend(owner.operands)
        else:  # a block argument: a loop variable or a carried value
            parent = owner.parent_op()
            if isinstance(parent, ForOp):
                stack.extend([parent.lower, parent.upper, parent.step])
    return out


def _candidates(program: Program) -> tuple[list[str], list[str]]:
    """The shape symbols and the parameters that the masks are computed from."""
    found: set[str] = set()
    seen: set[int] = set()
    for op in masked(program):
        found |= names_in(condition(op), seen)
    symbols = [s for s in program.kernel.shape_symbols if s in found]
    params = [p for p in program.params if p in found]
    return symbols, params


def _check(program: Program, target: str) -> list[Diagnostic]:
    symbols, params = _candidates(program)
    if symbols and params:
        return []
    found = masked(program)
    if not found:
        return [
            not_applicable(
                NAME,
                "no-mask",
                program.span(),
                "the kernel has no masked load or store and no select",
                "the tactic drops masks that a divisibility in `where` makes true everywhere",
            )
        ]
    return [
        not_applicable(
            NAME,
            "no-mask",
            ir.span(program, found[0]),
            "no mask compares a value made from a compile-time parameter with a shape symbol",
            "the tactic assumes `where N % BLOCK == 0` for a shape symbol N and a parameter BLOCK of the masks",
        )
    ]


# ---- the plan: what the clause makes redundant -------------------------------------------------


def clause_of(symbol: str, by: str) -> sx.SymExpr:
    return sx.Bin("==", sx.Bin("%", sx.Sym(symbol), sx.Sym(by)), sx.Int(0))


@dataclass
class Plan:
    """What applying the tactic changes, by position in the walk of the kernel."""

    add_clause: bool
    satisfiable: bool  # some shape satisfies the `where` clauses with the new one
    unmask: list[int]  # loads and stores whose mask is true everywhere
    select: list[int]  # selects whose condition is true everywhere
    slices: list[int]  # gathers of contiguous index tiles
    narrow: dict[int, list[SSAValue]] = field(default_factory=dict)  # masks and selects: terms true everywhere


def plan(program: Program, symbol: str, by: str) -> Plan:
    import z3

    from verifier.context import Context  # z3: only when the tactic is applied

    ctx = Context(program)
    sym = ctx.symbolic
    clause = sym.bool_sym(clause_of(symbol, by))
    implied = sym.holds(clause, sym.shape_facts())
    if not implied and sym.holds(z3.Not(clause), sym.shape_facts()):
        return Plan(True, False, [], [], [])
    ops = list(program.kernel.walk())
    unmask: list[int] = []
    select: list[int] = []
    narrow: dict[int, list[SSAValue]] = {}
    for i, op in enumerate(ops):
        if isinstance(op, Masked) and op.mask is not None:
            shape = op.shape
        elif isinstance(op, WhereOp):
            shape = tuple(shape_of(op.res.type))
        else:
            continue
        lanes = sym.lanes(shape, f"specialize{i}")  # lanes of one name have one extent
        assume = [clause, sym.path(op).expr]
        terms = conjuncts(condition(op))
        true = []
        for term in terms:
            value = sym.at(term, lanes)
            if not value.tainted and sym.holds(value.expr, assume):
                true.append(term)
        if not true:
            continue
        if isinstance(op, Masked):
            if len(true) == len(terms):
                unmask.append(i)
            else:
                narrow[i] = true
        elif len(true) == len(terms):
            if op.lhs.type == op.res.type:  # the select is its first value
                select.append(i)
        elif broadcast_shapes(shape_of(op.lhs.type), shape_of(op.rhs.type)) == tuple(shape):
            narrow[i] = true  # the values alone give the result's shape: a smaller condition keeps it
    slices = [i for i, op in enumerate(ops) if isinstance(op, Masked) and block_of(op) is not None]
    return Plan(not implied, True, unmask, select, slices, narrow)


# ---- gathers as block slices -------------------------------------------------------------------


def _arange_start(v: SSAValue) -> tuple[SSAValue | int, sx.SymExpr] | None:
    """(start, extent) when the 1-D tile `v` is `arange(lo, hi)` (start lo) or a scalar plus
    `arange(0, E)` (start the scalar)."""
    owner = v.owner
    if isinstance(owner, ArangeOp):
        lo = sx.fold(owner.start.data).as_int()
        if lo is None:
            return None
        return lo, sx.fold(sx.Bin("-", owner.end.data, owner.start.data))
    if isinstance(owner, BinaryOp) and owner.fn.data == "add":
        for tile, scalar in ((owner.lhs, owner.rhs), (owner.rhs, owner.lhs)):
            if isinstance(tile.type, TileType) and not isinstance(scalar.type, TileType):
                inner = tile.owner
                if isinstance(inner, ArangeOp) and sx.fold(inner.start.data).as_int() == 0:
                    return scalar, inner.end.data
    return None


def block_of(op: Masked) -> list[tuple[SSAValue | int, sx.SymExpr | None]] | None:
    """For a gather from a global tensor whose index tiles are contiguous ranges, one per
    dimension in order: per dimension, (start, extent) of a slice or (the scalar index, None);
    else None."""
    if not isinstance(op.mem.type, GlobalType) or any(d is not None for d in op.access.data.dims):
        return None
    tiles = [v for v in op.indices if isinstance(v.type, TileType)]
    if not tiles:
        return None
    rank = len(tiles)
    out: list[tuple[SSAValue | int, sx.SymExpr | None]] = []
    position = 0
    for v in op.indices:
        if not isinstance(v.type, TileType):
            out.append((v, None))
            continue
        shape = shape_of(v.type)
        base = v
        if rank > 1:
            # `r[:, None]`: the range at axis `position` of a rank-`rank` tile of ones elsewhere
            if len(shape) != rank or not all(sx.fold(d).as_int() == 1 for k, d in enumerate(shape) if k != position):
                return None
            owner = v.owner
            while isinstance(owner, ExpandDimsOp):
                base = owner.operand
                owner = base.owner
        if len(shape_of(base.type)) != 1:
            return None
        found = _arange_start(base)
        if found is None:
            return None
        out.append(found)
        position += 1
    return out


def _expression_start(op: Operation) -> Operation:
    """The first op of the expression the printer writes inline in `op` (its operands' ops in
    the same block whose one result is unnamed and used once): a new operand of `op` goes
    before it, so that the text keeps the order in which it is evaluated."""
    first = op
    stack = [op]
    while stack:
        top = stack.pop()
        for v in top.operands:
            owner = v.owner
            if (
                isinstance(owner, Operation)
                and owner.parent_block() is op.parent_block()
                and len(owner.results) == 1
                and owner.results[0].name_hint is None
                and owner.results[0].has_one_use()
            ):
                if owner.is_before_in_block(first):
                    first = owner
                stack.append(owner)
    return first


def _as_block(
    op: Masked,
    block: list[tuple[SSAValue | int, sx.SymExpr | None]],
    mask: SSAValue | None,
    renames: list[tuple[SSAValue, SSAValue]],
) -> Masked:
    """The access as a block of slices (`block_of`), with `mask`; `renames` gets (start,
    index tile) for each unnamed start, to be named after its tile if the tile goes."""
    parent = op.parent_block()
    assert parent is not None
    indices: list[SSAValue] = []
    dims: list[sx.SymExpr | None] = []
    before = _expression_start(op)
    for (start, extent), tile in zip(block, op.indices, strict=True):
        if isinstance(start, int):
            const = ConstOp(start, "i32")
            copy_source_notes(op, const)
            parent.insert_op_before(const, before)
            start = const.res
        elif extent is not None and start.name_hint is None and tile.name_hint:
            renames.append((start, tile))
        indices.append(start)
        dims.append(extent)
    return _rebuilt(op, Access(tuple(dims)), indices, mask)


def _rebuilt(op: Masked, access: Access, indices: list[SSAValue], mask: SSAValue | None) -> Masked:
    """A copy of the access with new indexing and mask (None: unmasked, and no `other`)."""
    new: Masked
    if isinstance(op, LoadOp):
        other = None if mask is None else op.other
        evict = op.evict.data if op.evict is not None else None
        new = LoadOp(op.mem, access, indices, mask, other, evict)
    else:
        new = StoreOp(op.mem, access, indices, op.value, mask)
    copy_source_notes(op, new)
    parent = op.parent_block()
    assert parent is not None
    parent.insert_op_before(new, op)
    if isinstance(op, LoadOp):
        assert isinstance(new, LoadOp)
        new.res.name_hint = op.res.name_hint
        op.res.replace_all_uses_with(new.res)
    parent.erase_op(op)
    return new


def _inline_and(cond: SSAValue) -> BinaryOp | None:
    """The `&` op of a conjunction written inline (see `conjuncts`), else None."""
    terms = conjuncts(cond)
    if len(terms) == 1 and terms[0] is cond:
        return None
    assert isinstance(cond.owner, BinaryOp)
    return cond.owner


def _without(cond: SSAValue, true: set[int]) -> SSAValue | None:
    """`cond` without its terms whose ids are in `true`; None when no term is left. A `&` whose
    terms change is written anew just before the old one (left for `_erase_dead`), which is
    where the parser puts the `&` of the text that the result prints."""
    if id(cond) in true:
        return None
    owner = _inline_and(cond)
    if owner is None:
        return cond
    lhs, rhs = _without(owner.lhs, true), _without(owner.rhs, true)
    if lhs is None or rhs is None:
        return rhs if lhs is None else lhs
    if lhs is owner.lhs and rhs is owner.rhs:
        return cond
    new = BinaryOp("and", lhs, rhs)
    copy_source_notes(owner, new)
    parent = owner.parent_block()
    assert parent is not None
    parent.insert_op_before(new, owner)
    return new.res


def _reselected(op: WhereOp, cond: SSAValue) -> WhereOp:
    """A copy of the select with condition `cond`."""
    new = WhereOp(cond, op.lhs, op.rhs)
    copy_source_notes(op, new)
    parent = op.parent_block()
    assert parent is not None
    parent.insert_op_before(new, op)
    new.res.name_hint = op.res.name_hint
    op.res.replace_all_uses_with(new.res)
    parent.erase_op(op)
    return new


def _erase_dead(program: Program) -> None:
    """Erase the pure ops whose results nothing uses any more (the masks' compares, the
    index tiles of a gather now written as a slice), innermost uses first."""
    changed = True
    while changed:
        changed = False
        for op in reversed(list(program.kernel.walk())):
            if op is program.kernel or op.regions or not op.results or not is_pure(op):
                continue
            if all(not r.uses for r in op.results):
                parent = op.parent_block()
                assert parent is not None
                parent.erase_op(op)
                changed = True


# ---- the tactic --------------------------------------------------------------------------------


def _validate(program: Program, values: dict[str, Value]) -> list[Diagnostic]:
    symbol, by = str(values["symbol"]), str(values["by"])
    problems = []
    if symbol not in program.kernel.shape_symbols:
        problems.append(
            Diagnostic(
                "tactic.specialize-where.symbol",
                "error",
                ir.clause(program, "where"),
                f"tactic specialize-where: {symbol} is not a shape symbol of kernel {program.name}",
                suggest(symbol, program.kernel.shape_symbols)
                or f"shape symbols: {', '.join(program.kernel.shape_symbols) or 'none'}",
            )
        )
    if by not in program.params:
        problems.append(
            Diagnostic(
                "tactic.specialize-where.by",
                "error",
                ir.clause(program, "where"),
                f"tactic specialize-where: {by} is not a compile-time parameter of kernel {program.name}",
                suggest(by, program.params) or f"parameters: {', '.join(program.params) or 'none'}",
            )
        )
    if problems:
        return problems
    found = plan(program, symbol, by)
    if not found.satisfiable:
        return [
            Diagnostic(
                "tactic.specialize-where.where",
                "error",
                ir.clause(program, "where"),
                f"tactic specialize-where: no {symbol} that is a multiple of {by} satisfies the `where` clauses",
                "no input of such a shape could run the program",
            )
        ]
    if found.unmask or found.select or found.narrow:
        return []
    return [
        Diagnostic(
            "tactic.specialize-where.nothing",
            "error",
            ir.clause(program, "where"),
            f"tactic specialize-where: no mask is true everywhere when {symbol} % {by} == 0",
            "choose the symbol and the parameter that a mask compares (offs < N with offs a block of BLOCK)",
        )
    ]


def _domains(program: Program, target: str, shapes: Mapping[str, int]) -> dict[str, tuple[Value, ...]]:
    symbols, params = _candidates(program)
    if shapes:
        # where the shapes are known, only the pairs they satisfy
        fit = [s for s in symbols if s not in shapes or any(shapes[s] % program.params[p] == 0 for p in params)]
        symbols = fit
        params = [p for p in params if any(s not in shapes or shapes[s] % program.params[p] == 0 for s in symbols)]
    return {"symbol": tuple(symbols), "by": tuple(params)}


def _rewrite(program: Program, *, symbol: str, by: str) -> None:
    found = plan(program, symbol, by)
    ops = list(program.kernel.walk())
    renames: list[tuple[SSAValue, SSAValue]] = []
    for i in found.select:
        op = ops[i]
        assert isinstance(op, WhereOp)
        op.res.replace_all_uses_with(op.lhs)
    masks: dict[int, SSAValue | None] = dict.fromkeys(found.unmask)
    for i, true in found.narrow.items():
        op = ops[i]
        kept = _without(condition(op), {id(term) for term in true})
        if isinstance(op, WhereOp):
            assert kept is not None  # a term is left, else the select would be dropped
            _reselected(op, kept)
        else:
            masks[i] = kept
    for i in sorted(set(masks) | set(found.slices)):
        op = ops[i]
        assert isinstance(op, LoadOp | StoreOp)
        mask = masks[i] if i in masks else op.mask
        block = block_of(op) if i in found.slices else None
        if block is not None:
            _as_block(op, block, mask, renames)
        else:
            _rebuilt(op, op.access.data, list(op.indices), mask)
    if found.add_clause:
        program.kernel.where = ArrayAttr([*program.kernel.where.data, SymAttr(clause_of(symbol, by))])
    _erase_dead(program)
    for start, tile in renames:
        owner = tile.owner
        if start.name_hint is None and isinstance(owner, Operation) and owner.parent is None:
            start.name_hint = tile.name_hint  # `offs` names the block's start once the tile is gone


SPECIALIZE_WHERE = register(
    Tactic(
        name=NAME,
        summary="assume where N % BLOCK == 0 and drop the masks it makes true; gathers of ranges to slices",
        explain=__doc__ or "",
        params=(
            Param("symbol", Names("a shape symbol"), None, "the shape symbol assumed a multiple (N)"),
            Param("by", Names("a compile-time parameter"), None, "the parameter it is a multiple of (BLOCK)"),
        ),
        numerics="exact",
        check=_check,
        rewrite=_rewrite,
        domains_of=_domains,
        validate=_validate,
        anchor=lambda program: ir.clause(program, "where"),
        examples=(
            "kir tactics apply benchmarks/tasks/id_hash/seed.kir specialize-where --param symbol=N --param by=BLOCK",
        ),
    )
)
