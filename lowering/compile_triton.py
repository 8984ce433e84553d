"""Ahead-of-time compilation of the Triton backend's kernels, without a GPU, and what the
compiled kernel reports.

    from lowering.compile_triton import compile_triton
    report = compile_triton(program, "sm_90")      # or "gfx942"
    report.ok, report.registers, report.spills, report.shared_bytes, report.instructions

`triton.compile(ASTSource(fn, signature, constexprs), target=GPUTarget(...))` runs the whole
Triton pipeline offline: to a cubin through ptxas for NVIDIA (`sm_80`, `sm_90`) and to an hsaco
for AMD (`gfx90a`, `gfx942`). Pointer arguments are declared 16-byte aligned, as a launch on
torch tensors specializes them, so the code is the code a real launch gets.

What the report reads, and from where (without a driver):

| field | NVIDIA | AMD |
| --- | --- | --- |
| `registers` | ptxas -v on the kernel's PTX ("Used N registers") | `.vgpr_count` of the code object (SGPRs and AGPRs in `details`) |
| `spills` | bytes of spill stores per thread (ptxas -v) | spilled VGPRs x 4 bytes per lane (`.vgpr_spill_count`; SGPR spills, which go to VGPR lanes, in `details`) |
| `shared_bytes` | the kernel's dynamic shared memory (`metadata.shared`) | LDS (`metadata.shared`) |
| `local_bytes` | stack frame per thread (ptxas -v) | scratch per lane (`.private_segment_fixed_size`) |
| `instructions` | mma.sync, wgmma, cp.async, TMA, ldmatrix in the PTX | MFMA, buffer loads, LDS reads in the assembly |

What cannot be had offline: occupancy and the achieved register count after the driver's
own JIT (the cubin is final on NVIDIA; ptxas's count is the launch's); a compiled kernel's
timing.

A compile error in generated code is a bug of the backend, not of the program: it becomes a
`lower.compile` diagnostic located at the KIR op that produced the failing generated line
(`Lowered.span_for_line`). `replace_line` corrupts one line on purpose, for the tests of that
mapping.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kir.diagnostics import Diagnostic, KirError
from kir.program import Program
from lowering.emit.base import Lowered, lower
from lowering.runtime_triton import (
    _interpret_env,
    _interpreter_process,
    cache_dir,
    load_module,
    source_hash,
    source_path,
)

ARCHS: dict[str, tuple[str, int | str, int]] = {
    "sm_80": ("cuda", 80, 32),
    "sm_90": ("cuda", 90, 32),
    "gfx90a": ("hip", "gfx90a", 64),
    "gfx942": ("hip", "gfx942", 64),
}
# Instructions worth knowing about, by what marks them in the PTX or the AMD assembly.
NVIDIA_MARKS = {
    "mma": r"\bmma\.sync\.",
    "wgmma": r"\bwgmma\.mma_async\.",
    "cp.async": r"\bcp\.async\.(ca|cg)\.",
    "tma": r"\bcp\.async\.bulk\.tensor\.",
    "ldmatrix": r"\bldmatrix\.",
}
AMD_MARKS = {
    "mfma": r"\bv_mfma_",
    "buffer_load": r"\bbuffer_load_",
    "global_load": r"\bglobal_load_",
    "lds_read": r"\bds_read",
}


@dataclass
class CompileReport:
    backend: str
    arch: str
    ok: bool
    registers: int | None = None  # per thread (VGPRs on AMD)
    spills: int | None = None  # bytes per thread (spill stores on NVIDIA, spilled VGPRs x 4 on AMD)
    shared_bytes: int | None = None
    local_bytes: int | None = None  # stack frame (NVIDIA) / scratch (AMD) per thread
    instructions: dict[str, bool] = field(default_factory=dict)
    log: str = ""
    diagnostics: list[Diagnostic] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)  # binary kind and size, SGPRs, what was not readable

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["diagnostics"] = [d.to_json() for d in self.diagnostics]
        return out


# ---- mapping compile errors to KIR -------------------------------------------------------------


def replace_line(lowered: Lowered, line: int, text: str) -> Lowered:
    """A copy of `lowered` with generated line `line` (from 1) replaced by `text`, indented as
    the original: the test hook for compile-error locations."""
    lines = lowered.source.split("\n")
    old = lines[line - 1]
    lines[line - 1] = old[: len(old) - len(old.lstrip())] + text.strip()
    return dataclasses.replace(lowered, source="\n".join(lines))


def error_line(source: str, path: Path | str, err: BaseException) -> int | None:
    """The generated line an exception points at: a Triton CompilationError carries the AST
    node and the source of the function it was compiling; other errors may name the file."""
    from triton.compiler.errors import CompilationError

    chain: list[BaseException] = []
    e: BaseException | None = err
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__cause__ or e.__context__
    for e in chain:  # the outermost first: the kernel's own line, not a helper's
        if isinstance(e, CompilationError) and getattr(e.node, "lineno", None) and e.src:
            at = source.find(e.src)
            if at >= 0:
                return source.count("\n", 0, at) + e.node.lineno
    for e in chain:
        for frame in _traceback_lines(e, str(path)):
            return frame
        m = re.search(re.escape(str(path)) + r'"?(?:, line |:)(\d+)', str(e))
        if m:
            return int(m.group(1))
    return None


def _traceback_lines(err: BaseException, path: str) -> list[int]:
    """Lines of the generated file in an exception's traceback, innermost first (an error
    raised by the Python of an interpreted kernel)."""
    import traceback

    return [f.lineno for f in reversed(traceback.extract_tb(err.__traceback__)) if f.filename == path and f.lineno]


def compile_diagnostic(lowered: Lowered, message: str, line: int | None) -> Diagnostic:
    """A `lower.compile` diagnostic for an error Triton raised on the generated code, located
    at the KIR op of the generated line (at the kernel when no line is known)."""
    text = lowered.source.split("\n")[line - 1].strip() if line else ""
    where = f" at generated line {line} (`{text}`)" if line else ""
    return Diagnostic(
        "lower.compile",
        "error",
        lowered.span_for_line(line) if line else lowered.program.span(),
        f"Triton could not compile the code generated for this op{where}: {_last_line(message)}",
        "this is a bug of the Triton backend, not of the program: please report it with the program",
    )


# Exceptions of a launch that mean "the generated code is wrong" (Triton's front end raises
# CompilationError; the interpreter wraps what the Python of the kernel raised in InterpreterError).
COMPILE_ERRORS = (
    "CompilationError",
    "CompileTimeAssertionFailure",
    "UnsupportedLanguageConstruct",
    "InterpreterError",
    "SyntaxError",
    "NameError",
    "PTXASError",
)


def _last_line(text: str) -> str:
    """The reason in an error message (Triton's end with it, after the source excerpt)."""
    lines = [ln for ln in text.strip().split("\n") if ln.strip()]
    return lines[-1][:300] if lines else ""


def _reason(err: BaseException) -> str:
    from triton.compiler.errors import CompilationError

    e: BaseException = err
    while isinstance(e, CompilationError) and e.__cause__ is not None:
        e = e.__cause__
    if isinstance(e, CompilationError):
        text = (e.error_message or "").strip()
    else:
        text = f"{type(e).__name__}: {e}".strip()
    return text or type(e).__name__


# ---- compiling -----------------------------------------------------------------------------------


def _target(arch: str):
    from triton.backends.compiler import GPUTarget

    if arch not in ARCHS:
        raise KirError(
            Diagnostic("lower.arch", "error", None, f"no Triton target '{arch}'", f"targets: {', '.join(ARCHS)}")
        )
    return GPUTarget(*ARCHS[arch])


def _report_path(lowered: Lowered, arch: str) -> Path:
    import triton

    key = json.dumps(
        [
            source_hash(lowered.source),
            arch,
            lowered.num_warps,
            lowered.options["signature"],
            lowered.options["constexprs"],
            triton.__version__,
        ],
        sort_keys=True,
    )
    return cache_dir() / "reports" / f"{source_hash(key)}.json"


def compile_lowered(lowered: Lowered, arch: str = "sm_90", *, use_cache: bool = True) -> CompileReport:
    """Compile a lowered program for `arch` and read the report (cached by content hash).

    Compiling needs triton imported in its compiling mode; in a process that imported it for
    its interpreter (`TRITON_INTERPRET=1`), the compile runs in a child process instead."""
    _target(arch)  # an unknown arch is refused before anything runs
    cached = _report_path(lowered, arch)
    if use_cache and cached.exists():
        return CompileReport(**(json.loads(cached.read_text()) | {"diagnostics": []}))
    job = {
        "source": lowered.source,
        "entry": lowered.entry,
        "arch": arch,
        "num_warps": lowered.num_warps,
        "signature": lowered.options["signature"],
        "constexprs": lowered.options["constexprs"],
    }
    result = _compile_in_child(job) if _interpreter_process() else compile_job(job)
    error = result.pop("error", None)
    report = CompileReport(**result)
    if error is not None:
        report.diagnostics.append(compile_diagnostic(lowered, error["message"], error["line"]))
        return report
    if use_cache:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(report.to_json()))
        tmp.replace(cached)
    return report


def compile_job(job: dict) -> dict:
    """Compile one generated module (plain data in, the report's fields out, with an "error"
    entry {type, message, line} when Triton fails)."""
    import triton
    from triton.compiler import ASTSource

    target = _target(job["arch"])
    report = CompileReport("triton", job["arch"], ok=False)
    signature = job["signature"]
    attrs = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(signature) if signature[name].startswith("*")}
    path = source_path(job["source"], job["entry"])
    with _interpret_env(False):
        try:
            fn = getattr(load_module(job["source"], job["entry"], interpret=False), job["entry"])
            src = ASTSource(fn=fn, signature=signature, constexprs=job["constexprs"], attrs=attrs)
            compiled = triton.compile(src, target=target, options={"num_warps": job["num_warps"]})
        except Exception as err:  # noqa: BLE001 - every failure becomes a diagnostic
            report.log = f"{type(err).__name__}: {err}"
            out = report.to_json()
            out["error"] = {
                "type": type(err).__name__,
                "message": _reason(err),
                "line": error_line(job["source"], path, err),
            }
            return out
    report.ok = True
    report.shared_bytes = int(compiled.metadata.shared)
    if target.backend == "cuda":
        _read_nvidia(report, compiled, target.arch)
    else:
        _read_amd(report, compiled)
    return report.to_json()


def _compile_in_child(job: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "lowering.compile_triton", "--job"],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if done.returncode != 0:
        return CompileReport("triton", job["arch"], ok=False, log=done.stderr[-4000:]).to_json() | {
            "error": {"type": "RuntimeError", "message": done.stderr[-300:], "line": None}
        }
    return json.loads(done.stdout.strip().splitlines()[-1])


def _read_nvidia(report: CompileReport, compiled, capability: int) -> None:
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability

    ptx = compiled.asm["ptx"]
    report.instructions = {name: bool(re.search(rx, ptx)) for name, rx in NVIDIA_MARKS.items()}
    report.details["binary"] = "cubin"
    report.details["binary_bytes"] = len(compiled.asm["cubin"])
    m = re.search(r"\.maxnreg\s+(\d+)", ptx)
    report.details["maxnreg"] = int(m.group(1)) if m else None
    # Triton throws ptxas's -v log away; run ptxas again on the same PTX with the same flags.
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "kernel.ptx"
        src.write_text(ptx)
        cmd = [
            get_ptxas(capability).path,
            "-lineinfo",
            "-v",
            f"--gpu-name={sm_arch_from_capability(capability)}",
            str(src),
            "-o",
            str(Path(tmp) / "kernel.o"),
        ]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            log = out.stdout + out.stderr
        except (OSError, subprocess.SubprocessError) as err:
            log = f"ptxas could not run: {err}"
    report.log = log
    m = re.search(r"Used (\d+) registers", log)
    report.registers = int(m.group(1)) if m else None
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log)
    if m:
        report.local_bytes, report.spills = int(m.group(1)), int(m.group(2))
        report.details["spill_loads"] = int(m.group(3))
    missing = [k for k in ("registers", "spills", "local_bytes") if getattr(report, k) is None]
    if missing:
        report.details["unavailable"] = missing


def _read_amd(report: CompileReport, compiled) -> None:
    asm = compiled.asm["amdgcn"]
    report.instructions = {name: bool(re.search(rx, asm)) for name, rx in AMD_MARKS.items()}
    report.details["binary"] = "hsaco"
    report.details["binary_bytes"] = len(compiled.asm["hsaco"])

    def meta(key: str) -> int | None:
        m = re.search(rf"^\s*\.{re.escape(key)}:\s*(\d+)", asm, re.M)
        return int(m.group(1)) if m else None

    report.registers = meta("vgpr_count")
    vgpr_spills = meta("vgpr_spill_count")
    report.spills = None if vgpr_spills is None else 4 * vgpr_spills
    report.local_bytes = meta("private_segment_fixed_size")
    report.details.update(
        sgprs=meta("sgpr_count"),
        agprs=meta("agpr_count"),
        sgpr_spills=meta("sgpr_spill_count"),
        lds_bytes=meta("group_segment_fixed_size"),
    )
    report.log = "\n".join(line.strip() for line in asm.splitlines() if re.match(r"^\s*\.(vgpr|sgpr|agpr)_", line))
    missing = [k for k in ("registers", "spills", "local_bytes") if getattr(report, k) is None]
    if missing:
        report.details["unavailable"] = missing


def compile_triton(program: Program, arch: str = "sm_90", params: dict[str, int] | None = None) -> CompileReport:
    """Lower `program` with the Triton backend and compile it for `arch`; a program the
    backend refuses gives a report with `ok = False` and the refusal's diagnostics."""
    try:
        lowered = lower(program, "triton", params)
    except KirError as err:
        return CompileReport("triton", arch, ok=False, diagnostics=list(err.diagnostics))
    return compile_lowered(lowered, arch)


if __name__ == "__main__" and sys.argv[1:] == ["--job"]:
    print(json.dumps(compile_job(json.loads(sys.stdin.read()))))
