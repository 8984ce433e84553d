"""One entry point over the compile drivers: `compile_program(program, to, arch, params)`.

Each backend's driver (compile_triton, compile_gluon, compile_cuda) returns its own report
dataclass with the fields its toolchain can fill; all have `ok`, `diagnostics` and a log, and
`report_json` turns any of them into plain data.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kir.diagnostics import Diagnostic, KirError
from kir.program import Program
from lowering.emit.base import lower

ARCHS = {"triton": ("sm_90", "gfx942"), "gluon": ("sm_90",), "cuda": ("sm_90", "sm_90a")}


def compile_program(program: Program, to: str, arch: str = "sm_90", params: dict[str, int] | None = None):
    if to not in ARCHS:
        raise KirError(Diagnostic("lower.backend", "error", None, f"no compiler for '{to}'", f"one of {', '.join(ARCHS)}"))
    if arch not in ARCHS[to]:
        raise KirError(
            Diagnostic("lower.arch", "error", None, f"{to} compiles for {', '.join(ARCHS[to])}, not {arch}")
        )
    lowered = lower(program, to, params)
    if to == "triton":
        from lowering.compile_triton import compile_lowered

        return compile_lowered(lowered, arch)
    if to == "gluon":
        from lowering.compile_gluon import compile_lowered

        return compile_lowered(lowered)
    from lowering.compile_cuda import compile_cuda

    return compile_cuda(lowered)


def report_json(report) -> dict[str, Any]:
    out = {}
    for f in dataclasses.fields(report):
        value = getattr(report, f.name)
        if f.name == "diagnostics":
            out[f.name] = [d.to_json() for d in value]
        elif f.name in ("sass", "ptx", "log") and isinstance(value, str) and len(value) > 4000:
            out[f.name] = value[:4000] + "..."
        else:
            out[f.name] = value if isinstance(value, str | int | float | bool | type(None) | list | dict) else str(value)
    return out
