"""The project's import graph follows its one direction of flow (issue 20, docs/architecture.md).

Built from the source (``ast``), top-level and function-level imports alike (an import under
``if TYPE_CHECKING:`` is not one): ``import a.b`` is an edge to ``a.b``; ``from a.b import c`` an
edge to ``a.b.c`` when that is a module, else to ``a.b``. An edge to a package is an edge to its
``__init__``; the parent packages Python imports on the way are not counted (every package would
otherwise import each of its modules back).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("emergence", "stats", "hydra_plugins")
#: Longest function or method, in lines (its signature to its last line, docstring included).
MAX_FUNCTION_LINES = 60


def modules() -> Dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


MODULES = modules()


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(tree: ast.AST):
    """Every import node, skipping the bodies of ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if _type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _resolve(name: str):
    """The project module an imported name lands in (its longest module prefix), or None."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def edges_of(module: str, path: Path) -> Set[str]:
    is_package = path.name == "__init__.py"
    out = set()
    for node in _imports(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module
            targets = [f"{prefix}.{a.name}" for a in node.names]
        for target in targets:
            hit = _resolve(target)
            if hit is not None and hit != module:
                out.add(hit)
    return out


GRAPH = {m: edges_of(m, p) for m, p in MODULES.items()}


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found = []
    counter = 0
    for root in graph:
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
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
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


def test_the_import_graph_has_no_cycles():
    found = cycles(GRAPH)
    assert not found, "import cycles:\n" + "\n".join(
        " <-> ".join(c) + "\n    " + "; ".join(f"{a} -> {b}" for a in c for b in sorted(GRAPH[a] & set(c))) for c in found)


def test_stats_imports_only_the_common_layer_of_emergence():
    bad = sorted(f"{m} -> {t}" for m, targets in GRAPH.items() if m.split(".")[0] == "stats"
                 for t in targets if t.split(".")[0] == "emergence" and t.split(".")[:2] != ["emergence", "common"])
    assert not bad, "stats reaches past emergence.common:\n" + "\n".join(bad)


def test_the_common_layer_imports_nothing_else_of_the_project():
    bad = sorted(f"{m} -> {t}" for m, targets in GRAPH.items() if m.startswith("emergence.common")
                 for t in targets if not t.startswith("emergence.common") and t != "emergence")
    assert not bad, "emergence.common imports past itself:\n" + "\n".join(bad)


def test_the_common_layer_and_stats_import_torch_only_inside_functions():
    """``emergence.common`` and ``stats`` are torch-free at import: a head class's ``targets`` may
    import torch when it is called, nothing imports it at a module's top level."""
    bad = []
    for module, path in MODULES.items():
        if not (module.startswith("emergence.common") or module.split(".")[0] == "stats"):
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                bad += [f"{module}: {n}" for n in names if n.split(".")[0] in ("torch", "transformers")]
    assert not bad, bad


def test_no_function_is_longer_than_the_limit():
    long = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{module}.{node.name}: {lines} lines")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(sorted(long))


def test_one_registry_class_holds_every_plug_in_table():
    """Every table of plug-ins by name is an ``emergence.common.plugins.Registry``: no other class
    named as a registry, and no module keeps a registry dict of its own (``_REGISTRY``) beside it."""
    others, dicts = [], []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and "registry" in node.name.lower() \
                    and module != "emergence.common.plugins":
                others.append(f"{module}.{node.name}")
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            dicts += [f"{module}.{t.id}" for t in targets if isinstance(t, ast.Name) and t.id.endswith("REGISTRY")]
    assert not others and not dicts, others + dicts


#: The calls that resolve a model's source, revisions or family from its config (emergence/catalog.py,
#: emergence/sources/); a job resolves them once, in its plan's builder, and reads the plan after.
RESOLVERS = {"model_source", "model_revisions", "selected_revisions", "resolve_family", "source_for"}
#: Where else they may be called, and why: each one is an entry without a job plan.
RESOLVING_MODULES = {
    "emergence.preflight": "the plan's one builder (validate)",
    "emergence.catalog": "the resolvers themselves",
    "emergence.sources.__main__": "the source command (python -m emergence.sources): a model spec, no job",
    "emergence.loading": "load() as a library call without a plan (a job passes its plan's source)",
    "emergence.live.run_writer": "the live monitor inside someone's own training (a library entry, no job)",
}


def test_a_job_resolves_its_model_only_in_its_plans_builder():
    """No module outside :data:`RESOLVING_MODULES` resolves a model's source, revisions or family from
    a config (issue 32, point 1): the job reads its plan (emergence/preflight.py ``JobPlan``)."""
    calls = {}
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in RESOLVERS:
                    calls.setdefault(module, set()).add(name)
    assert "emergence.preflight" in calls, "the walker finds no resolver call: the test sees nothing"
    outside = {m: sorted(c) for m, c in calls.items() if m not in RESOLVING_MODULES}
    assert not outside, f"modules resolving a model outside the plan's builder: {outside}"


def test_the_graph_sees_the_imports_it_should():
    """The walker itself: known edges of the flow are found (a graph of no edges has no cycles)."""
    assert "emergence.common.contract" in GRAPH["stats.tracked"]
    assert "emergence.common.store" in GRAPH["emergence.tracking"]
    assert any(t.startswith("emergence.screens") for t in GRAPH["emergence.screening"] | GRAPH["emergence.job"])


def test_the_cycle_finder_finds_a_known_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
