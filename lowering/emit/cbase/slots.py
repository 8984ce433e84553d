"""Per-thread slot loops over a tile's elements, reading an operand at an element (in place,
recomputed when pure, or from shared memory), and the shared-memory exchanges between threads."""

from __future__ import annotations

import re

from xdsl.ir import BlockArgument, Operation, SSAValue

from kir.dialect import explicit as ex
from kir.dialect import tile as tl
from kir.dtypes import DTYPES
from kir.program import span_of
from lowering.emit.cbase.dialect import Unsupported, _prod
from lowering.emit.cbase.values import Cyclic, Scalar, Tile


class SlotLoops:
    """The slot loops and exchanges of `KernelGen`."""

    # `KernelGen`'s state that the slot loops keep (set in its __init__)
    pending: list[tuple[int, int, list[tuple[str, str]], Operation]]
    scratch_top: int
    scratch_max: int

    # ---- slot loops ---------------------------------------------------------------------------

    def open_slots(self, layout: object, shape: tuple[int, ...], op: Operation) -> tuple[list[str], str, int]:
        """Open a loop over the slots of a tile; returns the element's index expressions, its
        row-major linear index and the number of braces to close (with `close`)."""
        assert isinstance(layout, Cyclic)
        n = _prod(shape)
        decls = [("kir_e", f"const int kir_e = kir_i * {layout.threads} + {layout.tid};")]
        idx = self.delinearize("kir_e", shape)
        if len(shape) > 1:
            decls += [(f"kir_x{k}", f"const int kir_x{k} = {e};") for k, e in enumerate(idx)]
            idx = [f"kir_x{k}" for k in range(len(shape))]
        self.open_loop(self.slots(layout, shape), decls, op)
        closers = 1
        if n % layout.threads:
            self.w.line(f"if (kir_e < {n}) {{", op)
            self.w.indent()
            closers += 1
        return idx, "kir_e", closers

    def open_loop(self, count: int, decls: list[tuple[str, str]], op: Operation, step: int = 1) -> None:
        """An unrolled loop over `count` slots whose index declarations (name, C++) are written
        when the loop closes, and only those its body uses."""
        w = self.w
        w.line("#pragma unroll", op)
        inc = "++kir_i" if step == 1 else f"kir_i += {step}"
        w.line(f"for (int kir_i = 0; kir_i < {count}; {inc}) {{", op)
        w.indent()
        self.pending.append((len(w.lines), w.depth, decls, op))

    def close(self, closers: int) -> None:
        for _ in range(closers):
            self.w.dedent()
            self.w.line("}")
            self._flush_decls()

    def _flush_decls(self) -> None:
        w = self.w
        if not self.pending or self.pending[-1][1] != w.depth + 1:
            return
        at, depth, decls, op = self.pending.pop()
        body = "\n".join(w.lines[at:])
        texts: list[str] = []
        for name, text in reversed(decls):  # later declarations use earlier ones
            if re.search(rf"\b{name}\b", body):
                texts.insert(0, w.indent_unit * depth + text)
                body += "\n" + text
        if not texts:
            return
        w.lines[at:at] = texts
        w.spans = {(n + len(texts) if n > at else n): s for n, s in w.spans.items()}
        span = span_of(op)
        if span is not None:
            for k in range(len(texts)):
                w.spans[at + 1 + k] = span
        self.pending = [(a + len(texts) if a > at else a, d, ds, o) for a, d, ds, o in self.pending]

    @staticmethod
    def delinearize(lin: str, shape: tuple[int, ...]) -> list[str]:
        out = []
        for k, d in enumerate(shape):
            inner = _prod(shape[k + 1 :])
            if d == 1:
                out.append("0")
            elif k == 0:
                out.append(lin if inner == 1 else f"({lin} / {inner})")
            elif inner == 1:
                out.append(f"({lin} % {d})")
            else:
                out.append(f"(({lin} / {inner}) % {d})")
        return out

    @staticmethod
    def linearize(idx: list[str], shape: tuple[int, ...]) -> str:
        terms = []
        for k, (e, d) in enumerate(zip(idx, shape, strict=True)):
            inner = _prod(shape[k + 1 :])
            if d == 1:
                continue
            terms.append(e if inner == 1 else f"{e} * {inner}")
        return "(" + " + ".join(terms) + ")" if terms else "0"

    @staticmethod
    def broadcast_index(shape: tuple[int, ...], res_shape: tuple[int, ...], idx: list[str]) -> list[str]:
        off = len(res_shape) - len(shape)
        return ["0" if d == 1 else idx[k + off] for k, d in enumerate(shape)]

    # ---- operand access at an element -------------------------------------------------------

    def value_at(self, v: SSAValue, idx: list[str]) -> str:
        """The element of `v` at index `idx` (in v's own coordinates), for a value that is not
        read in its own slot: recomputed when pure, else read from its exchange buffer."""
        x = self.val(v)
        if isinstance(x, Scalar):
            return x.name
        if v in self.exchanged:
            return f"{self.exchanged[v]}[{self.linearize(idx, x.shape)}]"
        if v in self.resident:
            return f"{self.resident[v]}[{self.linearize(idx, x.shape)}]"
        expr = self.pure(v, idx)
        if expr is None:
            raise Unsupported(self.current_op, f"internal: {x.name} was neither exchanged nor pure")
        return expr

    def fetch(self, v: SSAValue, res_shape: tuple[int, ...], res_layout: object, idx: list[str]) -> str:
        """Operand `v` at the element `idx` of a result of shape `res_shape` (broadcasting)."""
        x = self.val(v)
        if isinstance(x, Scalar):
            return x.name
        if x.shape == res_shape and x.layout == res_layout and not x.lazy:
            return f"{x.name}[kir_i]"
        return self.value_at(v, self.broadcast_index(x.shape, res_shape, idx))

    def pure(self, v: SSAValue, idx: list[str]) -> str | None:
        """`v` at `idx` as an expression of the index and of scalars alone, when `v` is computed
        from aranges, constants and scalars only (None otherwise, or when it is too large)."""
        expr = self._pure(v, idx)
        return expr if expr is not None and len(expr) <= self.PURE_LIMIT else None

    def _pure(self, v: SSAValue, idx: list[str]) -> str | None:
        x = self.vals.get(v)
        if isinstance(x, Scalar):
            return x.name
        if isinstance(v, BlockArgument) or x is None or not x.lazy:
            return None
        op = v.owner
        shape = x.shape
        c = self.c
        if isinstance(op, tl.ArangeOp):
            start = self.static(op.start.data)
            return f"({start} + {idx[0]})" if start else idx[0]
        if isinstance(op, tl.ZerosOp):
            return c.zero(x.dtype)
        if isinstance(op, tl.FullOp):
            return self.val(op.value).name

        def at(u: SSAValue) -> str | None:
            y = self.vals.get(u)
            if isinstance(y, Scalar):
                return y.name
            if y is None:
                return None
            e = self._pure(u, self.broadcast_index(y.shape, shape, idx))
            return None if e is None or len(e) > self.PURE_LIMIT else f"({e})"

        if isinstance(op, tl.BinaryOp | tl.CompareOp | tl.WhereOp | tl.UnaryOp | tl.CastOp | tl.RandOp):
            parts = [at(u) for u in op.operands]
            if any(p is None for p in parts):
                return None
            return self.elementwise_expr(op, parts)
        if isinstance(op, tl.BroadcastOp | ex.ConvertLayoutOp):
            return at(op.operand)
        if isinstance(op, tl.ExpandDimsOp):
            axis = op.axis.data
            return self._pure(op.operand, idx[:axis] + idx[axis + 1 :])
        if isinstance(op, tl.ReshapeOp):
            src = self.vals[op.operand]
            assert isinstance(src, Tile)
            return self._pure(op.operand, self.delinearize(self.linearize(idx, shape), src.shape))
        if isinstance(op, tl.TransOp):
            return self._pure(op.operand, idx[::-1])
        if isinstance(op, tl.GatherOp):
            g = at(op.index)
            if g is None:
                return None
            where = list(idx)
            where[op.axis.data] = g
            return self._pure(op.src, where)
        return None

    # ---- shared-memory exchanges and scratch --------------------------------------------------

    def require_sync(self, what: str) -> None:
        if self.instance.single:  # pragma: no cover - a single-thread role holds no tile
            raise Unsupported(self.current_op, f"internal: {what} in a role run by one thread")

    def scratch(self, ctype: str, count: int, size: int) -> str:
        """Reserve scratch shared memory for the op being emitted (in the executing unit's own
        area); returns the name of a pointer to it."""
        off = -(-self.scratch_top // 16) * 16
        self.scratch_top = off + count * size
        inst = self.instance
        if inst.cta:
            self.scratch_max = max(self.scratch_max, self.scratch_top)
        else:
            key = id(inst.role)
            self.unit_scratch[key] = max(self.unit_scratch.get(key, 0), self.scratch_top)
        name = self.fresh("kir_scr")
        at = (
            f"{self.scratch_base + off}" if inst.scratch_at == "0" else f"{self.scratch_base + off} + {inst.scratch_at}"
        )
        self.w.line(f"{ctype}* {name} = reinterpret_cast<{ctype}*>(kir_smem + {at});", self.current_op)
        return name

    def store_to_scratch(self, v: SSAValue, ptr: str, op: Operation) -> None:
        x = self.val(v)
        assert isinstance(x, Tile)
        idx, lin, closers = self.open_slots(x.layout, x.shape, op)
        self.w.line(f"{ptr}[{lin}] = {self.own(v, idx)};", op)
        self.close(closers)

    def own(self, v: SSAValue, idx: list[str]) -> str:
        """A tile's element in its own slot of a loop over its layout."""
        x = self.val(v)
        assert isinstance(x, Tile)
        return self.value_at(v, idx) if x.lazy else f"{x.name}[kir_i]"

    def sync(self, op: Operation | None = None) -> None:
        """A barrier of the executing unit (the CTA, a warpgroup or a warp)."""
        self.w.line(f"{self.instance.unit_sync};", op or self.current_op)

    def begin_exchange(
        self,
        operands: list[SSAValue],
        res_shape: tuple[int, ...],
        res_layout: object,
        op: Operation,
        anywhere: bool | tuple[SSAValue, ...] = False,
    ) -> bool:
        """Stage in shared memory the operands that are neither in place nor pure (`anywhere`:
        operands read at other elements than their own, even of the same shape: all of them, or
        those listed). Returns whether anything was staged (the caller then closes with
        `end_exchange`)."""
        need = []
        for v in operands:
            x = self.vals.get(v)
            if not isinstance(x, Tile) or v in need or x.lazy or v in self.resident:
                continue
            far = anywhere if isinstance(anywhere, bool) else v in anywhere
            if not far and x.shape == res_shape and x.layout == res_layout:
                continue
            need.append(v)
        if not need:
            return False
        self.require_sync(f"`{op.name}` on a value of another shape")
        self.w.line("{", op)
        self.w.indent()
        for v in need:
            x = self.val(v)
            assert isinstance(x, Tile)
            ptr = self.scratch(self.c.ctype(x.dtype), _prod(x.shape), DTYPES[x.dtype].nbytes)
            self.store_to_scratch(v, ptr, op)
            self.exchanged[v] = ptr
        self.sync(op)
        return True

    def end_exchange(self, staged: bool, op: Operation) -> None:
        if staged:
            self.sync(op)
            self.w.dedent()
            self.w.line("}", op)
        self.exchanged.clear()
        self.scratch_top = 0
