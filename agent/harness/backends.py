"""KIR programs as candidates: bind a program's arguments to an instance's tensors and launch
it through one backend.

A backend is a runtime of a target (`lowering.targets`: `kir run -b` takes every runtime of
every target folder): `interp` (the reference interpreter), `triton-interp` (Triton under
`TRITON_INTERPRET=1`) and `mtia-sim` (the simulator, with simulated cycles) run on the CPU;
`triton`, `gluon` and `cuda` launch on a CUDA device over torch tensors. `KirCandidate` asks
the target to lower the program and the runtime to prepare and run it.

Every backend writes into the tensors the harness gives it: the CPU backends copy every
argument back after the run (as a kernel writing memory would), so an input that the program
mutates is seen. A binding that does not fit (a dtype, a rank, a `where` constraint) is a
`harness.bind` diagnostic at the kernel argument; an `out` argument bound to an input or to a
model parameter is `harness.bind-out`. The checker binds (`bind`, in its own process); the
candidate's process receives every argument as bytes and launches (`KirCandidate.launcher`).
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
from lowering.entry import lower
from lowering.launch import bind_shapes, scratch_sizes
from lowering.targets import runtime as runtime_of

_TORCH_OF = {
    "bf16": "bfloat16", "f16": "float16", "f32": "float32", "f64": "float64", "i1": "bool", "i8": "int8",
    "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8", "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2",
}  # fmt: skip


def _bind_error(program: Program, name: str | None, message: str, hint: str = "") -> KirError:
    span = program.arg_spans.get(name) if name else None
    return KirError(Diagnostic("harness.bind", "error", span or program.span(), message, hint))


def kernel_args(program: Program) -> list[tuple[str, Any]]:
    """The arguments the task binds: a kernel's, or in a program of several kernels every name
    any kernel takes but the scratch buffers (the launcher allocates those), once, with its
    type in the first kernel that writes it, else the first that takes it."""
    if not program.is_multi:
        return [(name, arg.type) for name, arg in program.kernel.args]
    scratch = {s.name for s in program.scratch}
    found: dict[str, Any] = {}
    for k in program.kernels():
        for name, arg in k.kernel.args:
            t: Any = arg.type  # a GlobalType: every kernel argument is a global tensor
            if name not in scratch and (name not in found or (t.is_out and not found[name].is_out)):
                found[name] = t
    return list(found.items())


def sources(program: Program, task, n_inputs: int, n_outputs: int) -> dict[str, tuple[str, int | str]]:
    """Where every kernel argument's tensor comes from: ("inputs", i), ("outputs", i) or
    ("model", "weight.path"), from the task's `[bind]` table or by position (the input tensors
    in order, then the outputs). An `out` argument bound to an input or to a parameter is
    refused (`harness.bind-out`): a kernel may write its outputs only, and a parameter written
    would change the model the reference is computed from."""
    args = kernel_args(program)
    found: dict[str, tuple[str, int | str]] = {}
    if task.bind:
        for name, _ in args:
            b = task.bind.get(name)
            if b is None:
                raise _bind_error(
                    program, name, f"task `{task.name}` does not say what `{name}` is", "add it to [bind] in task.toml"
                )
            if b.kind != "model":
                pool = n_inputs if b.kind == "inputs" else n_outputs
                if int(b.index) >= pool:
                    raise _bind_error(program, name, f"`{name}` is bound to {b.kind}[{b.index}], but there are {pool}")
            found[name] = (b.kind, b.index)
    else:
        ins = [n for n, a in args if not a.is_out]
        outs = [n for n, a in args if a.is_out]
        if len(ins) != n_inputs or len(outs) != n_outputs:
            raise _bind_error(
                program,
                None,
                f"the kernel takes {len(ins)} inputs and {len(outs)} outputs; the task has {n_inputs} and {n_outputs}",
                "say which argument is which in task.toml's [bind]",
            )
        found.update((n, ("inputs", i)) for i, n in enumerate(ins))
        found.update((n, ("outputs", i)) for i, n in enumerate(outs))
    for name, t in args:
        kind, index = found[name]
        if t.is_out and kind != "outputs":
            what = f"the model's `{index}`" if kind == "model" else f"input {index}"
            span = program.arg_spans.get(name) or program.span()
            raise KirError(
                Diagnostic(
                    "harness.bind-out",
                    "error",
                    span,
                    f"`{name}` is declared `out` but is bound to {what}: a kernel may write only the task's outputs",
                    "declare it without `out`",
                )  # fmt: skip
            )
    return found


def bind(program: Program, task, inputs: list, outputs: list, model) -> dict[str, Any]:
    """The tensor of every kernel argument (see `sources`)."""
    args = kernel_args(program)
    tensors = [x for x in inputs if hasattr(x, "data_ptr")]
    result: dict[str, Any] = {}
    pools = {"inputs": inputs if task.bind else tensors, "outputs": outputs}
    for name, (kind, index) in sources(program, task, len(pools["inputs"]), len(outputs)).items():
        if kind == "model":
            obj = model
            for part in str(index).split("."):
                obj = getattr(obj, part, None)
            if obj is None:
                raise _bind_error(program, name, f"the model has no `{index}`")
            result[name] = obj.data if hasattr(obj, "data") else obj
        else:
            result[name] = pools[kind][int(index)]
    for name, arg in args:
        t = result[name]
        want = _TORCH_OF[arg.dtype.data]
        if str(t.dtype).removeprefix("torch.") != want:
            raise _bind_error(
                program, name, f"`{name}` is declared {arg.dtype.data} but the task's tensor is {t.dtype}"
            )
        rank = len(shape_of(arg))
        if t.dim() == 0 and rank == 1:
            t = result[name] = t.reshape(1)  # a scalar output (a loss) as a 1-element argument: a view
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
    """A KIR program on one backend (a target's runtime), with its compile-time parameters."""

    program: Program
    backend: str
    params: dict[str, int] = field(default_factory=dict)
    _cache: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        target, runtime = runtime_of(self.backend)  # harness.backend, with the nearest name
        self._cache.update(target=target, runtime=runtime)

    @property
    def device(self) -> str:
        """What the backend runs on: "cpu" or "cuda"."""
        return self._cache["runtime"].device

    def lowered(self):
        """The target's lowering of the program (None for a target that runs it as it is)."""
        if "lowered" not in self._cache:
            target = self._cache["target"]
            self._cache["lowered"] = lower(self.program, target.name, self.params) if target.emitter else None
        return self._cache["lowered"]

    def _runtime(self):
        return self._cache["target"].runtime(self.backend)

    def prepare(self) -> None:
        """Lower and compile ahead of the first launch (a compile error is raised here)."""
        if self.program.is_multi:
            for k in self.kernels():
                if k.device != "cpu":
                    k.prepare()
            return
        self._runtime().prepare(self.lowered())

    def kernels(self) -> list[KirCandidate]:
        """A program of several kernels: a candidate for each, with the parameters it declares."""
        if "kernels" not in self._cache:
            self._cache["kernels"] = [
                KirCandidate(k, self.backend, {n: v for n, v in self.params.items() if n in k.params})
                for k in self.program.kernels()
            ]
        return self._cache["kernels"]

    def launcher(self, tensors: dict[str, Any]) -> Callable[[], None]:
        """A function that runs the kernel once on these tensors (writing its outputs); for
        several kernels, each in order on the tensors it takes and the scratch buffers, which
        are allocated here (filled with NaN or -1, so that a read of what no kernel wrote shows)."""
        if self.program.is_multi:
            return self._launch_kernels(tensors)
        symbols = bind_shapes(self.program, self.params, tensors)
        if self.device == "cpu":
            return lambda: self._run_cpu(tensors)
        self.prepare()
        return self._runtime().launcher(self.lowered(), tensors, symbols)

    def _launch_kernels(self, tensors: dict[str, Any]) -> Callable[[], None]:
        import torch

        device = next((t.device for t in tensors.values() if hasattr(t, "device")), "cpu")
        every = dict(tensors)
        for name, sizes in scratch_sizes(self.program, self.params, tensors).items():
            dtype = getattr(torch, _TORCH_OF[next(s.dtype for s in self.program.scratch if s.name == name)])
            buf = torch.empty(sizes, dtype=dtype, device=device)
            buf.fill_(float("nan") if buf.is_floating_point() else -1)
            every[name] = buf
        launches = []
        for k in self.kernels():
            launches.append(k.launcher({name: every[name] for name, _ in k.program.kernel.args}))

        def run() -> None:
            for launch in launches:
                launch()
            cycles = [k._cache.get("cycles") for k in self.kernels()]
            if all(isinstance(c, int) for c in cycles):
                self._cache["cycles"] = sum(cycles)  # mtia-sim: one launch after another

        return run

    def _run_cpu(self, tensors: dict[str, Any]) -> None:
        arrays = {name: to_numpy(t) for name, t in tensors.items()}
        out, cycles = self._runtime().run(self.program, self.params, self.lowered(), arrays)
        if cycles is not None:
            self._cache["cycles"] = cycles  # the simulated time of the last run
        for name, t in tensors.items():
            from_numpy(t, out[name])
