"""No import circle between the project's files or packages, the memory planner below training, and the rooms of
utils.training in their order (docs/architecture.md).

Every .py under utils/ and webui/ (and app.py) is parsed with `ast`; every import counts, at module level and
inside functions alike (an import inside a function hides a circle from Python, not from a reader). An import
of `a.b.c` depends on the file `a/b/c.py` (or its package's `__init__.py`) and on the `__init__.py` files of
`a` and `a.b`, which Python runs first. `from a.b import c` depends on `a/b/c.py` when that file exists, else
on `a/b/__init__.py`. The package graph joins files by their package (`utils.training`, `utils.memory_plan`,
`webui`, ...; a top-level file such as `utils/gpt_train.py` is its own node).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("utils", "webui")
TOP_FILES = ("app.py",)

# No exceptions: a circle or an upward import anywhere fails the test.
KNOWN_FILE_CYCLES: set[frozenset[str]] = set()
KNOWN_PACKAGE_CYCLES: set[frozenset[str]] = set()
KNOWN_UPWARD_IMPORTS: set[tuple[str, str]] = set()
PLANNER = "utils.memory_plan"
# The rooms of utils.training, top to bottom (docs/architecture.md): a module imports from its own room and those
# below it, never from one above. "utils.training" itself is the recipe (run.py, ending.py, rank_run.py, controls.py).
TRAINING_LAYERS = (
    "utils.training.process",
    "utils.training",
    "utils.training.evaluation",
    "utils.training.loop",
    "utils.training.inputs",
    "utils.training.checkpointing",
    "utils.training.recording",
    "utils.training.ranks",
)
ABOVE_PLANNER = ("utils.training", "utils.gpt_train", "utils.cli", "webui", "app")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_files() -> dict[str, Path]:
    """Module name -> file, for every scanned file."""
    files = [ROOT / name for name in TOP_FILES if (ROOT / name).exists()]
    for folder in SCANNED:
        files += sorted((ROOT / folder).rglob("*.py"))
    return {_module_name(path): path for path in files}


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def imported_modules(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules `module` runs by importing: every import in the file, at any depth."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    ancestors = {".".join(module.split(".")[:depth]) for depth in range(1, module.count(".") + 1)}
    if is_package:
        ancestors.add(module)
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = _resolve_relative(module, is_package, node.level, node.module)
            for alias in node.names:  # `from a.b import c`: the file a/b/c.py when c is a module, else a/b
                targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    found: set[str] = set()
    for name in targets:
        parts = name.split(".")
        prefixes = [".".join(parts[:depth]) for depth in range(1, len(parts) + 1)]
        known_prefixes = [prefix for prefix in prefixes if prefix in known]
        if not known_prefixes:
            continue  # not a project module
        # The deepest one is what the import asks for; the packages above it run first, except those
        # already running around this module (its own ancestors, which Python imported before it).
        found.add(known_prefixes[-1])
        found.update(prefix for prefix in known_prefixes[:-1] if prefix not in ancestors)
    found.discard(module)
    return found


@functools.cache
def _file_graph() -> dict[str, frozenset[str]]:
    known = project_files()
    return {module: frozenset(imported_modules(module, path, known)) for module, path in known.items()}


def file_graph() -> dict[str, set[str]]:
    return {module: set(targets) for module, targets in _file_graph().items()}


def package_of(module: str, packages: set[str]) -> str:
    """The deepest scanned package holding `module` below the top-level folders (`utils.training`), or
    the module itself for a file directly in `utils/` (`utils.gpt_train`)."""
    parts = module.split(".")
    for depth in range(len(parts), 0, -1):
        candidate = ".".join(parts[:depth])
        if candidate in packages and candidate not in SCANNED:
            return candidate
    return module if module not in SCANNED else module


def _known_upward(module: str, targets: set[str]) -> set[str]:
    """The targets of `module` that KNOWN_UPWARD_IMPORTS allows, with the packages Python runs on the way."""
    allowed = {target for source, target in KNOWN_UPWARD_IMPORTS if source == module and target in targets}
    parents = {".".join(t.split(".")[:depth]) for t in allowed for depth in range(1, t.count(".") + 1)}
    return allowed | (parents & targets)


def package_graph(files: dict[str, set[str]]) -> dict[str, set[str]]:
    """The package graph, without the known upward imports of the planner (they are checked apart)."""
    files = {module: targets - _known_upward(module, targets) for module, targets in files.items()}
    packages = {m for m, p in project_files().items() if p.name == "__init__.py"}
    graph: dict[str, set[str]] = {}
    for module, targets in files.items():
        source = package_of(module, packages)
        edges = graph.setdefault(source, set())
        for target in targets:
            destination = package_of(target, packages)
            if destination == source or destination in SCANNED or source in SCANNED:
                continue  # `utils/__init__.py` and `webui/__init__.py` hold nothing of their subpackages
            edges.add(destination)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one node (Tarjan), each a circle or a knot of circles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:  # recursion depth is bounded by the project's size (a few hundred files)
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _describe(component: frozenset[str], graph: dict[str, set[str]]) -> str:
    edges = sorted(f"{a} -> {b}" for a in component for b in graph.get(a, ()) if b in component)
    return "{" + ", ".join(sorted(component)) + "}: " + "; ".join(edges)


def _check(graph: dict[str, set[str]], known: set[frozenset[str]], what: str) -> None:
    found = set(cycles(graph))
    new = found - known
    gone = known - found
    assert not new, f"import circles between {what}:\n" + "\n".join(
        _describe(c, graph) for c in sorted(new, key=sorted)
    )
    assert not gone, f"known {what} circles no longer present, remove them from the list: {sorted(map(sorted, gone))}"


def test_the_graph_sees_function_level_imports_and_finds_circles(tmp_path):
    """An import inside a function counts (the planner's former way of hiding a circle), `from package import
    module` reaches the module, and a package's own __init__ is no edge of its submodules."""
    source = tmp_path / "trace.py"
    source.write_text(
        "from utils.memory_plan import tracker\n"
        "def f():\n"
        "    from utils.training.loop.setup import build_training_setup\n"
        "    import webui.form\n"
    )
    known = project_files()
    found = imported_modules("utils.memory_plan.trace", source, known)
    assert found == {
        "utils.memory_plan.tracker",
        "utils.training",
        "utils.training.loop",
        "utils.training.loop.setup",
        "webui",
        "webui.form",
    }
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset({"a", "b", "c"})]


def test_no_circle_between_files():
    _check(file_graph(), KNOWN_FILE_CYCLES, "files")


def test_no_circle_between_packages():
    _check(package_graph(file_graph()), KNOWN_PACKAGE_CYCLES, "packages")


def _upward(module: str, graph: dict[str, set[str]]) -> set[str]:
    above = tuple(f"{name}." for name in ABOVE_PLANNER)
    targets = {d for d in graph[module] if d in ABOVE_PLANNER or d.startswith(above)}
    return targets - _known_upward(module, targets)


@pytest.mark.parametrize("module", sorted(m for m in project_files() if m == PLANNER or m.startswith(f"{PLANNER}.")))
def test_the_planner_is_below_training(module):
    """utils.memory_plan imports nothing of training, of what leads into it (utils.gpt_train, utils.cli) or of
    the web app, at module level or inside a function; the known exceptions of issue-18c apart."""
    graph = file_graph()
    upward = _upward(module, graph)
    assert not upward, f"{module} imports {sorted(upward)}"


def test_known_upward_imports_still_exist():
    graph = file_graph()
    gone = {edge for edge in KNOWN_UPWARD_IMPORTS if edge[1] not in graph.get(edge[0], set())}
    assert not gone, f"remove these from KNOWN_UPWARD_IMPORTS, they are gone: {sorted(gone)}"


def against_the_layers(graph: dict[str, set[str]], layers: tuple[str, ...] = TRAINING_LAYERS) -> list[str]:
    """The package imports `a -> b` between two of `layers` where b stands above a, as 'a -> b'."""
    height = {name: index for index, name in enumerate(layers)}
    return sorted(
        f"{source} -> {target}"
        for source, targets in graph.items()
        if source in height
        for target in targets
        if target in height and height[target] < height[source]
    )


def test_every_room_of_training_has_its_place_in_the_order():
    """A new sub-package of utils.training is placed in TRAINING_LAYERS (and docs/architecture.md) before it is used."""
    rooms = {m for m, p in project_files().items() if p.name == "__init__.py" and m.startswith("utils.training")}
    assert rooms == set(TRAINING_LAYERS)


def test_training_imports_go_down_its_rooms():
    """Every import between the rooms of utils.training, at module level or in a function, goes down the order."""
    wrong = against_the_layers(package_graph(file_graph()))
    assert not wrong, "imports against the order of utils.training's rooms (docs/architecture.md):\n" + "\n".join(wrong)


def test_the_order_check_fails_on_a_wrong_import(tmp_path):
    """The real records.py with one import more, inside a function, of the loop above it: the check names the edge.
    And an upward import that closes no circle (which the circle check would miss) is found too."""
    known = project_files()
    records = "utils.training.recording.records"
    edited = tmp_path / "records.py"
    edited.write_text(
        known[records].read_text(encoding="utf-8")
        + "\n\ndef setup_of(args):\n    from utils.training.loop.setup import build_training_setup\n"
    )
    files = file_graph()
    files[records] = imported_modules(records, edited, known)
    assert against_the_layers(package_graph(files)) == ["utils.training.recording -> utils.training.loop"]
    assert against_the_layers(package_graph(file_graph())) == [], "the real code, unedited"
    upward_only = {"utils.training.ranks": {"utils.training.loop"}, "utils.training.loop": set()}
    assert not cycles(upward_only)
    assert against_the_layers(upward_only) == ["utils.training.ranks -> utils.training.loop"]
