"""KIR index arithmetic as z3 terms, for proofs over every program id, loop iteration and lane.

A scalar is one z3 term; a tile is a term over one *lane* variable per dimension (lane i of an
`arange(0, BN)` is `i`), so broadcasting is substitution of lanes. Shape symbols are variables
constrained by `where` and by being at least 1; program ids range over the grid; a loop
variable over its bounds; `role_rank()` over its role's units. Parameters are constants (the
instance being checked). What cannot be expressed (data loaded from memory, values carried by
loops, bit operations) becomes a fresh unconstrained variable and marks the term *tainted*, so
a rule can tell "provably wrong" from "not provable".

Proof results are cached by the text of the query, in memory and on disk (`KIR_CACHE_DIR`,
default `~/.cache/kir`), since agents re-check near-identical programs many times.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import z3
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from kir import symexpr as sx
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import ScalarType, TileType, shape_of
from kir.dtypes import DTYPES


@dataclass(frozen=True)
class Term:
    expr: z3.ExprRef
    tainted: bool


class ProofCache:
    """sat/unsat answers (and counterexamples) keyed by a hash of the query."""

    def __init__(self) -> None:
        self.memory: dict[str, dict | None] = {}
        root = os.environ.get("KIR_CACHE_DIR")
        self.path: Path | None = None
        if os.environ.get("KIR_Z3_CACHE", "1") != "0":
            base = Path(root) if root else Path.home() / ".cache" / "kir"
            self.path = base / "z3-proofs.json"
        self._loaded = False
        self._dirty = False

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        if self.path is not None and self.path.exists():
            try:
                self.memory.update(json.loads(self.path.read_text()))
            except (OSError, ValueError):
                pass

    def get(self, key: str) -> tuple[bool, dict | None]:
        self._load()
        if key in self.memory:
            return True, self.memory[key]
        return False, None

    def put(self, key: str, value: dict | None) -> None:
        self.memory[key] = value
        self._dirty = True

    def flush(self) -> None:
        if not self._dirty or self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.memory))
            tmp.replace(self.path)
            self._dirty = False
        except OSError:
            pass


CACHE = ProofCache()


def c_div(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    """Integer division truncating toward zero (z3's own is Euclidean)."""
    return z3.If(
        a >= 0,
        z3.If(b > 0, a / b, -(a / -b)),
        z3.If(b > 0, -((-a) / b), (-a) / (-b)),
    )


def c_rem(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    return a - b * c_div(a, b)


class Symbolic:
    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.kernel = ctx.kernel
        self.facts: list[z3.BoolRef] = []
        self.names: dict[str, z3.ArithRef] = {}
        self.loop_vars: dict[SSAValue, z3.ArithRef] = {}
        self.unknowns = 0
        self.memo: dict[tuple, Term] = {}
        for name in self.kernel.shape_symbols:
            v = z3.Int(name)
            self.names[name] = v
            self.facts.append(v >= 1)
        for w in self.kernel.where.data:
            self.facts.append(self.bool_sym(w.data))
        self.pids = []
        for i, g in enumerate(self.kernel.grid.data):
            p = z3.Int(f"program_id({i})")
            self.pids.append(p)
            self.facts += [p >= 0, p < self.sym(g.data)]

    # ---- symbolic sizes -----------------------------------------------------------------------

    def sym_var(self, name: str) -> z3.ArithRef:
        return self.sym(sx.Sym(name))

    def shape_facts(self) -> list[z3.BoolRef]:
        """The constraints on shape symbols alone (at least 1, and `where`)."""
        out = [self.names[n] >= 1 for n in self.kernel.shape_symbols if n in self.names]
        out += [self.bool_sym(w.data) for w in self.kernel.where.data]
        return out

    def sym(self, e: sx.SymExpr) -> z3.ArithRef:
        if isinstance(e, sx.Int):
            return z3.IntVal(e.value)
        if isinstance(e, sx.Sym):
            if e.name in self.ctx.params:
                return z3.IntVal(self.ctx.params[e.name])
            if e.name not in self.names:
                v = z3.Int(e.name)
                self.names[e.name] = v
                self.facts.append(v >= 1)
            return self.names[e.name]
        assert isinstance(e, sx.Bin)
        a, b = self.sym(e.lhs), self.sym(e.rhs)
        return _arith(e.op, a, b)

    def bool_sym(self, e: sx.SymExpr) -> z3.BoolRef:
        if isinstance(e, sx.Bin) and e.op in sx.COMPARISONS:
            a, b = self.sym(e.lhs), self.sym(e.rhs)
            return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[e.op]
        return self.sym(e) != 0

    # ---- SSA values -------------------------------------------------------------------------

    def fresh(self, hint: str, boolean: bool = False) -> z3.ExprRef:
        self.unknowns += 1
        name = f"?{hint}#{self.unknowns}"
        return z3.Bool(name) if boolean else z3.Int(name)

    def lanes(self, shape: tuple[sx.SymExpr, ...], tag: str) -> tuple[z3.ArithRef, ...]:
        out = []
        for i, d in enumerate(shape):
            lane = z3.Int(f"lane{i}@{tag}")
            out.append(lane)
            self.facts += [lane >= 0, lane < self.sym(d)]
        return tuple(out)

    def value(self, v: SSAValue, lanes: tuple = ()) -> Term:
        """The term of `v` at the given lanes (one per dimension of `v`)."""
        key = (id(v), tuple(str(x) for x in lanes))
        if key not in self.memo:
            self.memo[key] = self._value(v, lanes)
        return self.memo[key]

    def _value(self, v: SSAValue, lanes: tuple) -> Term:
        boolean = _is_bool(v)
        if isinstance(v, BlockArgument):
            return self._block_arg(v, boolean)
        op = v.owner
        assert isinstance(op, Operation)
        if isinstance(op, tl.ConstOp):
            n = op.number
            if boolean:
                return Term(z3.BoolVal(bool(n)), False)
            if isinstance(n, float):
                return Term(self.fresh("float"), True)
            return Term(z3.IntVal(int(n)), False)
        if isinstance(op, tl.SymValueOp):
            return Term(self.sym(sx.Sym(op.symbol.data)), False)
        if isinstance(op, tl.ProgramIdOp):
            return Term(self.pids[op.axis.data], False)
        if isinstance(op, tl.NumProgramsOp):
            return Term(self.sym(self.kernel.grid.data[op.axis.data].data), False)
        if isinstance(op, st.RoleRankOp):
            return Term(self._rank(op), False)
        if isinstance(op, tl.ArangeOp):
            return Term(self.sym(op.start.data) + lanes[0], False)
        if isinstance(op, tl.ZerosOp):
            return Term(z3.BoolVal(False) if boolean else z3.IntVal(0), False)
        if isinstance(op, tl.FullOp):
            return self.value(op.value)
        if isinstance(op, tl.BinaryOp | tl.CompareOp):
            a = self.operand(op.lhs, v, lanes)
            b = self.operand(op.rhs, v, lanes)
            if DTYPES[_dtype(op.lhs)].is_float:
                return Term(self.fresh("float", boolean), True)
            fn = op.fn.data if isinstance(op, tl.BinaryOp) else op.predicate.data
            expr = _combine(fn, a.expr, b.expr, _is_bool(op.lhs))
            if expr is None:
                return Term(self.fresh(fn, boolean), True)
            return Term(expr, a.tainted or b.tainted)
        if isinstance(op, tl.UnaryOp):
            a = self.operand(op.operand, v, lanes)
            if op.fn.data == "neg" and not boolean and not DTYPES[_dtype(op.operand)].is_float:
                return Term(-a.expr, a.tainted)
            if op.fn.data == "not" and boolean:
                return Term(z3.Not(a.expr), a.tainted)
            if op.fn.data == "abs" and not DTYPES[_dtype(op.operand)].is_float:
                return Term(z3.If(a.expr >= 0, a.expr, -a.expr), a.tainted)
            return Term(self.fresh(op.fn.data, boolean), True)
        if isinstance(op, tl.WhereOp):
            c = self.operand(op.cond, v, lanes)
            a = self.operand(op.lhs, v, lanes)
            b = self.operand(op.rhs, v, lanes)
            return Term(z3.If(c.expr, a.expr, b.expr), c.tainted or a.tainted or b.tainted)
        if isinstance(op, tl.CastOp):
            src = DTYPES[_dtype(op.operand)]
            dst = DTYPES[_dtype(op.res)]
            if src.is_int and dst.is_int and src.kind != "bool" and dst.kind != "bool":
                return self.operand(op.operand, v, lanes)
            return Term(self.fresh("cast", boolean), True)
        if isinstance(op, tl.ExpandDimsOp):
            inner = tuple(l for i, l in enumerate(lanes) if i != op.axis.data)
            return self.value(op.operand, inner)
        if isinstance(op, tl.BroadcastOp):
            return self.operand(op.operand, v, lanes)
        return Term(self.fresh(op.name.removeprefix("kir."), boolean), True)

    def operand(self, operand: SSAValue, result: SSAValue, lanes: tuple) -> Term:
        """`operand` evaluated at the lanes of `result`, numpy-broadcast (right-aligned, a
        dimension of extent 1 sits at lane 0)."""
        oshape = shape_of(operand.type)
        k = len(lanes) - len(oshape)
        mapped = []
        for i, d in enumerate(oshape):
            mapped.append(z3.IntVal(0) if sx.fold(d).as_int() == 1 else lanes[k + i])
        return self.value(operand, tuple(mapped))

    def _block_arg(self, v: BlockArgument, boolean: bool) -> Term:
        owner = v.block.parent_op()
        if isinstance(owner, st.ForOp) and v.index == 0:
            if v not in self.loop_vars:
                name = v.name_hint or "k"
                if name in self.names:
                    name = f"{name}#{len(self.loop_vars)}"
                k = z3.Int(name)
                self.names[name] = k
                self.loop_vars[v] = k
                lo = self.value(owner.lower).expr
                hi = self.value(owner.upper).expr
                step = self.value(owner.step).expr
                self.facts += [k >= lo, k < hi]
                if not (z3.is_int_value(step) and step.as_long() == 1):
                    self.facts.append(c_rem(k - lo, step) == 0)
            return Term(self.loop_vars[v], False)
        if isinstance(owner, st.KernelOp):
            return Term(self.fresh("tensor"), True)
        return Term(self.fresh(v.name_hint or "carried", boolean), True)

    def _rank(self, op: Operation) -> z3.ArithRef:
        role = op
        while role is not None and not isinstance(role, st.RoleOp):
            role = role.parent_op()
        name = f"role_rank({role.name_text})" if role is not None else "role_rank"
        if name not in self.names:
            r = z3.Int(name)
            self.names[name] = r
            units = len(role.id_list) if role is not None else 1
            self.facts += [r >= 0, r < units]
        return self.names[name]

    # ---- proofs -------------------------------------------------------------------------------

    def counterexample(self, claim: z3.BoolRef, assume: list[z3.BoolRef] = ()) -> dict | None:
        """None when `claim` holds for every admissible assignment; else the values of the
        named variables (symbols, program ids, loop variables, ranks, lanes) that break it."""
        solver = z3.Solver()
        solver.set("timeout", 2000)
        solver.add(*self.facts, *assume, z3.Not(claim))
        key = hashlib.sha256(solver.sexpr().encode()).hexdigest()
        hit, cached = CACHE.get(key)
        if hit:
            return cached
        result = solver.check()
        if result == z3.unsat:
            out = None
        elif result == z3.sat:
            model = solver.model()
            out = {}
            for d in model.decls():
                name = d.name()
                if name.startswith("?"):
                    continue
                out[name] = model[d].as_long() if z3.is_int_value(model[d]) else str(model[d])
            out = dict(sorted(out.items(), key=lambda kv: _order(kv[0])))
        else:
            out = {"unknown": "the solver gave up"}
        CACHE.put(key, out)
        return out

    def equal(self, a: SSAValue, b: SSAValue) -> bool:
        if not (isinstance(a.type, ScalarType) and isinstance(b.type, ScalarType)):
            return False
        ta, tb = self.value(a), self.value(b)
        if ta.tainted or tb.tainted:
            return False
        return self.counterexample(ta.expr == tb.expr) is None


def _order(name: str) -> tuple:
    if name.startswith("program_id"):
        return (1, name)
    if name.startswith("lane"):
        return (4, name)
    if name.startswith("role_rank"):
        return (3, name)
    return (0 if name[:1].isupper() else 2, name)


def _arith(op: str, a, b):
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return c_div(a, b)
    if op == "%":
        return c_rem(a, b)
    if op == "cdiv":
        return c_div(a + b - 1, b)
    if op == "min":
        return z3.If(a <= b, a, b)
    if op == "max":
        return z3.If(a >= b, a, b)
    raise ValueError(op)


def _combine(fn: str, a, b, boolean: bool):
    if boolean and fn in ("and", "or", "xor"):
        return {"and": z3.And, "or": z3.Or, "xor": z3.Xor}[fn](a, b)
    table = {
        "add": lambda: a + b,
        "sub": lambda: a - b,
        "mul": lambda: a * b,
        "div": lambda: c_div(a, b),
        "rem": lambda: c_rem(a, b),
        "maximum": lambda: z3.If(a >= b, a, b),
        "minimum": lambda: z3.If(a <= b, a, b),
        "lt": lambda: a < b,
        "le": lambda: a <= b,
        "gt": lambda: a > b,
        "ge": lambda: a >= b,
        "eq": lambda: a == b,
        "ne": lambda: a != b,
    }
    if boolean and fn in ("eq", "ne"):
        return a == b if fn == "eq" else a != b
    if fn == "shl" and z3.is_int_value(b):
        return a * (2 ** b.as_long())
    if fn == "shr" and z3.is_int_value(b):
        return c_div(a, z3.IntVal(2 ** b.as_long()))
    make = table.get(fn)
    return make() if make else None


def _dtype(v: SSAValue) -> str:
    return v.type.dtype.data


def _is_bool(v: SSAValue) -> bool:
    return isinstance(v.type, ScalarType | TileType) and v.type.dtype.data == "i1"


_ = (Block, ex)
