"""The reference interpreter as a target: nothing to lower or compile; its one runtime,
`kir run -b interp`, runs the program itself (`kir.interp.run`) on the CPU."""

from lowering.targets import Runtime, Target

TARGET = Target(
    name="interp",
    levels=("tile", "explicit"),
    runtimes=(Runtime("cpu", ".runtime:InterpreterRuntime"),),
)
