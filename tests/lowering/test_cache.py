"""The compile cache on disk (`lowering.report`): a report whose tools failed is returned but
never stored, and an entry that cannot be read back whole is discarded and compiled again.

Issue 26: a CUDA report whose `cuobjdump` had failed (`sass: null`) was cached in `~/.cache/kir`
and read back for ever (`KeyError: 'HGMMA'` in test_cuda). Every kind of damage is tried on real
compiles where the tools are here: g++ (mtia-sim), Triton AOT for sm_90, nvcc, and Gluon for the
child process that dies. The failed tools are real programs too: scripts put first on the PATH
that exit with an error or kill themselves."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kir.parser import parse_file
from lowering.compile import compile_program
from lowering.report import (
    CACHE_FORMAT,
    STALE_TMP_SECONDS,
    CompileReport,
    exit_failure,
    find_tool,
    load_report,
    save_report,
    tool_failure,
    write_atomic,
)

ROOT = Path(__file__).resolve().parents[2]
needs_nvcc = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")
BACKENDS = [
    pytest.param("mtia-sim", "mtia-sim", id="mtia-sim"),
    pytest.param("triton", "sm_90", id="triton-sm_90"),
    pytest.param("cuda", "sm_90", id="cuda", marks=needs_nvcc),
]


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A compile cache of this test's own."""
    root = tmp_path / "cache"
    monkeypatch.setenv("KIR_CACHE_DIR", str(root))
    return root


def vector_add():
    return parse_file(ROOT / "examples" / "vector_add.kir")


def entry_of(cache: Path, report: CompileReport) -> Path:
    """The cache entry (the report's JSON file) a compile wrote or read."""
    if report.backend == "triton":
        (entry,) = (cache / "triton" / "reports").glob("*.json")
        return entry
    return Path(report.source_path).parent / "report.json"


def fake_tool(folder: Path, name: str, body: str, monkeypatch) -> None:
    """A program `name` first on the PATH that runs `body` (sh), except `--version`, which the
    real tool answers (the drivers put the version in their cache keys)."""
    real = shutil.which(name) or find_tool(name) or "false"
    folder.mkdir(exist_ok=True)
    script = folder / name
    script.write_text(f'#!/bin/sh\ncase " $* " in *" --version "*) exec {real} "$@";; esac\n{body}\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


# ---- what counts as a failed tool ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("rc", "log", "failed"),
    [
        (0, "", None),
        (1, "kernel.cu(3): error: identifier undefined", None),  # an error in the code: an answer
        (4, "kernel.cpp:3:1: error: expected ';'", None),
        (127, "nvcc not found", "nvcc not found"),
        (126, "nvcc could not be run: [Errno 13] Permission denied", "nvcc could not be run"),
        (124, "nvcc timed out after 600 s", "nvcc timed out"),
        (-11, "", "nvcc was killed (SIGSEGV)"),
        (137, "", "nvcc was killed (SIGKILL)"),  # a wrapper script's 128 + 9
        (1, "nvcc error   : 'cicc' died due to signal 11 (Invalid memory reference)", "nvcc crashed: nvcc error"),
        (1, "g++: fatal error: Killed signal terminated program cc1plus", "nvcc crashed: g++: fatal"),
        (4, "kernel.cpp:9:1: internal compiler error: Segmentation fault", "nvcc crashed: kernel.cpp:9:1"),
    ],
)
def test_an_exit_status_says_whether_the_tool_failed_or_answered(rc, log, failed):
    why = exit_failure("nvcc", rc, log)
    assert (why is None) if failed is None else (why is not None and why.startswith(failed)), why


def test_an_ok_report_without_an_artefact_of_its_backend_is_a_failure_of_the_tools(tmp_path):
    binary = tmp_path / "kernel.cubin"
    binary.write_bytes(b"\x7fELF")
    full = {"binary": str(binary), "ptx": "ptx", "sass": "sass", "registers": 32}
    assert tool_failure(CompileReport("cuda", "sm_90a", ok=True, **full)) is None
    assert "sass" in tool_failure(CompileReport("cuda", "sm_90a", ok=True, **{**full, "sass": None}))
    assert "registers" in tool_failure(CompileReport("gluon", "sm_90", ok=True, **{**full, "registers": None}))
    # Triton for AMD has GCN assembly, not PTX and SASS
    amd = {"binary": str(binary), "asm": "asm", "registers": 32}
    assert tool_failure(CompileReport("triton", "gfx942", ok=True, **amd)) is None
    assert "asm" in tool_failure(CompileReport("triton", "gfx942", ok=True, **{**amd, "asm": None}))
    assert tool_failure(CompileReport("mtia-sim", "mtia-sim", ok=True, binary=str(binary))) is None
    # a compile error is the compiler's answer; a tool the driver saw fail is not
    assert tool_failure(CompileReport("cuda", "sm_90a", ok=False, log="kernel.cu(3): error: x")) is None
    noted = CompileReport("cuda", "sm_90a", ok=False, extra={"tool_failure": "nvcc not found"})
    assert tool_failure(noted) == "nvcc not found"
    binary.unlink()
    assert "was not written" in tool_failure(CompileReport("mtia-sim", "mtia-sim", ok=True, binary=str(binary)))


# ---- entries that cannot be trusted, without a compiler ------------------------------------------


def stored(tmp_path: Path) -> tuple[Path, Path]:
    """A sound mtia-sim entry (report and binary) written by `save_report`."""
    binary = tmp_path / "kernel.so"
    binary.write_bytes(b"\x7fELF" + bytes(range(256)) * 8)
    entry = tmp_path / "report.json"
    assert save_report(entry, CompileReport("mtia-sim", "mtia-sim", ok=True, binary=str(binary), registers=3))
    return entry, binary


def rewrite_data(edit: Callable[[dict], None]) -> Callable[[Path, Path], None]:
    def damage(entry: Path, binary: Path) -> None:
        whole = json.loads(entry.read_text())
        edit(whole["data"])
        entry.write_text(json.dumps(whole))

    return damage


DAMAGE = {
    "cut short": lambda entry, binary: entry.write_bytes(entry.read_bytes()[:50]),
    "empty": lambda entry, binary: entry.write_bytes(b""),
    "garbage": lambda entry, binary: entry.write_bytes(b"\x00\xff\xfe garbage \x80"),
    "a JSON list": lambda entry, binary: entry.write_text("[1, 2, 3]"),
    "the bare report of an older cache": lambda entry, binary: entry.write_text(
        json.dumps(json.loads(entry.read_text())["data"])
    ),
    "another format": lambda entry, binary: entry.write_text(
        json.dumps({**json.loads(entry.read_text()), "format": CACHE_FORMAT + 1})
    ),
    "a field missing": rewrite_data(lambda data: data.pop("ok")),
    "a field unknown": rewrite_data(lambda data: data.update(colour="blue")),
    "a field of another type": rewrite_data(lambda data: data.update(registers="many")),
    "a bool for an int": rewrite_data(lambda data: data.update(registers=True)),
    "instructions of another type": rewrite_data(lambda data: data.update(instructions={"HGMMA": "4"})),
    "a report whose tools failed": rewrite_data(lambda data: data["extra"].update(tool_failure="cuobjdump failed")),
    "the binary gone": lambda entry, binary: binary.unlink(),
    "the binary cut short": lambda entry, binary: binary.write_bytes(binary.read_bytes()[:100]),
    "the binary overwritten": lambda entry, binary: binary.write_bytes(b"\x7fELF" + bytes(2048)),
    "the checksums gone": lambda entry, binary: entry.write_text(
        json.dumps({**json.loads(entry.read_text()), "files": {}})
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_an_entry_that_cannot_be_trusted_is_discarded_and_logged(tmp_path, caplog, damage):
    entry, binary = stored(tmp_path)
    assert load_report(entry) is not None
    DAMAGE[damage](entry, binary)
    with caplog.at_level(logging.WARNING, logger="lowering.report"):
        assert load_report(entry) is None
    assert not entry.exists()  # removed: the compile that follows writes it again
    assert any("discarded" in r.getMessage() for r in caplog.records)


def test_a_report_whose_tools_failed_is_not_saved(tmp_path):
    entry = tmp_path / "report.json"
    report = CompileReport("cuda", "sm_90a", ok=True, ptx="ptx", registers=32, sass=None)
    assert not save_report(entry, report) and not entry.exists()


def test_writes_leave_no_temporary_and_stale_temporaries_are_removed(tmp_path):
    entry, _ = stored(tmp_path)
    write_atomic(tmp_path / "other.so", b"\x7fELF")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kernel.so", "other.so", "report.json"]
    # what writers that died between their write and their rename left behind
    stale = [tmp_path / "report.json.4242.0.tmp", tmp_path / "kernel.so.4242.1.tmp"]
    fresh = tmp_path / "report.json.4243.0.tmp"  # a writer at work now
    for tmp in (*stale, fresh):
        tmp.write_bytes(b'{"format": 1, "da')
    old = time.time() - 2 * STALE_TMP_SECONDS
    for tmp in stale:
        os.utime(tmp, (old, old))
    assert load_report(entry) is not None
    assert not any(tmp.exists() for tmp in stale) and fresh.exists()


# ---- damage to real compiles: detected, compiled again, written again ---------------------------


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def stale_tmp(path: Path) -> Path:
    tmp = path.with_name(f"{path.name}.4242.0.tmp")
    tmp.write_bytes(path.read_bytes()[:10])
    old = time.time() - 2 * STALE_TMP_SECONDS
    os.utime(tmp, (old, old))
    return tmp


CORRUPTIONS = {
    "report cut short": lambda entry, report: truncate(entry),
    "report garbage": lambda entry, report: entry.write_bytes(b"\x00garbage\xff"),
    "report without its ok": rewrite_data(lambda data: data.pop("ok")),
    "binary gone": lambda entry, report: Path(report.binary).unlink(),
    "binary cut short": lambda entry, report: truncate(Path(report.binary)),
    "source gone": lambda entry, report: Path(report.source_path).unlink(),
}


# every damage on the fastest compiler, the kinds that differ by driver on the others
DAMAGED = [
    pytest.param(*backend.values, corruption, marks=backend.marks, id=f"{backend.id}-{corruption}")
    for backend in BACKENDS
    for corruption in (
        CORRUPTIONS if backend.id == "mtia-sim" else ("report cut short", "binary gone", "binary cut short")
    )
]


@pytest.mark.parametrize(("to", "arch", "corruption"), DAMAGED)
def test_a_damaged_entry_is_compiled_again_and_rewritten(cache, to, arch, corruption):
    first = compile_program(vector_add(), to, arch)
    assert first.ok and not first.cached
    entry = entry_of(cache, first)
    CORRUPTIONS[corruption](entry, first)
    again = compile_program(vector_add(), to, arch)
    assert again.ok and not again.cached, "a damaged entry was read back"
    assert Path(again.binary).read_bytes() and Path(again.source_path).read_bytes()
    third = compile_program(vector_add(), to, arch)
    assert third.ok and third.cached, "the entry was not written again"
    assert third.to_json() | {"cached": False, "seconds": 0} == again.to_json() | {"seconds": 0}


@pytest.mark.parametrize(("to", "arch"), BACKENDS)
def test_a_stale_temporary_is_removed_when_its_entry_is_read(cache, to, arch):
    first = compile_program(vector_add(), to, arch)
    left = [stale_tmp(entry_of(cache, first)), stale_tmp(Path(first.binary))]
    again = compile_program(vector_add(), to, arch)
    assert again.ok and again.cached and not any(tmp.exists() for tmp in left)


# ---- failed tools: the report comes back, the cache keeps nothing --------------------------------


@needs_nvcc
@pytest.mark.parametrize(("to", "arch"), [("cuda", "sm_90"), ("triton", "sm_90")])
def test_a_report_whose_cuobjdump_failed_is_not_cached(cache, tmp_path, monkeypatch, to, arch):
    """Issue 26: the report without its SASS was cached and read back for ever."""
    with monkeypatch.context() as patch:
        fake_tool(tmp_path / "bin", "cuobjdump", "echo 'cuobjdump fatal : simulated failure' >&2; exit 1", patch)
        broken = compile_program(vector_add(), to, arch)
    assert not list(cache.rglob("*.json")), "a report without its SASS was cached"
    assert broken.ok and broken.sass is None and "cuobjdump" in broken.extra["tool_failure"]
    fixed = compile_program(vector_add(), to, arch)
    assert not fixed.cached and fixed.sass and "tool_failure" not in fixed.extra
    assert compile_program(vector_add(), to, arch).cached


@needs_nvcc
def test_an_nvcc_that_crashed_is_not_cached_but_its_compile_errors_are(cache, tmp_path, monkeypatch):
    from lowering.entry import lower
    from lowering.targets.cuda.compile import compile_lowered

    lowered = lower(vector_add(), "cuda")
    with monkeypatch.context() as patch:
        fake_tool(tmp_path / "bin", "nvcc", "kill -SEGV $$", patch)
        crashed = compile_lowered(lowered)
    assert not list(cache.rglob("report.json")), "the report of a crashed nvcc was cached"
    assert not crashed.ok and crashed.extra["tool_failure"] == "nvcc was killed (SIGSEGV)"
    assert compile_lowered(lowered).ok
    # an error in the code is nvcc's answer about it: cached, and its diagnostics made again
    line = next(n for n in sorted(lowered.line_spans) if lowered.source.split("\n")[n - 1].rstrip().endswith(";"))
    wrong = compile_lowered(lowered, corrupt_line=line)
    again = compile_lowered(lowered, corrupt_line=line)
    assert not wrong.ok and "tool_failure" not in wrong.extra and wrong.diagnostics[0].rule == "lower.compile"
    assert again.cached and not again.ok and again.diagnostics == wrong.diagnostics


def test_a_g_plus_plus_that_crashed_or_is_missing_is_not_cached(cache, tmp_path, monkeypatch):
    from lowering.entry import lower
    from lowering.targets.mtia_sim import compile as compile_mtia

    lowered = lower(vector_add(), "mtia-sim")
    with monkeypatch.context() as patch:
        fake_tool(tmp_path / "bin", "g++", "kill -KILL $$", patch)
        patch.setattr(compile_mtia, "gxx", lambda: shutil.which("g++"))
        crashed = compile_mtia.compile_lowered(lowered)
    assert not list(cache.rglob("report.json")), "the report of a crashed g++ was cached"
    assert not crashed.ok and crashed.extra["tool_failure"] == "g++ was killed (SIGKILL)"
    with monkeypatch.context() as patch:
        patch.setattr(compile_mtia, "gxx", lambda: None)
        missing = compile_mtia.compile_lowered(lowered)
    assert not missing.ok and missing.extra["tool_failure"] == "g++ not found"
    assert not compile_mtia.compile_lowered(lowered).cached  # the real g++'s answer, cached from now on
    assert compile_mtia.compile_lowered(lowered).cached


@pytest.mark.parametrize("backend", ["cuda", "mtia-sim"])
def test_a_missing_compiler_is_said_so_not_blamed_on_the_backend(cache, monkeypatch, backend):
    """Without its compiler a backend cannot compile anything: `compile.tool-missing` with the
    way to install it, not a `lower.compile` "bug of the backend" at the kernel."""
    from lowering.entry import lower
    from lowering.targets.cuda import compile as compile_cuda
    from lowering.targets.mtia_sim import compile as compile_mtia

    if backend == "cuda":
        monkeypatch.setattr(compile_cuda, "find_tool", lambda name: None)
        report = compile_cuda.compile_lowered(lower(vector_add(), "cuda"))
        tool, how = "nvcc", "CUDA_HOME"
    else:
        monkeypatch.setattr(compile_mtia, "gxx", lambda: None)
        report = compile_mtia.compile_lowered(lower(vector_add(), "mtia-sim"))
        tool, how = "g++", "g++ 12"
    (d,) = report.diagnostics
    assert d.rule == "compile.tool-missing" and d.span is None
    assert d.message.startswith(f"{tool} is not installed") and how in d.hint and "bug" not in d.hint


def test_a_gluon_compile_whose_process_died_is_not_cached(cache):
    from lowering.entry import lower
    from lowering.targets.gluon.compile import compile_lowered

    lowered = lower(parse_file(ROOT / "examples" / "gemm_hopper_ws.kir"), "gluon", {"BN": 128})

    def dies(source: str) -> str:  # the child imports the module, and dies as a crashed compiler would
        return "import os\nos._exit(3)\n" + source

    first = compile_lowered(lowered, transform_source=dies)
    again = compile_lowered(lowered, transform_source=dies)
    assert not again.cached and not list((cache / "gluon" / "reports").glob("*.json")), "a crash was cached"
    assert not first.ok and first.extra["tool_failure"] == "the compiling process crashed (exit status 3)"
