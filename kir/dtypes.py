"""Scalar element types of KIR and their numpy carriers.

bf16 and the fp8 formats are carried by ml_dtypes, whose arithmetic rounds every result to the
storage format: that is what makes the reference interpreter's low-precision semantics exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class DType:
    name: str
    bits: int
    kind: str  # "int", "uint", "float", "bool"
    numpy: np.dtype

    @property
    def nbytes(self) -> int:
        return max(1, self.bits // 8)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint", "bool")

    @property
    def is_signed(self) -> bool:
        return self.kind in ("int", "float")


def _table() -> dict[str, DType]:
    rows = [
        ("i1", 1, "bool", np.dtype(np.bool_)),
        ("i8", 8, "int", np.dtype(np.int8)),
        ("i16", 16, "int", np.dtype(np.int16)),
        ("i32", 32, "int", np.dtype(np.int32)),
        ("i64", 64, "int", np.dtype(np.int64)),
        ("u8", 8, "uint", np.dtype(np.uint8)),
        ("u16", 16, "uint", np.dtype(np.uint16)),
        ("u32", 32, "uint", np.dtype(np.uint32)),
        ("u64", 64, "uint", np.dtype(np.uint64)),
        ("f16", 16, "float", np.dtype(np.float16)),
        ("bf16", 16, "float", np.dtype(ml_dtypes.bfloat16)),
        ("f32", 32, "float", np.dtype(np.float32)),
        ("f64", 64, "float", np.dtype(np.float64)),
        ("f8e4m3", 8, "float", np.dtype(ml_dtypes.float8_e4m3fn)),
        ("f8e5m2", 8, "float", np.dtype(ml_dtypes.float8_e5m2)),
    ]
    return {name: DType(name, bits, kind, npd) for name, bits, kind, npd in rows}


DTYPES: dict[str, DType] = _table()
DTYPE_NAMES: tuple[str, ...] = tuple(DTYPES)
INDEX = DTYPES["i32"]  # program ids, loop variables, shape symbols and aranges are i32


def dtype(name: str) -> DType:
    return DTYPES[name]


def from_numpy(npd: np.dtype) -> DType | None:
    for d in DTYPES.values():
        if d.numpy == npd:
            return d
    return None
