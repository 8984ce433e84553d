"""The table of names that differ between the C++ dialects (CUDA, HIP, the MTIA simulator's),
and what every part of the C++ generator refuses with (`Unsupported`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from xdsl.ir import Operation


@dataclass(frozen=True)
class CDialect:
    """The names a C++ GPU dialect spells its own way; CUDA and HIP each fill one."""

    name: str
    headers: tuple[str, ...]
    kernel_qualifier: str  # before the kernel's return type
    shared: str  # the shared-memory qualifier
    barrier: str  # the CTA barrier
    types: Mapping[str, str]  # KIR dtype -> C++ type
    # conversion intrinsics: narrow float -> float, float -> narrow float (round to nearest
    # even), double -> narrow float (one rounding), and bits -> narrow float
    to_float: Mapping[str, str]
    from_float: Mapping[str, str]
    from_double: Mapping[str, str]
    from_bits: Mapping[str, str]
    thread_index: str = "threadIdx.x"
    block_index: tuple[str, str, str] = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
    grid_size: tuple[str, str, str] = ("gridDim.x", "gridDim.y", "gridDim.z")
    warp_size: int = 32


def c_types(f16: str, bf16: str, **fp8: str) -> dict[str, str]:
    """A dialect's `types`: the integers, f32 and f64 are C++'s own on every backend; only the
    16-bit floats (and fp8, where there is one) have a name of the dialect's."""
    return {
        "i1": "bool",
        "i8": "signed char",
        "i16": "short",
        "i32": "int",
        "i64": "long long",
        "u8": "unsigned char",
        "u16": "unsigned short",
        "u32": "unsigned int",
        "u64": "unsigned long long",
        "f16": f16,
        "bf16": bf16,
        "f32": "float",
        "f64": "double",
        **fp8,
    }


NARROW_FLOATS = ("bf16", "f16", "f8e4m3", "f8e5m2")
_UNSIGNED_OF = {8: "unsigned char", 16: "unsigned short", 32: "unsigned int", 64: "unsigned long long"}


class Unsupported(Exception):
    """An op this backend cannot lower; becomes a `lower.unsupported` diagnostic at the op."""

    def __init__(self, op: Operation | None, message: str, hint: str = ""):
        super().__init__(message)
        self.op = op
        self.message = message
        self.hint = hint


def _prod(shape) -> int:
    return int(math.prod(shape))
