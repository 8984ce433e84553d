"""Launch a Gluon lowering on a CUDA GPU (sm_90), with the interface of `kir.interp.run`.

    from lowering.targets.gluon.runtime import run_gluon
    out = run_gluon(program, {"a": a, "b": b}, params={"BN": 256})
    c = out["c"]

`run_gluon` binds the arguments exactly as the interpreter does (`kir.interp.launch.bind`:
shape symbols from the arrays, every dimension and `where` constraint checked, missing `out`
arguments filled with poison), copies the arrays to the GPU, builds one host-side TMA
`TensorDescriptor` per (argument, box) the kernel takes (over the rows of a tensor of more than
two dimensions: `row_view`), launches `kernel[grid](...)` with the
default partition's `num_warps`, and returns every tensor argument after the run.

`GluonLaunch.from_torch` does the same on torch tensors already on the GPU and returns a
callable that only launches: what a timing loop wants.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from kir import symexpr as sx
from kir.diagnostics import KirError
from kir.program import Program
from lowering.emit.base import Lowered
from lowering.entry import lower
from lowering.report import shared_memory_diagnostic

# numpy carriers that torch cannot take directly travel as same-width integers.
_VIA = {"bf16": ("int16", "bfloat16"), "f8e4m3": ("uint8", "float8_e4m3fn"), "f8e5m2": ("uint8", "float8_e5m2")}
_TORCH = {
    "i1": "bool",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
    "f16": "float16",
    "f32": "float32",
    "f64": "float64",
}


def to_torch(arr: np.ndarray, dtype: str, device: str = "cuda"):
    import torch

    if dtype in _VIA:
        carrier, target = _VIA[dtype]
        host = torch.from_numpy(np.ascontiguousarray(arr).view(np.dtype(carrier)))
        out = torch.empty_strided(arr.shape, _elem_strides(arr), dtype=getattr(torch, target), device=device)
        out.copy_(host.view(getattr(torch, target)).to(device))
        return out
    out = torch.empty_strided(arr.shape, _elem_strides(arr), dtype=getattr(torch, _TORCH[dtype]), device=device)
    out.copy_(torch.from_numpy(np.ascontiguousarray(arr)).to(device))
    return out


def from_torch(t, dtype: str) -> np.ndarray:
    from kir.dtypes import DTYPES

    host = t.detach().contiguous().cpu()
    if dtype in _VIA:
        import torch

        return host.view(getattr(torch, _VIA[dtype][0])).numpy().view(DTYPES[dtype].numpy)
    return host.numpy()


def _elem_strides(arr: np.ndarray) -> tuple[int, ...]:
    if arr.flags.c_contiguous:
        return tuple(int(np.prod(arr.shape[i + 1 :], dtype=np.int64)) for i in range(arr.ndim))
    return tuple(s // arr.itemsize for s in arr.strides)


def row_view(t, name: str = "tensor") -> tuple[list[int], list[int]]:
    """The shape and strides of the 2-D descriptor over `t`: `t` itself when 2-D; for more
    dimensions, its rows, every dimension but the last merged into one (the kernel addresses a
    box `x[b, h, r0 : r0 + BM, c0 : c0 + BN]` at row `(b * H + h) * S + r0`). That view is only
    the tensor when each leading dimension's stride is the next one's stride times its extent."""
    shape, strides = list(t.shape), list(t.stride())
    if len(shape) <= 2:
        return shape, strides
    row_stride = strides[-2]
    for i in range(len(shape) - 3, -1, -1):
        row_stride *= shape[i + 1]
        if strides[i] != row_stride and shape[i] > 1:  # the stride of an extent of 1 is never used
            raise ValueError(
                f"the gluon kernel reads `{name}` (shape {shape}, strides {strides}) through a TMA "
                "descriptor over its rows, which needs each leading dimension's stride to be the "
                f"next one's times its extent: dimension {i} has stride {strides[i]}, not {row_stride}; "
                "pass a contiguous tensor (.contiguous())"
            )
    rows = math.prod(shape[:-1])
    if rows >= 1 << 31:  # TMA coordinates are signed 32-bit
        raise ValueError(f"`{name}` has {rows} rows: a TMA descriptor over its rows takes fewer than 2**31")
    return [rows, shape[-1]], [strides[-2], strides[-1]]


@dataclass
class GluonLaunch:
    lowered: Lowered
    kernel: Any  # the @gluon.jit entry (Triton ships no types)
    args: list
    grid: tuple[int, ...]
    tensors: dict  # KIR argument name -> torch tensor

    def __call__(self) -> None:
        from triton.runtime.errors import OutOfResources

        try:
            self.kernel[self.grid](*self.args, num_warps=self.lowered.num_warps)
        except OutOfResources as err:  # compiled at the first launch: the GPU's limit, located
            if err.name != "shared memory":
                raise
            raise KirError(
                shared_memory_diagnostic(self.lowered, err.required, err.limit, "a block of this GPU")
            ) from None

    @classmethod
    def from_torch(cls, lowered: Lowered, tensors: dict, symbols: dict[str, int] | None = None) -> GluonLaunch:
        """A launch over torch tensors on the GPU (every argument of the kernel given)."""
        from triton.experimental.gluon import language as gl
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

        from lowering.launch import bind_shapes

        from .compile import load_module

        if symbols is None:  # a caller that passes symbols has bound them (run_gluon: kir.interp's bind)
            symbols = bind_shapes(lowered.program, lowered.params, tensors)
        env = {**lowered.params, **symbols}
        kernel = getattr(load_module(lowered.source), lowered.entry)
        args: list = []
        for p in lowered.options["launch"]:
            if p["kind"] == "desc":
                t = tensors[p["arg"]]
                layout = gl.NVMMASharedLayout(p["swizzle"], p["bits"], len(p["box"]))
                shape, strides = row_view(t, p["arg"])
                args.append(TensorDescriptor(t, shape, strides, list(p["box"]), layout))
            elif p["kind"] == "ptr":
                args.append(tensors[p["arg"]])
            else:
                args.append(int(symbols[p["arg"]]))
        grid = tuple(int(sx.fold(g).evaluate(env)) for g in lowered.grid)
        return cls(lowered, kernel, args, grid, dict(tensors))


def run_gluon(
    program: Program | Lowered,
    inputs: dict[str, np.ndarray],
    params: dict[str, int] | None = None,
    *,
    device: str = "cuda",
) -> dict[str, np.ndarray]:
    """Run a program through the gluon backend on the GPU: `kir.interp.run`'s interface."""
    import torch

    from kir.interp.errors import InterpError
    from kir.interp.launch import bind

    lowered = program if isinstance(program, Lowered) else lower(program, "gluon", params)
    kernel_op = lowered.program.kernel
    try:
        bound = bind(kernel_op, dict(inputs), dict(lowered.params), 60.0)
    except InterpError as err:
        raise KirError(err.diagnostic) from None
    tensors = {}
    for info in lowered.args:
        tensors[info.name] = to_torch(bound.tensors[info.name].data, info.dtype, device)
    symbols = {s: bound.symbols[s] for s in lowered.shape_symbols}
    launch = GluonLaunch.from_torch(lowered, tensors, symbols)
    launch()
    torch.cuda.synchronize()
    return {info.name: from_torch(tensors[info.name], info.dtype) for info in lowered.args}


def time_launch(
    fn: Callable[[], None], *, warmup: int = 5, reps: int = 50, flush_bytes: int = 256 << 20
) -> list[float]:
    """Milliseconds of each of `reps` runs of `fn`, timed with CUDA events around the launch
    alone, the L2 flushed before each run by writing a `flush_bytes` buffer."""
    import torch

    flush = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


class GluonRuntime:
    """`kir run -b gluon` (the harness's interface, lowering.targets): the kernel launched on
    torch CUDA tensors."""

    def prepare(self, lowered: Lowered) -> None:
        """Nothing ahead of the launch: the module is compiled at the first one."""

    def launcher(self, lowered: Lowered, tensors: dict, symbols: dict[str, int]) -> GluonLaunch:
        return GluonLaunch.from_torch(lowered, tensors)
