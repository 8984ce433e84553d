"""The C++ kernel generator: names and static sizes, declarations, the dispatch of ops to their
handlers (the mixins), and the kernel around the body (signature, prologue, helpers)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from kir import symexpr as sx
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import GlobalType, ScalarType, TileType, dtype_of, shape_of
from kir.dtypes import DTYPES
from kir.program import Program
from lowering.emit.base import ArgInfo, Lowered, SourceWriter
from lowering.emit.cbase.control import ControlFlow
from lowering.emit.cbase.dialect import CDialect, Unsupported, _prod
from lowering.emit.cbase.elementwise import Elementwise
from lowering.emit.cbase.exprs import COMMON_HELPERS, CExprs
from lowering.emit.cbase.memory import Memory
from lowering.emit.cbase.reductions import Reductions
from lowering.emit.cbase.slots import SlotLoops
from lowering.emit.cbase.values import Cyclic, GlobalArg, Instance, Scalar, Tile
from lowering.emit.names import CXX_RESERVED, identifier

WAIT_NAMES = {ex.CpAsyncWaitOp: "cp.async.wait", ex.WgmmaWaitOp: "wgmma.wait", ex.TmaStoreWaitOp: "tma.store_wait"}


class KernelGen(SlotLoops, Elementwise, Reductions, Memory, ControlFlow):
    """Generates one kernel's C++ source from a program and its parameter values. One instance
    per emission; a backend subclasses it to add its hardware-explicit ops and layouts."""

    PURE_LIMIT = 600  # characters: beyond this, a pure value is exchanged rather than recomputed

    def __init__(self, program: Program, params: dict[str, int], dialect: CDialect):
        self.program = program
        self.kernel = program.kernel
        self.params = dict(params)
        self.dialect = dialect
        self.c = CExprs(dialect)
        self.w = SourceWriter()
        self.names: dict[SSAValue, str] = {}
        self.vals: dict[SSAValue, Tile | Scalar] = {}
        self.used: set[str] = set()
        self.globals: dict[SSAValue, GlobalArg] = {}
        self.shape_symbols = [s for s in self.kernel.shape_symbols]
        self.threads = self.kernel.threads
        self.scratch_base = 0  # offset of the scratch area in dynamic shared memory
        self.scratch_top = 0  # bytes of scratch used by the op being emitted
        self.scratch_max = 0  # of the CTA's code
        self.unit_scratch: dict[int, int] = {}  # id(role) -> bytes one unit of it uses
        self.exchanged: dict[SSAValue, str] = {}
        # gather sources staged once in shared memory where they are defined (see plan_resident)
        self.resident_at: dict[SSAValue, int] = {}
        self.resident: dict[SSAValue, str] = {}
        self.views: set[str] = set()  # arrays that more than one value names (expand_dims, reshape)
        self.decl_block: dict[str, Block | None] = {}
        self.decl_line: dict[str, int] = {}  # the output line of a tile's declaration
        self.instance = Instance(self.threads, "kir_tid", "kir_tid == 0", cta=True, unit_sync=dialect.barrier)
        self.current_op: Operation | None = None
        self.pending: list[tuple[int, int, list[tuple[str, str]], Operation]] = []  # open slot loops
        # each handler takes an op of its key's class
        self.handlers: dict[type[Operation], Callable[[Any], None]] = {
            tl.ProgramIdOp: self.op_program_id,
            tl.NumProgramsOp: self.op_num_programs,
            tl.SymValueOp: self.op_symbol,
            tl.ConstOp: self.op_const,
            tl.ArangeOp: self.op_constructor,
            tl.ZerosOp: self.op_constructor,
            tl.FullOp: self.op_constructor,
            tl.BinaryOp: self.op_elementwise,
            tl.CompareOp: self.op_elementwise,
            tl.UnaryOp: self.op_elementwise,
            tl.WhereOp: self.op_elementwise,
            tl.RandOp: self.op_elementwise,
            tl.CastOp: self.op_elementwise,
            tl.BroadcastOp: self.op_elementwise,
            tl.TransOp: self.op_elementwise,
            tl.ExpandDimsOp: self.op_reshape,
            tl.ReshapeOp: self.op_reshape,
            ex.ConvertLayoutOp: self.op_reshape,
            tl.ReduceOp: self.op_reduce,
            tl.ArgReduceOp: self.op_reduce,
            tl.ScanOp: self.op_scan,
            tl.TopKOp: self.op_topk,
            tl.GatherOp: self.op_gather,
            tl.DotOp: self.op_dot,
            tl.LoadOp: self.op_load,
            tl.StoreOp: self.op_store,
            tl.AtomicOp: self.op_atomic,
            st.ForOp: self.op_for,
            st.IfOp: self.op_if,
            st.YieldOp: lambda op: None,  # handled by the owner of the block
        }

    # ---- names, values and static sizes ------------------------------------------------------

    def fresh(self, base: str) -> str:
        name = base
        n = 1
        while name in self.used:
            name = f"{base}_{n}"
            n += 1
        self.used.add(name)
        return name

    def name_for(self, v: SSAValue, prefix: str = "v_") -> str:
        hint = v.name_hint
        base = (
            identifier(hint, CXX_RESERVED, prefix)
            if hint and SSAValue.is_valid_name(hint) and not hint.startswith("__")
            else "t"
        )
        return self.fresh(base)

    def param_name(self, name: str) -> str:
        return identifier(name, CXX_RESERVED, "p_")

    def symbol_name(self, name: str) -> str:
        return identifier(name, CXX_RESERVED, "n_")

    def static(self, expr: sx.SymExpr, what: str = "a size") -> int:
        """A static expression's value with the parameters bound (shape symbols are not known
        at compile time: such a size is refused)."""
        try:
            return int(sx.fold(expr).evaluate(self.params))
        except KeyError as err:
            raise Unsupported(
                self.current_op,
                f"{what} `{expr}` depends on the shape symbol `{err.args[0]}`; the {self.dialect.name} backend needs it known at compile time",
                "make the size a parameter (a compile-time constant), with a `where` constraint tying it to the shape",
            ) from None
        except ZeroDivisionError:
            raise Unsupported(self.current_op, f"{what} `{expr}` divides by zero") from None

    def pending_count(self, op: ex.CpAsyncWaitOp | ex.WgmmaWaitOp | ex.TmaStoreWaitOp) -> int:
        """An async wait's count with the parameters bound (`S - 2` of an S-stage ring)."""
        n = self.static(op.pending.data, "the pending count")
        if n < 0:
            what = WAIT_NAMES[type(op)]
            raise Unsupported(
                op,
                f"{what}({op.pending.data}) is {what}({n}) with these parameters; the count is at least 0",
                "give the parameters values that leave the count at 0 or more",
            )
        return n

    def static_shape(self, t) -> tuple[int, ...]:
        return tuple(self.static(d, "the tile dimension") for d in shape_of(t))

    def c_sym(self, expr: sx.SymExpr) -> str:
        """A static expression as C++ (parameters and shape symbols by name)."""
        expr = sx.fold(expr)
        if isinstance(expr, sx.Int):
            return str(expr.value)
        if isinstance(expr, sx.Sym):
            return self.param_name(expr.name) if expr.name in self.params else self.symbol_name(expr.name)
        assert isinstance(expr, sx.Bin)
        a, b = self.c_sym(expr.lhs), self.c_sym(expr.rhs)
        if expr.op == "cdiv":
            return f"kir_cdiv({a}, {b})"
        if expr.op in ("min", "max"):
            return f"kir_{expr.op}({a}, {b})"
        return f"({a} {expr.op} {b})"

    def val(self, v: SSAValue) -> Tile | Scalar:
        got = self.vals.get(v)
        if got is None:
            raise Unsupported(self.current_op, f"internal: no value for {v.name_hint or v}")
        return got

    def const_value(self, v: SSAValue) -> int | None:
        """The integer value of a scalar known at compile time (a constant or a parameter)."""
        owner = v.owner if not isinstance(v, BlockArgument) else None
        if isinstance(owner, tl.ConstOp) and DTYPES[owner.dtype].is_int:
            return int(owner.number)
        if isinstance(owner, tl.SymValueOp) and owner.symbol.data in self.params:
            return self.params[owner.symbol.data]
        return None

    def layout_of(self, v: SSAValue) -> object:
        """The register layout a tile value gets (the backend may choose others)."""
        return Cyclic(self.instance.threads, self.instance.tid)

    # ---- declarations -------------------------------------------------------------------------

    def slots(self, layout: object, shape: tuple[int, ...]) -> int:
        assert isinstance(layout, Cyclic)
        return -(-_prod(shape) // layout.threads)

    def declare(self, v: SSAValue, op: Operation, name: str | None = None, bind: bool = True) -> Tile | Scalar:
        """Declare storage for `v` (and bind it to `v`, unless `bind` is false)."""
        dtype = dtype_of(v.type)
        name = name or self.name_for(v)
        if isinstance(v.type, ScalarType):
            self.w.line(f"{self.c.ctype(dtype)} {name};", op)
            res: Tile | Scalar = Scalar(name, dtype)
        else:
            shape = self.static_shape(v.type)
            layout = self.layout_of(v)
            self.w.line(f"{self.c.ctype(dtype)} {name}[{self.slots(layout, shape)}];", op)
            res = Tile(name, dtype, shape, layout)
            self.decl_block[name] = op.parent_block()
            self.decl_line[name] = len(self.w.lines)
        if bind:
            self.vals[v] = res
        return res

    def define_scalar(self, v: SSAValue, expr: str, op: Operation) -> Scalar:
        dtype = dtype_of(v.type)
        name = self.name_for(v)
        self.w.line(f"{self.c.ctype(dtype)} {name} = {expr};", op)
        res = Scalar(name, dtype)
        self.vals[v] = res
        return res

    # ---- dispatch and staged gather sources --------------------------------------------------

    def emit_block(self, block: Block) -> None:
        for op in block.ops:
            self.emit_op(op)

    def emit_op(self, op: Operation) -> None:
        handler = self.handlers.get(type(op))
        if handler is None:
            raise Unsupported(op, f"the {self.dialect.name} backend cannot lower `{op.name}` here")
        prev, self.current_op = self.current_op, op
        try:
            handler(op)
            if self.resident_at:
                self.stage_resident(op)
        finally:
            self.current_op = prev

    def plan_resident(self) -> None:
        """Reserve shared memory for the gather sources that the CTA defines at the kernel's top
        level: each is written there once, where it is defined (one barrier), and every gather
        then reads it in place, instead of staging the source again at each gather (a write and
        two barriers; a binary search gathers from one table at every step)."""
        top = self.kernel.body.block
        offset = self.scratch_base
        for op in self.kernel.walk():
            if not isinstance(op, tl.GatherOp):
                continue
            src = op.src
            owner = src.owner
            if src in self.resident_at or not isinstance(owner, Operation) or owner.parent_block() is not top:
                continue
            if not isinstance(src.type, TileType):
                continue
            shape = self.static_shape(src.type)
            offset = -(-offset // 16) * 16
            self.resident_at[src] = offset
            offset += _prod(shape) * DTYPES[dtype_of(src.type)].nbytes
        self.scratch_base = -(-offset // 16) * 16

    def stage_resident(self, op: Operation) -> None:
        """Write the results of `op` that gathers read in place to their shared-memory home."""
        for r in op.results:
            at = self.resident_at.get(r)
            x = self.vals.get(r)
            if at is None or not isinstance(x, Tile) or x.lazy or not self.instance.cta:
                continue
            ct = self.c.ctype(x.dtype)
            ptr = self.fresh("kir_res")
            self.w.line(f"{ct}* {ptr} = reinterpret_cast<{ct}*>(kir_smem + {at});", op)
            self.store_to_scratch(r, ptr, op)
            self.sync(op)
            self.resident[r] = ptr

    # ---- the kernel ----------------------------------------------------------------------------------

    def plan(self) -> None:
        """Decisions taken before any code is written (the backend's shared memory, layouts)."""

    def emit_body(self) -> None:
        self.emit_block(self.kernel.body.block)

    def finish(self) -> None:
        """Work left once the body is written."""

    def helpers(self) -> list[str]:
        """Helper definitions written before the kernel."""
        return [COMMON_HELPERS]

    def extra_params(self) -> list[str]:
        """Kernel parameters after the tensors and the shape symbols."""
        return []

    def prologue_decls(self) -> list[tuple[str, str]]:
        """(name, C++) of the kernel's first lines; each is written only when the body uses it."""
        decls = [(self.param_name(p), f"constexpr int {self.param_name(p)} = {v};") for p, v in self.params.items()]
        return decls + [
            ("kir_tid", f"const int kir_tid = {self.dialect.thread_index};"),
            ("kir_lane", f"const int kir_lane = kir_tid % {self.dialect.warp_size};"),
            ("kir_warp", f"const int kir_warp = kir_tid / {self.dialect.warp_size};"),
            ("kir_wl", f"const int kir_wl = (kir_tid / {self.dialect.warp_size}) % 4;  // warp in its warpgroup"),
            ("kir_wg", f"const int kir_wg = kir_tid / {4 * self.dialect.warp_size};"),
            ("kir_smem_raw", f"extern {self.dialect.shared} __align__(1024) unsigned char kir_smem_raw[];"),
            ("kir_smem", "// the swizzle patterns repeat every 1024 bytes: align the base (the launch adds the slack)"),
            (
                "kir_smem",
                "unsigned char* kir_smem = kir_smem_raw + ((1024 - ((uintptr_t)kir_smem_raw & 1023)) & 1023);",
            ),
        ]

    def prologue(self, body: str) -> list[str]:
        keep: list[str] = []
        for name, text in reversed(self.prologue_decls()):
            if re.search(rf"\b{name}\b", body):
                keep.insert(0, text)
                if not text.startswith("//"):
                    body += "\n" + text
        return keep

    def scratch_bytes(self) -> int:
        return self.scratch_max

    def options(self, smem_bytes: int) -> dict:
        # `smem_bytes`: what a launch asks for; `smem_buffers`: the program's own buffers in it
        # (the rest is this backend's exchange space between threads and the alignment slack)
        return {"smem_bytes": smem_bytes, "smem_buffers": self.scratch_base, "threads": self.threads}

    def bind_arguments(self) -> tuple[list[ArgInfo], list[str]]:
        """The tensors as typed pointers and the shape symbols as ints: (args, signature)."""
        args: list[ArgInfo] = []
        sig: list[str] = []
        for name, v in self.kernel.args:
            t = v.type
            assert isinstance(t, GlobalType)
            cname = identifier(name, CXX_RESERVED, "t_")
            self.used.add(cname)
            shape = shape_of(t)
            if t.strides.data:
                strides = tuple(s.data for s in t.strides.data)
            else:
                strides = tuple(sx.fold(_product(shape[k + 1 :])) for k in range(len(shape)))
            self.globals[v] = GlobalArg(cname, t.dtype.data, shape, strides)
            sig.append(f"{'' if t.is_out else 'const '}{self.c.ctype(t.dtype.data)}* {cname}")
            args.append(ArgInfo(name, t.dtype.data, shape, t.is_out))
        sig += [f"const int {self.symbol_name(s)}" for s in self.shape_symbols]
        self.used.update(self.symbol_name(s) for s in self.shape_symbols)
        self.used.update(self.param_name(p) for p in self.params)
        return args, sig

    def generate(self) -> Lowered:
        """The kernel's source: helpers, signature, prologue and body, with the line map."""
        kernel = self.kernel
        entry = identifier(kernel.kernel_name, CXX_RESERVED)
        args, sig = self.bind_arguments()
        self.plan()
        self.plan_resident()
        body = self.w
        body.indent()
        self.emit_body()
        self.finish()
        body.dedent()
        sig += self.extra_params()
        prologue = self.prologue("\n".join(body.lines))
        out = SourceWriter()
        # the file's name only: generated source must not depend on where the checkout lives
        source_name = self.program.file.replace("\\", "/").rsplit("/", 1)[-1]
        out.line(f"// {kernel.kernel_name}: generated by KIR's {self.dialect.name} backend from {source_name}")
        for h in self.dialect.headers:
            out.line(f"#include <{h}>")
        for text in self.helpers():
            for line in text.strip("\n").split("\n"):
                out.line(line)
        out.line("")
        out.line(f"{self.dialect.kernel_qualifier} void __launch_bounds__({self.threads}, 1) {entry}(", kernel)
        for k, s in enumerate(sig):
            out.line(f"    {s}{',' if k < len(sig) - 1 else ') {'}", kernel)
        for line in prologue:
            out.line("    " + line, kernel)
        base = len(out.lines)
        out.lines += body.lines
        out.spans.update({n + base: s for n, s in body.spans.items()})
        out.line("}", kernel)
        smem = self.scratch_base + self.scratch_bytes()
        smem_bytes = smem + 1024 if smem else 0  # the slack of the 1024-byte alignment
        return Lowered(
            backend=self.dialect.name,
            source=out.text(),
            entry=entry,
            program=self.program,
            params=dict(self.params),
            args=args,
            shape_symbols=list(self.shape_symbols),
            grid=tuple(g.data for g in kernel.grid.data),
            num_warps=self.threads // 32,
            options=self.options(smem_bytes),
            line_spans=out.spans,
        )


def _product(dims) -> sx.SymExpr:
    out: sx.SymExpr = sx.Int(1)
    for d in dims:
        out = sx.Bin("*", out, d)
    return out
