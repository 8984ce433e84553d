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
| `extra` | backend facts with no field of their own (AGPRs, SGPR spills, setmaxnreg budgets, `.maxnreg`, what could not be read; `tool_failure`: why a tool failed) |
| `seconds`, `cached` | how long the driver took; whether the answer came from the disk cache |

`shared_bytes` (static plus dynamic) and `spills` (stores plus loads) are derived, and
`to_json` adds them. Diagnostics are never cached: their spans belong to the program lowered
now, so a driver recomputes them from the cached report.

The disk cache (`$KIR_CACHE_DIR/<backend>`, default `~/.cache/kir`) keeps a report with a
checksum of each file it names. A report whose tools failed (`tool_failure`: a compiler not
found, timed out or crashed, cuobjdump failing, an artefact missing) is returned but never
cached; an entry that cannot be read back whole (`read_entry`: cut short, not JSON, of another
shape, its binary or source gone or changed) is logged, removed and compiled again.
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import hashlib
import itertools
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import time
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

from kir.diagnostics import Diagnostic
from lowering.emit.base import Lowered
from lowering.targets import targets

TEXTS = ("ptx", "sass", "asm", "log")  # the text artefacts, cut short for display
T = TypeVar("T")


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
#
# An entry is one JSON file, {"format": CACHE_FORMAT, "data": ..., "files": {path: sha256}}: the
# compiler's answer and a checksum of each file it names (the binary, the generated source). An
# entry that cannot be read back whole (cut short, not JSON, another shape, a file gone or
# changed) is removed, logged, and compiled again; an answer whose tools failed is never written.

log = logging.getLogger(__name__)

CACHE_FORMAT = 1
# A temporary file older than this was left by a writer that died before its rename: no write of
# a report or a binary takes a tenth of it, however loaded the machine.
STALE_TMP_SECONDS = 600.0
TOOL_FAILURE = "tool_failure"  # the key in `extra` under which a driver notes a failed tool


class CorruptEntry(ValueError):
    """A cache entry that cannot be trusted; the message says why."""


def cache_dir(backend: str) -> Path:
    """`$KIR_CACHE_DIR/<backend>` (default `~/.cache/kir/<backend>`), created."""
    root = Path(os.environ.get("KIR_CACHE_DIR", Path.home() / ".cache" / "kir")) / backend
    root.mkdir(parents=True, exist_ok=True)
    return root


_tmp_names = itertools.count()


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write through a temporary file and a rename: parallel test workers (and threads) may write
    the same file, and a reader never sees half of it. The temporary's name holds the writer's
    pid and a counter, so no two writers share one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{next(_tmp_names)}.tmp")
    try:
        tmp.write_bytes(data if isinstance(data, bytes) else data.encode())
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)  # when the write itself failed (a full disk)


def copy_atomic(src: Path, dst: Path) -> None:
    """`src` copied to `dst` as `write_atomic` writes: a binary is never seen half-copied."""
    write_atomic(dst, src.read_bytes())


def write_if_changed(path: Path, text: str) -> Path:
    """Write `text` to `path` unless it holds it already (a generated source named by its hash:
    a file cut short or overwritten is written again). Compared as bytes: a file of garbage
    must not raise."""
    data = text.encode()
    try:
        same = path.read_bytes() == data
    except OSError:
        same = False
    if not same:
        write_atomic(path, data)
    return path


def file_digest(path: str | Path) -> str | None:
    """The sha256 of a file's bytes, None when it cannot be read."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def remove_stale_tmp(path: Path) -> None:
    """Remove the temporaries that writers of `path` left behind when they died between their
    write and their rename (`write_atomic`)."""
    now = time.time()
    for tmp in path.parent.glob(f"{glob.escape(path.name)}.*.tmp"):
        try:
            if now - tmp.stat().st_mtime > STALE_TMP_SECONDS:
                tmp.unlink()
                log.info("removed %s, left by a writer that died", tmp)
        except OSError:
            pass  # renamed or removed by another process meanwhile


def read_entry(path: Path, parse: Callable[[Any], tuple[T, list[str]]]) -> T | None:
    """The cache entry at `path`, as `parse` makes it from the entry's data (raising
    `CorruptEntry` when the data is of another shape) with the files it names; None when there
    is none or it cannot be trusted. An entry that cannot be trusted is logged and removed, so
    that the compile that follows writes it again."""
    remove_stale_tmp(path)
    if not path.exists():
        return None
    try:
        value, files = _read_entry(path, parse)
    except CorruptEntry as err:
        log.warning("cache entry %s discarded: %s", path, err)
        path.unlink(missing_ok=True)
        return None
    for f in files:
        remove_stale_tmp(Path(f))
    return value


def _read_entry(path: Path, parse: Callable[[Any], tuple[T, list[str]]]) -> tuple[T, list[str]]:
    try:
        entry = json.loads(path.read_bytes().decode())
    except (OSError, ValueError) as err:  # cut short, not JSON, not UTF-8
        raise CorruptEntry(f"not JSON ({err})") from None
    if not isinstance(entry, dict) or set(entry) != {"format", "data", "files"} or entry["format"] != CACHE_FORMAT:
        raise CorruptEntry("not an entry of this cache's format")
    files = entry["files"]
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise CorruptEntry("its checksums are not a table of paths to digests")
    for f, digest in files.items():
        found = file_digest(f)
        if found is None:
            raise CorruptEntry(f"{f} is gone")
        if found != digest:
            raise CorruptEntry(f"{f} is not the file compiled (cut short or overwritten)")
    value, named = parse(entry["data"])
    for f in named:
        if f not in files:
            raise CorruptEntry(f"{f} has no checksum")
    return value, named


def write_entry(path: Path, data: Any, report: CompileReport) -> bool:
    """Cache `data` (what `report` is made from) at `path` with the checksums of the report's
    files; whether it was written. A report whose tools failed is not (`tool_failure`)."""
    if (why := tool_failure(report)) is not None:
        log.info("not cached (%s): %s", why, path)
        return False
    files = {f: file_digest(f) for f in report_files(report)}
    write_atomic(path, json.dumps({"format": CACHE_FORMAT, "data": data, "files": files}))
    return True


def report_files(report: CompileReport) -> list[str]:
    """The files a report names (its binary, its generated source)."""
    return [f for f in (report.binary, report.source_path) if f is not None]


def artefacts(backend: str, arch: str) -> tuple[str, ...]:
    """What an ok report of `backend` for `arch` holds, as its target declares it (the binary,
    the texts read from it, the registers read from the assembler's log: ptxas -v, the AMD
    metadata); none for a backend the registry does not know."""
    known = targets()
    return known[backend].artefacts_for(arch) if backend in known else ()


def note_tool_failure(report: CompileReport, reason: str) -> None:
    """Say in the report that a tool failed (the first reason is kept): it is not cached."""
    report.extra.setdefault(TOOL_FAILURE, reason)


def tool_failure(report: CompileReport) -> str | None:
    """Why `report` is not the toolchain's answer about the code, or None when it is. A compile
    error in the generated code is an answer (the same code fails the same way next time); a
    tool that was not found, timed out or crashed (noted by the driver), an artefact that an ok
    compile should have made and did not (`artefacts`, as the target declares them: no SASS when cuobjdump failed, no
    registers when the ptxas log could not be had), or a file the report names that is not
    there, is not. Such a report goes back to the caller, but is never cached."""
    if noted := report.extra.get(TOOL_FAILURE):
        return str(noted)
    if report.ok:
        missing = [name for name in artefacts(report.backend, report.arch) if getattr(report, name) in (None, "")]
        if missing:
            return f"an ok compile without its {', '.join(missing)}"
    for f in report_files(report):
        if not Path(f).is_file():
            return f"{f} was not written"
    return None


# The report's fields as the cache holds them: the derived totals, the diagnostics (whose spans
# belong to the program lowered now) and `cached` (a fact of the reading, not of the compile) are
# left out.
_NOT_STORED = ("diagnostics", "shared_bytes", "spills", "cached")


def report_data(report: CompileReport) -> dict[str, Any]:
    """The report as the cache stores it."""
    data = report.to_json()
    for name in _NOT_STORED:
        data.pop(name)
    return data


def report_from_data(data: Any) -> CompileReport:
    """The report `report_data` made, checked field by field against `CompileReport`'s types;
    `CorruptEntry` when a field is missing, unknown or of another type, or when the report is
    one whose tools failed (such a report was never meant to be stored)."""
    hints = _stored_hints()
    if not isinstance(data, dict):
        raise CorruptEntry(f"the report is a {type(data).__name__}, not an object")
    if missing := sorted(set(hints) - set(data)):
        raise CorruptEntry(f"the report has no {', '.join(missing)}")
    if unknown := sorted(set(data) - set(hints)):
        raise CorruptEntry(f"the report has unknown fields {', '.join(unknown)}")
    for name, value in data.items():
        if not _conforms(value, hints[name]):
            raise CorruptEntry(f"the report's {name} is {value!r:.60}, not {hints[name]}")
    report = CompileReport(**data)
    if (why := tool_failure(report)) is not None:
        raise CorruptEntry(f"a report whose tools failed: {why}")
    return report


@functools.cache
def _stored_hints() -> dict[str, Any]:
    hints = typing.get_type_hints(CompileReport)
    return {f.name: hints[f.name] for f in dataclasses.fields(CompileReport) if f.name not in _NOT_STORED}


def _conforms(value: Any, hint: Any) -> bool:
    """Whether plain data `value` (read from JSON) is of type `hint`."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, h) for h in args)
    if origin is dict:
        return isinstance(value, dict) and all(
            _conforms(k, args[0]) and _conforms(v, args[1]) for k, v in value.items()
        )
    if origin is list:
        return isinstance(value, list) and all(_conforms(v, args[0]) for v in value)
    if isinstance(value, bool):  # a bool is an int to Python, never to a report
        return hint is bool
    if hint is float:
        return isinstance(value, (int, float))
    return isinstance(value, hint)


def load_report(path: Path) -> CompileReport | None:
    """A cached report, marked `cached` (None when there is none, or when the entry cannot be
    trusted: see `read_entry`)."""
    report = read_entry(path, lambda data: ((r := report_from_data(data)), report_files(r)))
    if report is not None:
        report.cached = True
    return report


def save_report(path: Path, report: CompileReport) -> bool:
    """Cache `report` at `path`, unless its tools failed; whether it was written."""
    return write_entry(path, report_data(report), report)


def compile_cached(
    entry: Path, compile: Callable[[], CompileReport], *, start: float, use_cache: bool
) -> CompileReport:
    """The report cached at `entry`, or else `compile()`'s, timed from `start` and cached
    unless its tools failed (`tool_failure`: a missing tool may be installed next time, a
    timeout or a crash may pass)."""
    report = load_report(entry) if use_cache else None
    if report is None:
        report = compile()
        report.seconds = time.monotonic() - start
        if use_cache:
            save_report(entry, report)
    return report


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
    and a message when it runs past `timeout` seconds, 126 when it cannot be run at all (the
    shell's statuses, which `exit_failure` reads)."""
    try:
        proc = subprocess.run(
            [tool, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False, env=env
        )
    except subprocess.TimeoutExpired:
        return 124, f"{name} timed out after {timeout:g} s"
    except OSError as err:  # gone since it was found, not executable
        return 126, f"{name} could not be run: {err}"
    return proc.returncode, proc.stdout + proc.stderr


# What a compiler driver prints when one of its own programs died rather than rejected the code
# (nvcc: "'cicc' died due to signal 11"; gcc: "Killed signal terminated program cc1plus", "internal
# compiler error"; a process out of memory).
_CRASHED = re.compile(
    r"died due to signal|Killed signal terminated program|internal compiler error|Segmentation fault"
    r"|core dumped|out of memory allocating|virtual memory exhausted|std::bad_alloc"
)


def exit_failure(name: str, rc: int, log: str) -> str | None:
    """Why a compiler's run says nothing about the code: not found (127), not runnable (126),
    timed out (124), killed by a signal (a negative status, or 128 + the signal from a wrapper
    script), or crashed as its log says; None when its exit status is its answer (0, or the
    status of an error in the code)."""
    if rc == 0:
        return None
    if rc == 127:
        return f"{name} not found"
    if rc == 126:
        return f"{name} could not be run"
    if rc == 124:
        return f"{name} timed out"
    if rc < 0 or 128 < rc < 128 + signal.NSIG:
        number = -rc if rc < 0 else rc - 128
        try:
            what = signal.Signals(number).name
        except ValueError:
            what = f"signal {number}"
        return f"{name} was killed ({what})"
    if m := _CRASHED.search(log):
        line = next((ln.strip() for ln in log.splitlines() if m.group(0) in ln), m.group(0))
        return f"{name} crashed: {line[:200]}"
    return None


def new_report(
    lowered: Lowered, backend: str, arch: str, folder: Path, source_name: str, num_warps: int | None
) -> CompileReport:
    """A failed report for `lowered` with its source written to the cache folder: the
    compiler's answer fills it in."""
    write_atomic(folder / source_name, lowered.source)
    return CompileReport(
        backend, arch, ok=False, entry=lowered.entry, num_warps=num_warps, source_path=str(folder / source_name)
    )


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


def disassemble(cubin: Path) -> tuple[str | None, str | None]:
    """`cuobjdump -sass` of a cubin, or None and why it could not be had."""
    tool = find_tool("cuobjdump")
    if tool is None:
        return None, "cuobjdump not found"
    try:
        proc = subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True, check=False, timeout=120)
    except subprocess.TimeoutExpired:
        return None, "cuobjdump timed out after 120 s"
    except OSError as err:
        return None, f"cuobjdump could not be run: {err}"
    if proc.returncode != 0 or not proc.stdout.strip():
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        why = (
            exit_failure("cuobjdump", proc.returncode, proc.stderr)
            or f"cuobjdump failed (exit status {proc.returncode})"
        )
        return None, f"{why}: {last[:200]}"
    return proc.stdout, None


def read_nvidia_texts(report: CompileReport, ptx: str | None, cubin: Path | None) -> None:
    """The PTX and the SASS of the cubin into the report, with their instruction counts; a
    disassembler that failed is noted (`note_tool_failure`): the report lacks its SASS."""
    report.ptx = ptx
    if ptx:
        report.instructions.update(count_instructions(ptx, PTX_MARKS))
    why: str | None
    if cubin is None or not cubin.exists():
        report.sass, why = None, "no cubin to disassemble"
    else:
        report.sass, why = disassemble(cubin)
    if why is not None:
        note_tool_failure(report, why)
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
    text = lines[cast(int, line) - 1].strip() if known else ""
    place = where or (f"generated line {line}" if known else "the generated code")
    quoted = f": `{text}`" if text else ""
    return Diagnostic(
        "lower.compile",
        "error",
        lowered.span_for_line(cast(int, line)) if known else lowered.program.span(),
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
    if missing := _TOOL_MISSING.match(log.strip()):
        return tool_missing(lowered, tool, missing.group("how"))
    last = (log.strip().splitlines() or ["no output"])[-1]
    return compile_error(lowered, None, f"{tool} failed: {last}", where=source_name, path=path)


# what the drivers log when their compiler is not installed: "nvcc not found (set CUDA_HOME ...)"
_TOOL_MISSING = re.compile(r"^\S+ not found(?: \((?P<how>[^)]*)\))?$")


def tool_missing(lowered: Lowered, tool: str, how: str | None) -> Diagnostic:
    """`compile.tool-missing`: the compiler is not installed here, so neither the program nor
    the backend is at fault (no location: nothing in the program can fix it)."""
    return Diagnostic(
        "compile.tool-missing",
        "error",
        None,
        f"{tool} is not installed, so the {lowered.backend} backend cannot compile here",
        how or f"install {tool} or put it on the PATH",
    )


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
