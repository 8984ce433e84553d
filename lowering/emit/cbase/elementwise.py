"""Scalars, tile constructors, elementwise ops, reshapes and gathers in C++: each result
element computed from operand elements, at its own index or another."""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue

from kir.dialect import tile as tl
from kir.dialect.types import ScalarType, dtype_of
from lowering.emit.cbase.dialect import Unsupported
from lowering.emit.cbase.values import Cyclic, Scalar, Tile


class Elementwise:
    """The scalar, elementwise and gather ops of `KernelGen`."""

    # ---- scalars and constants ---------------------------------------------------------------

    def op_program_id(self, op: tl.ProgramIdOp) -> None:
        axis = op.axis.data
        expr = f"(int){self.dialect.block_index[axis]}" if axis < len(self.kernel.grid.data) else "0"
        self.define_scalar(op.res, expr, op)

    def op_num_programs(self, op: tl.NumProgramsOp) -> None:
        axis = op.axis.data
        expr = f"(int){self.dialect.grid_size[axis]}" if axis < len(self.kernel.grid.data) else "1"
        self.define_scalar(op.res, expr, op)

    def op_symbol(self, op: tl.SymValueOp) -> None:
        name = op.symbol.data
        if name in self.params:
            self.vals[op.res] = Scalar(self.param_name(name), "i32")
        elif name in self.shape_symbols:
            self.vals[op.res] = Scalar(self.symbol_name(name), "i32")
        else:
            raise Unsupported(op, f"`{name}` is neither a parameter nor a shape symbol of the arguments")

    def op_const(self, op: tl.ConstOp) -> None:
        self.vals[op.res] = Scalar(self.c.literal(op.number, op.dtype), op.dtype)

    # ---- tile construction ---------------------------------------------------------------------

    def try_lazy(self, res: SSAValue) -> bool:
        """Keep a tile that is a pure function of its index (aranges, constants, and what is
        computed from them and from scalars) unstored: each use recomputes its element."""
        shape = self.static_shape(res.type)
        self.vals[res] = Tile("", dtype_of(res.type), shape, self.layout_of(res), lazy=True)
        if self.pure(res, [f"kir_x{k}" for k in range(len(shape))]) is not None:
            return True
        del self.vals[res]
        return False

    def op_constructor(self, op: Operation) -> None:
        """arange, zeros and full are pure."""
        if not self.try_lazy(op.results[0]):
            raise Unsupported(op, f"internal: {op.name} is not pure")

    # ---- elementwise ---------------------------------------------------------------------------

    def elementwise_expr(self, op: Operation, parts: list[str]) -> str:
        c = self.c
        if isinstance(op, tl.BinaryOp):
            dt = dtype_of(op.lhs.type)
            return c.binary(op.fn.data, parts[0], parts[1], dt, self.const_value(op.rhs))
        if isinstance(op, tl.CompareOp):
            return c.compare(op.predicate.data, parts[0], parts[1], dtype_of(op.lhs.type))
        if isinstance(op, tl.UnaryOp):
            return c.unary(op.fn.data, parts[0], dtype_of(op.operand.type))
        if isinstance(op, tl.WhereOp):
            return f"({parts[0]} ? {parts[1]} : {parts[2]})"
        if isinstance(op, tl.CastOp):
            return c.cast(parts[0], dtype_of(op.operand.type), dtype_of(op.res.type))
        if isinstance(op, tl.RandOp):
            return c.rand(op.fn.data, parts[0], dtype_of(op.seed.type), parts[1], dtype_of(op.offsets.type))
        raise Unsupported(op, f"internal: {op.name} is not elementwise")

    def op_elementwise(self, op: Operation) -> None:
        res = op.results[0]
        if isinstance(res.type, ScalarType):
            parts = [self.val(v).name for v in op.operands]
            self.define_scalar(res, self.elementwise_expr(op, parts), op)
            return
        if self.try_lazy(res):
            return
        shape = self.static_shape(res.type)
        layout = self.layout_of(res)
        operands = list(op.operands)
        x = self.declare(res, op)
        assert isinstance(x, Tile)
        # trans reads each element at the transposed index, never in place
        staged = self.begin_exchange(operands, shape, layout, op, anywhere=isinstance(op, tl.TransOp))
        idx, _, closers = self.open_slots(layout, shape, op)
        if isinstance(op, tl.TransOp):
            self.w.line(f"{x.name}[kir_i] = {self.value_at(op.operand, idx[::-1])};", op)
        elif isinstance(op, tl.BroadcastOp):
            self.w.line(f"{x.name}[kir_i] = {self.fetch(op.operand, shape, layout, idx)};", op)
        else:
            parts = []
            for k, v in enumerate(operands):
                got = self.fetch(v, shape, layout, idx)
                if isinstance(self.val(v), Scalar) or got.endswith("[kir_i]"):
                    parts.append(got)
                else:
                    local = f"kir_a{k}"
                    self.w.line(f"const {self.c.ctype(dtype_of(v.type))} {local} = {got};", op)
                    parts.append(local)
            self.w.line(f"{x.name}[kir_i] = {self.elementwise_expr(op, parts)};", op)
        self.close(closers)
        self.end_exchange(staged, op)

    def op_reshape(self, op: Operation) -> None:
        """expand_dims, reshape and convert_layout keep the row-major element order: the
        cyclic layout holds the same elements in the same slots, so the result is the operand."""
        src = self.val(op.operands[0])
        res = op.results[0]
        if (isinstance(src, Scalar) or src.lazy) and self.try_lazy(res):
            return
        if isinstance(src, Scalar):
            raise Unsupported(op, f"internal: {op.name} of a scalar")
        shape = self.static_shape(res.type)
        layout = self.layout_of(res)
        if layout == src.layout and (isinstance(layout, Cyclic) or src.shape == shape):
            self.vals[res] = Tile(src.name, src.dtype, shape, layout)
            self.views.add(src.name)
            return
        x = self.declare(res, op)
        assert isinstance(x, Tile)
        # another layout: read each element of the operand by its row-major index
        staged = self.begin_exchange([op.operands[0]], shape, layout, op, anywhere=True)
        idx, lin, closers = self.open_slots(x.layout, x.shape, op)
        self.w.line(f"{x.name}[kir_i] = {self.value_at(op.operands[0], self.delinearize(lin, src.shape))};", op)
        self.close(closers)
        self.end_exchange(staged, op)

    # ---- gather ----------------------------------------------------------------------------------

    def op_gather(self, op: tl.GatherOp) -> None:
        """Each thread reads its result elements from the source staged in shared memory (or
        recomputed, when pure) at the index's position along the axis. An index out of range
        is undefined here, as in Triton; the interpreter reports it."""
        if self.try_lazy(op.res):
            return
        res = self.declare(op.res, op)
        assert isinstance(res, Tile)
        staged = self.begin_exchange([op.src, op.index], res.shape, res.layout, op, anywhere=(op.src,))
        idx, _, closers = self.open_slots(res.layout, res.shape, op)
        self.w.line(f"const int kir_g = (int)({self.fetch(op.index, res.shape, res.layout, idx)});", op)
        at = list(idx)
        at[op.axis.data] = "kir_g"
        self.w.line(f"{res.name}[kir_i] = {self.value_at(op.src, at)};", op)
        self.close(closers)
        self.end_exchange(staged, op)
