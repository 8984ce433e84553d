"""Check the KernelBench-format problem files in this folder.

For each problem file (CATEGORY_NN_name.py):

1. static rules: the top-level int size variables that are "big" (>= 64) are multiples of 16;
2. real sizes, without allocating: the file is imported by path and Model / get_inputs() / forward
   run on the meta device; the largest input must be at least 4 MiB, every input, output,
   parameter and buffer at most 256 MiB, and all of them together at most 1 GiB;
3. a reduced run: the source is re-executed with every top-level int size variable >= 64 replaced
   by 32 (derived values are recomputed), then Model(*get_init_inputs()) is built with
   torch.manual_seed(0) and forward is called on get_inputs(); the result must be a finite tensor.

Usage: python benchmarks/kernelbench/check_corpus.py [NAME_SUBSTRING ...]
Exits non-zero if any file fails.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import traceback
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
PROBLEM_RE = re.compile(r"^[a-z]+_\d\d_[a-z0-9_]+\.py$")
REDUCE_THRESHOLD = 64
REDUCED_VALUE = 32
MIB = 1 << 20
MIN_LARGEST_INPUT_BYTES = 4 * MIB
MAX_TENSOR_BYTES = 256 * MIB
MAX_TOTAL_BYTES = 1024 * MIB


def problem_files(filters: list[str]) -> list[Path]:
    files = sorted(p for p in HERE.glob("*.py") if PROBLEM_RE.match(p.name))
    if filters:
        files = [p for p in files if any(f in p.name for f in filters)]
    return files


def _big_int_assign(node: ast.stmt) -> bool:
    """A top-level `name = <int literal>` with the literal >= REDUCE_THRESHOLD."""
    return (
        isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and type(node.value.value) is int
        and node.value.value >= REDUCE_THRESHOLD
    )


def check_static(tree: ast.Module) -> list[str]:
    errors = []
    for node in tree.body:
        if _big_int_assign(node):
            assert isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            if node.value.value % 16:
                names = ", ".join(ast.unparse(t) for t in node.targets)
                errors.append(f"size variable {names} = {node.value.value} is not a multiple of 16")
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not any(isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name for n in tree.body):
            errors.append(f"missing top-level {name}")
    return errors


def _tensors(obj: object) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors(o)]
    return []


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def check_real_sizes(path: Path) -> list[str]:
    spec = importlib.util.spec_from_file_location(f"kernelbench_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.device("meta"):
        model = mod.Model(*mod.get_init_inputs())
        inputs = mod.get_inputs()
        out = model(*inputs)
    errors = []
    in_tensors = _tensors(inputs)
    if not in_tensors:
        return ["get_inputs() returns no tensor"]
    largest = max(_nbytes(t) for t in in_tensors)
    if largest < MIN_LARGEST_INPUT_BYTES:
        errors.append(f"largest input is {largest / MIB:.2f} MiB < {MIN_LARGEST_INPUT_BYTES // MIB} MiB")
    named = [(f"input {i} {tuple(t.shape)}", t) for i, t in enumerate(in_tensors)]
    named += [(f"output {tuple(t.shape)}", t) for t in _tensors(out)]
    named += [(f"parameter {n} {tuple(t.shape)}", t) for n, t in model.named_parameters()]
    named += [(f"buffer {n} {tuple(t.shape)}", t) for n, t in model.named_buffers()]
    for what, t in named:
        if _nbytes(t) > MAX_TENSOR_BYTES:
            errors.append(f"{what} is {_nbytes(t) / MIB:.1f} MiB > {MAX_TENSOR_BYTES // MIB} MiB")
    total = sum(_nbytes(t) for _, t in named)
    if total > MAX_TOTAL_BYTES:
        errors.append(f"inputs, output and weights total {total / MIB:.1f} MiB > {MAX_TOTAL_BYTES // MIB} MiB")
    return errors


def reduced_module(source: str, path: Path) -> dict:
    tree = ast.parse(source, filename=str(path))
    for node in tree.body:
        if _big_int_assign(node):
            assert isinstance(node, ast.Assign)
            node.value = ast.copy_location(ast.Constant(REDUCED_VALUE), node.value)
    ast.fix_missing_locations(tree)
    namespace: dict = {"__name__": f"kernelbench_reduced_{path.stem}", "__file__": str(path)}
    exec(compile(tree, str(path), "exec"), namespace)
    return namespace


def check_reduced_run(path: Path, source: str) -> list[str]:
    ns = reduced_module(source, path)
    torch.manual_seed(0)
    model = ns["Model"](*ns["get_init_inputs"]())
    inputs = ns["get_inputs"]()
    with torch.no_grad():
        out = model(*inputs)
    if not isinstance(out, torch.Tensor):
        return [f"forward returned {type(out).__name__}, not a tensor"]
    if out.is_floating_point() and not torch.isfinite(out).all():
        return ["forward returned non-finite values at reduced sizes"]
    return []


def check_file(path: Path) -> list[str]:
    source = path.read_text()
    errors = check_static(ast.parse(source, filename=str(path)))
    for step in (lambda: check_real_sizes(path), lambda: check_reduced_run(path, source)):
        try:
            errors += step()
        except Exception as exc:  # report and go on with the other files
            last = traceback.extract_tb(exc.__traceback__)[-1]
            errors.append(f"{type(exc).__name__}: {exc} (at {Path(last.filename).name}:{last.lineno})")
    return errors


def main(argv: list[str]) -> int:
    files = problem_files(argv)
    if not files:
        print("no problem files found")
        return 1
    failed = 0
    for path in files:
        errors = check_file(path)
        if errors:
            failed += 1
            print(f"FAIL {path.name}")
            for e in errors:
                print(f"    {e}")
        else:
            print(f"ok   {path.name}")
    print(f"{len(files) - failed}/{len(files)} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
