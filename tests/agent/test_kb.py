"""The knowledge base (agent/kb, docs/kb.md): what it holds, how it ranks, its cache, and `kir kb`.

The retrieval figures are checked on the real sources: every rule the verifier registers
(learned ones included) must come first for its own id and within the top 3 for its summary's
words; every tactic first for its name and within the top 3 for a phrase of its explanation;
the mtia-sim manual's sections within the top 3 for questions a program writer asks about the
chip. The index is built once into the test run's cache (tests/conftest.py points
`$KIR_CACHE_DIR` at a fresh folder)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tactics
import verifier
from agent import kb
from agent.cli import app
from agent.kb import index, sources
from agent.kb.markdown import sections
from agent.kb.sources import Source
from verifier.learned import LOADED, load_learned_rules

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def registered_rules() -> list[str]:
    """Every rule the verifier can report now: the registry's, learned rules whose file is there."""
    verifier.load_rules()
    load_learned_rules()
    dirs = [d.resolve() for d in sources.rule_dirs()]
    return sorted(
        rid
        for rid in verifier.RULES
        if rid not in LOADED or (LOADED[rid].path is not None and LOADED[rid].path.parent.resolve() in dirs)
    )


def ids(hits) -> list[str]:
    return [h.id for h in hits]


# ---- rules ---------------------------------------------------------------------------------------


def test_every_rule_comes_first_for_its_own_id():
    rules = registered_rules()
    assert len(rules) >= 100 and any(r.startswith("learned.") for r in rules)
    for rid in rules:
        alone = kb.search("", rules=[rid], limit=3)
        assert alone and alone[0].id == f"rule/{rid}" and f"rule:{rid}" in alone[0].boosts, (rid, ids(alone))
        # with words that point elsewhere, the rule's document still ranks first
        elsewhere = kb.search("DMA completion counter local SRAM", rules=[rid], target="mtia-sim", limit=3)
        assert elsewhere[0].id == f"rule/{rid}", (rid, ids(elsewhere))


def test_every_rule_is_found_by_its_summary():
    misses = []
    for rid in registered_rules():
        summary = verifier.RULES[rid].summary
        if f"rule/{rid}" not in ids(kb.search(summary, limit=3)):
            misses.append(rid)
    assert not misses, misses


def test_a_rule_document_holds_its_explanation_examples_and_provenance():
    rule = verifier.RULES["sync.parity"]
    doc = kb.show("rule/sync.parity")
    assert doc.kind == "rule" and rule.summary in doc.title and rule.explanation in doc.text
    assert rule.bad.strip() in doc.text and rule.good.strip() in doc.text
    assert doc.source == "verifier/rules/sync.py" and "rule:sync.parity" in doc.tags
    learned = kb.show("rule/learned.cdna-f16-accumulate")
    assert "origin:learned" in learned.tags and "Provenance:" in learned.text
    assert {"mentions:gfx90a", "mentions:gfx942"} <= set(learned.tags)
    assert learned.source == "verifier/rules/learned/cdna-f16-accumulate.toml"


def test_diagnostics_outside_the_registry_find_the_sections_that_cite_them():
    """A tactic's precondition (`tactic.<name>.<why>`) finds its tactic; an id the language
    reference or a manual names finds that section."""
    assert kb.search("", rules=["tactic.warps.explicit"])[0].id == "tactic/warps"
    for rid, doc in (
        ("multi.arg", "language/programs-of-several-kernels"),
        ("mtia.dma-align", "hardware/mtia-sim/5-illegal-use"),
        ("interp.out-of-bounds", "language/7-memory-accesses"),
    ):
        hits = kb.search("", rules=[rid], limit=5)
        assert doc in ids(hits) and all(f"cites:{rid}" in h.boosts for h in hits), (rid, ids(hits))
    assert kb.search("", rules=["no.such-rule"]) == []  # an unknown id boosts nothing


# ---- the manuals ---------------------------------------------------------------------------------

MANUAL_QUESTIONS = [
    ("DMA completion counter", "mtia-sim", "hardware/mtia-sim/3-3-the-dma-counter"),
    ("local SRAM size", "mtia-sim", "hardware/mtia-sim/3-5-local-sram"),
    ("dot-product engine", "mtia-sim", "hardware/mtia-sim/1-overview"),
    ("DMA row alignment 8 bytes", "mtia-sim", "hardware/mtia-sim/3-2-the-dma-engine"),
    ("illegal use sram overflow", "mtia-sim", "hardware/mtia-sim/5-illegal-use"),
    ("double-buffer", "mtia-sim", "hardware/mtia-sim/8-tuning-guide"),
    ("cycles of a vector unit command", "mtia-sim", "hardware/mtia-sim/4-the-timing-model"),
    ("device-memory port bandwidth shared by PEs", "mtia-sim", "hardware/mtia-sim/3-1-device-memory-and-the-port"),
    ("TMA box alignment", "sm_90", "hardware/hopper/3-tma-the-tensor-memory-accelerator"),
    ("shared memory size", "sm_90", "hardware/hopper/2-memory"),
    ("wgmma shape", "sm_90", "hardware/hopper/5-wgmma-the-warpgroup-matrix-instruction"),
    ("shared memory size", "gfx942", "hardware/cdna/2-lds-the-local-data-share"),
    ("wavefront width", "gfx942", "hardware/cdna/1-compute-units-and-wavefronts"),
    ("MFMA accumulate f32", "gfx90a", "hardware/cdna/3-mfma-the-matrix-cores"),
    ("HBM bandwidth", "gfx942", "hardware/cdna/5-the-mi300x-cdna3-gfx942"),
]


@pytest.mark.parametrize(("query", "target", "expected"), MANUAL_QUESTIONS)
def test_a_manual_answers_in_the_top_3(query, target, expected):
    hits = kb.search(query, target=target, limit=3)
    assert expected in ids(hits), ids(hits)


def test_the_target_raises_its_manual():
    for target, prefix in (("sm_90", "hardware/hopper/"), ("gfx942", "hardware/cdna/"), ("h200", "hardware/hopper/")):
        assert kb.search("HBM bandwidth", target=target)[0].id.startswith(prefix), target
    listed = kb.search("", target="mtia-sim", limit=20)
    manual = [d.id for d in kb.documents("hardware") if d.id.startswith("hardware/mtia-sim/")]
    assert set(ids(listed)[: len(manual)]) == set(manual)  # the chip's own manual before what names it
    for doc in kb.documents("hardware"):
        stem = doc.id.split("/")[1]
        assert {f"target:{t}" for t in sources.MANUALS[stem]} <= set(doc.tags), doc.id


def test_the_bottleneck_raises_what_speaks_of_it():
    hits = kb.search("slow exponential", bottleneck="sfu", kind="tactic", limit=3)
    assert "tactic/exp2-fold" in ids(hits) and all(h.doc.kind == "tactic" for h in hits)
    assert all("bottleneck:sfu" in h.boosts for h in hits if "bottleneck:sfu" in h.doc.tags)


def test_every_bottleneck_of_the_cost_model_is_known():
    from costmodel.mtia import UNIT_NAMES
    from costmodel.timing import RESOURCES

    for name in (*RESOURCES, "launch", "dram-latency", *UNIT_NAMES, *UNIT_NAMES.values()):
        assert kb.search("memory", bottleneck=name, limit=1), name
    with pytest.raises(kb.KbError) as err:
        kb.search("x", bottleneck="dramm")
    assert "'dram'" in err.value.hint


# ---- tactics -------------------------------------------------------------------------------------


def test_every_tactic_is_found_by_its_name_and_by_its_explanation():
    from agent.learn.tactics import load

    for t in tactics.all():
        assert kb.search(t.name)[0].id == f"tactic/{t.name}", t.name
        paragraphs = [p for p in t.explain.split("\n\n") if p.strip()]
        phrase = " ".join((paragraphs[1] if len(paragraphs) > 1 else paragraphs[0]).split()[:12])
        assert f"tactic/{t.name}" in ids(kb.search(phrase, limit=3)), (t.name, phrase)
        doc = kb.show(f"tactic/{t.name}")
        assert t.explain.strip() in doc.text and doc.source == f"tactics/{t.name.replace('-', '_')}.py"
    learned = load(sources.tactic_dir())
    assert learned
    for lt in learned:
        hits = kb.search(lt.name)
        assert hits[0].id == f"tactic/{lt.name}" and "origin:learned" in hits[0].doc.tags, lt.name
        assert lt.describe() in hits[0].doc.text


def test_calibrations_are_documents_with_their_provenance():
    from costmodel import calibration

    found = calibration.learned(sources.calibration_dir())
    assert found
    for ident in found:
        doc = kb.show(f"calibration/{ident}")
        assert doc.kind == "calibration" and f"kir learn --retire {ident}" in doc.text
        assert any(t.startswith("target:") for t in doc.tags) and "Gate" in doc.text
        assert f"calibration/{ident}" in ids(kb.search("calibration measurements", kind="calibration"))


# ---- documents -----------------------------------------------------------------------------------


def test_every_document_shows_as_it_was_found():
    docs = kb.documents()
    assert len({d.id for d in docs}) == len(docs) > 150
    assert {d.kind for d in docs} == set(kb.KINDS)
    for doc in docs:
        assert kb.show(doc.id) == doc and doc.source and doc.title, doc.id
        assert doc.id.startswith(("hardware/", f"{doc.kind}/")), doc.id
    for query in ("wait parity", "shared memory", "grid of programs", "split K"):
        for hit in kb.search(query, limit=10):
            assert kb.show(hit.id) == hit.doc


def test_the_language_reference_is_cut_into_its_sections():
    language = {d.id: d for d in kb.documents("language")}
    assert "language/7-memory-accesses" in language and "language/appendix-the-grammar" in language
    assert all(d.source.startswith("docs/language.md:") for d in language.values())
    cut = sections((ROOT / "docs" / "language.md").read_text())
    assert {f"language/{s.slug}" for s in cut if s.body} == set(language)  # a heading over sections alone: left out
    assert len(language) >= 30 and "language/3-types" not in language and "language/element-types-dtypes" in language
    assert kb.search("memory accesses")[0].id == "language/7-memory-accesses"


def test_markdown_sections_leave_code_alone():
    text = "# T\n\nintro\n\n## 1. A b\n\n```\n## not a heading\n```\n\n### Sub\n\nx\n\n## Sub\n\ny\n"
    found = sections(text)
    assert [s.slug for s in found] == ["intro", "1-a-b", "sub", "sub-2"]
    assert "## not a heading" in found[1].body and found[2].path == ("1. A b", "Sub") and found[3].path == ("Sub",)
    assert [s.line for s in found] == [1, 5, 11, 15]


def test_an_unknown_document_is_an_error_that_suggests():
    with pytest.raises(kb.KbError) as err:
        kb.show("rule/sync.parit")
    assert err.value.message == "no document 'rule/sync.parit'" and "'rule/sync.parity'" in err.value.hint
    with pytest.raises(kb.KbError) as err:
        kb.show("sync.parit")
    assert "'rule/sync.parity'" in err.value.hint
    assert kb.show("sync.parity").id == "rule/sync.parity"  # the name after the kind, where it is one
    for hostile in ("", "\x00", "rule/\ud800", "a" * 10000, "'", "%", "_"):
        with pytest.raises(kb.KbError):
            kb.show(hostile)


def test_the_filters_say_what_is_wrong():
    for kwargs, hint in (({"kind": "rules"}, "'rule'"), ({"target": "sm90"}, "'sm_90'"), ({"bottleneck": "ram"}, "")):
        with pytest.raises(kb.KbError) as err:
            kb.search("x", **kwargs)
        assert hint in err.value.hint, (kwargs, err.value.hint)
    with pytest.raises(kb.KbError):
        kb.search("x", limit=0)


HOSTILE = ['"', "*", "a:b", "(", "\x00", "NEAR(a b)", "AND", "OR NOT", '"unterminated', "-", "-x", "col:umn:",
           "^start", "{}", "a" * 5000, "word " * 500, "\ud800", "é ü", "ﬁle", "\x00DMA\x00", "rule/sync.parity",
           "sync.parity*", "'; drop table docs; --", "%", "_", "__init__", "\\", "\n\t"]  # fmt: skip


@pytest.mark.parametrize("query", HOSTILE)
def test_a_hostile_query_returns_hits_or_nothing(query):
    for kwargs in ({}, {"rules": [query]}, {"kind": "rule"}, {"target": "mtia-sim"}, {"bottleneck": "dram"}):
        hits = kb.search(query, **kwargs)
        assert isinstance(hits, list) and all(isinstance(h, kb.Hit) for h in hits)
    assert kb.documents()  # the index is still there


# ---- the index and its cache ---------------------------------------------------------------------


def test_the_index_is_cached_and_a_warm_search_loads_no_registry(tmp_path):
    kb.search("warps")
    opened = index.open_index()
    assert opened.path is not None and opened.path.parent == index.cache_dir() and not opened.problems
    assert opened.path.name == f"kb-{index.digest()[:16]}.sqlite"
    probe = (
        "import json, sys\nfrom agent import kb\nhits = kb.search('DMA completion counter', target='mtia-sim')\n"
        "print(json.dumps([hits[0].id, 'verifier.engine' in sys.modules, 'tactics.retile' in sys.modules,"
        " 'xdsl' in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["hardware/mtia-sim/3-3-the-dma-counter", False, False, False]


def test_a_changed_source_rebuilds_the_index(tmp_path, monkeypatch):
    library = tmp_path / "tactics"
    library.mkdir()
    original = (ROOT / "tactics" / "learned" / "learned.retile-fix-shape.toml").read_text()
    (library / "learned.kb-probe.toml").write_text(original.replace("learned.retile-fix-shape", "learned.kb-probe"))
    before = index.digest()
    monkeypatch.setenv("KIR_LEARNED_TACTICS", str(library))
    assert index.digest() != before
    assert kb.search("learned.kb-probe")[0].id == "tactic/learned.kb-probe"
    assert "tactic/learned.retile-fix-shape" not in {d.id for d in kb.documents("tactic")}
    probe = original.replace("learned.retile-fix-shape", "learned.kb-probe").replace("proposed = 0", "proposed = 7")
    (library / "learned.kb-probe.toml").write_text(probe)  # an edit, not a new file: rebuilt all the same
    assert "proposed 7 times" in kb.show("tactic/learned.kb-probe").text


def test_the_learned_folders_are_the_loaders(monkeypatch, tmp_path):
    from agent.learn.tactics import library_dir
    from costmodel.calibration import library_dir as calibration_dir
    from verifier.learned import rule_dirs

    for env in (
        {},
        {"KIR_LEARNED_DIR": tmp_path, "KIR_LEARNED_TACTICS": tmp_path, "KIR_LEARNED_CALIBRATION": tmp_path},
    ):
        for name in ("KIR_LEARNED_DIR", "KIR_LEARNED_TACTICS", "KIR_LEARNED_CALIBRATION"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, str(value))
        assert sources.rule_dirs() == rule_dirs()
        assert sources.tactic_dir() == library_dir() and sources.calibration_dir() == calibration_dir()


def test_an_unwritable_or_broken_cache_leaves_the_index_in_memory(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would be")
    monkeypatch.setenv("KIR_CACHE_DIR", str(blocker / "kir"))
    monkeypatch.setattr(index, "_OPEN", {})
    assert kb.search("DMA completion counter", target="mtia-sim")[0].id == "hardware/mtia-sim/3-3-the-dma-counter"
    assert index.open_index().path is None
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("KIR_CACHE_DIR", str(cache))
    monkeypatch.setattr(index, "_OPEN", {})
    (cache / f"kb-{index.digest()[:16]}.sqlite").write_bytes(b"not a database" * 100)
    assert kb.search("warps")[0].id == "tactic/warps"
    assert index.open_index().path == cache / f"kb-{index.digest()[:16]}.sqlite"  # written again, whole


def test_a_source_that_does_not_load_leaves_the_others(tmp_path, monkeypatch):
    def broken() -> list:
        raise ImportError("a tactic module that does not import")

    monkeypatch.setenv("KIR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(index, "SOURCES", (*index.SOURCES, Source("broken", list, broken)))
    monkeypatch.setattr(index, "_OPEN", {})
    opened = index.open_index()
    assert opened.path is None and len(opened.problems) == 1 and "broken" in opened.problems[0]
    assert not list(tmp_path.glob("kb-*.sqlite"))  # a partial index is not kept
    assert kb.search("", rules=["sync.parity"])[0].id == "rule/sync.parity"
    result = runner.invoke(app, ["kb", "search", "warps", "--limit", "1"])
    assert result.exit_code == 0 and "warning[kb.source]" in result.output and "tactic/warps" in result.output


# ---- the command line ----------------------------------------------------------------------------


def kir(*args: str):
    result = runner.invoke(app, list(args))
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def test_kb_search_prints_ids_scores_and_snippets():
    result = kir("kb", "search", "DMA completion counter", "--target", "mtia-sim", "--limit", "2")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) == 4 and lines[0].startswith("hardware/mtia-sim/3-3-the-dma-counter (hardware, ")
    assert "target:mtia-sim" in lines[0] and lines[1].startswith("    ") and "**dma**" in lines[1].lower()
    listed = kir("kb", "search", "", "--rule", "sync.parity", "--rule", "sync.race", "--limit", "2")
    assert listed.exit_code == 0 and {line.split()[0] for line in listed.output.splitlines()[::2]} == {
        "rule/sync.parity",
        "rule/sync.race",
    }
    assert kir("kb", "search", "zzzzqqqq").output == "no document matches\n"


def test_kb_search_json():
    result = kir("kb", "search", "wait parity", "--rule", "sync.parity", "--kind", "rule", "--json")
    data = json.loads(result.output)
    assert result.exit_code == 0 and data["schema"] == "kir.kb.search/1" and data["ok"] is True
    assert list(data) == ["schema", "file", "ok", "diagnostics", "query", "rules", "target", "bottleneck", "kind",
                          "limit", "hits"]  # fmt: skip
    assert data["query"] == "wait parity" and data["rules"] == ["sync.parity"] and data["limit"] == 5
    first = data["hits"][0]
    assert first["id"] == "rule/sync.parity" and first["boosts"][0] == "rule:sync.parity"
    assert set(first) == {"id", "kind", "title", "score", "snippet", "boosts", "tags", "source"}
    assert all(h["kind"] == "rule" for h in data["hits"])


def test_kb_show_text_and_json():
    text = kir("kb", "show", "rule/sync.parity")
    assert text.exit_code == 0
    assert text.output.startswith("rule/sync.parity (rule): sync.parity: a wait's parity")
    assert "\nsource: verifier/rules/sync.py\n" in text.output and "Rejected (line" in text.output
    data = json.loads(kir("kb", "show", "hardware/mtia-sim/3-3-the-dma-counter", "--json").output)
    assert data["schema"] == "kir.kb.show/1" and data["ok"] and data["kind"] == "hardware"
    assert list(data)[4:] == ["id", "kind", "title", "source", "tags", "text"]
    assert "dma_wait(n)" in data["text"] and data["source"].startswith("docs/hardware/mtia-sim.md:")


def test_kb_usage_errors():
    for argv, line in (
        (["kb", "show", "sync.parit"], "error[cli.usage]: no document 'sync.parit'"),
        (["kb", "search", "*"], "error[cli.usage]: nothing to search for: the query '*' has no words"),
        (["kb", "search", "x", "--rule", "sync.parit"], "error[cli.usage]: no document is about the diagnostic"),
        (["kb", "search", "x", "--kind", "rules"], "error[cli.usage]: unknown kind 'rules'"),
        (["kb", "search", "x", "--bottleneck", "ram"], "error[cli.usage]: unknown bottleneck 'ram'"),
        (["kb", "search", "x", "--target", "h2OO"], "error[cli.target]: unknown target 'h2OO'"),
        (["kb", "search", "x", "--limit", "0"], "error[cli.usage]: invalid value for '--limit'"),
    ):
        result = kir(*argv)
        assert result.exit_code == 2 and result.output.startswith(line), (argv, result.output)
        assert len(result.output.splitlines()) <= 2
    hint = kir("kb", "show", "sync.parit").output.splitlines()[1]
    assert hint == "  = hint: did you mean 'rule/sync.parity'?"
    data = json.loads(kir("kb", "show", "nope", "--json").output)
    assert data["schema"] == "kir.kb.show/1" and data["ok"] is False and data["id"] is None
    assert kir("kb", "search", "*", "--kind", "calibration").exit_code == 0  # no words, but a kind to list
