"""The search: strategies (one a file, ask/tell), the tree they read, memory operators, and
the loop that joins a strategy, a proposer, an executor and a store (`agent.search.loop`)."""
