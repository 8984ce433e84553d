"""Lowering: KIR programs to target code (Triton, Gluon, CUDA C++, and later HIP and the
simulated MTIA chip), compile drivers with structured reports, and a launch runtime.

    from lowering import lower
    out = lower(program, "triton")      # a Lowered: source text, entry, launch, line map
"""

from lowering.emit.base import EMITTERS, Emitter, Lowered, lower

__all__ = ["EMITTERS", "Emitter", "Lowered", "lower"]
