"""Scalars and elementwise ops in Triton: program ids, symbols and constants, arithmetic with
KIR's integer and narrow-float semantics, comparisons, math functions, `where` and casts."""

from __future__ import annotations

import numpy as np

from kir.dialect import tile as kt
from kir.dialect.types import dtype_of
from kir.dtypes import DTYPES
from kir.interp.values import cast as cast_values
from lowering.emit.pyexpr import AND, CMP, COMPARE, INFIX, PREC, SHIFT, UNARY, infix, nan_minmax

from .tables import MATH, NARROW_FLOATS, SQRT, TL_DTYPE, refuse
from .values import Val, literal


class Elementwise:
    """The scalar and elementwise ops of `KernelWriter`."""

    # ---- program and constants ---------------------------------------------------------------

    def op_program_id(self, op: kt.ProgramIdOp) -> None:
        self.define(op, op.res, Val(f"tl.program_id({op.axis.data})", "i32"))

    def op_num_programs(self, op: kt.NumProgramsOp) -> None:
        self.define(op, op.res, Val(f"tl.num_programs({op.axis.data})", "i32"))

    def op_symbol(self, op: kt.SymValueOp) -> None:
        name = op.symbol.data
        if name in self.param_names:
            value = self.params[name]
            self.define(op, op.res, Val(self.param_names[name], "i32", loose=True, known=value, lo=value, hi=value))
        elif name in self.symbol_names:  # a size: never negative
            self.define(op, op.res, Val(self.symbol_names[name], "i32", loose=True, lo=0))
        else:
            raise refuse(
                op, "lower.unbound-symbol", f"`{name}` is neither a parameter nor a shape symbol of the arguments"
            )

    def op_const(self, op: kt.ConstOp) -> None:
        self.define(op, op.res, literal(op.number, op.dtype))

    # ---- elementwise -------------------------------------------------------------------------

    def op_binary(self, op: kt.BinaryOp) -> None:
        a, b = self.val(op.lhs), self.val(op.rhs)
        d = dtype_of(op.res.type)
        shape = self._shape(op.res, op)
        fn = op.fn.data
        if a.loose and b.loose:
            loose = self._loose_int(fn, a, b, d)
            if loose is not None:
                self.define(op, op.res, loose)
                return
            a = self.strict(a)
        if d == "i1":
            v = self._bool_binary(fn, a, b)
        elif DTYPES[d].is_float:
            v = self.narrow(self._float_binary(fn, self.f32(a), self.f32(b), "f64" if d == "f64" else "f32"), d)
        else:
            v = self._int_binary(fn, a, b, d)
        self.define(op, op.res, Val(v.text, d, shape, v.prec))

    def _loose_int(self, fn: str, a: Val, b: Val, d: str) -> Val | None:
        """Integer arithmetic on two loose operands (sizes, parameters, counters), written as
        Python arithmetic where that gives KIR's number: + - * (these values are far from
        overflowing), and // % when both operands are known non-negative and the divisor
        positive. None where the operation must be done on a Triton tensor."""
        if DTYPES[d].kind not in ("int", "uint"):
            return None

        def add(x, y):
            return None if x is None or y is None else x + y

        if fn in ("add", "sub", "mul"):
            if fn == "add":
                lo, hi = add(a.lo, b.lo), add(a.hi, b.hi)
            elif fn == "sub":
                lo = None if a.lo is None or b.hi is None else a.lo - b.hi
                hi = None if a.hi is None or b.lo is None else a.hi - b.lo
            elif (a.lo or -1) >= 0 and (b.lo or -1) >= 0:
                lo = a.lo * b.lo  # type: ignore[operator]
                hi = None if a.hi is None or b.hi is None else a.hi * b.hi
            else:
                lo = hi = None
        elif fn in ("div", "rem") and a.lo is not None and a.lo >= 0 and b.lo is not None and b.lo > 0:
            if fn == "div":
                lo = a.lo // b.hi if b.hi is not None else 0
                hi = a.hi // b.lo if a.hi is not None else None
            else:
                lo, hi = 0, b.hi - 1 if b.hi is not None else None
        else:
            return None
        sym = "//" if fn == "div" else INFIX[fn]
        return Val(infix(a, sym, b), d, (), PREC[sym], loose=True, lo=lo, hi=hi)

    @staticmethod
    def _infix(sym: str, a: Val, b: Val, d: str) -> Val:
        return Val(infix(a, sym, b), d, prec=PREC[sym])

    def _bool_binary(self, fn: str, a: Val, b: Val) -> Val:
        # i1 arithmetic wraps in one bit: + and - are xor, * is and; x / 0 is 1 and x % 0 is x.
        table = {"add": "^", "sub": "^", "mul": "&", "and": "&", "or": "|", "xor": "^", "maximum": "|", "minimum": "&"}
        if fn in table:
            return self._infix(table[fn], a, b, "i1")
        not_b = Val(f"~{b.operand(UNARY)}", "i1", prec=UNARY)
        if fn == "div":
            return self._infix("|", a, not_b, "i1")
        # rem, and shifts by 1 (any set amount clears the one bit)
        return self._infix("&", a, not_b, "i1")

    def _float_binary(self, fn: str, a: Val, b: Val, d: str) -> Val:
        if fn in ("add", "sub", "mul"):
            return self._infix(INFIX[fn], a, b, d)
        if fn == "div":
            return Val(f"tl.div_rn({a.text}, {b.text})", d) if d == "f32" else self._infix("/", a, b, d)
        if fn == "rem":
            return self._infix("%", a, b, d)  # frem: C fmod, as KIR
        if fn in ("maximum", "minimum"):
            return Val(nan_minmax("tl", fn, a.text, b.text), d)
        if fn == "pow":
            self.uses_libdevice = True
            return Val(f"libdevice.pow({self.strict(a).text}, {self.strict(b).text})", d)
        raise AssertionError(fn)

    def _nonzero(self, v: Val) -> bool:
        return v.known is not None and v.known != 0

    def _int_binary(self, fn: str, a: Val, b: Val, d: str) -> Val:
        bits = DTYPES[d].bits
        signed = DTYPES[d].kind == "int"
        if fn in ("add", "sub", "mul", "and", "or", "xor"):
            return self._infix(INFIX[fn], a, b, d)
        if fn in ("maximum", "minimum"):
            return Val(f"tl.{fn}({a.text}, {b.text})", d)
        if fn in ("div", "rem"):
            sym = "//" if fn == "div" else "%"
            if self._nonzero(b):
                return self._infix(sym, a, b, d)
            # KIR: x / 0 is -1 (all ones) and x % 0 is x; keep the hardware away from a zero divisor.
            b = self.strict(b)
            zero = f"{b.operand(CMP)} == 0"
            safe = Val(f"tl.where({zero}, 1, {b.text})", d)
            q = self._infix(sym, a, safe, d)
            fill = "-1" if signed else str((1 << bits) - 1)
            return Val(f"tl.where({zero}, {fill if fn == 'div' else a.text}, {q.text})", d)
        if fn in ("shl", "shr"):
            sym = INFIX[fn]
            if b.known is not None and 0 <= int(b.known) < bits:
                return self._infix(sym, a, b, d)
            # KIR: a shift by the width or more (or a negative amount) gives 0, or the sign fill.
            b = self.strict(b)
            far = f"({b.operand(CMP)} < 0) | ({b.operand(CMP)} >= {bits})" if signed else f"{b.operand(CMP)} >= {bits}"
            fill = f"{a.operand(SHIFT)} >> {bits - 1}" if fn == "shr" and signed else "0"
            amount = Val(f"{b.operand(AND)} & {bits - 1}", d, prec=AND)
            shifted = self._infix(sym, a, amount, d)
            return Val(f"tl.where({far}, {fill}, {shifted.text})", d)
        raise AssertionError(fn)

    def op_cmp(self, op: kt.CompareOp) -> None:
        a, b = self.val(op.lhs), self.val(op.rhs)
        shape = self._shape(op.res, op)
        d = dtype_of(op.lhs.type)
        sym = COMPARE[op.predicate.data]
        if a.loose and b.loose and d != "i1":
            # Counters, sizes and literals: Python compares them as Triton would.
            self.define(op, op.res, Val(f"{a.operand(CMP)} {sym} {b.operand(CMP)}", "i1", shape, CMP, True))
            return
        if d in NARROW_FLOATS:
            a, b = self.f32(a), self.f32(b)
        elif d == "i1":  # compare as 0 and 1 (Triton's i1 is signed: true would be -1)
            a = (
                Val(f"{a.operand()}.to(tl.int8)", "i8")
                if not a.loose
                else Val("1" if a.known else "0", "i8", loose=True)
            )
            b = (
                Val(f"{b.operand()}.to(tl.int8)", "i8")
                if not b.loose
                else Val("1" if b.known else "0", "i8", loose=True)
            )
            if a.loose and b.loose:
                a = self.strict(a)
        self.define(op, op.res, Val(f"{a.operand(CMP)} {sym} {b.operand(CMP)}", "i1", shape, CMP))

    def op_unary(self, op: kt.UnaryOp) -> None:
        x = self.val(op.operand)
        d = dtype_of(op.res.type)
        shape = self._shape(op.res, op)
        fn = op.fn.data
        if x.loose and DTYPES[d].kind in ("bool", "uint"):
            x = self.strict(x)  # Python's ~True is -2, and -5 is no u32
        if fn == "not":
            self.define(op, op.res, Val(f"~{x.operand(UNARY)}", d, shape, UNARY, x.loose))
            return
        if fn == "neg" and d not in NARROW_FLOATS:
            self.define(op, op.res, Val(f"-{x.operand(UNARY)}", d, shape, UNARY, x.loose))
            return
        if fn == "abs" and not DTYPES[d].is_float:
            self.define(op, op.res, Val(f"tl.abs({self.strict(x).text})", d, shape))
            return
        x32 = self.f32(self.strict(x))
        cd = "f64" if d == "f64" else "f32"
        if fn == "neg":
            v = Val(f"-{x32.operand(UNARY)}", cd, prec=UNARY)
        elif fn == "sqrt":
            v = Val(f"{SQRT[cd]}({x32.text})", cd)
        else:
            if MATH[fn].startswith("libdevice."):
                self.uses_libdevice = True
            v = Val(f"{MATH[fn]}({x32.text})", cd)
        v = self.narrow(v, d)
        self.define(op, op.res, Val(v.text, d, shape, v.prec))

    def op_where(self, op: kt.WhereOp) -> None:
        c, a, b = self.val(op.cond), self.val(op.lhs), self.val(op.rhs)
        d = dtype_of(op.res.type)
        if d in NARROW_FLOATS:  # a bare literal would become a bf16 constant, which the interpreter lacks
            a, b = self.strict(a), self.strict(b)
        elif a.loose and b.loose:
            a = self.strict(a)
        self.define(op, op.res, Val(f"tl.where({c.text}, {a.text}, {b.text})", d, self._shape(op.res, op)))

    def op_rand(self, op: kt.RandOp) -> None:
        """tl.rand / tl.randint: Philox4x32-10 as KIR's (kir.random), bit for bit."""
        seed, offs = self.strict(self.val(op.seed)), self.strict(self.val(op.offsets))
        d = dtype_of(op.res.type)
        self.define(op, op.res, Val(f"tl.{op.fn.data}({seed.text}, {offs.text})", d, self._shape(op.res, op)))

    def op_cast(self, op: kt.CastOp) -> None:
        v = self.cast(self.val(op.operand), dtype_of(op.res.type))
        self.define(op, op.res, Val(v.text, v.dtype, self._shape(op.res, op), v.prec))

    def cast(self, v: Val, dst: str) -> Val:
        """KIR's cast (see kir.interp.values.cast) from v's dtype to `dst`."""
        src = v.dtype
        if src == dst:
            return v
        s, t = DTYPES[src], DTYPES[dst]
        if v.loose and v.known is not None:  # a constant: KIR's cast, at emit time
            number = cast_values(np.asarray(v.known).astype(s.numpy), s, t)
            return literal(number.item(), dst)
        if (
            v.loose
            and s.kind in ("int", "uint")
            and (dst in ("f32", "f64") or t.kind in ("int", "uint"))
            and s.bits <= 32
        ):
            # A size or a counter: tl.cast takes the Python int or constexpr as well as a tensor.
            return Val(f"tl.cast({v.text}, {TL_DTYPE[dst]})", dst)
        if t.kind == "bool":
            if v.loose:
                v = self.strict(v)
            if src in NARROW_FLOATS:
                v = self.f32(v)
            return Val(f"{v.operand(CMP)} != 0", "i1", prec=CMP)
        v = self.strict(v)
        to = TL_DTYPE[dst]
        if s.kind == "bool":
            if dst in NARROW_FLOATS:
                return self.cast(Val(f"{v.operand()}.to(tl.float32)", "f32"), dst)
            return Val(f"{v.operand()}.to({to})", dst)
        if s.is_float and t.is_float:
            if src in NARROW_FLOATS:
                v = self.f32(v)  # exact
                if dst == "f32":
                    return v
                return self.cast(v, dst)
            if dst in NARROW_FLOATS:
                if src == "f64":
                    v = Val(f"{self.need('_kir_f64_to_f32_odd')}({v.text})", "f32")
                return self._f32_to_narrow(v, dst)
            return Val(f"{v.operand()}.to({to})", dst)
        if s.is_float:  # to an integer: truncate, saturate, NaN gives 0
            x = self.f32(v)
            lo, hi = np.iinfo(t.numpy).min, np.iinfo(t.numpy).max
            return Val(f"{self.need('_kir_float_to_int')}({x.text}, {lo}, {hi}, {to})", dst)
        if t.is_float:  # from an integer
            if dst == "f64":
                return Val(f"{v.operand()}.to(tl.float64)", dst)
            if dst == "f32":
                if s.bits == 64:  # KIR goes through f64: round there first, as it does
                    return Val(f"{v.operand()}.to(tl.float64).to(tl.float32)", dst)
                return Val(f"{v.operand()}.to(tl.float32)", dst)
            if s.bits <= 16:  # exact in f32
                return self._f32_to_narrow(Val(f"{v.operand()}.to(tl.float32)", "f32"), dst)
            odd = f"{self.need('_kir_f64_to_f32_odd')}({v.operand()}.to(tl.float64))"
            return self._f32_to_narrow(Val(odd, "f32"), dst)
        return Val(f"{v.operand()}.to({to})", dst)  # integer to integer wraps

    def _f32_to_narrow(self, v: Val, dst: str) -> Val:
        if dst == "f8e4m3":
            return Val(f"{self.need('_kir_to_f8e4m3')}({v.text})", dst)
        if dst == "f8e5m2":
            return Val(f"{self.need('_kir_to_f8e5m2')}({v.text})", dst)
        return Val(f"{v.operand()}.to({TL_DTYPE[dst]})", dst)
