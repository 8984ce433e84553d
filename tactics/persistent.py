"""`persistent`: launch one program per SM and let each walk the tiles (`grid(G0, G1)` ->
`grid(NSM)` and `for tile in program_id(0) .. G0 * G1 step NSM { ... }`).

A grid of many more tiles than SMs runs in waves: each program pays its launch and prologue
(address arithmetic, the pipeline's first copies) and the last wave may leave SMs idle. A
persistent grid launches NSM programs, one an SM, and program p computes tiles p, p + NSM,
p + 2 NSM..., so the tiles are taken in the order the hardware would launch them (axis 0
fastest), with `program_id(a)` replaced by the tile's coordinate on axis a:

    axis 0: tile % G0     axis 1: tile / G0 % G1     axis 2: tile / (G0 * G1)

(one axis: the tile itself), and `num_programs(a)` by the old extent G_a. The body moves into
the tile loop, whole (a tile hoisted out of it would be held in registers across every
tile). Each tile is computed by the same ops as
before, once: exact. With grouped-order first, this is the persistent GEMM of Triton's
tutorials, whose tiles run in groups of GM rows.

Offered for a tile-level program with a loop in its body (a program that does enough work per
tile for the launch order to matter); NSM is the target's SM count, or twice it (two programs an
SM where registers and shared memory allow).
"""

from __future__ import annotations

from collections.abc import Mapping

from xdsl.ir import Block, Region, SSAValue

from costmodel.spec import chip
from kir import symexpr as sx
from kir.diagnostics import Diagnostic
from kir.dialect.structure import ForOp, YieldOp
from kir.dialect.tile import ProgramIdOp
from kir.dialect.types import scalar
from kir.program import Program, set_span
from tactics import _grid, ir
from tactics.base import IntRange, Param, Tactic, Value, not_applicable
from tactics.registry import register

NAME = "persistent"


# Streaming multiprocessors (compute units) per chip: H100/H200 SXM 132, A100 108, MI250X's
# GCD 110, MI300X 304.
def _check(program: Program, target: str) -> list[Diagnostic]:
    explicit = _grid.explicit_reason(NAME, program)
    if explicit:
        return explicit
    if "NSM" in program.params:
        return [
            not_applicable(
                NAME,
                "persistent",
                ir.clause(program, "grid"),
                "the grid is persistent already (its programs are the NSM parameter): a second one would nest the tile loops",
                "change the program count with `kir tactics apply ... retile --param param=NSM`, or start from the tiled grid",
            )
        ]
    if not any(isinstance(op, ForOp) for op in program.kernel.body.block.ops):
        return [
            not_applicable(
                NAME,
                "no-loop",
                ir.clause(program, "grid"),
                "the body has no loop: a program does too little work per tile for a persistent grid to pay",
                "a persistent grid is for programs with a k-loop or a stream of blocks per tile",
            )
        ]
    return []


def _domains(program: Program, target: str, shapes: Mapping[str, int]) -> dict[str, tuple[Value, ...]]:
    # the target's SMs (mtia-sim: its PEs), from the chip tables the cost model keeps
    try:
        sms = chip(target).sms
    except (KeyError, ValueError):
        sms = 132
    return {"programs": (sms, 2 * sms)}


def _rewrite(program: Program, *, programs: int) -> None:
    kernel = program.kernel
    extents = _grid.grid(program)
    nsm = _grid.add_param(program, "NSM", programs)
    body = kernel.body.block
    ids = _grid.program_ids(program)
    span = ir.span(program, ids[0] if ids else next(iter(body.ops), None))
    taken = _grid.taken_names(program)

    # The whole body moves into the loop: values computed before a loop that the loop assigns
    # again (the accumulator's zeros) would be renamed by the printer, and a tile hoisted out
    # of it is held in registers across every tile.
    tile_body = Block(arg_types=[scalar("i32")])
    tile = tile_body.args[0]
    tile.name_hint = _grid.fresh("tile", taken)
    for op in list(body.ops):
        op.detach()
        tile_body.add_op(op)
    tile_body.add_op(YieldOp())

    emit = _grid.Emitter(body, None, span)
    total = emit.static(_product(extents), _grid.fresh("tiles", taken))
    start_op = ProgramIdOp(0)
    start = emit(start_op)
    step = emit.static(sx.Sym(nsm))
    loop = ForOp(start, total, step, [], Region(tile_body))
    set_span(loop, span)
    body.add_op(loop)

    inner = _grid.Emitter(tile_body, tile_body.first_op, span)
    coordinates: dict[int, SSAValue] = {}
    if len(extents) == 1:
        coordinates[0] = tile
    else:
        names = [_grid.fresh(f"pid_{a}", taken) for a in range(len(extents))]
        coordinates[0] = inner.binary("rem", tile, inner.static(extents[0]), names[0])
        if len(extents) == 2:
            coordinates[1] = inner.binary("div", tile, inner.static(extents[0]), names[1])
        else:
            rest = inner.binary("div", tile, inner.static(extents[0]))
            coordinates[1] = inner.binary("rem", rest, inner.static(extents[1]), names[1])
            coordinates[2] = inner.binary("div", tile, inner.static(sx.Bin("*", extents[0], extents[1])), names[2])
    _grid.stand_in(program, coordinates, keep=start_op)
    _grid.set_grid(program, [sx.Sym(nsm)])
    _grid.bound_i32(program, [_product(extents)])  # the tile number is i32


def _product(extents: list[sx.SymExpr]) -> sx.SymExpr:
    out = extents[0]
    for e in extents[1:]:
        out = sx.Bin("*", out, e)
    return out


PERSISTENT = register(
    Tactic(
        name=NAME,
        summary="one program per SM, each walking the tiles: grid(NSM) and a loop over tile ids",
        explain=__doc__ or "",
        params=(Param("programs", IntRange(1, 4096), 132, "NSM: the programs launched (the SM count, or twice it)"),),
        numerics="exact",
        check=_check,
        rewrite=_rewrite,
        domains_of=_domains,
        anchor=lambda program: ir.clause(program, "grid"),
        examples=("kir tactics apply benchmarks/tasks/gemm/seed.kir persistent --param programs=132",),
    )
)
