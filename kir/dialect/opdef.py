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

import functools
from abc import ABCMeta
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from xdsl.dialects.builtin import UNKNOWN_LOC, DenseArrayBase, i32
from xdsl.ir import Attribute, OpResult, SSAValue, Use
from xdsl.ir.core import SSAValues
from xdsl.irdl import IRDLOperation, irdl_op_definition
from xdsl.irdl.constraints import AnyAttr, BaseAttr, EqIntConstraint, RangeLengthConstraint, RangeOf, SingleOf
from xdsl.irdl.operations import (
    AfterVariadicSingleAccessor,
    AttrSizedOperandSegments,
    BaseAttrAccessor,
    BeforeVariadicSingleAccessor,
    OpDef,
    OperandDef,
    OptionalAttrAccessor,
    OptionalDef,
    OptOperandDef,
    OptPropertyDef,
    PropertyDef,
    ResultDef,
    SingleAttrAccessor,
    VarIRConstruct,
    VarOperandDef,
)

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


_SEGMENTS = AttrSizedOperandSegments.attribute_name


class _SimpleDef:
    """The generic checks of a simple definition: operands and results and properties, each
    constrained to any attribute or to instances of one class. The results are fixed; the
    operands are fixed (`kinds` None) or have optional and variadic slots (`kinds`: "one",
    "opt" or "var" per slot), whose sizes the op's segment-size property gives (`sized`) or,
    for a single such slot, the number of operands implies."""

    __slots__ = ("operands", "kinds", "sized", "results", "required", "optional", "traits")

    def __init__(self, operands, kinds, sized, results, required, optional, traits) -> None:
        self.operands: tuple[Check, ...] = operands
        self.kinds: tuple[str, ...] | None = kinds
        self.sized: bool = sized
        self.results: tuple[Check, ...] = results
        self.required: dict[str, Check] = required
        self.optional: dict[str, Check] = optional
        self.traits = traits

    def holds(self, op: IRDLOperation) -> bool:
        operands, results = op.operands, op.results
        if len(results) != len(self.results) or op.regions or op.successors:
            return False
        if self.kinds is None:
            if len(operands) != len(self.operands):
                return False
            for value, check in zip(operands, self.operands, strict=True):
                if check is not None and not isinstance(value.type, check):
                    return False
        elif not self._segments_hold(op, operands):
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

    def _segments_hold(self, op: IRDLOperation, operands) -> bool:
        kinds = self.kinds
        assert kinds is not None
        if self.sized:
            attr = op.properties.get(_SEGMENTS)
            if not isinstance(attr, DenseArrayBase) or attr.elt_type != i32:
                return False
            sizes = attr.get_values()
        else:  # one optional or variadic slot: it holds what the fixed ones leave
            rest = len(operands) - (len(kinds) - 1)
            sizes = tuple(rest if k != "one" else 1 for k in kinds)
        if len(sizes) != len(kinds) or sum(sizes) != len(operands):
            return False
        at = 0
        for kind, size, check in zip(kinds, sizes, self.operands, strict=True):
            if size < 0 or (kind == "one" and size != 1) or (kind == "opt" and size > 1):
                return False
            if check is not None:
                for k in range(at, at + size):
                    if not isinstance(operands[k].type, check):
                        return False
            at += size
        return True


def _simple(op_def: OpDef) -> _SimpleDef | None:
    """The definition as a `_SimpleDef`, or None when it holds more than simple checks."""
    if op_def.regions or op_def.successors or op_def.attributes:
        return None
    sized = False
    for option in op_def.options:
        if type(option) is AttrSizedOperandSegments and option.as_property:
            sized = True
        else:
            return None
    operands: list[Check] = []
    kinds: list[str] = []
    for _, d in op_def.operands:
        if type(d) is OperandDef:
            ok, check = _range_check(d.constr)
            kinds.append("one")
        elif type(d) in (VarOperandDef, OptOperandDef) and type(d.constr) is RangeOf:
            ok, check = _attr_check(d.constr.constr)
            kinds.append("opt" if type(d) is OptOperandDef else "var")
        else:
            return None
        if not ok:
            return None
        operands.append(check)
    variable = sum(k != "one" for k in kinds)
    if variable > 1 and not sized or sized and not variable:
        return None  # (sizes xdsl would take as equal, or a segment property for nothing)
    results: list[Check] = []
    for _, rd in op_def.results:
        ok, check = _range_check(rd.constr) if type(rd) is ResultDef else (False, None)
        if not ok:
            return None
        results.append(check)
    required: dict[str, Check] = {}
    optional: dict[str, Check] = {}
    for name, pd in op_def.properties.items():
        if type(pd) not in (PropertyDef, OptPropertyDef):
            return None
        ok, check = _attr_check(pd.constr)
        if not ok:
            return None
        (optional if type(pd) is OptPropertyDef else required)[name] = check
    if sized:
        required[_SEGMENTS] = None  # (its type and values: `_segments_hold`)
    return _SimpleDef(
        tuple(operands),
        tuple(kinds) if variable else None,
        sized,
        tuple(results),
        required,
        optional,
        tuple(op_def.traits),
    )


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


# (op class, trait class or trait) -> the op's trait that matches, or None
_TRAITS: dict[tuple[type, Any], Any] = {}


def _get_trait(cls, trait):
    """xdsl's `get_trait`, remembered per class: an op's traits belong to its class, and the
    verifier's rules ask about them at every op (a search through the traits each time, with an
    isinstance test per trait, was a tenth of checking a long program)."""
    key = (cls, trait)
    try:
        return _TRAITS[key]
    except KeyError:
        found = _TRAITS[key] = IRDLOperation.get_trait.__func__(cls, trait)
        return found
    except TypeError:  # an unhashable trait value: asked directly
        return IRDLOperation.get_trait.__func__(cls, trait)


@functools.lru_cache(maxsize=1024)
def _segment_sizes(sizes: tuple[int, ...]) -> DenseArrayBase:
    """The segment-size property for these sizes (an immutable attribute: one per sizes)."""
    return DenseArrayBase.from_list(i32, sizes)


def _segmented(kinds: tuple[str, ...], args: Sequence[Any]) -> tuple[list[SSAValue], tuple[int, ...]] | None:
    """The operands of a segmented definition as one list with each slot's size, or None when
    an argument does not fit its slot (xdsl's builder then says how)."""
    if len(args) != len(kinds):
        return None
    built: list[SSAValue] = []
    sizes: list[int] = []
    for kind, arg in zip(kinds, args, strict=True):
        if arg is None:
            if kind == "one":
                return None
            sizes.append(0)
        elif isinstance(arg, SSAValue):
            built.append(arg)
            sizes.append(1)
        elif isinstance(arg, list | tuple):
            if kind == "one" and len(arg) != 1 or kind == "opt" and len(arg) > 1:
                return None
            for v in arg:
                if not isinstance(v, SSAValue):
                    return None
            built.extend(arg)
            sizes.append(len(arg))
        else:
            return None
    return built, tuple(sizes)


class _KirOpMeta(ABCMeta):
    """The class of KIR's op classes: isinstance and issubclass as for ordinary classes.

    xdsl's ops are abstract base classes, whose isinstance test runs Python code to consult
    virtual subclasses, a few times slower than an ordinary class's; the verifier's rules ask
    "is this op a load?" of every op, for most of which the answer is no. No KIR op class has
    virtual subclasses (nothing registers one), so the ordinary test gives the same answers."""

    __instancecheck__ = type.__instancecheck__
    __subclasscheck__ = type.__subclasscheck__


def _init_plain(
    op: IRDLOperation, operands: Sequence[SSAValue], result_types: Sequence[Attribute], properties: dict
) -> None:
    """`Operation.__init__` for an op without attributes, successors or regions, then the
    definition's default properties: the fields it sets, set directly (its generic path, with an
    import at each call for the default location, was a fifth of building an op). The fields
    not set here (parent, neighbours, successors, regions) keep their class defaults."""
    values = SSAValues(operands)
    uses = tuple(Use(op, i) for i in range(len(values)))
    for value, use in zip(values, uses, strict=True):
        value.add_use(use)
    op._operands = values
    op._operand_uses = uses
    op.results = SSAValues(OpResult(t, op, i) for i, t in enumerate(result_types))
    op.properties = properties
    op.attributes = attributes = {}
    op.location = UNKNOWN_LOC
    defaults = type(op).__dict__.get("_defaults")
    if defaults is None:
        defaults = _defaults(type(op))
    for name, default in defaults[0]:
        properties.setdefault(name, default)
    for name, default in defaults[1]:
        attributes[name] = default


def _defaults(cls: type) -> tuple[tuple[tuple[str, Attribute], ...], tuple[tuple[str, Attribute], ...]]:
    """The properties and the attributes an op of `cls` takes when not given (those that
    `IRDLOperation.__post_init__` fills in), worked out once per class."""
    op_def = cls.get_irdl_definition()  # type: ignore[attr-defined]

    def of(defs: Mapping[str, Any]) -> tuple[tuple[str, Attribute], ...]:
        return tuple(
            (name, d.default_value)
            for name, d in defs.items()
            if not isinstance(d, OptionalDef) and d.default_value is not None
        )

    found = (of(op_def.properties), of(op_def.attributes))
    cls._defaults = found  # type: ignore[attr-defined]
    return found


class KirOperation(IRDLOperation, metaclass=_KirOpMeta):
    """The base of every KIR op. Its constructor builds an op of a simple definition (see the
    module's docstring) directly: xdsl's generic builder sorts each argument into its
    definition's slots (optional, variadic, segment sizes), which for an op of fixed operands
    and results is a third of building it. Anything else, and any call that does not fit the
    definition's counts, goes through xdsl's builder, which also says what does not fit."""

    def __init__(
        self,
        *,
        operands: Sequence[Any] | None = None,
        result_types: Sequence[Any] | None = None,
        properties: Mapping[str, Attribute | None] | None = None,
        attributes: Mapping[str, Attribute | None] | None = None,
        successors: Sequence[Any] | None = None,
        regions: Sequence[Any] | None = None,
    ) -> None:
        cls = type(self)
        kinds = cls.__dict__.get("_operand_kinds")
        if kinds is not None and operands is not None and not attributes and not successors and not regions:
            flat = _segmented(kinds, operands)
            if flat is not None and len(result_types or ()) == cls.__dict__["_result_count"]:
                built, sizes = flat
                props = {k: v for k, v in properties.items() if v is not None} if properties else {}
                props[_SEGMENTS] = _segment_sizes(sizes)
                if all(isinstance(t, Attribute) for t in result_types or ()):
                    _init_plain(self, built, result_types or (), props)
                    return
        counts = cls.__dict__.get("_fixed_counts")
        if (
            counts is not None
            and not attributes
            and not successors
            and not regions
            and len(operands or ()) == counts[0]
            and len(result_types or ()) == counts[1]
            and all(isinstance(v, SSAValue) for v in operands or ())
            and all(isinstance(t, Attribute) for t in result_types or ())
        ):
            _init_plain(
                self,
                operands or (),
                result_types or (),
                {k: v for k, v in properties.items() if v is not None} if properties else {},
            )
            return
        super().__init__(
            operands=operands,
            result_types=result_types,
            properties=properties,
            attributes=attributes,
            successors=successors,
            regions=regions,
        )


# segment-size attribute (by identity, kept alive with it) -> each segment's (start, size)
_SEGMENT_SPANS: dict[int, tuple[Any, tuple[tuple[int, int], ...]]] = {}


def _spans(attr: Any) -> tuple[tuple[int, int], ...]:
    found = _SEGMENT_SPANS.get(id(attr))
    if found is not None and found[0] is attr:
        return found[1]
    if len(_SEGMENT_SPANS) >= 4096:
        _SEGMENT_SPANS.clear()
    spans, start = [], 0
    for size in attr.get_values():
        spans.append((start, size))
        start += size
    _SEGMENT_SPANS[id(attr)] = (attr, tuple(spans))
    return tuple(spans)


_SINGLE, _OPTIONAL, _VARIADIC = 0, 1, 2


class _SegmentAccessor:
    """xdsl's accessor of a named operand in a segmented definition (`load.mask`), with each
    segment's start and size worked out once per segment-size attribute, and the operand read
    from the op's operand tuple: xdsl unpacks the attribute's bytes and sums the sizes before
    it at every access, through a view of the operands, and the rules read an access's operands
    at every op (a tenth of checking a long program). Same values as xdsl's accessor (a
    variadic segment: the same `SSAValues` slice)."""

    __slots__ = ("idx", "inner", "kind")

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.idx = inner.idx
        if isinstance(inner, SingleAttrAccessor):
            self.kind = _SINGLE
        elif isinstance(inner, OptionalAttrAccessor):
            self.kind = _OPTIONAL
        else:
            self.kind = _VARIADIC

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        start, size = _spans(obj.properties[_SEGMENTS])[self.idx]
        operands = obj._operands
        if self.kind == _SINGLE:
            return operands[start]
        if self.kind == _OPTIONAL:
            return operands[start] if size else None
        return operands[start : start + size]

    def __set__(self, obj: Any, value: Any) -> None:
        self.inner.__set__(obj, value)


# Where a construct's values are kept on an op (the operands' tuple, not xdsl's view of it).
_CONSTRUCT_FIELD = {
    VarIRConstruct.OPERAND: "_operands",
    VarIRConstruct.RESULT: "results",
    VarIRConstruct.REGION: "regions",
}


class _FixedAccessor:
    """xdsl's accessor of a named operand, result or region at a fixed position (before any
    variadic one, or counted from the end after it), reading the op's own tuple: xdsl's asks
    for a view of the construct and indexes that, and every rule, pass and emitter reads
    operands by name at every op. Same values as xdsl's accessor."""

    __slots__ = ("field", "inner", "position")

    def __init__(self, inner: Any, position: int) -> None:
        self.inner = inner
        self.field = _CONSTRUCT_FIELD[inner.construct]
        self.position = position

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return getattr(obj, self.field)[self.position]

    def __set__(self, obj: Any, value: Any) -> None:
        self.inner.__set__(obj, value)


def op_definition(cls: type[OpT]) -> type[OpT]:
    """`irdl_op_definition`, with the class's own `verify_` kept as `own_verify`, the generic
    checks run directly where they are simple, and trait lookups remembered."""
    own = getattr(cls, "verify_", None) or _no_checks
    defined = irdl_op_definition(cls)
    defined.get_trait = classmethod(_get_trait)  # type: ignore[method-assign, assignment]
    defined.own_verify = own  # type: ignore[attr-defined]
    defined.verify_ = _verifier(defined.get_irdl_definition(), own)  # type: ignore[method-assign, assignment]
    for name, value in list(vars(defined).items()):
        if (
            isinstance(value, BaseAttrAccessor)
            and value.construct == VarIRConstruct.OPERAND
            and type(value.option) is AttrSizedOperandSegments
            and value.option.as_property
        ):
            setattr(defined, name, _SegmentAccessor(value))
        elif type(value) is BeforeVariadicSingleAccessor and value.construct in _CONSTRUCT_FIELD:
            setattr(defined, name, _FixedAccessor(value, value.idx))
        elif type(value) is AfterVariadicSingleAccessor and value.construct in _CONSTRUCT_FIELD:
            setattr(defined, name, _FixedAccessor(value, value.idx - value.num_defs))
    simple = _simple(defined.get_irdl_definition())
    defined.simple_definition = simple is not None  # type: ignore[attr-defined]
    if simple is not None and simple.kinds is not None and simple.sized:
        defined._operand_kinds = simple.kinds  # type: ignore[attr-defined]
        defined._result_count = len(simple.results)  # type: ignore[attr-defined]
    if simple is not None and simple.kinds is None:
        defined._fixed_counts = (len(simple.operands), len(simple.results))  # type: ignore[attr-defined]
    return defined
