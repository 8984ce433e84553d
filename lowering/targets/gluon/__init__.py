"""The Gluon target: hardware-explicit programs (roles, TMA, mbarriers, wgmma) as Gluon kernels
for sm_90, compiled ahead of time in a child process and launched on torch CUDA tensors.

emit/ writes the kernel, compile.py compiles it (with the Triton target's driver code),
runtime.py launches it."""

from lowering.targets import Runtime, Target

TARGET = Target(
    name="gluon",
    levels=("explicit",),
    archs=("sm_90",),
    emitter=".emit:GluonEmitter",
    compiler=".compile",
    runtimes=(Runtime("cuda", ".runtime:GluonRuntime", bench=("explicit",)),),
    cost_archs=("sm_90",),
    hints_through_passes=frozenset({"pipeline", "warp_specialize"}),
    layouts=True,
    artefacts=(("*", ("binary", "ptx", "sass", "registers")),),
)
