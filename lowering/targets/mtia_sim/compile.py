"""Compile an mtia-sim `Lowered` with g++ into a shared library and report on it.

    from lowering import lower
    from lowering.targets.mtia_sim.compile import compile_lowered
    report = compile_lowered(lower(program, "mtia-sim"))
    report.ok, report.binary, report.dynamic_shared_bytes (local SRAM of the buffers), report.diagnostics

Flags: `g++ -std=c++17 -O2 -shared -fPIC -I lowering/targets/mtia_sim`. The library exports `kir_launch`
(`lowering.targets.mtia_sim.runtime` calls it through ctypes). An error in the generated code is a bug of
ours, reported as `lower.compile` at the KIR op that produced the line (g++'s `file:line:col`).
Results are cached on disk by the hash of the source, the runtime header, the flags and the
g++ version (`$KIR_CACHE_DIR/mtia-sim`); a compile error is cached, a report whose tools failed
(g++ missing, timed out, killed or crashed, no library written) is not.
"""

from __future__ import annotations

import re
import shutil
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
    hash_key,
    new_report,
    note_tool_failure,
    run_tool,
    unread_failure,
    with_corrupt_line,
)

ARCH = "mtia-sim"
FLAGS = ("-std=c++17", "-O2", "-shared", "-fPIC", "-fno-strict-aliasing")
SOURCE_NAME = "kernel.cpp"
HEADER_DIR = Path(__file__).parent  # the simulator's header-only runtime, beside this driver
HEADER = HEADER_DIR / "mtia_sim.hpp"


@lru_cache(maxsize=1)
def gxx() -> str | None:
    return shutil.which("g++")


@lru_cache(maxsize=1)
def gxx_version() -> str:
    tool = gxx()
    if tool is None:
        return ""
    out = subprocess.run([tool, "--version"], capture_output=True, text=True, check=False).stdout
    return out.splitlines()[0] if out else ""


def source_key(source: str, flags: tuple[str, ...]) -> str:
    return hash_key(source, HEADER.read_text(), "\0".join(flags), gxx_version(), code_version(__file__))


_GXX_ERROR = re.compile(r"^(?P<file>[^:\s]+):(?P<line>\d+):(?P<col>\d+): (?:fatal )?error: (?P<msg>.*)$")


def error_diagnostics(lowered: Lowered, log: str, path: str | None = None) -> list[Diagnostic]:
    """One `lower.compile` diagnostic per g++ error in the generated source, at its KIR op."""
    diags = []
    for raw in log.splitlines():
        m = _GXX_ERROR.match(raw.strip())
        if m and m.group("file").endswith(SOURCE_NAME):
            line = int(m.group("line"))
            diags.append(
                compile_error(
                    lowered, line, m.group("msg"), where=f"{SOURCE_NAME}:{line}", column=int(m.group("col")), path=path
                )
            )
    return diags or [unread_failure(lowered, log, "g++", SOURCE_NAME)]


def compile_lowered(
    lowered: Lowered, arch: str = ARCH, *, corrupt_line: int | None = None, use_cache: bool = True, **_
) -> CompileReport:
    """Compile to `kernel.so`; never raises for a compile failure (the report says so)."""
    start = time.monotonic()
    lowered = with_corrupt_line(lowered, corrupt_line)
    folder = cache_dir(lowered.backend) / source_key(lowered.source, FLAGS)  # the target's name: a copy's own
    report = compile_cached(folder / "report.json", lambda: _compile(lowered, folder), start=start, use_cache=use_cache)
    report.diagnostics = [] if report.ok else error_diagnostics(lowered, report.log, report.source_path)
    return report


def _compile(lowered: Lowered, folder: Path) -> CompileReport:
    report = new_report(lowered, lowered.backend, ARCH, folder, SOURCE_NAME, num_warps=1)
    report.dynamic_shared_bytes = int(lowered.options.get("sram_bytes", 0))
    tool = gxx()
    if tool is None:
        report.log = "g++ not found (install g++ 12 or later)"
        note_tool_failure(report, "g++ not found")
        return report
    with tempfile.TemporaryDirectory(prefix="kir-gxx-") as tmp:
        work = Path(tmp)
        (work / SOURCE_NAME).write_text(lowered.source)
        rc, report.log = run_tool("g++", tool, [*FLAGS, f"-I{HEADER_DIR}", SOURCE_NAME, "-o", "kernel.so"], work)
        if (why := exit_failure("g++", rc, report.log)) is not None:
            note_tool_failure(report, why)
        report.ok = rc == 0
        if not report.ok:
            return report
        if not (work / "kernel.so").exists():
            note_tool_failure(report, "g++ succeeded but wrote no library")
            report.ok = False
            return report
        # atomic: another process may be loading the library (ctypes) while this one writes it
        copy_atomic(work / "kernel.so", folder / "kernel.so")
    report.binary = str(folder / "kernel.so")
    report.extra["sram_bytes"] = report.dynamic_shared_bytes
    return report
