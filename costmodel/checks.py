"""What the cost model is told about a program rather than finding out: the verifier's answers.

The cost model sits beside the verifier in the layers (`kir <- verifier | costmodel`), so it
runs none of the verifier's rules; the caller that has both (`agent.pipeline`'s cost stage, a
benchmark, a test) hands them in as `Checks` (`verifier.facts.CHECKS` answers with the
verifier's rules). Each question is asked only when an estimate needs its answer:

- `target_errors(program, target, params)`: for a program written for another target, what the
  target rules of `target` find that it lacks (mbarriers, TMA, wgmma, warp roles, ...): the
  estimate warns once (`cost.target`) that it leaves their work out or counts it as its
  nearest equivalent;
- `where_contradiction(program, params)`: when shapes break the kernel's `where`, whether these
  parameters leave no shapes at all (`types.where`, as `kir check` reports it): that is said
  instead of `cost.where-violated`, since no shape would do.

Without them an estimate has no `cost.target` warning, and shapes that break the `where` are
always `cost.where-violated`.
"""

from __future__ import annotations

from typing import Protocol

from kir.diagnostics import Diagnostic
from kir.program import Program


class Checks(Protocol):
    def target_errors(self, program: Program, target: str, params: dict[str, int] | None) -> list[Diagnostic]:
        """The findings of `target`'s target-legality rules on `program` (errors first)."""
        ...

    def where_contradiction(self, program: Program, params: dict[str, int]) -> list[Diagnostic]:
        """The diagnostic when no shapes satisfy the kernel's `where` with `params`, else none."""
        ...
