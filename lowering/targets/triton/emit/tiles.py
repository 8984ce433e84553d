"""Tile ops in Triton: constructors, shape ops, reductions, scans, arg-reductions, gather,
topk and dot."""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from kir import symexpr as sx
from kir.dialect import tile as kt
from kir.dialect.types import dtype_of, shape_of
from kir.dtypes import DTYPES
from lowering.emit.pyexpr import CMP, SUM, bool_reduce, paren, reduce_call, reduce_combine, widened_int

from .tables import BITS_TYPE, NARROW_FLOATS, NATIVE_DOT, TL_DTYPE, refuse
from .values import Val


class Tiles:
    """The tile ops of `KernelWriter`."""

    # ---- constructors ------------------------------------------------------------------------

    def op_arange(self, op: kt.ArangeOp) -> None:
        shape = self._shape(op.res, op)
        self._check_tile(op, shape)
        start = self.statics.value(op.start.data)
        if start is None:
            raise refuse(
                op,
                "lower.tile-shape",
                f"arange starts at `{op.start.data}`, a shape symbol; Triton needs it at compile time",
                "start at 0 and add the offset",
            )
        n_text = self.statics.static_text(sx.fold(sx.Bin("-", op.end.data, op.start.data)), op, "arange extent")[0]
        text = f"tl.arange(0, {n_text})"
        if start != 0:
            start_text, start_prec = self.statics.render(op.start.data)
            s_text = paren(start_text, start_prec, SUM)
            self.define(op, op.res, Val(f"{s_text} + {text}", "i32", shape, SUM))
        else:
            self.define(op, op.res, Val(text, "i32", shape))

    def _shape_text(self, op: Operation, t) -> str:
        dims = [self.statics.static_text(d, op, "tile dimension")[0] for d in shape_of(t)]
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"

    def op_zeros(self, op: kt.ZerosOp) -> None:
        shape = self._shape(op.res, op)
        self._check_tile(op, shape)
        d = dtype_of(op.res.type)
        if d in NARROW_FLOATS:
            text = f"tl.zeros({self._shape_text(op, op.res.type)}, tl.float32).to({TL_DTYPE[d]})"
        else:
            text = f"tl.zeros({self._shape_text(op, op.res.type)}, {TL_DTYPE[d]})"
        self.define(op, op.res, Val(text, d, shape))

    def op_full(self, op: kt.FullOp) -> None:
        shape = self._shape(op.res, op)
        self._check_tile(op, shape)
        d = dtype_of(op.res.type)
        v = self.val(op.value)
        shape_text = self._shape_text(op, op.res.type)
        if v.loose and d in NARROW_FLOATS:
            text = f"tl.full({shape_text}, {v.text}, tl.float32).to({TL_DTYPE[d]})"
        elif v.loose:
            text = f"tl.full({shape_text}, {v.text}, {TL_DTYPE[d]})"
        else:
            text = f"tl.broadcast_to({v.text}, {shape_text})"
        self.define(op, op.res, Val(text, d, shape))

    # ---- shape ops ---------------------------------------------------------------------------

    def op_expand_dims(self, op: kt.ExpandDimsOp) -> None:
        x = self.val(op.operand)
        shape = self._shape(op.res, op)
        if not x.shape:
            text = f"tl.broadcast_to({self.strict(x).text}, (1,))"
        else:
            subs = [":"] * len(x.shape)
            subs.insert(op.axis.data, "None")
            text = f"{x.operand()}[{', '.join(subs)}]"
        self.define(op, op.res, Val(text, x.dtype, shape))

    def op_broadcast(self, op: kt.BroadcastOp) -> None:
        x = self.strict(self.val(op.operand))
        shape = self._shape(op.res, op)
        self._check_tile(op, shape)
        self.define(op, op.res, Val(f"tl.broadcast_to({x.text}, {self._shape_text(op, op.res.type)})", x.dtype, shape))

    def op_reshape(self, op: kt.ReshapeOp) -> None:
        x = self.val(op.operand)
        shape = self._shape(op.res, op)
        self._check_tile(op, shape)
        self.define(op, op.res, Val(f"tl.reshape({x.text}, {self._shape_text(op, op.res.type)})", x.dtype, shape))

    def op_trans(self, op: kt.TransOp) -> None:
        x = self.val(op.operand)
        self.define(op, op.res, Val(f"tl.trans({x.text})", x.dtype, self._shape(op.res, op)))

    # ---- reductions, scans, dot ----------------------------------------------------------------

    def op_reduce(self, op: kt.ReduceOp) -> None:
        x = self.val(op.operand)
        d, axis, fn = x.dtype, op.axis.data, op.fn.data
        shape = self._shape(op.res, op)
        if d == "i1":
            text = bool_reduce("tl", fn, f"{x.operand()}.to(tl.int32)", axis)
            self.define(op, op.res, Val(text, d, shape, CMP))
            return
        is_float = DTYPES[d].is_float
        src = self.f32(x) if is_float else x
        if fn == "prod" and not is_float and DTYPES[d].bits < 32:
            src = Val(widened_int("tl", x.operand(), DTYPES[d].kind), d)
        combine = reduce_combine(fn, is_float)
        helper = self.need(f"_kir_{combine}") if combine is not None else None
        v = Val(reduce_call("tl", fn, src.text, axis, helper), src.dtype)
        if is_float:
            v = self.narrow(v, d)
        elif DTYPES[d].bits < 32:  # Triton accumulates narrow integers in 32 bits; wrap back
            v = Val(f"{v.operand()}.to({TL_DTYPE[d]})", d)
        self.define(op, op.res, Val(v.text, d, shape, v.prec))

    def _lane_index(self, op: Operation, t, axis: int) -> str:
        """An i32 tile of type `t`'s shape holding each element's index along `axis`."""
        dims = [self.statics.static_text(d, op, "tile dimension")[0] for d in shape_of(t)]
        lanes = f"tl.arange(0, {dims[axis]})"
        if len(dims) == 1:
            return lanes
        subs = ["None"] * len(dims)
        subs[axis] = ":"
        return f"tl.broadcast_to({lanes}[{', '.join(subs)}], ({', '.join(dims)}))"

    def op_argreduce(self, op: kt.ArgReduceOp) -> None:
        x = self.val(op.operand)
        axis, fn = op.axis.data, op.fn.data
        shape = self._shape(op.res, op)
        if DTYPES[x.dtype].is_float:
            key = self.f32(x)
            lanes = self._lane_index(op, op.operand.type, axis)
            text = f"tl.reduce(({key.text}, {lanes}), {axis}, {self.need('_kir_' + fn)})[1]"
        else:
            key = Val(f"{x.operand()}.to(tl.int8)", "i8") if x.dtype == "i1" else x
            text = f"tl.{fn}({key.text}, axis={axis}, tie_break_left=True)"
        self.define(op, op.res, Val(text, "i32", shape))

    def op_scan(self, op: kt.ScanOp) -> None:
        x = self.val(op.operand)
        d, axis, fn = x.dtype, op.axis.data, op.fn.data
        rev = ", reverse=True" if op.reverse.data else ""
        shape = self._shape(op.res, op)
        if d == "i1":  # as 0/1: a sum is a parity, a product a running and, max an or
            i = f"{x.operand()}.to(tl.int32)"
            if fn == "cumsum":
                text = f"(tl.cumsum({i}, axis={axis}{rev}) & 1) != 0"
            else:
                combine = self.need("_kir_imax" if fn == "cummax" else "_kir_imin")
                text = f"tl.associative_scan({i}, {axis}, {combine}{rev}) != 0"
            self.define(op, op.res, Val(text, d, shape, CMP))
            return
        is_float = DTYPES[d].is_float
        src = self.f32(x) if is_float else x
        if fn in ("cumsum", "cumprod"):
            v = Val(f"tl.{fn}({src.text}, axis={axis}{rev})", src.dtype)
        else:
            combine = (
                {"cummax": "_kir_max", "cummin": "_kir_min"}[fn]
                if is_float
                else {"cummax": "_kir_imax", "cummin": "_kir_imin"}[fn]
            )
            v = Val(f"tl.associative_scan({src.text}, {axis}, {self.need(combine)}{rev})", src.dtype)
        if is_float:
            v = self.narrow(v, d)
        elif DTYPES[d].bits < 32:
            v = Val(f"{v.operand()}.to({TL_DTYPE[d]})", d)
        self.define(op, op.res, Val(v.text, d, shape, v.prec))

    def op_gather(self, op: kt.GatherOp) -> None:
        src, index = self.val(op.src), self.val(op.index)
        shape = self._shape(op.res, op)
        self._check_tile(op, shape)
        data = f"{src.operand()}.to(tl.int8)" if src.dtype == "i1" else src.text
        text = f"tl.gather({data}, {index.text}, {op.axis.data})"
        if src.dtype == "i1":
            self.define(op, op.res, Val(f"{text} != 0", "i1", shape, CMP))
        else:
            self.define(op, op.res, Val(text, src.dtype, shape))

    def op_topk(self, op: kt.TopKOp) -> None:
        x = self.val(op.operand)
        shape = self._shape(op.values, op)
        self._check_tile(op, shape)
        if len(x.shape) > 2:
            raise refuse(
                op,
                "lower.unsupported",
                "the Triton backend lowers topk of 1-D and 2-D tiles",
                "reshape the tile to 2-D first",
            )
        k_text = self.statics.static_text(op.k.data, op, "topk k")[0]
        largest = bool(op.largest.data)
        d = x.dtype
        data = Val(f"{x.operand()}.to(tl.int8)", "i8") if d == "i1" else x
        key = self.f32(data)
        if DTYPES[data.dtype].is_float:
            worst = 'float("-inf")' if largest else 'float("inf")'
        else:
            info = np.iinfo(DTYPES[data.dtype].numpy)
            worst = str(info.min if largest else info.max)
        bits = BITS_TYPE[DTYPES[data.dtype].bits]
        if len(x.shape) == 1:
            key = Val(f"{key.operand()}[None, :]", key.dtype)
            data = Val(f"{data.operand()}[None, :]", data.dtype)
        call = f"{self.need('_kir_topk')}({key.text}, {data.text}, {k_text}, {largest}, {worst}, {bits})"
        vals_name = self._name(op.values, self.liveness.pos[op])
        idx_name = self._name(op.indices, self.liveness.pos[op])
        self.w.line(f"{vals_name}, {idx_name} = {call}", op)
        if len(x.shape) == 1:
            self.w.line(f"{vals_name} = tl.reshape({vals_name}, ({k_text},))", op)
            self.w.line(f"{idx_name} = tl.reshape({idx_name}, ({k_text},))", op)
        if d == "i1":
            self.w.line(f"{vals_name} = {vals_name} != 0", op)
        self.vals[op.values] = Val(vals_name, d, shape)
        self.vals[op.indices] = Val(idx_name, "i32", shape)

    def op_dot(self, op: kt.DotOp) -> None:
        a, b = self.val(op.lhs), self.val(op.rhs)
        acc = self.val(op.acc) if op.acc is not None else None
        shape = self._shape(op.res, op)
        k = a.shape[1]
        src, acc_d = a.dtype, dtype_of(op.res.type)
        if DTYPES[acc_d].is_float:
            cd = "f64" if acc_d == "f64" else "f32"
        elif acc_d == "i32" and src == "i8":
            cd = "i32"
        else:
            raise refuse(
                op,
                "lower.unsupported",
                f"dot of {src} operands into {acc_d}: Triton's tl.dot takes floats (into f32/f64) and i8 (into i32)",
                "accumulate in f32 (dot<f32>) or i32 from i8 operands",
            )
        if (src, cd) not in NATIVE_DOT:
            a, b = self.cast(a, cd), self.cast(b, cd)
        min_k = 32 if DTYPES[a.dtype].bits == 8 else 16  # Triton 3.6 on NVIDIA (AMD takes any K)
        if k < min_k:
            raise refuse(
                op,
                "lower.dot-shape",
                f"dot with K = {k}: Triton's tl.dot needs K >= {min_k} for {a.dtype} operands",
                f"load K in blocks of at least {min_k} (or write the product as a broadcast multiply and a sum)",
            )
        parts = [a.text, b.text]
        if acc is not None:
            parts.append(self.cast(acc, cd).text if acc_d != cd else acc.text)
        parts.append(f"out_dtype={TL_DTYPE[cd]}")
        if a.dtype in ("f32", "f64"):
            # KIR's f32 dot is f32 unless it says precision = tf32; Triton 3.6 takes "tf32" on
            # NVIDIA and gfx942 (XF32), and a target without TF32 units multiplies in f32
            tf32 = op.tf32 and (self.kernel.target.data.startswith("sm_") or self.kernel.target.data == "gfx942")
            parts.append(f'input_precision="{"tf32" if tf32 else "ieee"}"')
        v = Val(f"tl.dot({', '.join(parts)})", cd)
        if cd != acc_d:
            v = self.cast(v, acc_d)
        self.define(op, op.res, Val(v.text, acc_d, shape, v.prec))
