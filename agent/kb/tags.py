"""What a document is about beyond its words: its tags, and the names a search narrows by.

A tag is `<what>:<value>`:

| tag | on | meaning |
| --- | --- | --- |
| `rule:<id>` | a rule's document (a tactic's: `rule:tactic.<name>`) | it is about the diagnostics of this id, and of the ids under it (`tactic.warps` covers `tactic.warps.explicit`) |
| `cites:<id>` | any document | its text names this diagnostic id (`interp.out-of-bounds`, `multi.arg`) |
| `target:<name>` | a manual's sections, a calibration | it is about this KIR target and no other |
| `mentions:<name>` | any document | its text names this target, a chip or an architecture of it (sm_90, H200, MI300X...) |
| `bottleneck:<name>` | any document | its text speaks of this resource (`BOTTLENECK_WORDS`) |
| `uses:<tactic>` | a learned tactic | one of its steps is this tactic |
| `tactic:<name>`, `family:<f>`, `severity:<s>`, `numerics:<n>`, `origin:learned` | rules, tactics, calibrations | what the registry says of it |

A bottleneck is named as the cost model names it: `Estimate.bottleneck` is a resource of
`costmodel.timing.RESOURCES`, `launch` or `dram-latency` on a GPU, and one of mtia-sim's unit
names (`costmodel.mtia.UNIT_NAMES`, short or long) on the simulator. Each maps to the tags it
boosts (`bottleneck_tags`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from agent.kb.doc import KbError, shown
from kir.names import suggest
from kir.targets import TARGET_TABLES

TARGETS = tuple(TARGET_TABLES)  # the KIR targets (kir.targets), without importing the dialect

# Words that name a target in prose: the target's own spelling, its chips and its architecture.
# `interp` is left out: its name is in every `interp.*` diagnostic id.
TARGET_WORDS: dict[str, tuple[str, ...]] = {
    "sm_90": ("sm_90a?", "hopper", "h100", "h200", "gh100"),
    "sm_80": ("sm_80", "ampere", "a100"),
    "gfx942": ("gfx942", "cdna3", "mi300x?"),
    "gfx90a": ("gfx90a", "cdna2", "mi250x?", "mi210"),
    "mtia-sim": ("mtia-sim", "mtia"),
}
_TARGET_PATTERNS = {t: re.compile(r"\b(?:" + "|".join(words) + r")\b", re.I) for t, words in TARGET_WORDS.items()}
# What `target=` also takes: a chip or an architecture, as the cost model's tables name them.
TARGET_ALIASES = {
    "hopper": "sm_90", "h100": "sm_90", "h200": "sm_90", "sm_90a": "sm_90",
    "ampere": "sm_80", "a100": "sm_80",
    "cdna3": "gfx942", "mi300x": "gfx942", "mi300": "gfx942",
    "cdna2": "gfx90a", "mi250x": "gfx90a", "mi250": "gfx90a", "mi210": "gfx90a",
    "mtia": "mtia-sim", "mtia_sim": "mtia-sim",
}  # fmt: skip

# The resources a document's text can be about, and the words that say so (lower case).
BOTTLENECK_WORDS: dict[str, str] = {
    "dram": r"\bdram\b|\bhbm\w*|device memory|global (?:memory|loads?|stores?)|memory[- ]bound|bandwidth",
    "l2": r"\bl2\b",
    "l1": r"\bl1\b",
    "spill": r"\bspill",
    "tensor": r"tensor[- ]cores?|\bwgmma\b|\bmma\b|\bmfma\b|dot-product engine|\bdpe\b|matrix (?:multiply|instruction|core)",
    "fma": r"\bf?fma\b",
    "alu": r"\balu\b|vector unit|elementwise|arithmetic",
    "int": r"integer (?:pipe|unit|arithmetic|ops)",
    "sfu": r"\bsfu\b|\bmufu\b|special-function|transcendental|\bex2\b|\bexp2?\b|\brsqrt\b",
    "lsu": r"shared memory|\bsmem\b|\blds\b|bank conflict|\blsu\b|load/store unit",
    "launch": r"\blaunch (?:overhead|latency|time)\b|\bwaves?\b|\bpersistent\b",
    "latency": r"latency|\bstall|in flight|\boverlap|pipelin",
    "red": r"reduction engine",
    "control": r"control processor",
}
_BOTTLENECK_PATTERNS = {b: re.compile(words, re.I) for b, words in BOTTLENECK_WORDS.items()}

# A bottleneck as the cost model says it -> the tags it boosts.
BOTTLENECKS: dict[str, tuple[str, ...]] = {
    **{b: (b,) for b in BOTTLENECK_WORDS},
    "dram-latency": ("dram", "latency"),
    "overhead": ("launch",),
    # mtia-sim's units (costmodel.mtia.UNIT_NAMES), short and long, with their GPU counterparts
    "vec": ("alu",),
    "vector unit": ("alu",),
    "special-function unit": ("sfu",),
    "reduction engine": ("red",),
    "dpe": ("tensor",),
    "dot-product engine": ("tensor",),
    "port": ("dram",),
    "device-memory port": ("dram",),
    "control processor (commands and stalls)": ("control", "latency"),
}

# A diagnostic id in prose: `family.name-with-dashes`, the family one the toolchain reports.
_DIAGNOSTIC_ID = re.compile(r"(?<![\w.])([a-z][a-z0-9]*(?:\.[a-z0-9]+(?:-[a-z0-9]+)*)+)(?![\w-])")
DIAGNOSTIC_FAMILIES = frozenset({"interp", "multi", "lower", "syntax", "mtia", "compile", "run", "io", "harness"})
_FILE_SUFFIXES = frozenset({"py", "toml", "md", "kir", "json", "hpp", "cpp", "lark", "txt", "npz", "sqlite", "html"})


def target_of(name: str) -> str:
    """The KIR target `name` means (a target, a chip or an architecture), or a `KbError`."""
    key = name.strip().lower()
    if key in TARGETS:
        return key
    if key in TARGET_ALIASES:
        return TARGET_ALIASES[key]
    known = [*TARGETS, *TARGET_ALIASES]
    raise KbError(f"unknown target {shown(name)}", suggest(name, known) or f"one of {', '.join(TARGETS)}")


def bottleneck_tags(name: str) -> tuple[str, ...]:
    """The `bottleneck:` tags that a bottleneck of the cost model boosts, or a `KbError`."""
    key = name.strip().lower()
    if key not in BOTTLENECKS:
        short = ", ".join(b for b in BOTTLENECKS if " " not in b)
        raise KbError(f"unknown bottleneck {shown(name)}", suggest(key, BOTTLENECKS) or f"one of {short}")
    return tuple(f"bottleneck:{b}" for b in BOTTLENECKS[key])


def detected(text: str) -> list[str]:
    """The `mentions:` and `bottleneck:` tags that a document's words give it."""
    tags = [f"mentions:{t}" for t, pattern in _TARGET_PATTERNS.items() if pattern.search(text)]
    tags += [f"bottleneck:{b}" for b, pattern in _BOTTLENECK_PATTERNS.items() if pattern.search(text)]
    return tags


def cited(text: str, families: Iterable[str]) -> list[str]:
    """`cites:` tags for the diagnostic ids the text names, in code spans (`` `sync.parity` ``),
    whose family is one of `families` or one the toolchain reports outside the verifier."""
    known = DIAGNOSTIC_FAMILIES | set(families)
    found: dict[str, None] = {}
    for span in re.findall(r"`([^`\n]+)`", text):
        for match in _DIAGNOSTIC_ID.finditer(span):
            ident = match.group(1)
            parts = ident.split(".")
            if parts[0] in known and parts[-1] not in _FILE_SUFFIXES:
                found[f"cites:{ident}"] = None
    return list(found)
