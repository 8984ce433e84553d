"""Ahead-of-time compilation of the Triton backend's kernels, without a GPU, and what the
compiled kernel reports.

    from lowering.compile import compile_program
    report = compile_program(program, "triton", "sm_90")      # or "gfx942"
    report.ok, report.registers, report.spills, report.shared_bytes, report.instructions

`triton.compile(ASTSource(fn, signature, constexprs), target=GPUTarget(...))` runs the whole
Triton pipeline offline: to a cubin through ptxas for NVIDIA (`sm_80`, `sm_90`) and to an hsaco
for AMD (`gfx90a`, `gfx942`). Pointer arguments are declared 16-byte aligned, as a launch on
torch tensors specializes them, so the code is the code a real launch gets.

What the `CompileReport` (lowering.report) reads, and from where (without a driver):

| field | NVIDIA | AMD |
| --- | --- | --- |
| `registers` | ptxas -v on the kernel's PTX ("Used N registers") | `.vgpr_count` of the code object (`sgprs`; AGPRs in `extra`) |
| `spill_stores`, `spill_loads` | bytes per thread (ptxas -v) | spilled VGPRs x 4 bytes per lane, as stores (`.vgpr_spill_count`; SGPR spills, which go to VGPR lanes, in `extra`) |
| `static_shared_bytes` | ptxas -v ("N bytes smem") | LDS in the code object (`.group_segment_fixed_size`) |
| `dynamic_shared_bytes` | what the launch asks for (`metadata.shared`) | LDS the launch asks for (`metadata.shared`) |
| `local_bytes` | stack frame per thread (ptxas -v) | scratch per lane (`.private_segment_fixed_size`) |
| `instructions` | mma.sync, wgmma, cp.async, TMA, ldmatrix in the PTX; HGMMA, HMMA, UTMALDG, ... in the SASS | MFMA, buffer loads, LDS reads in the assembly |

What cannot be had offline: occupancy and the achieved register count after the driver's
own JIT (the cubin is final on NVIDIA; ptxas's count is the launch's); a compiled kernel's
timing.

A compile error in generated code is a bug of the backend, not of the program: it becomes a
`lower.compile` diagnostic located at the KIR op that produced the failing generated line
(`Lowered.span_for_line`; the mapping is `errors.py`, which launches share).
`replace_line` corrupts one line on purpose, for the tests of that mapping.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kir import symexpr as sx
from kir.diagnostics import Diagnostic, KirError
from lowering.emit.base import Lowered
from lowering.report import (
    AMD_MARKS,
    CompileReport,
    cache_dir,
    code_version,
    count_instructions,
    load_report,
    note_tool_failure,
    note_unavailable,
    ptxas_failure,
    read_nvidia_texts,
    read_ptxas,
    resource_warnings,
    save_report,
    write_atomic,
)

from .errors import compile_diagnostic, error_line, exception_chain
from .errors import front_end_location as front_end_location  # the Gluon driver reads it here
from .runtime import (
    _interpret_env,
    _interpreter_process,
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


# ---- mapping compile errors to KIR -------------------------------------------------------------


def replace_line(lowered: Lowered, line: int, text: str) -> Lowered:
    """A copy of `lowered` with generated line `line` (from 1) replaced by `text`, indented as
    the original: the test hook for compile-error locations."""
    lines = lowered.source.split("\n")
    old = lines[line - 1]
    lines[line - 1] = old[: len(old) - len(old.lstrip())] + text.strip()
    return dataclasses.replace(lowered, source="\n".join(lines))


PTXAS_ERROR = re.compile(r"^ptxas (?:fatal|error)\s*:\s*(.+)$", re.MULTILINE)


def ptxas_reason(err: BaseException) -> str | None:
    """ptxas's own error lines when ptxas rejected the generated PTX (Triton raises PTXASError
    with them inside its message, chained to the subprocess's exit status), else None."""
    for e in exception_chain(err):
        if type(e).__name__ == "PTXASError":
            lines = [m.group(1).strip() for m in PTXAS_ERROR.finditer(str(e))]
            lines = [ln for ln in lines if not ln.startswith("Ptx assembly aborted")]
            if lines:
                return "ptxas: " + " ".join(lines)
    return None


def _reason(err: BaseException) -> str:
    from triton.compiler.errors import CompilationError

    if (ptxas := ptxas_reason(err)) is not None:
        return ptxas
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


def _key(lowered: Lowered, arch: str, divisible: list[str]) -> str:
    import triton

    key = json.dumps(
        [
            source_hash(lowered.source),
            arch,
            lowered.num_warps,
            lowered.options["signature"],
            lowered.options["constexprs"],
            divisible,
            triton.__version__,
            code_version(__file__),
        ],
        sort_keys=True,
    )
    return source_hash(key)[:24]


def divisible_symbols(lowered: Lowered, symbols: dict[str, int] | None = None) -> list[str]:
    """The shape symbols known to be multiples of 16, which Triton's JIT would specialize on
    (`tt.divisibility`) when it launches: those with a value given in `symbols` that is one, and
    those a `where N % k == 0` constraint makes one (k a multiple of 16 with the parameters)."""
    found = {name for name, value in (symbols or {}).items() if value % 16 == 0}
    for w in lowered.program.kernel.where.data:
        c = w.data
        if isinstance(c, sx.Bin) and c.op == "==" and c.rhs == sx.Int(0) and isinstance(c.lhs, sx.Bin):
            rem = c.lhs
            if rem.op == "%" and isinstance(rem.lhs, sx.Sym):
                try:
                    k = rem.rhs.evaluate(dict(lowered.params))
                except (KeyError, ZeroDivisionError):
                    continue
                if k % 16 == 0:
                    found.add(rem.lhs.name)
    return sorted(found & set(lowered.shape_symbols))


def compile_lowered(
    lowered: Lowered, arch: str = "sm_90", *, use_cache: bool = True, symbols: dict[str, int] | None = None
) -> CompileReport:
    """Compile a lowered program for `arch` and read the report (cached by content hash; a
    compile error is not cached, nor a report whose tools failed: `lowering.report.tool_failure`). `symbols` (shape values, e.g. the bench shape) specializes the
    compile as the launch would: a shape symbol that is a multiple of 16 is compiled as one, which
    decides the width of vector loads (see `divisible_symbols`).

    Compiling needs triton imported in its compiling mode; in a process that imported it for
    its interpreter (`TRITON_INTERPRET=1`), the compile runs in a child process instead."""
    _target(arch)  # an unknown arch is refused before anything runs
    start = time.monotonic()
    divisible = divisible_symbols(lowered, symbols)
    key = _key(lowered, arch, divisible)
    cached = cache_dir("triton") / "reports" / f"{key}.json"
    report = load_report(cached) if use_cache else None
    if report is not None:
        report.diagnostics = resource_warnings(lowered, report)
        return report
    job = {
        "source": lowered.source,
        "entry": lowered.entry,
        "arch": arch,
        "num_warps": lowered.num_warps,
        "signature": lowered.options["signature"],
        "constexprs": lowered.options["constexprs"],
        "divisible": divisible,
        "out": str(cache_dir("triton") / "artifacts" / key),
    }
    result = _compile_in_child(job) if _interpreter_process() else compile_job(job)
    error = result.pop("error", None)
    report = CompileReport.from_json(result)
    report.seconds = time.monotonic() - start
    if error is not None:
        report.diagnostics.append(
            ptxas_failure(lowered, error["message"]) or compile_diagnostic(lowered, error["message"], error["line"])
        )
        return report
    if use_cache:
        save_report(cached, report)  # unless its tools failed (lowering.report.tool_failure)
    report.diagnostics = resource_warnings(lowered, report)
    return report


def compile_job(job: dict) -> dict:
    """Compile one generated module (plain data in, the report's fields out, with an "error"
    entry {type, message, line} when Triton fails)."""
    import triton
    from triton.compiler import ASTSource

    target = _target(job["arch"])
    path = source_path(job["source"], job["entry"])
    report = CompileReport(
        "triton", job["arch"], ok=False, entry=job["entry"], num_warps=job["num_warps"], source_path=str(path)
    )
    signature = job["signature"]
    divisible = set(job.get("divisible", ()))
    attrs = {
        (i,): [["tt.divisibility", 16]]
        for i, name in enumerate(signature)
        if signature[name].startswith("*") or name in divisible
    }
    with _interpret_env(False):
        try:
            fn = getattr(load_module(job["source"], job["entry"], interpret=False), job["entry"])
            src = ASTSource(fn=fn, signature=signature, constexprs=job["constexprs"], attrs=attrs)
            compiled = triton.compile(src, target=target, options={"num_warps": job["num_warps"]})
        except Exception as err:  # noqa: BLE001 - every failure becomes a diagnostic
            report.log = f"{type(err).__name__}: {err}"
            if (why := tool_exception(err)) is not None:
                note_tool_failure(report, why)
            out = report.to_json()
            out["error"] = {
                "type": type(err).__name__,
                "message": _reason(err),
                "line": error_line(job["source"], path, err),
            }
            return out
    report.ok = True
    if target.backend == "cuda":
        read_nvidia(report, compiled, target.arch, Path(job["out"]))
    else:
        _read_amd(report, compiled, Path(job["out"]))
    return report.to_json()


def _compile_in_child(job: dict, timeout: float = 600) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[3]), env.get("PYTHONPATH", "")])
    try:
        done = subprocess.run(
            [sys.executable, "-m", "lowering.targets.triton.compile", "--job"],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )
        stderr, code = done.stderr, done.returncode
    except subprocess.TimeoutExpired as err:
        stderr = err.stderr.decode(errors="replace") if isinstance(err.stderr, bytes) else err.stderr or ""
        stderr, code = stderr + f"\nthe compiling process timed out after {timeout:g} s", None
    if code != 0:
        # the child reports every error of the compile itself: its death is a failure of the tools
        failed = CompileReport("triton", job["arch"], ok=False, entry=job["entry"], log=stderr[-4000:])
        what = "timed out" if code is None else f"died (exit status {code})"
        note_tool_failure(failed, f"the compiling process {what}")
        return failed.to_json() | {"error": {"type": "RuntimeError", "message": stderr[-300:], "line": None}}
    return json.loads(done.stdout.strip().splitlines()[-1])


def tool_exception(err: BaseException) -> str | None:
    """Why an exception of `triton.compile` is a failure of the tools rather than its answer
    about the code, or None. Triton's front end, its passes and ptxas's errors answer the same
    way every time; a tool that cannot run (OSError: not found, no space left), a timeout,
    exhausted memory or ptxas killed by a signal may not happen again."""
    for e in exception_chain(err):
        if isinstance(e, (OSError, MemoryError, subprocess.TimeoutExpired)):
            return f"{type(e).__name__}: {e}"[:300]
        # Triton's words for a ptxas that died: "raised SIGSEGV", or a negative exit status
        if type(e).__name__ == "PTXASError" and re.search(r"raised SIG|error code -\d", str(e)):
            return "ptxas crashed: " + str(e).strip().splitlines()[0][:200]
    return None


def ptxas_log(ptx: str, capability: int) -> str:
    """`ptxas -v` on a kernel's PTX with Triton's own ptxas and flags (Triton throws the log of
    its own run away)."""
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability

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
            return out.stdout + out.stderr
        except (OSError, subprocess.SubprocessError) as err:
            return f"ptxas could not run: {err}"


def read_nvidia(report: CompileReport, compiled, capability: int, out: Path) -> None:
    """Fill `report` from a kernel Triton (or Gluon) compiled for NVIDIA: the cubin written to
    `out`, the launch's shared memory, the PTX and SASS with their instructions, `ptxas -v`."""
    ptx = compiled.asm["ptx"]
    binary = out / "kernel.cubin"
    write_atomic(binary, compiled.asm["cubin"])
    report.binary = str(binary)
    report.dynamic_shared_bytes = int(compiled.metadata.shared)
    m = re.search(r"\.maxnreg\s+(\d+)", ptx)
    report.extra["maxnreg"] = int(m.group(1)) if m else None
    read_nvidia_texts(report, ptx, binary)
    report.log = ptxas_log(ptx, capability)
    read_ptxas(report.log, report)


def _read_amd(report: CompileReport, compiled, out: Path) -> None:
    asm = compiled.asm["amdgcn"]
    binary = out / "kernel.hsaco"
    write_atomic(binary, compiled.asm["hsaco"])
    report.binary = str(binary)
    report.asm = asm
    report.instructions = count_instructions(asm, AMD_MARKS)

    def meta(key: str) -> int | None:
        m = re.search(rf"^\s*\.{re.escape(key)}:\s*(\d+)", asm, re.M)
        return int(m.group(1)) if m else None

    report.registers = meta("vgpr_count")
    report.sgprs = meta("sgpr_count")
    vgpr_spills = meta("vgpr_spill_count")
    report.spill_stores = None if vgpr_spills is None else 4 * vgpr_spills
    report.local_bytes = meta("private_segment_fixed_size")
    report.static_shared_bytes = meta("group_segment_fixed_size")
    report.dynamic_shared_bytes = int(compiled.metadata.shared)  # LDS asked for at launch, as on NVIDIA
    report.extra.update(agprs=meta("agpr_count"), sgpr_spills=meta("sgpr_spill_count"))
    report.log = "\n".join(line.strip() for line in asm.splitlines() if re.match(r"^\s*\.(vgpr|sgpr|agpr)_", line))
    note_unavailable(report)


if __name__ == "__main__" and sys.argv[1:] == ["--job"]:
    print(json.dumps(compile_job(json.loads(sys.stdin.read()))))
