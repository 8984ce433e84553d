"""The simulated MTIA-like accelerator: programs as C++ against the header-only simulator
(mtia_sim.hpp, its manual docs/hardware/mtia-sim.md), built with g++ and run on the CPU with
the simulator's cycle counts.

emit.py writes the C++, compile.py runs g++, runtime.py loads the library and runs it."""

from lowering.targets import Runtime, Target

TARGET = Target(
    name="mtia-sim",
    levels=("tile", "explicit"),
    archs=("mtia-sim",),
    emitter=".emit:MtiaEmitter",
    compiler=".compile",
    runtimes=(Runtime("cpu", ".runtime:SimulatorRuntime"),),
    # the pipelining pass's cp.async copies are DMAs into local SRAM here
    hints_through_passes=frozenset({"pipeline"}),
    copy_row_align=8,  # a DMA row starts on 8-byte device addresses and SRAM offsets (manual 3.2)
    artefacts=(("*", ("binary",)),),
)
