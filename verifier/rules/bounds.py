"""Bounds and alignment, proved with z3 under the `where` assumptions for every program id,
loop iteration, role rank and lane.

Each access becomes one claim per indexed dimension, `enclosing ifs & mask -> 0 <= index <
extent`, with the index a term over the access's lanes (a block slice `start : start + E`
contributes `start + lane`, a gather the index tile's value at the lane). A claim that fails
with only known values is an error with the counterexample (shape values, program ids, loop
variables, role rank, lane). When the index or the mask depends on something the verifier
cannot follow (data loaded from memory, values carried by a loop), a failing claim is only
*unproven*: a `bounds.unproven` warning that names that value.

An error is reported where the fix goes. A mask that compares the very index it lets through is
blamed (`offs <= N`), and so is a mask taken from another access under a new name
(`out_mask = in_mask`). Where the access itself is right, its cause is blamed too, the access
keeping its error with the cause related: a loop whose last trip alone starts its block past the
end (one trip too many), a `where` clause that states divisibility for the other shapes but not
for the one an unmasked block relies on, an offset that scales a role's rank past its share.

A hint is an edit of the source, offered only where it holds (`bounds_fixes.choose`): the cause's
fix for the cause and for the access it breaks; for the access alone, the `if`, loop bound, grid
or program id that lets it out, else a mask over its own indices; a stage or barrier index taken
modulo its ring; an index the verifier cannot bound clamped or masked. Where no edit holds, the
diagnostic has no hint.

Rules: `bounds.global-access` (load, store, atomic and cp.async lanes of global tensors),
`bounds.tma-box` (the start of a TMA box), `bounds.smem-access` (shared-buffer views and
lanes), `bounds.mbarrier-index`, `bounds.gather-index` (the index tile of a `gather` against
its source's axis), `bounds.alignment` (what the TMA requires of a tensor and a box),
`bounds.misaligned-access` (a block access whose start always breaks the tensor's declared
`align`), and `bounds.unproven`; `bounds_coverage` and `bounds_overflow` hold
`bounds.coverage` (a masked dimension that nothing reaches to its end) and
`bounds.index-overflow` (an index computed through an i32 product that wraps).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import cast

import z3
from xdsl.ir import Operation, OpResult, SSAValue

from kir import symexpr as sx
from kir.diagnostics import Diagnostic, Edit, Span
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.tile import access_shape
from kir.dialect.types import Access, GlobalType, MBarrierType, ScalarType, SmemType, TileType, dtype_of, shape_of
from kir.dtypes import DTYPES
from kir.program import span_of
from kir.where import where_span
from verifier.context import Context
from verifier.registry import rule
from verifier.rules import bounds_fixes as fx
from verifier.rules.bounds_fixes import Option
from verifier.symbolic import ZERO, Term, format_counterexample, made_once, readable

UNPROVEN = "bounds.unproven"
# `true` is one AST of the context: a condition is trivially true when it is that AST (z3's
# `is_true` asks the same through several wrappers, a tenth of this rule on a long kernel)
_TRUE = z3.BoolVal(True)
_TRUE_ID = _TRUE.get_id()


# ---- accesses -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemRef:
    """One memory operand of an op: what it indexes, how, and under which mask."""

    op: Operation
    mem: SSAValue
    access: Access
    indices: tuple[SSAValue, ...]
    mask: SSAValue | None
    verb: str  # "load from", "store to", ...
    slot: str  # tells two operands of one op apart in lane names


_VIEWS = (tl.CastOp, tl.ExpandDimsOp, tl.BroadcastOp)


def _plain(v: SSAValue) -> SSAValue:
    while isinstance(v, OpResult) and isinstance(v.owner, _VIEWS):
        v = v.owner.operand
    return v


def _balanced(text: str) -> bool:
    """Whether every bracket of `text` closes inside it (one argument, not the tail of a call)."""
    depth = 0
    for ch in text:
        depth += ch in "(["
        depth -= ch in ")]"
        if depth < 0:
            return False
    return depth == 0


def _compares(mask: SSAValue, index: SSAValue | None, depth: int) -> bool:
    """`mask` is made of comparisons (joined by `&`), one of which compares `index` itself."""
    if index is None or depth == 0:
        return False
    mask = _plain(mask)
    owner = mask.owner if isinstance(mask, OpResult) else None
    if isinstance(owner, tl.CompareOp):
        return any(_plain(v) is _plain(index) for v in owner.operands)
    if isinstance(owner, tl.BinaryOp) and owner.fn.data == "and":
        return _compares(owner.lhs, index, depth - 1) or _compares(owner.rhs, index, depth - 1)
    return False


def global_refs(op: Operation) -> list[MemRef]:
    """Accesses of global tensors that are bounds-checked lane by lane (not TMA boxes)."""
    if isinstance(op, tl.LoadOp | tl.StoreOp | tl.AtomicOp) and isinstance(op.mem.type, GlobalType):
        verb = {tl.LoadOp: "load from", tl.StoreOp: "store to", tl.AtomicOp: "atomic on"}[type(op)]
        return [MemRef(op, op.mem, op.access.data, tuple(op.indices), op.mask, verb, "m")]
    if isinstance(op, ex.CpAsyncOp):
        return [MemRef(op, op.src, op.src_access.data, tuple(op.src_indices), op.mask, "cp.async from", "src")]
    return []


def tma_refs(op: Operation) -> list[MemRef]:
    """The global box of a TMA copy."""
    if isinstance(op, ex.TmaLoadOp):
        return [MemRef(op, op.src, op.src_access.data, tuple(op.src_indices), None, "tma.load from", "src")]
    if isinstance(op, ex.TmaStoreOp):
        return [MemRef(op, op.dst, op.dst_access.data, tuple(op.dst_indices), None, "tma.store to", "dst")]
    return []


def smem_refs(op: Operation) -> list[MemRef]:
    """Accesses of shared buffers (views and lanes)."""
    if isinstance(op, tl.LoadOp | tl.StoreOp) and isinstance(op.mem.type, SmemType):
        verb = "load from" if isinstance(op, tl.LoadOp) else "store to"
        return [MemRef(op, op.mem, op.access.data, tuple(op.indices), op.mask, verb, "m")]
    if isinstance(op, ex.TmaLoadOp | ex.CpAsyncOp):
        what = "tma.load into" if isinstance(op, ex.TmaLoadOp) else "cp.async into"
        return [MemRef(op, op.dst, op.dst_access.data, tuple(op.dst_indices), None, what, "dst")]
    if isinstance(op, ex.TmaStoreOp):
        return [MemRef(op, op.src, op.src_access.data, tuple(op.src_indices), None, "tma.store from", "src")]
    if isinstance(op, ex.WgmmaOp):
        a = (
            []
            if op.a_in_registers
            else [MemRef(op, op.a, op.a_access.data, tuple(op.a_indices), None, "wgmma reading", "a")]
        )
        return [*a, MemRef(op, op.b, op.b_access.data, tuple(op.b_indices), None, "wgmma reading", "b")]
    return []


def name_of(v: SSAValue) -> str:
    return v.name_hint or "?"


@dataclass
class Dim:
    axis: int
    index: Term
    extent: z3.ArithRef
    extent_text: str
    index_value: SSAValue
    slice_extent: sx.SymExpr | None


@dataclass(frozen=True)
class Cause:
    """What makes an access go out of bounds when the access itself is not what to change."""

    at: Operation | Span
    message: str
    counterexample: dict
    label: str  # the access's related note
    fixes: tuple[Option, ...] = ()  # hints with their edits, the likeliest first


def _divisibility(w: sx.SymExpr) -> str | None:
    """The shape symbol X of a `where X % c == 0` clause."""
    if isinstance(w, sx.Bin) and w.op == "==" and isinstance(w.lhs, sx.Bin) and w.lhs.op == "%":
        if isinstance(w.lhs.lhs, sx.Sym) and isinstance(w.rhs, sx.Int) and w.rhs.value == 0:
            return w.lhs.lhs.name
    return None


# ---- the analysis, shared by the rules ----------------------------------------------------------------


@dataclass
class Bounds:
    """Runs each kind of check once per verification; each rule takes its share, and
    `bounds.unproven` takes the warnings of all of them."""

    ctx: Context
    done: dict[str, list[Diagnostic]] = field(default_factory=dict)
    _inside: dict[tuple[int, int], bool] = field(default_factory=dict)  # see `_evidently_inside`

    @property
    def sym(self):
        return self.ctx.symbolic

    def get(self, kind: str) -> list[Diagnostic]:
        if kind not in self.done:
            self.done[kind] = list(getattr(self, f"_{kind}")())
        return self.done[kind]

    # ---- helpers ------------------------------------------------------------------------------

    def tag(self, ref: MemRef) -> str:
        # Every claim here is about one access alone, so accesses of one shape may share lane
        # variables: the terms of values they share (`cols`, `mask`) are then built once, and
        # the same claim about another tensor of the same shape is the same z3 term. (A long
        # kernel made a fresh copy of every index and mask term for each of its accesses.)
        return f"in{ref.slot}"

    def dims(self, ref: MemRef, starts_only: bool = False) -> tuple[tuple, list[Dim]]:
        """The lanes of the access and one `Dim` per indexed dimension (with `starts_only`,
        slices contribute their start: the TMA box corner)."""
        shape = access_shape(ref.mem.type, ref.access, list(ref.indices))
        lanes = () if starts_only else self.sym.lanes(shape, self.tag(ref))
        mem_shape = shape_of(ref.mem.type)
        out: list[Dim] = []
        lane = 0
        for axis, (extent, idx) in enumerate(zip(ref.access.dims, ref.indices, strict=True)):
            if extent is not None:
                start = self.sym.value(idx)
                if starts_only:
                    term = start
                else:
                    term = Term(start.expr + lanes[lane], start.tainted, start.why)
                lane += 1
            elif isinstance(idx.type, TileType):
                term = self.sym.at(idx, lanes)
            else:
                term = self.sym.value(idx)
            out.append(Dim(axis, term, self.sym.sym(mem_shape[axis]), str(mem_shape[axis]), idx, extent))
        return lanes, out

    def conditions(self, ref: MemRef, lanes: tuple) -> list[Term]:
        conds = [self.sym.path(ref.op)]
        if ref.mask is not None:
            conds.append(self.sym.at(ref.mask, lanes))
        return [c for c in conds if c.expr.get_id() != _TRUE_ID]

    def cex(self, claim, assume, evaluate=None) -> dict | None:
        return self.sym.counterexample(claim, assume, evaluate)

    def readable(self, cex: dict) -> dict:
        shown = {k: v for k, v in cex.items() if k not in ("index", "extent", "start", "offset", "stride")}
        return readable(shown, len(self.ctx.kernel.grid.data))

    def in_bounds(
        self, ref: MemRef, dims: list[Dim], conds: list[Term], rule_id: str, say, fixes, unproven_fixes=None
    ) -> Iterator[Diagnostic]:
        """The claims `conds -> 0 <= index < extent`, all at once first (the common case is
        one solver call per access), then dimension by dimension to explain a failure.
        `say(d, fault)` words the error ("... can go out of bounds in dimension 0: index 8 >=
        N = 8"); `fixes(d, upper)` the fixes to offer, hints with their edits (`bounds_fixes.choose`
        keeps the first that holds)."""
        if not dims:
            return
        # A dimension whose index is evidently inside a constant extent (`y[3, ...]`, `cols`
        # with a static arange) holds whatever the rest: it is left out of the solver's claims,
        # which are then the same for accesses that differ only there (a long kernel's stores
        # to planes 0, 1, 2, ... of one output), and answered once.
        dims_asked = [d for d in dims if not self._evidently_inside(d)]
        if not dims_asked:
            return
        assume = [c.expr for c in conds]
        every = self._every_inside(dims_asked)
        if self.cex(every, assume) is None:
            return
        cond_taint = next((c for c in conds if c.tainted), None)
        for d in dims_asked:
            found = None
            for upper in (True, False):
                claim = d.index.expr < d.extent if upper else d.index.expr >= 0
                got = self.cex(claim, assume, {"index": d.index.expr, "extent": d.extent})
                if got is not None:
                    found = (upper, got)
                    break
            if found is None:
                continue
            upper, got = found
            tainted = d.index if d.index.tainted else cond_taint
            if "unknown" in got or tainted is not None:
                why = got["unknown"] if "unknown" in got else f"it depends on {cast(Term, tainted).why}"
                # a value of an axis the grid does not have is `types.axis`'s error, not a bound to add
                bounded = (
                    [] if "axis the grid does not have" in why else (unproven_fixes or self._unproven_fixes)(ref, d)
                )
                hint, edits = self._choose(UNPROVEN, ref.op, bounded)
                yield self.ctx.report(
                    ref.op,
                    f"cannot prove that the {ref.verb} `{name_of(ref.mem)}` stays in bounds in dimension "
                    f"{d.axis} (extent {d.extent_text}): {why}",
                    hint,
                    severity="warning",
                    rule=UNPROVEN,
                    edits=edits,
                )
                continue
            shown = self.readable(got)
            index, extent = got.get("index"), got.get("extent")
            if upper:
                bound = d.extent_text if d.extent_text == str(extent) else f"{d.extent_text} = {extent}"
                fault = f"{index} >= {bound}"
            else:
                fault = f"{index} < 0"
            when = f"for {format_counterexample(shown)}" if shown else "for every launch"
            guard = self._guard(ref, d)
            alias = self._alias(ref)
            if alias is not None:  # the mask is another access's, taken under a new name: blame the naming
                span, name, own = alias
                yield self.ctx.report(
                    span,
                    f"`{name}` is `{name_of(cast(SSAValue, ref.mask))}`, a mask made for other indices: it lets the "
                    f"{ref.verb} `{name_of(ref.mem)}` out of bounds in dimension {d.axis}: index {fault}, {when}",
                    f"give the {ref.verb.split()[0]} a mask over its own indices: `{name} = {own}`"
                    if own
                    else f"make `{name}` a mask over the {ref.verb.split()[0]}'s own indices",
                    related=[(ref.op, "the access it guards")]
                    + ([(ref.mask.owner, "the mask it names")] if isinstance(ref.mask, OpResult) else []),
                    counterexample=shown,
                    rule=rule_id,
                    severity="error",
                    edits=[
                        self.ctx.replace_in(span, f"= {name_of(cast(SSAValue, ref.mask))}", f"= {own}") if own else None
                    ],
                )
                continue
            if guard is not None:  # the access is guarded, and the guard lets this lane through: blame it
                yield self.ctx.report(
                    guard,
                    f"this mask lets the {ref.verb} `{name_of(ref.mem)}` out of bounds in dimension {d.axis}: "
                    f"index {fault}, {when}",
                    f"make the mask false wherever the index in dimension {d.axis} is "
                    + (f"{d.extent_text} or more" if upper else "negative"),
                    related=[(ref.op, "the access it guards")],
                    counterexample=shown,
                    rule=rule_id,
                    severity="error",
                    edits=[self._guard_edit(guard, d) if upper else None],
                )
                continue
            cause = self._cause(ref, d, assume) if upper else None
            masked = self._mask_edit(ref, d) if upper and cause is None else None
            if cause is not None:  # the loop bound, the `where` or a per-rank offset: blame it too
                hint, edits = self._choose(rule_id, cause.at, cause.fixes)
                yield self.ctx.report(
                    cause.at,
                    cause.message,
                    hint,
                    related=[(ref.op, "the access that goes out of bounds")],
                    counterexample=cause.counterexample,
                    rule=rule_id,
                    severity="error",
                    edits=edits,
                )
                at = self.ctx.span(cause.at)
                # the access is fixed where its cause is, with the same edit
                hint, edits = self._choose(
                    rule_id, ref.op, [(f"{hint} (line {at.line if at else '?'}, the cause)", edits)] if edits else []
                )
            elif masked is not None:
                hint, edits = f"mask the {ref.verb.split()[0]} with `{masked[1]}`", (masked[0],)
            else:
                hint, edits = self._choose(rule_id, ref.op, fixes(d, upper))
            yield self.ctx.report(
                ref.op,
                f"{say(d, fault)}, {when}",
                hint,
                related=[(cause.at, cause.label)] if cause is not None else [],
                counterexample=shown,
                rule=rule_id,
                severity="error",
                edits=edits,
            )

    def _guard(self, ref: MemRef, d: Dim) -> Operation | None:
        """The op that makes an access's mask, where the mask compares the very index that goes
        out of bounds (`mask = offs <= N` for `x[offs]`: the comparison is what to fix) and
        stands on a line of its own. An index the mask does not compare (`x[offs - 1]` under
        `offs < N`, a constant plane) is blamed at the access, as is a mask written in it."""
        if ref.mask is None or not isinstance(ref.mask, OpResult):
            return None
        owner = ref.mask.owner
        if not isinstance(owner, tl.CompareOp | tl.BinaryOp) or not _compares(ref.mask, d.index_value, 8):
            return None
        at, by = self.ctx.span(owner), self.ctx.span(ref.op)
        if at is None or by is None or at.line == by.line:
            return None
        return owner

    def _guard_edit(self, guard: Operation, d: Dim) -> Edit | None:
        """The guard's comparison of the index with the extent, made strict (`offs <= N` ->
        `offs < N`) or made against the extent it bounds (`cols < M` -> `cols < N`), where the
        guard's text holds that comparison once."""
        value = d.index_value
        while not value.name_hint and isinstance(value.owner, tl.ExpandDimsOp | tl.BroadcastOp):
            value = value.owner.operand
        name, text = value.name_hint, self.ctx.text_of(guard)
        if not name or text is None:
            return None
        for old in (
            f"{name} <= {d.extent_text}",
            f"{name}[None, :] <= {d.extent_text}",
            f"{name}[:, None] <= {d.extent_text}",
        ):
            edit = self.ctx.replace_in(guard, old, old.replace("<=", "<"))
            if edit is not None:
                return edit
        found = re.search(rf"\b{re.escape(name)}(\[[^\]]*\])?\s*<\s*([A-Za-z_]\w*)\b", text)
        if found is None or found.group(2) == d.extent_text:
            return None
        wrong = found.group(0)
        return self.ctx.replace_in(guard, wrong, wrong[: -len(found.group(2))] + d.extent_text)

    def _alias(self, ref: MemRef) -> tuple[Span, str, str] | None:
        """Where the access names its mask by an alias of another mask (`out_mask = in_mask`,
        then `mask = out_mask`): the alias's line, its name, and a mask over the access's own
        indices (`(cols[:, None] < N) & (rows[None, :] < M)`, empty when it cannot be written).
        An assignment of a name to a name leaves no op behind, so its line is read from the
        text: the last line before the access that binds the name."""
        source, at = self.ctx.program.source, self.ctx.span(ref.op)
        if source is None or at is None or ref.mask is None or at.line != at.end_line:
            return None
        lines = source.splitlines()
        text = lines[at.line - 1][at.col - 1 : at.end_col - 1]
        named = re.search(r"\bmask\s*=\s*([A-Za-z_]\w*)\s*[,)]", text)
        if named is None or named.group(1) == name_of(ref.mask):
            return None
        name = named.group(1)
        binding = re.compile(rf"^(\s*){name}\s*=\s*{re.escape(name_of(ref.mask))}\s*(#.*)?$")
        for line in range(at.line - 1, 0, -1):
            found = binding.match(lines[line - 1])
            if found is not None:
                col = len(found.group(1)) + 1
                span = Span(line, col, line, len(lines[line - 1].split("#", 1)[0].rstrip()) + 1, at.file)
                return span, name, self._own_mask(ref)
            if re.match(rf"^\s*{name}\s*=", lines[line - 1]):
                return None  # bound to something else
        return None

    def _mask_edit(self, ref: MemRef, d: Dim) -> tuple[Edit, str] | None:
        """For a plain load or store written on one line: the edit that masks it by its own
        indices (`, mask = offs < N` before its closing parenthesis, or `m & (offs < N)` for a
        mask `m` that misses a dimension), and the mask it writes. None where the text does not
        allow it."""
        if not isinstance(ref.op, tl.LoadOp | tl.StoreOp) or not isinstance(d.index_value.type, TileType):
            return None  # (a scalar index, a row, is out of bounds for every lane: no mask helps)
        at, text = self.ctx.span(ref.op), self.ctx.text_of(ref.op)
        own = self._own_mask(ref)
        if at is None or text is None or not own or not text.endswith(")"):
            return None
        if ref.mask is None:
            return Edit(Span(at.line, at.end_col - 1, at.line, at.end_col - 1, at.file), f", mask = {own}"), own
        # a mask that misses a dimension: kept, and the access's own bounds added to it, where it
        # is the call's last argument and `other` is not written
        found = re.search(r",\s*mask\s*=\s*", text)
        if found is None or "other" in text[found.end() :]:
            return None
        written = text[found.end() : -1].strip()
        if not _balanced(written):
            return None
        both = f"({written}) & ({own})" if " " in written else f"{written} & ({own})"
        start = at.col + found.end()
        return Edit(Span(at.line, start, at.line, at.end_col - 1, at.file), both), both

    def _own_mask(self, ref: MemRef) -> str:
        """`(i0 < E0) & (i1 < E1)` over the access's index tiles, from their text."""
        parts = []
        for idx, extent in zip(ref.indices, shape_of(ref.mem.type), strict=True):
            if not isinstance(idx.type, TileType):
                continue
            owner = idx.owner
            span = self.ctx.span(owner) if isinstance(owner, Operation) else None
            access = self.ctx.span(ref.op)
            if span is not None and access is not None and span.line != access.line and idx.name_hint:
                parts.append(f"{idx.name_hint} < {extent}")  # named on a line of its own
                continue
            text = self.ctx.text_of(span)
            if text is None:
                return ""
            parts.append(f"{text} < {extent}")
        if not parts:
            return ""
        return " & ".join(f"({p})" for p in parts) if len(parts) > 1 else parts[0]

    def _cause(self, ref: MemRef, d: Dim, assume: list) -> Cause | None:
        """What to change, when it is not the access itself: a loop that runs one trip past the
        end, a `where` clause that lacks the divisibility the block access relies on, or an
        offset that scales a role's rank past the buffer (see each helper). Asked only once an
        access is known to fail, so it costs nothing on a program in bounds."""
        return self._loop_cause(ref, d, assume) or self._where_cause(ref, d, assume) or self._rank_cause(ref, d, assume)

    def _inside_dim(self, d: Dim) -> z3.BoolRef:
        return z3.And(d.index.expr >= 0, d.index.expr < d.extent)

    def _at_lane_zero(self, e: z3.ExprRef) -> z3.ArithRef:
        """`e` with every lane at 0: the first element of the access's block."""
        lanes = [(z3.Int(n), ZERO) for n in self.sym.variables(e) if n.startswith("lane")]
        return cast(z3.ArithRef, z3.substitute(e, *lanes) if lanes else e)

    def _loop_cause(self, ref: MemRef, d: Dim, assume: list) -> Cause | None:
        """A loop whose last trip is the only one out of bounds, and whose access starts that
        trip's block past the end: the loop runs one trip too many (`0 .. n + 1`). A block
        that starts inside and runs past the end (a partial last tile) needs a mask instead,
        and an access that looks ahead of its iteration (`(k + 1) * BK`, a prefetch) is the one
        to fix: its first trip does not start at the beginning of the dimension."""
        info = self.ctx.info_of.get(ref.op)
        if info is None or d.index.tainted:
            return None
        names = self.sym.variables(d.index.expr)
        start = self._at_lane_zero(d.index.expr)
        for loop in reversed(info.loops):
            k = self.sym.value(loop.body.block.args[0])
            lo, hi, step = (self.sym.value(v) for v in (loop.lower, loop.upper, loop.step))
            if any(t.tainted for t in (k, lo, hi, step)) or k.expr.decl().name() not in names:
                continue
            if self.cex(self._inside_dim(d), [*assume, k.expr + step.expr < hi.expr]) is not None:
                continue  # an earlier trip fails too
            got = self.cex(start < d.extent, assume, {"start": start})
            if got is None or "unknown" in got:
                continue  # the last trip starts inside: a partial tile
            if self.cex(z3.Not(z3.And(k.expr == lo.expr, start == 0)), assume) is None:
                continue  # the first trip does not start at 0: the access looks ahead
            shown = self.readable(got)
            return Cause(
                loop,
                f"this loop runs one trip too many: its last trip starts the {ref.verb} `{name_of(ref.mem)}` at "
                f"index {got['start']} of dimension {d.axis}, past its end ({d.extent_text}), for "
                f"{format_counterexample(shown)}; every earlier trip stays in bounds",
                shown,
                "the loop that runs one trip too many",
                (self._one_trip_fewer(loop),),
            )
        return None

    def _one_trip_fewer(self, loop: st.ForOp) -> Option:
        """The loop's bound written `E + step` made `E` (the `+ 1` that runs past the end)."""
        owner = loop.upper.owner
        if not isinstance(owner, tl.BinaryOp) or owner.fn.data != "add":
            return "", None
        bump = self.sym.value(owner.rhs).expr
        if not (z3.is_int_value(bump) and self.sym.holds(self.sym.value(loop.step).expr == bump)):
            return "", None
        span, text = self.ctx.span(owner), self.ctx.text_of(owner)
        if span is None or text is None:
            return "", None
        suffix = re.search(r"\s*\+\s*" + str(bump.as_long()) + r"$", text)
        if suffix is None:
            return "", None
        var = loop.body.block.args[0].name_hint or "the loop variable"
        return (
            f"end the loop one trip earlier, at `{text[: suffix.start()]}`, so that `{var}` stops at the last block "
            "that starts inside the tensor",
            Edit(Span(span.line, span.col + suffix.start(), span.line, span.end_col, span.file), ""),
        )

    def _where_cause(self, ref: MemRef, d: Dim, assume: list) -> Cause | None:
        """An unmasked block of C elements along a dimension of extent X, in bounds exactly when
        X % C == 0, in a kernel whose `where` states that kind of constraint for other shapes
        but not for X: the `where` is missing one (the fix the kernel's author chose elsewhere)."""
        if d.slice_extent is None or ref.mask is not None or d.index.tainted:
            return None
        c = self.ctx.static(d.slice_extent)
        extent = d.extent
        if c is None or c <= 1 or not z3.is_const(extent) or z3.is_int_value(extent):
            return None
        x = extent.decl().name()
        stated = [w.data for w in self.ctx.kernel.where.data]
        divisible = [w for w in stated if _divisibility(w) is not None]
        if not divisible or any(_divisibility(w) == x for w in divisible):
            return None  # no such constraint anywhere, or X already has one (another is wrong)
        if self.cex(self._inside_dim(d), [*assume, extent % c == 0]) is not None:
            return None
        got = self.cex(self._inside_dim(d), assume, {"index": d.index.expr})
        if got is None or "unknown" in got:
            return None
        shown = self.readable({k: v for k, v in got.items() if k != "index"})
        tile = str(d.slice_extent)
        others = ", ".join(f"`{w}`" for w in divisible)
        constraint = f"{x} % {tile} == 0"
        return Cause(
            where_span(self.ctx.program) or self.ctx.program.span() or ref.op,
            f"the `where` clause states {others} but not `{constraint}`, which the unmasked {ref.verb} "
            f"`{name_of(ref.mem)}` relies on: its blocks of {tile} along dimension {d.axis} run past {x} when "
            f"{x} is not a multiple of {tile} (index {got['index']} for {format_counterexample(shown)})",
            shown,
            f"the `where` clause that lacks `{constraint}`",
            ((f"add `{constraint}` to the `where` clause", self.ctx.state_in_where(constraint)),),
        )

    def _rank_cause(self, ref: MemRef, d: Dim, assume: list) -> Cause | None:
        """An index in bounds for rank 0 of its role but not for another: the offset that scales
        the rank (`c0 = role_rank() * BN` where each rank owns BN / 2) is to blame, where it is
        computed on a line of its own."""
        if d.index.tainted:
            return None
        ranks = [n for n in self.sym.variables(d.index.expr) if n.startswith("role_rank")]
        if not ranks:
            return None
        if self.cex(self._inside_dim(d), [*assume, *[z3.Int(r) == 0 for r in ranks]]) is not None:
            return None  # rank 0 fails too: not the rank's scale
        offset = self._rank_offset(d.index_value, set(ranks), self.ctx.span(ref.op))
        if offset is None:
            return None
        got = self.cex(self._inside_dim(d), assume, {"index": d.index.expr, "offset": self.sym.value(offset).expr})
        if got is None or "unknown" in got:
            return None
        shown = self.readable({k: v for k, v in got.items() if k not in ("index", "offset")})
        rank = ", ".join(f"{r} = {got[r]}" for r in ranks if r in got)
        name = offset.name_hint or "this offset"
        return Cause(
            cast(Operation, offset.owner),
            f"`{name}` is {got['offset']} for {rank}, which takes the {ref.verb} `{name_of(ref.mem)}` to index "
            f"{got['index']} of dimension {d.axis}, past its end ({d.extent_text}), for {format_counterexample(shown)}; "
            "with rank 0 the access stays inside, so the offset scales the rank too far",
            shown,
            f"`{name}`, the per-rank offset",
            self._rank_fixes(ref, d, cast(Operation, offset.owner)),
        )

    def _rank_offset(self, v: SSAValue, ranks: set[str], access: Span | None) -> SSAValue | None:
        """The value nearest to the access, along the index's computation, that depends on the
        role ranks alone and is computed on a line of its own."""
        todo, seen = [v], set()
        while todo:
            cur = todo.pop(0)
            if cur in seen or not isinstance(cur, OpResult):
                continue
            seen.add(cur)
            names = self.sym.variables(self.sym.value(cur).expr) if isinstance(cur.type, ScalarType) else None
            span = self.ctx.span(cur.owner)
            if (
                names
                and names <= ranks
                and not self.sym.value(cur).tainted
                and span is not None
                and (access is None or span.line != access.line)
            ):
                return cur
            if isinstance(cur.owner, tl.BinaryOp | tl.CastOp):
                todo += list(cur.owner.operands)
        return None

    # ---- fixes (`bounds_fixes`), asked only for a diagnostic ---------------------------------------

    def _choose(self, rule_id: str, at: Operation | Span, options: Iterable[Option]) -> tuple[str, tuple[Edit, ...]]:
        span = self.ctx.span(at)
        return fx.choose(self.ctx, rule_id, span.line, list(options)) if span is not None else ("", ())

    def _line(self, op: Operation) -> int:
        span = self.ctx.span(op)
        return span.line if span is not None else 0

    def _rank_fixes(self, ref: MemRef, d: Dim, offset: Operation) -> tuple[Option, ...]:
        """For an offset that takes a role's ranks past the end: the slice without a shift that
        pushes it there (`r0 + 1 : r0 + 1 + BM / 2`), or the rank scaled by its share."""
        out: list[Option] = []
        start = d.index_value.owner if isinstance(d.index_value, OpResult) else None
        shift = start.rhs if isinstance(start, tl.BinaryOp) else None
        if shift is not None and not any(
            n.startswith("role_rank") for n in self.sym.variables(self.sym.value(shift).expr)
        ):
            unshifted = fx.reshifted(self.ctx, ref.op, d.index_value, None)  # a shift that is not the rank's
            if unshifted is not None:
                out.append((f"start the slice at `{unshifted[0]}`, without the shift", unshifted[1]))
        info = self.ctx.info_of.get(ref.op)
        scaled = fx.rank_scaled(self.ctx, offset, self.ctx.units(info.role if info else None))
        if scaled is not None:
            out.append((f"scale the rank by the share that each rank owns: `{scaled[0]}`", scaled[1]))
        return tuple(out)

    def _grid_one_fewer(self) -> Iterator[Option]:
        for axis, edit in fx.grid_one_fewer(self.ctx):
            yield f"launch one program fewer along grid axis {axis}", edit

    def _bound_masks(self, ref: MemRef, d: Dim, upper: bool) -> Iterator[Option]:
        """The access masked by its own bound in dimension `d`: a block slice by whether it starts
        inside (`k1 < K`, where blocks are all in or all out), then by its lanes; an index by
        `i < N` (`i >= c` for an index `i - c` that can be negative)."""
        verb, line = ref.verb.split()[0], self._line(ref.op)
        index = fx.text_at(self.ctx, d.index_value, line)
        if index is None:
            return
        bounds: list[str | None] = []
        if d.slice_extent is not None:
            lanes = [a for a, extent in enumerate(ref.access.dims) if extent is not None]
            tile = fx.lanes_of_slice(index, str(d.slice_extent), lanes.index(d.axis), len(lanes))
            if upper:
                bounds += [f"{fx.atom(index)} < {d.extent_text}", f"{tile} < {d.extent_text}"]
            else:
                bounds.append(f"{tile} >= 0")
        elif upper:
            bounds.append(f"{index} < {d.extent_text}")
        else:
            bounds.append(fx.not_negative(self.ctx, d.index_value, line))
        for bound in bounds:
            masked = fx.add_to_mask(self.ctx, ref.op, bound) if bound else None
            if masked is not None:
                yield f"mask the {verb} with `{masked[1]}`", masked[0]

    def _global_fixes(self, ref: MemRef, d: Dim, upper: bool) -> list[Option]:
        """What usually brings a global access back inside: an `if` around it made strict, the
        condition computed for its mask, a loop or a grid one step shorter, a program id of the
        axis whose grid covers the dimension; else a mask."""
        out: list[Option] = []
        verb = ref.verb.split()[0]
        if upper:
            for branch in fx.ifs_around(ref.op):
                guard = branch.cond.owner
                if isinstance(guard, tl.CompareOp) and _compares(branch.cond, d.index_value, 1):
                    edit = self._guard_edit(guard, d)
                    if edit is not None:
                        out.append(
                            (
                                f"make the `if` around it let only indices below {d.extent_text} through: "
                                f"`{edit.text}`",
                                edit,
                            )
                        )
            if ref.mask is None:
                for flag in fx.unused_flags(ref.op):
                    masked = fx.add_to_mask(self.ctx, ref.op, flag)
                    if masked is not None:
                        out.append((f"mask the {verb} with `{flag}`, the condition computed for it", masked[0]))
            out += [self._one_trip_fewer(loop) for loop in fx.loops_around(ref.op)]
            out += list(self._grid_one_fewer())
            grid = [str(g.data) for g in self.ctx.kernel.grid.data]
            covers = [a for a, g in enumerate(grid) if re.search(rf"\b{re.escape(d.extent_text)}\b", g)]
            for pid in fx.program_ids(d.index_value):
                if pid.axis.data < len(grid) and pid.axis.data not in covers and len(covers) == 1:
                    b = covers[0]
                    edit = self.ctx.replace_in(span_of(pid), f"program_id({pid.axis.data})", f"program_id({b})")
                    out.append(
                        (f"take the index from `program_id({b})`, the grid axis that covers {d.extent_text}", edit)
                    )
        return out + list(self._bound_masks(ref, d, upper))

    def _unproven_fixes(self, ref: MemRef, d: Dim) -> list[Option]:
        """An index the verifier cannot bound, bounded: clamped where it is computed (an index
        loaded from memory), or masked by its bounds."""
        if d.slice_extent is not None or not isinstance(ref.op, tl.LoadOp | tl.StoreOp | tl.AtomicOp):
            return []
        line = self._line(ref.op)
        dtype = dtype_of(d.index_value.type)
        extent = d.extent_text if dtype == "i32" else f"cast<{dtype}>({d.extent_text})"  # a shape symbol is i32
        last = f"{fx.atom(extent)} - 1"
        clamp: Option = ("", None)
        value = _plain(d.index_value)
        made = span_of(value.owner) if isinstance(value, OpResult) else None
        text = self.ctx.text_of(made)
        if made is not None and text is not None:
            clamped = f"minimum(maximum({text}, 0), {last})"
            edit = Edit(made, clamped) if made.line != line else self.ctx.replace_in(ref.op, text, clamped)
            clamp = (f"clamp the index where it is computed: `{clamped}`", edit)
        index = fx.text_at(self.ctx, d.index_value, line)
        masked = fx.add_to_mask(self.ctx, ref.op, f"{index} >= 0 & {index} < {extent}") if index else None
        mask: Option = (f"mask the {ref.verb.split()[0]} with `{masked[1]}`", masked[0]) if masked else ("", None)
        return [clamp, mask] if "loaded from memory" in d.index.why else [mask, clamp]

    def _smem_fixes(self, ref: MemRef, d: Dim, upper: bool) -> list[Option]:
        """A stage index taken modulo the ring; a slice without its shift or with the rank scaled
        by its share."""
        if d.slice_extent is None and d.axis == 0:
            return [
                (f"index the stage modulo the buffer's {d.extent_text} stages: `{text}`", edit)
                for text, edit in fx.stage_options(self.ctx, ref.op, name_of(ref.mem), d.index_value, d.extent_text)
            ]
        out: list[Option] = []
        if d.slice_extent is not None and (unshifted := fx.reshifted(self.ctx, ref.op, d.index_value, None)):
            out.append((f"start the slice at `{unshifted[0]}`, without the shift", unshifted[1]))
        info = self.ctx.info_of.get(ref.op)
        scaled = fx.rank_scaled(self.ctx, ref.op, self.ctx.units(info.role if info else None))
        if scaled is not None:
            out.append((f"scale the rank by the share that each rank owns: `{scaled[0]}`", scaled[1]))
        return out

    def _every_inside(self, dims: list[Dim]) -> z3.BoolRef:
        """`0 <= index < extent` in every dimension, one term. Accesses that share their index
        values (and, here, their lanes) make the same claim: it is built once (z3 would give
        back the same term anyway; building it is what costs)."""
        terms = [t for d in dims for t in (d.index.expr, d.extent)]
        return made_once("inside", _inside, *terms)

    def _evidently_inside(self, d: Dim) -> bool:
        """0 <= index < extent for every assignment, from the bounds of the index's constants
        and lanes (`Symbolic.interval`) and a constant extent."""
        key = (d.index.expr.get_id(), d.extent.get_id())  # both kept alive by the symbolic memos
        inside = self._inside.get(key)
        if inside is None:
            inside = self._inside[key] = self._inside_of(d.index.expr, d.extent)
        return inside

    def _inside_of(self, index: z3.ArithRef, extent: z3.ArithRef) -> bool:
        if not z3.is_int_value(extent):
            return False
        bounds = self.sym.interval(index)
        return bounds is not None and 0 <= bounds[0] and bounds[1] < extent.as_long()

    # ---- the checks ---------------------------------------------------------------------------

    def _global(self) -> Iterator[Diagnostic]:
        for info in self.ctx.infos:
            for ref in global_refs(info.op):
                lanes, dims = self.dims(ref)
                conds = self.conditions(ref, lanes)

                def say(d: Dim, fault: str, ref=ref) -> str:
                    return f"{ref.verb} `{name_of(ref.mem)}` can go out of bounds in dimension {d.axis}: index {fault}"

                def fixes(d: Dim, upper: bool, ref=ref) -> list[Option]:
                    return self._global_fixes(ref, d, upper)

                yield from self.in_bounds(ref, dims, conds, "bounds.global-access", say, fixes)

    def _tma(self) -> Iterator[Diagnostic]:
        for info in self.ctx.infos:
            for ref in tma_refs(info.op):
                _, dims = self.dims(ref, starts_only=True)
                conds = self.conditions(ref, ())

                def say(d: Dim, fault: str, ref=ref) -> str:
                    return (
                        f"the box of this {ref.verb.split()[0]} can start outside `{name_of(ref.mem)}` in "
                        f"dimension {d.axis}: start {fault}"
                    )

                def fixes(d: Dim, upper: bool, ref=ref) -> list[Option]:
                    out: list[Option] = list(self._grid_one_fewer())
                    unshifted = fx.reshifted(self.ctx, ref.op, d.index_value, None)
                    if unshifted is not None:
                        out.append((f"start the box at `{unshifted[0]}`, without the shift", unshifted[1]))
                    return out

                yield from self.in_bounds(ref, dims, conds, "bounds.tma-box", say, fixes)

    def _smem(self) -> Iterator[Diagnostic]:
        for info in self.ctx.infos:
            for ref in smem_refs(info.op):
                lanes, dims = self.dims(ref)
                conds = self.conditions(ref, lanes)

                def say(d: Dim, fault: str, ref=ref) -> str:
                    what = "stage" if d.axis == 0 and d.slice_extent is None else "index"
                    return (
                        f"{ref.verb} shared buffer `{name_of(ref.mem)}` can go outside it in dimension "
                        f"{d.axis}: {what} {fault}"
                    )

                def fixes(d: Dim, upper: bool, ref=ref) -> list[Option]:
                    return self._smem_fixes(ref, d, upper)

                yield from self.in_bounds(ref, dims, conds, "bounds.smem-access", say, fixes)

    def _mbarrier(self) -> Iterator[Diagnostic]:
        for info in self.ctx.infos:
            op = info.op
            if not isinstance(op, ex.ExpectOp | ex.ArriveOp | ex.WaitOp | ex.TmaLoadOp):
                continue
            size_expr = cast(MBarrierType, op.bar.type).size.data
            index = self.sym.value(op.bar_index)
            dim = Dim(0, index, self.sym.sym(size_expr), str(size_expr), op.bar_index, None)
            what = {
                ex.ExpectOp: "expect on",
                ex.ArriveOp: "arrive on",
                ex.WaitOp: "wait on",
                ex.TmaLoadOp: "signal to",
            }[type(op)]
            ref = MemRef(op, op.bar, Access((None,)), (op.bar_index,), None, f"{what} mbarrier array", "bar")
            conds = self.conditions(ref, ())

            def say(d: Dim, fault: str, ref=ref, what=what) -> str:
                return f"{what} `{name_of(ref.mem)}[...]` can index outside its array: index {fault} mbarriers"

            def fixes(d: Dim, upper: bool, ref=ref) -> list[Option]:
                return [
                    (f"keep the index inside the array of {d.extent_text} mbarriers: `{text}`", edit)
                    for text, edit in fx.stage_options(self.ctx, ref.op, name_of(ref.mem), d.index_value, d.extent_text)
                ]

            yield from self.in_bounds(ref, [dim], conds, "bounds.mbarrier-index", say, fixes)

    def _gather(self) -> Iterator[Diagnostic]:
        for info in self.ctx.infos:
            op = info.op
            if not isinstance(op, tl.GatherOp):
                continue
            ref = MemRef(op, op.src, Access((None,)), (op.index,), None, "gather from", "g")
            lanes = self.sym.lanes(shape_of(op.index.type), self.tag(ref))
            extent = shape_of(op.src.type)[op.axis.data]
            dim = Dim(op.axis.data, self.sym.at(op.index, lanes), self.sym.sym(extent), str(extent), op.index, None)

            def say(d: Dim, fault: str, ref=ref) -> str:
                return f"gather from `{name_of(ref.mem)}` can index outside it along axis {d.axis}: index {fault}"

            def fixes(d: Dim, upper: bool = True, ref=ref) -> list[Option]:
                """The index wrapped around the axis (a rotation), or clamped to it."""
                index = fx.text_at(self.ctx, d.index_value, self._line(ref.op))
                if index is None:
                    return []
                last = str(int(d.extent_text) - 1) if d.extent_text.isdigit() else f"{fx.atom(d.extent_text)} - 1"
                wrapped = f"{fx.atom(index)} % {fx.atom(d.extent_text)}"
                clamped = f"minimum(maximum({index}, 0), {last})"
                return [
                    (f"wrap the index around the axis: `{wrapped}`", self.ctx.replace_in(ref.op, index, wrapped)),
                    (f"clamp the index: `{clamped}`", self.ctx.replace_in(ref.op, index, clamped)),
                ]

            def unproven_fixes(ref: MemRef, d: Dim) -> list[Option]:
                return fixes(d)[1:]

            conds = self.conditions(ref, lanes)
            yield from self.in_bounds(ref, [dim], conds, "bounds.gather-index", say, fixes, unproven_fixes)

    def _alignment(self) -> Iterator[Diagnostic]:
        need = self.ctx.spec.tma_align or 16
        seen: set[SSAValue] = set()
        for info in self.ctx.infos:
            for ref in tma_refs(info.op):
                t = ref.mem.type
                esize = DTYPES[dtype_of(t)].nbytes
                name = name_of(ref.mem)
                if ref.mem not in seen:
                    seen.add(ref.mem)
                    yield from self._tensor_for_tma(ref, need)
                # the box's inner extent, in bytes
                box = self.ctx.access_extents(t, ref.access)
                inner = box[-1] if box else None
                if inner is not None and inner * esize % need:
                    hint, edits = self._choose("bounds.alignment", ref.op, self._box_widened(ref, need // esize))
                    yield self.ctx.report(
                        ref.op,
                        f"the innermost extent of the TMA box on `{name}` is {inner * esize} bytes "
                        f"({inner} x {esize}), not a multiple of {need}",
                        hint,
                        rule="bounds.alignment",
                        severity="error",
                        # the extent is the same for every shape: the witness is the box itself
                        counterexample={"box_inner_elements": inner, "box_inner_bytes": inner * esize},
                        edits=edits,
                    )
                # the box's inner start, in bytes
                _, dims = self.dims(ref, starts_only=True)
                last = dims[-1]
                conds = [c.expr for c in self.conditions(ref, ())]
                start = last.index
                r, m = self.sym.congruence(start.expr * esize)
                if (m == 0 or m % need == 0) and r % need == 0:
                    continue  # aligned by the congruences alone
                claim = (start.expr * esize) % need == 0
                got = self.cex(claim, conds, {"start": start.expr})
                if got is None:
                    continue
                if start.tainted or "unknown" in got:
                    why = got.get("unknown") or f"it depends on {start.why}"
                    yield self.ctx.report(
                        ref.op,
                        f"cannot prove that the TMA box on `{name}` starts {need}-byte aligned in its "
                        f"innermost dimension: {why}",
                        f"start the box at a multiple of {need // esize} elements",
                        rule=UNPROVEN,
                        severity="warning",
                    )
                    continue
                shown = self.readable(got)
                hint, edits = self._choose(
                    "bounds.alignment",
                    ref.op,
                    [*self._box_widened(ref, need // esize), *self._shifts_rounded(ref, last, need // esize)],
                )
                yield self.ctx.report(
                    ref.op,
                    f"the TMA box on `{name}` can start at element {got['start']} of its innermost "
                    f"dimension, {got['start'] * esize} bytes, not a multiple of {need}, for "
                    f"{format_counterexample(shown)}",
                    hint,
                    counterexample=shown,
                    rule="bounds.alignment",
                    severity="error",
                    edits=edits,
                )

    def _tensor_for_tma(self, ref: MemRef, need: int) -> Iterator[Diagnostic]:
        """What the TMA descriptor requires of a tensor's strides: every one but the innermost
        a multiple of 16 bytes. (Its base address is `resources.tma-align`'s business.)"""
        t = cast(GlobalType, ref.mem.type)
        esize = DTYPES[t.dtype.data].nbytes
        name = name_of(ref.mem)
        shape = shape_of(t)
        if t.strides.data:
            inner = self.sym.sym(t.strides.data[-1].data)
            got = self.cex(inner == 1, [], {"stride": inner})
            if got is not None and "unknown" not in got:
                shown = self.readable(got)
                yield self.ctx.report(
                    ref.op,
                    f"the TMA copies rows of contiguous elements, but the innermost stride of `{name}` "
                    f"({t.strides.data[-1].data}) is {got['stride']}"
                    + (f" for {format_counterexample(shown)}" if shown else ""),
                    "copy a tensor whose innermost dimension is contiguous (stride 1), or use load/store",
                    counterexample=shown,
                    rule="bounds.alignment",
                    severity="error",
                )
        if len(shape) < 2:
            return
        if t.strides.data:
            strides = [(i, s.data) for i, s in enumerate(t.strides.data[:-1])]
        else:
            strides = [(len(shape) - 2, shape[-1])]  # the others are multiples of it
        for axis, stride in strides:
            s = self.sym.sym(stride)
            r, m = self.sym.congruence(s * esize)
            if (m == 0 or m % need == 0) and r % need == 0:
                continue
            got = self.cex((s * esize) % need == 0, [], {"stride": s})
            if got is None:
                continue
            shown = self.readable(got)
            what = f"the stride of dimension {axis}" if t.strides.data else f"the row stride (the extent {stride})"
            hint, edits = self._choose("bounds.alignment", ref.op, self._stride_constraints(ref, stride, need // esize))
            yield self.ctx.report(
                ref.op,
                f"the TMA needs every stride of `{name}` but the innermost to be a multiple of {need} bytes; "
                f"{what} is {got['stride']} x {esize} = {got['stride'] * esize} bytes for "
                f"{format_counterexample(shown)}",
                hint,
                counterexample=shown,
                rule="bounds.alignment",
                severity="error",
                edits=edits,
            )

    def _misaligned(self) -> Iterator[Diagnostic]:
        for info in self.ctx.infos:
            op = info.op
            for ref in global_refs(op):
                t = cast(GlobalType, ref.mem.type)
                esize = DTYPES[t.dtype.data].nbytes
                align = t.align.data
                if align <= esize or any(isinstance(i.type, TileType) for i in ref.indices):
                    continue
                if not any(d is not None for d in ref.access.dims):
                    continue  # a single element: nothing is vectorized
                _, dims = self.dims(ref, starts_only=True)
                if any(d.index.tainted for d in dims):
                    continue
                # A congruence, not z3: offsets multiply unknowns (`row * N`), which z3 finds hard.
                r, m = self.sym.congruence(self._offset(t, dims) * esize)
                if not (m == 0 or m % align == 0) or r % align == 0:
                    continue  # not provably misaligned
                options = [o for d in dims for o in self._shifts_rounded(ref, d, align // esize)]
                hint, edits = self._choose("bounds.misaligned-access", op, options)
                yield self.ctx.report(
                    op,
                    f"the {ref.verb} `{name_of(ref.mem)}` always starts at an element offset that is not "
                    f"a multiple of align({align}) / {esize} = {align // esize} elements, so it cannot use "
                    f"{align}-byte vector accesses",
                    hint,
                    rule="bounds.misaligned-access",
                    severity="warning",
                    edits=edits,
                )

    def _box_widened(self, ref: MemRef, multiple: int) -> list[Option]:
        """The parameter that sizes the box's innermost slice (`BN = 2`) rounded up to a multiple
        of `multiple` elements."""
        inner = ref.access.dims[-1] if ref.access.dims else None
        rounded = fx.rounded_param(self.ctx, inner.name, multiple) if isinstance(inner, sx.Sym) else None
        if rounded is None:
            return []
        return [(f"widen the box's innermost extent to a multiple of {multiple} elements: `{rounded[0]}`", rounded[1])]

    def _shifts_rounded(self, ref: MemRef, d: Dim, multiple: int) -> Iterator[Option]:
        if d.slice_extent is None:
            return
        for start, edit in fx.shift_rounded(self.ctx, ref.op, d.index_value, multiple):
            yield f"start the block at a multiple of {multiple} elements: `{start}`", edit

    def _stride_constraints(self, ref: MemRef, stride: sx.SymExpr, multiple: int) -> list[Option]:
        """`where K % BK == 0` for a row stride K that the box steps through in blocks of BK (a
        multiple of `multiple`), else `where K % 8 == 0`."""
        if not isinstance(stride, sx.Sym):
            return []
        inner = ref.access.dims[-1] if ref.access.dims else None
        size = self.ctx.static(inner) if inner is not None else None
        blocks = [str(inner)] if isinstance(inner, sx.Sym) and size and size % multiple == 0 else []
        return [
            (f"add `{c}` to the `where` clause", self.ctx.state_in_where(c))
            for c in [f"{stride} % {b} == 0" for b in [*blocks, str(max(1, multiple))]]
        ]

    def _offset(self, t: GlobalType, dims: list[Dim]) -> z3.ArithRef:
        shape = shape_of(t)
        if t.strides.data:
            strides = [self.sym.sym(s.data) for s in t.strides.data]
        else:
            strides = []
            acc = z3.IntVal(1)
            for d in reversed(shape):
                strides.append(acc)
                acc = acc * self.sym.sym(d)
            strides.reverse()
        return z3.Sum([d.index.expr * s for d, s in zip(dims, strides, strict=True)])

    def _unproven(self) -> Iterator[Diagnostic]:
        for kind in ("global", "tma", "smem", "mbarrier", "gather", "alignment"):
            yield from (d for d in self.get(kind) if d.rule == UNPROVEN)


def _inside(*terms: z3.ArithRef) -> z3.BoolRef:
    """0 <= index < extent for each (index, extent) pair of `terms`."""
    pairs = zip(terms[::2], terms[1::2], strict=True)
    return z3.And(*[z3.And(index >= 0, index < extent) for index, extent in pairs])


def bounds_of(ctx: Context) -> Bounds:
    found = ctx.__dict__.get("_bounds")
    if found is None:
        found = ctx.__dict__["_bounds"] = Bounds(ctx)
    return found


def _share(ctx: Context, kind: str, rule_id: str) -> Iterator[Diagnostic]:
    return (d for d in bounds_of(ctx).get(kind) if d.rule == rule_id)


# ---- the rules ------------------------------------------------------------------------------------


_GEMM = """
kernel gemm_tma<BM = 128, BN = 128, BK = 64, S = 4>(
    a: global bf16[M, K] align(16),
    b: global bf16[K, N] align(16),
    c: out global bf16[M, N] align(16),
)
  where {where}
  target sm_90 grid({grid}) warpgroups(3)
{{
  as = smem(bf16[S, BM, BK], swizzle = 128)
  bs = smem(bf16[S, BK, BN], swizzle = 128)
  full = mbarrier(S, count = 1)
  empty = mbarrier(S, count = 2)
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  role load warpgroups(0) regs(40) {{
    for k in 0 .. K / BK {{
      s = k % S
      wait(empty[s], parity = (k / S + 1) % 2)
      expect(full[s], bytes = sizeof(as[s]) + sizeof(bs[s]))
{load_a}
      tma.load(b[k * BK : k * BK + BK, n0 : n0 + BN], bs[s], signal = full[s])
    }}
  }}
  role mma warpgroups(1, 2) regs(232) {{
    r0 = role_rank() * (BM / 2)
    acc = zeros(f32[BM / 2, BN])
    for k in 0 .. K / BK {{
      s = k % S
      wait(full[s], parity = (k / S) % 2)
{mma}
      wgmma.wait(0)
      arrive(empty[s])
    }}
    store(c[m0 + r0 : m0 + r0 + BM / 2, n0 : n0 + BN], cast<bf16>(acc))
  }}
}}
"""

_LOAD_A = "      tma.load(a[m0 : m0 + BM, k * BK : k * BK + BK], as[s], signal = full[s])"
_MMA = "      acc = wgmma(as[s, r0 : r0 + BM / 2], bs[s], acc)"
_WHERE = "M % BM == 0, N % BN == 0, K % BK == 0"


def gemm(*, where: str = _WHERE, grid: str = "M / BM, N / BN", load_a: str = _LOAD_A, mma: str = _MMA) -> str:
    """The Hopper GEMM of examples/gemm_hopper_ws.kir, with one line changed."""
    return _GEMM.format(where=where, grid=grid, load_a=load_a, mma=mma)


@rule(
    "bounds.global-access",
    family="bounds",
    severity="error",
    summary="a load, store, atomic or cp.async lane of a global tensor can be out of bounds",
    explanation="""
Every lane of a load, store, atomic or cp.async on a global tensor must be inside the tensor
in every dimension, or be masked off: for each dimension the verifier proves
`mask -> 0 <= index < extent` with z3, for every program id of the grid, every iteration of
the enclosing loops, every role rank and every lane, assuming only the kernel's `where`
constraints (and that each shape symbol is at least 1). A block slice `start : start + E`
contributes `start + lane`. When the claim fails, the diagnostic gives the counterexample:
the shape values, program ids, loop variables and lane of one out-of-bounds access. Fix it
with a mask (`mask = offs < N`) or by stating the assumption the kernel relies on
(`where N % BLOCK == 0`), which the interpreter then checks at launch.
When the index depends on data (indices loaded from memory) or on values carried by a loop,
the verifier cannot decide and says so with a `bounds.unproven` warning instead.""",
    bad="""
kernel vector_add<BLOCK = 1024>(x: global f32[N], y: global f32[N], z: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  a = load(x[offs], mask = mask)
  b = load(y[offs])  # <-
  store(z[offs], a + b, mask = mask)
}
""",
    good="""
kernel vector_add<BLOCK = 1024>(x: global f32[N], y: global f32[N], z: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  a = load(x[offs], mask = mask)
  b = load(y[offs], mask = mask)
  store(z[offs], a + b, mask = mask)
}
""",
)
def global_access(ctx: Context) -> Iterator[Diagnostic]:
    return _share(ctx, "global", "bounds.global-access")


@rule(
    "bounds.unproven",
    family="bounds",
    severity="warning",
    summary="an access cannot be proved in bounds because its index depends on data or on a loop-carried value",
    explanation="""
The bounds rules prove each access in bounds for every launch the `where` constraints allow.
Some indices are beyond such a proof: indices loaded from memory (a gather through an index
tensor, as in an embedding bag), values carried from one loop iteration to the next (a binary
search), results of float computations. When the claim cannot be proved and the index or the
mask depends on such a value, the verifier does not claim a bug: it warns and names the value
it cannot bound. Bound the value explicitly where you can (a mask `rows >= 0 & rows < R`, or a
clamp with `minimum`/`maximum`); otherwise the warning records an assumption about the data.""",
    bad="""
kernel gather<BLOCK = 128>(table: global f32[R], idx: global i32[N], out: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  rows = load(idx[offs], mask = mask)
  v = load(table[rows], mask = mask)  # <-
  store(out[offs], v, mask = mask)
}
""",
    good="""
kernel gather<BLOCK = 128>(table: global f32[R], idx: global i32[N], out: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  rows = load(idx[offs], mask = mask)
  v = load(table[rows], mask = mask & rows >= 0 & rows < R)
  store(out[offs], v, mask = mask)
}
""",
)
def unproven(ctx: Context) -> Iterable[Diagnostic]:
    return bounds_of(ctx).get("unproven")


@rule(
    "bounds.tma-box",
    family="bounds",
    severity="error",
    summary="a TMA box can start outside its tensor",
    explanation="""
A TMA copy moves a box of a global tensor. The box may run past the end of the tensor (the TMA
reads zeros there and drops stores), but its start must be inside the tensor in every
dimension: a box that starts outside copies nothing useful, still counts its full bytes on the
mbarrier, and almost always means a wrong grid (`grid(M / BM + 1)`) or a wrong offset
(`m0 + BM`). The verifier proves `0 <= start < extent` for every dimension of every box, for
every program id, loop iteration and role rank, under the `where` constraints, and reports a
counterexample at the TMA op when it fails.""",
    bad=gemm(load_a="      tma.load(a[m0 + BM : m0 + BM + BM, k * BK : k * BK + BK], as[s], signal = full[s])  # <-"),
    good=gemm(),
)
def tma_box(ctx: Context) -> Iterator[Diagnostic]:
    return _share(ctx, "tma", "bounds.tma-box")


@rule(
    "bounds.smem-access",
    family="bounds",
    severity="error",
    summary="a shared-buffer view or lane can be outside the buffer",
    explanation="""
Shared buffers have a static shape (`smem(bf16[S, BM, BK])`), and nothing checks an access
against it on the device: a stage index `as[s]` with `s >= S`, or a slice
`as[s, r0 : r0 + BM / 2]` that runs past the rows, silently reads or overwrites another
buffer's bytes. The verifier proves every index and every slice of every shared access
(load, store, TMA and cp.async destinations, TMA store sources, wgmma operands) within the
buffer's shape for every loop iteration and role rank. A ring of S stages is indexed
`s = k % S`.""",
    bad=gemm(mma="      acc = wgmma(as[s, r0 + 1 : r0 + 1 + BM / 2], bs[s], acc)  # <-"),
    good=gemm(),
)
def smem_access(ctx: Context) -> Iterator[Diagnostic]:
    return _share(ctx, "smem", "bounds.smem-access")


@rule(
    "bounds.mbarrier-index",
    family="bounds",
    severity="error",
    summary="an mbarrier index can be outside its array",
    explanation="""
`mbarrier(S, count = C)` makes S barriers; `full[s]` must have `0 <= s < S` for every loop
iteration, or the wait, arrive, expect or TMA signal touches whatever shared memory lies
next to the array, and the pipeline deadlocks or races in ways that are hard to trace back.
The verifier proves every mbarrier index in range under the `where` constraints.""",
    bad="""
kernel copy_tile<BM = 64, BN = 64>(x: global f32[M, N] align(16), y: out global f32[M, N] align(16))
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  buf = smem(f32[1, BM, BN])
  bar = mbarrier(1, count = 1)
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  expect(bar[1], bytes = sizeof(buf[0]))  # <-
  tma.load(x[m0 : m0 + BM, n0 : n0 + BN], buf[0], signal = bar[0])
  wait(bar[0], parity = 0)
  store(y[m0 : m0 + BM, n0 : n0 + BN], load(buf[0]))
}
""",
    good="""
kernel copy_tile<BM = 64, BN = 64>(x: global f32[M, N] align(16), y: out global f32[M, N] align(16))
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  buf = smem(f32[1, BM, BN])
  bar = mbarrier(1, count = 1)
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  expect(bar[0], bytes = sizeof(buf[0]))
  tma.load(x[m0 : m0 + BM, n0 : n0 + BN], buf[0], signal = bar[0])
  wait(bar[0], parity = 0)
  store(y[m0 : m0 + BM, n0 : n0 + BN], load(buf[0]))
}
""",
)
def mbarrier_index(ctx: Context) -> Iterator[Diagnostic]:
    return _share(ctx, "mbarrier", "bounds.mbarrier-index")


@rule(
    "bounds.gather-index",
    family="bounds",
    severity="error",
    summary="an index of a gather can be outside its source's axis",
    explanation="""
`gather(src, index, axis = a)` reads `src` at `index` along axis `a`, so every lane of the index
must be in `0 .. src.shape[a] - 1`: on the GPU an index past the end reads whatever lies next to
the source in registers or shared memory, and the interpreter stops with `interp.out-of-bounds`.
The verifier proves the range for every program id, loop iteration and lane under the `where`
constraints, and gives a counterexample when it fails. An index that depends on data (loaded
from memory) cannot be proved: that is a `bounds.unproven` warning.""",
    bad="""
kernel rotate<BLOCK = 128>(x: global f32[N], y: out global f32[N])
  where N % BLOCK == 0
  target sm_90 grid(N / BLOCK) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  v = load(x[offs])
  w = gather(v, arange(0, BLOCK) + 1, axis = 0)  # <-
  store(y[offs], w)
}
""",
    good="""
kernel rotate<BLOCK = 128>(x: global f32[N], y: out global f32[N])
  where N % BLOCK == 0
  target sm_90 grid(N / BLOCK) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  v = load(x[offs])
  w = gather(v, (arange(0, BLOCK) + 1) % BLOCK, axis = 0)
  store(y[offs], w)
}
""",
)
def gather_index(ctx: Context) -> Iterator[Diagnostic]:
    return _share(ctx, "gather", "bounds.gather-index")


@rule(
    "bounds.alignment",
    family="bounds",
    severity="error",
    summary="a TMA copy breaks the TMA's 16-byte alignment rules",
    explanation="""
A TMA descriptor requires of the tensor every stride but the innermost to be a multiple of 16
bytes, which for a row-major tensor is its innermost extent times the element size (`K * 2` for
bf16[M, K]: K must be a multiple of 8); its base address must be 16-byte aligned too
(`resources.tma-align`). Of the box: an innermost extent that is a multiple of 16 bytes, and,
in KIR, an innermost start at a multiple of 16 bytes. The strides and starts are proved from the
`where` constraints; when they cannot be, the counterexample gives shape values that break
them (`K = 1`): add the constraint the kernel relies on (`where K % 8 == 0`).""",
    bad=gemm(where="M % BM == 0, N % BN == 0, K >= BK", load_a=_LOAD_A + "  # <-"),
    good=gemm(where="M % BM == 0, N % BN == 0, K % BK == 0"),
)
def alignment(ctx: Context) -> Iterator[Diagnostic]:
    return _share(ctx, "alignment", "bounds.alignment")


@rule(
    "bounds.misaligned-access",
    family="bounds",
    severity="warning",
    summary="a block access of a tensor declared `align(A)` always starts off the alignment",
    explanation="""
`align(A)` promises that a tensor's base address is a multiple of A bytes, so that the lowering
can move A bytes per instruction. A block access whose first element sits at a byte offset that
is never a multiple of A (for every launch the `where` constraints allow) cannot use those
vector accesses: the promise is wasted, and the access is usually off by a few elements. The
offset is the start of the block in row-major (or the declared strides') element order.""",
    bad="""
kernel window<BLOCK = 256>(y: out global f32[N] align(16), x: global f32[N + 16] align(16))
  where N % BLOCK == 0
  target sm_90 grid(N / BLOCK) warps(4)
{
  n0 = program_id(0) * BLOCK
  v = load(x[n0 + 1 : n0 + 1 + BLOCK])  # <-
  store(y[n0 : n0 + BLOCK], v)
}
""",
    good="""
kernel window<BLOCK = 256>(y: out global f32[N] align(16), x: global f32[N + 16] align(16))
  where N % BLOCK == 0
  target sm_90 grid(N / BLOCK) warps(4)
{
  n0 = program_id(0) * BLOCK
  v = load(x[n0 + 4 : n0 + 4 + BLOCK])
  store(y[n0 : n0 + BLOCK], v)
}
""",
)
def misaligned_access(ctx: Context) -> Iterator[Diagnostic]:
    return _share(ctx, "misaligned", "bounds.misaligned-access")
