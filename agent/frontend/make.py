"""The task folder of a problem file: its seed, its presets, its bindings (the package's
docstring, agent/frontend/__init__.py, tells the whole way)."""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from agent.frontend.emit import Seed, make_seed
from agent.frontend.trace import FrontendError, error, meta, trace
from agent.tasks.task import SCALE_PREFIX, Task, load_task
from kir.diagnostics import KirError

__all__ = ["FrontendError", "Made", "Seed", "seed_of", "seed_task"]

# the largest main tensor of the test preset: what the interpreters run in seconds
TEST_ELEMENTS = 1 << 16


@dataclass
class Made:
    """A seed and the task folder written around it."""

    seed: Seed
    task: Task
    folder: Path | None
    test_scale: str
    shapes: dict[str, dict[str, int]] = field(default_factory=dict)  # preset -> shape symbol values


def kernel_name(problem: Path) -> str:
    stem = "".join(c if c.isalnum() or c == "_" else "_" for c in problem.stem)
    return stem if stem and not stem[0].isdigit() else f"k_{stem}"


def seed_of(problem: str | Path, mode: str | None = None) -> Made:
    """The seed of a problem file and its test scale, writing nothing; `mode` ("train" or
    "eval") overrides the mode the file runs in (KernelBench's: train)."""
    path = Path(problem)
    if path.suffix != ".py" or not path.is_file():
        raise error("frontend.file", f"{path}: not a problem file (a .py file in the KernelBench format)", path)
    task = load_task(path)
    task.mode = mode or task.mode
    traced = trace(task, "default")
    seed = make_seed(traced, kernel_name(path))
    _parses(seed, path)
    scale, test = _test_scale(task, seed)
    traced_test = trace(task, scale)
    shapes = {"bench": symbol_values(seed, traced), "test": symbol_values(seed, traced_test)}
    for param, (module, attribute) in seed.preset_params.items():  # a module's setting, as made under test
        test[param] = int(getattr(traced_test.model.get_submodule(module), attribute))
    if "where N <= BLOCK" in seed.text:  # a row in one tile: the test rows' width
        test["BLOCK"] = max(16, 1 << (shapes["test"]["N"] - 1).bit_length())
    if "where N <= BN" in seed.text:  # whole rows of the product in a program
        test["BN"] = max(16, 1 << (shapes["test"]["N"] - 1).bit_length())
    if "where R <= BLOCK" in seed.text:  # the reduced extent in one tile
        test["BLOCK"] = max(16, 1 << (shapes["test"]["R"] - 1).bit_length())
        test["BB"] = 16
    seed.params["test"] = test
    return Made(seed, task, None, scale, shapes)


def _parses(seed: Seed, problem: Path) -> None:
    """A seed that does not parse is the frontend's bug: said so, at the forward's line."""
    from kir.parser import parse

    try:
        parse(seed.text, f"<seed of {problem.name}>")
    except KirError as err:
        first = err.diagnostics[0]
        raise error(
            "frontend.internal", f"the {seed.form} seed does not parse ({first.rule}: {first.message}): a frontend bug",
            problem, 1, "kir seed --json prints the text",
        ) from None  # fmt: skip


def symbol_values(seed: Seed, traced) -> dict[str, int]:
    """The value of each shape symbol of the seed's arguments under the traced preset: from the
    tensor each argument is bound to, its trailing dimensions merged down to the argument's rank
    (as the harness binds it)."""
    results = [n for n in traced.graph.nodes if n.op == "output"][0].args[0]
    results = list(results) if isinstance(results, tuple | list) else [results]
    values: dict[str, int] = {}
    for a in seed.args:
        kind, _, rest = a.source.partition("[")
        if a.source.startswith("model."):
            obj = traced.model
            for part in a.source.removeprefix("model.").split("."):
                obj = getattr(obj, part)
            shape = tuple(obj.shape)
        elif kind == "inputs":
            shape = tuple(traced.inputs[int(rest.rstrip("]"))].shape)
        else:
            m = meta(results[int(rest.rstrip("]"))])
            shape = m[0] if m else ()
        rank = len(a.dims)
        if 0 < rank < len(shape):
            shape = (*shape[: rank - 1], math.prod(shape[rank - 1 :]))
        for dim, size in zip(a.dims, shape, strict=False):
            if dim.isidentifier() and dim not in seed.params.get("bench", {}):
                values.setdefault(dim, int(size))
    return values


def _test_scale(task: Task, seed: Seed) -> tuple[str, dict[str, int]]:
    """The smallest-step scale (of 1/2, 1/4, ...) under which the kernel's largest tensor has at
    most `TEST_ELEMENTS` elements, and the seed's parameters there."""
    factor = 1.0
    for _ in range(16):
        name = f"{SCALE_PREFIX}{factor:g}"
        traced = trace(task, name)
        sizes = [_numel(m[0]) for n in traced.graph.nodes if (m := meta(n)) is not None]
        if max(sizes, default=0) <= TEST_ELEMENTS or factor < 1e-4:
            break
        factor /= 2
    test = dict(seed.params.get("bench", {}))
    if seed.form in ("flat", "pool", "grouped-conv", "stats"):
        test["BLOCK"] = 256
    elif seed.form == "transposed-conv":  # many loads an output: fewer, wider programs for the interpreters
        test["BLOCK"] = 1024
    elif seed.form == "gemm":
        test.update(BM=16 if "where N <= BN" in seed.text else 32, BN=32, BK=16)
    return name, test


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def seed_task(problem: str | Path, folder: str | Path, mode: str | None = None) -> Made:
    """Write the task folder of a problem file: reference.py, seed.kir and task.toml (`mode`:
    as `seed_of`)."""
    made = seed_of(problem, mode)
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(problem, out / "reference.py")
    (out / "seed.kir").write_text(made.seed.text)
    (out / "task.toml").write_text(task_toml(made))
    made.folder = out
    made.task = load_task(out)
    return made


def task_toml(made: Made) -> str:
    seed, task = made.seed, made.task
    doc = (task.module.__doc__ or "").strip().splitlines()
    lines = [
        f"description = {_q(doc[0] if doc else task.name)}",
        f'mode = "{task.mode}"' + ("  # as KernelBench runs the file" if task.mode == "train" else ""),
        "",
        f"# {made.test_scale}: every size variable of the file scaled down (what the CPU interpreters run)",
        "[presets.test]",
    ]
    lines += [f"{k} = {v!r}" for k, v in task.preset(made.test_scale).variables.items()]
    lines += ["", "# the file's own sizes", "[presets.bench]", "", "[bind]"]
    lines += [f"{a.name} = {_q(a.source)}" for a in seed.args]
    for preset in ("test", "bench"):
        lines += ["", f"# the kernel's shape symbols at {preset} (the cost model's shapes)", f"[shapes.{preset}]"]
        lines += [f"{k} = {v}" for k, v in made.shapes.get(preset, {}).items()]
    lines += ["", "[programs.seed]", 'file = "seed.kir"']
    for preset in ("test", "bench"):
        params = seed.params.get(preset, {})
        lines.append(f"params.{preset} = {{ {', '.join(f'{k} = {v}' for k, v in params.items())} }}")
    return "\n".join(lines) + "\n"


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
