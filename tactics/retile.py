"""`retile`: set a tile parameter (`BLOCK`, `BM`, `BK`...) to another power of two.

A tile parameter is a compile-time parameter that sizes the program's tiles (it appears in the
shape of a value) and not the kernel's interface (it names no dimension of an argument, as
`HD` does in `q: global bf16[B, H, S, HD]`). A tile-level program computes the same values for
any tile size its `where` clauses admit: the grid and the masks follow the parameter. Sums over
a tiled dimension are reordered when the tile that carries them changes size (a k-loop of BK
steps, a row of BLOCK lanes reduced as a tree), so results agree within tolerance, not bitwise.

The sizes offered are powers of two from a quarter to twice the current one that keep every
`where` clause true where it can be evaluated: the clauses on parameters alone (`BM % BN ==
0`), and, when the caller gives the shapes, every clause. The explicit level is left alone: its
shared buffers, barriers and roles are written for the tile sizes it has.
"""

from __future__ import annotations

from collections.abc import Mapping

from xdsl.dialects.builtin import ArrayAttr, IntAttr

from kir.diagnostics import Diagnostic
from kir.dialect.types import GlobalType, TileType
from kir.names import suggest
from kir.program import Program
from tactics import ir
from tactics.base import Names, Param, PowersOfTwo, Tactic, Value, not_applicable
from tactics.registry import register

NAME = "retile"
SIZES = PowersOfTwo(1, 1 << 16)


def tile_params(program: Program) -> list[str]:
    """The parameters that size a value's tile and no argument's shape, in declaration order."""
    kernel = program.kernel
    interface: set[str] = set()
    for _, arg in kernel.args:
        if isinstance(arg.type, GlobalType):
            for d in [*arg.type.shape.data, *arg.type.strides.data]:
                interface |= d.data.symbols()
    sizing: set[str] = set()
    for op in kernel.walk():
        for result in op.results:
            if isinstance(result.type, TileType):
                for d in result.type.shape.data:
                    sizing |= d.data.symbols()
    return [p for p in kernel.params if p in sizing and p not in interface]


def _clauses_hold(program: Program, env: Mapping[str, int]) -> str | None:
    """The first `where` clause that `env` decides and breaks, as text; None when none."""
    for clause in program.kernel.where.data:
        expr = clause.data
        if expr.symbols() <= set(env):
            try:
                if not expr.evaluate(env):
                    return str(expr)
            except ZeroDivisionError:
                return str(expr)
    return None


def _check(program: Program, target: str) -> list[Diagnostic]:
    explicit = ir.explicit_level(
        NAME, program, "where buffers and roles are sized for its tiles", "retile the tile-level program it came from"
    )
    if explicit:
        return explicit
    if not tile_params(program):
        return [
            not_applicable(
                NAME,
                "no-tile-param",
                program.span(),
                "no compile-time parameter sizes a tile (a parameter that names an argument's dimension is not one)",
                "write the tile size as a parameter: kernel k<BLOCK = 1024>(...) ... arange(0, BLOCK)",
            )
        ]
    return []


def _validate(program: Program, values: dict[str, Value]) -> list[Diagnostic]:
    name, value = str(values["param"]), int(values["value"])
    tiles = tile_params(program)
    if name not in tiles:
        where = ir.param_span(program, name) if name in program.params else program.span()
        return [
            Diagnostic(
                "tactic.retile.not-a-tile",
                "error",
                where,
                f"tactic retile: {name} is not a tile parameter of kernel {program.name}",
                suggest(name, tiles) or f"tile parameters: {', '.join(tiles)}",
            )
        ]
    broken = _clauses_hold(program, {**program.params, name: value})
    if broken is not None:
        return [
            Diagnostic(
                "tactic.retile.where",
                "error",
                ir.clause(program, "where"),
                f"tactic retile: {name} = {value} breaks `where {broken}`",
                "choose a size the where clauses admit",
            )
        ]
    return []


def _domains(program: Program, target: str, shapes: Mapping[str, int]) -> dict[str, tuple[Value, ...]]:
    tiles = tile_params(program)
    sizes: set[int] = set()
    for name in tiles:
        current = program.params[name]
        for v in SIZES.values():
            if current // 4 <= v <= current * 2 and v != current:
                if _clauses_hold(program, {**shapes, **program.params, name: v}) is None:
                    sizes.add(v)
    return {"param": tuple(tiles), "value": tuple(sorted(sizes))}


def _rewrite(program: Program, *, param: str, value: int) -> None:
    values = {**program.params, param: value}
    program.kernel.param_defaults = ArrayAttr([IntAttr(values[n]) for n in program.params])


RETILE = register(
    Tactic(
        name=NAME,
        summary="set a tile parameter to another power of two",
        explain=__doc__ or "",
        params=(
            Param("param", Names("a tile parameter"), None, "the compile-time parameter that sizes the tile"),
            Param("value", SIZES, None, "its new value, a power of two"),
        ),
        numerics="reassociates",
        check=_check,
        rewrite=_rewrite,
        domains_of=_domains,
        validate=_validate,
        anchor=lambda program: program.span(),
        examples=("kir tactics apply benchmarks/tasks/gemm/seed.kir retile --param param=BM --param value=128",),
    )
)
