"""What the dataflow rules share: the memory each op reads and writes (`Ref`, `reads`,
`writes`), the kernel argument a memory value is, and the symbolic index of each dimension of
an access. A helper of the `dataflow_*` rule modules: it registers no rule."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from xdsl.ir import BlockArgument, Operation, SSAValue

from kir import symexpr as sx
from kir.diagnostics import Edit, Span
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.tile import access_shape
from kir.dialect.types import Access, GlobalType, TileType
from verifier.context import Context

# ---- memory operands -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    """One memory operand of an op."""

    op: Operation
    mem: SSAValue
    access: Access
    indices: tuple[SSAValue, ...]
    mask: SSAValue | None
    verb: str

    @property
    def shape(self) -> tuple[sx.SymExpr, ...]:
        return access_shape(self.mem.type, self.access, list(self.indices))

    @property
    def is_gather(self) -> bool:
        return any(isinstance(v.type, TileType) for v in self.indices)


_WRITES: dict[type, Callable[[Any], list[Ref]]] = {
    tl.StoreOp: lambda op: [Ref(op, op.mem, op.access.data, tuple(op.indices), op.mask, "store to")],
    tl.AtomicOp: lambda op: [Ref(op, op.mem, op.access.data, tuple(op.indices), op.mask, f"atomic_{op.fn.data} on")],
    ex.TmaStoreOp: lambda op: [Ref(op, op.dst, op.dst_access.data, tuple(op.dst_indices), None, "tma.store to")],
    ex.TmaLoadOp: lambda op: [Ref(op, op.dst, op.dst_access.data, tuple(op.dst_indices), None, "tma.load into")],
    ex.CpAsyncOp: lambda op: [Ref(op, op.dst, op.dst_access.data, tuple(op.dst_indices), op.mask, "cp.async into")],
}


def _wgmma_reads(op: ex.WgmmaOp) -> list[Ref]:
    a = [] if op.a_in_registers else [Ref(op, op.a, op.a_access.data, tuple(op.a_indices), None, "wgmma reading")]
    return [*a, Ref(op, op.b, op.b_access.data, tuple(op.b_indices), None, "wgmma reading")]


_READS: dict[type, Callable[[Any], list[Ref]]] = {
    tl.LoadOp: lambda op: [Ref(op, op.mem, op.access.data, tuple(op.indices), op.mask, "load from")],
    tl.AtomicOp: _WRITES[tl.AtomicOp],
    ex.TmaLoadOp: lambda op: [Ref(op, op.src, op.src_access.data, tuple(op.src_indices), None, "tma.load from")],
    ex.CpAsyncOp: lambda op: [Ref(op, op.src, op.src_access.data, tuple(op.src_indices), op.mask, "cp.async from")],
    ex.TmaStoreOp: lambda op: [Ref(op, op.src, op.src_access.data, tuple(op.src_indices), None, "tma.store from")],
    ex.WgmmaOp: _wgmma_reads,
}

# Looked up by the op's exact class (KIR's op classes are final): the rules ask at every op, and
# most ops touch no memory.


def writes(op: Operation) -> list[Ref]:
    """The memory an op writes (global tensors and shared buffers)."""
    found = _WRITES.get(type(op))
    return found(op) if found is not None else []


def reads(op: Operation) -> list[Ref]:
    """The memory an op reads."""
    found = _READS.get(type(op))
    return found(op) if found is not None else []


def arg_name(ctx: Context, mem: SSAValue) -> str | None:
    """The kernel argument a memory value is, if it is one."""
    if isinstance(mem, BlockArgument) and isinstance(mem.block.parent_op(), st.KernelOp):
        return ctx.kernel.args[mem.index][0]
    return None


def name_of(v: SSAValue) -> str:
    return v.name_hint or "?"


def index_terms(ctx: Context, ref: Ref, lanes: tuple):
    """The symbolic index of each dimension of an access, its lanes placed at `lanes` (a slice
    adds the lane to its start; a gather's index tiles are taken at the lanes)."""
    sym = ctx.symbolic
    out = []
    if not ref.is_gather:
        axis = 0
        for extent, v in zip(ref.access.dims, ref.indices, strict=True):
            t = sym.value(v)
            if extent is not None:
                t = type(t)(t.expr + lanes[axis], t.tainted, t.why)
                axis += 1
            out.append(t)
        return out
    for v in ref.indices:
        out.append(sym.at(v, lanes))
    return out


# ---- edits the rules offer as fixes ------------------------------------------------------------------


def size_text(ctx: Context, n: int) -> str:
    """A static size as the program would write it: the first parameter of that value, or the
    number."""
    return next((name for name, v in ctx.kernel.params.items() if v == n), str(n))


def factor_text(text: str) -> str:
    """`text` made a factor of a product (parenthesized unless it is a name or a number)."""
    return text if text.replace("_", "").isalnum() else f"({text})"


def line_of(ctx: Context, line: int) -> str | None:
    lines = (ctx.program.source or "").splitlines()
    return lines[line - 1] if 1 <= line <= len(lines) else None


def argument_span(ctx: Context, op: Operation, keyword: str | None, position: int = 0) -> Span | None:
    """The span of the value of `keyword = ...` among the top-level arguments of `op`'s call, or
    (keyword None) of its positional argument at `position`."""
    span, text = ctx.span(op), ctx.text_of(op)
    if span is None or text is None or "(" not in text:
        return None
    args: list[tuple[int, int]] = []
    depth, start = 0, text.index("(") + 1
    for i in range(start - 1, len(text)):
        ch = text[i]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if (ch == "," and depth == 1) or depth == 0:
            args.append((start, i))
            start = i + 1
        if depth == 0:
            break
    positional = []
    for a, b in args:
        piece = text[a:b]
        named = re.match(r"\s*(\w+)\s*=(?!=)\s*", piece)
        lead = len(piece) - len(piece.lstrip())
        if named is None:
            positional.append((a + lead, a + len(piece.rstrip())))
        elif named.group(1) == keyword:
            return Span(span.line, span.col + a + named.end(), span.line, span.col + a + len(piece.rstrip()), span.file)
    if keyword is not None or position >= len(positional):
        return None
    a, b = positional[position]
    return Span(span.line, span.col + a, span.line, span.col + b, span.file)


def access_parts(ctx: Context, op: Operation, name: str) -> list[str] | None:
    """The index texts of the access `name[...]` in `op`'s text, one per dimension."""
    text = ctx.text_of(op)
    found = re.search(rf"(?<![\w.]){re.escape(name)}\[", text or "")
    if text is None or found is None:
        return None
    parts: list[str] = []
    depth, cur = 0, ""
    for ch in text[found.end() :]:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            if depth == 0:
                return [*parts, cur.strip()]
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return None


def renamed_in(ctx: Context, op: Operation, old: str, new: str) -> Edit | None:
    """`old` made `new` in the op's text, where it is written there once as a name (followed by
    `[`: an access)."""
    span, text = ctx.span(op), ctx.text_of(op)
    if span is None or text is None:
        return None
    found = list(re.finditer(rf"(?<![\w.]){re.escape(old)}(?=\[)", text))
    if len(found) != 1:
        return None
    col = span.col + found[0].start()
    return Edit(Span(span.line, col, span.line, col + len(old), span.file), new)


def feeding_ops(value: SSAValue) -> list[Operation]:
    """The ops whose results `value` is computed from (itself included), nearest first, not
    looking into loops and branches."""
    out: list[Operation] = []
    todo, seen = [value], set()
    while todo:
        v = todo.pop(0)
        if v in seen or not isinstance(v.owner, Operation):
            continue
        seen.add(v)
        out.append(v.owner)
        if not isinstance(v.owner, st.ForOp | st.IfOp):
            todo += list(v.owner.operands)
    return out


def scale_of(indices: tuple[SSAValue, ...], counter: Callable[[SSAValue], bool]) -> list[SSAValue]:
    """In the products `counter * size` that the indices are computed from, the sizes."""
    out: list[SSAValue] = []
    for v in indices:
        for op in feeding_ops(v):
            if isinstance(op, tl.BinaryOp) and op.fn.data == "mul":
                if counter(op.lhs) and op.rhs not in out:
                    out.append(op.rhs)
                elif counter(op.rhs) and op.lhs not in out:
                    out.append(op.lhs)
    return out


def same_tensor_type(a: SSAValue, b: SSAValue) -> bool:
    return (
        isinstance(a.type, GlobalType)
        and isinstance(b.type, GlobalType)
        and a.type.shape == b.type.shape
        and a.type.dtype == b.type.dtype
    )


def unwritten_outputs(ctx: Context) -> list[SSAValue]:
    """The `out` tensors that nothing writes."""
    written = {r.mem for op in ctx.kernel.walk() for r in writes(op)}
    return [arg for _, arg in ctx.kernel.args if cast(GlobalType, arg.type).is_out and arg not in written]


def redirected_writes(ctx: Context, output: SSAValue) -> list[Edit]:
    """Edits that send a misdirected write to `output`, a tensor nothing writes: a write of the
    same type into an input, then the last of several writes into one tensor."""
    by_tensor: dict[SSAValue, list[Operation]] = {}
    for op in ctx.kernel.walk():
        for r in writes(op):
            if r.mem is not output and same_tensor_type(r.mem, output) and arg_name(ctx, r.mem):
                by_tensor.setdefault(r.mem, []).append(op)
    inputs = [ops[-1] for mem, ops in by_tensor.items() if not cast(GlobalType, mem.type).is_out]
    repeated = [ops[-1] for mem, ops in by_tensor.items() if cast(GlobalType, mem.type).is_out and len(ops) > 1]
    new = arg_name(ctx, output) or ""
    edits = [renamed_in(ctx, op, arg_name(ctx, writes(op)[0].mem) or "", new) for op in [*inputs, *repeated]]
    return [e for e in edits if e is not None]


def warpgroup_roles(ctx: Context, ref: Ref) -> list[tuple[str, Edit | None]]:
    """A role over whole warpgroups written as warps (`warps(4, ..., 11)`) declared over the
    warpgroups, so that its rank counts warpgroups."""
    out: list[tuple[str, Edit | None]] = []
    ranks = [op for v in ref.indices for op in feeding_ops(v) if isinstance(op, st.RoleRankOp)]
    role = ranks[0].parent_op() if ranks else None
    while role is not None and not isinstance(role, st.RoleOp):
        role = role.parent_op()
    span = ctx.span(role) if role is not None else None
    found = re.search(r"warps\(([\d,\s]+)\)", (line_of(ctx, span.line) or "") if span is not None else "")
    if role is None or found is None:
        return out
    ids = [int(x) for x in found.group(1).split(",") if x.strip()]
    groups = sorted({i // 4 for i in ids})
    if len(ids) != 4 * len(groups) or sorted(ids) != [4 * g + k for g in groups for k in range(4)]:
        return out
    new = f"warpgroups({', '.join(str(g) for g in groups)})"
    out.append((f"declare the role over warpgroups: `{new}`", ctx.replace_in(role, found.group(0), new)))
    return out
