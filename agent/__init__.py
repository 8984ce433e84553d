"""The agent's side of the toolchain: tasks (what to compute), the evaluation harness (what
"correct" and "fast" mean), and, later, search over KIR programs."""
