"""`kir run -b interp`: the program run by the reference interpreter, which defines what every
other target must compute."""

from __future__ import annotations

from typing import Any

import numpy as np

from kir.interp import run


class InterpreterRuntime:
    """The CPU runtime interface (lowering.targets) over `kir.interp.run`."""

    def prepare(self, lowered: None) -> None:
        """Nothing to build: the interpreter reads the program."""

    def run(
        self, program: Any, params: dict[str, int], lowered: None, arrays: dict[str, np.ndarray]
    ) -> tuple[dict[str, np.ndarray], None]:
        return run(program, arrays, params), None
