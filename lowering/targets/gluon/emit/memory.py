"""Memory in Gluon: shared buffers and mbarrier arrays, shared views, and loads and stores of
shared and global memory (pointer tiles in a layout)."""

from __future__ import annotations

import math

from xdsl.ir import Operation, SSAValue

from kir import symexpr as sx
from kir.diagnostics import KirError
from kir.dialect import explicit as ex
from kir.dialect import tile as tl
from kir.dialect.types import MBarrierType, SmemType, TileType, dtype_of, shape_of
from kir.dtypes import DTYPES
from lowering.emit.pyexpr import PRODUCT, SUM

from .layouts import blocked_layout
from .refusals import row_major_strides, unsupported
from .tables import GL_DTYPE
from .values import Fn, Val, rows_of_vectors


class Memory:
    """The memory ops of `GluonWriter`."""

    def op_SmemAllocOp(self, op: ex.SmemAllocOp, fn: Fn) -> None:
        t = op.res.type
        shape = self.shape(t, op)
        lay = self.smem_layout(op.res)
        text = f"gl.allocate_shared_memory({GL_DTYPE[t.dtype.data]}, {shape}, {lay})"
        self.define(fn, op.res, Val(text, "smem"), op)

    def op_MBarrierAllocOp(self, op: ex.MBarrierAllocOp, fn: Fn) -> None:
        assert isinstance(op.res.type, MBarrierType)
        size = self.static(op.res.type.size.data, op)
        count = self.static(op.count.data, op)
        self.define(
            fn, op.res, Val(f"gl.allocate_shared_memory(gl.int64, [{size}, 1], mbarrier.MBarrierLayout())", "mbar"), op
        )
        name = self.vals[op.res].text
        i = self.bind_name(fn, None, "i", None)
        fn.line(f"for {i} in gl.static_range({size}):", op)
        fn.line(f"    mbarrier.init({name}.index({i}), count={count})", op)

    def op_SizeofOp(self, op: ex.SizeofOp, fn: Fn) -> None:
        shape = tl.access_shape(op.mem.type, op.access.data, list(op.indices))
        n = math.prod(self.static(d, op) for d in shape) * DTYPES[dtype_of(op.mem.type)].nbytes
        self.define(fn, op.res, Val(str(n), "static", n), op)

    def smem_view(self, mem: SSAValue, access, indices, op: Operation, fn: Fn) -> str:
        """A shared view: `.index(i)` on leading dimensions, `.slice(start, extent, dim)` (the
        start known at compile time) on the others."""
        text = self.ref(mem, fn).text
        mem_shape = shape_of(mem.type)
        dim = 0  # the dimension in the view built so far
        for i, (extent, idx) in enumerate(zip(access.dims, indices, strict=True)):
            v = self.ref(idx, fn)
            if extent is None:
                if dim != 0:
                    raise KirError(
                        unsupported(
                            op, "a point index after a slice of a shared buffer", "index leading dimensions first"
                        )
                    )
                text += f".index({v.text})"
                continue
            n = self.static(extent, op)
            if v.kind not in ("static", "constexpr"):
                raise KirError(
                    unsupported(
                        op,
                        "a slice of a shared buffer at a run-time offset: gluon slices shared views at compile-time offsets",
                        "slice at a parameter or role_rank() offset, or index the leading (stage) dimension",
                    )
                )
            whole = v.kind == "static" and v.static == 0 and self.static(mem_shape[i], op) == n
            if not whole:
                text += f".slice({v.text}, {n}, dim={dim})"
            dim += 1
        indexed = sum(1 for extent in access.dims if extent is None)
        if len(mem_shape) - indexed == 1 and len(mem_shape) >= 2 and not rows_of_vectors(mem):
            # the buffer's NVMMA layout has two dimensions; Gluon cannot view one of its rows
            raise KirError(
                unsupported(
                    op,
                    "a 1-D view of a shared buffer laid out for 2-D tiles (a swizzle, a TMA copy or wgmma, or 2-D accesses elsewhere)",
                    "read and write it as 2-D tiles, or keep a buffer of rows without a swizzle and index only its first dimension",
                )
            )
        return text

    def op_LoadOp(self, op: tl.LoadOp, fn: Fn) -> None:
        if isinstance(op.mem.type, SmemType):
            view = self.smem_view(op.mem, op.access.data, list(op.indices), op, fn)
            lay = self.layout_of(op.res, fn, op)
            self.define(fn, op.res, Val(f"{view}.load({lay})", "tile"), op)
            return
        lay = self.layout_of(op.res, fn, op) if isinstance(op.res.type, TileType) else None
        ptr = self.pointer_line(op, lay, fn)
        extra = ""
        if op.mask is not None:
            extra += f", mask={self.operand(op.mask, op, fn).text}"
            if op.other is not None:
                extra += f", other={self.operand(op.other, op, fn).text}"
            else:
                extra += ", other=0"
        if op.evict is not None:
            extra += f', eviction_policy="evict_{op.evict.data}"'
        self.define(fn, op.res, Val(f"gl.load({ptr}{extra})", "tile" if lay else "scalar"), op)

    def op_StoreOp(self, op: tl.StoreOp, fn: Fn) -> None:
        value = self.operand(op.value, op, fn)
        if isinstance(op.mem.type, SmemType):
            view = self.smem_view(op.mem, op.access.data, list(op.indices), op, fn)
            fn.line(f"{view}.store({value.text})", op)
            return
        shape = self.shape_of_access(op)
        if shape:
            # Stores go through a blocked layout of 16-byte vectors: a wgmma accumulator (or
            # any other layout) is converted to it first.
            lay = self.layout_const(blocked_layout(shape, DTYPES[dtype_of(op.mem.type)].bits, fn.warps))
            if isinstance(op.value.type, TileType) and self.layout_of(op.value, fn, op) != lay:
                text = f"gl.convert_layout({value.text}, {lay})"
            elif isinstance(op.value.type, TileType):
                text = value.text
            else:
                text = f"gl.full({shape}, {value.text}, {GL_DTYPE[dtype_of(op.mem.type)]}, layout={lay})"
            ptr = self.pointer_line(op, lay, fn)
        else:
            ptr, text = self.pointer_line(op, None, fn), value.text
        extra = ""
        if op.mask is not None:
            mask = self.operand(op.mask, op, fn)
            if isinstance(op.mask.type, TileType) and shape and self.layout_of(op.mask, fn, op) != lay:
                extra = f", mask=gl.convert_layout({mask.text}, {lay})"
            else:
                extra = f", mask={mask.text}"
        fn.line(f"gl.store({ptr}, {text}{extra})", op)

    def shape_of_access(self, op) -> list[int]:
        return [self.static(d, op) for d in tl.access_shape(op.mem.type, op.access.data, list(op.indices))]

    def pointer_line(self, op, layout: str | None, fn: Fn) -> str:
        """Bind the addresses of an access to a name on a line of their own."""
        expr = self.pointers(op, layout, fn)
        name = self.bind_name(fn, None, f"{self.ref(op.mem, fn).text}_ptrs", None)
        fn.line(f"{name} = {expr}", op)
        return name

    def pointers(self, op, layout: str | None, fn: Fn) -> str:
        """Addresses of a block access `x[i, r0 : r0 + E, ...]` of a global tensor: the base,
        plus each index times its stride (int64 for all but the last dimension, so that large
        tensors do not overflow), with `arange` tiles on the sliced dimensions."""
        t = op.mem.type
        dims = shape_of(t)
        strides = [s.data for s in t.strides.data] if t.strides.data else row_major_strides(t)
        access = op.access.data
        if any(isinstance(v.type, TileType) for v in op.indices):
            return self.gather_pointers(op, strides, layout, fn)
        sliced = [i for i, d in enumerate(access.dims) if d is not None]
        if len(sliced) > 2:
            raise KirError(unsupported(op, "the gluon backend addresses 1-D and 2-D blocks of global tensors"))
        terms = [self.ref(op.mem, fn).text]
        for i, (extent, idx) in enumerate(zip(access.dims, op.indices, strict=True)):
            start = self.ref(idx, fn)
            wide = i < len(dims) - 1  # this index is scaled by a stride that may be large
            zero = start.kind == "static" and start.static == 0
            if extent is None:
                if zero:
                    continue
                index = f"{start.operand()}.to(gl.int64)" if wide and start.kind == "scalar" else start.operand(PRODUCT)
            else:
                n = self.static(extent, op)
                pos = sliced.index(i)
                where = layout if len(sliced) == 1 else f"gl.SliceLayout({1 - pos}, {layout})"
                index = f"gl.arange(0, {n}, layout={where})"
                if not zero:
                    index = f"({start.operand(SUM)} + {index})"
                if wide:
                    index = f"{index}.to(gl.int64)"
                if len(sliced) == 2:
                    index += "[:, None]" if pos == 0 else "[None, :]"
            step = self.sym_text(strides[i], fn)
            terms.append(
                index if step.kind == "static" and step.static == 1 else f"{index} * {step.operand(PRODUCT, True)}"
            )
        return " + ".join(terms)

    def gather_pointers(self, op, strides: list[sx.SymExpr], layout: str | None, fn: Fn) -> str:
        """Addresses of a gather `x[b, rows[:, None], cols]`: the base plus each index (a scalar
        or an index tile, broadcasting in the load's layout) times its stride, int64 for all but
        the last dimension."""
        terms = [self.ref(op.mem, fn).text]
        last = len(op.indices) - 1
        for i, idx in enumerate(op.indices):
            v = self.ref(idx, fn)
            if v.kind == "static" and v.static == 0:
                continue
            if isinstance(idx.type, TileType):
                text = v.text
                if layout is not None and self.layout_of(idx, fn, op) != layout:
                    text = f"gl.convert_layout({text}, {layout})"
                    v = Val(text, "tile")
                index = f"{v.operand()}.to(gl.int64)" if i < last else v.operand(PRODUCT)
            elif i < last and v.kind == "scalar":
                index = f"{v.operand()}.to(gl.int64)"
            else:
                index = v.operand(PRODUCT)
            step = self.sym_text(strides[i], fn)
            terms.append(
                index if step.kind == "static" and step.static == 1 else f"{index} * {step.operand(PRODUCT, True)}"
            )
        return " + ".join(terms)
