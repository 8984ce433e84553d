"""`tf32`: an f32 matrix product on the tensor cores at TF32 (`precision = tf32`).

KIR's `dot<f32>` of f32 tiles is an IEEE product: FMA on NVIDIA's CUDA cores, about a fifth of
the TF32 tensor-core rate on an H200 (67 against 346 TFLOP/s). `precision = tf32` rounds each
operand to TF32 (10 mantissa bits, as `cvt.rna.tf32.f32`) and multiplies on the tensor cores,
accumulating in f32: each product is off by about 2^-11 of its size, so results change on
purpose: numerics "approximate". The harness is the judge: it admits the result where the
task's tolerance does, or where PyTorch's own result is as far off (its f32 convolutions run at
TF32 on NVIDIA GPUs by default, its matrix products where `allow_tf32` is set). `split-dot`
(bf16x3) is the more precise and slower alternative.

Offered for a `dot<f32>` of two f32 tiles that is IEEE, on targets with TF32 units (sm_80 and
later, gfx942); `site` counts them in the order of the text.
"""

from __future__ import annotations

from xdsl.dialects.builtin import StringAttr

from kir.diagnostics import Diagnostic
from kir.dialect.tile import DotOp
from kir.program import Program
from kir.targets import spec
from tactics import ir, split_dot
from tactics.base import IntRange, Param, Tactic, not_applicable
from tactics.registry import register

NAME = "tf32"


def sites(program: Program) -> list[DotOp]:
    """The IEEE f32 products of f32 tiles (split-dot's sites not already TF32), in the order of the text."""
    return [op for op in split_dot.sites(program) if not op.tf32]


def _check(program: Program, target: str) -> list[Diagnostic]:
    named = program.kernel.target.data
    if not spec(named).has("tf32"):
        return [
            not_applicable(
                NAME,
                "target",
                program.clause_spans.get("target") or program.span(),
                f"{named} has no TF32 units",
                "TF32 products are on sm_80 and later and on gfx942",
            )
        ]
    if sites(program):
        return []
    return ir.no_site(
        NAME, "no-f32-dot", program, DotOp, "no IEEE dot<f32> of two f32 tiles", "the kernel has no dot",
        "TF32 is for f32 operands; bf16 and f16 ones run on the tensor cores already",
    )  # fmt: skip


_validate, _domains = ir.site_choice(NAME, "IEEE f32 dots of f32 tiles", sites)


def _rewrite(program: Program, *, site: int) -> None:
    dot = sites(program)[site]
    dot.properties["precision"] = StringAttr("tf32")


TF32 = register(
    Tactic(
        name=NAME,
        summary="an f32 dot on the tensor cores at TF32 (precision = tf32)",
        explain=__doc__ or "",
        params=(Param("site", IntRange(0, 1023), 0, "which f32 dot, counted from 0 in the order of the text"),),
        numerics="approximate",
        check=_check,
        rewrite=_rewrite,
        domains_of=_domains,
        validate=_validate,
        examples=("kir tactics apply benchmarks/tasks/kmeans_assign/seed.kir tf32",),
    )
)
