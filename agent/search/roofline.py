"""The roofline floor of a search: the least time any program of the task could take on the
search's chip, in the unit of the search's scores (ms where the harness times on a GPU, cycles on
mtia-sim), for `--roofline F` (stop once the best reaches F of the floor: floor / best >= F).

    floor = launch + max(bytes / DRAM bandwidth, flops / the chip's fastest matrix rate)

`bytes` is the compulsory traffic: every global argument of the seed read or written once at the
preset's shapes (the task's own `bytes` count where it has one); `flops` the task's count. Both
rates are the chip table's peaks (kir/targets/*.toml), so the floor is optimistic: no program
reaches it, and F = 1 never stops a search."""

from __future__ import annotations

import math

from costmodel.spec import chip
from kir import symexpr as sx
from kir.dialect.types import GlobalType, dtype_of, shape_of
from kir.dtypes import DTYPES
from kir.program import Program


def compulsory_bytes(program: Program, shapes: dict[str, int]) -> float:
    """Every global argument's bytes at these shapes (read once, or written once)."""
    env = {**program.params, **shapes}
    total = 0.0
    scratch = {s.name for s in program.scratch}  # several kernels: their buffers are not the task's
    seen: set[str] = set()
    for k in program.kernels():
        for name, arg in k.kernel.args:
            if isinstance(arg.type, GlobalType) and name not in scratch and name not in seen:
                seen.add(name)
                dims = [int(sx.fold(d).evaluate(env)) for d in shape_of(arg.type)]
                total += math.prod(dims) * DTYPES[dtype_of(arg.type)].nbytes
    return total


def floor(program: Program, task, preset: str, target: str, unit: str) -> float:
    """The floor in `unit` ("ms" or "cycles") of `program`'s task at `preset` on `target`."""
    shapes = task.shape_values(preset)
    counted = task.counted_bytes(preset)
    nbytes = counted if counted is not None else compulsory_bytes(program, shapes)
    flops = task.counted_flops(preset)
    c = chip(target)
    rate = max([*c.tc_flops.values(), *c.fma_flops.values()], default=1.0)
    seconds = c.launch_s + max(nbytes / c.dram_bps, flops / rate)
    return seconds * c.clock_hz if unit == "cycles" else seconds * 1e3
