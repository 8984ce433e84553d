"""The command line's vocabulary and its JSON: one meaning per flag across commands, the old
spellings kept and hidden, one JSON object of a stated schema per command (docs/cli.md), and
the checks that stop a command before any work (no CUDA device, no hipcc, an unknown preset or
parameter, `rules add --dry-run`)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
from typer.main import get_command
from typer.testing import CliRunner

import kir.cli as cli
from agent.cli import RECORD_COMMANDS, app
from agent.pipeline import RECORD_FIELDS, Record
from kir.cli import COMMON_FIELDS, SCHEMAS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
VECTOR_ADD = str(EXAMPLES / "vector_add.kir")
TASKS = ROOT / "benchmarks" / "tasks"
SOFTMAX = str(TASKS / "softmax" / "seed.kir")
runner = CliRunner()


def kir(*args) -> object:
    result = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def leaf_commands():
    found = []

    def walk(group, prefix: str) -> None:
        for name, cmd in group.commands.items():
            full = f"{prefix} {name}".strip()
            if hasattr(cmd, "commands"):
                walk(cmd, full)
            else:
                found.append((full, cmd))

    walk(get_command(app), "")
    return found


# ---- the vocabulary ------------------------------------------------------------------------------


def test_the_vocabulary_is_what_the_packages_accept():
    """The language's targets are written out in kir.cli (no import of the dialect) and kept
    equal to the dialect's; the backends come from the target registry, and every one of them
    is in the help of --backend."""
    from kir.dialect.structure import TARGETS
    from lowering import targets as registry

    assert set(cli.TARGETS) == set(TARGETS)
    assert not hasattr(cli, "BACKENDS") and not hasattr(cli, "GPU_BACKENDS")  # kir/ does not know them
    import agent.cli

    assert agent.cli.NAMES["compile"] == tuple(registry.compiling())
    assert set(agent.cli.NAMES["run"]) == set(registry.runtimes())
    helps = {opt.help for _, cmd in leaf_commands() for opt in cmd.params if "--backend" in opt.opts}
    for name in (*registry.compiling(), *registry.runtimes()):
        assert all(name in h for h in helps), name
    assert agent.cli.DEFAULT_PRESET == cli.DEFAULT_PRESET == "test"


def test_every_suite_task_has_the_default_preset():
    import tomllib

    for toml in TASKS.glob("*/task.toml"):
        assert cli.DEFAULT_PRESET in tomllib.loads(toml.read_text())["presets"], toml


SHARED = {
    "--target": ["-t", "--target"],
    "--backend": ["-b", "--backend"],
    "--param": ["-p", "--param"],
    "--shape": ["-s", "--shape"],
    "--preset": ["--preset"],
    "--json": ["--json"],
    "--timeout": ["--timeout"],
    "--out": ["-o", "--out"],
}


def test_a_flag_means_one_thing_in_every_command():
    """Each shared flag has the same spellings and (but for --out and --json, whose value or
    record is the command's, and `kir tactics apply`'s --param, whose names are the tactic's
    parameters) the same help in every command; a short form is never another flag's."""
    helps: dict[str, set[str]] = {}
    shorts: dict[str, set[str]] = {}
    for command, cmd in leaf_commands():
        for opt in (p for p in cmd.params if p.param_type_name == "option"):
            long = max(opt.opts, key=len)
            for short in (o for o in opt.opts if not o.startswith("--")):
                shorts.setdefault(short, set()).add(long)
            if long in SHARED and not opt.hidden:
                assert sorted(opt.opts) == sorted(SHARED[long]), (command, opt.opts)
                if (command, long) != ("tactics apply", "--param"):
                    helps.setdefault(long, set()).add(opt.help.removesuffix(" Repeatable."))
    assert {s: longs for s, longs in shorts.items() if len(longs) > 1} == {}, shorts
    assert shorts["-t"] == {"--target"} and shorts["-b"] == {"--backend"}
    for long in ("--target", "--backend", "--param", "--shape", "--preset", "--timeout"):
        assert len(helps[long]) == 1, (long, helps[long])
    assert "mtia-sim" in next(iter(helps["--backend"])) and "mtia-sim" in next(iter(helps["--target"]))


def test_run_has_no_short_form_for_the_task():
    run = get_command(app).commands["run"]
    (task,) = [p for p in run.params if p.name == "task"]
    assert task.opts == ["--task"]
    assert kir("run", SOFTMAX, "-t", "softmax").exit_code == 2


def test_the_old_spellings_work_and_are_not_in_the_help(tmp_path):
    out = tmp_path / "k.py"
    assert kir("lower", VECTOR_ADD, "--to", "triton", "--output", out).exit_code == 0
    assert "@triton.jit" in out.read_text()
    refused = kir("compile", VECTOR_ADD, "--to", "gluon", "--arch", "gfx942")
    assert refused.exit_code == 2 and refused.output == "error[cli.target]: gluon compiles for sm_90, not gfx942\n"
    clash = kir("lower", VECTOR_ADD, "-b", "cuda", "--to", "triton")
    assert clash.exit_code == 2 and "--backend cuda and --to triton disagree" in clash.output
    for command in ("lower", "compile"):
        text = kir(command, "--help").output
        assert "--backend" in text and "--to" not in text and "--arch" not in text and "--output" not in text


def test_every_command_says_what_it_does():
    for command, cmd in leaf_commands():
        assert cmd.help and len(cmd.help.split()) >= 5, command


# ---- JSON: one object per command ----------------------------------------------------------------


def json_object(result, command: str) -> dict:
    data = json.loads(result.output)
    if command in RECORD_COMMANDS:
        assert list(data) == list(RECORD_FIELDS) and data["schema"] == "kir.record/1", (command, list(data))
    else:
        assert list(data) == [*COMMON_FIELDS, *SCHEMAS[command]], (command, list(data))
        assert data["schema"] == f"kir.{command.replace(' ', '.')}/1"
    assert isinstance(data["ok"], bool) and isinstance(data["diagnostics"], list)
    return data


def test_every_command_with_json_prints_its_schema(tmp_path, monkeypatch):
    np.savez(tmp_path / "in.npz", x=np.ones(1024, np.float32), y=np.ones(1024, np.float32))
    canned = {"ok": True, "stage": "done", "diagnostics": [], "metrics": {"seeds": [5]}, "log_tail": ""}
    monkeypatch.setattr("agent.pipeline.run_job", lambda job, timeout: dict(canned))
    commands = {
        "check": ["check", VECTOR_ADD],
        "fmt": ["fmt", VECTOR_ADD],
        "hash": ["hash", VECTOR_ADD],
        "version": ["version"],
        "interp": ["interp", VECTOR_ADD, "-i", tmp_path / "in.npz", "-o", tmp_path / "out.npz"],
        "lower": ["lower", VECTOR_ADD, "-b", "triton"],
        "compile": ["compile", EXAMPLES / "gemm_hopper_ws.kir", "-b", "triton"],  # refused: a report, fast
        "cost": ["cost", SOFTMAX, "-t", "sm_90"],
        "run": ["run", SOFTMAX, "--task", "softmax", "-b", "interp"],
        "rules list": ["rules", "list"],
        "tactics list": ["tactics", "list"],
        "tactics apply": ["tactics", "apply", SOFTMAX, "warps", "-p", "warps=16"],
        "tactics replay": ["tactics", "replay", Path(SOFTMAX).parent],
        "report": ["report", tmp_path / "none.sqlite", "-o", tmp_path / "r.html"],  # refused: no store
        "search": ["search", "no-such-task"],  # refused: a usage error, fast (a search: tests/agent)
        "seed": ["seed", ROOT / "benchmarks" / "kernelbench" / "softmax_01_softmax_last_dim.py"],
        "solve": ["solve", tmp_path / "no-such-problem.py"],  # refused: a usage error, fast (tests/agent)
        "learn": ["learn", tmp_path / "none.sqlite", "--rules"],  # refused: no store (a mining: tests/agent)
        "rules learned": ["rules", "learned"],
        "rules retire": ["rules", "retire", "learned.not-installed"],  # refused: a usage error
        "kb search": ["kb", "search", "DMA completion counter", "--target", "mtia-sim"],
        "kb show": ["kb", "show", "rule/sync.parity"],
    }
    having_json = {c for c, cmd in leaf_commands() if any("--json" in p.opts for p in cmd.params)}
    # `kir search show DB` is a mode of `kir search` with its own schema (tests/agent/test_search_report.py)
    modes = {"search show"}
    assert having_json == set(SCHEMAS) - modes | set(RECORD_COMMANDS), (
        "every command with --json has a schema, and only those"
    )
    assert set(commands) | {"rules add"} == having_json  # rules add: test_rules_add_dry_run_installs_nothing
    got = {c: json_object(kir(*argv, "--json"), c) for c, argv in commands.items()}
    assert got["check"]["ok"] and (got["check"]["kernel"], got["check"]["target"]) == ("vector_add", "sm_90")
    assert got["fmt"]["canonical"] is True and got["fmt"]["text"] == Path(VECTOR_ADD).read_text()
    assert len(got["hash"]["hash"]) == 64 and got["version"]["version"] == cli.__version__
    assert got["interp"]["arrays"] == ["x", "y", "z"]
    assert "@triton.jit" in got["lower"]["lowered"]["source"] and got["lower"]["lowered"]["entry"] == "vector_add"
    assert got["compile"]["ok"] is False and got["compile"]["report"]["ok"] is False
    assert got["compile"]["target"] == "sm_90" and got["compile"]["backend"] == "triton"
    assert got["cost"]["estimate"]["time_s"] > 0 and got["cost"]["preset"] == "test"
    assert got["run"]["ok"] and got["run"]["stage"] == "run" and got["run"]["verdict"]["stage"] == "done"
    assert got["run"]["preset"] == "test"
    for command in RECORD_COMMANDS:  # a Record's JSON reads back as the same Record
        assert Record.from_json(got[command]).to_json() == got[command], command
    assert got["rules list"]["rules"] and got["rules list"]["file"] is None
    assert "warps" in [t["name"] for t in got["tactics list"]["tactics"]]
    applied = got["tactics apply"]
    assert applied["ok"] and (applied["tactic"], applied["params"]) == ("warps", {"warps": 16})
    assert "warps(16)" in applied["text"] and applied["kernel"] == "softmax"
    assert got["kb search"]["hits"][0]["id"] == "hardware/mtia-sim/3-3-the-dma-counter"
    assert got["kb show"]["ok"] and got["kb show"]["id"] == "rule/sync.parity"
    replayed = got["tactics replay"]
    assert replayed["ok"] and replayed["program"] == "replayed" and "warps(16)" in replayed["text"]


def test_a_usage_error_is_the_commands_object_with_nulls():
    data = json_object(kir("compile", VECTOR_ADD, "-b", "fortran", "--json"), "compile")
    assert data["ok"] is False and data["report"] is None and data["diagnostics"][0]["rule"] == "cli.backend"


def test_docs_state_every_schema():
    """docs/cli.md has one row per command: `kir.<command>/1` and its fields, as SCHEMAS has them."""
    text = (ROOT / "docs" / "cli.md").read_text()
    rows = dict(re.findall(r"^\| `kir\.([a-z.]+)/1` \| (.*) \|$", text, re.M))
    stated = {name.replace(".", " "): tuple(re.findall(r"`([a-z_]+)`", fields)) for name, fields in rows.items()}
    assert stated == SCHEMAS


def test_readme_lists_the_vocabulary():
    section = (ROOT / "README.md").read_text().split("## The command line", 1)[1].split("\n## ", 1)[0]
    for spellings in SHARED.values():
        assert all(f"`{s}" in section for s in spellings), spellings
    assert "docs/cli.md" in section and "--to" in section  # the old spellings are said to be kept


# ---- checks before any work -----------------------------------------------------------------------


def test_a_gpu_backend_without_a_cuda_device_stops_before_any_work(monkeypatch):
    monkeypatch.setattr("lowering.targets.triton.runtime.cuda_available", lambda: False)

    def no_job(*args, **kwargs):
        raise AssertionError("a job was started")

    monkeypatch.setattr("agent.pipeline.run_job", no_job)
    monkeypatch.setattr("agent.harness.bench.run_suite", no_job)
    from agent.cli import NAMES

    for backend in NAMES["gpu"]:
        result = kir("run", SOFTMAX, "--task", "softmax", "-b", backend)
        assert result.exit_code == 2
        assert result.output.startswith(f"error[cli.no-cuda]: backend {backend} needs a CUDA GPU")
    bench = kir("bench", "softmax")
    assert bench.exit_code == 2 and bench.output.startswith("error[cli.no-cuda]: kir bench")
    assert "harness.internal" not in bench.output


def test_compile_for_hip_without_hipcc_says_so(monkeypatch, tmp_path):
    import lowering.targets.hip.compile as hip

    monkeypatch.setenv("KIR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(hip, "find_hipcc", lambda: None)
    result = kir("compile", EXAMPLES / "softmax.kir", "-b", "hip")
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error[compile.tool-missing]: hipcc is not installed")
    assert "bug" not in result.output


def test_a_compile_without_a_target_takes_the_backends_own():
    from agent.pipeline import compile_target

    assert compile_target("hip", None, "sm_90") == "gfx90a"
    assert compile_target("mtia-sim", None, "sm_90") == "mtia-sim"
    assert compile_target("triton", None, "gfx942") == "gfx942"  # the declared one, where it compiles
    assert compile_target("triton", None, "mtia-sim") == "sm_90"


def test_run_does_not_import_the_reference_in_its_own_process(tmp_path, monkeypatch):
    """The reference is the task's code: it runs in the child only (#18: a reference that calls
    os._exit at import must not end `kir run`). Its import here would write this process's id."""
    task = tmp_path / "spy"
    task.mkdir()
    marker = tmp_path / "imported-by"
    (task / "reference.py").write_text(
        f"import os\nopen({str(marker)!r}, 'a').write(f'{{os.getpid()}}\\n')\nN = 4\n"
        "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n"
    )
    (task / "task.toml").write_text("[presets.test]\nN = 4\n")
    seen = {}

    def fake_run_job(job, timeout):
        seen.update(job)
        return {"ok": False, "stage": "correctness", "diagnostics": [], "metrics": {}}

    monkeypatch.setattr("agent.pipeline.run_job", fake_run_job)
    result = kir("run", SOFTMAX, "--task", task, "-b", "interp")
    assert result.exit_code == 1 and seen["task"] == str(task) and seen["preset"] == "test"
    assert not marker.exists() or str(os.getpid()) not in marker.read_text().split()
    assert kir("run", SOFTMAX, "--task", task, "-b", "interp", "--preset", "bench").exit_code == 2


def test_a_bare_kernelbench_file_runs_at_its_own_shapes(tmp_path, monkeypatch):
    problem = tmp_path / "problem.py"
    problem.write_text("def get_inputs():\n    return []\n")
    seen = {}
    monkeypatch.setattr(
        "agent.pipeline.run_job",
        lambda job, timeout: seen.update(job) or {"ok": True, "stage": "done", "diagnostics": [], "metrics": {}},
    )
    assert kir("run", SOFTMAX, "--task", problem, "-b", "interp").exit_code == 0
    assert seen["preset"] == "default" and seen["task"] == str(problem)
    refused = kir("run", SOFTMAX, "--task", problem, "-b", "interp", "--preset", "test")
    assert refused.exit_code == 2 and "has no preset `test`" in refused.output


def test_values_past_64_bits_are_refused():
    values, bad = cli.parse_param_specs(
        [f"A={2**63 - 1}", f"B={-(2**63) + 1}", f"C={2**63}", "D=0x10", "E=010", "F=-0x1f"]
    )
    assert values == {"A": 2**63 - 1, "B": -(2**63) + 1, "D": 16, "E": 10, "F": -31}
    assert [d.message for d in bad] == [f"bad --param 'C={2**63}'"]
    shapes, bad = cli.parse_param_specs(["N=0", "M=8"], "--shape")
    assert shapes == {"M": 8} and [d.rule for d in bad] == ["cli.shape"]


def test_oversized_sources_are_refused_unread(tmp_path):
    from kir.check import MAX_SOURCE_BYTES

    huge = tmp_path / "huge.kir"
    with open(huge, "wb") as f:
        f.truncate(MAX_SOURCE_BYTES + 1)
    result = kir("check", huge)
    assert result.exit_code == 2 and "over the limit of 16,777,216" in result.output
    just = tmp_path / "just.kir"
    just.write_bytes(b"#" * 100 + b"\n")  # under the limit: read, and a program error (no kernel)
    assert kir("check", just).exit_code == 1


# ---- rules add --dry-run --------------------------------------------------------------------------


def test_rules_add_dry_run_installs_nothing(tmp_path, monkeypatch):
    from tests.verifier.test_rules_cli import rule_file

    target = tmp_path / "installed"
    monkeypatch.setenv("KIR_LEARNED_DIR", str(target))
    path = rule_file(tmp_path)
    result = kir("rules", "add", path, "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.output == f"{path}: valid (learned.cli-topk; not installed: --dry-run)\n"
    assert not target.exists()
    data = json_object(kir("rules", "add", path, "--dry-run", "--json"), "rules add")
    assert data["ok"] and data["dry_run"] is True and data["installed"] is None and data["rule"] == "learned.cli-topk"
    refused = rule_file(tmp_path, match='op = "kir.arange"', rid="learned.cli-arange", message="an {op}")
    result = kir("rules", "add", refused, "--dry-run")
    assert result.exit_code == 1 and "learned.false-positive" in result.output and not target.exists()
    taken = rule_file(tmp_path, rid="learned.tma-store-without-wait")
    result = kir("rules", "add", taken, "--dry-run")
    assert result.exit_code == 1 and "learned.duplicate" in result.output


def test_the_docs_example_is_what_the_command_prints(monkeypatch):
    text = (ROOT / "docs" / "cli.md").read_text()
    command, printed = re.search(r"```\n\$ kir (.*?)\n(\{.*?\n\})\n```", text, re.S).groups()
    monkeypatch.chdir(ROOT)  # the example's path is relative to the checkout
    result = kir(*command.split())
    assert result.exit_code == 2 and json.loads(result.output) == json.loads(printed)
