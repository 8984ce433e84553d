"""Run mtia-sim-lowered KIR kernels on the simulator, with `kir.interp.run`'s interface plus the
simulated cycle count.

    from lowering.targets.mtia_sim.runtime import run_mtia
    result = run_mtia(program, {"x": x}, params={"BLOCK": 256})   # numpy in
    result.outputs["y"], result.cycles, result.stats                 # numpy out, cycles

How: `lowering.targets.mtia_sim.compile` builds the emitted C++ (with `lowering/targets/mtia_sim/mtia_sim.hpp`) into a
shared library, cached by content hash; its `kir_launch` runs the grid over the simulated PEs on
the host arrays in place and returns the cycles of the manual's timing model (deterministic).
Illegal use of the chip (an unaligned DMA, an SRAM overflow, a read of SRAM that a DMA still
writes) stops the run with `mtia::Error`; it comes back as a `KirError` whose diagnostic has the
runtime's rule id and is placed at the KIR op that made the offending call (and, for a pending
DMA, the related span of the copy).
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kir.diagnostics import Diagnostic, KirError, Related
from lowering.emit.base import Lowered
from lowering.entry import lower

from .compile import compile_lowered

ENGINES = ("vector", "sfu", "reduction", "dpe")

HINTS = {
    "mtia.dma-align": "DMA rows start on 8-byte device addresses and SRAM offsets (manual 3.2): align the slice "
    "starts, or load the unaligned part with a direct load",
    "mtia.sram-overflow": "a PE has 384 KB of local SRAM (manual 2): shrink the buffers or their stages",
    "mtia.dma-pending": "wait on the DMA counter before touching its destination: cp.async.commit() after the "
    "copies, then cp.async.wait(n) (manual 3.3)",
}

_LOCK = threading.Lock()  # the generated code keeps its scratch in static arrays


@dataclass
class MtiaResult:
    outputs: dict[str, np.ndarray]
    cycles: int
    stats: dict[str, Any] = field(default_factory=dict)


class MtiaKernel:
    """A built kernel: `launch(arrays, symbols)` runs it in place on contiguous numpy arrays
    (KIR argument order) and returns (cycles, stats)."""

    def __init__(self, lowered: Lowered, path: str):
        self.lowered = lowered
        self.lib = ctypes.CDLL(path)
        self.fn = self.lib.kir_launch
        self.fn.restype = ctypes.c_int
        self.fn.argtypes = [
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.POINTER(ctypes.c_longlong),
            ctypes.POINTER(ctypes.c_ulonglong),
            ctypes.c_char_p,
            ctypes.c_int,
        ]

    def launch(self, arrays: dict[str, np.ndarray], symbols: dict[str, int]) -> tuple[int, dict[str, Any]]:
        # Device memory: every tensor starts on a 4096-byte boundary (as the device allocator
        # gives), so that bursts and DMA alignment depend on the program, never on the host.
        args = [_device_copy(arrays[a.name]) for a in self.lowered.args]
        ptrs = (ctypes.c_void_p * max(1, len(args)))(*[a.ctypes.data for a in args])
        syms = [int(symbols[s]) for s in self.lowered.shape_symbols]
        csyms = (ctypes.c_longlong * max(1, len(syms)))(*syms)
        out = (ctypes.c_ulonglong * 16)()
        err = ctypes.create_string_buffer(1024)
        with _LOCK:
            rc = self.fn(ptrs, csyms, out, err, len(err))
        for a, dev in zip(self.lowered.args, args, strict=True):
            arrays[a.name][...] = dev
        if rc != 0:
            raise KirError(self.error(err.value.decode(errors="replace"), int(ctypes.c_longlong(out[0]).value),
                                      int(ctypes.c_longlong(out[1]).value)))  # fmt: skip
        stats = {f"{e}_busy": int(out[1 + k]) for k, e in enumerate(ENGINES)}
        stats.update(dma_bytes=int(out[5]), direct_bytes=int(out[6]), store_bytes=int(out[7]), stall=int(out[8]))
        return int(out[0]), stats

    def error(self, text: str, call: int, other: int) -> Diagnostic:
        rule, _, message = text.partition("\n")
        calls = self.lowered.options.get("calls", [])
        span = calls[call] if 0 <= call < len(calls) else None
        related = []
        if 0 <= other < len(calls) and calls[other] is not None:
            related.append(Related(calls[other], "the DMA still in flight was started here"))
        return Diagnostic(
            rule or "mtia.error",
            "error",
            span or self.lowered.program.span(),
            f"mtia-sim runtime: {message}",
            HINTS.get(rule, ""),
            related=tuple(related),
            counterexample={"call": call},
        )


def _device_copy(arr: np.ndarray) -> np.ndarray:
    raw = np.empty(arr.nbytes + 4096, np.uint8)
    at = (-raw.ctypes.data) % 4096
    dev = raw[at : at + arr.nbytes].view(arr.dtype).reshape(arr.shape)
    dev[...] = arr
    return dev


_BUILT: dict[str, MtiaKernel] = {}


def build(lowered: Lowered) -> MtiaKernel:
    """Compile (cached on disk) and load; a compile failure raises `KirError`."""
    report = compile_lowered(lowered)
    if not report.ok or report.binary is None:
        raise KirError(report.diagnostics)
    kernel = _BUILT.get(report.binary)
    if kernel is None or kernel.lowered.source != lowered.source:
        kernel = MtiaKernel(lowered, report.binary)
        _BUILT[report.binary] = kernel
    else:
        kernel.lowered = lowered  # same code: the spans of the program lowered now
    return kernel


def run_lowered(lowered: Lowered, inputs: dict[str, np.ndarray]) -> MtiaResult:
    """Run on numpy arrays, binding as the interpreter does (outputs not passed are poisoned)."""
    from kir.interp.errors import InterpError  # noqa: PLC0415
    from kir.interp.launch import bind  # noqa: PLC0415

    kernel = build(lowered)
    program = lowered.program
    try:
        launch = bind(program.kernel, dict(inputs), dict(lowered.params), 60.0)
    except InterpError as err:
        raise KirError(err.diagnostic) from None
    arrays = {name: np.ascontiguousarray(t.data).copy() for name, t in launch.tensors.items()}
    cycles, stats = kernel.launch(arrays, launch.symbols)
    return MtiaResult(arrays, cycles, stats)


def run_mtia(program: Any, inputs: dict[str, np.ndarray], params: dict[str, int] | None = None) -> MtiaResult:
    """Lower for mtia-sim, build and run: every tensor argument after the run, and the cycles."""
    return run_lowered(lower(program, "mtia-sim", params), inputs)


class SimulatorRuntime:
    """`kir run -b mtia-sim` (the harness's interface, lowering.targets): the library built
    ahead of the run, run on numpy arrays with the simulated cycles."""

    def prepare(self, lowered: Lowered) -> None:
        build(lowered)

    def run(
        self, program: Any, params: dict[str, int], lowered: Lowered, arrays: dict[str, np.ndarray]
    ) -> tuple[dict[str, np.ndarray], int]:
        result = run_lowered(lowered, arrays)
        return result.outputs, result.cycles
