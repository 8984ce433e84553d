"""What the tactics share about a program's IR: its loops and loads in the order they are
written, where its clauses are, and whether it is at the hardware-explicit level."""

from __future__ import annotations

from collections.abc import Mapping

from xdsl.ir import Operation

from kir.diagnostics import Diagnostic, Span
from kir.dialect.structure import ForOp, RoleOp
from kir.dialect.tile import LoadOp
from kir.dialect.traits import is_explicit
from kir.dialect.types import GlobalType
from kir.program import Program, preorder, span_of
from kir.where import where_span
from tactics.base import not_applicable


def ops(program: Program) -> list[Operation]:
    """Every op of the kernel, the kernel first, in the order of the text: `kernel.walk()` as a
    list, several times faster (xdsl's walk is a generator per region, block and op, and each
    tactic's precondition walks the program)."""
    return preorder(program.kernel)


def loops(program: Program) -> list[ForOp]:
    """Every `for` loop, in the order of the text (outer before inner)."""
    return [op for op in ops(program) if isinstance(op, ForOp)]


def global_loads(program: Program) -> list[LoadOp]:
    """Every load of a global tensor, in the order of the text."""
    return [op for op in ops(program) if isinstance(op, LoadOp) and isinstance(op.mem.type, GlobalType)]


def first_explicit(program: Program) -> Operation | None:
    """The first op of the hardware-explicit level (a role, shared memory, a barrier...), if any."""
    for op in ops(program):
        if isinstance(op, RoleOp) or is_explicit(op):
            return op
    return None


def explicit_level(tactic: str, program: Program, why: str, hint: str = "") -> list[Diagnostic]:
    """A `tactic.<name>.explicit` reason, at the first explicit-level op, when the program is at
    the hardware-explicit level (where `why` says what the tactic would have to rewrite by
    hand), else nothing."""
    explicit = first_explicit(program)
    if explicit is None:
        return []
    return [
        not_applicable(
            tactic, "explicit", span(program, explicit), f"the program is at the explicit level, {why}", hint
        )
    ]


def span(program: Program, op: Operation | None) -> Span | None:
    """Where `op` was written, else the nearest enclosing op's span, else the kernel's."""
    while op is not None:
        found = span_of(op)
        if found is not None:
            return found
        op = op.parent_op()
    return program.span()


def clause(program: Program, name: str) -> Span | None:
    """The span of a header clause ("target", "grid", "launch", "where"), else the kernel's."""
    if name == "where":
        return where_span(program)
    return program.clause_spans.get(name) or program.span()


def param_span(program: Program, name: str) -> Span | None:
    """The span of a compile-time parameter's declaration (`BM = 64`), else the kernel's."""
    return program.param_spans.get(name) or program.span()


def no_site(
    tactic: str, why: str, program: Program, kind: type[Operation], message: str, without: str, hint: str
) -> list[Diagnostic]:
    """The reason of a tactic that found no place to apply: located at the first op of `kind`
    (with `message`: such ops are there, none fits), else at the kernel (`without`: there is
    no such op at all)."""
    found = next((op for op in ops(program) if isinstance(op, kind)), None)
    where = span(program, found) if found is not None else program.span()
    return [not_applicable(tactic, why, where, message if found is not None else without, hint)]


def site_choice(tactic: str, what: str, sites, op_of=lambda site: site):
    """The `validate` and `domains_of` of a tactic whose `site` parameter picks one of the
    places it applies (`sites(program)`, in the order of the text): the value must name one of
    them, located at the last one (or the kernel) when it does not; the domain is every index.
    `what` names the places in the message ("such divisions"); `op_of` gives a site's op."""

    def validate(program: Program, values: dict) -> list[Diagnostic]:
        found = sites(program)
        if int(values["site"]) < len(found):
            return []
        return [
            Diagnostic(
                f"tactic.{tactic}.site",
                "error",
                span(program, op_of(found[-1])) if found else program.span(),
                f"tactic {tactic}: site = {values['site']}, but the kernel has {len(found)} {what}",
                f"site is 0 .. {len(found) - 1}, in the order of the text",
            )
        ]

    def domains_of(program: Program, target: str, shapes: Mapping[str, int]) -> dict[str, tuple]:
        return {"site": tuple(range(len(sites(program))))}

    return validate, domains_of
