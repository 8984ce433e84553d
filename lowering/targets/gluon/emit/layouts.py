"""Register layouts: which layout each tile gets in Gluon, and the module constants that spell
them. The choice is written into the IR by lowering.passes.layouts, whose docstring says it."""

from __future__ import annotations

import math

from xdsl.ir import Operation, SSAValue

from kir.diagnostics import KirError
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import GlobalType, Layout, TileType, dtype_of, shape_of
from kir.dtypes import DTYPES

from .refusals import unsupported
from .values import Fn, rows_of_vectors

# ---- the choice --------------------------------------------------------------------------------


class LayoutError(Exception):
    """A tile that no register layout of the target fits (said at the op that asked)."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message, self.hint = message, hint


class LayoutClasses:
    """Tiles that must share one register layout (union-find over KIR values): an op's result
    and its elementwise operands, a loop's init, body argument, yield and result, a wgmma's
    accumulator and result. A class holding a wgmma accumulator takes the MMA layout."""

    def __init__(self, kernel: st.KernelOp):
        self.parent: dict[SSAValue, SSAValue] = {}
        self.mma: dict[SSAValue, int] = {}  # root -> bits of the wgmma operands
        self.fixed: dict[SSAValue, Layout] = {}  # root -> the layout a convert_layout gives it
        self.wanted: dict[SSAValue, Layout] = {}  # root -> the layout a convert_layout turns it into
        for op in kernel.walk():
            self._visit(op)

    def find(self, v: SSAValue) -> SSAValue:
        root = v
        while self.parent.get(root, root) is not root:
            root = self.parent[root]
        while v is not root:
            nxt = self.parent.get(v, v)
            self.parent[v] = root
            v = nxt
        return root

    def union(self, a: SSAValue, b: SSAValue) -> None:
        if not (isinstance(a.type, TileType) and isinstance(b.type, TileType)):
            return
        if len(shape_of(a.type)) != len(shape_of(b.type)):
            return
        ra, rb = self.find(a), self.find(b)
        if ra is rb:
            return
        self.parent[rb] = ra
        for claims in (self.fixed, self.wanted):
            if rb in claims:
                claims.setdefault(ra, claims.pop(rb))
        if rb in self.mma:
            self.mma[ra] = self.mma.pop(rb)

    def _visit(self, op: Operation) -> None:
        if isinstance(op, tl.BinaryOp | tl.CompareOp | tl.WhereOp | tl.UnaryOp | tl.CastOp):
            for v in op.operands:
                self.union(op.results[0], v)
        elif isinstance(op, st.ForOp):
            block = op.body.block
            last = block.last_op
            yields = list(last.values) if isinstance(last, st.YieldOp) else []
            for i, (init, res) in enumerate(zip(op.inits, op.res, strict=True)):
                self.union(res, init)
                self.union(res, block.args[1 + i])
                if i < len(yields):
                    self.union(res, yields[i])
        elif isinstance(op, st.IfOp):
            for region in (op.then_body, op.else_body):
                last = region.block.last_op
                if isinstance(last, st.YieldOp):
                    for res, y in zip(op.res, last.values, strict=True):
                        self.union(res, y)
        elif isinstance(op, tl.LoadOp) and op.mask is not None:
            self.union(op.res, op.mask)
        elif isinstance(op, ex.WgmmaOp):
            self.union(op.res, op.acc)
            self.mma[self.find(op.res)] = DTYPES[dtype_of(op.a.type)].bits
        elif isinstance(op, ex.ConvertLayoutOp):
            self.fixed[self.find(op.res)] = op.layout.data
            self.wanted.setdefault(self.find(op.operand), op.layout.data)

    def choose(self, v: SSAValue, shape: list[int], warps: int) -> Layout:
        """The layout of `v`'s class when `v` (of static `shape`) is the first member asked
        about, in code running on `warps` warps."""
        root = self.find(v)
        if isinstance(v.type, TileType) and v.type.layout.data:
            return v.type.layout.data[0].data
        if root in self.fixed:
            return self.fixed[root]
        if root in self.mma:
            if len(shape) != 2:
                raise LayoutError("a wgmma accumulator is a 2-D tile")
            if warps < 4 or shape[0] < 16 * min(warps, 4) or shape[0] % 16:
                raise LayoutError(
                    f"a {shape[0]}-row wgmma accumulator in a {warps}-warp partition: "
                    "wgmma gives each warp of a warpgroup 16 rows, so a warpgroup needs at least 64",
                    "give each warpgroup at least 64 rows of the accumulator (BM / units >= 64)",
                )
            if shape[1] % 8:
                raise LayoutError(f"a wgmma accumulator of {shape[1]} columns: wgmma's N is a multiple of 8")
            wpc, instr = mma_layout(shape[0], shape[1], self.mma[root], warps)
            return Layout("mma", ((3, 0), tuple(wpc), tuple(instr)))
        if root in self.wanted:
            return self.wanted[root]
        return blocked_layout(shape, DTYPES[dtype_of(v.type)].bits, warps)


def mma_layout(rows: int, cols: int, bits: int, warps: int) -> tuple[list[int], list[int]]:
    """warps_per_cta and instr_shape of a wgmma accumulator [rows, cols] on `warps` warps
    (the rules of Gluon's 05-wgmma tutorial: m = 16, k = 256 / bits, n <= 256 dividing cols)."""
    wpc = [4, 1]
    while wpc[0] * wpc[1] < warps:
        if rows > 16 * wpc[0]:
            wpc[0] *= 2
        else:
            wpc[1] *= 2
    m_reps = -(-rows // 16)
    n_reps = -(-warps // m_reps)
    max_n = max(cols // n_reps, 8)
    n = 256
    while n > 8 and (n > max_n or cols % n):
        n -= 8
    return wpc, [16, n, 256 // bits]


def blocked_layout(shape: list[int], bits: int, warps: int) -> Layout:
    """16-byte vectors along the last dimension, lanes then warps down the rows."""
    rank = len(shape)
    vec = max(1, min(128 // max(bits, 8), shape[-1]))
    tpw_last = max(1, min(32, shape[-1] // vec))
    if rank == 1:
        return Layout("blocked", ((vec,), (32,), (warps,), (0,)))
    spt = [1] * (rank - 1) + [vec]
    tpw = [1] * rank
    tpw[-1] = tpw_last
    tpw[-2] = 32 // tpw_last
    wpc = [1] * rank
    wpc[0] = warps
    order = list(range(rank - 1, -1, -1))
    return Layout("blocked", (tuple(spt), tuple(tpw), tuple(wpc), tuple(order)))


# The ops that make a tile with a layout of their own in Gluon (the others take their operands').
MAKERS = (tl.ZerosOp, tl.FullOp, tl.ArangeOp, tl.LoadOp)

# ---- how Gluon spells them -------------------------------------------------------------------


def layout_text(layout: Layout) -> str:
    """The Gluon constructor of a KIR register layout."""
    p = [list(x) for x in layout.params]
    if layout.kind == "blocked":
        return f"gl.BlockedLayout({p[0]}, {p[1]}, {p[2]}, {p[3]})"
    return f"gl.NVMMADistributedLayout(version={p[0]}, warps_per_cta={p[1]}, instr_shape={p[2]})"


class GluonClasses(LayoutClasses):
    """The layout classes, plus what gathers, expansions and reductions need: a gather's index
    tiles join its result's class (they broadcast in its layout), and the `expand_dims` and
    `reduce` ops are kept, so a widened tile can take the slice of the layout it widens into,
    and a reduced one the slice that Gluon's reduction gives it."""

    def __init__(self, kernel: st.KernelOp):
        self.expansions: list[tl.ExpandDimsOp] = []
        self.reductions: list[tl.ReduceOp] = []
        self.members: list[SSAValue] = []
        super().__init__(kernel)

    def _visit(self, op: Operation) -> None:
        super()._visit(op)
        self.members += [r for r in op.results if isinstance(r.type, TileType)]
        if isinstance(op, tl.LoadOp) and isinstance(op.mem.type, GlobalType):
            for v in op.indices:
                self.union(op.res, v)  # scalars and other ranks are left alone
        elif isinstance(op, tl.ExpandDimsOp):
            self.expansions.append(op)
        elif isinstance(op, tl.ReduceOp) and isinstance(op.res.type, TileType):
            self.reductions.append(op)


class Layouts:
    """The layouts part of `GluonWriter`."""

    layout_names: dict[str, str]  # the writer's (see GluonWriter.__init__)

    def layout_of(self, v: SSAValue, fn: Fn, op: Operation) -> str:
        """The layout constant of a tile: one per layout class, decided by the first member
        asked (its shape and dtype) in the function's warps."""
        root = self.layouts.find(v)
        if isinstance(v.type, TileType) and v.type.layout.data:
            return self.layout_const(v.type.layout.data[0].data)
        key = (root, fn.warps)
        if key not in self.class_layouts:
            self.class_layouts[key] = self._class_layout(v, root, fn, op)
        return self.class_layouts[key]

    def _class_layout(self, v: SSAValue, root: SSAValue, fn: Fn, op: Operation) -> str:
        if root not in self.layouts.fixed:
            # A reduction's result comes in the slice of its operand's layout along the reduced
            # axis: the class takes the first reduction's, so that it moves nothing (the
            # online softmax's row maximum and sum, then widened back against the tile).
            for r in self.layouts.reductions:
                if self.layouts.find(r.res) is root:
                    return self.slice_const(r.axis.data, self.layout_of(r.operand, fn, r))
            # a tile widened by expand_dims takes the slice of what it widens into (one target)
            slices = {
                self.slice_const(e.axis.data, self.layout_of(e.res, fn, e))
                for e in self.layouts.expansions
                if self.layouts.find(e.operand) is root
            }
            if len(slices) == 1:
                return slices.pop()
        v = self._widest(v, root, op)
        try:
            layout = self.layouts.choose(v, self.shape(v.type, op), fn.warps)
        except LayoutError as err:
            raise KirError(unsupported(op, err.message, err.hint)) from None
        return self.layout_const(layout)

    def _widest(self, v: SSAValue, root: SSAValue, op: Operation) -> SSAValue:
        """The member of `v`'s class with the most elements (`v` unless one has strictly more;
        a loaded tile first, whose dtype sizes the vectors): a class joined by broadcasting ([BK,
        1] index tiles and the [BK, BN] gather they address) gets the layout of its full shape."""

        def size(m: SSAValue) -> int:
            try:
                return math.prod(self.static(d) for d in shape_of(m.type))
            except KirError:
                return 0

        rank = len(shape_of(v.type))
        wider = [
            m
            for m in self.layouts.members
            if len(shape_of(m.type)) == rank and self.layouts.find(m) is root and size(m) > size(v)
        ]
        if not wider:
            return v
        return max(wider, key=lambda m: (size(m), isinstance(m.owner, tl.LoadOp)))

    def module_const(self, text: str, name: str | None = None, numbered: str | None = None) -> str:
        """The module constant holding the layout `text`, defined once: named `name`, or
        `<numbered>_<n>` with n counting the constants of that prefix."""
        known = self.layout_names.get(text)
        if known is not None:
            return known
        if name is None:
            name = f"{numbered}_{sum(1 for n in self.layout_names.values() if n.startswith(str(numbered)))}"
        self.layout_names[text] = name
        self.layout_order.append((name, text))
        self.module_names.add(name)
        return name

    def slice_const(self, axis: int, parent: str) -> str:
        """The module constant of `gl.SliceLayout(axis, parent)`."""
        return self.module_const(f"gl.SliceLayout({axis}, {parent})", numbered="slice_layout")

    def layout_const(self, layout: Layout) -> str:
        kind = "mma" if layout.kind == "mma" else "blocked"
        return self.module_const(layout_text(layout), numbered=f"{kind}_layout")

    def smem_layout(self, buf: SSAValue) -> str:
        """A 1-D buffer, or a ring of rows that lanes read and write (`rows_of_vectors`: the
        layout of one row; an NVMMA layout has two dimensions, and a 1-D view of it cannot be
        sliced), is swizzled for lanes; any other is an NVMMA layout for TMA and wgmma."""
        t = buf.type
        bits = DTYPES[t.dtype.data].bits
        if len(t.shape.data) < 2 or rows_of_vectors(buf):
            text = "gl.SwizzledSharedLayout(1, 1, 1, [0])"
            base = "shared_layout"
        else:
            text = f"gl.NVMMASharedLayout({t.swizzle.data}, {bits}, 2)"
            base = f"nvmma_{t.swizzle.data}b_{bits}bit"
        return self.module_const(text, name=base)
