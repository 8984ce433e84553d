"""Names in KIR text: what a name may be, the keywords it may not be, and what to suggest for a
misspelt one. The builder, the printer and the parser all lean on these, so they sit below all
three."""

from __future__ import annotations

import difflib
import re

RESERVED = frozenset(
    """kernel where target grid warps warpgroups for in step if else role regs pipeline stages
    warp_specialize cast dot true false inf nan None
    i1 i8 i16 i32 i64 u8 u16 u32 u64 f16 bf16 f32 f64 f8e4m3 f8e5m2""".split()
)


# A name as the grammar reads it (NAME in grammar.lark): ASCII only, unlike str.isidentifier.
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def suggest(name: str, candidates) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=3)
    return f"did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
