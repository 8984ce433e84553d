"""What the knowledge base holds, source by source. A `Source` names the files its documents are
made from (the index is rebuilt when one of them changes: agent/kb/index.py) and collects the
documents:

- `language`: docs/language.md, one document a `##` or `###` section (a heading with no text of
  its own, only sections under it, is left out);
- `hardware`: the manuals and notes of docs/hardware/ (mtia-sim's manual, the Hopper and CDNA
  notes), one document a section, each tagged with the targets its file is about (`MANUALS`);
- `targets`: docs/targets.md (how a lowering target is declared), one document a section;
- `rules`: every rule of the verifier's registry, learned rules included (`kir rules explain`);
- `tactics`: every registered tactic (`kir tactics explain`) and every learned tactic;
- `calibrations`: the cost model's learned calibrations, with what they fit and their provenance.

The files are found here without importing anything heavy (the index's key is computed on every
search); the registries are imported only when the documents are collected, that is when the
index is built.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent.kb.doc import Doc
from agent.kb.markdown import sections
from agent.kb.tags import cited, detected
from verifier.registry import FAMILIES

if TYPE_CHECKING:  # the learned-rule module imports the dialect: loaded only to build the index
    from verifier.learned import Provenance

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

# The targets each file of docs/hardware/ is about (by its stem); a file not listed here is
# tagged with the targets its title names.
MANUALS: dict[str, tuple[str, ...]] = {
    "mtia-sim": ("mtia-sim",),
    "hopper": ("sm_90",),
    "cdna": ("gfx90a", "gfx942"),
}


@dataclass(frozen=True)
class Source:
    name: str
    files: Callable[[], list[Path]]
    collect: Callable[[], list[Doc]]


def relative(path: Path | str) -> str:
    """A path as the documents name it: relative to the checkout where it is inside it."""
    p = Path(path).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def _glob(folder: Path, pattern: str) -> list[Path]:
    return sorted(folder.glob(pattern)) if folder.is_dir() else []


def _existing(*paths: Path) -> list[Path]:
    return [p for p in paths if p.is_file()]


def _fenced(code: str) -> str:
    return "```kir\n" + code.rstrip("\n") + "\n```"


# ---- the learned libraries' folders, as their loaders find them (tests/agent/test_kb.py checks) ---


def rule_dirs() -> list[Path]:
    """verifier.learned.rule_dirs: the package's folder, and $KIR_LEARNED_DIR."""
    builtin = ROOT / "verifier" / "rules" / "learned"
    extra = os.environ.get("KIR_LEARNED_DIR")
    return [builtin, Path(extra)] if extra and Path(extra).resolve() != builtin.resolve() else [builtin]


def tactic_dir() -> Path:
    """agent.learn.tactics.library_dir: $KIR_LEARNED_TACTICS, else tactics/learned."""
    return Path(os.environ.get("KIR_LEARNED_TACTICS") or ROOT / "tactics" / "learned")


def calibration_dir() -> Path:
    """costmodel.calibration.library_dir: $KIR_LEARNED_CALIBRATION, else costmodel/learned."""
    return Path(os.environ.get("KIR_LEARNED_CALIBRATION") or ROOT / "costmodel" / "learned")


# ---- Markdown files, a document a section ------------------------------------------------------


def _section_docs(
    path: Path, kind: str, prefix: str, targets: Iterable[str] = (), families: Iterable[str] = ()
) -> list[Doc]:
    if not path.is_file():
        return []
    out = []
    own = [f"target:{t}" for t in targets]
    for s in sections(path.read_text(encoding="utf-8")):
        if not s.body:
            continue  # a heading with sections under it and no text of its own: nothing to read
        text = s.body
        words = f"{s.heading}\n{text}"
        found = [t for t in detected(words) if t.replace("mentions:", "target:", 1) not in own]
        tags = dict.fromkeys([*own, *found, *cited(text, families)])
        title = f"{s.title}: {' > '.join(s.path)}" if s.path else s.title
        out.append(Doc(f"{prefix}/{s.slug}", kind, title, text, tuple(tags), f"{relative(path)}:{s.line}"))
    return out


def _language() -> list[Doc]:
    return _section_docs(DOCS / "language.md", "language", "language", families=_rule_families())


def _hardware() -> list[Doc]:
    out = []
    for path in _glob(DOCS / "hardware", "*.md"):
        targets = MANUALS.get(path.stem)
        if targets is None:
            first = sections(path.read_text(encoding="utf-8"))
            title = first[0].title if first else path.stem
            targets = tuple(t.removeprefix("mentions:") for t in detected(title) if t.startswith("mentions:"))
        out += _section_docs(path, "hardware", f"hardware/{path.stem}", targets, _rule_families())
    return out


def _targets() -> list[Doc]:
    return _section_docs(DOCS / "targets.md", "targets", "targets", families=_rule_families())


def _rule_families() -> set[str]:
    """The families a cited diagnostic id may be of: the verifier's, and the ids of learned
    items, tactics' preconditions and the harness."""
    return set(FAMILIES) | {"tactic", "harness"}


# ---- the verifier's rules ------------------------------------------------------------------------


def _rule_files() -> list[Path]:
    files = _existing(ROOT / "verifier" / "registry.py", ROOT / "verifier" / "learned.py")
    files += _glob(ROOT / "verifier" / "rules", "*.py")
    for folder in rule_dirs():
        files += _glob(folder, "*.toml")
    return files


def _rules() -> list[Doc]:
    import verifier
    from verifier.learned import LOADED, load_learned_rules
    from verifier.registry import CHECKS

    verifier.load_rules()
    load_learned_rules()
    modules = {c.rule.id: c.fn.__module__ for c in CHECKS}
    families = _rule_families()
    out = []
    for rid, rule in sorted(verifier.RULES.items()):
        learned = LOADED.get(rid)
        if learned is not None and not _installed(learned.path):
            continue  # retired, or from a folder no longer named, since this process registered it
        parts = [f"{rid} ({rule.family}, {rule.severity}): {rule.summary}", rule.explanation]
        if learned is not None:
            said = f"It says: {learned.message}" + (f"\nHint: {learned.hint}" if learned.hint else "")
            parts.append(said)
        parts += [f"Rejected (line {rule.bad_line}):\n{_fenced(rule.bad)}", f"Accepted:\n{_fenced(rule.good)}"]
        tags = [f"rule:{rid}", f"family:{rule.family}", f"severity:{rule.severity}"]
        if learned is not None:
            parts.append(_provenance(rid, learned.provenance))
            tags.append("origin:learned")
            source = relative(learned.path) if learned.path else ""
        else:
            module = sys.modules.get(modules.get(rid, ""))
            source = relative(module.__file__) if module is not None and module.__file__ else ""
        if rule.target:  # the target its examples are checked for
            tags.append(f"mentions:{rule.target}")
        prose = f"{rule.summary}\n{rule.explanation}"
        tags += detected(prose)
        tags += [t for t in cited(prose, families) if t != f"cites:{rid}"]
        text = "\n\n".join(parts)
        out.append(Doc(f"rule/{rid}", "rule", f"{rid}: {rule.summary}", text, tuple(dict.fromkeys(tags)), source))
    return out


def _provenance(rid: str, p: Provenance) -> str:
    """A learned rule's provenance (verifier.learned.Provenance) in words."""
    lines = [f"Provenance: {p.reason}", f"Support {p.support}, false positives {p.false_positives}"]
    if p.added or p.author:
        lines.append(f"Added {p.added or '-'} by {p.author or '-'}")
    if p.failures:
        lines.append("Failures it came from: " + ", ".join(p.failures))
    lines.append(f"Retire it with `kir rules retire {rid}`.")
    return "\n".join(lines)


def _installed(path: Path | None) -> bool:
    """Whether a learned rule's file is one the index is keyed by (`_rule_files`)."""
    return path is not None and path.is_file() and path.resolve().parent in {d.resolve() for d in rule_dirs()}


# ---- tactics, registered and learned -----------------------------------------------------------


def _tactic_files() -> list[Path]:
    return [*_glob(ROOT / "tactics", "*.py"), *_existing(ROOT / "agent" / "learn" / "tactics.py")] + _glob(
        tactic_dir(), "*.toml"
    )


def _tactics() -> list[Doc]:
    import tactics

    out = []
    known = {}
    for t in tactics.all():
        known[t.name] = t
        prose = f"{t.summary}\n{t.explain}"
        tags = [f"tactic:{t.name}", f"rule:tactic.{t.name}", f"numerics:{t.numerics}", *detected(prose)]
        module = sys.modules.get(t.check.__module__)
        source = relative(module.__file__) if module is not None and module.__file__ else ""
        title = f"{t.name}: {t.summary}"
        out.append(Doc(f"tactic/{t.name}", "tactic", title, t.explanation(), tuple(dict.fromkeys(tags)), source))
    return out + _learned_tactics(known)


def _learned_tactics(known: dict) -> list[Doc]:
    from agent.learn import tactics as learned

    out = []
    for lt in learned.load(tactic_dir()):
        steps = []
        tags = [f"tactic:{lt.name}", "origin:learned"]
        for s in lt.steps:
            base = known.get(s.tactic)
            summary = base.summary if base is not None else "(no such tactic registered now)"
            rules = ", ".join(f"{k} {_param_rule(v)}" for k, v in s.params) or "no parameters"
            steps.append(f"- {s.describe()}: {summary}; {rules}")
            tags.append(f"uses:{s.tactic}")
            if base is not None:
                tags += [t for t in detected(f"{base.summary}\n{base.explain}") if t.startswith("bottleneck:")]
        if lt.backend:
            tags += [t for t in detected(lt.backend) if t.startswith("mentions:")]
        parts = [
            f"{lt.name}: a learned tactic, the moves {lt.describe()} in this order, mined from the best "
            f"paths of the searches of {', '.join(lt.mined_from) or 'no task'}"
            + (f" on {lt.backend}" if lt.backend else "")
            + ".",
            "Steps:\n" + "\n".join(steps),
            _gate_text(lt.gate),
            f"Record since: proposed {lt.proposed} times, on the best path {lt.won} times.",
        ]
        if lt.sources:
            parts.append("Mined from the searches: " + ", ".join(lt.sources))
        parts.append(f"Retire it with `kir learn --retire {lt.name}`.")
        source = relative(lt.path) if lt.path else ""
        title = f"{lt.name}: {lt.describe()}"
        out.append(Doc(f"tactic/{lt.name}", "tactic", title, "\n\n".join(parts), tuple(dict.fromkeys(tags)), source))
    return out


def _param_rule(value: object) -> str:
    if value == "best":
        return "= the value of its domain the cost model predicts fastest"
    if value == "shape":
        return "= the task's own value of the symbol"
    return f"= {value}"


def _gate_text(gate: dict) -> str:
    speedups = {task: float(g["speedup"]) for task, g in gate.items() if isinstance(g, dict) and "speedup" in g}
    if not speedups:
        return "Held-out tasks: none measured."
    mean = math.exp(sum(math.log(v) for v in speedups.values() if v > 0) / len(speedups))
    best = max(speedups, key=lambda k: speedups[k])
    worst = min(speedups, key=lambda k: speedups[k])
    faster = sum(1 for v in speedups.values() if v > 1)
    return (
        f"Held-out tasks: {len(speedups)} measured, {faster} faster, geometric mean speedup {mean:.3f}x; "
        f"best {best} {speedups[best]:.3f}x, worst {worst} {speedups[worst]:.3f}x."
    )


# ---- the cost model's learned calibrations -----------------------------------------------------


def _calibrations() -> list[Doc]:
    from costmodel import calibration

    out = []
    for ident, item in sorted(calibration.learned(calibration_dir()).items()):
        data = json.loads(item.path.read_text(encoding="utf-8"))
        target = str(data.get("target") or "")
        chips = sorted(item.factors)
        prov = data.get("provenance") or {}
        gate = prov.get("gate") or {}
        summary = gate.get("summary") or {}
        parts = [
            f"{ident}: a learned calibration of the cost model for target {target or 'unknown'} "
            f"(chip {', '.join(chips) or 'none'}), added {prov.get('added', '-')}, fitted to "
            f"{prov.get('measurements', 0)} measured GPU times ({prov.get('skipped', 0)} not counted) of "
            f"{len(gate.get('tasks') or {})} tasks, from {len(prov.get('inputs') or [])} stores and sweeps."
        ]
        tags = [f"target:{target}"] if target else []
        tags.append("origin:learned")
        for chip, factors in sorted(item.factors.items()):
            moved = {k: v for k, v in sorted(factors.items()) if v != 1.0}
            said = ", ".join(f"{k} x{v:.4g}" for k, v in moved.items()) or "none (all 1)"
            parts.append(
                f"Factors on {chip} (the model's time of a resource multiplied by): {said}; the others stay at 1."
            )
            tags += [f"bottleneck:{_resource_tag(k)}" for k in moved]
        for chip, correction in sorted((data.get("correction") or {}).items()):
            features = correction.get("features") or []
            parts.append(
                f"Learned correction on {chip}: {len(correction.get('trees') or [])} regression trees (gradient "
                f"boosting, rate {correction.get('rate')}) over {len(features)} features of the model's own figures "
                f"({', '.join(features)}), shrunk by {correction.get('shrink')}; applied to the predictions made "
                "before a compile report."
            )
        if summary:
            parts.append(_calibration_gate(summary))
        for key in ("factors_not_kept", "correction_not_kept"):
            if prov.get(key):
                parts.append(f"{key.replace('_', ' ').capitalize()}: " + "; ".join(map(str, prov[key])))
        if prov.get("sources"):
            parts.append("Searches measured: " + ", ".join(map(str, prov["sources"])))
        parts.append(f"Retire it with `kir learn --retire {ident}`.")
        text = "\n\n".join(parts)
        tags += [t for t in detected(" ".join(chips)) if t != f"mentions:{target}"]
        title = f"{ident}: the cost model calibrated for {target or 'a target'} ({', '.join(chips)})"
        out.append(
            Doc(f"calibration/{ident}", "calibration", title, text, tuple(dict.fromkeys(tags)), relative(item.path))
        )
    return out


def _resource_tag(factor: str) -> str:
    return "launch" if factor in ("overhead", "scale") else factor


def _calibration_gate(s: dict) -> str:
    def figure(key: str) -> str:
        value = s.get(key)
        return f"{value:.3f}" if isinstance(value, int | float) else "-"

    return (
        "Gate, leaving one task out: pairs of programs ordered right "
        f"{figure('mean_pairs_right_calibrated')} mean with the factors against "
        f"{figure('mean_pairs_right_uncalibrated')} without (lowest {figure('min_pairs_right_calibrated')} against "
        f"{figure('min_pairs_right_uncalibrated')}); before compile, with the learned correction "
        f"{figure('mean_pairs_right_before_corrected')} against {figure('mean_pairs_right_before_calibrated')}; "
        f"median error {figure('median_abs_err_calibrated')} against {figure('median_abs_err_uncalibrated')}."
    )


def _calibration_files() -> list[Path]:
    return _glob(calibration_dir(), "*.json")


SOURCES: tuple[Source, ...] = (
    Source("language", lambda: _existing(DOCS / "language.md"), _language),
    Source("hardware", lambda: _glob(DOCS / "hardware", "*.md"), _hardware),
    Source("targets", lambda: _existing(DOCS / "targets.md"), _targets),
    Source("rules", _rule_files, _rules),
    Source("tactics", _tactic_files, _tactics),
    Source("calibrations", _calibration_files, _calibrations),
)
