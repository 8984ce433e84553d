"""types.where: no shapes satisfy the kernel's `where` clauses with the parameters being checked.

The rule is registered with the other typing rules (`verifier/rules/types.py`); the check lives
here, apart from the rules' fixes, because the engine runs it before every other rule (a
contradiction makes every proof vacuous) and imports it when it does."""

from __future__ import annotations

import re

import z3

from kir.diagnostics import Diagnostic, Edit
from kir.where import where_span
from verifier.context import Context


def unsatisfiable_where(ctx: Context) -> list[Diagnostic]:
    """The diagnostic when no shapes satisfy the `where` clauses with the context's parameters
    (cached per context)."""
    if "_where_unsat" not in ctx.__dict__:
        ctx.__dict__["_where_unsat"] = _unsatisfiable_where(ctx)
    return ctx.__dict__["_where_unsat"]


def _unsatisfiable_where(ctx: Context) -> list[Diagnostic]:
    sym = ctx.symbolic
    clauses = list(ctx.kernel.where.data)
    at_least_one = [sym.sym_var(n) >= 1 for n in ctx.kernel.shape_symbols]

    def unsat(chosen) -> bool:
        solver = z3.Solver()
        solver.set("timeout", 1000)
        solver.add(*at_least_one, *(sym.bool_sym(c.data) for c in chosen))
        return solver.check() == z3.unsat

    if not clauses:
        return []
    # Asked first through the proof cache (a program checked again asks the same), as a claim
    # that cannot hold: it is refuted exactly when the clauses (with every shape symbol at
    # least 1, as `unsat` assumes) are satisfiable. The culprit search below runs only on a
    # contradiction.
    assumed = [*at_least_one, *(sym.bool_sym(c.data) for c in clauses)]
    if sym.counterexample(z3.BoolVal(False), assumed) is not None or not unsat(clauses):
        return []
    # the first clause that fails on its own, else the shortest prefix that fails together
    culprit = next(([c] for c in clauses if unsat([c])), None)
    culprit = culprit or next((clauses[:n] for n in range(1, len(clauses) + 1) if unsat(clauses[:n])), clauses)
    text = ", ".join(str(c.data) for c in culprit)
    names = set().union(*(c.data.symbols() for c in culprit))
    params = ", ".join(f"{k} = {v}" for k, v in sorted(ctx.params.items()) if k in names) or "these parameters"
    span = where_span(ctx.program)
    # one clause that fails alone, the others holding together: the parameter it bounds set
    fix = _where_fix(ctx, str(culprit[0].data)) if len(culprit) == 1 else None
    edits = (fix,) if fix is not None and not unsat([c for c in clauses if c is not culprit[0]]) else ()
    return [
        ctx.report(
            span,
            f"no shapes satisfy `where {text}` with {params}: every check would hold vacuously, so none was made",
            hint=f"give the parameter a value the clause allows: `{culprit[0].data.symbols().pop()} {edits[0].text}`"
            if edits
            else "",
            rule="types.where",
            severity="error",
            edits=edits,
        )
    ]


_BOUNDS = {">=": 0, "<=": 0, "==": 0, ">": 1, "<": -1}


def _where_fix(ctx: Context, clause: str) -> Edit | None:
    """For a clause that bounds one parameter by a number (`S >= 3`), the edit that gives the
    parameter the nearest value it allows as its default; None where the parameter's value is
    not its default (given on the command line) or the clause is of another form."""
    found = re.fullmatch(r"(\w+) (>=|<=|==|>|<) (\d+)", clause)
    if found is None or ctx.kernel.params.get(found.group(1), None) != ctx.params.get(found.group(1)):
        return None
    name, op, bound = found.group(1), found.group(2), int(found.group(3))
    return param_value(ctx, name, bound + _BOUNDS[op])


def param_value(ctx: Context, name: str, value: int) -> Edit | None:
    """The edit that gives the parameter `name` the default `value` (`K = 128` to `K = 64`)."""
    span = ctx.program.param_spans.get(name)
    return ctx.replace_in(span, f"= {ctx.kernel.params.get(name)}", f"= {value}") if span is not None else None
