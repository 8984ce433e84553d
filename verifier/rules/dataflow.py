"""Dataflow: where values and memory contents come from and go to. The family's rules live in
one module per job:

- `dataflow_arguments`: `dataflow.output-unwritten` (an `out` tensor that nothing writes, or
  whose writes cannot cover every element for some shape the `where` clause allows) and
  `dataflow.input-written` (a write to a tensor that is not marked `out`);
- `dataflow_write_overlap`: `dataflow.write-overlap` (two programs of the grid write the same
  output element);
- `dataflow_smem_overlap`: `dataflow.smem-overlap` (an asynchronous copy into a shared view
  while an overlapping view of the same buffer is used, or a role reading a view that overlaps
  what another role writes in the same iteration without being covered by it);
- `dataflow_read_before_write`: `dataflow.read-before-write` (a read of shared memory that
  nothing writes first, or of an output before the program wrote it);
- `dataflow_dead_values`: `dataflow.unused-value` (a load whose value nothing uses) and
  `dataflow.dead-store` (a loop-carried value reset in the loop, a value or a store overwritten
  before any use);
- `dataflow_masked_reduce`: `dataflow.masked-reduce` (a reduction over masked-off lanes that do
  not hold its identity);

and `dataflow_facts` holds what they share: the memory each op reads and writes, and the
symbolic index of an access.
"""

from __future__ import annotations

import importlib

# The engine runs the checks in the order they were registered, and the checks share the
# context's symbolic evaluator: the rule that evaluates a value first decides the order of the
# facts that every later query hands to z3, and the counterexample z3 picks (which messages
# quote) can depend on that order. The parts are therefore imported here, in the order the
# family's rules have always run; `load_rules` imports this module before them, as its name
# sorts first.
_PARTS = (
    "dataflow_arguments",
    "dataflow_write_overlap",
    "dataflow_smem_overlap",
    "dataflow_read_before_write",
    "dataflow_dead_values",
    "dataflow_masked_reduce",
)

for _part in _PARTS:
    importlib.import_module(f"verifier.rules.{_part}")
