"""A KIR program back out as a KernelBench solution: a `ModelNew` file that launches the program
lowered to Triton.

The file holds the problem's own source (so `ModelNew(Model)` makes the same parameters in the
same order, as KernelBench's check assumes), the Triton kernel that `lowering.entry.lower`
writes, and a `forward` that binds every kernel argument as the task's `[bind]` says (an input,
a parameter of the model, an output), views a tensor of higher rank as the argument's rank (its
trailing dimensions merged, as the harness binds it), reads the shape symbols from the tensors,
checks the program's `where` constraints, and launches on the grid. The outputs' shapes and
dtypes are the reference's, found once per input shape by running `Model.forward` on the meta
device. Without a CUDA device the file runs its kernel under Triton's interpreter.
"""

from __future__ import annotations

from pathlib import Path

import kir.symexpr as sx
from agent.tasks.task import Task
from kir.dialect.types import shape_of
from kir.program import Program
from lowering.entry import lower

_HEAD = '''"""KernelBench solution of {problem}, written by `kir solve`: the KIR program below, lowered to
Triton, launched by `ModelNew.forward`. The problem's own source comes first, unchanged."""

import contextlib
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # no GPU: Triton's interpreter runs the kernel
'''

_TAIL = '''

# ---- what ModelNew launches ---------------------------------------------------------------------

_KIR = {kir!r}

try:  # Triton's interpreter has gaps that KIR's runtime patches (lowering/targets/triton/runtime.py)
    from lowering.targets.triton.runtime import interpreter_mode as _interpreting
except ImportError:
    import contextlib

    _interpreting = contextlib.nullcontext


def _view(t, rank):
    """A tensor as a kernel argument of `rank` dimensions: its trailing dimensions merged."""
    t = t.contiguous()
    if t.dim() == 0 and rank == 1:
        return t.reshape(1)  # a scalar output: a 1-element view
    return t.flatten(rank - 1) if 0 < rank < t.dim() else t


class ModelNew(Model):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._shapes = {{}}

    def _outputs(self, inputs):
        """The reference's output shapes and dtypes for these input shapes (Model.forward on the
        meta device, once per shape)."""
        import copy

        key = tuple((tuple(x.shape), x.dtype) if torch.is_tensor(x) else x for x in inputs)
        if key not in self._shapes:
            model = copy.deepcopy(self).to("meta")
            metas = [torch.empty_like(x, device="meta") if torch.is_tensor(x) else x for x in inputs]
            out = Model.forward(model, *metas)
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            self._shapes[key] = [(tuple(o.shape), o.dtype) for o in outs]
        return self._shapes[key]

    def forward(self, *inputs):
        device = next((x.device for x in inputs if torch.is_tensor(x)), None)
        outs = [torch.empty(s, dtype=d, device=device) for s, d in self._outputs(inputs)]
        named = {{}}
{bindings}
        symbols = {{}}
        for arg, dim, name in {symbols!r}:
            symbols.setdefault(name, named[arg].shape[dim])
{checks}
{scratch}
        with _interpreting() if os.environ.get("TRITON_INTERPRET") == "1" else contextlib.nullcontext():
{launches}
        return outs[0] if len(outs) == 1 else tuple(outs)
'''


def _py(expr: sx.SymExpr, env: str) -> str:
    """A static expression as Python over `symbols` (shape symbols) and constants (parameters
    bound already)."""
    if isinstance(expr, sx.Int):
        return str(expr.value)
    if isinstance(expr, sx.Sym):
        return f"{env}[{expr.name!r}]"
    assert isinstance(expr, sx.Bin), expr
    a, b = _py(expr.lhs, env), _py(expr.rhs, env)
    if expr.op == "cdiv":
        return f"(({a}) + ({b}) - 1) // ({b})"
    if expr.op in ("min", "max"):
        return f"{expr.op}({a}, {b})"
    if expr.op == "/":
        return f"int(({a}) / ({b}))"  # truncating toward zero, as KIR divides
    return f"({a} {expr.op} {b})"


def write_solution(task: Task, program: Program, problem: Path, out: Path) -> Path:
    """Write the `ModelNew` file of `program` (its parameters bound) for the task made from
    `problem` (`agent.frontend.seed_task`), whose `[bind]` says what each argument is. A program
    of several kernels launches them in order, its scratch buffers allocated in `forward`."""
    env = {**program.params}
    const = {k: sx.Int(v) for k, v in env.items()}
    scratch = {sc.name: sc for sc in program.scratch}
    bindings, symbols, checks, allocs, launches, sources = [], [], [], [], [], []
    bound: set[str] = set()
    for k in program.kernels():
        for name, arg in k.kernel.args:
            if name in bound or name in scratch:
                continue
            bound.add(name)
            b = task.bind[name]
            dims = shape_of(arg.type)
            if b.kind == "inputs":
                what = f"inputs[{b.index}]"
            elif b.kind == "outputs":
                what = f"outs[{b.index}]"
            else:
                what = "self." + str(b.index)
            bindings.append(f"        named[{name!r}] = _view({what}, {len(dims)})")
            for d, expr in enumerate(dims):
                if isinstance(expr, sx.Sym) and expr.name not in env:
                    symbols.append((name, d, expr.name))
    for sc in program.scratch:
        sizes = ", ".join(_py(d.substitute(const), "symbols") for d in sc.shape)
        allocs.append(
            f"        named[{sc.name!r}] = torch.empty(({sizes},), dtype=torch.{_TORCH[sc.dtype]}, device=device)"
        )
    for k in program.kernels():
        own = {n: v for n, v in env.items() if n in k.params}
        lowered = lower(k, "triton", {})
        sources.append("\n".join(line for line in lowered.source.splitlines() if not line.startswith('"""')))
        for w in k.kernel.where.data:
            expr = w.data.substitute(const)
            checks.append(
                f"        assert {_py(expr, 'symbols')}, "
                f"{('the kernel needs ' + str(w.data) + ' (its parameters: ' + str(own) + ')')!r}"
            )
        grid = ", ".join(_py(g.data.substitute(const), "symbols") for g in k.kernel.grid.data)
        args = ", ".join(f"named[{name!r}]" for name, _ in k.kernel.args)
        launches.append(
            f"            {lowered.entry}[({grid},)]({args}, *[symbols[s] for s in {list(lowered.shape_symbols)!r}], "
            f"num_warps={lowered.num_warps}, **{dict(lowered.options.get('constexprs', {}))!r})"
        )
    text = _HEAD.format(problem=problem.name)
    text += "\n# ---- the problem ---------------------------------------------------------------------------\n\n"
    text += problem.read_text()
    text += "\n\n# ---- the kernel: lowering.emit.triton of the KIR program in _KIR ----------------------------\n\n"
    text += "\n\n".join(sources)
    text += _TAIL.format(
        kir=program.text(),
        bindings="\n".join(bindings),
        symbols=symbols,
        checks="\n".join(checks),
        scratch="\n".join(allocs),
        launches="\n".join(launches),
    )
    out.write_text(text)
    return out


_TORCH = {
    "bf16": "bfloat16", "f16": "float16", "f32": "float32", "f64": "float64", "i1": "bool", "i8": "int8",
    "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
}  # fmt: skip
