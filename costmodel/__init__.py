"""The cost model: a predicted time, bottleneck and breakdown for a KIR program on a chip.

Four verbs, as TVM MetaSchedule's cost model: `predict`, `update`, `save`, `load` (`model.py`).
One file per concern:

| file | concern |
| --- | --- |
| `spec.py` | the chip: rates and sizes from the target tables (`kir/targets/*.toml`, `[cost]`) |
| `counting.py` | per program: bytes of each global access, shared-memory traffic, flops per unit, trip counts, registers, shared memory |
| `occupancy.py` | blocks per SM and what limits them |
| `estimate.py` | `Estimate` and `Term`, binding parameters and shapes, counting or failing |
| `model.py` | L2 reuse between the programs of a wave, the estimate and its breakdown |
| `timing.py` | waves, tail, drain, overlap of memory with compute, launch: the seconds |
| `calibration.py` | per-target correction factors fitted to measured times |
| `hints.py` | performance hints as diagnostics (`cost.*`) |
| `checks.py` | what the caller tells the model of a program: the verifier's answers (`verifier.facts.CHECKS`) |

    from costmodel import CostModel
    est = CostModel().predict(program, "sm_90", params={"BM": 128}, shapes={"M": 4096, "N": 4096, "K": 4096})
    # with checks=verifier.facts.CHECKS: the cost.target warning off the program's own target
    print(est.time_s, est.bottleneck)
    for term in est.breakdown: print(term.name, term.seconds, term.span, term.note)

`kir cost FILE --target T --shape M=4096` prints the same (`agent.pipeline`'s cost stage; the text from `costmodel/cli.py`).
"""

from costmodel.model import CostModel, Estimate, Term, analyze, predict
from costmodel.spec import Chip, chip

__all__ = ["CostModel", "Estimate", "Term", "analyze", "predict", "Chip", "chip"]
