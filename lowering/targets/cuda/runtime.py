"""Run CUDA-lowered KIR kernels on a GPU, with `kir.interp.run`'s interface.

    from lowering.targets.cuda.runtime import run_cuda
    out = run_cuda(program, {"x": x, "y": y}, params={"BLOCK": 256})   # numpy in, numpy out

How: the emitted kernel plus a small host launcher (generated here) are compiled by nvcc into a
shared library, cached by content hash, and called through ctypes. The launcher needs nothing
beyond the CUDA runtime: it builds the TMA descriptors with `cuTensorMapEncodeTiled`, which it
takes from the driver through `cudaGetDriverEntryPointByVersion` (no -lcuda, no cuda-python),
raises the dynamic shared-memory limit, and launches on the caller's stream. Device memory
comes from torch, so the same `CudaKernel.launch` serves torch tensors directly (the benchmark).

Binding follows the interpreter (`kir.interp.launch.bind`): shape symbols from the argument
shapes, `where` constraints checked, outputs not passed in allocated and poisoned.
"""

from __future__ import annotations

import ctypes
import re
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kir.diagnostics import Diagnostic, KirError
from kir.dtypes import DTYPES
from lowering.emit.base import Lowered
from lowering.emit.names import CXX_RESERVED, identifier
from lowering.entry import lower
from lowering.report import copy_atomic, file_digest, remove_stale_tmp, shared_memory_error, write_atomic

from .compile import FLAGS, SOURCE_NAME, cache_root, error_diagnostics, run_nvcc, source_key

_TMA_DTYPE = {
    "bf16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
    "f16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
    "f32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
    "f64": "CU_TENSOR_MAP_DATA_TYPE_FLOAT64",
    "i32": "CU_TENSOR_MAP_DATA_TYPE_INT32",
    "u32": "CU_TENSOR_MAP_DATA_TYPE_UINT32",
    "i64": "CU_TENSOR_MAP_DATA_TYPE_INT64",
    "u64": "CU_TENSOR_MAP_DATA_TYPE_UINT64",
    "i16": "CU_TENSOR_MAP_DATA_TYPE_UINT16",
    "u16": "CU_TENSOR_MAP_DATA_TYPE_UINT16",
    "i8": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "u8": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "i1": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "f8e4m3": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "f8e5m2": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
}
_TMA_SWIZZLE = {
    0: "CU_TENSOR_MAP_SWIZZLE_NONE",
    32: "CU_TENSOR_MAP_SWIZZLE_32B",
    64: "CU_TENSOR_MAP_SWIZZLE_64B",
    128: "CU_TENSOR_MAP_SWIZZLE_128B",
}

_LAUNCHER_HEAD = r"""
// ---- host launcher (lowering/targets/cuda/runtime.py) ----
#include <stdio.h>
typedef CUresult (*kir_encode_fn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
    const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
    CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static int kir_encode(CUtensorMap* map, CUtensorMapDataType dtype, int rank, const void* base, const cuuint64_t* dims,
                      const cuuint64_t* strides, const cuuint32_t* box, CUtensorMapSwizzle swizzle, char* err, int errlen) {
    static kir_encode_fn fn = nullptr;
    if (fn == nullptr) {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult found;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found) != cudaSuccess
            || found != cudaDriverEntryPointSuccess || p == nullptr) {
            snprintf(err, errlen, "the driver does not provide cuTensorMapEncodeTiled");
            return 1;
        }
        fn = (kir_encode_fn)p;
    }
    const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
    CUresult r = fn(map, dtype, (cuuint32_t)rank, const_cast<void*>(base), dims, strides, box, element_strides,
                    CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        snprintf(err, errlen, "cuTensorMapEncodeTiled failed with CUresult %d (the TMA needs a 16-byte aligned base, "
                 "strides that are multiples of 16 bytes and boxes of at most 256 elements)", (int)r);
        return 1;
    }
    return 0;
}
"""


def launcher_source(lowered: Lowered) -> str:
    """The host function `kir_launch(ptrs, symbols, stream, err, errlen)` for one kernel."""
    launch = lowered.options["launch"]
    lines = [_LAUNCHER_HEAD.strip("\n"), ""]
    lines.append(
        'extern "C" int kir_launch(void* const* ptrs, const long long* syms, void* stream, char* err, int errlen) {'
    )
    for p, v in launch.params.items():
        lines.append(f"    constexpr int {identifier(p, CXX_RESERVED, 'p_')} = {v};")
    for k, s in enumerate(lowered.shape_symbols):
        lines.append(f"    const int {identifier(s, CXX_RESERVED, 'n_')} = (int)syms[{k}];")
    grid = [*launch.grid, "1", "1"][:3]
    lines.append(f"    const long long gx = {grid[0]}, gy = {grid[1]}, gz = {grid[2]};")
    lines.append("    if (gx <= 0 || gy <= 0 || gz <= 0) return 0;  // an empty grid runs nothing")
    lines.append("    if (gx > 2147483647LL || gy > 65535 || gz > 65535) {")
    lines.append('        snprintf(err, errlen, "grid (%lld, %lld, %lld) is beyond CUDA\'s limits", gx, gy, gz);')
    lines.append("        return 1;")
    lines.append("    }")
    for t in launch.tma:
        k = [a.name for a in lowered.args].index(t.arg)
        rank = len(t.dims)
        dims = ", ".join(f"(cuuint64_t)({d})" for d in t.dims)
        strides = ", ".join(f"(cuuint64_t)({s})" for s in t.strides) or "0"
        box = ", ".join(str(b) for b in t.box)
        lines += [
            f"    CUtensorMap {t.param};",
            "    {",
            f"        const cuuint64_t dims[{rank}] = {{{dims}}};",
            f"        const cuuint64_t strides[{max(1, rank - 1)}] = {{{strides}}};",
            f"        const cuuint32_t box[{rank}] = {{{box}}};",
            f"        if (kir_encode(&{t.param}, {_TMA_DTYPE[t.dtype]}, {rank}, ptrs[{k}], dims, strides, box, "
            f"{_TMA_SWIZZLE[t.swizzle]}, err, errlen)) return 1;",
            "    }",
        ]
    smem = launch.smem_bytes
    lines.append(f"    const int smem = {smem};")
    lines.append("    static bool raised = false;")
    lines.append("    if (smem > 48 * 1024 && !raised) {")
    lines.append(
        f"        cudaError_t e = cudaFuncSetAttribute({lowered.entry}, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);"
    )
    lines.append(
        '        if (e != cudaSuccess) { snprintf(err, errlen, "cudaFuncSetAttribute: %s", cudaGetErrorString(e)); return 2; }'
    )
    lines.append("        raised = true;")
    lines.append("    }")
    args = []
    for k, a in enumerate(lowered.args):
        ct = _ctype(a.dtype)
        args.append(f"({'' if a.out else 'const '}{ct}*)ptrs[{k}]")
    args += [identifier(s, CXX_RESERVED, "n_") for s in lowered.shape_symbols]
    args += [t.param for t in launch.tma]
    lines.append(
        f"    {lowered.entry}<<<dim3((unsigned)gx, (unsigned)gy, (unsigned)gz), {launch.threads}, smem, (cudaStream_t)stream>>>("
    )
    lines.append("        " + ", ".join(args) + ");")
    lines.append("    cudaError_t e = cudaGetLastError();")
    lines.append('    if (e != cudaSuccess) { snprintf(err, errlen, "launch: %s", cudaGetErrorString(e)); return 2; }')
    lines.append("    return 0;")
    lines.append("}")
    text = "\n".join(lines)
    # keep only the parameters the grid and the descriptors use
    kept = [
        line
        for line in text.split("\n")
        if not (m := re.match(r"\s+constexpr int (\w+) = ", line)) or re.search(rf"\b{m.group(1)}\b(?! =)", text)
    ]
    return "\n".join(kept) + "\n"


def _ctype(dtype: str) -> str:
    from .emit import CUDA  # noqa: PLC0415

    return CUDA.types[dtype]


# ---- building --------------------------------------------------------------------------------------


@dataclass
class CudaKernel:
    """A compiled kernel and its launcher, ready to launch on torch CUDA tensors."""

    lowered: Lowered
    path: str
    lib: Any = None

    def load(self) -> None:
        if self.lib is None:
            self.lib = ctypes.CDLL(self.path)
            self.lib.kir_launch.argtypes = [
                ctypes.POINTER(ctypes.c_void_p),
                ctypes.POINTER(ctypes.c_longlong),
                ctypes.c_void_p,
                ctypes.c_char_p,
                ctypes.c_int,
            ]
            self.lib.kir_launch.restype = ctypes.c_int

    def launch(self, tensors: dict[str, Any], symbols: dict[str, int], stream: Any = None) -> None:
        """Launch on torch CUDA tensors (any dtype of the right size: the kernel takes raw
        pointers) with the shape symbols' values; asynchronous, on `stream` or torch's current."""
        import torch  # noqa: PLC0415

        self.load()
        ptrs = (ctypes.c_void_p * max(1, len(self.lowered.args)))(
            *[tensors[a.name].data_ptr() for a in self.lowered.args]
        )
        syms = (ctypes.c_longlong * max(1, len(self.lowered.shape_symbols)))(
            *[int(symbols[s]) for s in self.lowered.shape_symbols]
        )
        handle = (stream or torch.cuda.current_stream()).cuda_stream
        err = ctypes.create_string_buffer(512)
        rc = self.lib.kir_launch(ptrs, syms, ctypes.c_void_p(handle), err, len(err))
        if rc:
            raise KirError(
                Diagnostic(
                    "run.launch", "error", self.lowered.program.span(), f"the cuda launch failed: {err.value.decode()}"
                )
            )


_BUILT: dict[str, CudaKernel] = {}
_LOCK = threading.Lock()
_KEY_LOCKS: dict[str, threading.Lock] = {}


def build(lowered: Lowered) -> CudaKernel:
    """Compile the kernel and its launcher into a shared library (cached on disk and in memory);
    raises `KirError` (`lower.compile` at the KIR op) when nvcc rejects the generated code."""
    # a launch beyond the block's shared memory would fail in cudaFuncSetAttribute: say why
    if (too_big := shared_memory_error(lowered, lowered.options.get("smem_bytes"), "sm_90a")) is not None:
        raise KirError(too_big)
    source = lowered.source + "\n" + launcher_source(lowered)
    flags = (*FLAGS, "-Xcompiler", "-fPIC", "-shared")
    key = source_key(source, flags)
    with _LOCK:
        key_lock = _KEY_LOCKS.setdefault(key, threading.Lock())
    with key_lock:  # one build per kernel, however many threads ask for it
        if key in _BUILT:
            return _BUILT[key]
        folder = cache_root() / f"so-{key}"
        lib = folder / "kernel.so"
        digest = folder / "kernel.so.sha256"
        # the library is trusted only with the checksum written after it: a library cut short
        # (a full disk, a killed writer) or replaced is built again instead of failing to load
        remove_stale_tmp(lib)
        if not digest.exists() or file_digest(lib) != digest.read_text().strip():
            with tempfile.TemporaryDirectory(prefix="kir-nvcc-") as tmp:
                work = Path(tmp)
                (work / SOURCE_NAME).write_text(source)
                rc, log = run_nvcc([*flags, "-o", "kernel.so", SOURCE_NAME], work)
                if rc != 0:
                    raise KirError(error_diagnostics(lowered, log, None))
                copy_atomic(work / "kernel.so", lib)  # another process may be loading it
                write_atomic(digest, file_digest(lib) or "")
        kernel = _BUILT[key] = CudaKernel(lowered, str(lib))
        return kernel


def build_many(lowereds: list[Lowered], jobs: int = 8) -> list[CudaKernel | Exception]:
    """Build several kernels in parallel (nvcc runs as separate processes)."""

    def one(low: Lowered) -> CudaKernel | Exception:
        try:
            return build(low)
        except Exception as err:  # noqa: BLE001 - reported per kernel
            return err

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, lowereds))


# ---- numpy in, numpy out -------------------------------------------------------------------------


def run_cuda(
    program: Any, inputs: dict[str, np.ndarray], params: dict[str, int] | None = None
) -> dict[str, np.ndarray]:
    """Run a program on the GPU; the interface of `kir.interp.run`: every tensor argument comes
    back after the run, outputs filled (those not passed in start poisoned)."""
    import torch  # noqa: PLC0415

    from kir.interp.errors import InterpError  # noqa: PLC0415
    from kir.interp.launch import bind  # noqa: PLC0415

    lowered = lower(program, "cuda", params)
    kernel = build(lowered)
    try:
        launch = bind(program.kernel, dict(inputs), dict(params or {}), 60.0)
    except InterpError as err:
        raise KirError(err.diagnostic) from None
    device: dict[str, Any] = {}
    host: dict[str, np.ndarray] = {}
    for name, tensor in launch.tensors.items():
        arr = np.ascontiguousarray(tensor.data)
        host[name] = arr
        raw = torch.from_numpy(arr.reshape(-1).view(np.uint8).copy())
        device[name] = raw.cuda()
    kernel.launch(device, launch.symbols)
    torch.cuda.synchronize()
    out = {}
    for name, arr in host.items():
        back = device[name].cpu().numpy().view(DTYPES[launch.tensors[name].dtype.name].numpy)
        out[name] = back.reshape(arr.shape)
    return out


class CudaRuntime:
    """`kir run -b cuda` (the harness's interface, lowering.targets): the library built ahead of
    the launch, the kernel launched on torch CUDA tensors."""

    def prepare(self, lowered: Lowered) -> None:
        build(lowered)

    def launcher(self, lowered: Lowered, tensors: dict[str, Any], symbols: dict[str, int]):
        kernel = build(lowered)  # built by `prepare`: the one in memory
        return lambda: kernel.launch(tensors, symbols)
