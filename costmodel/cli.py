"""The body of `kir cost`: bind parameters and shapes, predict, and render the estimate.

Shapes come from `--shape NAME=VALUE`, else from the task the file belongs to (a
`benchmarks/tasks/<task>/` folder: the preset's shape values and the program's parameters for
that preset), so `kir cost benchmarks/tasks/gemm/tuned.kir --target sm_90` needs nothing more.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from costmodel.model import CostModel, Estimate
from kir.diagnostics import Diagnostic, KirError, Span
from kir.program import Program


def task_bindings(file: str | Path, preset: str = "bench") -> tuple[dict[str, int], dict[str, int]]:
    """(parameters, shape values) of a task program's preset; empty when the file is not one.
    The `default` preset (the reference's own shapes, which only running reference.py tells) is
    the parameters' defaults and no shapes; a preset the task does not have is `cli.preset`."""
    path = Path(file).resolve()
    toml = Path(file).parent / "task.toml"  # as the command line named it, for the messages
    if not toml.exists():
        return {}, {}
    meta = _task_meta(toml)
    presets = meta.get("presets", {})
    if preset != "default" and preset not in presets:
        # the words of `kir cost`'s own check of --preset (kir/cli.py) and of the task loader's
        known = ", ".join(["default", *presets])
        message = f"task `{toml.parent.name}` has no preset `{preset}`"
        raise KirError(Diagnostic("cli.preset", "error", None, message, f"presets: {known}"))
    shapes = {k: v for k, v in presets.get(preset, {}).items() if isinstance(v, int)}
    params: dict[str, int] = {}
    for spec in meta.get("programs", {}).values():
        if (path.parent / spec.get("file", "")).resolve() == path:
            params = dict(spec.get("params", {}).get(preset, {}))
    return params, shapes


def _task_meta(toml: Path) -> dict:
    try:
        return tomllib.loads(toml.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        found = re.search(r"line (\d+)", str(err))
        line = int(found.group(1)) if found else 1
        # the task loader's rule (agent/tasks/task.py), which `kir run` reports for the same file
        raise KirError(
            Diagnostic("task.toml", "error", Span(line, 1, line, 2, str(toml)), f"task.toml is not valid TOML: {err}")
        ) from None


def _si(x: float, unit: str) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def _time(s: float) -> str:
    return f"{s * 1e3:.3f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} us"


def estimate_lines(program: Program, est: Estimate, chip_name: str) -> list[str]:
    occ = est.occupancy
    c = est.counts
    lines = [
        f"{program.file}: {program.name} on {chip_name}: {_time(est.time_s)}, bound by {est.bottleneck}",
        f"  programs {c['programs']}, {est.waves:.2f} waves of {est.raw.concurrent} "
        f"({occ.blocks_per_sm} blocks/SM, limited by {occ.limiter}; {occ.registers} regs/thread, "
        f"{occ.smem_bytes} B shared/block)",
        f"  DRAM {_si(c['dram_bytes'], 'B')} (ideal {_si(c['ideal_dram_bytes'], 'B')}), L2 {_si(c['l2_bytes'], 'B')}, "
        f"shared {_si(c['smem_bytes'], 'B')}; matmul {_si(c['matmul_flops'], 'FLOP')}, ALU {_si(c['alu_ops'], 'op')}, "
        f"int {_si(c['int_ops'], 'op')}, SFU {_si(c['sfu_ops'], 'op')}",
        "  resources: "
        + ", ".join(f"{r} {_time(s)}" for r, s in sorted(est.resources.items(), key=lambda kv: -kv[1]) if s > 0),
        "  breakdown:",
    ]
    for t in est.breakdown[:12]:
        where = f" at line {t.span.line}" if t.span else ""
        note = f" ({t.note})" if t.note else ""
        lines.append(f"    {_time(t.seconds):>11}  {t.name}{where}{note}")
    return lines


# the compiler `kir cost --compile` asks for each target's registers, shared memory and spills:
# (backend for a tile-level program, for an explicit-level one, arch)
COMPILERS = {
    "sm_90": ("triton", "gluon", "sm_90"),
    "gfx942": ("triton", None, "gfx942"),
    "gfx90a": ("hip", None, "gfx90a"),
}


def compile_for_cost(program: Program, target: str, params: dict[str, int], shapes: dict[str, int]):
    """(the compile report that replaces the model's register and shared-memory estimates, or
    None, and diagnostics: the compile's own errors, or a note where no compiler serves)."""
    from kir.diagnostics import Diagnostic
    from lowering.compile import compile_program
    from lowering.emit.base import program_level

    tile, explicit, arch = COMPILERS.get(target, (None, None, None))
    backend = tile if program_level(program) == "tile" else explicit
    if backend is None:
        note = f"--compile: no compiler reports registers for this program on {target}; the model's estimates stand"
        return None, [Diagnostic("cost.compile", "hint", program.span(), note)]
    report = compile_program(program, backend, arch, params, symbols=shapes)
    if not report.ok:
        return None, list(report.diagnostics) or [
            Diagnostic("lower.compile", "error", program.span(), f"the {backend} compile failed: {report.log[-300:]}")
        ]
    return report, [d for d in report.diagnostics if d.severity != "error"]


def run_cost(
    program: Program,
    target: str | None,
    params: dict[str, int],
    shapes: dict[str, int],
    preset: str = "bench",
    calibration: str | None = None,
    compile: bool = False,
) -> tuple[Estimate | None, list[str], list]:
    """(the estimate, its text, diagnostics of the compile when `compile` asks for one; the
    estimate is None when the compile fails)."""
    task_params, task_shapes = task_bindings(program.file, preset)
    params = {k: v for k, v in {**task_params, **params}.items() if k in program.params}
    shapes = {**{k: v for k, v in task_shapes.items() if k not in program.params}, **shapes}
    model = CostModel.load(calibration) if calibration else CostModel()
    from costmodel.spec import chip

    target = target or program.kernel.target.data
    report, diags = compile_for_cost(program, target, params, shapes) if compile else (None, [])
    if any(d.severity == "error" for d in diags):
        return None, [], diags
    est = model.predict(program, target, params, shapes, report=report)
    lines = estimate_lines(program, est, chip(target).chip)
    if report is not None:
        lines.insert(
            1,
            f"  from the {report.backend} compile: {report.registers} regs/thread, "
            f"{report.shared_bytes or 0} B shared, {report.spills or 0} B spilled a thread",
        )
    return est, lines, diags
