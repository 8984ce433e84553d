"""Fixes of out-of-bounds accesses, written as edits of the source.

The bounds rules (`verifier.rules.bounds`) say where an access leaves its tensor, buffer or
mbarrier array; the edits here are the changes that usually bring it back: a mask over the
access's own indices, an `if` or a grid or a loop bound made one smaller, a slice without the
shift that pushes it past the end, a stage index taken modulo the ring, a rank scaled by its
share. Each writer reads the program's text and gives an edit, or None where the text does not
allow one; the rule offers a few of them to `choose`, which keeps the first that, applied,
removes the diagnostic and adds no error (`verifier.engine.first_fix`), with its hint.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from xdsl.ir import Operation, OpResult, SSAValue

from kir.diagnostics import Edit, Span
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import ScalarType
from kir.program import span_of
from verifier.context import Context
from verifier.engine import first_fix

Option = tuple[str, Edit | tuple[Edit, ...] | None]  # a hint and the edits it makes


def choose(ctx: Context, rule: str, line: int, options: Sequence[Option]) -> tuple[str, tuple[Edit, ...]]:
    """The first option whose edits remove the diagnostic of `rule` at `line` with no new error,
    as (hint, edits); ("", ()) when none does."""
    written = [(hint, (edits,) if isinstance(edits, Edit) else edits) for hint, edits in options if edits]
    unique: list[tuple[str, tuple[Edit, ...]]] = []
    for hint, edits in written:
        if all(edits != e for _, e in unique):
            unique.append((hint, edits))
    found = first_fix(ctx, rule, line, [e for _, e in unique])
    return next(((h, e) for h, e in unique if e == found), ("", ()))


# ---- reading the text ------------------------------------------------------------------------------


def text_at(ctx: Context, v: SSAValue, line: int) -> str | None:
    """How `v` reads on `line`: the text of the expression that makes it there, else its name
    (a loop variable, a value made on a line of its own); None where neither can be read."""
    span = span_of(v.owner) if isinstance(v, OpResult) else None
    if span is not None and span.line == line:
        return ctx.text_of(span)
    return v.name_hint


def atom(text: str) -> str:
    """`text` as an operand of a binary operator: in parentheses unless it is a name, a number
    or a call."""
    call = re.fullmatch(r"[\w.]+(<\w+>)?\((.*)\)", text)
    if re.fullmatch(r"[\w.]+", text) or (call is not None and balanced(call.group(2))):
        return text
    return f"({text})"


def balanced(text: str) -> bool:
    """Whether every bracket of `text` closes inside it (one argument, not the tail of a call)."""
    depth = 0
    for ch in text:
        depth += ch in "(["
        depth -= ch in ")]"
        if depth < 0:
            return False
    return depth == 0


def named_as(ctx: Context, text: str, before: int) -> str | None:
    """The name bound to exactly `text` on a line of its own before line `before`."""
    lines = (ctx.program.source or "").splitlines()[: before - 1]
    binding = re.compile(rf"^\s*([A-Za-z_]\w*)\s*=\s*{re.escape(text)}\s*(#.*)?$")
    found = [m.group(1) for m in map(binding.match, lines) if m is not None]
    return found[-1] if found else None


def replace_all(ctx: Context, at: Operation, old: str, new: str) -> tuple[Edit, ...] | None:
    """Edits that replace every occurrence of `old` in the text of `at` (one line)."""
    span, text = ctx.span(at), ctx.text_of(at)
    if span is None or text is None or old not in text:
        return None
    starts = [m.start() for m in re.finditer(re.escape(old), text)]
    return tuple(
        Edit(Span(span.line, span.col + s, span.line, span.col + s + len(old), span.file), new) for s in starts
    )


# ---- masks ---------------------------------------------------------------------------------------------


def add_to_mask(ctx: Context, op: Operation, bound: str) -> tuple[Edit, str] | None:
    """`op`, a call written on one line, with `bound` (a comparison) added to its mask: `, mask =
    bound` before its closing parenthesis, or `m & bound` for a mask `m` written as its last
    argument; with the mask it writes."""
    span, text = ctx.span(op), ctx.text_of(op)
    if span is None or text is None or not text.endswith(")"):
        return None
    found = re.search(r",\s*mask\s*=\s*", text)
    if found is None:
        return Edit(
            Span(span.line, span.end_col - 1, span.line, span.end_col - 1, span.file), f", mask = {bound}"
        ), bound
    written = text[found.end() : -1].strip()
    if "other" in written or not balanced(written):
        return None
    # `&` binds more loosely than a comparison, more tightly than `^` and `|`
    both = f"({written}) & {bound}" if re.search(r"[|^]", written) else f"{written} & {bound}"
    start = span.col + found.end()
    return Edit(Span(span.line, start, span.line, span.end_col - 1, span.file), both), both


def not_negative(ctx: Context, v: SSAValue, line: int) -> str | None:
    """`i >= 0` for the index `v`, written `offs >= c` for an index `offs - c`."""
    owner = v.owner if isinstance(v, OpResult) else None
    if isinstance(owner, tl.BinaryOp) and owner.fn.data == "sub" and isinstance(owner.rhs.owner, tl.ConstOp):
        lhs = text_at(ctx, owner.lhs, line)
        if lhs is not None:
            return f"{lhs} >= {owner.rhs.owner.value.data}"
    text = text_at(ctx, v, line)
    return f"{text} >= 0" if text is not None else None


def lanes_of_slice(start: str, extent: str, lane: int, lanes: int) -> str:
    """The indices of a block slice `start : start + extent` as a tile laid out for the access's
    `lanes` dimensions (`(m0 + arange(0, BM))[:, None]`)."""
    tile = f"{start} + arange(0, {extent})" if start != "0" else f"arange(0, {extent})"
    if lanes == 1:
        return tile
    axes = ", ".join(":" if i == lane else "None" for i in range(lanes))
    return f"{atom(tile)}[{axes}]"


def unused_flags(op: Operation) -> list[str]:
    """The names of i1 scalars computed before `op` in its block and used nowhere: a condition
    written for a mask and not given to it (`more = k + 1 < K / BK`)."""
    block = op.parent_block()
    if block is None:
        return []
    out = []
    for other in block.ops:
        if other is op:
            break
        for r in other.results:
            if isinstance(r.type, ScalarType) and r.type.dtype.data == "i1" and r.name_hint and not r.uses:
                out.append(r.name_hint)
    return out


# ---- the launch and the loops -------------------------------------------------------------------------


def grid_one_fewer(ctx: Context) -> Iterator[tuple[int, Edit]]:
    """For each axis of the grid written `E + 1`: the axis, and the edit that makes it `E`."""
    span = ctx.program.clause_spans.get("grid")
    text = ctx.text_of(span)
    if span is None or text is None:
        return
    axis, depth = 0, 0
    for i, ch in enumerate(text):
        depth += (ch in "([") - (ch in ")]")
        axis += ch == "," and depth == 0
        end = re.match(r"\s*\+\s*1\s*(,|$)", text[i:]) if depth == 0 and ch == " " else None
        if end is not None:
            stop = i + end.end() - len(end.group(1))
            yield axis, Edit(Span(span.line, span.col + i, span.line, span.col + stop, span.file), "")


def program_ids(v: SSAValue, depth: int = 12) -> Iterator[tl.ProgramIdOp]:
    """The program ids that the index `v` is computed from."""
    owner = v.owner if isinstance(v, OpResult) else None
    if owner is None or depth == 0:
        return
    if isinstance(owner, tl.ProgramIdOp):
        yield owner
        return
    if isinstance(owner, tl.BinaryOp | tl.CastOp | tl.ExpandDimsOp | tl.BroadcastOp):
        for operand in owner.operands:
            yield from program_ids(operand, depth - 1)


def other_axes(ctx: Context, v: SSAValue) -> Iterator[tuple[str, Edit]]:
    """`program_id(b)` for `program_id(a)` in the computation of `v`, for each other axis b of
    the grid (an index taken from the wrong axis), with the text it writes."""
    axes = len(ctx.kernel.grid.data)
    for pid in program_ids(v):
        a = pid.axis.data
        if ctx.text_of(span_of(pid)) != f"program_id({a})":
            continue
        for b in range(axes):
            if b != a and (edit := ctx.replace_in(span_of(pid), f"program_id({a})", f"program_id({b})")) is not None:
                yield f"program_id({b})", edit


def loops_around(op: Operation) -> Iterator[st.ForOp]:
    """The loops around `op`, innermost first."""
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, st.ForOp):
            yield parent
        parent = parent.parent_op()


def ifs_around(op: Operation) -> Iterator[st.IfOp]:
    """The `if`s around `op`, innermost first."""
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, st.IfOp):
            yield parent
        parent = parent.parent_op()


# ---- indices -------------------------------------------------------------------------------------------


def shift_of(ctx: Context, start: SSAValue, line: int) -> tuple[str, str] | None:
    """A slice start written `a + s` on `line`: the texts of `a` and of the shift `s`."""
    owner = start.owner if isinstance(start, OpResult) else None
    span = span_of(owner) if owner is not None else None
    if not isinstance(owner, tl.BinaryOp) or owner.fn.data != "add" or span is None or span.line != line:
        return None
    base, shift = text_at(ctx, owner.lhs, line), text_at(ctx, owner.rhs, line)
    if base is None or shift is None:
        return None
    return base, shift


def reshifted(ctx: Context, op: Operation, start: SSAValue, new_shift: str | None) -> tuple[str, Edit] | None:
    """The slice `a + s : a + s + E` of `op` written `a : a + E` (no shift) or `a + t : a + t + E`,
    with the new start; None where the slice is not written that way."""
    span = ctx.span(op)
    shifted = shift_of(ctx, start, span.line) if span is not None else None
    if shifted is None:
        return None
    base, shift = shifted
    old = f"{base} + {shift} : {base} + {shift} + "
    new_start = base if new_shift is None else f"{base} + {new_shift}"
    edit = ctx.replace_in(op, old, f"{new_start} : {new_start} + ")
    return (new_start, edit) if edit is not None else None


def shift_rounded(ctx: Context, op: Operation, start: SSAValue, multiple: int) -> Iterator[tuple[str, Edit]]:
    """A block start `a + c` (c a constant) with c rounded up to a multiple of `multiple`, then
    with c dropped: in the slice of `op` or where the start is named; with the new start."""
    owner = start.owner if isinstance(start, OpResult) else None
    if not isinstance(owner, tl.BinaryOp) or owner.fn.data != "add" or not isinstance(owner.rhs.owner, tl.ConstOp):
        return
    shift = owner.rhs.owner.value.data
    if not shift.isdigit() or multiple < 2:
        return
    up = -(-int(shift) // multiple) * multiple
    at, made = ctx.span(op), span_of(owner)
    for new in (str(up), None):
        if at is not None and made is not None and made.line == at.line:
            found = reshifted(ctx, op, start, new)
            if found is not None:
                yield found
        elif (base := text_at(ctx, owner.lhs, made.line if made else 0)) is not None:
            edit = ctx.replace_in(made, f"{base} + {shift}", base if new is None else f"{base} + {new}")
            if edit is not None:
                yield edit.text, edit


def unshifted_index(ctx: Context, v: SSAValue, line: int) -> str | None:
    """A scalar index written `i + c` or `i - c` with a constant c: the text of `i`."""
    owner = v.owner if isinstance(v, OpResult) else None
    if not isinstance(owner, tl.BinaryOp) or owner.fn.data not in ("add", "sub"):
        return None
    if not isinstance(owner.rhs.owner, tl.ConstOp):
        return None
    return text_at(ctx, owner.lhs, line)


def replace_index(ctx: Context, op: Operation, mem: str, old: str, new: str) -> Edit | None:
    """`mem[old` made `mem[new` in the text of `op`: the first index of an access."""
    return ctx.replace_in(op, f"{mem}[{old}", f"{mem}[{new}") or ctx.replace_in(op, f"{mem}[({old})", f"{mem}[{new}")


def stage_options(ctx: Context, op: Operation, mem: str, index: SSAValue, stages: str) -> list[tuple[str, Edit | None]]:
    """Indices of a ring of `stages` for the out-of-range stage or barrier index `index` of
    `op`: the ring index already named (`s` for `s = k % S`), the index without its shift, the
    index modulo the ring. Each with the text it writes."""
    span = ctx.span(op)
    if span is None:
        return []
    line = span.line
    old = text_at(ctx, index, line)
    if old is None:
        return []
    owner = index.owner if isinstance(index, OpResult) else None
    dividend = owner.lhs if isinstance(owner, tl.BinaryOp) and owner.fn.data == "rem" else index
    counted = text_at(ctx, dividend, line) or old
    ring = f"{atom(counted)} % {atom(stages)}"
    out: list[tuple[str, Edit | None]] = []
    if (name := named_as(ctx, ring, line)) is not None and name != old:
        out.append((name, replace_index(ctx, op, mem, old, name)))
    if (base := unshifted_index(ctx, index, line)) is not None:
        out.append((base, replace_index(ctx, op, mem, old, base)))
    if isinstance(owner, tl.ConstOp) and stages.isdigit() and int(stages) > 0:
        wrapped = str(int(owner.value.data) % int(stages))
        out.append((wrapped, replace_index(ctx, op, mem, old, wrapped)))
    else:
        out.append((ring, replace_index(ctx, op, mem, old, ring)))
    return out


def rank_scaled(ctx: Context, at: Operation, units: int) -> tuple[str, tuple[Edit, ...]] | None:
    """`role_rank() * X` in the text of `at` made `role_rank() * (X / units)`: each rank's share
    of X, or the name already bound to that product; with the text it writes."""
    span, text = ctx.span(at), ctx.text_of(at)
    if span is None or text is None or units < 2:
        return None
    found = re.search(r"role_rank\(\)\s*\*\s*(\([^()]*\)|[\w.]+)", text)
    if found is None:
        return None
    scaled = f"role_rank() * ({found.group(1)} / {units})"
    name = named_as(ctx, scaled, span.line)
    new = name or scaled
    edits = replace_all(ctx, at, found.group(0), new)
    return (new, edits) if edits else None


def rounded_param(ctx: Context, name: str, multiple: int) -> tuple[str, Edit] | None:
    """The default of the parameter `name` (`BN = 2`) rounded up to a multiple of `multiple`."""
    span = ctx.program.param_spans.get(name)
    text = ctx.text_of(span)
    found = re.fullmatch(rf"{re.escape(name)}\s*=\s*(\d+)", text or "")
    if span is None or found is None or multiple < 2:
        return None
    value = int(found.group(1))
    up = -(-value // multiple) * multiple
    if up == value:
        return None
    return f"{name} = {up}", Edit(span, f"{name} = {up}")
