"""Imports inside functions: none of them may be what keeps an import circle apart. For every
import of one of the project's modules made inside a function, the imported module must not
reach the importing one through module-level imports, so that moving it to the top would
close no circle; such an import is there for another reason (docs/imports.md: start-up time,
an order the candidate process keeps, an optional heavy dependency), never for a circle.

A package's lazy attribute (`verifier.load_rules`, from `verifier.engine`) is left out: its
own modules reach a package by being in it."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("kir", "verifier", "costmodel", "lowering", "agent")


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, node: ast.Import | ast.ImportFrom, modules: set[str]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        here = _module(path).split(".")
        package = here if path.name == "__init__.py" else here[:-1]
        base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
    return [base, *(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules)]


def _import_nodes(node: ast.AST, in_function: bool = False, typing_only: bool = False):
    """Every import under `node`, with whether it is inside a function and whether it is only
    for the type checker (under `if TYPE_CHECKING:`)."""
    for child in ast.iter_child_nodes(node):
        function = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
        typing = typing_only or (isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test))
        if isinstance(child, (ast.Import, ast.ImportFrom)) and getattr(child, "module", "") != "__future__":
            yield child, function, typing
        yield from _import_nodes(child, function, typing)


def _graph():
    files = [f for p in PACKAGES for f in (ROOT / p).rglob("*.py")]
    modules = {_module(f) for f in files}
    top: dict[str, set[str]] = defaultdict(set)
    inner: list[tuple[str, str, str, int]] = []
    for path in files:
        here = _module(path)
        for node, function, typing in _import_nodes(ast.parse(path.read_text())):
            for name in _imports(path, node, modules):
                if name.split(".")[0] not in PACKAGES:
                    continue
                if function:
                    inner.append((here, name, str(path.relative_to(ROOT)), node.lineno))
                elif not typing:
                    top[here].add(name)
    return top, inner


def _reaches(top: dict[str, set[str]], start: str, goal: str) -> bool:
    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        if name == goal:
            return True
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        todo.extend(top.get(name, ()))
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # importing a.b.c runs a and a.b
    return False


def test_no_import_inside_a_function_keeps_a_circle_apart():
    top, inner = _graph()
    circles = [
        f"{file}:{line} imports {name}, which imports {here} back"
        for here, name, file, line in inner
        if name != here and not name.startswith(here + ".") and _reaches(top, name, here)
    ]
    assert not circles, "\n".join(circles)


def test_the_analysis_sees_a_circle_where_there_is_one():
    top = {"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": set()}
    assert not _reaches(top, "a.z", "a.x")
    top["a.z"].add("a.x")
    assert _reaches(top, "a.z", "a.x")


def test_every_module_with_such_imports_is_in_the_list_of_reasons():
    _, inner = _graph()
    listed = (ROOT / "docs" / "imports.md").read_text()
    missing = sorted({file for _, _, file, _ in inner if f"`{file}`" not in listed})
    assert not missing, f"say in docs/imports.md why these import inside functions: {missing}"
