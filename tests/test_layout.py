"""The package's layout (issue 31, "one folder per topic"): ``distlearn`` is ``core/`` plus one folder per chapter
topic, its import graph has no cycle (imports inside functions included, where a cycle hides until a call runs), no
module reaches for another module's private ``_name``, no chapter code imports the authoring tools, and the package
docstring's map names every subpackage.

Everything is read with :mod:`ast` (nothing under test is imported but ``distlearn`` itself, for its map), so the
whole file runs in about two seconds. The notebooks' and solutions' code cells (``notebooks/*.md``, ``solutions/*.md``,
MyST ``{code-cell}`` blocks) are read as one program per notebook: a cell may use a module a cell above imported.
"""
from __future__ import annotations

import ast
import functools
import re
from collections import deque
from pathlib import Path

import pytest

import distlearn

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "distlearn"
SOURCES = sorted((ROOT / "notebooks").glob("*.md")) + sorted((ROOT / "solutions").glob("*.md"))
CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.S | re.M)


# ---------------------------------------------------------------------------------------------- reading the code
def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name → file, for every ``.py`` file under ``package`` (``pkg/__init__.py`` is ``pkg``)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


@functools.lru_cache(maxsize=None)
def parsed(path: Path) -> ast.Module:
    """The syntax tree of a module (``.py``) or of a notebook's code cells (``.md``: :func:`notebook_code`), read
    once for all the tests here."""
    source = notebook_code(path) if path.suffix == ".md" else path.read_text(encoding="utf-8")
    return ast.parse(source, filename=str(path))


def notebook_code(path: Path) -> str:
    """The code cells of a MyST notebook as one Python program: cell options (``:tags: […]``) and IPython magics
    (``%matplotlib``, ``!pip``) left out."""
    lines = []
    for cell in CODE_CELL.findall(path.read_text(encoding="utf-8")):
        lines += [ln for ln in cell.splitlines() if not re.match(r"\s*([%!]|:\w+:)", ln)]
    return "\n".join(lines)


def imported_from(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module name of ``from … import …`` in ``module`` (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def nearest_module(name: str, known) -> str | None:
    """``name`` or its longest prefix that is a module in ``known`` (``import a.b.c`` of a name that is not a
    module imports ``a.b``), or None outside ``known``."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(tree: ast.AST, module: str, is_package: bool, known) -> set[str]:
    """Modules of ``known`` that ``tree`` (the source of ``module``) imports anywhere: at the top, inside functions
    and classes, under ``if`` or ``try``. ``from X import Y`` imports ``X.Y`` when that is a module, else ``X``."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {nearest_module(alias.name, known) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = imported_from(node, module, is_package)
            out |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else nearest_module(base, known)
                    for alias in node.names}
    return out - {None, module}


def import_graph(files: dict[str, Path]) -> dict[str, set[str]]:
    """Module → the modules of ``files`` it imports. Importing ``a.b.c`` also runs ``a/__init__`` and
    ``a/b/__init__`` first; that is not an edge here (every module would then sit in a cycle with its package)."""
    return {name: imports(parsed(path), name, path.name == "__init__.py", files) for name, path in files.items()}


# ---------------------------------------------------------------------------------------------- cycles
def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of ``graph`` with more than one module, each sorted, in order."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def shortest_cycle_through(start: str, graph: dict[str, set[str]], within: set[str]) -> list[str]:
    """The shortest path ``start → … → start`` in ``graph`` using only modules of ``within`` (breadth first)."""
    parent = {start: None}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(graph.get(v, ()) & within):
            if w == start:
                path = [v]  # back from v to start along the parents, then reversed
                while parent[path[-1]] is not None:
                    path.append(parent[path[-1]])
                return path[::-1] + [start]
            if w not in parent:
                parent[w] = v
                queue.append(w)
    raise ValueError(f"{start} is on no cycle within {sorted(within)}")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One import cycle per strongly connected component of ``graph``, as ``[a, b, …, a]``: empty for a DAG."""
    return [shortest_cycle_through(comp[0], graph, set(comp)) for comp in strongly_connected(graph)]


def test_cycle_finder_finds_a_cycle_and_only_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"a"}, "f": {"g"}, "g": {"f"}}
    assert cycles(graph) == [["a", "b", "c", "a"], ["f", "g", "f"]]
    assert cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_reader_sees_imports_inside_functions_and_submodules(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub" / "low.py").write_text("def f():\n    from pkg.sub import high\n")
    (tmp_path / "pkg" / "sub" / "high.py").write_text("from . import low\nimport pkg.sub.low as again\n")
    graph = import_graph(module_files(tmp_path / "pkg"))
    assert graph["pkg.sub.low"] == {"pkg.sub.high"} and graph["pkg.sub.high"] == {"pkg.sub.low"}
    assert cycles(graph) == [["pkg.sub.high", "pkg.sub.low", "pkg.sub.high"]]


@pytest.mark.parametrize("package", ["distlearn", "authoring"])
def test_the_import_graph_is_acyclic(package):
    found = cycles(import_graph(module_files(ROOT / package)))
    assert not found, "import cycles (top-level and function-level imports), break each by moving the shared " \
                      "piece to the lower module or a small new one:\n" + "\n".join(" → ".join(c) for c in found)


# ---------------------------------------------------------------------------------------------- private names
def module_aliases(tree: ast.AST, known) -> dict[str, str]:
    """Local name → the module of ``known`` it is bound to by an import in ``tree`` (``import a.b as x``,
    ``from a import b``, and ``import a.b``, which binds ``a``)."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name if alias.asname else alias.name.partition(".")[0]
                if name in known:
                    out[alias.asname or name] = name
        elif isinstance(node, ast.ImportFrom) and node.module:
            out |= {alias.asname or alias.name: f"{node.module}.{alias.name}" for alias in node.names
                    if f"{node.module}.{alias.name}" in known}
    return out


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(tree: ast.AST, module: str, known) -> list[str]:
    """Where ``tree`` (the source of ``module``) takes a private name of another module of ``known``: ``from m
    import _name`` or ``m._name`` with ``m`` an imported module (dotted chains followed: ``a.b._name``)."""
    found, aliases = [], module_aliases(tree, known)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in known and node.module != module:
            found += [(node.lineno, f"from {node.module} import {a.name}") for a in node.names if is_private(a.name)]
        elif isinstance(node, ast.Attribute) and is_private(node.attr):
            chain, value = [], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in aliases:
                owner = ".".join([aliases[value.id]] + chain[::-1])
                if owner in known and owner != module:
                    found.append((node.lineno, f"{owner}.{node.attr}"))
    return [f"line {line}: {use}" for line, use in sorted(found)]


def test_private_name_finder_sees_both_forms():
    known = {"distlearn", "distlearn.core", "distlearn.core.cli", "distlearn.pipeline_parallel.lab"}
    tree = ast.parse("from distlearn.core.cli import _Formatter, main\nfrom distlearn.pipeline_parallel import lab\n"
                     "lab._per_sample(1)\nlab.__name__\nimport distlearn.core.cli\ndistlearn.core.cli._helper\n")
    assert private_uses(tree, "__main__", known) == [
        "line 1: from distlearn.core.cli import _Formatter", "line 3: distlearn.pipeline_parallel.lab._per_sample",
        "line 6: distlearn.core.cli._helper"]


def test_no_private_name_crosses_a_module_boundary():
    files = module_files()
    tools = module_files(ROOT / "authoring")
    found = [f"{path.relative_to(ROOT)} {use}" for name, path in tools.items()
             for use in private_uses(parsed(path), name, tools)]
    found += [f"{path.relative_to(ROOT)} {use}" for name, path in files.items()
              for use in private_uses(parsed(path), name, files)]
    found += [f"{path.relative_to(ROOT)} (code cells) {use}" for path in SOURCES
              for use in private_uses(parsed(path), "__main__", files)]
    assert not found, "private names used outside their module: make each public (rename, docstring) or move " \
                      "it:\n" + "\n".join(found)


# ---------------------------------------------------------------------------------------------- authoring
def imports_authoring(tree: ast.AST) -> list[int]:
    """Lines of ``tree`` that import the ``authoring`` package or one of its modules."""
    lines = []
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
        lines += [node.lineno for n in names if n == "authoring" or n.startswith("authoring.")]
    return lines


def test_no_chapter_code_imports_authoring():
    assert imports_authoring(ast.parse("import os\ndef f():\n    from authoring.course import x\n")) == [3]
    paths = [*module_files().values(), *SOURCES]
    found = {str(path.relative_to(ROOT)): lines for path in paths if (lines := imports_authoring(parsed(path)))}
    assert not found, f"authoring is the course's tooling, not part of what a chapter runs: {found}"


# ---------------------------------------------------------------------------------------------- folders
def chapter_sources(folder: str) -> dict[str, Path]:
    """Chapter number → its ``NN_name.md`` in ``folder`` (``notebooks`` or ``solutions``)."""
    return {path.name[:2]: path for path in sorted((ROOT / folder).glob("[0-9][0-9]_*.md"))}


def test_distlearn_holds_core_seeds_and_one_folder_per_topic():
    allowed = {"__init__.py", "__main__.py", "core", "seeds", *distlearn.CHAPTER_FOLDERS.values(),
               *distlearn.SHARED_FOLDERS}
    present = {p.name for p in PACKAGE.iterdir() if p.name != "__pycache__" and not p.name.startswith(".")}
    assert present <= allowed, f"not in CHAPTER_FOLDERS or SHARED_FOLDERS: {sorted(present - allowed)}"
    assert allowed <= present, f"named but missing: {sorted(allowed - present)}"
    folders = [p for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert all((p / "__init__.py").is_file() for p in folders), "every folder of distlearn is a package"
    assert set(chapter_sources("notebooks")) == set(distlearn.CHAPTER_FOLDERS), "one folder per chapter notebook"
    assert all(set(chapters) <= set(distlearn.CHAPTER_FOLDERS) for chapters in distlearn.SHARED_FOLDERS.values())


def defined_functions(path: Path) -> set[str]:
    """Names of the top-level functions of the module at ``path``."""
    return {n.name for n in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(n, ast.FunctionDef)}


@pytest.mark.parametrize("number", sorted(chapter_sources("solutions")))
def test_a_chapter_with_exercises_has_its_checker_in_its_folder(number):
    """The solutions call ``check.exNN_name``: every one is a function of the chapter folder's ``check.py``."""
    folder = PACKAGE / distlearn.CHAPTER_FOLDERS[number]
    code = notebook_code(chapter_sources("solutions")[number])
    assert f"from distlearn.{folder.name} import check" in code
    called = set(re.findall(r"\bcheck\.(ex\d\d_\w+)\(", code))
    assert called and all(name.startswith(f"ex{number}_") for name in called)
    assert (folder / "check.py").is_file() and called <= defined_functions(folder / "check.py")


def shows_an_explorer(notebook: Path, known) -> bool:
    """Whether the code cells of ``notebook`` import an explorer module of ``known`` (``distlearn.memory.explorer``,
    ``distlearn.precision.explorer_fp8`` …)."""
    modules = imports(parsed(notebook), "__main__", False, known)
    return any(name.rpartition(".")[2].startswith("explorer") for name in modules)


def test_a_chapter_with_an_explorer_has_one_in_its_folder(tmp_path):
    """A notebook that shows an explorer has its chapter's folder hold ``explorer.py``."""
    files = module_files()
    showing = [number for number, path in chapter_sources("notebooks").items() if shows_an_explorer(path, files)]
    plots_only = tmp_path / "plots_only.md"
    plots_only.write_text("```{code-cell} ipython3\nfrom distlearn.pipeline_parallel import plots\n```\n")
    assert "05" in showing and not shows_an_explorer(plots_only, files)
    missing = [f"{n}: distlearn/{distlearn.CHAPTER_FOLDERS[n]}/explorer.py" for n in showing
               if not (PACKAGE / distlearn.CHAPTER_FOLDERS[n] / "explorer.py").is_file()]
    assert not missing, f"chapters that show an explorer but whose folder has none: {missing}"


def test_the_package_docstring_maps_every_subpackage():
    """The literal block after ``::`` in ``distlearn.__doc__`` names each subpackage as ``name/``."""
    subpackages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    block = distlearn.__doc__.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    mapped = set(re.findall(r"(\w+)/", block))
    assert subpackages == mapped, f"only in the folder: {sorted(subpackages - mapped)}; only in the docstring " \
                                  f"map: {sorted(mapped - subpackages)}"
