"""Launching the kernels of the Triton backend, on a GPU or under Triton's CPU interpreter.

    from lowering.targets.triton.runtime import run_triton
    out = run_triton(program, {"x": x, "y": y}, params={"BLOCK": 256})   # like kir.interp.run

`run_triton` binds the arguments exactly as the reference interpreter does (`kir.interp.launch.
bind`: shape symbols from the arrays, `where` checked, missing `out` arguments allocated and
filled with poison), converts the numpy arrays (bf16 and fp8 included, strides kept) to torch
tensors, launches the kernel with the grid, `num_warps` and constexprs of the `Lowered`, and
returns every argument as a numpy array of its dtype.

The generated module is written to a cache directory under the hash of its text and imported
from there (`@triton.jit` reads its source from a real file): `$KIR_CACHE_DIR/triton`, by
default `~/.cache/kir/triton`.

**Interpreter mode** (`interpret=True`, the default when no CUDA device is present or
`TRITON_INTERPRET=1` is set) runs the kernel with CPU tensors under Triton's interpreter.
Triton decides between compiling and interpreting when a function is decorated, and its own
library functions (`tl.sum`, `tl.cdiv`, ...) are decorated when triton is imported: an
interpreted kernel can only run in a process that imported triton with `TRITON_INTERPRET=1`.
So interpreted launches go to a worker process started that way (`InterpreterWorker`, one per
process, kept for the next call), unless this process is itself such a process; the caller can
then compile ahead of time and run on a GPU in-process as usual. The jobs crossing to the
worker are plain data (the module's text, the arrays as raw storage with their strides).

The interpreter of Triton 3.6 has gaps that the generated code cannot avoid;
`interpreter_mode()` patches them for the duration of a launch:

- a scalar kernel argument is a 1-element array, and `int()` of it fails with numpy >= 2.3,
  which breaks `range(0, N)`: `__index__` reads the element instead;
- `tl.dot` of bf16 tiles multiplies their raw 16-bit patterns: the operands are widened to f32;
- conversions to bf16 truncate, and to fp8 go wrong out of range (500 -> 256, NaN -> 384):
  conversions from and to bf16 and fp8 go through ml_dtypes, which rounds as KIR does;
- `~x` on an unsigned integer builds all ones as `np.full(1, -1, uint32)`, which numpy 2
  refuses: the ones are made by wrapping instead;
- `libdevice` calls are stubs: `tanh` and `pow` are computed with numpy.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.util
import os
import pickle
import select
import struct
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np

from kir.diagnostics import KirError
from kir.dtypes import DTYPES
from kir.interp.launch import bind
from kir.program import Program
from lowering.emit.base import Lowered
from lowering.entry import lower
from lowering.launch import bind_shapes
from lowering.report import cache_dir as report_cache_dir
from lowering.report import write_if_changed

from .errors import COMPILE_ERRORS, compile_diagnostic, error_line

_MODULES: dict[tuple[str, bool], ModuleType] = {}


def cache_dir() -> Path:
    return report_cache_dir("triton")


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def source_path(source: str, entry: str) -> Path:
    """The file holding a generated module (written once per distinct text)."""
    digest = source_hash(source)
    # a file cut short or overwritten is written again, atomically: parallel test workers may
    # write the same file, and another may be importing it
    return write_if_changed(cache_dir() / f"kir_{entry}_{digest[:16]}.py", source)


def module_path(lowered: Lowered) -> Path:
    return source_path(lowered.source, lowered.entry)


@contextlib.contextmanager
def _interpret_env(on: bool):
    old = os.environ.get("TRITON_INTERPRET")
    if on:
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = old


def load_module(source: str, entry: str, interpret: bool = False) -> ModuleType:
    """Import a generated module (once per text and mode in a process)."""
    key = (source_hash(source), interpret)
    if key not in _MODULES:
        path = source_path(source, entry)
        name = f"kir_triton_{key[0][:16]}{'_interp' if interpret else ''}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        with _interpret_env(interpret):
            spec.loader.exec_module(module)
        _MODULES[key] = module
    return _MODULES[key]


def load_kernel(lowered: Lowered, interpret: bool = False):
    """The `@triton.jit` kernel of a lowered program (a JITFunction unless `interpret`)."""
    return getattr(load_module(lowered.source, lowered.entry, interpret), lowered.entry)


# ---- numpy <-> torch -----------------------------------------------------------------------------


def torch_dtype(dtype: str):
    import torch

    return {
        "i1": torch.bool,
        "i8": torch.int8,
        "i16": torch.int16,
        "i32": torch.int32,
        "i64": torch.int64,
        "u8": torch.uint8,
        "u16": torch.uint16,
        "u32": torch.uint32,
        "u64": torch.uint64,
        "f16": torch.float16,
        "bf16": torch.bfloat16,
        "f32": torch.float32,
        "f64": torch.float64,
        "f8e4m3": torch.float8_e4m3fn,
        "f8e5m2": torch.float8_e5m2,
    }[dtype]


def _raw(nbytes: int):
    """Same-size integer types that numpy and torch both carry: the bytes travel through them."""
    import torch

    return {
        1: (np.int8, torch.int8),
        2: (np.int16, torch.int16),
        4: (np.int32, torch.int32),
        8: (np.int64, torch.int64),
    }[nbytes]


def pack(a: np.ndarray, strides: tuple[int, ...] | None = None) -> tuple[np.ndarray, tuple[int, ...], tuple[int, ...]]:
    """An array's values laid out with the given element strides (row-major when None), as
    (1-D storage of raw integers, shape, strides): what crosses a process boundary (pickling
    keeps values, not strides, and a worker need not know ml_dtypes) and what the kernel
    addresses through the stride symbols it is given."""
    a = np.asarray(a)
    shape = a.shape
    if strides is None:
        strides = tuple(int(np.prod(shape[i + 1 :], dtype=np.int64)) for i in range(len(shape)))
    if any(s < 0 for s in strides):
        raise ValueError(f"negative strides {strides} are not supported")
    span = 1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=True)) if all(shape) else 1
    raw = _raw(a.dtype.itemsize)[0]
    storage = np.zeros(span, dtype=raw)
    view = np.lib.stride_tricks.as_strided(storage, shape, tuple(s * storage.itemsize for s in strides))
    view[...] = a.view(raw)
    return storage, shape, tuple(strides)


def unpack(packed: tuple[np.ndarray, tuple[int, ...], tuple[int, ...]], dtype: str) -> np.ndarray:
    storage, shape, strides = packed
    view = np.lib.stride_tricks.as_strided(storage, shape, tuple(s * storage.itemsize for s in strides))
    return view.view(DTYPES[dtype].numpy)  # as_strided takes no ml_dtypes arrays; a same-size view does


def to_torch(packed: tuple[np.ndarray, tuple[int, ...], tuple[int, ...]], dtype: str, device: str = "cpu"):
    """A torch tensor (a strided view of a 1-D storage) holding a packed array."""
    import torch

    storage, shape, strides = packed
    flat = torch.from_numpy(np.ascontiguousarray(storage)).view(torch_dtype(dtype)).to(device)
    return flat.as_strided(shape, strides)


def to_numpy(
    t, dtype: str, packed: tuple[np.ndarray, tuple[int, ...], tuple[int, ...]]
) -> tuple[np.ndarray, tuple[int, ...], tuple[int, ...]]:
    """The tensor's storage back, packed like `packed`."""
    storage, shape, strides = packed
    _, raw_t = _raw(DTYPES[dtype].nbytes)
    flat = t.detach().as_strided((storage.size,), (1,)).cpu().contiguous()
    return flat.view(raw_t).numpy().copy(), shape, strides


# ---- the interpreter's gaps ---------------------------------------------------------------------


@contextlib.contextmanager
def interpreter_mode():
    """TRITON_INTERPRET=1 and the interpreter fixes listed in the module docstring."""
    import ml_dtypes
    import triton.language as tl
    from triton.language.extra import libdevice
    from triton.runtime import interpreter as ti

    changes: list[tuple[object, str, object]] = []

    def patch(obj, name, value):
        changes.append((obj, name, getattr(obj, name)))
        setattr(obj, name, value)

    original_patch_tensor = ti._patch_lang_tensor

    def patch_lang_tensor(tensor, scope):
        original_patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))

    def widen(handle, dtype):
        if dtype == tl.bfloat16:
            return (handle.data.astype(np.uint16).astype(np.uint32) << 16).view(np.float32)
        return handle.data

    original_dot = ti.InterpreterBuilder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.dtype.scalar == tl.bfloat16 or b.dtype.scalar == tl.bfloat16:
            wa, wb = widen(a, a.dtype.scalar), widen(b, b.dtype.scalar)
            return ti.TensorHandle(np.matmul(wa, wb, dtype=d.data.dtype) + d.data, d.dtype.scalar)
        return original_dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    # Every conversion from or to bf16 and fp8 goes through ml_dtypes (round to nearest even;
    # the interpreter truncates to bf16 and mishandles fp8 out of range).
    narrow = {
        tl.bfloat16: ml_dtypes.bfloat16,
        tl.float8e4nv: ml_dtypes.float8_e4m3fn,
        tl.float8e5: ml_dtypes.float8_e5m2,
    }
    original_fp_to_fp = ti.InterpreterBuilder.create_fp_to_fp
    original_cast = ti.InterpreterBuilder.cast_impl

    def convert(self, src, dst_type, fallback, *rest):
        s, t = src.dtype.scalar, dst_type.scalar
        if s not in narrow and t not in narrow:
            return fallback(self, src, dst_type, *rest)
        value = src.data.view(narrow[s]).astype(np.float32) if s in narrow else src.data
        if t in narrow:
            data = value.astype(np.float32).astype(narrow[t]).view(ti._get_np_dtype(t))
        else:
            data = value.astype(ti._get_np_dtype(t))
        return ti.TensorHandle(data, t)

    def libdevice_numpy(fn):
        def call(*args):
            data = fn(*(np.asarray(a.handle.data) for a in args))
            first = args[0]
            return tl.tensor(ti.TensorHandle(data.astype(first.handle.data.dtype), first.dtype.scalar), first.type)

        return call

    def all_ones(self, type):
        return ti.TensorHandle(np.full(1, -1, dtype=np.int64).astype(ti._get_np_dtype(type)), type.scalar)

    patch(ti, "_patch_lang_tensor", patch_lang_tensor)
    patch(ti.InterpreterBuilder, "get_all_ones_value", all_ones)
    patch(ti.InterpreterBuilder, "create_dot", create_dot)
    patch(
        ti.InterpreterBuilder,
        "create_fp_to_fp",
        lambda self, src, dst_type, rounding: convert(self, src, dst_type, original_fp_to_fp, rounding),
    )
    patch(ti.InterpreterBuilder, "cast_impl", lambda self, src, dst_type: convert(self, src, dst_type, original_cast))
    patch(libdevice, "tanh", libdevice_numpy(np.tanh))
    patch(libdevice, "pow", libdevice_numpy(np.power))
    try:
        with _interpret_env(True), np.errstate(all="ignore"):
            yield
    finally:
        for obj, name, value in reversed(changes):
            setattr(obj, name, value)


def cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - no torch, no GPU
        return False


# ---- launching -----------------------------------------------------------------------------------


def _interpreter_process() -> bool:
    """Whether triton was imported in interpreter mode in this process: its own library
    functions (`tl.sum`, ...) are decorated when triton is imported, so an interpreted kernel
    can only run in such a process."""
    import triton.language.standard as standard
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(standard.sum, InterpretedFunction)


def execute(job: dict) -> dict:
    """Run one launch described by plain data (what crosses to the interpreter worker):
    source, entry, num_warps, constexprs, arrays and dtypes (argument order), symbols, grid,
    interpret. Returns {"arrays": [...]} or {"error": {"type", "message", "line"}}."""
    interpret = job["interpret"]
    device = "cpu" if interpret else "cuda"
    tensors = [to_torch(a, d, device) for a, d in zip(job["arrays"], job["dtypes"], strict=True)]
    path = source_path(job["source"], job["entry"])
    try:
        with interpreter_mode() if interpret else _interpret_env(False):
            kernel = getattr(load_module(job["source"], job["entry"], interpret), job["entry"])
            if all(g > 0 for g in job["grid"]):
                kernel[tuple(job["grid"])](*tensors, *job["symbols"], num_warps=job["num_warps"], **job["constexprs"])
    except Exception as err:  # noqa: BLE001 - reported to the caller, which maps it to KIR
        return {
            "error": {"type": type(err).__name__, "message": str(err), "line": error_line(job["source"], path, err)}
        }
    return {"arrays": [to_numpy(t, d, a) for t, d, a in zip(tensors, job["dtypes"], job["arrays"], strict=True)]}


class InterpreterWorker:
    """A child Python process, started with TRITON_INTERPRET=1 before it imports triton, that
    runs interpreted launches sent to it (pickled frames on its stdin and stdout)."""

    def __init__(self):
        env = dict(
            os.environ,
            TRITON_INTERPRET="1",
            PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[3]), os.environ.get("PYTHONPATH", "")]),
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lowering.targets.triton.runtime", "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def call(self, job: dict, timeout: float) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            _send(self.proc.stdin, job)
            if not select.select([self.proc.stdout], [], [], timeout)[0]:
                raise TimeoutError(f"the interpreted kernel ran longer than {timeout:g} s")
            reply = _receive(self.proc.stdout)
        except BaseException:  # a worker left mid-job cannot be trusted with the next one
            self.close()
            raise
        if reply is None:
            self.close()
            raise RuntimeError("the Triton interpreter worker died (a crash of the interpreted kernel?)")
        return reply

    def close(self) -> None:
        if self.alive():
            self.proc.kill()
        self.proc.wait()


def _send(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _receive(stream):
    head = stream.read(8)
    if len(head) < 8:
        return None
    (n,) = struct.unpack("<Q", head)
    return pickle.loads(stream.read(n))


_WORKER: InterpreterWorker | None = None


def _worker() -> InterpreterWorker:
    global _WORKER
    if _WORKER is None or not _WORKER.alive():
        _WORKER = InterpreterWorker()
        atexit.register(_WORKER.close)
    return _WORKER


def _serve() -> None:
    """The worker's loop: frames in on stdin, frames out on the original stdout; anything else
    written to stdout, by Python or by native code, goes to stderr."""
    os.environ["TRITON_INTERPRET"] = "1"
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    source = sys.stdin.buffer
    while True:
        job = _receive(source)
        if job is None:
            return
        _send(out, execute(job))


def run_lowered(
    lowered: Lowered,
    inputs: dict[str, np.ndarray],
    *,
    interpret: bool | None = None,
    timeout: float = 600.0,
) -> dict[str, np.ndarray]:
    """Run a lowered program on numpy inputs; the result holds every argument after the run.
    Interpreted runs happen in this process when triton was imported in interpreter mode here,
    else in a worker process (see `InterpreterWorker`)."""
    if interpret is None:
        interpret = os.environ.get("TRITON_INTERPRET") == "1" or not cuda_available()
    kernel_op = lowered.program.kernel
    launch = bind(kernel_op, dict(inputs), dict(lowered.params), 60.0)
    names = [name for name, _ in kernel_op.args]
    arrays = [pack(launch.tensors[name].data, _strides(arg.type, launch.symbols)) for name, arg in kernel_op.args]
    job = {
        "source": lowered.source,
        "entry": lowered.entry,
        "num_warps": lowered.num_warps,
        "constexprs": dict(lowered.options["constexprs"]),
        "arrays": arrays,
        "dtypes": [a.dtype for a in lowered.args],
        "symbols": [int(launch.symbols[s]) for s in lowered.shape_symbols],
        "grid": [int(g) for g in launch.grid],
        "interpret": interpret,
    }
    reply = execute(job) if not interpret or _interpreter_process() else _worker().call(job, timeout)
    if "error" in reply:
        raise _launch_error(lowered, reply["error"])
    return {name: unpack(packed, a.dtype) for name, packed, a in zip(names, reply["arrays"], lowered.args, strict=True)}


def _strides(t, symbols: dict[str, int]) -> tuple[int, ...] | None:
    """The element strides a tensor argument is declared with (None: row-major)."""
    if not t.strides.data:
        return None
    return tuple(s.data.evaluate(symbols) for s in t.strides.data)


def _launch_error(lowered: Lowered, error: dict) -> Exception:
    if error["type"] in COMPILE_ERRORS:
        return KirError(compile_diagnostic(lowered, error["message"], error["line"]))
    return RuntimeError(f"{error['type']}: {error['message']}")


def torch_launcher(lowered: Lowered, tensors: dict):
    """A launch on torch tensors already on the GPU, for timing: shape symbols are read from the
    tensors' shapes and strides, the grid and the `where` constraints are evaluated, and the
    returned function launches the kernel once per call (no copies, no checks)."""
    kernel_op = lowered.program.kernel
    symbols = {**lowered.params, **bind_shapes(lowered.program, lowered.params, tensors)}
    grid = tuple(g.data.evaluate(symbols) for g in kernel_op.grid.data)
    args = [tensors[name] for name, _ in kernel_op.args] + [symbols[s] for s in lowered.shape_symbols]
    kernel = load_kernel(lowered, interpret=False)
    constexprs = lowered.options["constexprs"]

    def launch() -> None:
        kernel[grid](*args, num_warps=lowered.num_warps, **constexprs)

    return launch


def run_triton(
    program: Program,
    inputs: dict[str, np.ndarray],
    params: dict[str, int] | None = None,
    *,
    interpret: bool | None = None,
) -> dict[str, np.ndarray]:
    """`kir.interp.run`'s interface, on the Triton backend: lower, launch, read back."""
    lowered = lower(program, "triton", params)
    return run_lowered(lowered, inputs, interpret=interpret)


# ---- the harness's interface (lowering.targets: `kir run -b triton`, `-b triton-interp`) ---------


class TorchRuntime:
    """`kir run -b triton`: the kernel launched on torch CUDA tensors."""

    def prepare(self, lowered: Lowered) -> None:
        """Nothing ahead of the launch: Triton compiles at the first one."""

    def launcher(self, lowered: Lowered, tensors: dict, symbols: dict[str, int]):
        return torch_launcher(lowered, tensors)


class InterpreterRuntime:
    """`kir run -b triton-interp`: the kernel under `TRITON_INTERPRET=1`, on numpy arrays."""

    def prepare(self, lowered: Lowered) -> None:
        """Nothing ahead of the run: the interpreter reads the source."""

    def run(
        self, program: Program, params: dict[str, int], lowered: Lowered, arrays: dict[str, np.ndarray]
    ) -> tuple[dict[str, np.ndarray], None]:
        return run_lowered(lowered, arrays, interpret=True), None


if __name__ == "__main__" and sys.argv[1:] == ["--worker"]:
    _serve()
