"""How hard the randomized tests try.

CI runs every property and fuzz test on a quarter of its examples (the examples are derandomized,
so a CI run is repeatable); the full size is for a nightly or manual run: `KIR_TESTS=full`
(`.ci/run --full`). Tests marked `full_only` run only then.
"""

from __future__ import annotations

import os

FULL = os.environ.get("KIR_TESTS", "").strip().lower() == "full"


def examples(full: int) -> int:
    """`full` examples in a full run, a quarter of them (at least 20) in CI."""
    return full if FULL else max(20, full // 4)
