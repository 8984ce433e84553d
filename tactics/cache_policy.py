"""`cache-policy`: set the eviction priority of a global load (`evict = first | last`).

`evict = last` keeps the lines of a load in the caches (data read again soon: the second pass
over a row, a weight every row reads); `evict = first` lets them go first (data read once,
streamed), so they do not push out what is reused. The hint changes where lines stay, never a
value; `none` removes it.
"""

from __future__ import annotations

from collections.abc import Mapping

from xdsl.dialects.builtin import StringAttr

from kir.diagnostics import Diagnostic
from kir.program import Program
from tactics import ir
from tactics.base import Choice, IntRange, Param, Tactic, Value, not_applicable
from tactics.registry import register

NAME = "cache-policy"
POLICIES = ("first", "last", "none")


def _check(program: Program, target: str) -> list[Diagnostic]:
    if ir.global_loads(program):
        return []
    return [not_applicable(NAME, "no-load", program.span(), "the kernel loads nothing from global memory")]


def _validate(program: Program, values: dict[str, Value]) -> list[Diagnostic]:
    loads = ir.global_loads(program)
    if int(values["load"]) < len(loads):
        return []
    return [
        Diagnostic(
            "tactic.cache-policy.load",
            "error",
            ir.span(program, loads[-1]) if loads else program.span(),
            f"tactic cache-policy: load = {values['load']}, but the kernel has {len(loads)} global loads",
            f"load is 0 .. {len(loads) - 1}, in the order of the text",
        )
    ]


def _domains(program: Program, target: str, shapes: Mapping[str, int]) -> dict[str, tuple[Value, ...]]:
    return {"load": tuple(range(len(ir.global_loads(program)))), "policy": POLICIES}


def _rewrite(program: Program, *, load: int, policy: str) -> None:
    op = ir.global_loads(program)[load]
    if policy == "none":
        op.properties.pop("evict", None)
    else:
        op.properties["evict"] = StringAttr(policy)


CACHE_POLICY = register(
    Tactic(
        name=NAME,
        summary="set the cache eviction priority of a global load",
        explain=__doc__ or "",
        params=(
            Param("load", IntRange(0, 1023), 0, "which global load, counted from 0 in the order of the text"),
            Param("policy", Choice(POLICIES), "last", "first (read once), last (read again soon) or none"),
        ),
        numerics="exact",
        check=_check,
        rewrite=_rewrite,
        domains_of=_domains,
        validate=_validate,
        examples=(
            "kir tactics apply benchmarks/tasks/rmsnorm/seed.kir cache-policy --param load=0 --param policy=last",
        ),
    )
)
