"""What every chip's model starts from and answers with: the parameters and shape symbols bound
and checked (`bind_env`), the program counted (`count_or_fail`), and the `Estimate` with its
breakdown of `Term`s. The GPU model (`model.py`) and the mtia-sim model (`mtia.py`) share them;
`model.py` picks one of the two for a target, so they live below both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from costmodel.checks import Checks
from costmodel.counting import CountError, Counts, count
from costmodel.occupancy import Occupancy
from costmodel.timing import Raw
from kir.diagnostics import Diagnostic, KirError, Span
from kir.dialect.types import SmemType, TileType, shape_of
from kir.program import Program, span_of
from kir.where import where_span

LARGEST_VALUE = 1 << 62  # sizes and parameters evaluate in int64 (numpy), with room for a sum


@dataclass(frozen=True)
class Term:
    """One line of the breakdown: a cost and the op (span) that causes it."""

    name: str
    seconds: float
    amount: float  # bytes or operations (all programs)
    unit: str  # "bytes", "flops", "ops", "s"
    span: Span | None = None
    note: str = ""
    resource: str = ""

    def to_json(self) -> dict[str, Any]:
        s = self.span
        return {
            "name": self.name,
            "seconds": self.seconds,
            "amount": self.amount,
            "unit": self.unit,
            "resource": self.resource,
            "note": self.note,
            "span": None if s is None else {"file": s.file, "line": s.line, "col": s.col},
        }


@dataclass
class Estimate:
    time_s: float
    bottleneck: str
    breakdown: list[Term]
    counts: dict[str, float]
    occupancy: Occupancy
    waves: float
    hints: list[Diagnostic] = field(default_factory=list)
    resources: dict[str, float] = field(default_factory=dict)  # seconds per resource over all waves
    uncalibrated_s: float = 0.0
    target: str = ""
    raw: Raw | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "time_s": self.time_s,
            "uncalibrated_s": self.uncalibrated_s,
            "bottleneck": self.bottleneck,
            "waves": self.waves,
            "occupancy": self.occupancy.to_json(),
            "counts": self.counts,
            "resources": self.resources,
            "breakdown": [t.to_json() for t in self.breakdown],
            "hints": [d.to_json() for d in self.hints],
            "concurrent": self.raw.concurrent if self.raw is not None else None,  # programs resident at once
        }


def bind_env(
    program: Program, params: dict[str, int] | None, shapes: dict[str, int] | None, checks: Checks | None = None
) -> dict[str, int]:
    """The values of every parameter and shape symbol, checked: each shape given, in range, at
    least 1, the kernel's `where` holding (`checks` says when no shapes would), no empty tile."""
    env = {**program.params, **(params or {}), **(shapes or {})}
    missing = [s for s in program.kernel.shape_symbols if s not in env]
    if missing:
        raise KirError(
            Diagnostic(
                "cost.shape",
                "error",
                program.span(),
                f"the cost of {program.name} depends on shape symbols with no value: {', '.join(missing)}",
                "give them: --shape " + " --shape ".join(f"{m}=..." for m in missing),
            )
        )
    for name, value in env.items():
        if not -LARGEST_VALUE <= value <= LARGEST_VALUE:
            span = program.param_spans.get(name) or program.span()
            raise KirError(
                Diagnostic(
                    "cost.value",
                    "error",
                    span,
                    f"`{name} = {value}` is beyond what the cost model evaluates (|value| <= 2^62)",
                    "a size or parameter that large launches no kernel a GPU runs; give a realistic value",
                )
            )
    _check_shapes(program, env)
    _check_where(program, env, checks)
    _check_tiles(program, env)
    return env


def _check_shapes(program: Program, env: dict[str, int]) -> None:
    """A shape symbol is a size: at least 1, as the verifier assumes of every shape symbol."""
    for name in program.kernel.shape_symbols:
        if env[name] >= 1:
            continue
        arg = next((a for a, v in program.kernel.args if name in _arg_symbols(v)), None)
        raise KirError(
            Diagnostic(
                "cost.shape",
                "error",
                (program.arg_spans.get(arg) if arg is not None else None) or program.span(),
                f"shape symbol `{name}` = {env[name]}: a size is at least 1",
                f"give it a positive value: --shape {name}=...",
            )
        )


def _arg_symbols(arg) -> set[str]:
    t = arg.type
    return set().union(*(d.data.symbols() for d in [*t.shape.data, *t.strides.data]))


def _check_where(program: Program, env: dict[str, int], checks: Checks | None) -> None:
    """The kernel's `where` holds for these shapes and parameters: the program is written only
    for those (`where N <= BLOCK`: one tile a row), so any other estimate counts the wrong
    bytes. When the parameters alone leave no shapes, `checks` (the verifier's `types.where`, as
    `kir check` reports it) says so instead."""
    broken = [w.data for w in program.kernel.where.data if not _holds(w.data, env)]
    if not broken:
        return
    if checks is not None:
        contradiction = checks.where_contradiction(program, {k: env[k] for k in program.params})
        if contradiction:
            raise KirError(contradiction)
    expr = broken[0]
    shown = ", ".join(f"{s} = {env[s]}" for s in sorted(expr.symbols()) if s in env)
    raise KirError(
        Diagnostic(
            "cost.where-violated",
            "error",
            where_span(program),
            f"these shapes break `where {expr}`: {shown}; the program is not written for them",
            "give shapes that satisfy the constraint (--shape), or parameters that admit them (--param)",
        )
    )


def _holds(expr, env: dict[str, int]) -> bool:
    try:
        return bool(expr.evaluate(env))
    except ZeroDivisionError:  # `K % BK == 0` with BK = 0: no shape satisfies it
        return False


def _check_tiles(program: Program, env: dict[str, int]) -> None:
    """Every tile and shared buffer has at least one element along each dimension (a
    non-positive `BLOCK` the `where` does not rule out would count negative bytes)."""
    for op in program.kernel.walk():
        for r in op.results:
            if not isinstance(r.type, TileType | SmemType):
                continue
            for d in shape_of(r.type):
                try:
                    n = d.evaluate(env)
                except (KeyError, ZeroDivisionError):
                    continue  # the count reports what it cannot evaluate
                if n >= 1:
                    continue
                shown = ", ".join(f"{s} = {env[s]}" for s in sorted(d.symbols()) if s in env)
                what = "tile" if isinstance(r.type, TileType) else "shared buffer"
                raise KirError(
                    Diagnostic(
                        "cost.value",
                        "error",
                        span_of(op) or program.span(),
                        f"this {what}'s dimension `{d}` is {n} (with {shown}): a {what} has at least one "
                        "element along each dimension",
                        "give the parameters positive values",
                    )
                )


def count_or_fail(program: Program, env: dict[str, int]) -> Counts:
    """`count`, its failure as a `cost.count` diagnostic."""
    try:
        counts, _ = count(program, env)
    except CountError as err:
        raise KirError(Diagnostic("cost.count", "error", program.span(), str(err))) from None
    return counts
