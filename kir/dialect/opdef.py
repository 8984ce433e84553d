"""The decorator every KIR op is defined with: xdsl's `irdl_op_definition`, with the op's own
checks kept apart from the generic ones and the generic ones made cheap where they are simple.

xdsl's `verify_` of an IRDL op runs the generic checks of its definition (the number of operands,
results and regions, the properties present, the constraint on each) and then the op's own
`verify_`. Two things follow for KIR, whose long programs hold tens of thousands of ops:

- An op built by its own constructor meets the generic checks by construction, so the builder,
  which verifies each op as it is emitted, runs only the op's own checks (`own_verify`: the typing
  rules a program's text can break). The checker (`kir.check.verify_ops`) verifies every op in
  full, once. (Verifying in full twice was a fifth of parsing a long program.)
- Most KIR ops have fixed operands and results whose constraint is "any attribute" or "an
  instance of one class", and properties of that kind: for those the generic checks are a few
  counts and `isinstance` tests, which `verify_` runs directly (`_simple_checks`). Any op whose
  definition has more (variadic or optional operands, regions, constraint variables, attribute
  definitions), and any op that fails the simple checks, is verified by xdsl's own code, which
  gives its message. The two agree on every op (tests/kir/test_opdef.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from xdsl.irdl import IRDLOperation, irdl_op_definition
from xdsl.irdl.constraints import AnyAttr, BaseAttr, EqIntConstraint, RangeLengthConstraint, RangeOf, SingleOf
from xdsl.irdl.operations import OpDef, OperandDef, OptPropertyDef, PropertyDef, ResultDef

OpT = TypeVar("OpT", bound=IRDLOperation)

# An instance check (a class) or no check at all (None) for one operand, result or property.
Check = type | None


def _no_checks(op: IRDLOperation) -> None:
    """An op with no checks of its own."""


def _attr_check(constr: Any) -> tuple[bool, Check]:
    """(simple, check) for one attribute constraint: simple when it is "any" or "an instance of"."""
    if type(constr) is AnyAttr:
        return True, None
    if type(constr) is BaseAttr:
        return True, constr.attr
    return False, None


def _range_check(constr: Any) -> tuple[bool, Check]:
    """(simple, check) for the constraint of one fixed operand or result: a range of exactly one
    attribute, simple when that attribute's constraint is."""
    if type(constr) is SingleOf:
        return _attr_check(constr.constr)
    if (
        type(constr) is RangeLengthConstraint
        and type(constr.length) is EqIntConstraint
        and constr.length.value == 1
        and type(constr.constraint) is RangeOf
    ):
        return _attr_check(constr.constraint.constr)
    return False, None


class _SimpleDef:
    """The generic checks of a definition that holds nothing but fixed operands and results and
    properties, each constrained to any attribute or to instances of one class."""

    __slots__ = ("operands", "results", "required", "optional", "traits")

    def __init__(self, operands, results, required, optional, traits) -> None:
        self.operands: tuple[Check, ...] = operands
        self.results: tuple[Check, ...] = results
        self.required: dict[str, Check] = required
        self.optional: dict[str, Check] = optional
        self.traits = traits

    def holds(self, op: IRDLOperation) -> bool:
        operands, results = op.operands, op.results
        if len(operands) != len(self.operands) or len(results) != len(self.results):
            return False
        if op.regions or op.successors:
            return False
        for value, check in zip(operands, self.operands, strict=True):
            if check is not None and not isinstance(value.type, check):
                return False
        for value, check in zip(results, self.results, strict=True):
            if check is not None and not isinstance(value.type, check):
                return False
        props = op.properties
        for name, check in self.required.items():
            attr = props.get(name)
            if attr is None or (check is not None and not isinstance(attr, check)):
                return False
        if len(props) != len(self.required):
            for name, attr in props.items():
                if name in self.required:
                    continue
                if name not in self.optional:
                    return False
                check = self.optional[name]
                if check is not None and not isinstance(attr, check):
                    return False
        return True


def _simple(op_def: OpDef) -> _SimpleDef | None:
    """The definition as a `_SimpleDef`, or None when it holds more than simple checks."""
    if op_def.regions or op_def.successors or op_def.options or op_def.attributes:
        return None
    operands: list[Check] = []
    for _, d in op_def.operands:
        ok, check = _range_check(d.constr) if type(d) is OperandDef else (False, None)
        if not ok:
            return None
        operands.append(check)
    results: list[Check] = []
    for _, d in op_def.results:
        ok, check = _range_check(d.constr) if type(d) is ResultDef else (False, None)
        if not ok:
            return None
        results.append(check)
    required: dict[str, Check] = {}
    optional: dict[str, Check] = {}
    for name, d in op_def.properties.items():
        if type(d) not in (PropertyDef, OptPropertyDef):
            return None
        ok, check = _attr_check(d.constr)
        if not ok:
            return None
        (optional if type(d) is OptPropertyDef else required)[name] = check
    return _SimpleDef(tuple(operands), tuple(results), required, optional, tuple(op_def.traits))


def _verifier(op_def: OpDef, own: Callable[[Any], None]) -> Callable[[Any], None]:
    simple = _simple(op_def)
    if simple is None:

        def verify_(self) -> None:
            op_def.verify(self)
            own(self)

        return verify_

    def verify_simple(self) -> None:
        if simple.holds(self):
            for trait in simple.traits:
                trait.verify(self)
        else:  # xdsl's checks say what is wrong
            op_def.verify(self)
        own(self)

    return verify_simple


def op_definition(cls: type[OpT]) -> type[OpT]:
    """`irdl_op_definition`, with the class's own `verify_` kept as `own_verify` and the
    generic checks run directly where they are simple."""
    own = getattr(cls, "verify_", None) or _no_checks
    defined = irdl_op_definition(cls)
    defined.own_verify = own  # type: ignore[attr-defined]
    defined.verify_ = _verifier(defined.get_irdl_definition(), own)  # type: ignore[method-assign]
    defined.simple_definition = _simple(defined.get_irdl_definition()) is not None  # type: ignore[attr-defined]
    return defined
