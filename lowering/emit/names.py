"""Names from KIR are never pasted into target code unchecked: each is validated as a KIR
identifier and, where it collides with a word of the target language, renamed with a suffix."""

from __future__ import annotations

import keyword
import re

from kir.diagnostics import Diagnostic, KirError

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

PYTHON_RESERVED = frozenset(keyword.kwlist) | {"tl", "triton", "gl", "gluon", "torch", "math", "np"}
CXX_RESERVED = frozenset(
    """alignas alignof and asm auto bool break case catch char class const constexpr continue
    decltype default delete do double else enum explicit export extern false float for friend goto
    if inline int long mutable namespace new noexcept not nullptr operator or private protected
    public register return short signed sizeof static static_assert struct switch template this
    throw true try typedef typename union unsigned using virtual void volatile while xor
    threadIdx blockIdx blockDim gridDim warpSize half float2 float4 int4 uint4 dim3""".split()
)


def identifier(name: str, reserved: frozenset[str] = frozenset(), prefix: str = "") -> str:
    """A safe identifier for `name` in generated code (raises `KirError` if `name` is not a
    KIR identifier: it can only come from a corrupted or hand-built program)."""
    if not _IDENT.match(name) or name.startswith("__"):
        raise KirError(Diagnostic("lower.identifier", "error", None, f"'{name}' is not a valid identifier"))
    out = prefix + name
    if out in reserved:
        out += "_"
    return out
