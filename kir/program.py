"""A KIR program: the kernel op plus what the text around it carried (source, spans, comments).

Spans and comments are kept beside the IR rather than in op attributes (`kir.spans`), so that two
programs that differ only in layout or comments are the same IR (`same_ir`) and hash alike.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from xdsl.dialects.builtin import ArrayAttr, IntAttr
from xdsl.ir import Block, Operation, Region, SSAValue, Use
from xdsl.ir.core import SSAValues

from kir.diagnostics import Span
from kir.dialect.structure import KernelOp
from kir.multi import Scratch
from kir.printer import print_program
from kir.spans import (
    SOURCE_NOTES,
    block_comments_of,
    comments_of,
    copy_source_notes,
    set_block_comments,
    set_comments,
    set_span,
    span_of,
)

# The side tables live in kir.spans, below the printer; most callers read them from here.
__all__ = [
    "Program",
    "clone_op",
    "preorder",
    "same_ir",
    "span_of",
    "set_span",
    "comments_of",
    "set_comments",
    "block_comments_of",
    "set_block_comments",
]

OpT = TypeVar("OpT", bound=Operation)


@dataclass
class Program:
    kernel: KernelOp
    file: str = "<input>"
    source: str | None = None
    header_comments: list[str] = field(default_factory=list)
    footer_comments: list[str] = field(default_factory=list)
    arg_spans: dict[str, Span] = field(default_factory=dict)
    # Where the declarations around the body are: each compile-time parameter (`S = 4`), and
    # the clauses "target", "grid" and "launch" (`warpgroups(3)`), so that a diagnostic caused
    # by one of them can point at it.
    param_spans: dict[str, Span] = field(default_factory=dict)
    clause_spans: dict[str, Span] = field(default_factory=dict)
    # A program of several kernels (`kir.multi`): the kernels after this one, each a program of
    # one kernel, launched in order after it, and the scratch buffers they share. Both empty for
    # a program of one kernel.
    stages: list[Program] = field(default_factory=list)
    scratch: list[Scratch] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.kernel.kernel_name

    @property
    def is_multi(self) -> bool:
        return bool(self.stages or self.scratch)

    def kernels(self) -> list[Program]:
        """Each kernel as a program of its own, in launch order: [self] for one kernel."""
        if not self.is_multi:
            return [self]
        return [replace(self, stages=[], scratch=[]), *self.stages]

    @property
    def params(self) -> dict[str, int]:
        """The compile-time parameters; in a program of several kernels, a name is one
        parameter of every kernel that declares it (the verifier's `multi.param`)."""
        if not self.is_multi:
            return self.kernel.params
        merged: dict[str, int] = {}
        for k in self.kernels():
            for name, value in k.kernel.params.items():
                merged.setdefault(name, value)
        return merged

    def text(self) -> str:
        """The canonical text of the program."""
        return self._print(comments=True)

    def content_hash(self) -> str:
        """Identifies the program: sha256 of its canonical text with comments left out."""
        return hashlib.sha256(self._print(comments=False).encode()).hexdigest()

    def _print(self, comments: bool) -> str:
        if not self.is_multi:
            return print_program(self, comments=comments)
        kernels = self.kernels()
        top = "".join(f"{c}\n" for c in kernels[0].header_comments) if comments else ""
        head = top + "".join(s.text() + "\n" for s in self.scratch)
        kernels[0] = replace(kernels[0], header_comments=[])
        parts = [print_program(k, comments=comments) for k in kernels]
        return head + ("\n" if head else "") + "\n".join(parts)

    def span(self) -> Span | None:
        return span_of(self.kernel)

    def clone(self) -> Program:
        """A deep copy: new ops (spans and comments kept), so the copy can be changed freely."""
        return replace(
            self,
            kernel=clone_op(self.kernel),
            header_comments=list(self.header_comments),
            footer_comments=list(self.footer_comments),
            arg_spans=dict(self.arg_spans),
            param_spans=dict(self.param_spans),
            clause_spans=dict(self.clause_spans),
            stages=[s.clone() for s in self.stages],
            scratch=list(self.scratch),
        )

    def with_kernel(self, index: int, kernel: Program) -> Program:
        """A copy of a program of several kernels with kernel `index` (launch order) replaced by
        `kernel`, a program of one kernel; the others copied."""
        parts = [kernel if j == index else k.clone() for j, k in enumerate(self.kernels())]
        return replace(parts[0], stages=parts[1:], scratch=list(self.scratch))

    def with_params(self, **overrides: int) -> Program:
        """A copy whose compile-time parameters default to new values (a tactic's basic move);
        in a program of several kernels, in every kernel that declares them."""
        unknown = set(overrides) - set(self.params)
        if unknown:
            raise KeyError(f"no parameter {', '.join(sorted(unknown))} in kernel {self.name}")
        copy = self.clone()
        for k in copy.kernels():
            own = k.kernel.params
            values = {**own, **{n: v for n, v in overrides.items() if n in own}}
            k.kernel.param_defaults = ArrayAttr([IntAttr(values[n]) for n in own])
        return copy


def clone_op(op: OpT) -> OpT:
    """A deep copy of `op` and every op nested in it, each copy with its original's span and
    comments (`kir.spans`); values used but not defined inside `op` are used by the copy too.

    The copies are built field by field, not through xdsl's `Operation.clone`: that path runs
    each op's constructor (the operand setter, the definition's default properties) and walks
    the tree again to set the operands, and a third walk paired old ops with new ones for their
    spans; on the largest suite program (300 ops) that was 90% of a tactic's `apply`, and this
    takes a quarter of its time. It copies what xdsl's does (properties and attributes in new
    dicts; attributes, types and locations shared: they are immutable), the name hints as they
    are (xdsl's setter strips a `_N` suffix again) and every value's uses in the original's
    order (xdsl's come in another), so that a rewrite that follows uses sees the copy as the
    precondition saw the original. Branches between blocks (successors: none in KIR) are left
    to xdsl."""
    if any(inner._successors for inner in preorder(op)):
        copy = op.clone()
        for before, after in zip(preorder(op), preorder(copy), strict=True):
            copy_source_notes(before, after)
        return copy
    copier = _Copier()
    new = copier.op(op, None)
    copier.finish()
    return new


class _Copier:
    """The state of one `clone_op`: the copy of each value and op, by the original's id (xdsl
    hashes IR objects by id in Python code, a call per lookup)."""

    __slots__ = ("values", "pairs", "ops", "late")

    def __init__(self) -> None:
        self.values: dict[int, SSAValue] = {}
        self.pairs: list[tuple[SSAValue, SSAValue]] = []
        self.ops: dict[int, Operation] = {}
        self.late: list[tuple[Operation, SSAValues]] = []

    def op(self, old: Operation, parent: Block | None) -> Any:
        new = object.__new__(type(old))
        operands = old._operands
        values = self.values
        try:
            new._operands = SSAValues([values[id(v)] for v in operands])
            new._operand_uses = tuple(Use(new, i) for i in range(len(operands)))
            self.ops[id(old)] = new
        except KeyError:  # linked in `finish`
            self.late.append((new, operands))
            new._operands = SSAValues()
            new._operand_uses = ()
        results = []
        pairs = self.pairs
        for r in old.results:
            copy = object.__new__(type(r))
            copy._name = r._name
            copy._type = r._type
            copy.op = new
            copy.index = r.index
            values[id(r)] = copy
            pairs.append((r, copy))
            results.append(copy)
        new.results = SSAValues(results)
        new.properties = dict(old.properties)
        new.attributes = dict(old.attributes)
        new.location = old.location
        new.parent = parent
        for key in SOURCE_NOTES:
            note = getattr(old, key, None)
            if note is not None:
                setattr(new, key, note)
        if old.regions:
            new.regions = tuple(self.region(region, new) for region in old.regions)
        return new

    def region(self, old: Region, parent: Operation) -> Region:
        region = object.__new__(Region)
        region.parent = parent
        region._first_block = None
        prev: Block | None = None
        block = old._first_block
        while block is not None:
            new = object.__new__(Block)
            args = []
            for a in block._args:
                arg = object.__new__(type(a))
                arg._name = a._name
                arg._type = a._type
                arg.block = new
                arg.index = a.index
                arg.location = a.location
                self.values[id(a)] = arg
                self.pairs.append((a, arg))
                args.append(arg)
            new._name = block._name
            new._args = tuple(args)
            new.parent = region
            new._prev_block = prev
            last: Operation | None = None
            op = block._first_op
            while op is not None:
                copy = self.op(op, new)
                copy._prev_op = last
                if last is None:
                    new._first_op = copy
                else:
                    last._next_op = copy
                last = copy
                op = op._next_op
            if last is None:
                new._first_op = None
            new._last_op = last
            if prev is None:
                region._first_block = new
            else:
                prev._next_block = new
            prev = new
            block = block._next_block
        region._last_block = prev
        return region

    def finish(self) -> None:
        """Each copied value's uses, in the order of its original's (uses by ops outside the
        copied ones, of the root op's results, are the original's alone); then the operands of
        ops that use a value before (or outside) where it is defined (none in KIR's text)."""
        ops = self.ops
        for old, new in self.pairs:
            use = old.first_use
            last = None
            while use is not None:
                user = ops.get(id(use._operation))
                if user is not None:
                    copy = user._operand_uses[use._index]
                    copy._prev_use = last
                    if last is None:
                        new.first_use = copy
                    else:
                        last._next_use = copy
                    last = copy
                use = use._next_use
        values = self.values
        for op, operands in self.late:
            op.operands = [values.get(id(v), v) for v in operands]


def preorder(op: Operation) -> list[Operation]:
    """`op` and every op nested in it, in the order of xdsl's `walk` (the order of the text), as
    one list: following the blocks' links directly is several times faster than xdsl's walk, a
    generator per region, block and op."""
    out = [op]
    _nested(op, out)
    return out


def _nested(op: Operation, out: list[Operation]) -> None:
    for region in op.regions:
        block = region._first_block
        while block is not None:
            inner = block._first_op
            while inner is not None:
                out.append(inner)
                if inner.regions:
                    _nested(inner, out)
                inner = inner._next_op
            block = block._next_block


def same_ir(a: Program | KernelOp, b: Program | KernelOp) -> bool:
    """Structural equality of two programs' IR: ops, operands, types, attributes and regions
    (value names, spans and comments aside)."""
    ka = a.kernel if isinstance(a, Program) else a
    kb = b.kernel if isinstance(b, Program) else b
    if not ka.is_structurally_equivalent(kb):
        return False
    # xdsl compares operands, properties and block argument types but not result types, and
    # some ops keep their type nowhere else (the shape of `zeros(f32[BM, BN])`).
    return all(
        [r.type for r in x.results] == [r.type for r in y.results] for x, y in zip(ka.walk(), kb.walk(), strict=True)
    )
