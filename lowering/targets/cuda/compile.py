"""Compile a CUDA `Lowered` with nvcc to a cubin for sm_90a and report on it.

    from lowering import lower
    from lowering.targets.cuda.compile import compile_lowered
    report = compile_lowered(lower(program, "cuda"))
    report.ok, report.registers, report.spills, report.instructions["HGMMA"], report.diagnostics

Flags: `-gencode=arch=compute_90a,code=sm_90a -O3 -lineinfo -Xptxas -v` (the `-gencode` form:
`-arch=sm_90a` would also run a plain sm_90 pass that rejects wgmma and setmaxnreg). ptxas's
report gives the registers, spills, stack frame and static shared memory (the launch's dynamic
shared memory is the emitter's `smem_bytes`); `cuobjdump -sass` the machine code, where a wgmma
shows as HGMMA. The `CompileReport` is lowering.report's.

Diagnostics: an error in emitted code is a bug of ours, reported as `lower.compile` at the KIR
op that produced the line (nvcc's `file(line)`; a ptxas error is traced back through the
`.loc` line records of the PTX). Spills and stack-frame (local) memory are warnings at the
kernel, as is a wgmma that ptxas had to serialize or a setmaxnreg it ignored.

Results are cached on disk by the hash of the source, the flags and the nvcc version
(`$KIR_CACHE_DIR`, default `~/.cache/kir`), so a test suite compiles each kernel once. A compile
error is cached (it is nvcc's answer); a report whose tools failed is not
(`lowering.report.tool_failure`: nvcc missing, timed out or killed, no cubin, cuobjdump failing).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from functools import lru_cache
from pathlib import Path

from kir.diagnostics import Diagnostic
from lowering.emit.base import Lowered
from lowering.report import (
    CompileReport,
    cache_dir,
    code_version,
    compile_cached,
    compile_error,
    copy_atomic,
    exit_failure,
    find_tool,
    hash_key,
    new_report,
    note_tool_failure,
    read_nvidia_texts,
    read_ptxas,
    resource_warnings,
    run_tool,
    shared_memory_error,
    unread_failure,
    with_corrupt_line,
)

ARCH = "sm_90a"
GENCODE = "-gencode=arch=compute_90a,code=sm_90a"
FLAGS = (GENCODE, "-O3", "-lineinfo", "-std=c++17", "-Xptxas", "-v")
SOURCE_NAME = "kernel.cu"


# ---- tools ---------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def nvcc_version() -> str:
    nvcc = find_tool("nvcc")
    if nvcc is None:
        return ""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False).stdout
    return out.strip().splitlines()[-1] if out.strip() else ""


def cache_root() -> Path:
    return cache_dir("cuda")


def source_key(source: str, flags: tuple[str, ...]) -> str:
    return hash_key(source, "\0".join(flags), nvcc_version())


def run_nvcc(args: list[str], cwd: Path, timeout: float = 600) -> tuple[int, str]:
    nvcc = find_tool("nvcc")
    if nvcc is None:
        return 127, "nvcc not found (set CUDA_HOME or put nvcc on the PATH)"
    return run_tool("nvcc", nvcc, args, cwd, timeout)


# ---- nvcc's and ptxas's errors, at the KIR op ----------------------------------------------------

_NVCC_ERROR = re.compile(r"^(?P<file>[^\s()]+)\((?P<line>\d+)\): (?P<kind>error|catastrophic error)[^:]*: (?P<msg>.*)$")
_PTXAS_ERROR = re.compile(r"ptxas\s+(?P<file>\S+?), line (?P<line>\d+); error\s*:\s*(?P<msg>.*)$")


def ptx_line_to_source(ptx: str, ptx_line: int) -> int | None:
    """The source line of the nearest `.loc` record at or before a PTX line."""
    lines = ptx.splitlines()
    for n in range(min(ptx_line, len(lines)) - 1, -1, -1):
        m = re.match(r"\s*\.loc\s+\d+\s+(\d+)", lines[n])
        if m:
            return int(m.group(1))
    return None


def error_diagnostics(lowered: Lowered, log: str, ptx: str | None) -> list[Diagnostic]:
    """One `lower.compile` diagnostic per error nvcc (`kernel.cu(12): error`) or ptxas (traced
    back through the PTX's `.loc` records) reports; one at the kernel when none can be read."""
    diags = []
    line: int | None  # None: a ptxas line the PTX does not trace back
    for raw in log.splitlines():
        m = _NVCC_ERROR.match(raw.strip())
        if m and m.group("file").endswith(SOURCE_NAME):
            line, msg = int(m.group("line")), m.group("msg")
        elif (m := _PTXAS_ERROR.search(raw)) and ptx is not None:
            line, msg = ptx_line_to_source(ptx, int(m.group("line"))), f"ptxas: {m.group('msg')}"
        else:
            continue
        where = f"{SOURCE_NAME}:{line}" if line else SOURCE_NAME
        diags.append(compile_error(lowered, line, msg, where=where))
    return diags or [unread_failure(lowered, log, "nvcc", SOURCE_NAME)]


# ---- compiling -----------------------------------------------------------------------------------


def compile_lowered(
    lowered: Lowered,
    arch: str = ARCH,
    *,
    sass: bool = True,
    corrupt_line: int | None = None,
    use_cache: bool = True,
    extra_flags: tuple[str, ...] = (),
) -> CompileReport:
    """Compile to a cubin for sm_90a (the only arch: `arch` names it); never raises for a
    compile failure (the report says so). `sass=False` leaves the SASS text out of the
    report (its instructions are still counted)."""
    start = time.monotonic()
    lowered = with_corrupt_line(lowered, corrupt_line)
    flags = (*FLAGS, *extra_flags)
    folder = cache_root() / source_key(lowered.source, (*flags, code_version(__file__)))
    report = compile_cached(
        folder / "report.json", lambda: _compile(lowered, flags, folder), start=start, use_cache=use_cache
    )
    report.diagnostics = (
        resource_warnings(lowered, report) if report.ok else error_diagnostics(lowered, report.log, report.ptx)
    )
    if report.ok and (too_big := shared_memory_error(lowered, report.shared_bytes, arch)) is not None:
        report.ok = False
        report.diagnostics.append(too_big)
    if not sass:
        report.sass = None
    return report


def _compile(lowered: Lowered, flags: tuple[str, ...], folder: Path) -> CompileReport:
    report = new_report(lowered, "cuda", ARCH, folder, SOURCE_NAME, lowered.num_warps)
    with tempfile.TemporaryDirectory(prefix="kir-nvcc-") as tmp:
        work = Path(tmp)
        (work / SOURCE_NAME).write_text(lowered.source)
        rc, report.log = run_nvcc(
            [*flags, "-cubin", "-keep", "-keep-dir", str(work), "-o", "kernel.cubin", SOURCE_NAME], work
        )
        if (why := exit_failure("nvcc", rc, report.log)) is not None:
            note_tool_failure(report, why)
        report.ok = rc == 0
        ptx_files = list(work.glob("*.ptx"))
        report.ptx = ptx_files[0].read_text() if ptx_files else None
        if not report.ok:
            return report
        if not (work / "kernel.cubin").exists():
            note_tool_failure(report, "nvcc succeeded but wrote no cubin")
            report.ok = False
            return report
        copy_atomic(work / "kernel.cubin", folder / "kernel.cubin")
    report.binary = str(folder / "kernel.cubin")
    read_ptxas(report.log, report)
    report.dynamic_shared_bytes = int(lowered.options.get("smem_bytes", 0))
    read_nvidia_texts(report, report.ptx, folder / "kernel.cubin")
    return report
