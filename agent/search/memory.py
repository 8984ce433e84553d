"""Memory operators: what a proposer sees of the tree for the node it expands (KernelEvolve):
its ancestors (the moves that led here, with their Records), its siblings (the other children of
its parent: what was tried beside it), both, or nothing (a fresh start from the node alone)."""

from __future__ import annotations

from agent.search.tree import Node, Tree


def remembered(tree: Tree, node: int, memory: str) -> tuple[Node, ...]:
    if memory == "fresh":
        return ()
    chain = tuple(tree.chain(node)[:-1]) if memory in ("parent", "both") else ()
    siblings = tuple(tree.siblings(node)) if memory in ("siblings", "both") else ()
    return chain + siblings
