"""The passes a program goes through on its way to a backend, in one order: `passes_for(program,
backend, target)` is the schedule, `run_passes(program, backend, params)` applies it, and
`lowering.entry.lower` calls `run_passes` before it asks the emitter anything.

Which hints go through a pass. A tile-level hint is carried out by the backend itself, or by
the pass that lowers it to the explicit level, or not at all (each target's `native_hints` and `hints_through_passes`, lowering.targets):

| backend | `pipeline(stages = S)` | `warp_specialize` |
| --- | --- | --- |
| triton | itself: `tl.range(..., num_stages=S)` | itself: `tl.range(..., warp_specialize=True)` |
| gluon (explicit level only) | `PipelinePass` (its cp.async copies gluon does not lower: refused) | `WarpSpecializePass` |
| cuda | a plain loop | `WarpSpecializePass` (TMA and wgmma roles) |
| hip, mtia-sim | a plain loop | a plain loop (no TMA, no wgmma) |

A hint lowered as a plain loop gets a `lower.hint` warning at its loop (one that a pass could
not carry out has that pass's warning instead). The cuda backend keeps `pipeline` as a plain
loop because it copies cp.async one element at a time and so refuses it for 2-byte dtypes
(`PipelinePass` would turn the suite's bf16 GEMMs from lowerings into refusals), and because the
cuda code of the suite's pipelined programs is pinned (tests/test_golden.py). An explicit-level
program, and one without these hints, goes through no pass. So every suite and example program
lowers as it did before the schedule (none carries `warp_specialize`); what changed is that a
tile-level `warp_specialize` loop gets its roles on cuda (a plain loop before, whose
tile-level 128 x 128 GEMM nvcc did not finish in 600 s) and reaches gluon (refused before).

The order, and why:
1. `LegalizePass(target)`: on the ops as the author wrote them, so its errors point at them and
   its rewrites give the later passes ops the explicit level takes (gluon has no `dot`: a dot
   below the matrix instruction becomes a multiply and a sum, which it lowers).
2. `WarpSpecializePass()`: before the pipeline pass, because it takes a loop's
   `pipeline(stages = S)` as the depth of its ring, and because it refuses a kernel that already
   holds explicit ops (the cp.async copies the pipeline pass writes).
3. `PipelinePass()`: the `pipeline(stages = S)` loops that are left (a loop the warp
   specialization refused included).
4. `LayoutPass(target)`, for gluon: last, since it writes down the register layouts the gluon
   backend chooses, which exist only for a program the backend takes; it runs only when the
   passes before it have brought the program there.

What comes back. When the backend takes the passes' output: that output (so `Lowered.program`
is what was emitted) with the passes' warnings. Otherwise the program as written, which the
backend lowers as a plain loop (cuda) or refuses as it always did (gluon), with the passes'
warnings and, as warnings, what the backend refuses in the passes' output (once per kind).
"""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from kir.diagnostics import Diagnostic
from kir.dialect.structure import ForOp
from kir.dialect.types import SymAttr
from kir.program import Program, span_of
from lowering.emit.base import Emitter, emitter_of, program_level
from lowering.passes import PassResult
from lowering.passes.layouts import LayoutPass
from lowering.passes.legalize import LegalizePass
from lowering.passes.pipeline import PipelinePass
from lowering.passes.warp_specialize import WarpSpecializePass
from lowering.targets import emitting
from lowering.targets import target as target_of

Pass = LegalizePass | WarpSpecializePass | PipelinePass | LayoutPass

HINT_RULE = "lower.hint"


ELSEWHERE = {
    "pipeline": "lower it with triton, which pipelines the loop itself (num_stages), or write the cp.async "
    "copies into a shared ring at the explicit level",
    "warp_specialize": "lower it with gluon or cuda, which take the loop through the warp-specialization pass, "
    "or write the producer and consumer roles at the explicit level",
}


def hints(loop: ForOp) -> list[str]:
    """The hints on a loop, in the order they are written."""
    return [name for name, attr in (("pipeline", loop.stages), ("warp_specialize", loop.warp_specialize)) if attr]


def hinted_loops(program: Program) -> list[ForOp]:
    return [op for op in program.kernel.walk() if isinstance(op, ForOp) and hints(op)]


def passes_for(program: Program, backend: str, target: str) -> list[Pass]:
    """The passes `program` goes through for `backend` (a target that lowers, lowering.targets)
    and `target` (a target table name, kir/targets/), in the order they run; empty when the
    backend gets the program as written."""
    emitter = emitter_of(backend)
    if program_level(program) != "tile" or "explicit" not in emitter.levels:
        return []  # the passes lower the tile level to the explicit level, for a backend that takes it
    declared = target_of(backend)  # the hints it takes through the passes, its layouts: lowering.targets
    present = {h for loop in hinted_loops(program) for h in hints(loop)} & declared.hints_through_passes
    if not present:
        return []
    passes: list[Pass] = [LegalizePass(target)]
    if "warp_specialize" in present:
        passes.append(WarpSpecializePass())
    if "pipeline" in present:
        passes.append(PipelinePass(row_align=declared.copy_row_align))
    if declared.layouts:
        passes.append(LayoutPass(target))
    return passes


def run_passes(program: Program, backend: str, params: dict[str, int] | None = None) -> PassResult:
    """`program` ready for `backend`'s emitter under `params` (see the module's docstring). A
    backend or a parameter that does not exist leaves the program as it is, for `lower` to say so."""
    if backend not in emitting() or set(params or {}) - set(program.params):
        return PassResult(program, [])
    emitter = emitter_of(backend)
    passes = passes_for(program, backend, program.kernel.target.data)
    if not passes:
        return PassResult(program, _plain_loops(program, emitter, params))
    written = _bound(program, params)
    out, ran = written, []
    diagnostics: list[Diagnostic] = []
    for p in passes:
        if isinstance(p, LayoutPass) and _refusals(emitter, out):
            break  # layouts are the backend's choice for a program it takes: there is none here
        result = p.apply(out)
        out, diagnostics = result.program, diagnostics + result.diagnostics
        ran.append(_name(p))
    refused = _refusals(emitter, out)
    if not refused and not any(d.is_error for d in diagnostics):
        return PassResult(out, diagnostics + _plain_loops(out, emitter, params))
    # what still keeps the backend from the passes' output, once per kind (at its first op)
    seen = {(d.rule, d.message) for d in _refusals(emitter, written)}
    left = []
    for d in sorted(refused, key=Diagnostic.sort_key):
        if (d.rule, d.message) not in seen:
            seen.add((d.rule, d.message))
            left.append(replace(d, severity="warning", message=f"after the passes ({', '.join(ran)}): {d.message}"))
    return PassResult(program, diagnostics + left + _plain_loops(program, emitter, params))


def _bound(program: Program, params: dict[str, int] | None) -> Program:
    """The program as the emitter judges it: refusals can depend on parameters (tile sizes)."""
    return program.with_params(**params) if params else program


def _refusals(emitter: Emitter, program: Program) -> list[Diagnostic]:
    return [d for d in emitter.accepts(program) if d.is_error]


def _name(p: Pass) -> str:
    return {
        LegalizePass: "legalize",
        WarpSpecializePass: "warp_specialize",
        PipelinePass: "pipeline",
        LayoutPass: "layouts",
    }[type(p)]


def _plain_loops(program: Program, emitter: Emitter, params: dict[str, int] | None) -> list[Diagnostic]:
    """A `lower.hint` warning at each hint that the backend lowers as a plain loop: neither it
    nor a pass carries it out (none where the backend refuses the program: the refusal says
    what matters)."""
    backend = emitter.name
    declared = target_of(backend)
    carried = declared.native_hints | declared.hints_through_passes
    plain = [(loop, hint) for loop in hinted_loops(program) for hint in hints(loop) if hint not in carried]
    if not plain or _refusals(emitter, _bound(program, params)):
        return []
    out = []
    for loop, hint in plain:
        written = f"pipeline(stages = {cast(SymAttr, loop.stages).data})" if hint == "pipeline" else "warp_specialize"
        out.append(
            Diagnostic(
                HINT_RULE,
                "warning",
                span_of(loop),
                f"the {backend} backend lowers this loop as a plain loop: `{written}` is not carried out",
                ELSEWHERE[hint],
            )
        )
    return out
