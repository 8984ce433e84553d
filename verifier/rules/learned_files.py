"""The learned family: the rule files of `verifier/rules/learned/` (and of `$KIR_LEARNED_DIR`),
registered when this module is imported, as every family module registers its rules. The files
are data that `verifier.learned` reads and matches; nothing in them is executed."""

from __future__ import annotations

from verifier.learned import load_learned_rules

load_learned_rules()
