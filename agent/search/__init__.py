"""The search: strategies (one a file, ask/tell), the tree they read, memory operators, and
the loop that joins a strategy, a proposer, an executor and a store (`agent.search.loop`)."""

# What a proposer sees of the tree for the node it expands (KernelEvolve's memory operator): the
# node's ancestors, its siblings, both, or nothing of the search (a fresh start from the node).
# (Here, not in base.py, so that the command line knows them without loading the pipeline.)
MEMORIES = ("parent", "siblings", "both", "fresh")
