"""The LLM proposer: a model writes the child, a whole KIR program, from a prompt that says what
the compiler knows about the parent.

The prompt (`prompt`) holds the task (its reference source and the shapes at the search's
preset), the parent program with its Record (the verifier's diagnostics, the cost model's time,
bottleneck and largest terms, the measured score), what the memory operator shows of the tree
(the ancestors and siblings: move, stage, score, the first errors), the tactics that apply to
the parent, and what the knowledge base retrieves for the parent's rule ids and bottleneck
(`retrieve`, a function of those). The model answers with the whole program in a ```kir block, or with SEARCH/REPLACE edits of the
parent (`extract`).

Each reply is checked statically (parse, verify, cost: `agent.pipeline.evaluate`). A reply that
does not get through is a stopped child with its Record, and its diagnostics go back to the
model as the next turn, up to `repairs` times; the first that gets through is the child to
measure. Every request is an exchange in the store (`Store.record_exchange`, keyed by the hash
of the model and the request, written as soon as the reply came): a resumed search finds each
request's reply there and sends nothing twice, and its spending goes on from what the store
holds. Tokens and money (the endpoint's prices) are counted per request, shown on each child's
move, and held to the search's budgets: no request is sent that the budget cannot pay for,
counting its prompt at one token per three characters and its reply at `max_tokens`, capped to
what is left. A fatal endpoint error (gone, key refused) stops the proposer; the search ends
its round and stops with the reason.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import tactics
from agent.pipeline import Candidate, Record, evaluate
from agent.propose.base import Context, Proposal, Proposer
from agent.propose.endpoints import Endpoint, EndpointError, Reply
from agent.search.tree import Move, Node
from agent.store.base import Store
from costmodel import CostModel
from kir.diagnostics import Diagnostic, KirError
from kir.parser import parse

SYSTEM = """You write GPU kernels in KIR, a typed IR. A program is one kernel (or several, launched in order):

kernel NAME<PARAM = 128, ...>(x: global f32[M, N], y: out global f32[M, N])
  where N <= PARAM
  target sm_90 grid(cdiv(M, 4)) warps(4)
{
  row = program_id(0)
  cols = arange(0, PARAM)
  v = load(x[row, cols], mask = cols < N)
  store(y[row, cols], v * 2.0, mask = cols < N)
}

Values are tiles; shapes in brackets are static expressions over parameters and shape symbols.
Keep the kernel's name, arguments and their order, and the target. Change what makes it faster
(tiles, grid, warps, loops, pipelining, the order of work) and keep it exactly correct.
Answer with the whole program in one ```kir block and nothing after it, or with edits of the
program, each a block of lines it has and the lines to put there instead:
<<<<<<< SEARCH
  target sm_90 grid(M) warps(4)
=======
  target sm_90 grid(M) warps(8)
>>>>>>> REPLACE"""

FENCE = re.compile(r"```(?:kir)?[ \t]*\n(.*?)```", re.DOTALL)
EDIT = re.compile(r"<<<<<<< SEARCH\n(.*?)\n=======\n(.*?)\n?>>>>>>> REPLACE", re.DOTALL)
CHARS_PER_TOKEN = 3  # a prompt's tokens, counted before sending (at most; real tokenizers do more)


def extract(reply: str, parent: str | None = None) -> tuple[str, str | None]:
    """The program of a reply and what is wrong with the reply itself (None): with SEARCH/REPLACE
    edits, the parent with each edit made in turn (an edit whose lines the program does not hold
    once is refused); else the last fenced block (```kir or bare), else the whole text."""
    edits = EDIT.findall(reply)
    if edits and parent is not None:
        text = parent
        for i, (old, new) in enumerate(edits, 1):
            count = text.count(old)
            if count != 1:
                where = "is not in the program" if count == 0 else f"is in the program {count} times"
                return (
                    text,
                    f"edit {i}: its SEARCH lines {where}; quote lines of the program exactly, enough to be unique",
                )
            text = text.replace(old, new, 1)
        return text if text.endswith("\n") else text + "\n", None
    blocks = FENCE.findall(reply)
    return (blocks[-1] if blocks else reply).strip() + "\n", None


class LLMProposer(Proposer):
    name = "llm"

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        store: Store | None = None,
        search: int | None = None,
        tokens: int | None = None,
        money: float | None = None,
        repairs: int = 2,
        max_tokens: int = 4096,
        retrieve: Callable[[Sequence[str], str | None, str | None], list[str]] | None = None,
        model: CostModel | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.store = store
        self.search = search
        self.tokens_budget = tokens
        self.money_budget = money
        self.repairs = repairs
        self.max_tokens = max_tokens
        self.retrieve = retrieve
        self.model = model or CostModel()
        self.spent: dict[str, Any] = {
            "tokens": 0, "input_tokens": 0, "output_tokens": 0, "money": 0.0, "requests": 0, "replayed": 0,
        }  # fmt: skip
        self.stopped_because: str | None = None
        if store is not None and search is not None:
            for ex in store.exchanges(search):  # what a resumed search spent before
                self._count(int(ex["input_tokens"]), int(ex["output_tokens"]), float(ex["cost"]))

    # ---- what the loop reads ---------------------------------------------------------------

    def usage(self) -> dict[str, Any]:
        return dict(self.spent)

    def done_reason(self) -> str | None:
        return self.stopped_because

    # ---- proposing ---------------------------------------------------------------------------

    def propose(self, context: Context) -> list[Proposal]:
        if self.stopped_because:
            return []
        turns = [{"role": "user", "content": self.prompt(context)}]
        found: list[Proposal] = []
        seen = set(context.seen)
        for attempt in range(1 + self.repairs):
            asked = self._ask(turns)
            if asked is None:
                break
            reply, exchange, cost = asked
            text, problem = extract(reply.text, context.node.text)
            candidate = Candidate(text, file=f"<reply {exchange[:12]}>")
            if problem is not None:  # an edit that does not apply: the reply's fault, said as its Record
                record = Record(
                    candidate.key(), candidate.file, "parse", False, "cost",
                    diagnostics=(Diagnostic("llm.edit", "error", None, problem, "or answer with the whole program"),),
                )  # fmt: skip
            else:
                record = evaluate(
                    candidate, until="cost", target=context.target, task=context.task, preset=context.preset,
                    cost_model=self.model,
                )  # fmt: skip
            move = Move(
                self.name, "rewrite" if attempt == 0 else "repair",
                (("attempt", attempt), ("exchange", exchange[:16]), ("model", reply.model),
                 ("tokens", reply.input_tokens + reply.output_tokens), ("cost", round(cost, 6))),
            )  # fmt: skip
            key = record.candidate
            if record.ok:
                if key not in seen:
                    found.insert(0, Proposal(text, move, key, predicted=(record.estimate or {}).get("time_s")))
                break
            if key not in seen:
                seen.add(key)
                found.append(Proposal(text, move, key, static=record))
            turns += [{"role": "assistant", "content": reply.text}, {"role": "user", "content": feedback(record)}]
        return found

    def _ask(self, turns: list[dict[str, str]]) -> tuple[Reply, str, float] | None:
        """The reply to these turns (from the store when this search asked them before), its
        exchange key and cost; None when the budget cannot pay for it or the endpoint is gone."""
        system = SYSTEM
        max_tokens = self.max_tokens
        if self.tokens_budget is not None:
            left = self.tokens_budget - self.spent["tokens"] - _prompt_tokens(system, turns)
            max_tokens = min(max_tokens, left)
            if max_tokens < 256:  # not enough left for a program
                self.stopped_because = f"token budget ({self.tokens_budget}) spent"
                return None
        if self.money_budget is not None:
            prices = self.endpoint.prices
            worst = prices.cost(_prompt_tokens(system, turns), max_tokens)
            if self.spent["money"] + worst > self.money_budget:
                self.stopped_because = f"money budget ({self.money_budget:g}) spent"
                return None
        # the request as the model sees it: where the endpoint is served from is not part of it
        request = {
            "provider": self.endpoint.provider, "model": self.endpoint.model, "system": system, "turns": turns,
            "max_tokens": max_tokens,
        }  # fmt: skip
        key = hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()
        old = self.store.exchange(self.search, key) if self.store is not None and self.search is not None else None
        if old is not None and old.get("reply") is not None:
            self.spent["replayed"] += 1
            reply = Reply(old["reply"], int(old["input_tokens"]), int(old["output_tokens"]), old["model"])
            return reply, key, float(old["cost"])
        try:
            reply = self.endpoint.complete(system, turns, max_tokens)
        except EndpointError as err:
            self._write(key, request, None, str(err), 0, 0, 0.0)
            if err.fatal:
                self.stopped_because = f"the LLM endpoint stopped answering: {err}"
            return None
        cost = self.endpoint.prices.cost(reply.input_tokens, reply.output_tokens)
        self._count(reply.input_tokens, reply.output_tokens, cost)
        self.spent["requests"] += 1
        self._write(key, request, reply.text, None, reply.input_tokens, reply.output_tokens, cost, reply.model)
        return reply, key, cost

    def _count(self, input_tokens: int, output_tokens: int, cost: float) -> None:
        self.spent["input_tokens"] += input_tokens
        self.spent["output_tokens"] += output_tokens
        self.spent["tokens"] += input_tokens + output_tokens
        self.spent["money"] += cost

    def _write(self, key, request, reply, error, tin, tout, cost, model=None) -> None:
        if self.store is None or self.search is None:
            return
        self.store.record_exchange(
            self.search, key,
            {"model": model or self.endpoint.model, "request": json.dumps(request, sort_keys=True), "reply": reply,
             "error": error, "input_tokens": tin, "output_tokens": tout, "cost": cost},
        )  # fmt: skip

    # ---- the prompt --------------------------------------------------------------------------

    def prompt(self, context: Context) -> str:
        node = context.node
        parts = [f"# Task: {getattr(context.task, 'name', '?')}"]
        task = context.task
        if task is not None:
            try:
                source = task.reference_file.read_text()
            except OSError:
                source = ""
            parts += ["The reference (PyTorch) the kernel must match:", "```python", source[:6000].rstrip(), "```"]
        if context.shapes:
            parts.append(
                f"Shapes at preset {context.preset}: " + ", ".join(f"{k} = {v}" for k, v in context.shapes.items())
            )
        parts += ["", "# The program to improve", "```kir", node.text.rstrip(), "```", *describe(node)]
        if context.memory:
            parts += ["", "# What was tried around it (move: stage, score)"]
            for other in context.memory[:8]:
                parts.append(f"- {other.move.describe()}: {_outcome(other)}")
        moves = self._tactics(node.text, context)
        if moves:
            parts += ["", "# Transformations that apply to it (tactic: what it does)", *moves]
        if self.retrieve is not None:
            rules = [d.rule for d in (node.record.diagnostics if node.record else ())]
            bottleneck = ((node.record.estimate or {}) if node.record else {}).get("bottleneck")
            notes = self.retrieve(rules, bottleneck, context.target)
            if notes:
                parts += ["", "# Notes from the manuals", *notes]
        parts += ["", "Write a faster program that computes the same result. The whole program, in one ```kir block."]
        return "\n".join(parts)

    def _tactics(self, text: str, context: Context) -> list[str]:
        try:
            program = parse(text)
        except KirError:
            return []
        out = []
        for tactic, _ in tactics.applicable(program, context.target, shapes=context.shapes):
            out.append(f"- {tactic.name}: {tactic.summary}")
        return out[:20]


def describe(node: Node) -> list[str]:
    """What the Record of a node says, in a few lines: its stage, score, diagnostics and cost."""
    rec = node.record
    if rec is None:
        return ["Not measured yet."]
    lines = [f"Its evaluation: stage {rec.stage}, {'ok' if rec.ok else 'failed'}, score {node.score}."]
    for d in rec.diagnostics[:8]:
        where = f"line {d.span.line}: " if d.span else ""
        lines.append(f"- {d.severity}[{d.rule}] {where}{d.message}" + (f" (hint: {d.hint})" if d.hint else ""))
    est = rec.estimate or {}
    if est:
        lines.append(f"The cost model: {est.get('time_s', 0) * 1e6:.1f} us, bound by {est.get('bottleneck')}.")
        for term in (est.get("breakdown") or [])[:5]:
            lines.append(f"- {term.get('seconds', 0) * 1e6:.1f} us {term.get('name')}: {term.get('note', '')}")
    return lines


def feedback(record: Record) -> str:
    """The next turn after a reply that did not get through: its stage and diagnostics."""
    lines = [f"That program stopped at {record.stage}:"]
    for d in record.errors[:10] or record.diagnostics[:10]:
        where = f"line {d.span.line}, column {d.span.col}: " if d.span else ""
        lines.append(f"- error[{d.rule}] {where}{d.message}" + (f" (hint: {d.hint})" if d.hint else ""))
    lines.append("Fix it and answer with the whole program in one ```kir block.")
    return "\n".join(lines)


def _outcome(node: Node) -> str:
    if node.record is None:
        return "not measured"
    if node.score is not None:
        return f"{node.record.stage}, {node.score:g}"
    first = node.record.errors[:1]
    return f"stopped at {node.record.stage}" + (f" ({first[0].rule})" if first else "")


def _prompt_tokens(system: str, turns: list[dict[str, str]]) -> int:
    return -(-(len(system) + sum(len(t["content"]) for t in turns)) // CHARS_PER_TOKEN)
