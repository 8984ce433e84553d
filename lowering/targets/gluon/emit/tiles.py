"""Tile ops in Gluon: constructors, expand_dims, reductions and layout conversions."""

from __future__ import annotations

from kir.dialect import explicit as ex
from kir.dialect import tile as tl
from kir.dialect.types import TileType, dtype_of
from kir.dtypes import DTYPES
from lowering.emit.pyexpr import ATOM, CMP, bool_reduce, reduce_call, reduce_combine, widened_int

from .tables import GL_DTYPE
from .values import Fn, Val


class Tiles:
    """The tile ops of `GluonWriter`."""

    def op_ZerosOp(self, op: tl.ZerosOp, fn: Fn) -> None:
        shape, dt = self.shape(op.res.type, op), dtype_of(op.res.type)
        lay = self.layout_of(op.res, fn, op)
        self.define(fn, op.res, Val(f"gl.zeros({shape}, {GL_DTYPE[dt]}, layout={lay})", "tile"), op)

    def op_FullOp(self, op: tl.FullOp, fn: Fn) -> None:
        shape, dt = self.shape(op.res.type, op), dtype_of(op.res.type)
        value = self.ref(op.value, fn)
        lay = self.layout_of(op.res, fn, op)
        self.define(fn, op.res, Val(f"gl.full({shape}, {value.text}, {GL_DTYPE[dt]}, layout={lay})", "tile"), op)

    def op_ArangeOp(self, op: tl.ArangeOp, fn: Fn) -> None:
        lo, hi = self.static(op.start.data, op), self.static(op.end.data, op)
        lay = self.layout_of(op.res, fn, op)
        self.define(fn, op.res, Val(f"gl.arange({lo}, {hi}, layout={lay})", "tile"), op)

    def op_ExpandDimsOp(self, op: tl.ExpandDimsOp, fn: Fn) -> None:
        x = self.operand(op.operand, op, fn)
        axis = op.axis.data
        want = self.slice_const(axis, self.layout_of(op.res, fn, op))
        text = x.text
        if self.layout_of(op.operand, fn, op) != want:
            text = f"gl.convert_layout({text}, {want})"
        self.define(fn, op.res, Val(f"gl.expand_dims({text}, {axis})", "tile"), op)

    def op_ReduceOp(self, op: tl.ReduceOp, fn: Fn) -> None:
        """`max(s, axis = 1)`: Gluon's reduction, whose result is in `gl.SliceLayout(1, L)` of
        the operand's layout L (converted when its class has another layout). Narrow floats
        reduce in f32 and round once, as the triton backend does; max and min propagate NaN
        (KIR combines with `maximum` / `minimum`), through the `kir_max` / `kir_min` combine
        functions; narrow integers, which Gluon widens to 32 bits, wrap back."""
        x = self.operand(op.operand, op, fn)
        axis, what = op.axis.data, op.fn.data
        dt = dtype_of(op.res.type)
        d = DTYPES[dt]
        prec = ATOM
        if d.kind == "bool":
            text = bool_reduce("gl", what, f"{x.operand()}.to(gl.int32)", axis)
            prec = CMP
        else:
            combine = reduce_combine(what, d.is_float)
            # narrow floats reduce in f32, narrow integers in 32 bits; either is cast back
            narrow = dt not in ("f32", "f64") if d.is_float else d.bits < 32
            if d.is_float and narrow:
                src = f"{x.operand()}.to(gl.float32)"
            elif combine == "prod" and narrow:
                src = widened_int("gl", x.operand(), d.kind)
            else:
                src = x.text
            if combine is not None:
                self.combines.add(f"kir_{combine}")
            text = reduce_call("gl", what, src, axis, f"kir_{combine}" if combine is not None else None)
            if narrow:
                text = f"{text}.to({GL_DTYPE[dt]})"
        if not isinstance(op.res.type, TileType):
            self.define(fn, op.res, Val(text, "scalar", prec=prec), op)
            return
        lay = self.layout_of(op.res, fn, op)
        if lay != self.slice_const(axis, self.layout_of(op.operand, fn, op)):
            text, prec = f"gl.convert_layout({text}, {lay})", ATOM
        self.define(fn, op.res, Val(text, "tile", prec=prec), op)

    def op_ConvertLayoutOp(self, op: ex.ConvertLayoutOp, fn: Fn) -> None:
        x = self.operand(op.operand, op, fn)
        lay = self.layout_const(op.layout.data)
        if self.layout_of(op.operand, fn, op) == lay:
            # already there (how lowering.passes.layouts writes layouts): no conversion
            if x.fn is not None:
                self.vals[op.res] = x
            else:
                self.define(fn, op.res, Val(x.text, x.kind, prec=x.prec), op)
            return
        self.define(fn, op.res, Val(f"gl.convert_layout({x.text}, {lay})", "tile"), op)
