"""The index: every document of agent/kb/sources.py in SQLite, its words in an FTS5 table ranked
by bm25, its tags in a table of their own.

The index is built on first use and kept in `$KIR_CACHE_DIR/kb-<key>.sqlite` (default
`~/.cache/kir`), where the key is the sha256 of the sources' files (the docs, the rule and tactic
modules, the learned libraries, this package): a change to any of them makes a new key, and the
next search builds the index again. A search with the cache warm opens the file and imports
nothing of the verifier or the tactics. Where the cache cannot be written (no such folder and
none can be made, a read-only one), or a source did not load, the index is built in memory for
the process and not kept.

Ranking (`search`): the query is cut into words here (letters and digits; a compound such as
`program_id` or `dot-product` is searched as a phrase and as its parts, and two adjacent words
as a phrase too), never handed to FTS5's query syntax, so quotes, `*`,
`:`, parentheses, `-`, `NEAR` or NUL bytes are plain text or nothing. The words are OR-ed;
bm25 weighs a title hit 4x, the prose 1x, fenced code 0.25x, the id and tags 2x. A document's
relevance is its bm25 over the best match's (0..1), times its boosts: the target asked for (x2
for a document about it, a manual's section; x1.3 for one whose text names it; x0.7 for one about
other targets only), the bottleneck (x1.6), a rule id its text cites (x1.5). A document tagged `rule:<id>` for a rule id asked for ranks above
every other, found by its words or not; one tagged with a prefix of the id (`rule:tactic.warps`
for `tactic.warps.explicit`) ranks next, then one whose name (its id, or its id after the kind:
`retile`, `sync.parity`) is the whole query. With no words, the documents tagged with what was asked
are listed, the most boosted and the most specific (the fewest targets) first.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent.kb.doc import KINDS, Doc, Hit, KbError, shown
from agent.kb.sources import SOURCES, relative
from agent.kb.tags import bottleneck_tags, target_of
from kir.names import suggest

SCHEMA = 1  # the layout of the index file: a new number makes a new key
WEIGHTS = (4.0, 1.0, 0.25, 2.0)  # bm25 weights of the columns: title, text, code, keywords
MAX_TERMS = 64
KEEP = 8  # index files kept in the cache folder (other checkouts' among them)
TARGET_BOOST, MENTION_BOOST, OTHER_TARGET, BOTTLENECK_BOOST, CITES_BOOST = 2.0, 1.3, 0.7, 1.6, 1.5

_WORD = re.compile(r"[^\W_]+(?:[-_][^\W_]+)*")
_FENCED = re.compile(r"^ {0,3}(```|~~~)[^\n]*\n.*?^ {0,3}\1[ \t]*$", re.M | re.S)
_DDL = """
create table meta(key text primary key, value text not null);
create table docs(rowid integer primary key, id text unique not null, kind text not null, title text not null,
                  text text not null, tags text not null, source text not null);
create table tags(doc integer not null, tag text not null);
create index tags_by_tag on tags(tag);
create virtual table fts using fts5(title, text, code, keywords, tokenize = 'porter unicode61 remove_diacritics 2');
"""


@dataclass
class Index:
    """An open index: `path` is its cache file (None: built in memory), `problems` the sources
    that did not load (their documents are missing)."""

    conn: sqlite3.Connection
    path: Path | None
    problems: tuple[str, ...] = ()
    lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: list[str] | None = field(default=None, init=False, repr=False)

    def ids(self) -> list[str]:
        if self._ids is None:
            self._ids = [row[0] for row in self.conn.execute("select id from docs order by id")]
        return self._ids


_OPEN: dict[str, Index] = {}
_OPENING = threading.Lock()


# ---- the key and the cache ---------------------------------------------------------------------


def source_files() -> list[Path]:
    """Every file the documents are made from, and this package's modules."""
    files = sorted(Path(__file__).parent.glob("*.py"))
    for source in SOURCES:
        files += source.files()
    return files


def digest() -> str:
    """The index's key: the sha256 of the schema and of every source file's path and bytes."""
    h = hashlib.sha256(f"kir-kb/{SCHEMA}\0".encode())
    for path in source_files():
        h.update(relative(path).encode() + b"\0")
        try:
            h.update(path.read_bytes())
        except OSError:
            h.update(b"\0unreadable\0")
    return h.hexdigest()


def cache_dir() -> Path:
    """`$KIR_CACHE_DIR` (default `~/.cache/kir`), as the compile caches have it."""
    return Path(os.environ.get("KIR_CACHE_DIR") or Path.home() / ".cache" / "kir")


def open_index() -> Index:
    """The index of the sources as they are now: from this process's memory, from the cache file,
    or built (and kept in the cache when it can be)."""
    key = digest()
    with _OPENING:
        index = _OPEN.get(key)
        if index is None:
            for old in _OPEN.values():
                old.conn.close()
            _OPEN.clear()
            index = _OPEN[key] = _load(key)
        return index


def _load(key: str) -> Index:
    path = cache_dir() / f"kb-{key[:16]}.sqlite"
    cached = _open_cached(path, key)
    if cached is not None:
        return cached
    docs, problems = collect()
    if not problems:
        try:
            return _write(path, key, docs)
        except (OSError, sqlite3.Error):
            pass  # no cache here: the index lives in memory
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    _fill(conn, key, docs)
    return Index(conn, None, tuple(problems))


def _open_cached(path: Path, key: str) -> Index | None:
    if not path.is_file():
        return None
    try:
        conn = sqlite3.connect(path.as_uri() + "?mode=ro", uri=True, check_same_thread=False)
        row = conn.execute("select value from meta where key = 'digest'").fetchone()
    except sqlite3.Error:
        return None  # a file that is not an index (cut short, or another's): built again
    if row is None or row[0] != key:
        conn.close()
        return None
    return Index(conn, path)


def _write(path: Path, key: str, docs: list[Doc]) -> Index:
    """Build the index into a file beside `path` and move it into place (atomic: a reader sees
    the old file or the whole new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        conn = sqlite3.connect(partial)
        try:
            _fill(conn, key, docs)
        finally:
            conn.close()
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    _prune(path)
    opened = _open_cached(path, key)
    if opened is None:
        raise sqlite3.DatabaseError(f"the index written to {path} does not read back")
    return opened


def _prune(keep: Path) -> None:
    """Leave the `KEEP` newest index files of the cache folder (the other checkouts' among them)."""
    try:
        files = sorted(keep.parent.glob("kb-*.sqlite"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in files[KEEP:]:
            if old != keep:
                old.unlink(missing_ok=True)
    except OSError:
        pass  # another process pruned first


def collect() -> tuple[list[Doc], list[str]]:
    """Every source's documents, and what went wrong: a source that raises is a problem, not a
    failure of the whole knowledge base (a broken tactic module leaves the manuals searchable)."""
    docs: list[Doc] = []
    problems: list[str] = []
    seen: set[str] = set()
    for source in SOURCES:
        try:
            found = source.collect()
        except Exception as err:  # any error of any registry: reported by the caller
            problems.append(f"the {source.name} did not load: {type(err).__name__}: {err}")
            continue
        for doc in found:
            if doc.id in seen:
                problems.append(f"two documents are named {doc.id} (the second, from {doc.source}, is left out)")
                continue
            seen.add(doc.id)
            docs.append(doc)
    return docs, problems


def _fill(conn: sqlite3.Connection, key: str, docs: list[Doc]) -> None:
    conn.executescript(_DDL)
    for rowid, doc in enumerate(docs, start=1):
        prose, code = split_code(doc.text)
        prose = prose.replace("**", "")  # the snippets mark the words found with it
        conn.execute(
            "insert into docs values (?, ?, ?, ?, ?, ?, ?)",
            (rowid, doc.id, doc.kind, doc.title, doc.text, json.dumps(doc.tags), doc.source),
        )
        conn.executemany("insert into tags values (?, ?)", [(rowid, t) for t in doc.tags])
        keywords = " ".join([doc.id, *(t.split(":", 1)[-1] for t in doc.tags)])
        conn.execute(
            "insert into fts(rowid, title, text, code, keywords) values (?, ?, ?, ?, ?)",
            (rowid, doc.title, prose, code, keywords),
        )
    conn.execute("insert into meta values ('digest', ?)", (key,))
    conn.execute("insert into meta values ('documents', ?)", (str(len(docs)),))
    conn.commit()


def split_code(text: str) -> tuple[str, str]:
    """A document's prose and its fenced code blocks, apart: code weighs less in the ranking."""
    code = [m.group(0) for m in _FENCED.finditer(text)]
    return _FENCED.sub("", text), "\n".join(code)


# ---- questions ---------------------------------------------------------------------------------


def terms(query: str) -> list[str]:
    """What a query searches for (lower case, each once, at most `MAX_TERMS`): its words, runs
    of letters and digits (a compound such as `dot-product` or `program_id` whole, as a phrase,
    and its parts), then each two adjacent words as a phrase, which ranks a document that has
    them side by side (`shared memory`) above one that has them apart. Nothing else of the query
    reaches SQLite."""
    words = [w.lower() for w in _WORD.findall(query)]
    out: dict[str, None] = {}
    for word in words:
        out[word] = None
        for part in re.split(r"[-_]", word) if ("-" in word or "_" in word) else ():
            out[part] = None
    for first, second in zip(words, words[1:], strict=False):
        out[f"{first} {second}"] = None
    return list(out)[:MAX_TERMS]


def search(
    query: str,
    *,
    rules: Sequence[str] = (),
    target: str | None = None,
    bottleneck: str | None = None,
    kind: str | None = None,
    limit: int = 5,
) -> list[Hit]:
    """The documents that answer `query`, best first (the module's docstring says how they are
    ranked). `rules`: diagnostic ids at hand (their rules' documents come first); `target`: a KIR
    target or a chip (`mtia-sim`, `sm_90`, `h200`); `bottleneck`: the cost model's bottleneck
    (`dram`, `tensor`, `dot-product engine`...); `kind`: one of `KINDS`, the others left out.
    An unknown kind, target or bottleneck is a `KbError`; an unknown rule id boosts nothing."""
    listed = [rules] if isinstance(rules, str) else rules
    given = tuple(dict.fromkeys(r.strip() for r in listed if r.strip() and _encodable(r)))
    wanted_target, wanted_bottleneck = filters(kind, target, bottleneck)
    if limit < 1:
        raise KbError(f"a limit of {limit}: at least 1 document must be asked for")
    words = terms(query)
    name = query.strip().lower()
    index = open_index()
    with index.lock:
        matched = _match(index.conn, words)
        own = _tagged(index.conn, [f"rule:{r}" for r in given])
        under = _tagged(index.conn, [f"rule:{p}" for r in given for p in _prefixes(r)]) - own
        cites = {f"cites:{r}" for r in given}
        if words:
            pool = set(matched) | own | under
        else:
            wanted = [*cites, *wanted_bottleneck]
            if wanted_target is not None:
                wanted += [wanted_target, wanted_target.replace("target:", "mentions:", 1)]
            pool = own | under | _tagged(index.conn, wanted)
            if not pool and not given and not wanted and kind is not None:
                pool = {row[0] for row in index.conn.execute("select rowid from docs where kind = ?", (kind,))}
        docs = _docs(index.conn, pool)
        top = max(matched.values(), default=0.0)
        ranked = []
        for rowid, doc in docs.items():
            if kind is not None and doc.kind != kind:
                continue
            factor, boosts = _boost(doc, wanted_target, wanted_bottleneck, cites)
            named = name in (doc.id, doc.id.split("/", 1)[-1])
            tier = 3 if rowid in own else 2 if rowid in under else 1 if named else 0
            if tier > 1:
                boosts = [t for t in doc.tags if t.startswith("rule:")] + boosts
            score = (matched.get(rowid, 0.0) / top if top > 0 else 0.0) * factor if words else factor
            targets = sum(1 for t in doc.tags if t.startswith("target:"))  # the fewest: the most specific
            ranked.append(((-tier, -score, targets, doc.id), rowid, doc, score, tuple(boosts)))
        ranked.sort(key=lambda r: r[0])
        chosen = ranked[:limit]
        snippets = _snippets(index.conn, words, [r[1] for r in chosen if r[1] in matched])
    return [Hit(doc, score, snippets.get(rowid) or _lead(doc.text), boosts) for _, rowid, doc, score, boosts in chosen]


def _boost(doc: Doc, target: str | None, bottleneck: set[str], cites: set[str]) -> tuple[float, list[str]]:
    """What a document's score is multiplied by for the target, bottleneck and cited rule ids
    asked for, and the tags that raised it."""
    tags = set(doc.tags)
    factor, boosts = 1.0, []
    if target is not None:
        mention = target.replace("target:", "mentions:", 1)
        if target in tags:
            factor *= TARGET_BOOST
            boosts.append(target)
        elif mention in tags:
            factor *= MENTION_BOOST
            boosts.append(mention)
        elif any(t.startswith("target:") for t in tags):
            factor *= OTHER_TARGET
    if bottleneck & tags:
        factor *= BOTTLENECK_BOOST
        boosts += sorted(bottleneck & tags)
    if cites & tags:
        factor *= CITES_BOOST
        boosts += sorted(cites & tags)
    return factor, boosts


def filters(kind: str | None, target: str | None, bottleneck: str | None) -> tuple[str | None, set[str]]:
    """The target's tag and the bottleneck's tags a search boosts; a `KbError` for an unknown
    kind, target or bottleneck."""
    if kind is not None and kind not in KINDS:
        raise KbError(f"unknown kind {shown(kind)}", suggest(kind, KINDS) or f"one of {', '.join(KINDS)}")
    wanted_target = f"target:{target_of(target)}" if target is not None else None
    return wanted_target, set(bottleneck_tags(bottleneck)) if bottleneck is not None else set()


def show(doc_id: str) -> Doc:
    """The document `doc_id` (`rule/sync.parity`; the part after the kind alone where it names
    one document: `sync.parity`), or a `KbError` that suggests the closest ids."""
    index = open_index()
    with index.lock:
        ids = index.ids()
        chosen = doc_id if doc_id in ids else None
        if chosen is None:
            tails = [i for i in ids if i.split("/", 1)[-1] == doc_id]
            chosen = tails[0] if len(tails) == 1 else None
        if chosen is None:
            raise KbError(f"no document {shown(doc_id)}", _near(doc_id, ids))
        row = index.conn.execute("select rowid from docs where id = ?", (chosen,)).fetchone()
        return _docs(index.conn, {row[0]})[row[0]]


def documents(kind: str | None = None) -> list[Doc]:
    """Every document (of `kind`), by id."""
    index = open_index()
    with index.lock:
        rows = index.conn.execute(
            "select rowid from docs" + (" where kind = ?" if kind else ""), (kind,) if kind else ()
        )
        found = _docs(index.conn, {r[0] for r in rows})
    return sorted(found.values(), key=lambda d: d.id)


def rule_ids() -> list[str]:
    """The diagnostic ids some document is about (`rule:`) or cites (`cites:`)."""
    index = open_index()
    with index.lock:
        rows = index.conn.execute("select distinct tag from tags where tag like 'rule:%' or tag like 'cites:%'")
        return sorted({t.split(":", 1)[1] for (t,) in rows})


def covers(rule: str, known: Iterable[str]) -> bool:
    """Whether a diagnostic id is one of `known` (`rule_ids()`) or under one of them."""
    known = set(known)
    return rule in known or any(p in known for p in _prefixes(rule))


def _near(doc_id: str, ids: list[str]) -> str:
    hint = suggest(doc_id, ids)
    if hint:
        return hint
    tails = {i.split("/", 1)[-1]: i for i in ids}
    close = difflib.get_close_matches(doc_id, list(tails), n=3)
    if close:
        return f"did you mean {' or '.join(repr(tails[c]) for c in close)}?"
    return "`kir kb search WORDS` lists documents with their ids"


def _encodable(text: str) -> bool:
    """Whether SQLite can be given `text` (a lone surrogate cannot be UTF-8: no id holds one)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _prefixes(rule: str) -> list[str]:
    """`tactic.warps.explicit` -> `tactic.warps`, `tactic` (the ids it is under)."""
    parts = rule.split(".")
    return [".".join(parts[:n]) for n in range(len(parts) - 1, 0, -1)]


def _match(conn: sqlite3.Connection, words: list[str]) -> dict[int, float]:
    """rowid -> relevance (bm25's, made positive: more is better) of the documents holding any
    of the words."""
    if not words:
        return {}
    expression = " OR ".join(f'"{w}"' for w in words)  # letters, digits, -, _ and spaces only
    sql = "select rowid, bm25(fts, ?, ?, ?, ?) from fts where fts match ?"
    try:
        rows = conn.execute(sql, (*WEIGHTS, expression)).fetchall()
    except sqlite3.OperationalError:
        # a word FTS5's tokenizer makes nothing of: each on its own, those it takes
        rows = []
        for w in words:
            try:
                rows += conn.execute(sql, (*WEIGHTS, f'"{w}"')).fetchall()
            except sqlite3.OperationalError:
                continue
    out: dict[int, float] = {}
    for rowid, rank in rows:
        out[rowid] = max(out.get(rowid, 0.0), -rank, 1e-9)
    return out


def _tagged(conn: sqlite3.Connection, tags: Iterable[str]) -> set[int]:
    tags = list(dict.fromkeys(tags))
    if not tags:
        return set()
    marks = ", ".join("?" * len(tags))
    return {row[0] for row in conn.execute(f"select doc from tags where tag in ({marks})", tags)}


def _docs(conn: sqlite3.Connection, rowids: set[int]) -> dict[int, Doc]:
    out: dict[int, Doc] = {}
    ordered = sorted(rowids)
    for start in range(0, len(ordered), 500):  # under SQLite's limit of bound values
        chunk = ordered[start : start + 500]
        marks = ", ".join("?" * len(chunk))
        sql = f"select rowid, id, kind, title, text, tags, source from docs where rowid in ({marks})"
        for rowid, ident, kind, title, text, tags, source in conn.execute(sql, chunk):
            out[rowid] = Doc(ident, kind, title, text, tuple(json.loads(tags)), source)
    return out


def _snippets(conn: sqlite3.Connection, words: list[str], rowids: list[int]) -> dict[int, str]:
    if not words or not rowids:
        return {}
    expression = " OR ".join(f'"{w}"' for w in words)
    marks = ", ".join("?" * len(rowids))
    sql = f"select rowid, snippet(fts, 1, '**', '**', '...', 24) from fts where fts match ? and rowid in ({marks})"
    try:
        rows = conn.execute(sql, (expression, *rowids)).fetchall()
    except sqlite3.OperationalError:
        return {}
    return {rowid: " ".join(text.split()) for rowid, text in rows if text and text.strip()}


def _lead(text: str, words: int = 30) -> str:
    prose, _ = split_code(text)
    cut = prose.split()
    return " ".join(cut[:words]) + (" ..." if len(cut) > words else "")
