"""The HIP C++ target: tile-level programs as HIP kernels for gfx90a, compile-verified with
hipcc (there is no AMD GPU here to run one on, so it has no runtime).

emit.py writes the kernel (the CUDA generator with the HIP row of the dialect table),
compile.py runs hipcc."""

from lowering.targets import Target

TARGET = Target(
    name="hip",
    levels=("tile",),
    archs=("gfx90a",),
    emitter=".emit:HipEmitter",
    compiler=".compile",
    cost_archs=("gfx90a",),
    artefacts=(("*", ("binary", "asm", "registers")),),
)
