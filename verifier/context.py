"""What a rule sees: the program, the target's spec, parameter values, where each op sits (its
role, its enclosing loops), spans, static sizes, and a symbolic evaluator for proofs."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Generic, TypeVar, cast, overload

from xdsl.ir import Attribute, Operation, SSAValue

from kir import symexpr as sx
from kir.diagnostics import Diagnostic, Edit, Related, Span
from kir.dialect import structure as st
from kir.dialect.types import Access, GlobalType, MBarrierType, MemoryType, ScalarType, SmemType, TileType
from kir.dtypes import DTYPES
from kir.liveness import recomputed
from kir.program import Program, span_of
from kir.targets import TargetSpec, spec
from kir.where import where_span
from verifier.registry import Rule

# The types with an element type (a value's, a tensor's or a buffer's).
_Typed = ScalarType | TileType | GlobalType | SmemType

OpT = TypeVar("OpT", bound=Operation, covariant=True)
A = TypeVar("A", bound=Operation)
B = TypeVar("B", bound=Operation)
C = TypeVar("C", bound=Operation)
D = TypeVar("D", bound=Operation)


@dataclass(frozen=True)
class OpInfo(Generic[OpT]):
    """An op with where it sits; `ctx.ops(tl.DotOp)` gives `OpInfo[tl.DotOp]`, so a rule reads
    the op's own operands and attributes with their declared types."""

    op: OpT
    role: st.RoleOp | None
    loops: tuple[st.ForOp, ...]
    in_if: bool


class Context:
    def __init__(self, program: Program, target: str | None = None, params: dict[str, int] | None = None):
        self.program = program
        self.kernel = program.kernel
        self.target = target or self.kernel.target.data
        self.spec: TargetSpec = spec(self.target)
        self.params: dict[str, int] = {**self.kernel.params, **(params or {})}
        self.rule: Rule | None = None
        self.file = program.file

    # ---- reporting ----------------------------------------------------------------------------

    def span(self, where: Operation | Span | None) -> Span | None:
        if isinstance(where, Span) or where is None:
            return where
        op: Operation | None = where
        while op is not None:
            s = span_of(op)
            if s is not None:
                return s
            op = op.parent_op()
        return self.program.span()

    def report(
        self,
        where: Operation | Span | None,
        message: str,
        hint: str = "",
        related: Sequence[tuple[Operation | Span, str]] = (),
        counterexample: dict | None = None,
        severity: str | None = None,
        rule: str | None = None,
        edits: Sequence[Edit | None] = (),
    ) -> Diagnostic:
        """A diagnostic of the current rule; `edits` are the hint made mechanical (all of them,
        or none: a fix that cannot be written out whole is left to the hint)."""
        assert self.rule is not None or rule is not None
        rel = tuple(Related(s, label) for w, label in related if (s := self.span(w)) is not None)
        return Diagnostic(
            rule or self.current_rule.id,
            severity or self.current_rule.severity,
            self.span(where),
            message,
            hint,
            rel,
            counterexample,
            tuple(e for e in edits if e is not None) if all(e is not None for e in edits) else (),
        )

    def text_of(self, where: Operation | Span | None) -> str | None:
        """The source text of `where`'s span, where it stands on one line (None otherwise, or
        where the program has no text)."""
        span, source = self.span(where), self.program.source
        if span is None or source is None or span.line != span.end_line:
            return None
        lines = source.splitlines()
        if not 1 <= span.line <= len(lines):
            return None
        return lines[span.line - 1][span.col - 1 : span.end_col - 1]

    def state_in_where(self, constraint: str) -> Edit | None:
        """The edit that adds `constraint` to the `where` clause (`, constraint` at its end), or
        writes a `where` clause before `target`, on its line, where the kernel has none."""
        if self.kernel.where.data:
            span = where_span(self.program)
            if span is None:
                return None
            return Edit(Span(span.line, span.end_col, span.line, span.end_col, span.file), f", {constraint}")
        target, source = self.program.clause_spans.get("target"), self.program.source
        if target is None or source is None:
            return None
        keyword = source.splitlines()[target.line - 1].rfind("target", 0, target.col - 1)
        if keyword < 0:
            return None
        return Edit(Span(target.line, keyword + 1, target.line, keyword + 1, target.file), f"where {constraint} ")

    def replace_in(self, where: Operation | Span | None, old: str, new: str) -> Edit | None:
        """An edit that replaces the one occurrence of `old` in the source text of `where`'s
        span (its first line); None where the text is not there exactly once."""
        span = self.span(where)
        lines = (self.program.source or "").splitlines()
        if span is None or not 1 <= span.line <= len(lines):
            return None
        line = lines[span.line - 1]
        end = span.end_col - 1 if span.end_line == span.line else len(line)
        text = line[span.col - 1 : end]
        if text.count(old) != 1:
            return None
        col = span.col + text.index(old)
        return Edit(Span(span.line, col, span.line, col + len(old), span.file), new)

    def operand_span(self, user: Operation, value: SSAValue) -> Span | None:
        """Where `value` is written inside `user`'s text: the span of the expression that
        computes it, or its name where the name occurs there once; None otherwise."""
        outer = self.span(user)
        if outer is None or outer.line != outer.end_line:
            return None
        owner = value.owner
        inner = span_of(owner) if isinstance(owner, Operation) else None
        if inner is not None and inner != outer and inner.line == outer.line:
            if outer.col <= inner.col and inner.end_col <= outer.end_col:
                return inner
        text = self.text_of(outer)
        name = value.name_hint
        if text is None or not name:
            return None
        found = [m.start() for m in re.finditer(rf"(?<![\w.]){re.escape(name)}(?!\w)", text)]
        if len(found) != 1:
            return None
        col = outer.col + found[0]
        return Span(outer.line, col, outer.line, col + len(name), outer.file)

    def drop_line(self, where: Operation | Span | None) -> Edit | None:
        """The edit that removes the line of `where`'s statement, where that line holds nothing
        else (a comment after it goes too)."""
        span = self.span(where)
        lines = (self.program.source or "").splitlines()
        if span is None or span.line != span.end_line or not 1 <= span.line <= len(lines):
            return None
        line = lines[span.line - 1]
        statement = line[span.col - 1 : span.end_col - 1]
        rest = line[span.end_col - 1 :].split("#", 1)[0]
        if line[: span.col - 1].strip() and not re.fullmatch(r"\s*\w+\s*=\s*", line[: span.col - 1]):
            return None
        if rest.strip() or not statement:
            return None
        return Edit(Span(span.line, 1, span.line + 1, 1, span.file), "")

    @property
    def current_rule(self) -> Rule:
        """The rule being run: a report made outside one names its rule and severity."""
        assert self.rule is not None, "a report made outside a rule names its rule and severity"
        return self.rule

    # ---- structure ----------------------------------------------------------------------------

    @cached_property
    def infos(self) -> list[OpInfo]:
        out: list[OpInfo] = []

        def visit(block, role, loops, in_if):
            for op in block.ops:
                out.append(OpInfo(op, role, loops, in_if))
                if isinstance(op, st.RoleOp):
                    visit(op.body.block, op, loops, in_if)
                elif isinstance(op, st.ForOp):
                    visit(op.body.block, role, (*loops, op), in_if)
                elif isinstance(op, st.IfOp):
                    visit(op.then_body.block, role, loops, True)
                    visit(op.else_body.block, role, loops, True)

        visit(self.kernel.body.block, None, (), False)
        return out

    @cached_property
    def info_of(self) -> dict[Operation, OpInfo]:
        return {i.op: i for i in self.infos}

    @overload
    def ops(self) -> Iterator[OpInfo[Operation]]: ...
    @overload
    def ops(self, a: type[A], /) -> Iterator[OpInfo[A]]: ...
    @overload
    def ops(self, a: type[A], b: type[B], /) -> Iterator[OpInfo[A | B]]: ...
    @overload
    def ops(self, a: type[A], b: type[B], c: type[C], /) -> Iterator[OpInfo[A | B | C]]: ...
    @overload
    def ops(self, a: type[A], b: type[B], c: type[C], d: type[D], /) -> Iterator[OpInfo[A | B | C | D]]: ...
    @overload
    def ops(self, *kinds: type[Operation]) -> Iterator[OpInfo[Operation]]: ...
    def ops(self, *kinds: type[Operation]) -> Iterator[OpInfo[Operation]]:
        """The ops of the given kinds (all of them without kinds), in program order. Each
        rule asks for a few kinds: the ops are indexed by type once, rather than every rule
        testing every op of a long kernel."""
        if not kinds:
            yield from self.infos
            return
        found = self._kinds.get(kinds)
        if found is None:
            types = [t for t in self._by_type if issubclass(t, kinds)]
            picked = [pair for t in types for pair in self._by_type[t]]
            found = self._kinds[kinds] = [info for _, info in sorted(picked, key=lambda pair: pair[0])]
        yield from found

    @cached_property
    def _by_type(self) -> dict[type, list[tuple[int, OpInfo]]]:
        out: dict[type, list[tuple[int, OpInfo]]] = {}
        for i, info in enumerate(self.infos):
            out.setdefault(type(info.op), []).append((i, info))
        return out

    @cached_property
    def _kinds(self) -> dict[tuple[type, ...], list[OpInfo]]:
        return {}

    @cached_property
    def roles(self) -> list[st.RoleOp]:
        return [i.op for i in self.infos if isinstance(i.op, st.RoleOp)]

    def units(self, role: st.RoleOp | None) -> int:
        """How many instances run a role's body (one per listed warp or warpgroup)."""
        return len(role.id_list) if role is not None else 1

    @cached_property
    def order(self) -> dict[Operation, int]:
        return {info.op: i for i, info in enumerate(self.infos)}

    @cached_property
    def recomputed(self) -> set[SSAValue]:
        """Offset and mask tiles, recomputed where they are used (`kir.liveness.recomputed`)."""
        return recomputed(self.kernel)

    # ---- static sizes -------------------------------------------------------------------------

    def static(self, expr: sx.SymExpr | Attribute) -> int | None:
        """The value of a size with parameters bound; None when it depends on a shape symbol."""
        data = getattr(expr, "data", None)
        e = data if isinstance(data, sx.SymExpr) else cast(sx.SymExpr, expr)
        try:
            return e.evaluate(self.params)
        except (KeyError, ZeroDivisionError):
            return None

    def static_shape(self, t: Attribute) -> tuple[int | None, ...]:
        if isinstance(t, ScalarType):
            return ()
        if isinstance(t, TileType | GlobalType | SmemType):
            return tuple(self.static(d.data) for d in t.shape.data)
        return ()

    def elements(self, shape: tuple[int | None, ...]) -> int | None:
        total = 1
        for d in shape:
            if d is None:
                return None
            total *= d
        return total

    def nbytes(self, t: Attribute) -> int | None:
        n = self.elements(self.static_shape(t))
        return None if n is None else n * DTYPES[cast(_Typed, t).dtype.data].nbytes

    def access_extents(self, mem_type: Attribute, access: Access) -> tuple[int | None, ...]:
        """Static extents of a block access (slices, then untouched trailing dims)."""
        dims = [self.static(d) for d in access.dims if d is not None]
        dims += [self.static(d.data) for d in cast(MemoryType, mem_type).shape.data[len(access.dims) :]]
        return tuple(dims)

    def access_bytes(self, mem_type: Attribute, access: Access) -> int | None:
        n = self.elements(self.access_extents(mem_type, access))
        return None if n is None else n * DTYPES[cast(MemoryType, mem_type).dtype.data].nbytes

    @cached_property
    def symbolic(self):
        from verifier.symbolic import Symbolic  # z3 and the evaluator: only for a rule that proves

        return Symbolic(self)

    # ---- values -------------------------------------------------------------------------------

    def same_value(self, a: SSAValue, b: SSAValue) -> bool:
        """Two index values that are provably equal everywhere (same SSA value, or the same
        computation)."""
        if a is b:
            return True
        return self.symbolic.equal(a, b)

    def barrier_of(self, value: SSAValue) -> Operation | None:
        owner = value.owner
        return owner if isinstance(owner, Operation) and isinstance(value.type, MBarrierType) else None
