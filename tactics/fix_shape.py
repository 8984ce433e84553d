"""`fix-shape`: fix a shape symbol to a constant (`where N == 8192`).

The clause is an assumption the verifier and the lowering may use (a loop over N / CH chunks
gets a constant trip count and unrolls; a divisibility is known; masks can be proved always
true) and that the interpreter and the harness check at launch. On inputs of that shape the
program computes exactly what it did; on others it refuses to run, with `interp.where-violated`.
The values offered are the shapes the caller says the program will run at.
"""

from __future__ import annotations

from collections.abc import Mapping

from xdsl.dialects.builtin import ArrayAttr

from kir import symexpr as sx
from kir.diagnostics import Diagnostic
from kir.dialect.types import SymAttr
from kir.names import suggest
from kir.program import Program
from tactics import ir
from tactics.base import IntRange, Names, Param, Tactic, Value, not_applicable
from tactics.registry import register

NAME = "fix-shape"


def fixed(program: Program) -> dict[str, int]:
    """The shape symbols a `where S == constant` clause already fixes."""
    out = {}
    for clause in program.kernel.where.data:
        e = clause.data
        if isinstance(e, sx.Bin) and e.op == "==":
            for a, b in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
                if isinstance(a, sx.Sym) and b.as_int() is not None:
                    out[a.name] = int(b.as_int())  # type: ignore[arg-type]
    return out


def free_symbols(program: Program) -> list[str]:
    done = fixed(program)
    return [s for s in program.kernel.shape_symbols if s not in done]


def _check(program: Program, target: str) -> list[Diagnostic]:
    if free_symbols(program):
        return []
    return [
        not_applicable(
            NAME,
            "none-free",
            ir.clause(program, "where"),
            "every shape symbol is fixed already" if program.kernel.shape_symbols else "the kernel has no shape symbol",
        )
    ]


def _validate(program: Program, values: dict[str, Value]) -> list[Diagnostic]:
    symbol, value = str(values["symbol"]), int(values["value"])
    free = free_symbols(program)
    if symbol not in free:
        said = "is fixed already" if symbol in fixed(program) else "is not a shape symbol"
        return [
            Diagnostic(
                "tactic.fix-shape.symbol",
                "error",
                ir.clause(program, "where") if symbol in fixed(program) else program.span(),
                f"tactic fix-shape: {symbol} {said} of kernel {program.name}",
                suggest(symbol, free) or f"free shape symbols: {', '.join(free) or 'none'}",
            )
        ]
    env = {**program.params, symbol: value}
    for clause in program.kernel.where.data:
        expr = clause.data
        if expr.symbols() <= set(env) and not expr.evaluate(env):
            return [
                Diagnostic(
                    "tactic.fix-shape.where",
                    "error",
                    ir.clause(program, "where"),
                    f"tactic fix-shape: {symbol} = {value} breaks `where {expr}`",
                    "no input of that shape could run this program",
                )
            ]
    return []


def _domains(program: Program, target: str, shapes: Mapping[str, int]) -> dict[str, tuple[Value, ...]]:
    free = free_symbols(program)
    return {"symbol": tuple(free), "value": tuple(sorted({shapes[s] for s in free if s in shapes}))}


def _rewrite(program: Program, *, symbol: str, value: int) -> None:
    clause = SymAttr(sx.Bin("==", sx.Sym(symbol), sx.Int(value)))
    program.kernel.where = ArrayAttr([*program.kernel.where.data, clause])


FIX_SHAPE = register(
    Tactic(
        name=NAME,
        summary="fix a shape symbol to a constant: where N == 8192",
        explain=__doc__ or "",
        params=(
            Param("symbol", Names("a shape symbol"), None, "the shape symbol to fix"),
            Param("value", IntRange(1, 2**31 - 1), None, "its value"),
        ),
        numerics="exact",
        check=_check,
        rewrite=_rewrite,
        domains_of=_domains,
        validate=_validate,
        anchor=lambda program: ir.clause(program, "where"),
        examples=("kir tactics apply benchmarks/tasks/rmsnorm/seed.kir fix-shape --param symbol=N --param value=8192",),
    )
)
