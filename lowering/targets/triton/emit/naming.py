"""Python names for KIR values: a value keeps its KIR name where no live value holds it, and
names bound outside a loop body are never reused inside it (Triton would make them
loop-carried)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.ir import Region, SSAValue

from kir.dialect.types import dtype_of

from .tables import ident


@dataclass
class Scope:
    """The Python names bound in one region of the kernel (its body, a loop body, a branch)."""

    names: set[str] = field(default_factory=set)
    # Names bound outside this region that a value of the same type may take here: the loop's
    # carried variables, or the results of the `if` this region is a branch of (assigning them
    # is what the region ends with anyway).
    carried: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    # A branch's sibling: the reads there of a value do not keep it alive in this branch.
    sibling: Region | None = None


class Naming:
    """The naming part of `KernelWriter` (`scopes`, `holder`, `reserved`, `liveness` are its)."""

    def _bound(self, name: str) -> bool:
        return any(name in s.names for s in self.scopes)

    def _can_take(self, name: str, value: SSAValue, at: int, vtype, same_type: bool) -> bool:
        if name in self.reserved:
            return False
        if not self._bound(name):
            return True
        holder = self.holder.get(name)
        dead = holder is None or self.liveness.last_use(holder) <= at
        scope = self.scopes[-1]
        if name in scope.names and name not in scope.carried:
            return dead and (not same_type or holder is None or self._type(holder) == vtype)
        if name in scope.carried:
            if scope.sibling is not None and holder is not None:
                dead = self.liveness.last_use(holder, skip=scope.sibling) <= at
            return dead and scope.carried[name] == vtype
        return False

    def _type(self, value: SSAValue) -> tuple[str, tuple[int, ...]]:
        return dtype_of(value.type), self._shape(value, None)

    def _name(self, value: SSAValue, at: int, same_type: bool = False, prefer: Sequence[str] = ()) -> str:
        """A Python name for a value defined at position `at`: its KIR name when no live value
        holds it in this region, else the name with a suffix. Names bound outside the region
        are not reused (Triton would make them loop-carried), except the loop's own carried
        variables by a value of their type; `same_type` asks the same of any reused name (an
        `if`'s results, which Triton checks against the value before the `if`). Names in `prefer`
        come first, and so does the variable a value is yielded to at the end of its region."""
        vtype = self._type(value)
        wanted = [*prefer, *([self.yield_names[value]] if value in self.yield_names else [])]
        for name in wanted:
            if self._can_take(name, value, at, vtype, same_type):
                return self._bind(name, value)
        if value.name_hint:
            base = ident(value.name_hint)
            if self._can_take(base, value, at, vtype, same_type):
                return self._bind(base, value)
            n = 1
            while self._bound(f"{base}_{n}") or f"{base}_{n}" in self.reserved:
                n += 1
            return self._bind(f"{base}_{n}", value)
        while True:
            name = f"_t{self.temp_count}"
            self.temp_count += 1
            if not self._bound(name) and name not in self.reserved:
                return self._bind(name, value)

    def _bind(self, name: str, value: SSAValue) -> str:
        self.scopes[-1].names.add(name)
        self.holder[name] = value
        return name

    def _fresh(self, hint: str) -> str:
        base = ident(hint) if hint else "i"
        name, n = base, 0
        while self._bound(name) or name in self.reserved:
            n += 1
            name = f"{base}_{n}"
        self.scopes[-1].names.add(name)
        return name
