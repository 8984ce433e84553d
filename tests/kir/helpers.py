"""Helpers the language tests share."""

from __future__ import annotations

import pytest

from kir.diagnostics import Diagnostic, KirError
from kir.dialect import explicit as ex
from kir.parser import parse


def only_wgmma(program) -> ex.WgmmaOp:
    """The program's one wgmma."""
    (op,) = [o for o in program.kernel.walk() if isinstance(o, ex.WgmmaOp)]
    return op


def first_error(text: str) -> Diagnostic:
    """The first diagnostic of a text that does not parse."""
    with pytest.raises(KirError) as err:
        parse(text, file="t.kir")
    (d, *_) = err.value.diagnostics
    return d
