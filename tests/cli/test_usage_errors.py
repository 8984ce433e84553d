"""Every command's every flag, wrong: exit status 2, one `error[...]` line (and at most a hint),
never a stack frame (#26: "a test runs every command's every documented flag combination for
usage errors"; #18 point 6).

The cases are generated from the click command tree (`typer.main.get_command(app)`): for each
command and subcommand, an unknown option, its required arguments missing, each option without
its value, and each option and argument with each of the bad values of `BAD` (the vocabulary
shares names, so one table serves every command). A command or an option that this file does
not know fails `test_every_command_and_option_has_cases`: a new flag comes with its bad values.
The error line must name the option or the value, so that a case cannot pass by failing for
another reason (a base command line that is itself wrong).

In-process through CliRunner (the inputs that would block a reader for ever, a FIFO and
/dev/zero, under an alarm); a few cases also through the real entry point.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.main import get_command
from typer.testing import CliRunner

from agent.cli import RECORD_COMMANDS, app
from kir.check import MAX_SOURCE_BYTES

ROOT = Path(__file__).resolve().parents[2]
VECTOR_ADD = str(ROOT / "examples" / "vector_add.kir")
SOFTMAX = str(ROOT / "benchmarks" / "tasks" / "softmax" / "seed.kir")
PROBLEM = str(ROOT / "benchmarks" / "kernelbench" / "softmax_01_softmax_last_dim.py")
runner = CliRunner()


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("usage")
    np.savez(tmp / "in.npz", x=np.ones(1024, np.float32), y=np.ones(1024, np.float32))
    huge = tmp / "huge.kir"
    with open(huge, "wb") as f:
        f.truncate(MAX_SOURCE_BYTES + 1)  # sparse: nothing is written, and nothing must be read
    (tmp / "empty_dir").mkdir()
    (tmp / "rule.toml").write_text('id = "learned.x"\n')
    return {
        "in": str(tmp / "in.npz"),
        "out": str(tmp / "out.npz"),
        "missing": str(tmp / "nope" / "missing.kir"),
        "dir": str(tmp / "empty_dir"),
        "huge": str(huge),
        "rule": str(tmp / "rule.toml"),
        "no_folder": str(tmp / "no" / "such" / "folder" / "x"),
        "search_db": str(tmp / "search.sqlite"),
        "report_db": _report_store(tmp / "report.sqlite"),
    }


def _report_store(path: Path) -> str:
    """A store holding one search of one node: what `kir report` reads."""
    from agent.pipeline import Record
    from agent.search.tree import Move, Node
    from agent.store import open_store

    with open_store(str(path)) as store:
        sid = store.search("one", "softmax", {"backend": "mtia-sim"})
        record = Record(
            candidate="k", file="<t>", stage="run", ok=True, until="run", verdict={"metrics": {"cycles": 5}}
        )
        store.put(sid, Node(0, None, "k", "kernel text", Move("seed", "seed")).evaluated(record))
    return str(path)


def base(command: str, f: dict[str, str]) -> list[str]:
    """A command line of `command` that is right, into which one wrong thing is put."""
    return {
        "check": [VECTOR_ADD],
        "fmt": [VECTOR_ADD],
        "hash": [VECTOR_ADD],
        "version": [],
        "interp": [VECTOR_ADD, "-i", f["in"], "-o", f["out"]],
        "lower": [VECTOR_ADD, "-b", "triton"],
        "compile": [VECTOR_ADD, "-b", "triton"],
        "cost": [SOFTMAX],
        "run": [SOFTMAX, "--task", "softmax", "-b", "interp"],
        "bench": ["softmax"],
        "rules list": [],
        "rules explain": ["sync.parity"],
        "rules add": [f["rule"]],
        "rules learned": [],
        "rules retire": ["learned.not-installed"],
        "tactics list": [],
        "tactics explain": ["warps"],
        "tactics apply": [SOFTMAX, "warps"],
        "tactics replay": [str(ROOT / "benchmarks" / "tasks" / "softmax")],
        "search": ["softmax", "--budget", "1", "--executor", "inline", "--db", f["search_db"]],
        "report": [f["report_db"], "-o", f["out"] + ".html"],
        "seed": [PROBLEM],
        "solve": [PROBLEM, "--budget", "1"],
        "learn": [f["report_db"], "--rules", "--dry-run"],
        "serve": ["--mcp"],  # every wrong value stops it before it serves
        "kb search": ["DMA completion counter"],
        "kb show": ["rule/sync.parity"],
    }[command]


# Bad values by option name (and FILE, ID, TASK... for the arguments). Each must be refused as
# a usage error; with `{...}` a path from `files`.
BAD = {
    "--target": ["nonsense", "sm_9O", ""],
    "--arch": ["nonsense"],
    "--backend": ["nonsense", "TRITON", ""],
    "--to": ["nonsense"],
    "--param": ["NOPE=1", "BLOCK", "BLOCK=x", "BLOCK=1.5", f"BLOCK={2**80}", "=4"],
    "--shape": ["N=-1", "N=0", "N", "N=x", f"N={2**80}"],
    "--preset": ["nonsense"],
    "--seed": [str(2**80), "-1", "x", "1.5"],
    "--timeout": ["0", "-1", "nan", "inf", "-inf", "x", "1e300"],
    "--jobs": ["0", "-3", "x"],
    "--runs": ["0", "x"],
    "--inputs": ["{missing}", "{dir}"],
    "--out": ["{dir}", "{no_folder}"],
    "--output": ["{dir}"],
    "--task": ["nonsense", "{dir}"],
    "--program": ["nonsense"],
    "--family": ["nonsense"],
    "--corpus": ["{missing}", "{rule}"],
    "--calibration": ["{missing}", "{dir}", "{rule}"],
    "FILE": ["{missing}", "{dir}", "{huge}"],
    "FILE...": ["{missing}", "{dir}", "{huge}"],
    "ID": ["nonsense.rule"],
    "NAME": ["nonsense"],
    "TASK...": ["nonsense"],
    "TASK_DIR": ["{missing}", "{rule}"],
    "TASK": ["nonsense", "{dir}"],
    "[DB]": ["extra"],
    "DB": ["{missing}", "{rule}"],
    "--strategy": ["nonsense", ""],
    "--budget": ["0", "-1", "x"],
    "--seconds": ["0", "x"],
    "--stall": ["0", "x"],
    "--roofline": ["0", "1.5", "x"],
    "--gpu-seconds": ["0", "x"],
    "--executor": ["nonsense", ""],
    "--workers": ["0", "x", "100000"],
    "--db": ["{dir}", "{rule}"],
    "--name": [""],
    "--measure-top": ["0", "x"],
    "--width": ["0", "x"],
    "--memory": ["everything", ""],
    "--random-seed": ["-1", "x"],
    "--peers": ["nonsense", "", "eager,eager"],
    "PROBLEM": ["{missing}", "{dir}", "{huge}", "{rule}"],
    "--work": ["{rule}"],
    "--scale": ["0", "-1", "2", "x", "nan"],
    "--proposer": ["nonsense", ""],
    "--llm-provider": ["nonsense", ""],
    "--llm-model": ["", "m"],
    "--llm-base-url": ["", "http://127.0.0.1:9/v1"],
    "--repairs": ["-1", "11", "x"],
    "--tokens": ["0", "x"],
    "--money": ["-1", "x"],
    "--host": ["0.0.0.0"],
    "--port": ["0", "70000", "x"],
    "--searches": ["{rule}"],
    "DB...": ["{missing}", "{rule}"],
    "--min-programs": ["0", "1", "x"],
    "--min-tasks": ["0", "x"],
    "--retire": ["learned.not-installed", ""],
    "--rule": ["nonsense.rule", "sync.parit", ""],
    "--bottleneck": ["nonsense", ""],
    "--kind": ["nonsense", "rules", ""],
    "--limit": ["0", "-1", "101", "x"],
    "QUERY": ["", "*", '"()', "-"],  # no words, and nothing else to list by
    "DOC": ["nonsense", "rule/sync.parit", ""],
}
# bench's --out is a folder: a file is what it cannot take
BAD_FOR = {
    ("bench", "--out"): ["{rule}"],
    ("rules add", "FILE"): ["{missing}", "{dir}"],
    ("tactics replay", "TASK_DIR"): ["{missing}", "{rule}"],
    ("search", "--seed"): ["{missing}", "{dir}", "{huge}"],
    ("report", "--out"): ["{dir}", "{no_folder}"],
    ("seed", "--out"): ["{rule}"],
    ("solve", "--preset"): ["nonsense", "scale:2", "scale:x"],
    ("learn", "--out"): ["{rule}"],
}


def commands():
    """(name, click command) for every command and subcommand."""
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


COMMANDS = commands()


def options(cmd):
    return [p for p in cmd.params if p.param_type_name == "option" and "--help" not in p.opts]


def name_of(param) -> str:
    return max(param.opts, key=len) if param.param_type_name == "option" else param.metavar


def without(argv: list[str], param) -> list[str]:
    """`argv` without the option `param` (and its value)."""
    out, skip = [], False
    for token in argv:
        if skip:
            skip = False
        elif token in param.opts:
            skip = not param.is_flag
        else:
            out.append(token)
    return out


def cases(f: dict[str, str]):
    for command, cmd in COMMANDS:
        argv = base(command, f)
        words = command.split()
        yield command, [*words, *argv, "--no-such-option"], ["--no-such-option"]
        if any(p.required for p in cmd.params):
            yield command, words, ["missing"]
        for opt in options(cmd):
            long = name_of(opt)
            if opt.is_flag:
                yield command, [*words, *argv, f"{long}=1"], [long]
                continue
            yield command, [*words, *argv, long], [long]
            for value in BAD_FOR.get((command, long), BAD[long]):
                value = value.format(**f)
                yield command, [*words, *without(argv, opt), long, value], [long, value]
        for arg in (p for p in cmd.params if p.param_type_name == "argument"):
            label = name_of(arg)
            position = [i for i, token in enumerate(argv) if not token.startswith("-")][:1]
            for value in BAD_FOR.get((command, label), BAD[label]):
                value = value.format(**f)
                bad = list(argv)
                if position and not (arg.nargs == -1 and not argv):
                    bad[position[0]] = value
                else:
                    bad.insert(0, value)
                yield command, [*words, *bad], [value]


def test_every_command_and_option_has_cases(files):
    documented = {name for name, _ in COMMANDS}
    assert documented == {
        "check", "fmt", "hash", "version", "interp", "lower", "compile", "cost", "run", "bench",
        "rules list", "rules explain", "rules add", "rules learned", "rules retire", "tactics list",
        "tactics explain", "tactics apply", "tactics replay", "search", "report", "seed", "solve", "learn", "serve",
        "kb search", "kb show",
    }  # fmt: skip
    for command, cmd in COMMANDS:
        base(command, files)  # raises KeyError for a command without a base line
        for param in cmd.params:
            if param.param_type_name == "option" and (param.is_flag or "--help" in param.opts):
                continue
            assert name_of(param) in BAD or (command, name_of(param)) in BAD_FOR, (command, name_of(param))


def one_line_error(output: str) -> str:
    """The error line of a usage error's output, after checking it is all there is."""
    assert "Traceback" not in output and 'File "' not in output, output
    lines = [line for line in output.splitlines() if line.strip()]
    assert 1 <= len(lines) <= 2, output
    assert lines[0].startswith("error[") and ("]: " in lines[0]), output
    assert len(lines) == 1 or lines[1].startswith("  = hint: "), output
    return lines[0]


def test_every_flag_wrong_is_a_one_line_usage_error(files):
    seen = 0
    for _, argv, names in cases(files):
        result = runner.invoke(app, argv)
        where = f"kir {' '.join(argv)}"
        assert result.exit_code == 2, f"{where}: exit {result.exit_code}\n{result.output}"
        assert result.exception is None or isinstance(result.exception, SystemExit), (where, result.exception)
        line = one_line_error(result.output)
        tokens = [n for n in names if n] + [f"'{n}'" for n in names] + [n.split("=")[0] for n in names if "=" in n[1:]]
        if names == ["missing"]:
            tokens = ["missing", "needs"]
        assert any(t in line for t in tokens), f"{where}: the error does not name {names}: {line}"
        seen += 1
    assert seen > 200  # the tree was walked: every command, every option


def test_usage_errors_with_json_are_one_object(files):
    """With --json on the command line even click's own errors come as the command's object."""
    import json

    for command, cmd in COMMANDS:
        if not any("--json" in p.opts for p in cmd.params):
            continue
        result = runner.invoke(app, [*command.split(), *base(command, files), "--json", "--no-such-option"])
        assert result.exit_code == 2, (command, result.output)
        data = json.loads(result.output)
        schema = "kir.record/1" if command in RECORD_COMMANDS else f"kir.{command.replace(' ', '.')}/1"
        assert data["schema"] == schema and data["ok"] is False
        assert [d["rule"] for d in data["diagnostics"]] == ["cli.usage"]


def test_no_command_prints_the_help_and_exits_2():
    for argv in ([], ["rules"]):
        result = runner.invoke(app, argv)
        assert result.exit_code == 2 and "Usage: " in result.output and "Commands:" in result.output
        assert "Traceback" not in result.output


# ---- inputs that never end, and the real entry point ----------------------------------------------


@pytest.fixture
def alarm():
    """Fail, rather than hang the test run, when a command blocks (on a FIFO it opened)."""

    def ring(signum, frame):
        raise TimeoutError("the command blocked")

    old = signal.signal(signal.SIGALRM, ring)
    yield lambda seconds: signal.alarm(seconds)
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_inputs_that_never_end_are_refused(tmp_path, alarm):
    """A FIFO (no writer) or /dev/zero as an input, a FIFO as an output: refused at once, not
    read (which would never end) or opened (which would block until a writer or reader comes)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    npz = tmp_path / "in.npz"
    np.savez(npz, x=np.ones(4, np.float32), y=np.ones(4, np.float32))
    lines = [
        ["check", fifo],
        ["check", "/dev/zero"],
        ["fmt", fifo],
        ["hash", "/dev/zero"],
        ["interp", VECTOR_ADD, "-i", fifo, "-o", tmp_path / "o.npz"],
        ["interp", VECTOR_ADD, "-i", "/dev/zero", "-o", tmp_path / "o.npz"],
        ["interp", VECTOR_ADD, "-i", npz, "-o", fifo],
        ["lower", VECTOR_ADD, "-b", "triton", "-o", fifo],
        ["run", fifo, "--task", "softmax", "-b", "interp"],
        ["run", SOFTMAX, "--task", fifo, "-b", "interp"],
        ["rules", "add", fifo],
        ["cost", SOFTMAX, "--calibration", fifo],
    ]
    for argv in lines:
        alarm(30)
        result = runner.invoke(app, [str(a) for a in argv])
        alarm(0)
        assert result.exit_code == 2, (argv, result.output)
        line = one_line_error(result.output)
        assert str(fifo) in line or "/dev/zero" in line, (argv, line)


def test_the_installed_entry_point_prints_one_line(tmp_path):
    """The same through `python -m agent.cli` (the console script's `app`), as real processes."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    lines = [
        ["check", fifo],
        ["check", VECTOR_ADD, "--frobnicate"],
        ["compile", VECTOR_ADD, "--to", "nonsense"],
        ["run", SOFTMAX, "--task", "softmax", "--seed", str(2**80)],
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "agent.cli", *map(str, argv)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
            env=env,
        )
        for argv in lines
    ]
    try:
        for argv, proc in zip(lines, procs, strict=True):
            output, _ = proc.communicate(timeout=120)
            assert proc.returncode == 2, (argv, output)
            one_line_error(output)
    finally:
        for proc in procs:
            proc.kill()


def test_a_usage_error_names_its_command_in_json_whatever_the_program_is_called():
    """`python -m agent.cli run ... --json` is `kir run`: its usage object is a Record, not an
    object of a command named after the interpreter's flags."""
    for argv, schema in (
        (["run", "x.kir", "--bogus"], "kir.record/1"),
        (["rules", "add", "--bogus"], "kir.rules.add/1"),
    ):
        out = subprocess.run(
            [sys.executable, "-m", "agent.cli", *argv, "--json"], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 2 and f'"schema": "{schema}"' in out.stdout, out.stdout
