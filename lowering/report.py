"""The compile report: one record for every compile driver (Triton, Gluon, CUDA; HIP and the
simulated accelerator's g++ fit the same fields), and what the drivers share to fill it.

    report = compile_program(program, "cuda", "sm_90")
    report.ok, report.registers, report.spills, report.shared_bytes, report.instructions["HGMMA"]
    report.to_json()                       # plain data; `kir compile --json` prints it

| field | meaning |
| --- | --- |
| `backend`, `arch`, `ok`, `entry`, `num_warps` | what was compiled, for what, whether it compiled, the kernel's name, warps per CTA (partitions included) |
| `registers` | per thread on NVIDIA (ptxas); VGPRs per lane on AMD |
| `sgprs` | AMD only: scalar registers per wavefront |
| `spill_stores`, `spill_loads` | bytes per thread (ptxas); on AMD spilled VGPRs x 4 bytes, counted as stores |
| `static_shared_bytes`, `dynamic_shared_bytes` | shared memory (LDS on AMD) fixed in the binary, and asked for at launch |
| `local_bytes` | per thread: the stack frame (NVIDIA), scratch (AMD) |
| `occupancy` | where the toolchain says it offline (hipcc: waves per SIMD); None on NVIDIA, where it needs a driver |
| `instructions` | how often each instruction that matters appears: PTX marks in lower case (`wgmma`, `tma`, ...), SASS opcodes in upper case (`HGMMA`, `UTMALDG`, ...), AMD marks (`mfma`, ...) |
| `binary`, `source_path` | the compiled binary (cubin, hsaco) and the generated source, as files in the cache |
| `ptx`, `sass`, `asm` | the text artefacts (`asm`: AMD GCN assembly) |
| `log` | what the compiler printed (ptxas -v, nvcc, the error) |
| `diagnostics` | `lower.compile` errors at the KIR op of the failing generated line; `compile.*` warnings at the kernel |
| `extra` | backend facts with no field of their own (AGPRs, SGPR spills, setmaxnreg budgets, `.maxnreg`, what could not be read) |
| `seconds`, `cached` | how long the driver took; whether the answer came from the disk cache |

`shared_bytes` (static plus dynamic) and `spills` (stores plus loads) are derived, and
`to_json` adds them. Diagnostics are never cached: their spans belong to the program lowered
now, so a driver recomputes them from the cached report.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kir.diagnostics import Diagnostic
from lowering.emit.base import Lowered

TEXTS = ("ptx", "sass", "asm", "log")  # the text artefacts, cut short for display


@dataclass
class CompileReport:
    backend: str
    arch: str
    ok: bool
    entry: str | None = None
    num_warps: int | None = None
    registers: int | None = None
    sgprs: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    static_shared_bytes: int | None = None
    dynamic_shared_bytes: int | None = None
    local_bytes: int | None = None
    occupancy: int | None = None
    instructions: dict[str, int] = field(default_factory=dict)
    binary: str | None = None
    source_path: str | None = None
    ptx: str | None = None
    sass: str | None = None
    asm: str | None = None
    log: str = ""
    diagnostics: list[Diagnostic] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    cached: bool = False

    @property
    def shared_bytes(self) -> int | None:
        """Shared memory of one CTA: static plus dynamic (None when neither is known)."""
        parts = [b for b in (self.static_shared_bytes, self.dynamic_shared_bytes) if b is not None]
        return sum(parts) if parts else None

    @property
    def spills(self) -> int | None:
        """Bytes of spill traffic per thread: stores plus loads (None when neither is known)."""
        parts = [b for b in (self.spill_stores, self.spill_loads) if b is not None]
        return sum(parts) if parts else None

    def to_json(self, max_text: int | None = None) -> dict[str, Any]:
        """Plain data: every field, the derived totals, and the text artefacts cut to
        `max_text` characters when given."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "diagnostics":
                value = [d.to_json() for d in value]
            elif f.name in TEXTS and max_text is not None and value and len(value) > max_text:
                value = value[:max_text] + "..."
            elif isinstance(value, dict):
                value = dict(value)
            out[f.name] = value
        out["shared_bytes"] = self.shared_bytes
        out["spills"] = self.spills
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CompileReport:
        """The report `to_json` wrote (diagnostics and derived totals left out)."""
        names = {f.name for f in dataclasses.fields(cls)} - {"diagnostics"}
        return cls(**{k: v for k, v in data.items() if k in names})


def code_version(*files: str | Path) -> str:
    """A hash of this module and the given driver files: the drivers put it in their cache keys,
    so a report cached by other code (other fields, other readings) is never read back."""
    h = hashlib.sha256()
    for f in (__file__, *files):
        h.update(Path(f).read_bytes())
    return h.hexdigest()[:16]


# ---- the disk cache ------------------------------------------------------------------------------


def cache_dir(backend: str) -> Path:
    """`$KIR_CACHE_DIR/<backend>` (default `~/.cache/kir/<backend>`), created."""
    root = Path(os.environ.get("KIR_CACHE_DIR", Path.home() / ".cache" / "kir")) / backend
    root.mkdir(parents=True, exist_ok=True)
    return root


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write through a temporary file and a rename: parallel test workers may write the same
    file, and a reader never sees half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f"{path.suffix}.{os.getpid()}.tmp")
    if isinstance(data, bytes):
        tmp.write_bytes(data)
    else:
        tmp.write_text(data)
    tmp.replace(path)


def load_report(path: Path) -> CompileReport | None:
    """A cached report, marked `cached` (None when there is none)."""
    if not path.exists():
        return None
    report = CompileReport.from_json(json.loads(path.read_text()))
    report.cached = True
    return report


def save_report(path: Path, report: CompileReport) -> None:
    data = report.to_json()
    for derived in ("diagnostics", "shared_bytes", "spills"):
        data.pop(derived)
    write_atomic(path, json.dumps(data))


# ---- what the C++ drivers share (nvcc, hipcc, g++) -----------------------------------------------


def hash_key(*parts: str) -> str:
    """A cache key: the hash of what decides a compile's result (the source, the flags, the
    compiler's version, ...)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def with_corrupt_line(lowered: Lowered, line: int | None) -> Lowered:
    """The test hook of error locations: `lowered` with a statement no C++ compiler accepts at
    the end of its line `line` (1-based); `lowered` itself when `line` is None."""
    if line is None:
        return lowered
    lines = lowered.source.split("\n")
    lines[line - 1] = lines[line - 1] + " kir_corrupted_by_test_hook();"
    return Lowered(**{**lowered.__dict__, "source": "\n".join(lines)})


def run_tool(
    name: str, tool: str, args: list[str], cwd: Path, timeout: float = 600, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """Run compiler `tool` (called `name` in messages): its exit status and what it printed; 124
    and a message when it runs past `timeout` seconds."""
    try:
        proc = subprocess.run(
            [tool, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False, env=env
        )
    except subprocess.TimeoutExpired:
        return 124, f"{name} timed out after {timeout:g} s"
    return proc.returncode, proc.stdout + proc.stderr


def new_report(
    lowered: Lowered, backend: str, arch: str, folder: Path, source_name: str, num_warps: int | None
) -> CompileReport:
    """A failed report for `lowered` with its source written to the cache folder: the
    compiler's answer fills it in."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / source_name).write_text(lowered.source)
    return CompileReport(
        backend, arch, ok=False, entry=lowered.entry, num_warps=num_warps, source_path=str(folder / source_name)
    )


def compile_cached(
    folder: Path,
    compile: Callable[[], CompileReport],
    *,
    tool: str,
    start: float,
    use_cache: bool,
    need_binary: bool = False,
) -> CompileReport:
    """The report cached in `folder`, or else `compile()`'s, timed from `start` and cached
    unless `tool` was not found (it may be installed next time). With `need_binary`, a cached
    report whose binary is gone is compiled again."""
    saved = folder / "report.json"
    report = load_report(saved) if use_cache else None
    if report is None or (need_binary and report.ok and not Path(report.binary or "").exists()):
        report = compile()
        report.seconds = time.monotonic() - start
        if use_cache and f"{tool} not found" not in report.log:
            save_report(saved, report)
    return report


# ---- reading what the toolchains say -----------------------------------------------------------

# Instructions worth knowing about, by what marks them in the PTX, the SASS or the AMD assembly.
PTX_MARKS = {
    "mma": r"\bmma\.sync\.",
    "wgmma": r"\bwgmma\.mma_async\.",
    "cp.async": r"\bcp\.async\.(ca|cg)\.",
    "tma": r"\bcp\.async\.bulk\.tensor\.",
    "ldmatrix": r"\bldmatrix\.",
    "setmaxnreg": r"\bsetmaxnreg\.",
}
SASS_MARKS = {
    "HGMMA": r"\bHGMMA\.",  # wgmma as the machine runs it
    "HMMA": r"\bHMMA\.",
    "UTMALDG": r"\bUTMALDG\.",  # TMA load
    "UTMASTG": r"\bUTMASTG\.",  # TMA store
    "LDGSTS": r"\bLDGSTS\b",  # cp.async
    "LDSM": r"\bLDSM\b",  # ldmatrix
}
AMD_MARKS = {
    "mfma": r"\bv_mfma_",
    "buffer_load": r"\bbuffer_load_",
    "global_load": r"\bglobal_load_",
    "lds_read": r"\bds_read",
}

_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def count_instructions(text: str, marks: dict[str, str]) -> dict[str, int]:
    return {name: len(re.findall(rx, text)) for name, rx in marks.items()}


def read_ptxas(log: str, report: CompileReport) -> None:
    """Registers, static shared memory, stack frame and spills from a `ptxas -v` log; what the
    log does not say is listed in `extra["unavailable"]`."""
    if m := _PTXAS_REGS.search(log):
        report.registers = int(m.group(1))
        smem = _PTXAS_SMEM.search(log)  # the line leaves out what is zero
        report.static_shared_bytes = int(smem.group(1)) if smem else 0
    if m := _PTXAS_FRAME.search(log):
        report.local_bytes, report.spill_stores, report.spill_loads = (int(g) for g in m.groups())
    note_unavailable(report)


def note_unavailable(report: CompileReport) -> None:
    missing = [k for k in ("registers", "spill_stores", "local_bytes") if getattr(report, k) is None]
    if missing:
        report.extra["unavailable"] = missing


def find_tool(name: str) -> str | None:
    """A CUDA tool on the PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin; cuobjdump and
    nvdisasm also from Triton's bundled copy (a CUDA install may have none)."""
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


def disassemble(cubin: Path) -> str | None:
    """`cuobjdump -sass` of a cubin (None without the tool or when it fails)."""
    tool = find_tool("cuobjdump")
    if tool is None:
        return None
    try:
        proc = subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True, check=False, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def read_nvidia_texts(report: CompileReport, ptx: str | None, cubin: Path | None) -> None:
    """The PTX and the SASS of the cubin into the report, with their instruction counts."""
    report.ptx = ptx
    if ptx:
        report.instructions.update(count_instructions(ptx, PTX_MARKS))
    report.sass = disassemble(cubin) if cubin is not None and cubin.exists() else None
    if report.sass:
        report.instructions.update(count_instructions(report.sass, SASS_MARKS))


# ---- diagnostics -------------------------------------------------------------------------------


def compile_error(
    lowered: Lowered,
    line: int | None,
    reason: str,
    *,
    where: str | None = None,
    column: int | None = None,
    path: str | None = None,
) -> Diagnostic:
    """A compiler error in generated code is a bug of the backend, not of the program: a
    `lower.compile` diagnostic at the KIR op that produced generated line `line` (at the
    kernel when no line is known), quoting the line."""
    lines = lowered.source.split("\n")
    known = line is not None and 0 < line <= len(lines)
    text = lines[line - 1].strip() if known else ""
    place = where or (f"generated line {line}" if known else "the generated code")
    quoted = f": `{text}`" if text else ""
    return Diagnostic(
        "lower.compile",
        "error",
        lowered.span_for_line(line) if known else lowered.program.span(),
        f"the code generated for this op does not compile ({place}{quoted}): {reason or 'unknown error'}",
        f"this is a bug of the {lowered.backend} backend, not of the program: please report it with the program",
        counterexample={"generated_line": line, "column": column, "source_path": path},
    )


def shared_memory_error(lowered: Lowered, needed: int | None, arch: str) -> Diagnostic | None:
    """A kernel that asks for more shared memory than a block of `arch` may have (the program's
    buffers plus what the backend adds: layout scratch, exchange space) cannot launch: a
    `lower.shared-memory` error at the stage parameter (or the kernel); None when it fits."""
    from kir.targets import spec

    limit = spec(arch.removesuffix("a")).max_smem_per_block  # sm_90a: sm_90 with its arch-specific instructions
    if not needed or needed <= limit:
        return None
    return shared_memory_diagnostic(lowered, needed, limit, f"an {arch} block")


def shared_memory_diagnostic(lowered: Lowered, needed: int, limit: int, where: str) -> Diagnostic:
    """`lower.shared-memory` at the stage parameter (or the kernel): the kernel needs `needed`
    bytes, `where` (a block of the target, the GPU it was launched on) may have `limit`. The C
    backends say how much of it is the program's own buffers (`smem_buffers`)."""
    params = lowered.program.param_spans
    at = next((params[p] for p in ("S", "ST", "STAGES", "NSTAGES") if p in params), lowered.program.span())
    buffers = lowered.options.get("smem_buffers")
    extra = (
        f" (the program's buffers {buffers}, the backend's exchange space between threads the rest)" if buffers else ""
    )
    return Diagnostic(
        "lower.shared-memory",
        "error",
        at,
        f"the kernel needs {needed} bytes of shared memory{extra}; {where} may have {limit}",
        "use fewer pipeline stages or smaller tiles",
    )


INSUFFICIENT_REGISTERS = re.compile(r"Insufficient registers \((\d+)\).*?register target of (\d+)")


def ptxas_failure(lowered: Lowered, reason: str) -> Diagnostic | None:
    """ptxas refusing the kernel for want of registers is the program's resource problem, not a
    backend bug: a `lower.registers` error at the kernel, with what ptxas had and needed."""
    m = INSUFFICIENT_REGISTERS.search(reason)
    if not m:
        return None
    had, need = int(m.group(1)), int(m.group(2))
    warps = lowered.options.get("total_warps") or lowered.num_warps or 1
    return Diagnostic(
        "lower.registers",
        "error",
        lowered.program.span(),
        f"ptxas cannot fit an instruction of this kernel in {had} registers a thread (it needs {need}): "
        f"with {warps} warps a block, 65536 registers give each thread at most {65536 // (32 * warps)}",
        "hold smaller tiles a thread (a wgmma accumulator of a warpgroup costs M x N / 128 registers a "
        "thread), or run fewer warps",
        counterexample={"registers": had, "needed": need},
    )


def unread_failure(lowered: Lowered, log: str, tool: str, source_name: str, path: str | None = None) -> Diagnostic:
    """The `lower.compile` error at the kernel when no error of the compiler's log names a line
    (a failure of the backend, the linker, or a missing compiler): the log's last line."""
    last = (log.strip().splitlines() or ["no output"])[-1]
    return compile_error(lowered, None, f"{tool} failed: {last}", where=source_name, path=path)


def resource_warnings(lowered: Lowered, report: CompileReport) -> list[Diagnostic]:
    """Warnings at the kernel for what the compiled code costs: spills, local memory, and
    what ptxas said it could not honour."""
    span = lowered.program.span()
    out = []
    if report.spills:
        out.append(
            Diagnostic(
                "compile.spills",
                "warning",
                span,
                f"the kernel spills registers to local memory ({report.spill_stores or 0} bytes stored, "
                f"{report.spill_loads or 0} loaded) at {report.registers} registers per thread",
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
