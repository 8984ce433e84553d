"""The Gluon backend's tables: KIR dtypes as Gluon's, the names the module defines, and the
math functions."""

from __future__ import annotations

from kir.dialect import explicit as ex
from kir.dialect import tile as tl
from lowering.emit.names import PYTHON_RESERVED
from lowering.emit.pyexpr import SIGNATURE_DTYPE, dtype_names

TARGET = "sm_90"

GL_DTYPE = dtype_names("gl")

SIG_DTYPE = SIGNATURE_DTYPE  # Triton's names of element types in a signature (`*bf16`)

MODULE_NAMES = frozenset(
    {
        "gluon",
        "gl",
        "tl",
        "tma",
        "mbarrier",
        "warpgroup_mma",
        "warpgroup_mma_wait",
        "fence_async_shared",
        "kir_div",
        "kir_rem",
        "kir_max",
        "kir_min",
        "kir_prod",
        "RANK",
    }
)
RESERVED = PYTHON_RESERVED | MODULE_NAMES | {"range", "int", "float", "abs", "min", "max", "print", "len"}

UNARY_CALLS = {
    "abs": "gl.abs",
    "exp": "gl.exp",
    "exp2": "gl.exp2",
    "log": "gl.log",
    "log2": "gl.log2",
    "sqrt": "gl.sqrt_rn",
    "rsqrt": "gl.rsqrt",
    "erf": "gl.erf",
    "sin": "gl.sin",
    "cos": "gl.cos",
    "floor": "gl.floor",
    "ceil": "gl.ceil",
}
# Pure ops are written inline at their single use, except zeros and full, which make a tile
# with a layout of its own (written inline only into the convert_layout that gives it one), and
# convert_layout itself, which binds the name.
NOT_INLINE = (tl.ZerosOp, tl.FullOp, ex.ConvertLayoutOp)
