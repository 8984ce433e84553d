"""The `kir` command: exit codes, text and JSON diagnostics, fmt, interp, hash, and no traceback
for any input. Commands run in-process through typer's CliRunner; a few also run as real
processes (the installed `kir` script and `python -m agent.cli`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from typer.testing import CliRunner

from agent.cli import RECORD_COMMANDS, app
from agent.pipeline import RECORD_FIELDS
from kir import __version__
from kir.check import load_program
from kir.cli import COMMON_FIELDS, SCHEMAS
from kir.parser import parse
from verifier.check import check_program

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.kir"))
VECTOR_ADD = ROOT / "examples" / "vector_add.kir"
JSON_FIELDS = {"rule", "severity", "file", "line", "col", "end_line", "end_col", "message", "hint"}

# `y + yy`: an undefined name on line 6, columns 22-23.
BROKEN = """\
kernel vector_add<BLOCK = 1024>(x: global f32[N], y: global f32[N], z: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  a = load(x[offs], mask = offs < N)
  store(z[offs], a + yy, mask = offs < N)
}
"""

# bf16 in and out, for the float32 carrier of low-precision arrays in .npz files.
TWICE_BF16 = """\
kernel twice<BLOCK = 64>(x: global bf16[N], y: out global bf16[N])
  where N % BLOCK == 0
  target interp grid(N / BLOCK) warps(1)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  store(y[offs], load(x[offs]) * 2.0)
}
"""

runner = CliRunner()


def kir(*args: str | Path):
    result = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output
    # Only typer.Exit ends a command: anything else escaped the CLI's guard.
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def json_of(result, command: str = "check") -> list[dict]:
    """The diagnostics of a command's JSON object, after checking that it is the one object of
    the command's schema."""
    data = json.loads(result.output)
    if command in RECORD_COMMANDS:
        assert isinstance(data, dict) and data["schema"] == "kir.record/1", data
        assert list(data) == list(RECORD_FIELDS)
    else:
        assert isinstance(data, dict) and data["schema"] == f"kir.{command}/1", data
        assert list(data) == [*COMMON_FIELDS, *SCHEMAS[command]]
    assert data["ok"] == (result.exit_code == 0)
    for d in data["diagnostics"]:
        assert JSON_FIELDS <= set(d), d
    return data["diagnostics"]


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    path = tmp_path / "broken.kir"
    path.write_text(BROKEN)
    return path


@pytest.fixture
def garbage(tmp_path: Path) -> Path:
    path = tmp_path / "garbage.kir"
    path.write_bytes(bytes(np.random.default_rng(7).integers(0, 256, size=4096, dtype=np.uint8)))
    return path


# ---- check ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_check_examples_are_clean(path: Path):
    result = kir("check", path)
    assert result.exit_code == 0, result.output
    program = load_program(path)
    assert result.output.strip().endswith(f"{path}: ok (kernel {program.name}, {_ops(path)} ops)")


def _ops(path: Path) -> int:
    from kir.check import op_count

    return op_count(load_program(path))


def test_check_json_clean_has_no_diagnostics():
    result = kir("check", VECTOR_ADD, "--json")
    assert result.exit_code == 0
    assert json_of(result) == []


def test_check_broken_json_has_fields_and_span_inside_file(broken: Path):
    result = kir("check", broken, "--json")
    assert result.exit_code == 1
    (diag,) = json_of(result)
    assert diag["rule"] == "name.undefined"
    assert diag["severity"] == "error"
    assert diag["file"] == str(broken)
    assert (diag["line"], diag["col"], diag["end_line"], diag["end_col"]) == (6, 22, 6, 24)
    lines = BROKEN.splitlines()
    assert 1 <= diag["line"] <= len(lines)
    assert lines[diag["line"] - 1][diag["col"] - 1 : diag["end_col"] - 1] == "yy"
    assert "'y'" in diag["hint"]


def test_check_broken_text_is_rustc_style(broken: Path):
    result = kir("check", broken)
    assert result.exit_code == 1
    out = result.output
    assert f"{broken}:6:22: error[name.undefined]: 'yy' is not defined" in out
    assert "6 |   store(z[offs], a + yy, mask = offs < N)" in out
    assert "  |                      ^^" in out
    assert out.rstrip().endswith(f"{broken}: 1 error")


def test_check_syntax_error(tmp_path: Path):
    path = tmp_path / "cut.kir"
    path.write_text("kernel k(\n")
    result = kir("check", path, "--json")
    assert result.exit_code == 1
    (diag,) = json_of(result)
    assert diag["rule"].startswith("syntax.")
    assert diag["line"] == 1


def test_check_target_override():
    assert kir("check", VECTOR_ADD, "--target", "sm_80").exit_code == 0
    result = kir("check", VECTOR_ADD, "--target", "sm_9O", "--json")
    assert result.exit_code == 2
    (diag,) = json_of(result)
    assert diag["rule"] == "cli.target"
    assert "sm_90" in diag["hint"]


def test_check_passes_the_target_to_the_verifier(monkeypatch):
    seen = []

    def verify(program, target):
        seen.append((program.name, target))
        return []

    monkeypatch.setattr("verifier.check.verify", verify)
    assert kir("check", VECTOR_ADD).exit_code == 0
    assert kir("check", VECTOR_ADD, "--target", "gfx942").exit_code == 0
    assert seen == [("vector_add", "sm_90"), ("vector_add", "gfx942")]


def test_check_verifier_warnings_and_errors(monkeypatch):
    from kir.diagnostics import Diagnostic, Span

    def verify(program, target):
        return [
            Diagnostic("sync.warn", "warning", Span(7, 3, 7, 7, program.file), "a warning"),
            Diagnostic("bounds.err", "error", Span(6, 3, 6, 7, program.file), "an error", "fix it"),
        ]

    monkeypatch.setattr("verifier.check.verify", verify)
    result = kir("check", VECTOR_ADD)
    assert result.exit_code == 1
    # Errors first, then warnings.
    assert result.output.index("error[bounds.err]") < result.output.index("warning[sync.warn]")
    rules = [d["rule"] for d in json_of(kir("check", VECTOR_ADD, "--json"))]
    assert rules == ["bounds.err", "sync.warn"]


def test_check_verifier_crash_is_an_internal_error(monkeypatch):
    def verify(program, target):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr("verifier.check.verify", verify)
    result = kir("check", VECTOR_ADD, "--json")
    assert result.exit_code == 1
    (diag,) = json_of(result)
    assert diag["rule"] == "internal.error"
    assert "boom" in diag["message"]


def test_malformed_verifier_diagnostic_has_no_traceback(monkeypatch):
    from kir.diagnostics import Diagnostic

    monkeypatch.setattr("verifier.check.verify", lambda program, target: [Diagnostic("x.y", "fatal", None, "odd")])
    for args in (["check", VECTOR_ADD], ["check", VECTOR_ADD, "--json"]):
        result = kir(*args)
        assert result.exit_code == 1
        assert "internal.error" in result.output


def test_unexpected_exception_is_an_internal_error(monkeypatch):
    def explode(*args, **kwargs):
        raise RuntimeError("unexpected")

    monkeypatch.setattr("agent.pipeline.check_program", explode)
    result = kir("check", VECTOR_ADD)
    assert result.exit_code == 1
    assert "error[internal.error]" in result.output


def test_op_verify_failure_is_located_at_the_op():
    from xdsl.dialects.builtin import IntAttr

    from kir.dialect.tile import ProgramIdOp

    program = load_program(VECTOR_ADD)
    (pid,) = [op for op in program.kernel.walk() if isinstance(op, ProgramIdOp)]
    pid.axis = IntAttr(5)
    (diag,) = check_program(program)
    assert diag.rule == "types.axis"
    assert "program_id axis" in diag.message
    assert (diag.span.line, diag.span.col) == (6, 10)


# ---- unreadable input: usage errors and garbage -------------------------------------------------


@pytest.mark.parametrize("command", ["check", "fmt", "hash"])
def test_missing_file_is_a_usage_error(command: str, tmp_path: Path):
    result = kir(command, tmp_path / "nope.kir")
    assert result.exit_code == 2
    assert "error[io.read]" in result.output


def test_missing_file_json():
    result = kir("check", "/nonexistent/nope.kir", "--json")
    assert result.exit_code == 2
    (diag,) = json_of(result)
    assert diag["rule"] == "io.read"
    assert diag["line"] is None


@pytest.mark.parametrize("command", ["check", "fmt", "hash"])
def test_binary_garbage_gives_a_diagnostic(command: str, garbage: Path):
    result = kir(command, garbage)
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "error[syntax." in result.output


def test_binary_garbage_json(garbage: Path):
    result = kir("check", garbage, "--json")
    assert result.exit_code == 1
    (diag,) = json_of(result)
    assert diag["rule"] == "syntax.encoding"
    assert diag["line"] >= 1


def test_nul_bytes_in_utf8_text(tmp_path: Path):
    path = tmp_path / "nul.kir"
    path.write_bytes(b"kernel \x00\x01\x02")
    result = kir("check", path, "--json")
    assert result.exit_code == 1
    assert json_of(result)[0]["rule"].startswith("syntax.")


def test_directory_is_a_usage_error(tmp_path: Path):
    result = kir("check", tmp_path)
    assert result.exit_code == 2
    assert "error[io.read]" in result.output


def test_unknown_option_is_a_usage_error():
    result = kir("check", VECTOR_ADD, "--frobnicate")
    assert result.exit_code == 2


# ---- fmt --------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_fmt_prints_canonical_text_and_is_idempotent(path: Path, tmp_path: Path):
    first = kir("fmt", path)
    assert first.exit_code == 0
    assert first.output == load_program(path).text()
    again_path = tmp_path / path.name
    again_path.write_text(first.output)
    second = kir("fmt", again_path)
    assert second.exit_code == 0
    assert second.output == first.output


def test_fmt_check_and_write(tmp_path: Path):
    path = tmp_path / "messy.kir"
    canonical = VECTOR_ADD.read_text()
    messy = canonical.replace("a + b", "a+b").replace("  offs =", "  offs   =")
    assert messy != canonical
    path.write_text(messy)

    result = kir("fmt", path, "--check")
    assert result.exit_code == 1
    assert "error[fmt.not-canonical]" in result.output
    assert "-  store(z[offs], a+b, mask = mask)" in result.output
    assert "+  store(z[offs], a + b, mask = mask)" in result.output
    assert path.read_text() == messy, "--check must not write"

    result = kir("fmt", path, "--write")
    assert result.exit_code == 0
    assert path.read_text() == kir("fmt", VECTOR_ADD).output

    result = kir("fmt", path, "--check")
    assert result.exit_code == 0
    assert kir("fmt", path, "--write").output.strip().endswith("ok (already canonical)")


def test_fmt_write_and_check_together_is_a_usage_error():
    assert kir("fmt", VECTOR_ADD, "--write", "--check").exit_code == 2


def test_fmt_reports_syntax_errors_like_check(broken: Path):
    result = kir("fmt", broken)
    assert result.exit_code == 1
    assert f"{broken}:6:22: error[name.undefined]" in result.output
    assert broken.read_text() == BROKEN


# ---- hash and version -------------------------------------------------------------------------


def test_hash_is_the_content_hash_and_ignores_comments(tmp_path: Path):
    result = kir("hash", VECTOR_ADD)
    assert result.exit_code == 0
    assert result.output.strip() == load_program(VECTOR_ADD).content_hash()
    commented = tmp_path / "commented.kir"
    commented.write_text("# another comment\n" + VECTOR_ADD.read_text())
    assert kir("hash", commented).output == result.output


def test_version():
    result = kir("version")
    assert result.exit_code == 0
    assert result.output.strip() == f"kir {__version__}"


# ---- interp -----------------------------------------------------------------------------------


def _needs_interp():
    pytest.importorskip("kir.interp", reason="kir.interp (the reference interpreter) is not importable yet")


def test_interp_vector_add_matches_numpy(tmp_path: Path):
    _needs_interp()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(4096).astype(np.float32)
    y = rng.standard_normal(4096).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x, y=y)
    out = tmp_path / "out.npz"
    result = kir("interp", VECTOR_ADD, "--inputs", tmp_path / "in.npz", "--out", out, "--param", "BLOCK=512")
    assert result.exit_code == 0, result.output
    assert "ok (kernel vector_add" in result.output
    with np.load(out) as saved:
        assert sorted(saved.files) == ["x", "y", "z"]
        assert saved["z"].dtype == np.float32
        np.testing.assert_array_equal(saved["z"], x + y)
        np.testing.assert_array_equal(saved["x"], x)


def test_interp_json_clean(tmp_path: Path):
    _needs_interp()
    np.savez(tmp_path / "in.npz", x=np.ones(1024, np.float32), y=np.ones(1024, np.float32))
    result = kir("interp", VECTOR_ADD, "-i", tmp_path / "in.npz", "-o", tmp_path / "o.npz", "--json")
    assert result.exit_code == 0, result.output
    assert json_of(result, "interp") == []


def test_interp_bf16_through_float32(tmp_path: Path):
    _needs_interp()
    src = tmp_path / "twice.kir"
    src.write_text(TWICE_BF16)
    # 1 + 2**-9 is halfway between two bf16 values: round to nearest even gives 1.0.
    x = np.linspace(-3, 3, 128).astype(np.float32)
    x[0] = 1 + 2**-9
    np.savez(tmp_path / "in.npz", x=x)
    result = kir("interp", src, "--inputs", tmp_path / "in.npz", "--out", tmp_path / "out.npz")
    assert result.exit_code == 0, result.output
    xb = x.astype(ml_dtypes.bfloat16)
    with np.load(tmp_path / "out.npz") as saved:
        assert saved["y"].dtype == np.float32 and saved["x"].dtype == np.float32
        np.testing.assert_array_equal(saved["x"], xb.astype(np.float32))
        np.testing.assert_array_equal(saved["y"], (xb * 2).astype(np.float32))
        assert saved["y"][0] == 2.0


def test_interp_input_problems(tmp_path: Path):
    np.savez(tmp_path / "in.npz", x=np.ones(1024, np.float64), extra=np.ones(3))
    result = kir("interp", VECTOR_ADD, "--inputs", tmp_path / "in.npz", "--out", tmp_path / "o.npz", "--json")
    assert result.exit_code == 1
    by_rule = {d["rule"]: d for d in json_of(result, "interp")}
    assert set(by_rule) == {"io.input-dtype", "io.input-missing", "io.input-unused"}
    assert by_rule["io.input-dtype"]["line"] == 3  # the argument `x` in the signature
    assert by_rule["io.input-unused"]["severity"] == "warning"
    assert not (tmp_path / "o.npz").exists()


def test_interp_reports_the_interpreters_diagnostics(tmp_path: Path):
    _needs_interp()
    np.savez(tmp_path / "in.npz", x=np.ones(1024, np.float32), y=np.ones(512, np.float32))
    result = kir("interp", VECTOR_ADD, "--inputs", tmp_path / "in.npz", "--out", tmp_path / "o.npz", "--json")
    assert result.exit_code == 1
    assert all(d["rule"].startswith("interp.") for d in json_of(result, "interp"))


@pytest.mark.parametrize("spec", ["BLOCK", "BLOCK=", "BLOCK=abc", "=4", "BLOCK=1.5"])
def test_interp_bad_param_syntax(spec: str, tmp_path: Path):
    np.savez(tmp_path / "in.npz", x=np.ones(4, np.float32), y=np.ones(4, np.float32))
    result = kir("interp", VECTOR_ADD, "--inputs", tmp_path / "in.npz", "--out", tmp_path / "o.npz", "--param", spec)
    assert result.exit_code == 2
    assert "error[cli.param]" in result.output


def test_interp_unknown_param(tmp_path: Path):
    np.savez(tmp_path / "in.npz", x=np.ones(4, np.float32), y=np.ones(4, np.float32))
    args = ["interp", VECTOR_ADD, "--inputs", tmp_path / "in.npz", "--out", tmp_path / "o.npz", "--param", "BLCK=8"]
    result = kir(*args, "--json")
    assert result.exit_code == 2
    (diag,) = json_of(result, "interp")
    assert diag["rule"] == "cli.param"
    assert "BLOCK" in diag["hint"]


def test_interp_missing_and_corrupt_inputs(tmp_path: Path):
    result = kir("interp", VECTOR_ADD, "--inputs", tmp_path / "none.npz", "--out", tmp_path / "o.npz")
    assert result.exit_code == 2
    assert "error[io.read]" in result.output
    (tmp_path / "junk.npz").write_bytes(b"PK\x03\x04 not really a zip")
    result = kir("interp", VECTOR_ADD, "--inputs", tmp_path / "junk.npz", "--out", tmp_path / "o.npz")
    assert result.exit_code == 1
    assert "error[io.npz]" in result.output


def test_interp_garbage_program(garbage: Path, tmp_path: Path):
    np.savez(tmp_path / "in.npz", x=np.ones(4, np.float32))
    result = kir("interp", garbage, "--inputs", tmp_path / "in.npz", "--out", tmp_path / "o.npz")
    assert result.exit_code == 1
    assert "Traceback" not in result.output


def test_colour_only_on_a_terminal(broken: Path, monkeypatch):
    plain = kir("check", broken).output
    assert "\x1b[" not in plain
    monkeypatch.setattr("kir.cli._colour", lambda: True)
    coloured = kir("check", broken).output
    assert "\x1b[" in coloured
    assert "error[name.undefined]" in coloured
    assert "'yy' is not defined" in coloured


def test_interp_help_documents_the_float32_carrier():
    result = kir("interp", "--help")
    assert result.exit_code == 0
    assert "float32" in result.output and "bf16" in result.output


# ---- real processes ---------------------------------------------------------------------------


def _installed_kir() -> str | None:
    beside = Path(sys.executable).with_name("kir")
    return str(beside) if beside.exists() else shutil.which("kir")


def test_installed_script_checks_an_example():
    script = _installed_kir()
    if script is None:
        pytest.skip("the `kir` script is not installed (pip install -e .[test])")
    done = subprocess.run([script, "check", str(VECTOR_ADD)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == f"{VECTOR_ADD}: ok (kernel vector_add, {_ops(VECTOR_ADD)} ops)\n"
    assert "\x1b[" not in done.stdout, "no colour when stdout is not a terminal"


def test_installed_script_on_garbage_has_no_traceback(garbage: Path):
    script = _installed_kir()
    if script is None:
        pytest.skip("the `kir` script is not installed (pip install -e .[test])")
    done = subprocess.run([script, "check", str(garbage), "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "Traceback" not in done.stdout + done.stderr
    assert json.loads(done.stdout)["diagnostics"][0]["rule"] == "syntax.encoding"


def test_module_entry_point_usage_errors_have_no_traceback(tmp_path: Path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for args in (["check"], ["check", str(tmp_path / "nope.kir")], ["interp", str(VECTOR_ADD)]):
        done = subprocess.run(
            [sys.executable, "-m", "agent.cli", *args], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env
        )
        assert done.returncode == 2, args
        assert "Traceback" not in done.stdout + done.stderr


def test_source_the_terminal_cannot_encode_has_no_traceback(tmp_path: Path):
    path = tmp_path / "snow.kir"
    path.write_text("kernel k(x: global f32[N]) target interp grid(1) warps(1) { ☃ }\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "ascii"}
    done = subprocess.run(
        [sys.executable, "-m", "agent.cli", "check", str(path)], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stdout + done.stderr
    assert "error[syntax." in done.stdout


# ---- helpers the CLI stands on ------------------------------------------------------------------


def test_low_precision_conversion_rounds_to_nearest_even():
    from kir.arrays import to_dtype, to_storage
    from kir.dtypes import DTYPES

    x = np.array([1 + 2**-9, 1 + 3 * 2**-9, -0.0, 1e30], np.float32)
    for name in ("bf16", "f16", "f8e4m3", "f8e5m2"):
        d = DTYPES[name]
        got, _ = to_dtype(x, d)
        assert got.dtype == d.numpy
        with np.errstate(over="ignore", invalid="ignore"):
            want = x.astype(d.numpy)
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
        assert to_storage(got, name).dtype == np.float32
    raw = x.astype(ml_dtypes.bfloat16).view("V2")  # what np.savez makes of a bf16 array
    got, _ = to_dtype(raw, DTYPES["bf16"])
    np.testing.assert_array_equal(got.astype(np.float32), x.astype(ml_dtypes.bfloat16).astype(np.float32))
    assert to_dtype(np.ones(3, np.float64), DTYPES["bf16"])[0] is None
    assert to_dtype(np.ones(3, np.int64), DTYPES["i32"])[0] is None


def test_check_program_on_parsed_text_is_clean():
    program = parse(VECTOR_ADD.read_text(), file="v.kir")
    assert check_program(program, "sm_80") == []


# ---- the language reference: its programs pass `kir check`, its grammar is the grammar ----------

LANGUAGE_MD = ROOT / "docs" / "language.md"


def _fenced(text: str, lang: str) -> list[str]:
    blocks, current = [], None
    for line in text.splitlines(keepends=True):
        if current is None and line.strip() == f"```{lang}":
            current = []
        elif current is not None and line.strip() == "```":
            blocks.append("".join(current))
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_language_reference_programs_check_clean_and_are_canonical(tmp_path: Path):
    programs = _fenced(LANGUAGE_MD.read_text(), "kir")
    assert programs, "docs/language.md has no ```kir blocks"
    for i, text in enumerate(programs):
        path = tmp_path / f"doc_{i}.kir"
        path.write_text(text)
        result = kir("check", path)
        assert result.exit_code == 0, f"docs/language.md program {i}:\n{result.output}"
        assert kir("fmt", path, "--check").exit_code == 0, f"docs/language.md program {i} is not canonical"


def test_language_reference_appendix_is_the_grammar():
    (appendix,) = _fenced(LANGUAGE_MD.read_text(), "lark")
    assert appendix == (ROOT / "kir" / "grammar.lark").read_text()


# ---- kir cost --compile ---------------------------------------------------------------------


def test_cost_compile_takes_the_compilers_registers():
    """Without --compile the model estimates the unrolled two-pass rmsnorm at 48 registers (two
    programs an SM, latency-bound); Triton gives it 30, and the estimate follows."""
    from typer.testing import CliRunner

    from agent.cli import app

    path = str(ROOT / "benchmarks" / "tasks" / "rmsnorm" / "tuned.kir")
    bench = ["--preset", "bench"]  # the figures below are those of the bench parameters
    plain = CliRunner().invoke(app, ["cost", path, "--target", "sm_90", *bench, "--json"])
    compiled = CliRunner().invoke(app, ["cost", path, "--target", "sm_90", *bench, "--compile", "--json"])
    assert plain.exit_code == 0 and compiled.exit_code == 0, compiled.output
    before, after = json.loads(plain.output)["estimate"], json.loads(compiled.output)["estimate"]
    assert before["occupancy"]["registers"] >= 40 and after["occupancy"]["registers"] <= 32
    assert after["time_s"] < before["time_s"]
    text = CliRunner().invoke(app, ["cost", path, "--target", "sm_90", *bench, "--compile"]).output
    assert "from the triton compile: 30 regs/thread" in text


def test_cost_compile_says_where_no_compiler_serves_and_stops_at_a_compile_error(tmp_path):
    from typer.testing import CliRunner

    from agent.cli import app

    path = str(ROOT / "benchmarks" / "tasks" / "rmsnorm" / "tuned.kir")
    result = CliRunner().invoke(app, ["cost", path, "--target", "mtia-sim", "--compile"])
    assert result.exit_code == 0 and "cost.compile" in result.output and "bound by" in result.output
    # a 256 KB shared buffer: more than a block may have; the verifier says so before any compile
    # runs, and there is no estimate
    big = tmp_path / "big.kir"
    big.write_text(
        "kernel big<BLOCK = 256>(x: global f32[N], y: out global f32[N])\n"
        "  where N % BLOCK == 0\n"
        "  target sm_90 grid(N / BLOCK) warps(4)\n"
        "{\n"
        "  buf = smem(f32[65536])\n"
        "  n0 = program_id(0) * BLOCK\n"
        "  store(buf[0 : BLOCK], load(x[n0 : n0 + BLOCK]))\n"
        "  barrier()\n"
        "  store(y[n0 : n0 + BLOCK], load(buf[0 : BLOCK]))\n"
        "}\n"
    )
    result = CliRunner().invoke(app, ["cost", str(big), "--compile", "-s", "N=4096"])
    assert result.exit_code != 0 and "bound by" not in result.output, result.output
    assert "resources.smem" in result.output and "lower.shared-memory" not in result.output
