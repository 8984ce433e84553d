"""Lowering: KIR programs to target code, one folder per target under `lowering/targets/`
(Triton, Gluon, CUDA C++, HIP C++, C++ for the simulated MTIA chip, and the reference
interpreter as the target that runs programs as they are), each with its emitter, compile driver
and runtimes; the registry there (`lowering.targets`) is the one list of them. Shared here:
the emitter base and the C++ generator base (`emit/`), the passes (`passes/`), compile reports
(`report.py`) and shape binding for launches (`launch.py`).

    from lowering import lower
    out = lower(program, "triton")      # a Lowered: source text, entry, launch, line map
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Emitter", "Lowered", "lower"]


def __getattr__(name: str) -> Any:
    # `lower` and its types load the dialect (xdsl): imported when asked for, so that the
    # registry (`lowering.targets`, which `kir --help` reads) costs no more than itself
    if name in __all__:
        return getattr(importlib.import_module("lowering.entry" if name == "lower" else "lowering.emit.base"), name)
    raise AttributeError(f"module 'lowering' has no attribute {name!r}")
