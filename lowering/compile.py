"""One entry point over the compile drivers: `compile_program(program, to, arch, params)`.

Every driver (the `compile` module of a target folder under `lowering/targets/`, which the
target names: each a `compile_lowered(lowered, arch, ...)`) fills the one
`lowering.report.CompileReport`; `report.to_json()` is its plain data.
A program the backend refuses to lower comes back as a failed report with the refusal's
diagnostics, as a compile failure does.
"""

from __future__ import annotations

import inspect

from kir.diagnostics import Diagnostic, KirError
from kir.program import Program
from lowering.entry import lower
from lowering.report import CompileReport
from lowering.targets import compiling, target


def compile_program(
    program: Program, to: str, arch: str | None = None, params: dict[str, int] | None = None, **options
) -> CompileReport:
    """Lower `program` for target `to` and compile it for `arch` (default: the target's own
    first arch); `options` go to the driver's `compile_lowered` (`use_cache`, and the driver's
    own test hooks). The target says what it compiles for and as what (lowering.targets)."""
    chosen = target(to)
    if chosen.compiler is None:
        raise KirError(
            Diagnostic("lower.backend", "error", None, f"no compiler for '{to}'", f"one of {', '.join(compiling())}")
        )
    arch = chosen.compile_arch(arch)
    if program.is_multi:
        return _compile_kernels(program, to, arch, params, options)
    try:
        lowered = lower(program, to, params)
    except KirError as err:
        return CompileReport(to, arch, ok=False, diagnostics=list(err.diagnostics), log=str(err))
    driver = chosen.driver()
    if "symbols" not in inspect.signature(driver.compile_lowered).parameters:
        options.pop("symbols", None)  # a driver that specializes on shape values (Triton) takes them
    report = driver.compile_lowered(lowered, arch, **options)
    report.diagnostics = lowered.diagnostics + report.diagnostics  # the lowering passes' warnings first
    return report


def _compile_kernels(program: Program, to: str, arch: str, params: dict[str, int] | None, options) -> CompileReport:
    """A program of several kernels: each compiled on its own with the parameters it declares.
    The report is the first that failed, else the one with the most registers a thread; its
    diagnostics are every kernel's."""
    reports = []
    for k in program.kernels():
        own = {n: v for n, v in (params or {}).items() if n in k.params}
        reports.append(compile_program(k, to, arch, own, **dict(options)))
    failed = [r for r in reports if not r.ok]
    chosen = failed[0] if failed else max(reports, key=lambda r: r.registers or 0)
    chosen.diagnostics = [d for r in reports for d in r.diagnostics]
    return chosen
