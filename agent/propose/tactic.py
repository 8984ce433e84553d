"""The tactic proposer: every applicable tactic with every value of its parameters' domains
(at most `per_tactic` combinations each), applied to the node's program; each result is
verified and costed by the one pipeline (`evaluate(until="cost")`), and the `measure_top`
fastest by the cost model's prediction are proposed for measurement, so that only the most
promising reach the hardware (TVM's and Ansor's cost-model filter). Results that the verifier or
the cost stage stops are proposed too, as stopped, so the search keeps them in its tree.

Each result is also lowered for the search's backend (the pipeline's lower stage, after the
cost): one the backend cannot lower is stopped there, before compile; one whose target code is the same as that of a program the proposer has already
seen (its parent's, a sibling's, any earlier node's) is dropped: on mtia-sim an alignment
promise or a cache policy changes no line of the C++ the simulator runs, and measuring it
again would spend the budget on a program already measured (tinygrad's BEAM caches by kernel
for the same reason). Where the backend has no emitter the cost stage is the last.

A move the cost model predicts no gain from may enable one it does (a fixed shape proves a DMA's
rows aligned, and only then is a loop pipelined; a promised divisibility drops the masks a
retile needs gone): for up to `lookahead` such children, the proposer applies every tactic once
more and ranks the child by the best prediction among its own children (its `potential`), so that
the enabling move is measured and the next round takes the move it enables (even where its
target code is a measured node's: the code is the same, the program it leads to is not). This
is a one-step search on the cost model; the grandchildren are only costed, never proposed.

Learned tactics (agent.learn.tactics: sequences of moves that won on earlier tasks' best paths,
kept where they helped on tasks they were not mined from) are offered first, those learned from
the search's backend: each that applies
to the node makes one child (its steps' open parameters chosen by the cost model), verified and
lowered like the rest, measured ahead of the ranked children, its move named by the learned
tactic."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import tactics
from agent.learn.tactics import LearnedTactic
from agent.learn.tactics import apply as apply_learned
from agent.pipeline import Candidate, Record, evaluate
from agent.propose.base import Context, Proposal, Proposer
from agent.search.tree import Move
from costmodel import CostModel
from kir.diagnostics import KirError
from kir.parser import parse
from kir.program import Program
from lowering import targets
from verifier.facts import CHECKS

# A result whose `where` clauses exclude the search's shapes is not a candidate of this search
# (the search measures at one preset): a tactic's parameter domains are listed one parameter at
# a time, so fix-shape offers every symbol with every shape's value, and all but the matching
# pairs are such programs. They are dropped, not kept as stopped children.
NOT_FOR_THESE_SHAPES = frozenset({"cost.where-violated"})

# Children predicted within this fraction of their parent's time gain nothing by the model: the
# proposer looks one move past up to LOOKAHEAD of them (see the module docstring).
NO_GAIN = 1e-3
LOOKAHEAD = 16


class TacticProposer(Proposer):
    name = "tactic"

    def __init__(
        self,
        per_tactic: int = 32,
        numerics: tuple[str, ...] = ("exact", "reassociates", "approximate"),
        lookahead: int = LOOKAHEAD,
        learned: list[LearnedTactic] | None = None,
        model: CostModel | None = None,
    ):
        self.per_tactic = per_tactic
        self.numerics = numerics
        self.lookahead = lookahead
        self.learned = list(learned or [])  # offered first where they apply (agent.learn.tactics)
        self.model = model or CostModel()  # what ranks the children (a learned calibration, or none)
        self._predicted: dict[str, float | None] = {}  # candidate key -> its predicted time
        self._programs: dict[str, Program] = {}
        self._variant_of: dict[str, str | None] = {}  # candidate key -> its target code's hash

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

    def _static(self, candidate: Candidate, key: str, context: Context) -> Record:
        """Verify and cost the candidate for the search's target; lower what passes for the
        search's backend, where it has an emitter, and note the hash of its target code. (The
        lowering verifies the program for its declared target, as a run does.)"""
        record = evaluate(
            candidate, until="cost", target=context.target, task=context.task, preset=context.preset,
            cost_model=self.model,
        )  # fmt: skip
        self._predicted[key] = (record.estimate or {}).get("time_s") if record.ok else None
        code = None
        if record.ok and context.backend is not None and context.backend in targets.emitting():
            lowered = evaluate(candidate, until="lower", backend=context.backend)
            if not lowered.ok:
                # what the backend cannot lower (a bf16 dot with K = 8 on Triton) stops here,
                # before compile, not at run time
                self._variant_of[key] = None
                return lowered
            if lowered.lowered is not None:
                # the source and what it is launched with: one Triton source with other
                # constexpr tiles or warps is another kernel
                code_of = {k: lowered.lowered.get(k) for k in ("source", "launch")}
                code = hashlib.sha256(json.dumps(code_of, sort_keys=True, default=str).encode()).hexdigest()
        self._variant_of[key] = code
        return record

    def _looked_ahead(self, ranked: list[Proposal], base: float | None, context: Context) -> list[Proposal]:
        """`ranked` with the potential of up to `lookahead` children predicted no faster than
        their parent (`base`): the best prediction among their own children that the same
        move, made on the parent, does not reach (a move the child enables, not one the parent
        could make already)."""
        if not self.lookahead or base is None:
            return ranked
        direct = {p.move.describe(): p.predicted for p in ranked if p.predicted is not None}
        # the neutral children, each tactic's in turn (every tactic's first, then its second...)
        nth: dict[str, int] = {}
        order = []
        for p in sorted(ranked, key=lambda p: (p.predicted or 0.0, p.move.describe())):
            if p.predicted is not None and p.predicted >= base * (1 - NO_GAIN):
                nth[p.move.name] = nth.get(p.move.name, -1) + 1
                order.append((nth[p.move.name], p.predicted, p.move.describe(), p))
        neutral = [entry[-1] for entry in sorted(order, key=lambda e: e[:3])][: self.lookahead]
        out = {p.key: p for p in ranked}
        for p in neutral:
            best = None
            for move, grandchild in self.moves(self._programs[p.key], context):
                t = _predict(grandchild, context, self.model)
                bar = min(base, direct.get(move.describe(), base))
                if t is not None and t < bar * (1 - NO_GAIN) and (best is None or t < best):
                    best = t
            if best is not None:
                out[p.key] = replace(p, potential=best)
        return [out[p.key] for p in ranked]

    def propose(self, context: Context) -> list[Proposal]:
        node = context.node
        program = self.program(node.key, node.text)
        ranked: list[Proposal] = []
        same: list[Proposal] = []  # children whose target code is a measured node's
        stopped: list[Proposal] = []
        seen = set(context.seen)
        if node.key not in self._variant_of:  # the node's own code (the seed; a resumed search)
            self._static(Candidate.from_program(program), node.key, context)
        # the target code of the tree's nodes: a child with the same code is measured already
        measured = {self._variant_of.get(k) for k in context.seen | {node.key}} - {None}
        for move, child in self.moves(program, context):
            candidate = Candidate.from_program(child)
            key = candidate.key()
            if key in seen:
                continue
            seen.add(key)
            record = self._static(candidate, key, context)
            text = child.text()
            if not record.ok:
                if {d.rule for d in record.errors} <= NOT_FOR_THESE_SHAPES:
                    continue  # a program for other shapes than the search's (fix-shape's other pairs)
                stopped.append(Proposal(text, move, key, static=record))
                continue
            predicted = (record.estimate or {}).get("time_s")
            self._programs[key] = child
            if self._variant_of[key] in measured:
                # measured already, unless it enables a move (its potential, below)
                same.append(Proposal(text, move, key, predicted=predicted))
                continue
            ranked.append(Proposal(text, move, key, predicted=predicted))
        looked = self._looked_ahead(ranked + same, self._predicted.get(node.key), context)
        again = {p.key for p in same}
        ranked = [p for p in looked if p.key not in again or p.potential is not None]
        # fastest predicted (or reachable in one more move) first; a move's text breaks ties,
        # so the order does not depend on the order the registry lists tactics in
        ranked.sort(key=_rank)
        distinct: list[Proposal] = []
        codes: set[str] = set()
        for p in ranked:  # of children with one target code, the first in this order
            code = self._variant_of[p.key]
            if p.potential is not None:
                distinct.append(p)  # an enabling move: its code may be another's, its program is not
                continue
            if code is not None and code in codes:
                continue
            if code is not None:
                codes.add(code)
            distinct.append(p)
        first = self._learned(program, context, seen, measured)
        taken = {p.key for p in first}
        rest = [p for p in distinct if p.key not in taken]
        return first + _diverse(rest, max(0, context.measure_top - len(first))) + stopped

    def _learned(self, program: Program, context: Context, seen: set[str], measured: set) -> list[Proposal]:
        """The children the learned tactics make, where they apply and verify: the `measure_top`
        the cost model predicts fastest (a tactic's place in the library says nothing of what
        it makes of this program)."""
        out: list[Proposal] = []
        for lt in self.learned:
            if lt.backend and context.backend and lt.backend != context.backend:
                continue  # what won on one backend's measurements is no evidence on another's
            child = apply_learned(lt, program, context.target, context.shapes)
            if child is None:
                continue
            candidate = Candidate.from_program(child)
            key = candidate.key()
            if key in context.seen or key in {p.key for p in out}:
                continue
            record = self._static(candidate, key, context)
            if not record.ok or self._variant_of.get(key) in measured - {None}:
                continue  # stopped, or target code a measured node has
            seen.add(key)
            self._programs[key] = child
            predicted = (record.estimate or {}).get("time_s")
            out.append(Proposal(child.text(), Move(self.name, lt.name), key, predicted=predicted))
        out.sort(key=_rank)
        return out[: context.measure_top]


def _predict(program: Program, context: Context, model: CostModel) -> float | None:
    """The cost model's time for a program a tactic made (the tactic checked its result; the
    verifier's proofs, most of a child's static cost, are left to the child it would become),
    or None where the model refuses it."""
    shapes = {k: v for k, v in context.shapes.items() if k not in program.params}
    try:
        estimate = model.predict(program, context.target, dict(program.params), shapes, checks=CHECKS)
    except KirError:
        return None
    return estimate.time_s if not any(d.is_error for d in estimate.hints) else None


def _rank(p: Proposal) -> tuple[float, float, str]:
    inf = float("inf")
    predicted = p.predicted if p.predicted is not None else inf
    potential = min(predicted, p.potential if p.potential is not None else inf)
    return (potential, predicted, p.move.describe())


def _diverse(ranked: list[Proposal], k: int) -> list[Proposal]:
    """The `k` to measure: the best predicted child of each tactic first, in the ranking's order,
    then the next best of any tactic. The cost model orders children of one tactic better than
    children of different ones (a persistent grid's variants, predicted fastest on one chip,
    would otherwise fill every slot of every expansion and no other move would be measured)."""
    firsts: list[Proposal] = []
    tactics_seen: set[str] = set()
    for p in ranked:
        if p.move.name not in tactics_seen:
            tactics_seen.add(p.move.name)
            firsts.append(p)
    chosen = firsts[:k]
    taken = {p.key for p in chosen}
    chosen += [p for p in ranked if p.key not in taken][: k - len(chosen)]
    return sorted(chosen, key=ranked.index)
