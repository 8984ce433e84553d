"""A KIR program: the kernel op plus what the text around it carried (source, spans, comments).

Spans and comments are kept beside the IR rather than in op attributes, so that two programs
that differ only in layout or comments are the same IR (`same_ir`) and hash alike.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

from xdsl.ir import Operation

from kir.diagnostics import Span
from kir.dialect.structure import KernelOp

_SPAN = "_kir_span"
_COMMENTS = "_kir_comments"
_BLOCK_COMMENTS = "_kir_block_comments"


def span_of(op: Operation) -> Span | None:
    return getattr(op, _SPAN, None)


def set_span(op: Operation, span: Span | None) -> None:
    if span is not None:
        setattr(op, _SPAN, span)


def comments_of(op: Operation) -> tuple[list[str], str | None, bool]:
    """The comment lines written before an op's statement, the one after it on its line, and
    whether a blank line precedes it."""
    return getattr(op, _COMMENTS, ([], None, False))


def set_comments(op: Operation, leading: list[str], trailing: str | None, blank_before: bool = False) -> None:
    if leading or trailing or blank_before:
        setattr(op, _COMMENTS, (leading, trailing, blank_before))


def block_comments_of(op: Operation, region: int = 0) -> tuple[str | None, list[str], bool]:
    """For the block of region `region` of a kernel, loop, branch or role: the comment after its
    `{`, the comment lines after its last statement, and whether a blank line precedes those."""
    return getattr(op, _BLOCK_COMMENTS, {}).get(region, (None, [], False))


def set_block_comments(op: Operation, region: int, head: str | None, end: list[str], end_blank: bool = False) -> None:
    if head or end:
        blocks = dict(getattr(op, _BLOCK_COMMENTS, {}))  # a clone may share the old dict
        blocks[region] = (head, end, end_blank and bool(end))
        setattr(op, _BLOCK_COMMENTS, blocks)


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
        from kir.printer import print_program

        return print_program(self)

    def content_hash(self) -> str:
        """Identifies the program: sha256 of its canonical text with comments left out."""
        from kir.printer import print_program

        return hashlib.sha256(print_program(self, comments=False).encode()).hexdigest()

    def span(self) -> Span | None:
        return span_of(self.kernel)

    def clone(self) -> Program:
        """A deep copy: new ops (spans and comments kept), so the copy can be changed freely."""
        kernel = self.kernel.clone()
        for old, new in zip(self.kernel.walk(), kernel.walk(), strict=True):
            for key in (_SPAN, _COMMENTS, _BLOCK_COMMENTS):
                if hasattr(old, key):
                    setattr(new, key, getattr(old, key))
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
        from xdsl.dialects.builtin import ArrayAttr, IntAttr

        unknown = set(overrides) - set(self.params)
        if unknown:
            raise KeyError(f"no parameter {', '.join(sorted(unknown))} in kernel {self.name}")
        copy = self.clone()
        values = {**self.params, **overrides}
        copy.kernel.param_defaults = ArrayAttr([IntAttr(values[n]) for n in self.params])
        return copy


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
