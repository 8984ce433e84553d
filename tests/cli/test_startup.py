"""`kir --help`, `kir CMD --help` and `kir version` import nothing heavy (#26: start-up under
0.3 s). What a command imports is counted, not timed: a time depends on the machine and its
load, the modules do not. The heavy ones are what the commands themselves need: the xdsl dialect
(~0.15 s), numpy (~0.05 s), rich, lark, torch, and the packages above `kir`; and pydantic
(~0.1 s), which typer would import to convert any parameter's value (kir.cli's `KirGroup`
converts them without it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = (
    "xdsl",
    "numpy",
    "rich",
    "lark",
    "torch",
    "triton",
    "z3",
    "ml_dtypes",
    "costmodel",
)
# Of the packages that contribute commands, only their command modules (and what those need of
# `kir`'s ground floor) may be loaded.
LIGHT = {
    "agent",
    "agent.cli",
    "agent.search",
    "agent.search.cli",
    "agent.search.report_cli",
    "agent.frontend",
    "agent.frontend.cli",
    "agent.learn",
    "agent.learn.cli",
    "agent.kb",
    "agent.kb.cli",
    "agent.serve",
    "agent.serve.cli",
    "verifier",
    "verifier.cli",
    "verifier.registry",
}
# The help names the targets and backends: the target registry and its folders' declarations
# (`lowering/targets/<name>/__init__.py`) load, none of their emitters, compilers or runtimes.


def _registry(module: str) -> bool:
    parts = module.split(".")
    return parts[:2] in (["lowering"], ["lowering", "targets"]) and len(parts) <= 3


PROBE = """
import json, sys
from agent.cli import app
for argv in {argvs!r}:
    code = app(argv, standalone_mode=False)
    assert code == 0, (argv, code)
print(json.dumps(sorted(sys.modules)))
"""


def loaded_after(*argvs: list[str]) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(argvs=list(argvs))],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def heavy(loaded: set[str]) -> list[str]:
    tops = {m.split(".")[0] for m in loaded}
    ours = {m for m in loaded if m.split(".")[0] in ("agent", "verifier")} - LIGHT
    ours |= {m for m in loaded if m.split(".")[0] == "lowering" and not _registry(m)}
    return sorted((tops & set(HEAVY)) | ours)


def test_help_and_version_import_nothing_heavy():
    commands = ["check", "fmt", "hash", "interp", "lower", "compile", "cost", "run", "bench"]
    loaded = loaded_after(["--help"], ["version"], ["version", "--json"], *([c, "--help"] for c in commands))
    assert not heavy(loaded), heavy(loaded)


def test_a_command_imports_what_it_needs_and_no_pydantic():
    """The probe above could pass by seeing nothing: `kir hash` parses, and pulls in the dialect;
    its values (and those of a repeatable option) are converted without pydantic all the same."""
    vector_add = str(ROOT / "examples" / "vector_add.kir")
    loaded = loaded_after(["hash", vector_add], ["fmt", "--check", vector_add])
    assert {"xdsl", "lark"} <= loaded and "pydantic" not in loaded
