"""KIR programs as candidates: bind a program's arguments to an instance's tensors and launch
it through one backend.

| backend | runs on | how |
| --- | --- | --- |
| `interp` | CPU | the reference interpreter (`kir.interp.run`) |
| `triton-interp` | CPU | the Triton lowering under `TRITON_INTERPRET=1` |
| `mtia-sim` | CPU | the simulated accelerator (`lowering.runtime_mtia`): g++-built, with simulated cycles |
| `triton`, `gluon`, `cuda` | GPU | the lowering's launchers over torch tensors |

Every backend writes into the tensors the harness gives it: the CPU backends copy every
argument back after the run (as a kernel writing memory would), so an input that the program
mutates is seen. A binding that does not fit (a dtype, a rank, a `where` constraint) is a
`harness.bind` diagnostic at the kernel argument.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kir.diagnostics import Diagnostic, KirError
from kir.dialect.types import shape_of
from kir.dtypes import DTYPES
from kir.program import Program
from lowering.launch import bind_shapes

CPU_BACKENDS = ("interp", "triton-interp", "mtia-sim")
GPU_BACKENDS = ("triton", "gluon", "cuda")
BACKENDS = CPU_BACKENDS + GPU_BACKENDS

_TORCH_OF = {
    "bf16": "bfloat16", "f16": "float16", "f32": "float32", "f64": "float64", "i1": "bool", "i8": "int8",
    "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8", "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2",
}  # fmt: skip


def _bind_error(program: Program, name: str | None, message: str, hint: str = "") -> KirError:
    span = program.arg_spans.get(name) if name else None
    return KirError(Diagnostic("harness.bind", "error", span or program.span(), message, hint))


def kernel_args(program: Program) -> list[tuple[str, Any]]:
    return [(name, arg.type) for name, arg in program.kernel.args]


def bind(program: Program, task, inputs: list, outputs: list, model) -> dict[str, Any]:
    """The tensor of every kernel argument: from the task's `[bind]` table, or by position (the
    inputs in order, then the outputs)."""
    args = kernel_args(program)
    tensors = [x for x in inputs if hasattr(x, "data_ptr")]
    result: dict[str, Any] = {}
    if task.bind:
        for name, _ in args:
            b = task.bind.get(name)
            if b is None:
                raise _bind_error(
                    program, name, f"task `{task.name}` does not say what `{name}` is", "add it to [bind] in task.toml"
                )
            if b.kind == "model":
                obj = model
                for part in str(b.index).split("."):
                    obj = getattr(obj, part, None)
                if obj is None:
                    raise _bind_error(program, name, f"the model has no `{b.index}`")
                result[name] = obj.data if hasattr(obj, "data") else obj
            else:
                pool = inputs if b.kind == "inputs" else outputs
                if int(b.index) >= len(pool):
                    raise _bind_error(
                        program, name, f"`{name}` is bound to {b.kind}[{b.index}], but there are {len(pool)}"
                    )
                result[name] = pool[int(b.index)]
    else:
        ins = [n for n, a in args if not a.is_out]
        outs = [n for n, a in args if a.is_out]
        if len(ins) != len(tensors) or len(outs) != len(outputs):
            raise _bind_error(
                program,
                None,
                f"the kernel takes {len(ins)} inputs and {len(outs)} outputs; the task has {len(tensors)} and {len(outputs)}",
                "say which argument is which in task.toml's [bind]",
            )
        result.update(zip(ins, tensors, strict=True))
        result.update(zip(outs, outputs, strict=True))
    for name, arg in args:
        t = result[name]
        want = _TORCH_OF[arg.dtype.data]
        if str(t.dtype).removeprefix("torch.") != want:
            raise _bind_error(
                program, name, f"`{name}` is declared {arg.dtype.data} but the task's tensor is {t.dtype}"
            )
        rank = len(shape_of(arg))
        if 0 < rank < t.dim() and t.is_contiguous():
            # a contiguous tensor binds to an argument of lower rank as the view that merges its
            # trailing dimensions (w [C, C, KW] as w [C, C * KW]): the same memory, no copy
            t = result[name] = t.flatten(rank - 1)
        if t.dim() != rank:
            raise _bind_error(
                program,
                name,
                f"`{name}` has {len(shape_of(arg))} dimensions; the task's tensor has shape {list(t.shape)}",
            )
    return result


def to_numpy(t) -> np.ndarray:
    """A CPU torch tensor as a numpy array of the KIR dtype (bf16 and fp8 through ml_dtypes)."""
    import torch

    kir = {v: k for k, v in _TORCH_OF.items()}[str(t.dtype).removeprefix("torch.")]
    raw_dtype = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    t = t.detach().contiguous()
    if t.dtype == torch.bool:
        return t.numpy().copy()
    return t.view(raw_dtype).numpy().view(DTYPES[kir].numpy).copy()


def from_numpy(dst, arr: np.ndarray) -> None:
    """Write a numpy array (of the tensor's KIR dtype) into a CPU torch tensor."""
    import torch

    if dst.dtype == torch.bool:
        dst.copy_(torch.from_numpy(np.ascontiguousarray(arr)))
        return
    raw_dtype = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[dst.element_size()]
    raw = np.ascontiguousarray(arr).view({1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}[dst.element_size()])
    dst.view(raw_dtype).copy_(torch.from_numpy(raw.copy()).reshape(dst.shape))


@dataclass
class KirCandidate:
    """A KIR program on one backend, with its compile-time parameters."""

    program: Program
    backend: str
    params: dict[str, int] = field(default_factory=dict)
    _cache: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise KirError(
                Diagnostic(
                    "harness.backend", "error", None, f"no backend `{self.backend}`", f"one of {', '.join(BACKENDS)}"
                )
            )

    def lowered(self):
        if "lowered" not in self._cache:
            from lowering.emit.base import lower

            to = "triton" if self.backend == "triton-interp" else self.backend
            self._cache["lowered"] = lower(self.program, to, self.params)
        return self._cache["lowered"]

    def prepare(self) -> None:
        """Lower and compile ahead of the first launch (a compile error is raised here)."""
        if self.backend == "interp":
            return
        lowered = self.lowered()
        if self.backend == "cuda":
            from lowering.runtime_cuda import build

            self._cache["cuda"] = build(lowered)
        if self.backend == "mtia-sim":
            from lowering.runtime_mtia import build

            build(lowered)

    def launcher(self, tensors: dict[str, Any]) -> Callable[[], None]:
        """A function that runs the kernel once on these tensors (writing its outputs)."""
        symbols = bind_shapes(self.program, self.params, tensors)
        if self.backend in CPU_BACKENDS:
            return lambda: self._run_cpu(tensors)
        self.prepare()
        lowered = self.lowered()
        if self.backend == "triton":
            from lowering.runtime_triton import torch_launcher

            return torch_launcher(lowered, tensors)
        if self.backend == "gluon":
            from lowering.runtime_gluon import GluonLaunch

            return GluonLaunch.from_torch(lowered, tensors)
        kernel = self._cache["cuda"]
        return lambda: kernel.launch(tensors, symbols)

    def _run_cpu(self, tensors: dict[str, Any]) -> None:
        arrays = {name: to_numpy(t) for name, t in tensors.items()}
        if self.backend == "interp":
            from kir.interp import run

            out = run(self.program, arrays, self.params)
        elif self.backend == "mtia-sim":
            from lowering.runtime_mtia import run_lowered

            result = run_lowered(self.lowered(), arrays)
            out = result.outputs
            self._cache["cycles"] = result.cycles  # the simulated time of the last run
        else:
            from lowering.runtime_triton import run_lowered

            out = run_lowered(self.lowered(), arrays, interpret=True)
        for name, t in tensors.items():
            from_numpy(t, out[name])
