"""Compile a HIP `Lowered` with hipcc to a gfx90a code object and report on it. There is no AMD
GPU here: this is how the HIP backend is verified (the kernels are never run).

    from lowering import lower
    from lowering.targets.hip.compile import compile_lowered
    report = compile_lowered(lower(program, "hip"))
    report.ok, report.registers, report.sgprs, report.occupancy, report.instructions["mfma"]

The compiler is Debian's `hipcc` package (HIP 5.2 over clang 15; `apt-get install hipcc`), run
with `HIP_PLATFORM=amd` (without it, hipcc picks nvcc where one is installed) as
`hipcc -O3 --offload-arch=gfx90a --cuda-device-only -c --save-temps`: the device side only,
keeping the GCN assembly (`.s`) and the linked code object (`.out`, an hsaco). Its clang
knows gfx90a but not gfx942; gfx942 is compiled through Triton (`lowering.targets.triton.compile`).

What the `CompileReport` (lowering.report) reads, all from the assembly:

| field | from |
| --- | --- |
| `registers` | `.vgpr_count` of the kernel's metadata (arch VGPRs and AGPRs together, as allocated) |
| `sgprs` | `.sgpr_count` |
| `spill_stores` | `.vgpr_spill_count` x 4 bytes per lane (SGPR spills, which go to VGPR lanes, in `extra`) |
| `static_shared_bytes` | `.group_segment_fixed_size`: the LDS, all static (the emitter declares it) |
| `dynamic_shared_bytes` | 0: the HIP backend asks for no LDS at launch |
| `local_bytes` | `.private_segment_fixed_size`: scratch per lane |
| `occupancy` | the `; Occupancy:` comment: waves per SIMD the compiler expects |
| `instructions` | `v_mfma`, buffer and global loads, LDS reads in the assembly (`lowering.report.AMD_MARKS`) |
| `extra` | AGPRs (`.agpr_count`), SGPR spills, arch VGPRs (`; NumVgprs:`) |

Diagnostics: an error in emitted code is a bug of ours, reported as `lower.compile` at the KIR op
that produced the line (clang's `kernel.hip:LINE:COL: error: ...`). Spills and scratch are
warnings at the kernel. Results are cached on disk by the hash of the source, the flags and the
hipcc version (`$KIR_CACHE_DIR`, default `~/.cache/kir`); a compile error is cached, a report
whose tools failed (hipcc missing, timed out, killed or crashed, no assembly or code object) is not.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from functools import lru_cache
from pathlib import Path
from typing import cast

from kir.diagnostics import Diagnostic
from lowering.emit.base import Lowered
from lowering.report import (
    AMD_MARKS,
    CompileReport,
    cache_dir,
    code_version,
    compile_cached,
    compile_error,
    copy_atomic,
    count_instructions,
    exit_failure,
    hash_key,
    new_report,
    note_tool_failure,
    note_unavailable,
    resource_warnings,
    run_tool,
    unread_failure,
    with_corrupt_line,
)

ARCH = "gfx90a"
FLAGS = ("-O3", f"--offload-arch={ARCH}", "--cuda-device-only", "-std=c++17")
SOURCE_NAME = "kernel.hip"


# ---- tools ---------------------------------------------------------------------------------------


def find_hipcc() -> str | None:
    """hipcc on the PATH, or under $ROCM_PATH/bin or /opt/rocm/bin."""
    found = shutil.which("hipcc")
    if found:
        return found
    for root in (os.environ.get("ROCM_PATH"), os.environ.get("HIP_PATH"), "/opt/rocm"):
        if root and (Path(root) / "bin" / "hipcc").exists():
            return str(Path(root) / "bin" / "hipcc")
    return None


def hip_env() -> dict[str, str]:
    # without HIP_PLATFORM, hipcc compiles for NVIDIA where it finds nvcc
    return {**os.environ, "HIP_PLATFORM": "amd"}


@lru_cache(maxsize=1)
def hipcc_version() -> str:
    hipcc = find_hipcc()
    if hipcc is None:
        return ""
    out = subprocess.run([hipcc, "--version"], capture_output=True, text=True, check=False, env=hip_env()).stdout
    return " ".join(line.strip() for line in out.splitlines() if "version" in line.lower())


HIPCC_MISSING = "hipcc not found (apt-get install hipcc, Debian's HIP 5.2, or put ROCm's hipcc on the PATH)"


def run_hipcc(args: list[str], cwd: Path, timeout: float = 600) -> tuple[int, str]:
    hipcc = find_hipcc()
    if hipcc is None:
        return 127, HIPCC_MISSING
    rc, log = run_tool("hipcc", hipcc, args, cwd, timeout, env=hip_env())
    # hipcc hands its host link flags to a device-only compile, and clang says they are unused
    return rc, "\n".join(line for line in log.splitlines() if "-Wunused-command-line-argument" not in line)


# ---- the assembly ----------------------------------------------------------------------------------


def read_amd_asm(report: CompileReport, asm: str) -> None:
    """Registers, LDS, scratch, spills, occupancy and instruction counts from GCN assembly."""

    def meta(key: str) -> int | None:
        m = re.search(rf"^\s*-?\s*\.{re.escape(key)}:\s*(\d+)", asm, re.M)
        return int(m.group(1)) if m else None

    def comment(key: str) -> int | None:
        m = re.search(rf"^; {re.escape(key)}: (\d+)", asm, re.M)
        return int(m.group(1)) if m else None

    report.asm = asm
    report.instructions = count_instructions(asm, AMD_MARKS)
    report.registers = meta("vgpr_count")
    report.sgprs = meta("sgpr_count")
    spills = meta("vgpr_spill_count")
    report.spill_stores = None if spills is None else 4 * spills
    report.spill_loads = None if spills is None else 0
    report.static_shared_bytes = meta("group_segment_fixed_size")
    report.local_bytes = meta("private_segment_fixed_size")
    report.occupancy = comment("Occupancy")
    report.extra.update(agprs=meta("agpr_count"), sgpr_spills=meta("sgpr_spill_count"), arch_vgprs=comment("NumVgprs"))
    note_unavailable(report)


# ---- hipcc's errors, at the KIR op ----------------------------------------------------------------

_CLANG_ERROR = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+):(?P<col>\d+): (?:fatal )?error: (?P<msg>.*)$")


def error_diagnostics(lowered: Lowered, log: str, path: str | None = None) -> list[Diagnostic]:
    """One `lower.compile` diagnostic per error clang reports in the generated file; one at the
    kernel when none can be read (a failure of the backend or the linker); without hipcc, the
    `compile.tool-missing` error that says so (`unread_failure`)."""
    diags = []
    for raw in log.splitlines():
        m = _CLANG_ERROR.match(raw.strip())
        if m and m.group("file").endswith(SOURCE_NAME):
            line, col = int(m.group("line")), int(m.group("col"))
            diags.append(
                compile_error(lowered, line, m.group("msg"), where=f"{SOURCE_NAME}:{line}:{col}", column=col, path=path)
            )
    return diags or [unread_failure(lowered, log, "hipcc", SOURCE_NAME, path)]


# ---- compiling -----------------------------------------------------------------------------------


def source_key(source: str, flags: tuple[str, ...]) -> str:
    return hash_key(source, "\0".join(flags), hipcc_version())


def compile_lowered(
    lowered: Lowered,
    arch: str = ARCH,
    *,
    corrupt_line: int | None = None,
    use_cache: bool = True,
    extra_flags: tuple[str, ...] = (),
) -> CompileReport:
    """Compile to a gfx90a code object (the only arch: `arch` names it); never raises for a
    compile failure (the report says so). `corrupt_line` is the test hook of error locations."""
    start = time.monotonic()
    lowered = with_corrupt_line(lowered, corrupt_line)
    flags = (*FLAGS, *extra_flags)
    folder = cache_dir("hip") / source_key(lowered.source, (*flags, code_version(__file__)))
    report = compile_cached(
        folder / "report.json", lambda: _compile(lowered, flags, folder), start=start, use_cache=use_cache
    )
    report.diagnostics = (
        resource_warnings(lowered, report) if report.ok else error_diagnostics(lowered, report.log, report.source_path)
    )
    return report


def _compile(lowered: Lowered, flags: tuple[str, ...], folder: Path) -> CompileReport:
    report = new_report(lowered, "hip", ARCH, folder, SOURCE_NAME, lowered.num_warps)
    with tempfile.TemporaryDirectory(prefix="kir-hipcc-") as tmp:
        work = Path(tmp)
        (work / SOURCE_NAME).write_text(lowered.source)
        rc, report.log = run_hipcc([*flags, "-c", "--save-temps", "-o", "kernel.co", SOURCE_NAME], work)
        if (why := exit_failure("hipcc", rc, report.log)) is not None:
            note_tool_failure(report, why)
        asm = next(iter(work.glob(f"*-{ARCH}.s")), None)
        code_object = next(iter(work.glob(f"*-{ARCH}.out")), None)
        report.ok = rc == 0 and asm is not None and code_object is not None
        if rc == 0 and not report.ok:
            note_tool_failure(report, "hipcc succeeded but wrote no assembly or code object")
        if not report.ok:
            return report
        # report.ok: hipcc wrote both
        copy_atomic(cast(Path, code_object), folder / "kernel.hsaco")
        read_amd_asm(report, cast(Path, asm).read_text())
    report.binary = str(folder / "kernel.hsaco")
    report.dynamic_shared_bytes = int(lowered.options.get("smem_bytes", 0))
    return report
