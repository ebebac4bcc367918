"""No import circle in `farm`: every import of every module (module level and inside functions, the lazy ones;
not those under `if TYPE_CHECKING:`, which never run) is an edge, and the graph has no cycle. Imports by name
count too: `importlib.import_module("farm.x")` and `resources.files("farm.x")` (which imports the package) are
edges from their caller; a call of `import_module` with a name computed at run time (the worker importing the
adapter its engine's table line names, `adapter="farm.engines.ollama.adapter"`) is an edge from its caller to
every farm module some string in farm names."""

from __future__ import annotations

import ast
from pathlib import Path

import farm

ROOT = Path(farm.__file__).resolve().parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return skipped


def import_graph() -> dict[str, set[str]]:
    """Each farm module to the farm modules it imports (`from package import module` counts the module)."""
    paths = {module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    named = {
        module: {
            node.value
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in paths
        }
        for module, path in paths.items()
    }
    """The farm modules each module names in a string."""
    dynamic: set[str] = set()
    for name, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        skipped = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Call) and _callee(node) in ("import_module", "files") and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    targets = [first.value] if first.value in paths else []
                elif _callee(node) == "import_module":
                    dynamic.add(name)  # whichever module a name it can reach says: resolved below
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    module = node.module or ""
                targets = [
                    f"{module}.{alias.name}" if f"{module}.{alias.name}" in paths else module for alias in node.names
                ]
            for target in targets:
                while target and target not in paths:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    for importer in dynamic:
        # The names it may be handed are strings in itself or in the modules it imports (the worker reads
        # `kind.adapter` from the table, which imports each engine's line).
        seen, todo = {importer}, [importer]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        graph[importer] |= {target for module in seen for target in named[module] if target != importer}
    return graph


def _callee(call: ast.Call) -> str:
    """The called function's own name (`import_module` of `importlib.import_module(...)`)."""
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_sees_lazy_imports() -> None:
    """The walk finds a known lazy import (inside a function) and skips a TYPE_CHECKING one, so the test below
    can fail."""
    graph = import_graph()
    assert "farm.store.reads" in graph["farm.store.store"]  # Store.leaderboard imports reads in its body
    assert "farm.bench.runner" not in graph["farm.provenance"]  # only for type checking
    assert "farm.engines.ollama.adapter" in graph["farm.worker.engines"]  # import_module(kind.adapter)


def test_cycles_finds_a_circle() -> None:
    """The cycle finder reports a circle of three and nothing for a chain."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_circle_in_farm() -> None:
    """Every import in farm, lazy ones too: no module reaches itself."""
    assert cycles(import_graph()) == []
