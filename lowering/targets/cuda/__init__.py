"""The CUDA C++ target: both program levels as one `__global__` kernel, compiled by nvcc for
sm_90a (wgmma and setmaxnreg need the `a`: an sm_90 compile is an sm_90a one) and launched
through a generated host launcher on torch CUDA tensors.

emit.py writes the kernel, compile.py runs nvcc (a compile report), runtime.py builds the
launcher library and launches."""

from lowering.targets import Runtime, Target

TARGET = Target(
    name="cuda",
    levels=("tile", "explicit"),
    archs=("sm_90", "sm_90a"),
    aliases=(("sm_90", "sm_90a"),),
    emitter=".emit:CudaEmitter",
    compiler=".compile",
    runtimes=(Runtime("cuda", ".runtime:CudaRuntime", bench=("explicit",)),),
    # the pipelining pass's cp.async copies are not taken here (one element per copy, no 2-byte
    # types): a pipeline hint stays a plain loop
    hints_through_passes=frozenset({"warp_specialize"}),
    artefacts=(("*", ("binary", "ptx", "sass", "registers")),),
)
