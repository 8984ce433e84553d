"""`kir report`: the page of a search built by hand in a store.

- the JSON in the page reads back equal to what was put in, `</script>` in a program or a
  message included, and nothing in the data can end its element;
- what the payload says: each node's kind, the best path, best so far by evaluation;
- the command's happy path (text and --json) and each usage error (exit 2, no traceback);
- a headless Chromium opens the page and draws every node (skipped where there is none).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from typer.testing import CliRunner

from agent.cli import app
from agent.pipeline import Record
from agent.search.report import ReportError, page, payload, render
from agent.search.tree import Move, Node
from agent.store import open_store
from kir.diagnostics import Diagnostic, Span

EVIL = "</script><script>document.title='pwned'</script><!-- & \u2028"
DATA = re.compile(r'<script type="application/json" id="search-data">(.*?)</script>', re.S)
runner = CliRunner()


def measured(key: str, cycles: float | None, stage: str = "run") -> Record:
    if cycles is None:
        return Record(candidate=key, file="<t>", stage=stage, ok=False, until="run", verdict={"ok": False})
    return Record(
        candidate=key,
        file="<t>",
        stage="run",
        ok=True,
        until="run",
        verdict={"ok": True, "metrics": {"cycles": cycles}},
    )


def stopped(key: str, stage: str, message: str, line: int) -> Record:
    diag = Diagnostic("cost.where-violated", "error", Span(line, 3, line, 9, "<t>"), message, "give other shapes")
    return Record(candidate=key, file="<t>", stage=stage, ok=False, until="cost", diagnostics=(diag,))


def make_store(path, name: str = "demo", searches: tuple[str, ...] = ()) -> str:
    """A search of six nodes: the seed (100 cycles), a faster child (80, the best), a child
    stopped at cost with `</script>` in its text and message, under the best a child that
    failed at run and one at 90, and one not evaluated."""
    db = str(path / "s.sqlite")
    with open_store(db) as store:
        for other in searches:
            store.search(other, "other", {})
        sid = store.search(name, "softmax", {"backend": "mtia-sim"})

        def put(i: int, parent: int | None, record: Record | None, text: str = "", move: str = "") -> None:
            node = Node(
                i, parent, f"k{i}", text or f"kernel k{i}\n  line two\n", Move("tactic", move or f"m{i}", (("site", i),)),
                depth=0 if parent is None else 1 + (parent > 0), round=0 if parent is None else 1 + (parent > 0),
                predicted=1e-6 * (i + 1),
            )  # fmt: skip
            store.put(sid, node if record is None else node.evaluated(record))

        put(0, None, measured("k0", 100), move="seed")
        put(1, 0, measured("k1", 80))
        put(2, 0, stopped("k2", "cost", f"shapes break it {EVIL}", 2), text=f"kernel bad\n  # {EVIL}\n")
        put(3, 1, measured("k3", None))
        put(4, 1, measured("k4", 90))
        put(5, 1, None)
    return db


def test_the_payload_reads_back_from_the_page(tmp_path):
    db = make_store(tmp_path)
    text = render(db)
    (embedded,) = DATA.findall(text)
    assert "<" not in embedded and ">" not in embedded and "&" not in embedded
    assert json.loads(embedded) == payload(db)
    assert text.count("</script>") == 2  # the data's and the code's: EVIL ended neither early
    back = {n["id"]: n for n in json.loads(embedded)["nodes"]}
    assert EVIL in back[2]["text"] and EVIL in back[2]["diagnostics"][0]["message"]


def test_what_the_payload_says(tmp_path):
    data = payload(make_store(tmp_path))
    nodes = {n["id"]: n for n in data["nodes"]}
    assert [nodes[i]["kind"] for i in range(6)] == ["scored", "scored", "static", "failed", "scored", "pending"]
    assert (data["best"], data["path"], data["seed_score"], data["unit"]) == (1, [0, 1], 100, "cycles")
    assert [n["id"] for n in data["nodes"] if n["on_path"]] == [0, 1]
    assert nodes[1]["speedup"] == pytest.approx(1.25) and nodes[4]["speedup"] == pytest.approx(100 / 90)
    assert nodes[1]["move"] == "m1(site=1)" and nodes[1]["predicted_s"] == pytest.approx(2e-6)
    (diag,) = nodes[2]["diagnostics"]
    assert (diag["rule"], diag["line"], nodes[2]["stage"]) == ("cost.where-violated", 2, "cost")
    # measured nodes in id order (the static and the pending ones are not evaluations)
    assert [(p["id"], p["score"], p["best"]) for p in data["progress"]] == [
        (0, 100, 100), (1, 80, 80), (3, None, 80), (4, 90, 80),
    ]  # fmt: skip


def test_a_search_by_name_and_the_last_by_default(tmp_path):
    db = make_store(tmp_path, name="<b>@DATA@</b>", searches=("first",))
    assert payload(db)["name"] == "<b>@DATA@</b>"
    assert payload(db, "first")["nodes"] == []
    text = render(db)
    assert "<title>KIR search &lt;b&gt;@DATA@&lt;/b&gt; (softmax)</title>" in text  # escaped, not substituted
    with pytest.raises(ReportError, match="no search named nope") as err:
        payload(db, "nope")
    assert "first" in err.value.hint
    (embedded,) = DATA.findall(page(payload(db, "first")))
    assert json.loads(embedded)["nodes"] == []


def kir(*argv: str):
    result = runner.invoke(app, list(argv))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result


def test_the_command_writes_the_page(tmp_path):
    db = make_store(tmp_path)
    out = tmp_path / "report.html"
    result = kir("report", db, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output and "6 nodes" in result.output and "1.250x the seed" in result.output
    assert out.read_text() == render(db)
    result = kir("report", db, "--name", "demo", "-o", str(out), "--json")
    assert result.exit_code == 0, result.output
    obj = json.loads(result.output)
    assert obj["schema"] == "kir.report/1" and obj["ok"] and obj["diagnostics"] == []
    assert (obj["name"], obj["task"], obj["nodes"], obj["out"]) == ("demo", "softmax", 6, str(out))


def test_usage_errors(tmp_path):
    db = make_store(tmp_path)
    out = str(tmp_path / "r.html")
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database, but it is long enough to look like a file header" * 20)
    cases = {
        ("report", "--out", out): "needs the store",
        ("report", db): "needs --out",
        ("report", str(tmp_path / "missing.sqlite"), "--out", out): "no store at",
        ("report", str(junk), "--out", out): "not a KIR store",
        ("report", db, "--name", "nope", "--out", out): "no search named nope",
        ("report", db, "--out", str(tmp_path / "no" / "r.html")): "there is no folder",
        ("report", db, "--out", str(tmp_path)): "not a regular file",
    }
    for argv, message in cases.items():
        result = kir(*argv)
        assert result.exit_code == 2, (argv, result.output)
        assert result.output.startswith("error[") and message in result.output, (argv, result.output)
        obj = json.loads(kir(*argv, "--json").output)
        assert obj["schema"] == "kir.report/1" and not obj["ok"] and obj["out"] is None
        assert message in obj["diagnostics"][0]["message"]
    assert not (tmp_path / "missing.sqlite").exists()  # refusing it did not create a store


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def dump_dom(browser: str, url: str, profile) -> str:
    """The page's DOM once its scripts ran, as headless Chromium prints it."""
    return subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}", "--dump-dom", url],
        capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip


def test_the_page_draws_in_a_browser(tmp_path):
    browser = chromium()
    if browser is None:
        pytest.skip("no chromium or chromium-browser on PATH (.ci/run installs Debian's chromium where it can)")
    out = tmp_path / "report.html"
    out.write_text(render(make_store(tmp_path)))
    dom = dump_dom(browser, out.as_uri(), tmp_path / "profile")
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None, dom[:500]
    assert 'data-drawn="6"' in body.group(0), body.group(0)
    assert 'data-chart="4"' in body.group(0)  # four measured nodes
    assert '<svg id="tree-svg"' in dom and dom.count('class="node') == 6
    assert "<script>document.title" not in dom and "<title>KIR search demo (softmax)</title>" in dom  # EVIL: data
    # the panel of the node stopped at cost: its diagnostic, and EVIL as text, in its message and program
    linked = dump_dom(browser, out.as_uri() + "#node-2", tmp_path / "profile")
    panel = linked[linked.index('<aside id="panel">') :]
    assert "Node 2: m2(site=2)" in panel and "cost.where-violated" in panel and "at line 2:3" in panel
    assert panel.count("&lt;/script&gt;&lt;script&gt;document.title") == 2 and '<span class="hit">' in panel


def test_search_show_prints_the_tree_as_text_and_as_json(tmp_path):
    db = make_store(tmp_path)
    result = kir("search", "show", db)
    assert result.exit_code == 0, result.output
    assert (
        "demo (softmax): 6 nodes" in result.output
        and "best path: seed(site=0) (100 cycles) -> m1(site=1) (80 cycles)" in result.output
    )
    result = kir("search", "show", db, "--json")
    assert result.exit_code == 0, result.output
    obj = json.loads(result.output)
    assert obj["schema"] == "kir.search.show/1" and (obj["task"], obj["name"]) == ("softmax", "demo")
    assert [n["id"] for n in obj["nodes"]] == [0, 1, 2, 3, 4, 5]
    assert obj["best"]["id"] == 1 and [s["move"] for s in obj["path"]] == ["seed(site=0)", "m1(site=1)"]
