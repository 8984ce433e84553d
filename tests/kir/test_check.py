"""kir.check.verify_ops: every op verified once, then the nesting of regions, blocks and ops."""

from __future__ import annotations

from kir.check import verify_ops
from kir.dialect.structure import ForOp
from kir.parser import parse

TEXT = """\
kernel k<B = 64>(x: global f32[N], y: out global f32[N])
  target sm_90 grid(cdiv(N, B)) warps(4)
{
  i = pid(0) * B + arange(0, B)
  acc = zeros(f32[B])
  for t in 0 .. 4 {
    acc = acc + load(x[i], mask = i < N)
  }
  store(y[i], acc, mask = i < N)
}
"""


def program():
    return parse(TEXT.replace("pid(0)", "program_id(0)"), file="k.kir")


def test_a_well_formed_program_has_no_op_errors():
    assert verify_ops(program()) == []


def test_an_op_that_names_the_wrong_block_as_its_parent_is_reported_at_it():
    p = program()
    loop = next(op for op in p.kernel.walk() if isinstance(op, ForOp))
    body = loop.regions[0].blocks[0]
    stray = body.first_op
    stray.parent = p.kernel.regions[0].blocks[0]  # a pointer left wrong by a faulty rewrite
    (d,) = verify_ops(p)
    assert d.rule == "op.verify" and "does not refer to the block that holds it" in d.message
    assert d.span is not None and d.span.line == 7


def test_an_empty_loop_body_is_reported():
    p = program()
    loop = next(op for op in p.kernel.walk() if isinstance(op, ForOp))
    body = loop.regions[0].blocks[0]
    for op in list(body.ops):
        op.detach()
    (d,) = verify_ops(p)
    assert d.rule == "op.verify" and "must end with a yield" in d.message
    assert d.span is not None and d.span.line == 6
