"""Proposers: `propose(context) -> [Proposal]`, the children a search expands a node into.
The tactic proposer (`agent.propose.tactic`) enumerates the applicable tactics and ranks their
results with the cost model; it needs no LLM."""
