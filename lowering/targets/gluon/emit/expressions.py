"""Scalars and elementwise ops in Gluon: program ids, symbols, constants (folded where the
emitter knows them), arithmetic, comparisons, math functions, `where` and casts."""

from __future__ import annotations

from typing import cast

from xdsl.ir import Operation, SSAValue

from kir.diagnostics import KirError
from kir.dialect import tile as tl
from kir.dialect.types import TileType, dtype_of
from kir.dtypes import DTYPES
from lowering.emit.pyexpr import ATOM, CMP, COMPARE, INFIX, PREC, PRODUCT, UNARY, infix, nan_minmax, special_float_text

from .refusals import unsupported
from .tables import GL_DTYPE, UNARY_CALLS
from .values import Fn, Val, fold_int, static_int, wrap_int


class Expressions:
    """The scalar and elementwise ops of `GluonWriter`."""

    def op_ProgramIdOp(self, op: tl.ProgramIdOp, fn: Fn) -> None:
        self.define(fn, op.res, Val(f"gl.program_id({op.axis.data})", "scalar"), op)

    def op_NumProgramsOp(self, op: tl.NumProgramsOp, fn: Fn) -> None:
        self.define(fn, op.res, Val(f"gl.num_programs({op.axis.data})", "scalar"), op)

    def op_SymValueOp(self, op: tl.SymValueOp, fn: Fn) -> None:
        self.vals[op.res] = self.ref_symbol(op.symbol.data, fn)
        if op not in self.inlined and op.res.name_hint and self.vals[op.res].kind != "static":
            val = self.vals.pop(op.res)
            self.define(fn, op.res, Val(val.text, "scalar"), op)

    def op_ConstOp(self, op: tl.ConstOp, fn: Fn) -> None:
        d = DTYPES[op.dtype]
        number = op.number
        if d.kind == "bool":
            val = Val("True" if number else "False", "scalar")
        elif d.is_int:
            val = static_int(int(number))
        elif (special := special_float_text(number)) is not None:
            val = Val(special, "scalar")
        else:
            val = Val(repr(float(number)), "scalar", prec=ATOM if float(number) >= 0 else UNARY)
        if op.dtype not in ("i32", "f32", "i1") and val.kind == "scalar":
            # A typed scalar constant (bf16(0.5)): make its dtype explicit.
            val = Val(f"gl.full([], {val.text}, {GL_DTYPE[op.dtype]})", "scalar")
        self.define(fn, op.res, val, op)

    def op_BinaryOp(self, op: tl.BinaryOp, fn: Fn) -> None:
        a, b = self.operand(op.lhs, op, fn), self.operand(op.rhs, op, fn)
        fnname, dt = op.fn.data, dtype_of(op.res.type)
        d = DTYPES[dt]
        if a.kind == "static" and b.kind == "static" and d.is_int:
            v = fold_int(fnname, cast(int, a.static), cast(int, b.static), dt)  # static values hold their integer
            self.define(fn, op.res, static_int(v), op)
            return
        kind = self._kind(op.res, a, b)
        if fnname in ("maximum", "minimum"):
            self.nan_minmax |= d.is_float
            text = nan_minmax("gl", fnname, a.text, b.text) if d.is_float else f"gl.{fnname}({a.text}, {b.text})"
            val = Val(text, kind)
        elif fnname in ("div", "rem") and kind == "constexpr":
            self.uses_helpers = True
            val = Val(f"kir_{fnname[:3]}({a.text}, {b.text})", kind)
        elif fnname == "div":
            sym = "//" if d.is_int else "/"
            val = Val(infix(a, sym, b), kind, prec=PREC[sym])
        else:
            sym = INFIX[fnname]
            val = Val(infix(a, sym, b), kind, prec=PREC[sym])
        self.define(fn, op.res, val, op)

    def op_CompareOp(self, op: tl.CompareOp, fn: Fn) -> None:
        a, b = self.operand(op.lhs, op, fn), self.operand(op.rhs, op, fn)
        sym = COMPARE[op.predicate.data]
        if a.kind == "static" and b.kind == "static":
            v = int(eval(f"{a.static} {sym} {b.static}"))  # noqa: S307 - two ints and an operator
            self.define(fn, op.res, Val("True" if v else "False", "scalar"), op)
            return
        self.define(fn, op.res, Val(f"{a.operand(CMP)} {sym} {b.operand(CMP)}", self._kind(op.res, a, b), prec=CMP), op)

    def op_UnaryOp(self, op: tl.UnaryOp, fn: Fn) -> None:
        x = self.operand(op.operand, op, fn)
        f = op.fn.data
        kind = self._kind(op.res, x)
        if f == "neg":
            if x.kind == "static":
                v = wrap_int(-cast(int, x.static), dtype_of(op.res.type))
                self.define(fn, op.res, static_int(v), op)
                return
            val = Val(f"-{x.operand(UNARY)}", kind, prec=UNARY)
        elif f == "not":
            val = Val(f"~{x.operand(UNARY)}", kind, prec=UNARY)
        elif f == "sigmoid":
            dt = dtype_of(op.res.type)
            wide = x.operand(UNARY) if dt in ("f32", "f64") else f"{x.operand()}.to(gl.float32)"
            text = f"1.0 / (1.0 + gl.exp(-{wide}))"
            val = Val(
                text if dt in ("f32", "f64") else f"({text}).to({GL_DTYPE[dt]})",
                kind,
                prec=PRODUCT if dt in ("f32", "f64") else ATOM,
            )
        elif f in ("abs", "floor", "ceil") or dtype_of(op.res.type) in ("f32", "f64"):
            val = Val(f"{UNARY_CALLS[f]}({x.text})", kind)
        else:
            # KIR computes transcendentals of narrow floats in f32 and rounds the result.
            dt = GL_DTYPE[dtype_of(op.res.type)]
            val = Val(f"{UNARY_CALLS[f]}({x.operand()}.to(gl.float32)).to({dt})", kind)
        self.define(fn, op.res, val, op)

    def op_WhereOp(self, op: tl.WhereOp, fn: Fn) -> None:
        c, a, b = (self.operand(v, op, fn) for v in (op.cond, op.lhs, op.rhs))
        self.define(fn, op.res, Val(f"gl.where({c.text}, {a.text}, {b.text})", self._kind(op.res, c, a, b)), op)

    def op_CastOp(self, op: tl.CastOp, fn: Fn) -> None:
        x = self.operand(op.operand, op, fn)
        dt = dtype_of(op.res.type)
        if x.kind == "static" and DTYPES[dt].is_int and DTYPES[dt].kind != "bool":
            v = wrap_int(cast(int, x.static), dt)
            self.define(fn, op.res, static_int(v), op)
            return
        if x.kind in ("static", "constexpr"):
            text = f"gl.full([], {x.text}, {GL_DTYPE[dtype_of(op.operand.type)]}).to({GL_DTYPE[dt]})"
            self.define(fn, op.res, Val(text, "scalar"), op)
            return
        self.define(fn, op.res, Val(f"{x.operand()}.to({GL_DTYPE[dt]})", self._kind(op.res, x)), op)

    def operand(self, v: SSAValue, op: Operation, fn: Fn) -> Val:
        self._check_not_pending(v, op, fn)
        return self.ref(v, fn)

    def _check_not_pending(self, v: SSAValue, op: Operation, fn: Fn) -> None:
        if v in fn.pending:
            raise KirError(
                unsupported(
                    op,
                    "this reads a wgmma accumulator before a wgmma.wait retires it",
                    "put wgmma.wait(0) between the wgmma and this use",
                )
            )

    def _check_not_token(self, v: SSAValue, op: Operation, fn: Fn) -> None:
        if v in fn.tokens:
            raise KirError(
                unsupported(
                    op,
                    "a wgmma result leaves a loop or branch before any wgmma.wait: gluon carries only waited accumulators",
                    "put a wgmma.wait(n) after the wgmma, inside the loop or branch",
                )
            )

    @staticmethod
    def _kind(res: SSAValue, *vals: Val) -> str:
        if isinstance(res.type, TileType):
            return "tile"
        if all(v.kind in ("static", "constexpr") for v in vals):
            return "constexpr"
        return "scalar"
