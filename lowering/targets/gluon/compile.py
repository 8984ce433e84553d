"""Compile a lowered Gluon kernel ahead of time for sm_90, without a GPU.

    from lowering.compile import compile_program
    report = compile_program(program, "gluon", "sm_90", params={"BN": 256})
    report.ok, report.shared_bytes, report.instructions["wgmma"], report.diagnostics

The emitted module is written to a file (Triton reads a kernel's source with `inspect`, and
MLIR locations then name real lines), imported, and compiled with `triton.compile` on a
`GluonASTSource` for `GPUTarget("cuda", 90, 32)`: the path `JITFunction.warmup` takes, minus
the driver query that needs a GPU. The signature gives each TMA descriptor as
`tensordesc<bf16[128, 64],NVMMASharedLayout(...)>`, the form Triton's own launcher uses.
The `CompileReport` (lowering.report) reads registers, spills and local memory from `ptxas -v`
on the PTX (as the Triton driver does), the instructions from the PTX and the SASS, and the
roles' register budgets (`setmaxnreg`) into `extra`.

A compile error in emitted code is a bug of ours, never of the KIR program: it becomes a
`lower.compile` diagnostic located at the KIR op that produced the failing line (through
`Lowered.span_for_line`), with the generated line quoted. Results are cached on disk by the
hash of the source, the options and the Triton version (`$KIR_CACHE_DIR`, default
`~/.cache/kir`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import cast

from lowering.emit.base import Lowered
from lowering.report import (
    CompileReport,
    CorruptEntry,
    cache_dir,
    code_version,
    compile_error,
    note_tool_failure,
    ptxas_failure,
    read_entry,
    report_data,
    report_files,
    report_from_data,
    resource_warnings,
    shared_memory_error,
    write_entry,
    write_if_changed,
)

ARCH = "sm_90"
# The Triton driver whose code reads the compiled kernel back (found, not imported: it imports Triton)
_TRITON_DRIVER = cast(str, cast(ModuleSpec, importlib.util.find_spec("lowering.targets.triton.compile")).origin)


def signature(lowered: Lowered) -> dict[str, str]:
    """Triton's signature of the kernel's parameters, in order."""
    from triton.experimental.gluon import language as gl

    from .emit import SIG_DTYPE

    sig: dict[str, str] = {}
    for p in lowered.options["launch"]:
        if p["kind"] == "desc":
            layout = gl.NVMMASharedLayout(p["swizzle"], p["bits"], len(p["box"]))
            box = ", ".join(str(b) for b in p["box"])
            sig[p["name"]] = f"tensordesc<{SIG_DTYPE[p['dtype']]}[{box}],{layout!r}>"
        elif p["kind"] == "ptr":
            sig[p["name"]] = "*" + SIG_DTYPE[p["dtype"]]
        else:
            sig[p["name"]] = "i32"
    return sig


def write_module(source: str) -> Path:
    """Write generated source to a file named by its hash."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    return write_if_changed(cache_dir("gluon") / "src" / f"kir_gluon_{digest}.py", source)


def load_module(source: str | Path):
    """Import generated source (text, or the file `write_module` made) as a module."""
    path = source if isinstance(source, Path) else write_module(source)
    name = path.stem
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _key(source: str, lowered: Lowered, arch: str) -> str:
    import triton

    blob = json.dumps(
        {
            "source": source,
            "num_warps": lowered.num_warps,
            "sig": lowered.options["launch"],
            "arch": arch,
            "triton": triton.__version__,
            # the cached answer's format: the child reads the compiled kernel with the Triton driver's code
            "driver": code_version(__file__, _TRITON_DRIVER),
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def compile_lowered(
    lowered: Lowered,
    arch: str = ARCH,
    *,
    use_cache: bool = True,
    timeout: float = 300.0,
    transform_source: Callable[[str], str] | None = None,
) -> CompileReport:
    """Compile `lowered` to an sm_90 cubin in a child process (a compiler crash or hang
    becomes a diagnostic, not the caller's death). `transform_source` rewrites the generated
    source before compiling: a test hook (corrupt a line, check where the error lands)."""
    if lowered.backend != "gluon":
        raise ValueError(f"compile_lowered takes a gluon lowering, not {lowered.backend}")
    source = transform_source(lowered.source) if transform_source else lowered.source
    key = _key(source, lowered, arch)
    entry = cache_dir("gluon") / "reports" / f"{key}.json"
    path = write_module(source)
    start = time.monotonic()
    # The compiler's raw answer is cached, never diagnostics: their spans belong to the program
    # being lowered now.
    raw = read_entry(entry, _parse_raw) if use_cache else None
    cached = raw is not None
    if raw is None:
        raw = _run_child(lowered, path, key, arch, timeout)
    report = _report(lowered, source, path, raw, arch)
    if use_cache and not cached:
        write_entry(entry, raw, report)  # unless its tools failed: a timeout or a crash may pass
    report.cached = cached
    report.seconds = time.monotonic() - start
    return report


def _parse_raw(data) -> tuple[dict, list[str]]:
    """A cached raw answer of the child (`_run_child`), checked, and the files it names;
    `CorruptEntry` when it is of another shape, or an answer that is never cached (the child's
    timeout or death, a failed tool)."""
    if not isinstance(data, dict) or set(data) != {"result", "stderr", "code"}:
        raise CorruptEntry("not a compiler's answer")
    result = data["result"]
    if not isinstance(data["stderr"], str) or not isinstance(result, dict) or data["code"] != 0:
        raise CorruptEntry("not the answer of a compiler that ran to its end")
    if "tool_failure" in result:
        raise CorruptEntry(f"an answer whose tools failed: {result['tool_failure']}")
    if not result.get("ok"):
        texts = (result.get("message", ""), result.get("log", ""))
        places = (result.get("line"), result.get("col"))
        if not all(isinstance(t, str) for t in texts) or not all(p is None or type(p) is int for p in places):
            raise CorruptEntry("a compile error of another shape")
        return data, []
    return data, report_files(report_from_data(result.get("report")))


def _run_child(lowered: Lowered, path: Path, key: str, arch: str, timeout: float) -> dict:
    out = cache_dir("gluon") / "artifacts" / key[:24]
    out.mkdir(parents=True, exist_ok=True)
    request = {
        "source_path": str(path),
        "entry": lowered.entry,
        "signature": signature(lowered),
        "attrs": [[list(k), v] for k, v in _attrs(lowered).items()],
        "num_warps": lowered.num_warps,
        "arch": arch,
        "out": str(out),
    }
    # one request and one result a compile: two processes compiling the same kernel at once
    # must not read each other's
    tag = f"{os.getpid()}.{time.monotonic_ns()}"
    request["result"] = str(out / f"result.{tag}.json")
    request_path = out / f"request.{tag}.json"
    request_path.write_text(json.dumps(request))
    root = str(Path(__file__).resolve().parents[3])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "lowering.targets.gluon.compile", str(request_path)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=root,
        )
        stderr, code = proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as err:
        stderr, code = (
            (err.stderr.decode(errors="replace") if isinstance(err.stderr, bytes) else err.stderr or ""),
            None,
        )
    result_path = Path(cast(str, request["result"]))
    result = json.loads(result_path.read_text()) if result_path.exists() and code == 0 else None
    request_path.unlink(missing_ok=True)
    result_path.unlink(missing_ok=True)
    return {"result": result, "stderr": stderr, "code": code}


def _report(lowered: Lowered, source: str, path: Path, raw: dict, arch: str) -> CompileReport:
    result, stderr, code = raw["result"], raw["stderr"], raw["code"]
    if result is not None and result.get("ok"):
        report = CompileReport.from_json(result["report"])
        report.cached = False
        report.diagnostics = resource_warnings(lowered, report)
        if (too_big := shared_memory_error(lowered, report.shared_bytes, arch)) is not None:
            report.ok = False
            report.diagnostics.append(too_big)
        return report
    report = CompileReport(
        backend="gluon",
        arch=arch,
        ok=False,
        entry=lowered.entry,
        num_warps=lowered.options.get("total_warps"),
        source_path=str(path),
    )
    if result is not None:
        line, col, message = result.get("line"), result.get("col"), result.get("message", "")
        if line is None:  # a pass failed after the front end: MLIR said where, on stderr
            line, col = _mlir_location(stderr, path)
            message = _first_error(stderr) or message
        report.log = (result.get("log", "") + "\n" + stderr).strip()
        if "tool_failure" in result:
            note_tool_failure(report, result["tool_failure"])
    else:
        line, col = _mlir_location(stderr, path)
        what = "timed out" if code is None else f"crashed (exit status {code})"
        first = _first_error(stderr)
        message = f"the compiler {what}" + (f": {first}" if first else "")
        report.log = stderr
        note_tool_failure(report, f"the compiling process {what}")
    first_line = message.strip().splitlines()[0] if message.strip() else ""
    shown = lowered if source == lowered.source else Lowered(**{**lowered.__dict__, "source": source})
    report.diagnostics.append(
        ptxas_failure(lowered, first_line) or compile_error(shown, line, first_line, column=col, path=str(path))
    )
    return report


def _attrs(lowered: Lowered) -> dict:
    """Pointer arguments declared align(16) (or more) are 16-byte aligned, as Triton's JIT
    would specialize them."""
    attrs = {}
    for i, p in enumerate(lowered.options["launch"]):
        if p["kind"] == "ptr" and p.get("align", 0) >= 16:
            attrs[(i,)] = [["tt.divisibility", 16]]
    return attrs


def _setmaxnreg(ptx: str) -> list[str]:
    """The register budgets the PTX sets (`setmaxnreg.inc/.dec`), in order: "dec 40", ..."""
    found = re.findall(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+)", ptx)
    return [f"{kind} {n}" for kind, n in found]


def _generated_line(source: str, err: BaseException) -> tuple[int | None, int | None, str]:
    """The line (1-based, in the generated module) and column where Triton's front end failed,
    and its message."""
    import ast

    from lowering.targets.triton.compile import exception_chain, front_end_location, ptxas_reason

    chain = exception_chain(err)
    root = chain[-1]
    message = ptxas_reason(err) or f"{type(root).__name__}: {root}"
    # The innermost CompilationError names the failing node (inside a partition's function).
    found = front_end_location(source, chain, innermost=True)
    if found:
        line, col, e = found
        inner = e.error_message or (f"{type(e.__cause__).__name__}: {e.__cause__}" if e.__cause__ else message)
        return line, col, inner
    # Errors raised while Triton walks a function's AST for other reasons (its dependency
    # hash, for one) carry the node and the function's name in their frames.
    for e in chain:
        for frame in reversed(list(_frames(e.__traceback__))):
            node, owner = frame.f_locals.get("node"), frame.f_locals.get("self")
            fname = getattr(owner, "name", None) or getattr(owner, "__name__", None)
            if isinstance(node, ast.AST) and hasattr(node, "lineno") and isinstance(fname, str):
                m = re.search(rf"^def {re.escape(fname.split('.')[-1])}\(", source, re.MULTILINE)
                if m:
                    located = cast(ast.stmt | ast.expr, node)  # a node with a line has a column too
                    return source[: m.start()].count("\n") + located.lineno, located.col_offset + 1, message
    return None, None, message


def _frames(tb):
    while tb is not None:
        yield tb.tb_frame
        tb = tb.tb_next


def _mlir_location(stderr: str, path: Path) -> tuple[int | None, int | None]:
    """MLIR diagnostics name locations in the generated file: `.../kir_gluon_x.py:33:12: error`."""
    for m in re.finditer(re.escape(path.name) + r'"?:(\d+):(\d+)', stderr):
        return int(m.group(1)), int(m.group(2))
    return None, None


def _first_error(stderr: str) -> str:
    for line in stderr.splitlines():
        if "error" in line.lower() or "assert" in line.lower():
            m = re.search(r"error:\s*(.*)", line)
            return (m.group(1) if m else line).strip()[:300]
    return ""


def _child(request_path: str) -> int:
    """Compile one request (run in a child process by `compile_lowered`)."""
    request = json.loads(Path(request_path).read_text())
    out = Path(request["out"])
    result: dict = {"ok": False}
    source_path = Path(request["source_path"])
    source = source_path.read_text()
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.experimental.gluon._runtime import GluonASTSource

        module = load_module(source_path)
        kernel = getattr(module, request["entry"])
        attrs = {tuple(k): v for k, v in request["attrs"]}
        src = GluonASTSource(kernel, request["signature"], constexprs={}, attrs=attrs)
        capability = int(request["arch"].removeprefix("sm_"))
        target = GPUTarget("cuda", capability, 32)
        compiled = triton.compile(src, target=target, options={"num_warps": request["num_warps"]})
    except Exception as err:  # noqa: BLE001 - every failure is reported
        from lowering.targets.triton.compile import tool_exception

        line, col, message = _generated_line(source, err)
        result.update(line=line, col=col, message=message, log="".join(traceback.format_exception(err)))
        if (why := tool_exception(err)) is not None:
            result["tool_failure"] = why
        Path(request["result"]).write_text(json.dumps(result))
        return 0
    from lowering.targets.triton.compile import read_nvidia

    report = CompileReport(
        "gluon",
        request["arch"],
        ok=True,
        entry=request["entry"],
        num_warps=int(compiled.metadata.num_warps),
        source_path=str(source_path),
    )
    read_nvidia(report, compiled, capability, out)
    report.extra["setmaxnreg"] = _setmaxnreg(report.ptx or "")
    result.update(ok=True, report=report_data(report))
    Path(request["result"]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))
