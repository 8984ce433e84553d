"""One entry point over the compile drivers: `compile_program(program, to, arch, params)`.

Every driver (the `compile` module of each target folder under `lowering/targets/`: each
a `compile_lowered(lowered, arch, ...)`) fills the one `lowering.report.CompileReport`; `report.to_json()` is its plain data.
A program the backend refuses to lower comes back as a failed report with the refusal's
diagnostics, as a compile failure does.
"""

from __future__ import annotations

import importlib

from kir.diagnostics import Diagnostic, KirError
from kir.program import Program
from lowering.emit.base import lower
from lowering.report import CompileReport

ARCHS = {
    "triton": ("sm_90", "gfx942"),
    "gluon": ("sm_90",),
    "cuda": ("sm_90", "sm_90a"),
    "hip": ("gfx90a",),
    "mtia-sim": ("mtia-sim",),
}
DRIVERS = {
    "triton": "lowering.targets.triton.compile",
    "gluon": "lowering.targets.gluon.compile",
    "cuda": "lowering.targets.cuda.compile",
    "hip": "lowering.targets.hip.compile",
    "mtia-sim": "lowering.targets.mtia_sim.compile",
}
DEFAULT_ARCH = "sm_90"  # what `compile_program` and `kir compile --arch` assume when none is named


def compile_program(
    program: Program, to: str, arch: str = "sm_90", params: dict[str, int] | None = None, **options
) -> CompileReport:
    """Lower `program` for backend `to` and compile it for `arch`; `options` go to the
    driver's `compile_lowered` (`use_cache`, and the driver's own test hooks)."""
    if to not in ARCHS:
        raise KirError(
            Diagnostic("lower.backend", "error", None, f"no compiler for '{to}'", f"one of {', '.join(ARCHS)}")
        )
    if to == "mtia-sim" and arch == DEFAULT_ARCH:
        arch = "mtia-sim"  # the simulator has one arch: the generic default means it
    if arch not in ARCHS[to]:
        raise KirError(Diagnostic("lower.arch", "error", None, f"{to} compiles for {', '.join(ARCHS[to])}, not {arch}"))
    try:
        lowered = lower(program, to, params)
    except KirError as err:
        return CompileReport(to, arch, ok=False, diagnostics=list(err.diagnostics), log=str(err))
    if to != "triton":
        options.pop("symbols", None)  # only Triton specializes on shape values
    driver = importlib.import_module(DRIVERS[to])
    if to == "cuda":
        arch = driver.ARCH  # sm_90 and sm_90a both compile for sm_90a (wgmma and setmaxnreg need it)
    return driver.compile_lowered(lowered, arch, **options)
