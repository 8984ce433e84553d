"""The target registry (lowering.targets): one folder per target, found in lowering/targets/ and
in the folders $KIR_TARGETS names, and everything that lists targets reading it.

The toy target is a copy of lowering/targets/mtia_sim/ under another folder name with only its
name changed: through the real command line (a child process, as a user runs it) it is listed
in the help, compiles with g++, runs a task correctly and is asked by `kir cost`. The error paths
(two targets of one name, a folder without a TARGET, a name that is no target) are one test each."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kir.diagnostics import KirError
from kir.parser import parse_file
from lowering import targets as registry
from lowering.compile import compile_program
from lowering.entry import lower

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ROOT / "benchmarks" / "tasks" / "softmax"
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")


def toy_folder(root: Path, name: str = "toy-sim", folder: str = "toy_sim") -> Path:
    """A copy of the mtia-sim target under `root/folder`, its declared name changed to `name`."""
    copy = root / folder
    shutil.copytree(ROOT / "lowering" / "targets" / "mtia_sim", copy, ignore=shutil.ignore_patterns("__pycache__"))
    init = copy / "__init__.py"
    text = init.read_text()
    assert text.count('name="mtia-sim"') == 1
    init.write_text(text.replace('name="mtia-sim"', f'name="{name}"'))
    return copy


@pytest.fixture
def extra(tmp_path, monkeypatch):
    """A folder of extra targets, named by $KIR_TARGETS for this test only."""
    root = tmp_path / "targets"
    root.mkdir()
    monkeypatch.setenv(registry.ENV, str(root))
    return root


def kir(*args: object, env_dir: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, registry.ENV: str(env_dir), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "agent.cli", *map(str, args)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


# ---- the registry ---------------------------------------------------------------------------------


def test_the_built_in_targets_and_their_runtimes():
    names = registry.targets()
    assert set(names) == {"triton", "gluon", "cuda", "hip", "mtia-sim", "interp"}
    devices = {name: runtime.device for name, (_, runtime) in registry.runtimes().items()}
    assert devices == {
        "triton": "cuda", "triton-interp": "cpu", "gluon": "cuda", "cuda": "cuda", "mtia-sim": "cpu", "interp": "cpu",
    }  # fmt: skip
    assert registry.target("hip").runtimes == () and registry.target("interp").emitter is None
    # what the cost model asks for registers and shared memory, per arch and program level
    assert registry.cost_compilers() == {
        "sm_90": {"tile": "triton", "explicit": "gluon"},
        "gfx942": {"tile": "triton"},
        "gfx90a": {"tile": "hip"},
    }


def test_arch_defaults_and_aliases_are_the_targets_data():
    assert registry.target("mtia-sim").compile_arch(None) == "mtia-sim"
    assert registry.target("cuda").compile_arch("sm_90") == "sm_90a"  # wgmma and setmaxnreg need the `a`
    assert registry.target("hip").compile_arch(None) == "gfx90a"
    with pytest.raises(KirError) as err:
        registry.target("hip").compile_arch("gfx942")
    assert err.value.diagnostics[0].message == "hip compiles for gfx90a, not gfx942"


def test_listing_the_targets_imports_no_emitter_compiler_or_runtime():
    code = (
        "import sys; from lowering import targets; targets.targets(); targets.runtimes(); targets.cost_compilers()\n"
        "heavy = [m for m in sys.modules if m.split('.')[-1] in ('emit', 'compile', 'runtime') or m in ('torch', "
        "'triton', 'numpy', 'xdsl')]\n"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_a_name_that_is_no_target_is_a_diagnostic_with_a_suggestion():
    with pytest.raises(KirError) as err:
        registry.target("mtia-simm")
    (d,) = err.value.diagnostics
    assert d.rule == "lower.backend" and d.message == "no target 'mtia-simm'" and d.hint == "did you mean 'mtia-sim'?"
    with pytest.raises(KirError) as err:
        registry.runtime("triton-interpret")
    assert err.value.diagnostics[0].hint == "did you mean 'triton-interp'?"
    with pytest.raises(KirError) as err:
        lower(None, "trtion")  # the name is judged before the program is looked at
    assert err.value.diagnostics[0].hint == "did you mean 'triton'?"


def test_two_targets_of_one_name_are_an_error_naming_both_folders(extra):
    copy = toy_folder(extra, name="mtia-sim")
    with pytest.raises(KirError) as err:
        registry.targets()
    (d,) = err.value.diagnostics
    assert d.rule == "lower.target"
    assert str(ROOT / "lowering" / "targets" / "mtia_sim") in d.message and str(copy) in d.message


def test_a_folder_without_a_target_is_an_error_naming_it(extra):
    folder = extra / "half_done"
    folder.mkdir()
    (folder / "__init__.py").write_text('"""A target still to be written."""\n')
    with pytest.raises(KirError) as err:
        registry.targets()
    (d,) = err.value.diagnostics
    assert d.rule == "lower.target" and str(folder / "__init__.py") in d.message and "TARGET" in d.message


def test_a_broken_registry_stops_the_command_line_with_the_diagnostic(tmp_path):
    toy_folder(tmp_path, name="triton")
    result = kir("--help", env_dir=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stdout + result.stderr
    assert result.stdout.startswith("error[lower.target]: two targets named 'triton'")


# ---- a target of one's own, through the command line ------------------------------------------------


def test_the_toy_target_is_in_the_help(tmp_path):
    toy_folder(tmp_path)
    result = kir("compile", "--help", env_dir=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "toy-sim" in " ".join(result.stdout.split())
    run = kir("run", "--help", env_dir=tmp_path)
    assert "toy-sim" in " ".join(run.stdout.split())


@needs_gxx
def test_the_toy_target_compiles_an_mtia_program(tmp_path):
    toy_folder(tmp_path)
    result = kir("compile", SOFTMAX / "mtia.kir", "--to", "toy-sim", "--json", env_dir=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    record = json.loads(result.stdout)
    assert record["ok"] and record["backend"] == "toy-sim" and record["target"] == "mtia-sim"
    assert record["report"]["ok"] and record["report"]["binary"].endswith("kernel.so")


@needs_gxx
def test_the_toy_target_runs_a_task_correctly(tmp_path):
    toy_folder(tmp_path)
    result = kir("run", SOFTMAX / "mtia.kir", "--task", "softmax", "-b", "toy-sim", "--json", env_dir=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    record = json.loads(result.stdout)
    assert record["ok"] and record["backend"] == "toy-sim" and record["verdict"]["ok"]
    assert record["verdict"]["metrics"]["cycles"] > 0  # the copy's simulator counted them


@needs_gxx
def test_kir_cost_asks_the_compiler_the_registry_names(tmp_path):
    """`kir cost --compile` asks the compiler of the target that declares `cost_archs` for the
    arch: none does for mtia-sim, so the model's estimates stand, until the toy says it does;
    two targets that claim one arch and level are refused before the command does anything."""
    program = SOFTMAX / "mtia.kir"
    plain = kir("cost", program, "--target", "mtia-sim", "--compile", "--json", env_dir=tmp_path)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    record = json.loads(plain.stdout)
    assert record["report"] is None and any(d["rule"] == "cost.compile" for d in record["diagnostics"])
    toy_folder(tmp_path)
    init = tmp_path / "toy_sim" / "__init__.py"
    init.write_text(
        init.read_text().replace('archs=("mtia-sim",),', 'archs=("mtia-sim",),\n    cost_archs=("mtia-sim",),')
    )
    asked = kir("cost", program, "--target", "mtia-sim", "--compile", "--json", env_dir=tmp_path)
    assert asked.returncode == 0, asked.stdout + asked.stderr
    report = json.loads(asked.stdout)["report"]
    assert report["backend"] == "toy-sim" and report["ok"]
    hip = init.read_text().replace('cost_archs=("mtia-sim",)', 'cost_archs=("gfx90a",)')
    init.write_text(hip.replace('archs=("mtia-sim",)', 'archs=("mtia-sim", "gfx90a")'))
    clash = kir("cost", program, "--target", "gfx90a", "--compile", env_dir=tmp_path)
    assert clash.returncode == 2
    assert clash.stdout.startswith(
        "error[lower.target]: two targets report tile-level costs on gfx90a: hip and toy-sim"
    )


def test_kir_cost_knows_the_archs_of_the_registry(tmp_path):
    """An arch only a target knows is a name `kir cost --target` takes (and has no chip table
    to cost on); a misspelling of it gets it suggested."""
    program = ROOT / "examples" / "vector_add.kir"
    assert "'sm_90a'" in kir("cost", program, "--target", "sm_90b", env_dir=tmp_path).stdout  # cuda's arch
    toy_folder(tmp_path)
    init = tmp_path / "toy_sim" / "__init__.py"
    init.write_text(init.read_text().replace('archs=("mtia-sim",),', 'archs=("mtia-sim", "toy-chip"),'))
    wrong = kir("cost", program, "--target", "toy-chipp", env_dir=tmp_path)
    assert wrong.returncode == 2 and "did you mean 'toy-chip'?" in wrong.stdout
    known = kir("cost", program, "--target", "toy-chip", env_dir=tmp_path)
    assert known.returncode == 2 and known.stdout.startswith("error[cli.target]: no chip table for 'toy-chip'")
    assert "toy-chip" in " ".join(kir("cost", "--help", env_dir=tmp_path).stdout.split())


# ---- the registry in process, with the toy ---------------------------------------------------------


@needs_gxx
def test_the_toy_target_lowers_and_compiles_in_process(extra):
    toy_folder(extra)
    toy = registry.target("toy-sim")
    assert toy.package.startswith("kir_targets_") and toy.folder == str(extra / "toy_sim")
    program = parse_file(SOFTMAX / "mtia.kir")
    assert lower(program, "toy-sim").source == lower(program, "mtia-sim").source  # the same emitter, copied
    report = compile_program(program, "toy-sim")
    assert report.ok and report.arch == "mtia-sim"


def test_what_lies_beyond_the_emitter_is_declared_by_the_target_too():
    """The hints a backend takes through the passes, the environment a runtime needs and what
    an ok compile report holds come from the target's folder, not from tables elsewhere."""
    from lowering.passes.schedule import passes_for
    from lowering.report import artefacts

    _, interp = registry.runtime("triton-interp")
    assert dict(interp.env) == {"TRITON_INTERPRET": "1"}
    assert artefacts("triton", "gfx942") == ("binary", "asm", "registers")
    assert artefacts("triton", "sm_90") == artefacts("cuda", "sm_90a") == ("binary", "ptx", "sass", "registers")
    assert registry.target("cuda").hints_through_passes == {"warp_specialize"}
    program = parse_file(Path(__file__).parent / "programs" / "gemm_ws_tile.kir")
    assert [type(p).__name__ for p in passes_for(program, "gluon", "sm_90")][-1] == "LayoutPass"
    assert "LayoutPass" not in [type(p).__name__ for p in passes_for(program, "cuda", "sm_90")]
