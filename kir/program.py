"""A KIR program: the kernel op plus what the text around it carried (source, spans, comments).

Spans and comments are kept beside the IR rather than in op attributes (`kir.spans`), so that two
programs that differ only in layout or comments are the same IR (`same_ir`) and hash alike.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

from xdsl.dialects.builtin import ArrayAttr, IntAttr
from xdsl.ir import Operation

from kir.diagnostics import Span
from kir.dialect.structure import KernelOp
from kir.printer import print_program
from kir.spans import (
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
    "same_ir",
    "span_of",
    "set_span",
    "comments_of",
    "set_comments",
    "block_comments_of",
    "set_block_comments",
]


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

    @property
    def name(self) -> str:
        return self.kernel.kernel_name

    @property
    def params(self) -> dict[str, int]:
        return self.kernel.params

    def text(self) -> str:
        """The canonical text of the program."""
        return print_program(self)

    def content_hash(self) -> str:
        """Identifies the program: sha256 of its canonical text with comments left out."""
        return hashlib.sha256(print_program(self, comments=False).encode()).hexdigest()

    def span(self) -> Span | None:
        return span_of(self.kernel)

    def clone(self) -> Program:
        """A deep copy: new ops (spans and comments kept), so the copy can be changed freely."""
        kernel = self.kernel.clone()
        for old, new in zip(_preorder(self.kernel), _preorder(kernel), strict=True):
            copy_source_notes(old, new)
        return replace(
            self,
            kernel=kernel,
            header_comments=list(self.header_comments),
            footer_comments=list(self.footer_comments),
            arg_spans=dict(self.arg_spans),
            param_spans=dict(self.param_spans),
            clause_spans=dict(self.clause_spans),
        )

    def with_params(self, **overrides: int) -> Program:
        """A copy whose compile-time parameters default to new values (a tactic's basic move)."""
        unknown = set(overrides) - set(self.params)
        if unknown:
            raise KeyError(f"no parameter {', '.join(sorted(unknown))} in kernel {self.name}")
        copy = self.clone()
        values = {**self.params, **overrides}
        copy.kernel.param_defaults = ArrayAttr([IntAttr(values[n]) for n in self.params])
        return copy


def _preorder(op: Operation) -> list[Operation]:
    """`op` and every op nested in it, in the order of xdsl's `walk`, as one list (xdsl's walk
    is a generator per region, block and op: a third of cloning a program)."""
    out: list[Operation] = []
    stack = [op]
    while stack:
        top = stack.pop()
        out.append(top)
        nested = [inner for region in top.regions for block in region.blocks for inner in block.ops]
        stack.extend(reversed(nested))
    return out


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
