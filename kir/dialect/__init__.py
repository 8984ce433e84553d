"""The KIR dialect: types, attributes and ops, registered as one xdsl `Dialect`."""

from xdsl.ir import Attribute, Dialect

from kir.dialect import explicit as _explicit
from kir.dialect import structure as _structure
from kir.dialect import tile as _tile  # noqa: F401
from kir.dialect.explicit import *  # noqa: F403
from kir.dialect.structure import *  # noqa: F403
from kir.dialect.tile import *  # noqa: F403
from kir.dialect.types import *  # noqa: F403
from kir.dialect.types import AccessAttr, GlobalType, LayoutAttr, MBarrierType, ScalarType, SmemType, SymAttr, TileType


def _ops(module) -> list[type]:
    from xdsl.irdl import IRDLOperation

    return [
        v
        for v in vars(module).values()
        if isinstance(v, type)
        and issubclass(v, IRDLOperation)
        and v is not IRDLOperation
        and v.__module__ == module.__name__
    ]


OPS = [*_ops(_structure), *_ops(_tile), *_ops(_explicit)]
ATTRIBUTES: list[type[Attribute]] = [
    ScalarType,
    TileType,
    GlobalType,
    SmemType,
    MBarrierType,
    SymAttr,
    AccessAttr,
    LayoutAttr,
]
KIR = Dialect("kir", OPS, ATTRIBUTES)
