"""Recorded tactic sequences (tactics/replay.py, agent/tasks/replay.py): every task's sequence
replays on the CPU to a program that verifies at both presets and is correct on the `test`
preset through the reference interpreter and Triton's interpreter; whether it is tuned.kir's IR
is stated per task and checked; the task.toml format's errors are located at the step's line;
the parameters are derived; `kir tactics replay`; the bench runner's rows for a replayed program."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.cli import app
from agent.harness.backends import KirCandidate
from agent.harness.correctness import KirRun, check
from agent.tasks import TaskError, load_suite, load_task
from agent.tasks.replay import backends_of, names, params_for, program_of, replay
from kir.diagnostics import KirError
from kir.parser import parse_file
from kir.program import same_ir
from lowering.emit.base import program_level
from verifier.check import check_program

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "benchmarks" / "tasks"
TASKS = {task.name: task for task in load_suite(SUITE)}
REPLAYED = sorted(name for name, task in TASKS.items() if "replayed" in task.replays)

# Per task with a sequence: whether the replayed program is tuned.kir's IR, and where not, the
# decision of tuned.kir that no tactic makes (docs/tactics.md, "Recorded sequences").
SAME_AS_TUNED = {
    "causal_attention": False,  # equivalent at the bench preset: the STAGES parameter, names, S % BN == 0
    "embedding_bag": True,
    "gemm": False,  # equivalent at the bench shapes: cdiv(M, BM) where tuned writes M / BM
    "gemm_bias_gelu": False,  # as gemm
    "id_hash": True,
    "kmeans_assign": False,  # equivalent at the bench preset: x: f32[P, D] with where D <= BD, D % BD == 0; S
    "knn_topk": False,  # the early exit of the top-K merge, the [K, BQ] layout, D == BD
    "layernorm": False,  # 1 / N computed once and shared (`inv_n`); the tactic writes it per site
    "rmsnorm": False,  # two passes over chunks of a row of constant length (one_pass.kir it is)
    "rmsnorm_backward": False,  # as layernorm, and hoisted out of the row loop
    "silu_mul": False,  # equivalent to tuned's [1, BN] tile at the bench preset (BM = 1)
    "softmax": True,
}
# The other programs of a task whose IR the replayed one is.
SAME_AS_OTHER = {"rmsnorm": "one_pass"}


def test_the_suite_records_sequences_and_says_which_are_tuned_kir():
    assert set(REPLAYED) == set(SAME_AS_TUNED)
    assert len(REPLAYED) >= 12


@pytest.mark.parametrize("name", REPLAYED)
def test_the_sequence_gives_a_program_that_verifies_at_every_preset(name):
    task = TASKS[name]
    program = replay(task)
    for preset in ("test", "bench"):
        params = params_for(task, "replayed", preset)
        bound = program.with_params(**params) if params else program
        errors = [d for d in check_program(bound) if d.is_error]
        assert not errors, [d.render() for d in errors]
    assert parse_file(task.programs["seed"].file).text() == task.programs["seed"].file.read_text()  # seed untouched


@pytest.mark.parametrize("name", REPLAYED)
def test_the_replayed_program_is_or_is_not_tuned_kir_as_stated(name):
    task = TASKS[name]
    tuned = parse_file(task.programs["tuned"].file)
    assert same_ir(replay(task), tuned) is SAME_AS_TUNED[name]
    if name in SAME_AS_OTHER:
        assert same_ir(replay(task), parse_file(task.programs[SAME_AS_OTHER[name]].file))
    if SAME_AS_TUNED[name]:  # the same program needs the same parameters
        for preset in ("test", "bench"):
            assert params_for(task, "replayed", preset) == task.programs["tuned"].params_for(preset)


@pytest.mark.parametrize("backend", ["interp", "triton-interp"])
@pytest.mark.parametrize("name", REPLAYED)
def test_the_replayed_program_is_correct_on_the_test_preset(name, backend):
    task = TASKS[name]
    program = replay(task)
    if backend == "triton-interp" and program_level(program) == "explicit":
        pytest.skip("the Triton backend takes tile-level programs")
    candidate = KirCandidate(program, backend, params_for(task, "replayed", "test"))
    verdict = check(task, KirRun(candidate), "test", seeds=[11, 12, 13])
    assert verdict.ok, [d.render() for d in verdict.diagnostics]


# ---- the format in task.toml -----------------------------------------------------------------------


def _task(tmp_path: Path, entry: str) -> Path:
    """The softmax task with `entry` in place of its `[programs.replayed]` block."""
    folder = tmp_path / "softmax"
    shutil.copytree(SUITE / "softmax", folder)
    toml = folder / "task.toml"
    text = toml.read_text()
    start = text.index("[programs.replayed]")
    end = text.index("\n[", start + 1)
    end = text.rindex("\n\n", start, end) if "\n\n" in text[start:end] else end
    toml.write_text(text[:start] + entry.strip() + "\n" + text[end:])
    return folder


def _line(folder: Path, needle: str) -> int:
    return next(n for n, line in enumerate((folder / "task.toml").read_text().splitlines(), 1) if needle in line)


def _load_error(folder: Path):
    with pytest.raises(TaskError) as err:
        load_task(folder)
    (d,) = err.value.diagnostics
    assert d.span is not None and d.span.file == str(folder / "task.toml")
    return d


BAD_STEPS = [
    ('{ tactic = "wraps", warps = 16 }', "no tactic 'wraps'", "did you mean 'warps'?"),
    ('{ tactic = "warps", wraps = 16 }', "tactic warps has no parameter 'wraps'", "did you mean 'warps'?"),
    ('{ tactic = "warps", warps = 12 }', "warps = 12 is not a power of two in 1..32", "warps:"),
    ('{ tactic = "warps", warps = "16" }', "warps = '16' is not a power of two", "warps:"),
    ('{ tactic = "retile", param = "BLOCK" }', "tactic retile needs a value for value", "value:"),
    ('"warps"', "a step is a table", "tactic ="),
    ("{ warps = 16 }", "a step is a table", "tactic ="),
]


@pytest.mark.parametrize("step, said, hint", BAD_STEPS, ids=[s for s, _, _ in BAD_STEPS])
def test_a_bad_step_is_a_task_error_at_its_line(tmp_path, step, said, hint):
    folder = _task(
        tmp_path,
        f"""
[programs.replayed]
from = "seed"
replay = [
  {{ tactic = "reciprocal" }},  # a comment, and a string with a bracket: "[{{"
  {step},
]
""",
    )
    d = _load_error(folder)
    assert d.rule == "task.replay" and said in d.message and "step 2" in d.message and hint in d.hint, d
    assert (d.span.line, d.span.col) == (_line(folder, step), 3)


def test_the_steps_of_a_one_line_array_are_located_at_their_columns(tmp_path):
    folder = _task(
        tmp_path, '[programs.replayed]\nreplay = [{ tactic = "reciprocal" }, { tactic = "warps", warps = 3 }]\n'
    )
    d = _load_error(folder)
    line = (folder / "task.toml").read_text().splitlines()[d.span.line - 1]
    assert line.startswith("replay = [") and line[d.span.col - 1 :].startswith('{ tactic = "warps"')


@pytest.mark.parametrize(
    "entry, said",
    [
        ('[programs.replayed]\nfile = "seed.kir"\nreplay = [{ tactic = "reciprocal" }]', "both a file and a replay"),
        ("[programs.replayed]\nreplay = []", "non-empty list of steps"),
        ('[programs.replayed]\nreplay = { tactic = "reciprocal" }', "non-empty list of steps"),
        ('[programs.replayed]\nfrom = "sead"\nreplay = [{ tactic = "reciprocal" }]', "replayed from `sead`"),
        ('[programs.replayed]\nfrom = 1\nreplay = [{ tactic = "reciprocal" }]', "`from` names another program"),
    ],
)
def test_a_bad_entry_is_a_task_error_at_its_header(tmp_path, entry, said):
    folder = _task(tmp_path, entry)
    d = _load_error(folder)
    assert d.rule == "task.replay" and said in d.message, d
    assert d.span.line == _line(folder, "[programs.replayed]")


def test_a_step_that_does_not_apply_is_located_at_its_line_then_the_tactics_reason(tmp_path):
    folder = _task(
        tmp_path,
        """
[programs.replayed]
replay = [
  { tactic = "warps", warps = 16 },
  { tactic = "stages", stages = 3 },
]
""",
    )
    task = load_task(folder)  # the step is well formed: whether it applies is known by running it
    with pytest.raises(KirError) as err:
        replay(task)
    head, *reasons = err.value.diagnostics
    assert head.rule == "tactic.replay.step" and "step 2 (stages stages=3)" in head.message
    assert head.span.file == str(folder / "task.toml") and head.span.line == _line(folder, "stages = 3")
    assert reasons[0].rule == "tactic.stages.no-pipeline" and reasons[0].span.file.endswith("seed.kir")


# ---- parameters --------------------------------------------------------------------------------------


def test_a_default_a_step_changes_overrides_the_presets_and_the_entrys_own_override_that(tmp_path):
    folder = _task(
        tmp_path,
        """
[programs.replayed]
replay = [{ tactic = "retile", param = "BLOCK", value = 2048 }]
params.bench = { BLOCK = 8192 }
""",
    )
    task = load_task(folder)
    assert replay(task).params == {"BLOCK": 2048}
    # the seed's test preset says BLOCK = 512: the retile's 2048 is what the replayed program runs
    assert params_for(task, "replayed", "test") == {"BLOCK": 2048}
    assert params_for(task, "replayed", "bench") == {"BLOCK": 8192}  # the entry's own
    untouched = load_task(SUITE / "softmax")
    assert params_for(untouched, "replayed", "test") == untouched.programs["seed"].params_for("test")


def test_a_parameter_the_result_no_longer_declares_is_dropped_and_the_last_default_wins():
    from types import SimpleNamespace

    from tactics.replay import derive_params

    seed, retiled, wider = (SimpleNamespace(params={"BLOCK": b}) for b in (1024, 512, 2048))
    gone = SimpleNamespace(params={})  # a step that removes the parameter (fixes it, say)
    base = {"test": {"BLOCK": 256}, "bench": {"BLOCK": 1024}}
    assert derive_params([seed], base, {}, ["test", "bench"]) == base
    assert derive_params([seed, retiled, wider], base, {}, ["test"]) == {"test": {"BLOCK": 2048}}
    assert derive_params([seed, retiled, gone], base, {}, ["test", "bench"]) == {}
    assert derive_params([seed, gone], base, {"bench": {"R": 4}}, ["test", "bench"]) == {"bench": {"R": 4}}


# ---- the command line, and the bench runner's rows -----------------------------------------------------

runner = CliRunner()


def kir(*argv: str):
    result = runner.invoke(app, [str(a) for a in argv])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result


def test_kir_tactics_replay_prints_the_program_and_its_json_says_what_it_is():
    result = kir("tactics", "replay", SUITE / "softmax")
    assert result.exit_code == 0, result.output
    tuned = parse_file(SUITE / "softmax" / "tuned.kir")
    from kir.parser import parse

    assert same_ir(parse(result.output), tuned)
    data = json.loads(kir("tactics", "replay", SUITE / "softmax", "--json").output)
    assert data["schema"] == "kir.tactics.replay/1" and data["ok"]
    assert (data["task"], data["program"], data["from"], data["kernel"]) == ("softmax", "replayed", "seed", "softmax")
    assert [s["tactic"] for s in data["steps"]] == ["reciprocal", "warps"] and data["steps"][1]["params"] == {
        "warps": 16
    }
    assert data["params"] == {"test": {"BLOCK": 512}, "bench": {"BLOCK": 8192}} and data["same_ir_as"] == ["tuned"]


def test_kir_tactics_replay_of_a_step_that_fails_prints_its_line_and_exits_1(tmp_path):
    folder = _task(tmp_path, '[programs.replayed]\nreplay = [\n  { tactic = "pipeline" },\n]')
    result = kir("tactics", "replay", folder)
    assert result.exit_code == 1
    assert f"task.toml:{_line(folder, 'pipeline')}:3: error[tactic.replay.step]" in result.output
    data = json.loads(kir("tactics", "replay", folder, "--json").output)
    assert data["ok"] is False and data["text"] is None
    assert {d["rule"] for d in data["diagnostics"]} == {"tactic.replay.step", "tactic.pipeline.no-loop"}


def test_kir_tactics_replay_usage_errors_exit_2(tmp_path):
    missing = kir("tactics", "replay", tmp_path / "nothing")
    assert missing.exit_code == 2 and "error[task.missing]" in missing.output
    other = kir("tactics", "replay", SUITE / "softmax", "--program", "tuned")
    assert other.exit_code == 2 and "no replay sequence for a program `tuned`" in other.output
    assert "replayed programs: replayed" in other.output
    bad = _task(tmp_path, '[programs.replayed]\nreplay = [{ tactic = "warps", warps = 3 }]')
    assert kir("tactics", "replay", bad).exit_code == 1  # task.toml is wrong, not the command line


def test_the_bench_plans_and_times_the_replayed_program_beside_the_others():
    from agent.harness.bench import _spec, plan

    task = TASKS["softmax"]
    assert names(task)[-1] == "replayed" and backends_of(task, "replayed") == ()
    rows = plan([task], None, ["seed", "tuned", "replayed"])
    assert [(name, backend) for _, name, backend in rows] == [
        ("seed", "triton"),
        ("tuned", "triton"),
        ("replayed", "triton"),
    ]
    spec = _spec(task, "replayed", "triton", "bench")
    assert spec["text"] == program_of(task, "replayed").text() and spec["params"] == {"BLOCK": 8192}
    assert "file" not in spec or not Path(spec["file"]).exists()  # the text is the candidate, not a file


def test_a_row_whose_sequence_does_not_replay_fails_alone(tmp_path):
    from agent.harness.bench import check_row, plan

    task = load_task(_task(tmp_path, '[programs.replayed]\nreplay = [{ tactic = "pipeline" }]'))
    assert [name for _, name, _ in plan([task], None, ["replayed"])] == ["replayed"]
    record = check_row(task, "replayed", "triton", "test", "cpu")
    assert not record.ok and record.errors[0].rule == "tactic.replay.step"


def test_a_replayed_row_is_checked_through_the_pipeline():
    from agent.harness.bench import check_row

    record = check_row(TASKS["softmax"], "replayed", "interp", "test", "cpu", timeout=300)
    assert record.ok and record.verdict["stage"] == "done" and dict(record.params) == {"BLOCK": 512}
