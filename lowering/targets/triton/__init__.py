"""The Triton target: tile-level programs as Triton kernels, compiled ahead of time for sm_90
and for gfx942 (AMD), launched on torch CUDA tensors or, on a CPU, under `TRITON_INTERPRET=1`.

emit/ writes the kernel, compile.py compiles it (a compile report, no GPU needed), runtime.py
loads and launches it, errors.py points Triton's errors at the KIR op."""

from lowering.targets import Runtime, Target

TARGET = Target(
    name="triton",
    levels=("tile",),
    archs=("sm_90", "gfx942"),
    emitter=".emit:TritonEmitter",
    compiler=".compile",
    runtimes=(
        Runtime("cuda", ".runtime:TorchRuntime", bench=("tile",)),
        Runtime("cpu", ".runtime:InterpreterRuntime", suffix="-interp", env=(("TRITON_INTERPRET", "1"),)),
    ),
    cost_archs=("sm_90", "gfx942"),
    native_hints=frozenset({"pipeline", "warp_specialize"}),  # tl.range(num_stages=..., warp_specialize=...)
    artefacts=(("gfx942", ("binary", "asm", "registers")), ("*", ("binary", "ptx", "sass", "registers"))),
)
