"""The PyTorch frontend: problem files to seeds that are correct on the CPU interpreters, located
diagnostics for what it does not translate, `ModelNew` files that pass the harness (and fail it
when the kernel is wrong), and the task settings it relies on (training mode, scaled presets
with derived sizes, the cost model's shape symbols)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.cli import app, run_command
from agent.frontend.make import FrontendError, seed_of, seed_task
from agent.frontend.solution import write_solution
from agent.harness.instance import make_instance
from agent.harness.isolate import run_job
from agent.tasks import load_task
from agent.tasks.task import TaskError
from kir.parser import parse

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "benchmarks" / "kernelbench"
runner = CliRunner()


def problem(tmp_path: Path, body: str, name: str = "p.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


ROWS = """
    import torch
    import torch.nn as nn

    rows = 256
    cols = 96
    half = cols // 2


    class Model(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.norm = nn.LayerNorm(n)
            self.scale = nn.Parameter(torch.randn(n))

        def forward(self, x, alpha):
            y = self.norm(x) * self.scale
            return torch.softmax(y * alpha, dim=-1) + torch.relu(x)


    def get_inputs():
        return [torch.randn(rows, cols), 0.5]


    def get_init_inputs():
        return [cols]
"""


@pytest.mark.parametrize("backend", ["interp", "triton-interp"])
def test_a_rows_seed_with_weights_and_a_scalar_input_is_correct(tmp_path, backend):
    made = seed_task(problem(tmp_path, ROWS), tmp_path / "task")
    assert made.seed.form == "rows"
    assert {a.source for a in made.seed.args} >= {"inputs[0]", "model.norm.weight", "model.scale", "outputs[0]"}
    assert any("alpha" in n and "0.5" in n for n in made.seed.notes)
    record, _ = run_command(
        str(tmp_path / "task" / "seed.kir"), str(tmp_path / "task"), backend, "test", {}, [1], 300, None
    )
    assert record.ok, [d.render() for d in record.errors]


def test_a_linear_with_its_epilogue_and_a_residual_read_in_another_shape_is_correct(tmp_path):
    made = seed_task(CORPUS / "fusion_03_linear_scale_residual.py", tmp_path / "task")
    assert made.seed.form == "gemm"
    # x is the product's [M, K] operand and the epilogue's [M, N] residual: two arguments
    assert [a.source for a in made.seed.args].count("inputs[0]") == 2
    record, _ = run_command(
        str(tmp_path / "task" / "seed.kir"), str(tmp_path / "task"), "triton-interp", "test", {}, [2], 300, None
    )
    assert record.ok, [d.render() for d in record.errors]


def test_a_strided_padded_convolution_with_its_bias_is_an_implicit_gemm_and_correct(tmp_path):
    made = seed_task(CORPUS / "conv_03_conv2d_stride2_pad1.py", tmp_path / "task")
    assert made.seed.form == "conv" and "dot<f32>" in made.seed.text
    record, _ = run_command(
        str(tmp_path / "task" / "seed.kir"), str(tmp_path / "task"), "triton-interp", "test", {}, [3], 300, None
    )
    assert record.ok, [d.render() for d in record.errors]


@pytest.mark.parametrize(
    ("name", "form"),
    [
        ("softmax_04_softmax_dim1_3d.py", "cols"),
        ("pooling_01_maxpool2d.py", "pool"),
        ("norm_06_instancenorm2d.py", "rows"),
        ("fusion_07_linear_layernorm.py", "gemm"),
        ("loss_02_cross_entropy.py", "rows"),
        ("conv_05_depthwise_conv2d.py", "grouped-conv"),
        ("norm_03_groupnorm.py", "stats"),
        ("norm_05_batchnorm2d.py", "stats"),
    ],
)
def test_middle_dimension_reductions_pooling_and_trailing_reductions_are_correct(tmp_path, name, form):
    made = seed_task(CORPUS / name, tmp_path / "task")
    assert made.seed.form == form
    record, _ = run_command(
        str(tmp_path / "task" / "seed.kir"), str(tmp_path / "task"), "interp", "test", {}, [4], 300, None
    )
    assert record.ok, [d.render() for d in record.errors]


TRANSPOSED = """
    import torch
    import torch.nn as nn

    batch = 2
    cin = 5
    cout = 3
    size = 7


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = {conv}

        def forward(self, x):
            return torch.relu(self.up(x)) * 0.5


    def get_inputs():
        return [torch.randn(batch, cin, {spatial})]


    def get_init_inputs():
        return []
"""


@pytest.mark.parametrize(
    ("conv", "spatial"),
    [
        ("nn.ConvTranspose2d(cin, cout, 4, stride=2, padding=1)", "size, size"),  # 2x upsampling
        ("nn.ConvTranspose1d(cin, cout, 3, stride=2, output_padding=1)", "size"),
        ("nn.ConvTranspose2d(cin, cout, (3, 2), stride=(1, 3), padding=(1, 0), bias=False)", "size, size + 1"),
        ("nn.ConvTranspose1d(cin, cout, 3, stride=2, padding=2, dilation=2)", "size"),  # every tap, checked
    ],
)
def test_transposed_convolutions_gather_their_taps_and_are_correct(tmp_path, conv, spatial):
    path = problem(tmp_path, TRANSPOSED.replace("{conv}", conv).replace("{spatial}", spatial))
    made = seed_task(path, tmp_path / "task")
    assert made.seed.form == "transposed-conv"
    record, _ = run_command(
        str(tmp_path / "task" / "seed.kir"), str(tmp_path / "task"), "interp", "test", {}, [4], 300, None
    )
    assert record.ok, [d.render() for d in record.errors]
    assert not [d for d in record.diagnostics if d.severity == "warning"], [d.render() for d in record.diagnostics]


STATS = """
    import torch
    import torch.nn as nn

    batch = 4
    channels = 96
    size = 20
    groups = channels // 16


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.gn = nn.GroupNorm(groups, channels)
            self.bn = nn.BatchNorm3d(channels)

        def forward(self, x):
            return {body}


    def get_inputs():
        return [torch.randn(batch, channels, 3, size, size) * 3.0 + 1.0]


    def get_init_inputs():
        return []
"""


@pytest.mark.parametrize(
    ("body", "mode", "grouped"),
    [
        ("torch.nn.functional.silu(self.gn(x)) * 2.0", "train", True),
        ("torch.relu(self.bn(x)) - 0.5", "train", False),
        ("torch.relu(self.bn(x)) - 0.5", "eval", False),  # the running statistics
    ],
)
def test_group_and_batch_statistics_with_an_epilogue_are_correct(tmp_path, body, mode, grouped):
    path = problem(tmp_path, STATS.replace("{body}", body))
    made = seed_task(path, tmp_path / "task", mode)
    assert made.seed.form == "stats" and ("rvar" in made.seed.text) == (mode == "eval")
    # batch or group statistics of few groups: each group split over SPLIT programs, two kernels
    assert ("scratch pmean" in made.seed.text) == (mode == "train") == ("SPLIT" in made.seed.params["bench"])
    # the groups are the model's under each preset: the channels scale, `groups` is derived from them
    groups = {k: v.get("G") for k, v in made.seed.params.items()}
    assert groups == (
        {"bench": 6, "test": made.shapes["test"]["C"] // 16} if grouped else {"bench": None, "test": None}
    )
    assert not grouped or groups["test"] != 6
    record, _ = run_command(
        str(tmp_path / "task" / "seed.kir"), str(tmp_path / "task"), "interp", "test", {}, [4], 300, None
    )
    assert record.ok, [d.render() for d in record.errors]
    assert not [d for d in record.diagnostics if d.severity == "warning"]


@pytest.mark.parametrize(
    ("name", "line", "words"),
    [
        ("fusion_04_matmul_dropout_softmax.py", 19, "random numbers"),
        ("fusion_06_conv2d_batchnorm_relu.py", 22, "a kernel after it"),
    ],
)
def test_what_is_not_translated_is_a_diagnostic_at_its_line(name, line, words):
    with pytest.raises(FrontendError) as err:
        seed_of(CORPUS / name)
    (d,) = err.value.diagnostics
    assert d.span is not None and d.span.line == line and Path(d.span.file).name == name
    assert words in d.message


def test_a_forward_that_cannot_be_traced_is_located(tmp_path):
    path = problem(
        tmp_path,
        """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, x):
                if x.sum() > 0:
                    return x
                return -x

        def get_inputs():
            return [torch.randn(64, 64)]
        """,
    )
    with pytest.raises(FrontendError) as err:
        seed_of(path)
    (d,) = err.value.diagnostics
    assert d.rule == "frontend.trace" and d.span.line == 7


def test_kir_seed_on_broken_files_answers_with_diagnostics_not_tracebacks(tmp_path):
    cases = {
        "syntax.py": "def broken(:\n",
        "nomodel.py": "import torch\n",
        "raises.py": "import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        raise RuntimeError('no')\n\ndef get_inputs():\n    return []\n",
        "binary.py": "\x00\x01\x02",
    }
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text)
        result = runner.invoke(app, ["seed", str(path), "--json"])
        assert result.exit_code == 1, (name, result.output)
        assert "Traceback" not in result.output, (name, result.output)
        payload = json.loads(result.output)
        assert payload["diagnostics"] and payload["diagnostics"][0]["severity"] == "error", name


def test_kir_seed_prints_the_program_and_its_bindings(tmp_path):
    result = runner.invoke(app, ["seed", str(CORPUS / "matmul_07_linear_bias.py"), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["form"] == "gemm" and payload["bind"]["bias"].startswith("model.")
    parse(payload["text"])


def test_a_solution_passes_the_harness_and_a_wrong_kernel_does_not(tmp_path):
    prob = CORPUS / "norm_01_layernorm.py"
    made = seed_task(prob, tmp_path / "task")
    program = parse((tmp_path / "task" / "seed.kir").read_text()).with_params(**made.seed.params["test"])
    good = write_solution(made.task, program, prob, tmp_path / "good.py")
    job = {"task": str(tmp_path / "task"), "candidate": {"kind": "python", "file": str(good)}, "preset": "test"}
    record = run_job(job, timeout=300)
    assert record["ok"] and record["stage"] == "done", record
    wrong_text = (tmp_path / "task" / "seed.kir").read_text().replace("+ 1e-05", "+ 0.5")
    wrong = parse(wrong_text).with_params(**made.seed.params["test"])
    bad = write_solution(made.task, wrong, prob, tmp_path / "bad.py")
    record = run_job({**job, "candidate": {"kind": "python", "file": str(bad)}}, timeout=300)
    assert not record["ok"] and record["stage"] == "correctness", record


def test_a_loss_is_a_program_a_row_then_a_sum_and_its_solution_writes_a_scalar(tmp_path):
    prob = CORPUS / "loss_03_smooth_l1.py"
    made = seed_task(prob, tmp_path / "task")
    program = parse(made.seed.text)
    assert [k.kernel.grid.data[0].data.__str__() for k in program.kernels()] == ["M", "1"]
    assert [s.name for s in program.scratch] == ["partial0"] and "partial0" not in made.task.bind
    program = parse((tmp_path / "task" / "seed.kir").read_text()).with_params(**made.seed.params["test"])
    solution = write_solution(made.task, program, prob, tmp_path / "solution.py")
    job = {"task": str(tmp_path / "task"), "candidate": {"kind": "python", "file": str(solution)}, "preset": "test"}
    record = run_job(job, timeout=300)
    assert record["ok"] and record["stage"] == "done", record


def test_kir_solve_writes_a_checked_solution(tmp_path):
    out = tmp_path / "solution.py"
    result = runner.invoke(
        app,
        ["solve", str(CORPUS / "elementwise_05_tanh_mul_row.py"), "--budget", "1", "--work", str(tmp_path / "w"),
         "--out", str(out), "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["check"]["ok"] and out.exists() and "class ModelNew(Model)" in out.read_text()


# ---- the task settings the frontend relies on ------------------------------------------------------


def test_a_scaled_preset_scales_sizes_and_recomputes_derived_values(tmp_path):
    task = load_task(problem(tmp_path, ROWS))
    preset = task.preset("scale:0.25")
    assert preset.variables == {"rows": 64, "cols": 32}  # multiples of 16 stay so
    inst = make_instance(task, "scale:0.25", 0)
    assert tuple(inst.inputs[0].shape) == (64, 32) and task.module.half == 16
    make_instance(task, "default", 0)
    assert task.module.half == 48
    for bad in ("scale:0", "scale:2", "scale:x"):
        with pytest.raises(TaskError):
            task.preset(bad)


def test_a_bare_file_runs_in_training_mode_and_a_task_folder_says_so(tmp_path):
    body = ROWS.replace(
        "self.norm = nn.LayerNorm(n)", "self.norm = nn.LayerNorm(n)\n            self.drop = nn.Dropout(0.5)"
    )
    path = problem(tmp_path, body)
    assert load_task(path).mode == "train"
    assert make_instance(load_task(path), "default", 0).model.training
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "reference.py").write_text(textwrap.dedent(body))
    (folder / "task.toml").write_text('mode = "eval"\n')
    assert not make_instance(load_task(folder), "default", 0).model.training
    (folder / "task.toml").write_text('mode = "inference"\n')
    with pytest.raises(TaskError) as err:
        load_task(folder)
    assert err.value.diagnostics[0].span.line == 1


def test_shape_symbols_reach_the_cost_model(tmp_path):
    made = seed_task(CORPUS / "softmax_01_softmax_last_dim.py", tmp_path / "task")
    task = made.task
    assert task.shape_values("bench") == made.shapes["bench"] and set(made.shapes["bench"]) == {"M", "N"}
    from agent.pipeline import Candidate, evaluate

    candidate = Candidate.from_file(str(tmp_path / "task" / "seed.kir"), made.seed.params["bench"])
    record = evaluate(candidate, until="cost", backend="triton", task=task, preset="bench")
    assert record.ok and record.estimate, [d.render() for d in record.errors]
    (tmp_path / "task" / "task.toml").write_text(
        (tmp_path / "task" / "task.toml").read_text() + "\n[shapes.nope]\nM = 1\n"
    )
    with pytest.raises(TaskError):
        load_task(tmp_path / "task")


def test_a_degenerate_reference_output_is_reported(tmp_path):
    path = problem(
        tmp_path,
        """
        import torch
        import torch.nn as nn

        rows = 64
        cols = 64

        class Model(nn.Module):
            def forward(self, x):
                return torch.relu(x) * 0.0

        def get_inputs():
            return [torch.randn(rows, cols)]
        """,
    )
    made = seed_task(path, tmp_path / "task")
    record, _ = run_command(
        str(tmp_path / "task" / "seed.kir"), str(tmp_path / "task"), "interp", "test", {}, [1, 2], 300, None
    )
    assert record.ok
    assert any("constant" in why for why in record.verdict["metrics"]["degenerate"].values())
    del made


def test_a_vector_broadcast_as_pytorch_does_is_not_taken_for_one_value_a_channel(tmp_path):
    """A (C,) bias after a convolution broadcasts along the last dimension (W), not the channels:
    with W == C a seed that added it per channel would be wrong; the frontend refuses it."""
    body = """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(4, 16, 1)
                self.bias = nn.Parameter(torch.randn(16))
                self.per_channel = nn.Parameter(torch.randn(16, 1, 1))

            def forward(self, x):
                return self.conv(x) + BIAS

        def get_inputs():
            return [torch.randn(2, 4, 16, 16)]
        """
    refused = problem(tmp_path, body.replace("BIAS", "self.bias"), "along_w.py")
    with pytest.raises(FrontendError):
        seed_of(refused)
    taken = problem(tmp_path, body.replace("BIAS", "self.per_channel"), "per_channel.py")
    made = seed_task(taken, tmp_path / "task")
    record, _ = run_command(
        str(tmp_path / "task" / "seed.kir"), str(tmp_path / "task"), "interp", "test", {}, [1], 300, None
    )
    assert made.seed.form == "conv" and record.ok, [d.render() for d in record.errors]


def test_a_seeded_task_is_found_by_name_on_the_task_path(tmp_path, monkeypatch):
    seed_task(CORPUS / "elementwise_01_relu.py", tmp_path / "tasks" / "relu_task")
    argv = ["search", "relu_task", "--budget", "1", "--executor", "inline", "--backend", "interp"]
    argv += ["--db", str(tmp_path / "s.sqlite"), "--json"]
    missing = runner.invoke(app, argv)
    assert missing.exit_code == 2 and "no task 'relu_task'" in missing.output
    monkeypatch.setenv("KIR_TASK_PATH", str(tmp_path / "tasks"))
    found = runner.invoke(app, argv)
    assert found.exit_code == 0, found.output
    assert json.loads(found.stdout)["task"] == "relu_task"
