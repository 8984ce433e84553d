"""Compile an mtia-sim `Lowered` with g++ into a shared library and report on it.

    from lowering import lower
    from lowering.compile_mtia import compile_lowered
    report = compile_lowered(lower(program, "mtia-sim"))
    report.ok, report.binary, report.dynamic_shared_bytes (local SRAM of the buffers), report.diagnostics

Flags: `g++ -std=c++17 -O2 -shared -fPIC -I lowering/mtia`. The library exports `kir_launch`
(`lowering.runtime_mtia` calls it through ctypes). An error in the generated code is a bug of
ours, reported as `lower.compile` at the KIR op that produced the line (g++'s `file:line:col`).
Results are cached on disk by the hash of the source, the runtime header, the flags and the
g++ version (`$KIR_CACHE_DIR/mtia-sim`).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
import time
from functools import lru_cache
from pathlib import Path

from kir.diagnostics import Diagnostic
from lowering.emit.base import Lowered
from lowering.mtia import HEADER_DIR
from lowering.report import CompileReport, cache_dir, code_version, compile_error, load_report, save_report

ARCH = "mtia-sim"
FLAGS = ("-std=c++17", "-O2", "-shared", "-fPIC", "-fno-strict-aliasing")
SOURCE_NAME = "kernel.cpp"
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
    h = hashlib.sha256()
    for part in (source, HEADER.read_text(), "\0".join(flags), gxx_version(), code_version(__file__)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


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
    if not diags:
        last = (log.strip().splitlines() or ["no output"])[-1]
        diags.append(compile_error(lowered, None, f"g++ failed: {last}", where=SOURCE_NAME))
    return diags


def corrupt(source: str, line: int) -> str:
    """The test hook: a source whose line `line` (1-based) holds a statement g++ rejects."""
    lines = source.split("\n")
    lines[line - 1] = lines[line - 1] + " kir_corrupted_by_test_hook();"
    return "\n".join(lines)


def compile_lowered(
    lowered: Lowered, arch: str = ARCH, *, corrupt_line: int | None = None, use_cache: bool = True, **_
) -> CompileReport:
    """Compile to `kernel.so`; never raises for a compile failure (the report says so)."""
    start = time.monotonic()
    source = lowered.source if corrupt_line is None else corrupt(lowered.source, corrupt_line)
    if corrupt_line is not None:
        lowered = Lowered(**{**lowered.__dict__, "source": source})
    key = source_key(source, FLAGS)
    folder = cache_dir("mtia-sim") / key
    saved = folder / "report.json"
    report = load_report(saved) if use_cache else None
    if report is None or (report.ok and not Path(report.binary or "").exists()):
        report = _compile(lowered, source, folder)
        report.seconds = time.monotonic() - start
        if use_cache and gxx() is not None:
            save_report(saved, report)
    report.diagnostics = [] if report.ok else error_diagnostics(lowered, report.log, report.source_path)
    return report


def _compile(lowered: Lowered, source: str, folder: Path) -> CompileReport:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SOURCE_NAME).write_text(source)
    report = CompileReport(
        "mtia-sim", ARCH, ok=False, entry=lowered.entry, num_warps=1, source_path=str(folder / SOURCE_NAME)
    )
    report.dynamic_shared_bytes = int(lowered.options.get("sram_bytes", 0))
    tool = gxx()
    if tool is None:
        report.log = "g++ not found (install g++ 12 or later)"
        return report
    with tempfile.TemporaryDirectory(prefix="kir-gxx-") as tmp:
        work = Path(tmp)
        (work / SOURCE_NAME).write_text(source)
        try:
            proc = subprocess.run(
                [tool, *FLAGS, f"-I{HEADER_DIR}", SOURCE_NAME, "-o", "kernel.so"],
                cwd=work, capture_output=True, text=True, timeout=600, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            report.log = "g++ timed out after 600 s"
            return report
        report.log = proc.stdout + proc.stderr
        report.ok = proc.returncode == 0
        if not report.ok:
            return report
        tmp_so = folder / f"kernel.{time.monotonic_ns()}.so"
        shutil.copy(work / "kernel.so", tmp_so)
        tmp_so.replace(folder / "kernel.so")
    report.binary = str(folder / "kernel.so")
    report.extra["sram_bytes"] = report.dynamic_shared_bytes
    return report
