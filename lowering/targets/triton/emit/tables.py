"""The Triton backend's tables: KIR dtypes and math functions as Triton's, what tl.dot and the
atomics take, Triton's limits, and the names generated code reserves."""

from __future__ import annotations

from xdsl.ir import Operation

from kir.diagnostics import Diagnostic, KirError
from kir.program import span_of
from lowering.emit.names import PYTHON_RESERVED, identifier
from lowering.emit.pyexpr import dtype_names

from .helpers import HELPERS

TL_DTYPE = dtype_names("tl")
NARROW_FLOATS = ("f16", "bf16", "f8e4m3", "f8e5m2")
BITS_TYPE = {8: "tl.int8", 16: "tl.int16", 32: "tl.int32", 64: "tl.int64"}
# Unary math that differs only in spelling; f32/f64 operands (narrow floats go through f32).
MATH = {
    "exp": "tl.exp",
    "exp2": "tl.exp2",
    "log": "tl.log",
    "log2": "tl.log2",
    "rsqrt": "tl.rsqrt",
    "erf": "tl.math.erf",
    "sigmoid": "tl.sigmoid",
    "tanh": "libdevice.tanh",  # not in triton.language 3.6; libdevice on NVIDIA, ocml on AMD
    "sin": "tl.sin",
    "cos": "tl.cos",
    "floor": "tl.floor",
    "ceil": "tl.ceil",
    "abs": "tl.abs",
}
SQRT = {"f32": "tl.sqrt_rn", "f64": "tl.sqrt"}  # sqrt_rn: IEEE, as numpy; tl.sqrt is approximate for f32
# Atomics Triton 3.6 takes, by KIR dtype (bf16/f16 adds are native on sm_90 and gfx942).
ATOMIC_DTYPES = {
    "add": ("i32", "u32", "i64", "u64", "f16", "bf16", "f32", "f64"),
    "max": ("i32", "u32", "i64", "u64", "f32", "f64"),
    "min": ("i32", "u32", "i64", "u64", "f32", "f64"),
    "xchg": ("i32", "u32", "i64", "u64", "f32", "f64"),
}
# (operand dtype, accumulate dtype) pairs tl.dot takes as they are.
NATIVE_DOT = {
    ("bf16", "f32"),
    ("f16", "f32"),
    ("f8e4m3", "f32"),
    ("f8e5m2", "f32"),
    ("f32", "f32"),
    ("f64", "f64"),
    ("i8", "i32"),
}
TILE_LIMIT = 1 << 20  # Triton's largest tile (elements)
INLINE_LIMIT = 64  # characters: a longer unnamed expression gets a line and a temporary name


# Names the generated code uses besides the kernel's own: never given to a KIR value.
GENERATED_RESERVED = frozenset(PYTHON_RESERVED | {"libdevice", "float", "range", *HELPERS})


def ident(name: str) -> str:
    return identifier(name, GENERATED_RESERVED)


def refuse(op: Operation | None, rule: str, message: str, hint: str = "") -> KirError:
    return KirError(Diagnostic(rule, "error", span_of(op) if op is not None else None, message, hint))
