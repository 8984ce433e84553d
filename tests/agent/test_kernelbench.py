"""KernelBench problem files load as tasks without edits (no task.toml), and KernelBench-style
solutions (`ModelNew`) are checked against them, parameters included."""

from __future__ import annotations

import textwrap

import torch

from agent.harness.correctness import ModuleRun, check
from agent.harness.isolate import run_job
from agent.tasks import load_task

MATMUL = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that performs a single square matrix multiplication (C = A * B)
    """
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)

N = 256

def get_inputs():
    A = torch.randn(N, N)
    B = torch.randn(N, N)
    return [A, B]

def get_init_inputs():
    return []  # No special initialization inputs needed
'''

CONV = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0, bias: bool = False):
        super(Model, self).__init__()
        self.conv2d = nn.Conv2d(in_channels, out_channels, (kernel_size, kernel_size), stride=stride, padding=padding, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2d(x)

batch_size = 2
in_channels = 3
out_channels = 8
kernel_size = 3
width = 16
height = 16

def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
"""

SOLUTION = """
import torch
import torch.nn as nn
import torch.nn.functional as F

class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, bias=False):
        super().__init__()
        self.conv2d = nn.Conv2d(in_channels, out_channels, (kernel_size, kernel_size), stride=stride, padding=padding, bias=bias)

    def forward(self, x):
        return F.conv2d(x, self.conv2d.weight{change})
"""


def test_a_kernelbench_file_loads_without_metadata(tmp_path):
    path = tmp_path / "1_Square_matrix_multiplication_.py"
    path.write_text(MATMUL)
    task = load_task(path)
    assert task.name == "1_Square_matrix_multiplication_" and task.dtype is None and not task.programs

    class ModelNew(torch.nn.Module):
        def forward(self, a, b):
            return a @ b

    verdict = check(task, ModuleRun(ModelNew), "default", seeds=[3])
    assert verdict.ok, [d.render() for d in verdict.diagnostics]


def test_a_solution_with_parameters_is_built_under_the_reference_s_seed(tmp_path):
    problem = tmp_path / "63_conv_standard_2D.py"
    problem.write_text(CONV)
    task = load_task(problem)
    namespace: dict = {}
    exec(textwrap.dedent(SOLUTION.format(change="")), namespace)
    assert check(task, ModuleRun(namespace["ModelNew"]), "default", seeds=[1, 2]).ok
    exec(textwrap.dedent(SOLUTION.format(change=" * 1.01")), namespace)
    verdict = check(task, ModuleRun(namespace["ModelNew"]), "default", seeds=[1])
    assert not verdict.ok and verdict.diagnostics[0].rule == "harness.mismatch"


def test_a_kernelbench_solution_file_runs_isolated(tmp_path):
    problem = tmp_path / "63_conv_standard_2D.py"
    problem.write_text(CONV)
    solution = tmp_path / "solution.py"
    solution.write_text(SOLUTION.format(change=""))
    record = run_job(
        {"task": str(problem), "candidate": {"kind": "python", "file": str(solution)}, "preset": "default"}, timeout=120
    )
    assert record["ok"] and record["stage"] == "done", record
