"""The tactic proposer: every applicable tactic with every value of its parameters' domains
(at most `per_tactic` combinations each), applied to the node's program; each result is
verified and costed by the one pipeline (`evaluate(until="cost")`), and the `measure_top`
fastest by the cost model's prediction are proposed for measurement, so that only the most
promising reach the hardware (TVM's and Ansor's cost-model filter). Results that the verifier or
the cost stage stops are proposed too, as stopped, so the search keeps them in its tree."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import tactics
from agent.pipeline import Candidate, evaluate
from agent.propose.base import Context, Proposal, Proposer
from agent.search.tree import Move
from kir.diagnostics import KirError
from kir.parser import parse
from kir.program import Program


class TacticProposer(Proposer):
    name = "tactic"

    def __init__(self, per_tactic: int = 8, numerics: tuple[str, ...] = ("exact", "reassociates", "approximate")):
        self.per_tactic = per_tactic
        self.numerics = numerics
        self._programs: dict[str, Program] = {}

    def program(self, key: str, text: str) -> Program:
        found = self._programs.get(key)
        if found is None:
            found = self._programs[key] = parse(text, file=f"<node {key[:12]}>")
        return found

    def moves(self, program: Program, context: Context) -> Iterator[tuple[Move, Program]]:
        """Each applicable tactic with each combination of its parameter values, applied."""
        target = context.target
        for tactic, domains in tactics.applicable(program, target, self.numerics, context.shapes):  # type: ignore[arg-type]
            names = sorted(domains)
            combos = itertools.product(*(domains[n] for n in names))
            for values in itertools.islice(combos, self.per_tactic):
                params: dict[str, Any] = dict(zip(names, values, strict=True))
                try:
                    child = tactic.apply(program, target=target, **params)
                except KirError:
                    continue  # a combination the tactic's checks refuse (its validate)
                yield Move(self.name, tactic.name, tuple(sorted(params.items()))), child

    def propose(self, context: Context) -> list[Proposal]:
        node = context.node
        program = self.program(node.key, node.text)
        ranked: list[Proposal] = []
        stopped: list[Proposal] = []
        seen = set(context.seen)
        for move, child in self.moves(program, context):
            candidate = Candidate.from_program(child)
            key = candidate.key()
            if key in seen:
                continue
            seen.add(key)
            record = evaluate(candidate, until="cost", target=context.target, task=context.task, preset=context.preset)
            text = child.text()
            if not record.ok:
                stopped.append(Proposal(text, move, key, static=record))
                continue
            predicted = (record.estimate or {}).get("time_s")
            self._programs[key] = child
            ranked.append(Proposal(text, move, key, predicted=predicted))
        # fastest predicted first; a move's text breaks ties, so the order does not depend on
        # the order the registry lists tactics in
        ranked.sort(key=lambda p: (p.predicted if p.predicted is not None else float("inf"), p.move.describe()))
        return ranked[: context.measure_top] + stopped
