"""Scalar element types of KIR and their numpy carriers.

bf16 and the fp8 formats are carried by ml_dtypes, whose arithmetic rounds every result to the
storage format: that is what makes the reference interpreter's low-precision semantics exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class DType:
    name: str
    bits: int
    kind: str  # "int", "uint", "float", "bool"
    carrier: str  # the numpy dtype's name ("bfloat16" and the fp8 formats: ml_dtypes')

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype that carries values of this type (numpy and ml_dtypes are imported
        on first use: parsing, printing and hashing a program never need them)."""
        return _carrier(self.carrier)

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


@cache
def _carrier(name: str) -> np.dtype:
    import numpy as np

    if name in _ML_DTYPES:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


_ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")


def _table() -> dict[str, DType]:
    rows = [
        ("i1", 1, "bool", "bool"),
        ("i8", 8, "int", "int8"),
        ("i16", 16, "int", "int16"),
        ("i32", 32, "int", "int32"),
        ("i64", 64, "int", "int64"),
        ("u8", 8, "uint", "uint8"),
        ("u16", 16, "uint", "uint16"),
        ("u32", 32, "uint", "uint32"),
        ("u64", 64, "uint", "uint64"),
        ("f16", 16, "float", "float16"),
        ("bf16", 16, "float", "bfloat16"),
        ("f32", 32, "float", "float32"),
        ("f64", 64, "float", "float64"),
        ("f8e4m3", 8, "float", "float8_e4m3fn"),
        ("f8e5m2", 8, "float", "float8_e5m2"),
    ]
    return {name: DType(name, bits, kind, carrier) for name, bits, kind, carrier in rows}


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
