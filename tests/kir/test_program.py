"""`Program.clone` is a deep copy: a program of its own, printing as the original, keeping every
op's span and comments; changing the copy leaves the original as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.dialects import test as xdsl_test
from xdsl.dialects.builtin import i32
from xdsl.ir import Block, Region

from kir.check import verify_ops
from kir.dialect.structure import ForOp
from kir.parser import parse
from kir.program import Program, clone_op, preorder, same_ir
from kir.spans import block_comments_of, comments_of, set_comments, span_of

ROOT = Path(__file__).resolve().parents[2]

# Comments everywhere the parser keeps them: before the kernel, before and after a statement, a
# blank line before one, after a block's `{`, after a block's last statement, after the kernel.
COMMENTED = """\
# header
kernel rows<BLOCK = 256>(x: global f32[M, N], y: out global f32[M, N])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)  # the row's lanes

  # the lanes inside N
  mask = cols < N
  acc = zeros(f32[BLOCK])
  for k in 0 .. 4 {  # four passes
    acc = acc + load(x[row, cols], mask = mask, other = 0.0)
    # end of the loop body
  }
  store(y[row, cols], acc, mask = mask)
}
# footer
"""

SUITE = [
    ROOT / "benchmarks" / "tasks" / "causal_attention" / "persistent.kir",  # the largest
    ROOT / "examples" / "softmax.kir",
    ROOT / "examples" / "gemm_hopper_ws.kir",
]


def programs() -> list[Program]:
    return [parse(COMMENTED, file="commented.kir")] + [parse(f.read_text(), file=str(f)) for f in SUITE]


def _values(op):
    yield from op.results
    for region in op.regions:
        for block in region.blocks:
            yield from block.args


@pytest.mark.parametrize("program", programs(), ids=["commented", *(f.stem for f in SUITE)])
def test_clone_is_a_deep_copy_with_spans_and_comments(program: Program) -> None:
    text = program.text()
    copy = program.clone()
    assert copy.text() == text
    assert same_ir(copy, program)
    assert verify_ops(copy) == []
    assert same_ir(parse(copy.text(), file="again.kir"), program)
    olds, news = preorder(program.kernel), preorder(copy.kernel)
    assert len(olds) == len(news)
    old_ids = {id(op) for op in olds}
    old_blocks = {id(b) for op in olds for r in op.regions for b in r.blocks}
    for old, new in zip(olds, news, strict=True):
        assert type(new) is type(old) and id(new) not in old_ids
        assert span_of(new) == span_of(old)
        assert comments_of(new) == comments_of(old)
        for region in range(len(old.regions)):
            assert block_comments_of(new, region) == block_comments_of(old, region)
        assert new.properties == old.properties and new.properties is not old.properties
        assert new.attributes is not old.attributes
        # every operand is the copy's own value, with a use of it that names this op
        for index, (value, use) in enumerate(zip(new.operands, new._operand_uses, strict=True)):
            assert id(value.owner) not in old_ids | old_blocks
            assert use.operation is new and use.index == index
            assert any(u is use for u in value.uses)
        # each value's uses in the same order as its original's
        for a, b in zip(_values(old), _values(new), strict=True):
            assert b.name_hint == a.name_hint and b.type == a.type
            assert [(olds.index(u.operation), u.index) for u in a.uses] == [
                (news.index(u.operation), u.index) for u in b.uses
            ]
    # the original's values are used by the original's ops only
    for op in olds:
        for value in _values(op):
            assert all(id(u.operation) in old_ids for u in value.uses)


def test_changing_the_clone_leaves_the_original_unchanged() -> None:
    program = parse(COMMENTED, file="commented.kir")
    text = program.text()
    copy = program.clone()
    loop = next(op for op in preorder(copy.kernel) if isinstance(op, ForOp))
    body = list(loop.body.block.ops)
    set_comments(body[0], ["changed"], "also changed")
    copy.kernel.param_defaults = copy.with_params(BLOCK=512).kernel.param_defaults
    copy.header_comments.append("# more")
    copy.clause_spans.clear()
    store = list(copy.kernel.body.block.ops)[-1]
    store.detach()
    store.erase()
    assert copy.text() != text
    assert program.text() == text
    assert verify_ops(program) == []


def test_a_value_used_before_its_definition_or_from_outside() -> None:
    # Not in KIR's text, but clone_op keeps xdsl's meaning: a value defined later in the cloned
    # ops is the copy's; one defined outside them is shared.
    outside = xdsl_test.TestOp(result_types=[i32])
    later = xdsl_test.TestOp(result_types=[i32])
    user = xdsl_test.TestOp(operands=[later.results[0], outside.results[0]])
    root = xdsl_test.TestOp(regions=[Region(Block([user, later]))])
    copy = clone_op(root)
    new_user, new_later = copy.regions[0].block.ops
    assert new_user.operands[0] is new_later.results[0]
    assert new_user.operands[1] is outside.results[0]
    assert [u.operation for u in new_later.results[0].uses] == [new_user]
    assert {u.operation for u in outside.results[0].uses} == {user, new_user}


def test_branches_between_blocks_are_cloned_by_xdsl() -> None:
    target = Block()
    target.add_op(xdsl_test.TestOp())
    source = Block([xdsl_test.TestTermOp(successors=[target])])
    root = xdsl_test.TestOp(regions=[Region([source, target])])
    copy = clone_op(root)
    new_source, new_target = copy.regions[0].blocks
    (branch,) = new_source.ops
    assert branch.successors[0] is new_target
    assert new_target is not target


def test_clone_keeps_names_that_end_in_underscore_digits() -> None:
    # xdsl's clone sets each name hint through its setter, which strips a `_N` suffix: the old
    # Program.clone printed the name `offs_1_2` is read as (`offs_1`) as `offs`.
    program = parse(
        """\
kernel k<BLOCK = 256>(x: global f32[N], y: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs_1_2 = program_id(0) * BLOCK + arange(0, BLOCK)
  store(y[offs_1_2], load(x[offs_1_2], mask = offs_1_2 < N), mask = offs_1_2 < N)
}
""",
        file="names.kir",
    )
    copy = program.clone()
    assert [v.name_hint for op in preorder(copy.kernel) for v in _values(op)] == [
        v.name_hint for op in preorder(program.kernel) for v in _values(op)
    ]
    assert copy.text() == program.text()
