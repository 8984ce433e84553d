"""The simulated MTIA-like accelerator's runtime: `mtia_sim.hpp` (header-only C++), documented
as the chip's manual in docs/hardware/mtia-sim.md."""

from pathlib import Path

HEADER_DIR = Path(__file__).parent
