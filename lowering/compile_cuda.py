"""Compile a CUDA `Lowered` with nvcc to a cubin for sm_90a and report on it.

    from lowering import lower
    from lowering.compile_cuda import compile_cuda
    report = compile_cuda(lower(program, "cuda"))
    report.ok, report.registers, report.spills, report.has_hgmma, report.diagnostics

Flags: `-gencode=arch=compute_90a,code=sm_90a -O3 -lineinfo -Xptxas -v` (the `-gencode` form:
`-arch=sm_90a` would also run a plain sm_90 pass that rejects wgmma and setmaxnreg). ptxas's
report gives the registers, spills, stack frame and static shared memory; `cuobjdump -sass`
the machine code, where a wgmma shows as HGMMA.

Diagnostics: an error in emitted code is a bug of ours, reported as `lower.compile` at the KIR
op that produced the line (nvcc's `file(line)`; a ptxas error is traced back through the
`.loc` line records of the PTX). Spills and stack-frame (local) memory are warnings at the
kernel, as is a wgmma that ptxas had to serialize or a setmaxnreg it ignored.

Results are cached on disk by the hash of the source, the flags and the nvcc version
(`$KIR_CACHE_DIR`, default `~/.cache/kir`), so a test suite compiles each kernel once.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

from kir.diagnostics import Diagnostic, Span
from lowering.emit.base import Lowered

ARCH = "sm_90a"
GENCODE = "-gencode=arch=compute_90a,code=sm_90a"
FLAGS = (GENCODE, "-O3", "-lineinfo", "-std=c++17", "-Xptxas", "-v")
SOURCE_NAME = "kernel.cu"


@dataclass
class CompileReport:
    backend: str
    arch: str
    ok: bool
    registers: int | None = None
    spills: int = 0  # bytes: spill stores plus spill loads
    spill_stores: int = 0
    spill_loads: int = 0
    shared_bytes: int = 0  # static (ptxas) plus dynamic (the launch's) shared memory
    local_bytes: int = 0  # the stack frame
    has_hgmma: bool = False
    log: str = ""
    diagnostics: list[Diagnostic] = field(default_factory=list)
    cubin: str | None = None  # path of the cubin (in the cache)
    sass: str | None = None  # cuobjdump -sass, when asked for
    seconds: float = 0.0
    cached: bool = False

    def to_json(self) -> dict:
        out = asdict(self)
        out["diagnostics"] = [d.to_json() for d in self.diagnostics]
        out.pop("sass", None)
        return out


# ---- tools ---------------------------------------------------------------------------------------


def find_tool(name: str) -> str | None:
    """A CUDA tool on the PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin; cuobjdump also from
    Triton's bundled copy (this machine's CUDA install has none)."""
    found = shutil.which(name)
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / name).exists():
            return str(Path(root) / "bin" / name)
    if name in ("cuobjdump", "nvdisasm"):
        try:
            import triton  # noqa: PLC0415

            bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
            if bundled.exists():
                return str(bundled)
        except Exception:  # noqa: BLE001 - triton is optional
            return None
    return None


@lru_cache(maxsize=1)
def nvcc_version() -> str:
    nvcc = find_tool("nvcc")
    if nvcc is None:
        return ""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False).stdout
    return out.strip().splitlines()[-1] if out.strip() else ""


def cache_root() -> Path:
    root = Path(os.environ.get("KIR_CACHE_DIR", Path.home() / ".cache" / "kir")) / "cuda"
    root.mkdir(parents=True, exist_ok=True)
    return root


def source_key(source: str, flags: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for part in (source, "\0".join(flags), nvcc_version()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


# ---- parsing nvcc's and ptxas's output -----------------------------------------------------------

_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_NVCC_ERROR = re.compile(r"^(?P<file>[^\s()]+)\((?P<line>\d+)\): (?P<kind>error|catastrophic error)[^:]*: (?P<msg>.*)$")
_PTXAS_ERROR = re.compile(r"ptxas\s+(?P<file>\S+?), line (?P<line>\d+); error\s*:\s*(?P<msg>.*)$")


def parse_ptxas(log: str, report: CompileReport) -> None:
    if m := _PTXAS_REGS.search(log):
        report.registers = int(m.group(1))
    if m := _PTXAS_SMEM.search(log):
        report.shared_bytes += int(m.group(1))
    if m := _PTXAS_FRAME.search(log):
        report.local_bytes = int(m.group(1))
        report.spill_stores = int(m.group(2))
        report.spill_loads = int(m.group(3))
        report.spills = report.spill_stores + report.spill_loads


def ptx_line_to_source(ptx: str, ptx_line: int) -> int | None:
    """The source line of the nearest `.loc` record at or before a PTX line."""
    lines = ptx.splitlines()
    for n in range(min(ptx_line, len(lines)) - 1, -1, -1):
        m = re.match(r"\s*\.loc\s+\d+\s+(\d+)", lines[n])
        if m:
            return int(m.group(1))
    return None


def error_diagnostics(lowered: Lowered, log: str, ptx: str | None) -> list[Diagnostic]:
    diags = []
    for raw in log.splitlines():
        line = None
        m = _NVCC_ERROR.match(raw.strip())
        if m and m.group("file").endswith(SOURCE_NAME):
            line = int(m.group("line"))
            msg = m.group("msg")
        elif (m := _PTXAS_ERROR.search(raw)) and ptx is not None:
            line = ptx_line_to_source(ptx, int(m.group("line")))
            msg = f"ptxas: {m.group('msg')}"
        if m is None:
            continue
        span = lowered.span_for_line(line) if line else lowered.program.span()
        where = f"{SOURCE_NAME}:{line}" if line else SOURCE_NAME
        text = (
            lowered.source.splitlines()[line - 1].strip() if line and line <= len(lowered.source.splitlines()) else ""
        )
        diags.append(
            Diagnostic(
                "lower.compile",
                "error",
                span,
                f"the code generated for this op does not compile ({where}: {msg})",
                f"this is a bug of the {lowered.backend} backend, not of the program; the generated line: {text}",
            )
        )
    if not diags:
        diags.append(
            Diagnostic(
                "lower.compile",
                "error",
                lowered.program.span(),
                "nvcc failed on the generated code: " + (log.strip().splitlines() or ["no output"])[-1],
                f"this is a bug of the {lowered.backend} backend, not of the program",
            )
        )
    return diags


def warning_diagnostics(lowered: Lowered, report: CompileReport) -> list[Diagnostic]:
    span: Span | None = lowered.program.span()
    out = []
    if report.spills:
        out.append(
            Diagnostic(
                "compile.spills",
                "warning",
                span,
                f"the kernel spills registers to local memory ({report.spill_stores} bytes stored, {report.spill_loads} loaded) "
                f"at {report.registers} registers per thread",
                "shrink the tiles held in registers, or raise the register budget (regs(N), fewer warps)",
            )
        )
    if report.local_bytes and not report.spills:
        out.append(
            Diagnostic(
                "compile.local-memory",
                "warning",
                span,
                f"the kernel keeps {report.local_bytes} bytes per thread in local memory (its stack frame)",
                "a register array indexed at run time moves to local memory: index tiles with constants",
            )
        )
    if "serialized" in report.log and "wgmma" in report.log:
        reason = next((x.strip() for x in report.log.splitlines() if "serialized" in x), "")
        out.append(
            Diagnostic(
                "compile.wgmma-serialized",
                "warning",
                span,
                f"ptxas serialized the wgmma instructions: {reason}",
                "keep the accumulator untouched between a wgmma and its wgmma.wait",
            )
        )
    if "C7508" in report.log or ("setmaxnreg" in report.log and "ignored" in report.log):
        out.append(
            Diagnostic(
                "compile.setmaxnreg-ignored",
                "warning",
                span,
                "ptxas ignored the roles' register budgets (setmaxnreg)",
                "each warpgroup's role must be one branch of a single if/else, with a register cap at entry",
            )
        )
    return out


# ---- compiling -----------------------------------------------------------------------------------


def corrupt(source: str, line: int) -> str:
    """The test hook: a source whose line `line` (1-based) holds a statement nvcc rejects."""
    lines = source.split("\n")
    lines[line - 1] = lines[line - 1] + " kir_corrupted_by_test_hook();"
    return "\n".join(lines)


def run_nvcc(args: list[str], cwd: Path, timeout: float = 600) -> tuple[int, str]:
    nvcc = find_tool("nvcc")
    if nvcc is None:
        return 127, "nvcc not found (set CUDA_HOME or put nvcc on the PATH)"
    try:
        proc = subprocess.run([nvcc, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return 124, f"nvcc timed out after {timeout:g} s"
    return proc.returncode, (proc.stdout + proc.stderr)


def compile_cuda(
    lowered: Lowered,
    *,
    sass: bool = True,
    corrupt_line: int | None = None,
    use_cache: bool = True,
    extra_flags: tuple[str, ...] = (),
) -> CompileReport:
    """Compile to a cubin; never raises for a compile failure (the report says so)."""
    start = time.monotonic()
    source = lowered.source if corrupt_line is None else corrupt(lowered.source, corrupt_line)
    if corrupt_line is not None:
        lowered = Lowered(**{**lowered.__dict__, "source": source})
    flags = (*FLAGS, *extra_flags)
    key = source_key(source, flags)
    folder = cache_root() / key
    saved = folder / "report.json"
    dynamic_smem = int(lowered.options.get("smem_bytes", 0))
    if use_cache and saved.exists():
        data = json.loads(saved.read_text())
        report = CompileReport(**{k: v for k, v in data.items() if k not in ("diagnostics", "sass")})
        report.cached = True
        report.diagnostics = (
            error_diagnostics(lowered, report.log, _read(folder / "kernel.ptx"))
            if not report.ok
            else warning_diagnostics(lowered, report)
        )
        if sass and report.ok:
            report.sass = _read(folder / "kernel.sass")
        return report
    with tempfile.TemporaryDirectory(prefix="kir-nvcc-") as tmp:
        work = Path(tmp)
        (work / SOURCE_NAME).write_text(source)
        rc, log = run_nvcc([*flags, "-cubin", "-keep", "-keep-dir", str(work), "-o", "kernel.cubin", SOURCE_NAME], work)
        report = CompileReport("cuda", ARCH, ok=rc == 0, log=log)
        ptx_files = list(work.glob("*.ptx"))
        ptx = ptx_files[0].read_text() if ptx_files else None
        folder.mkdir(parents=True, exist_ok=True)
        if ptx is not None:
            (folder / "kernel.ptx").write_text(ptx)
        if report.ok:
            parse_ptxas(log, report)
            report.shared_bytes += dynamic_smem
            shutil.copy(work / "kernel.cubin", folder / "kernel.cubin")
            report.cubin = str(folder / "kernel.cubin")
            sass_text = disassemble(folder / "kernel.cubin")
            if sass_text is not None:
                (folder / "kernel.sass").write_text(sass_text)
                report.has_hgmma = "HGMMA" in sass_text
                report.sass = sass_text if sass else None
            report.diagnostics = warning_diagnostics(lowered, report)
        else:
            report.diagnostics = error_diagnostics(lowered, log, ptx)
        report.seconds = time.monotonic() - start
    if use_cache and rc != 127:
        saved.write_text(json.dumps({k: v for k, v in report.to_json().items() if k != "diagnostics"}))
    return report


def disassemble(cubin: Path) -> str | None:
    tool = find_tool("cuobjdump")
    if tool is None:
        return None
    proc = subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True, check=False)
    return proc.stdout if proc.returncode == 0 else None


def _read(path: Path) -> str | None:
    return path.read_text() if path.exists() else None
