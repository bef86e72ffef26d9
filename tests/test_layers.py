"""The layers of the package point one way: facts <- {hdl, golden} <- sim <- tests, and inside
``sim``: core <- harness <- backends <- tools. No import loop anywhere in the package.

Every module's imports are read with :mod:`ast` (imports inside functions too, relative imports
resolved against the module's own package), so a forbidden direction or a loop fails here before
it can hide in a lazy import.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Top-level folders and the ``gpurtl`` subpackage each one is installed as.
LAYERS = ("facts", "hdl", "golden", "sim")

#: For each layer, the layers it must not import.
FORBIDDEN = {
    "facts": {"hdl", "golden", "sim", "tests"},
    "hdl": {"golden", "sim", "tests"},
    "golden": {"hdl", "sim", "tests"},
    "sim": {"tests"},
}


def module_name(path):
    """Dotted name of the module at ``path`` (a file under one of the layer folders)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["gpurtl", *parts])


def imported_modules(source, name, is_package=False):
    """Absolute names of the modules each import statement of ``source`` (module ``name``) reads.

    Yields one list per statement. ``from X import y`` gives ``[X, X.y]``: ``y`` may be a submodule
    (``from gpurtl import golden``).
    """
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield [alias.name]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: -(node.level - 1)]
                base = ".".join(base)
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module
            yield [target, *(f"{target}.{alias.name}" for alias in node.names)]


def layer_of(module):
    """The layer (``"facts"``, ``"hdl"``, ...) a dotted module name belongs to, or ``None``."""
    parts = module.split(".")
    if parts[0] == "gpurtl" and len(parts) > 1 and parts[1] in LAYERS:
        return parts[1]
    if parts[0] == "tests":
        return "tests"
    return None


def violations(source, name, is_package=False):
    """``(importer, imported)`` pairs of ``source`` (the module ``name``) that break the layers."""
    forbidden = FORBIDDEN.get(layer_of(name), set())
    bad = set()
    for candidates in imported_modules(source, name, is_package):
        for module in candidates:
            if layer_of(module) in forbidden:
                bad.add((name, module))
                break
    return sorted(bad)


def all_violations():
    bad = []
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            bad.extend(violations(path.read_text(), module_name(path), path.name == "__init__.py"))
    return bad


#: The layers inside ``gpurtl.sim``, lowest first: a module may import its own layer and those
#: below it. ``core``: the registry, its entries (``blocks``), layouts, words, files, export;
#: ``harness``: drivers, reports, golden I/O, lockstep, the Backend interface and sessions;
#: ``backends``: pysim, verilator (cocotb), fast; ``tools``: everything else (cli, bench, sweep,
#: synth, board, experiments).
SIM_LAYERS = ("core", "harness", "backends", "tools")

#: Subpackages of ``gpurtl.sim`` and the layer each one is in.
SIM_PACKAGES = {"core": "core", "blocks": "core", "harness": "harness", "backends": "backends"}


def sim_layer(module):
    """The layer (:data:`SIM_LAYERS`) of a ``gpurtl.sim`` module, or ``None`` outside ``sim``."""
    parts = module.split(".")
    if parts[:2] != ["gpurtl", "sim"]:
        return None
    return SIM_PACKAGES.get(parts[2], "tools") if len(parts) > 2 else "tools"


def import_graph(sources):
    """``{module: set of modules it imports}`` for ``{module: (source, is_package)}``, among the
    modules of ``sources`` only. ``from X import y`` reads ``X.y`` when that is a module, else
    ``X``."""
    graph = {}
    for name, (source, is_package) in sources.items():
        edges = set()
        for base, *members in imported_modules(source, name, is_package):
            found = [member for member in members if member in sources]
            if found:
                edges.update(found)
            elif base in sources:
                edges.add(base)
        edges.discard(name)
        graph[name] = edges
    return graph


def import_loops(graph):
    """The import loops of ``graph``: each a sorted list of the modules of one strongly connected
    component with more than one module (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, loops = {}, {}, set(), [], []
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
                    loops.append(sorted(component))
    return loops


def sim_layer_violations(graph):
    """``(importer, imported)`` pairs of ``graph`` where a ``sim`` module imports a higher layer."""
    bad = []
    for name, edges in sorted(graph.items()):
        layer = sim_layer(name)
        if layer is None:
            continue
        for imported in sorted(edges):
            other = sim_layer(imported)
            if other is not None and SIM_LAYERS.index(other) > SIM_LAYERS.index(layer):
                bad.append((name, imported))
    return bad


def package_sources():
    sources = {}
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            sources[module_name(path)] = (path.read_text(), path.name == "__init__.py")
    return sources


def test_no_import_loop_in_the_package():
    loops = import_loops(import_graph(package_sources()))
    assert loops == [], "import loops:\n" + "\n".join(" <-> ".join(loop) for loop in loops)


def test_sim_layers_point_one_way():
    bad = sim_layer_violations(import_graph(package_sources()))
    assert bad == [], "imports against the sim layers:\n" + "\n".join(
        f"{a} ({sim_layer(a)}) imports {b} ({sim_layer(b)})" for a, b in bad
    )


def _graph(**modules):
    """An import graph of made-up modules: ``a_b="source"`` is module ``gpurtl.sim.a.b``."""
    return import_graph(
        {
            "gpurtl.sim." + name.replace("_", "."): (source, False)
            for name, source in modules.items()
        }
    )


def test_loop_checker_finds_a_loop_through_a_lazy_import():
    graph = _graph(
        harness_lockstep="from ..backends import pysim\n",
        backends_pysim="from ..core import words\n",
        core_words="def f():\n    from ..harness.lockstep import check\n",
        core_layouts="from . import words\n",
    )
    assert import_loops(graph) == [
        ["gpurtl.sim.backends.pysim", "gpurtl.sim.core.words", "gpurtl.sim.harness.lockstep"]
    ]
    assert import_loops(_graph(core_a="from . import b\n", core_b="x = 1\n")) == []


def test_sim_layer_checker_flags_upward_imports():
    graph = _graph(
        harness_lockstep="def f():\n    from ..backends.pysim import simulate\n",
        backends_pysim="from ..harness import lockstep\nfrom ..core import words\n",
        core_words="from gpurtl.sim import cli\n",
        cli="from .backends import pysim\n",
        blocks_fp32="from ..core import words\n",
    )
    assert sim_layer_violations(graph) == [
        ("gpurtl.sim.core.words", "gpurtl.sim.cli"),
        ("gpurtl.sim.harness.lockstep", "gpurtl.sim.backends.pysim"),
    ]


def test_layers_point_one_way():
    bad = all_violations()
    assert bad == [], "forbidden imports:\n" + "\n".join(f"{a} imports {b}" for a, b in bad)


@pytest.mark.parametrize(
    "source, name, expected",
    [
        (
            "from gpurtl.golden.waitcnt import WaitModel\n",
            "gpurtl.hdl.waitcnt.counters",
            [("gpurtl.hdl.waitcnt.counters", "gpurtl.golden.waitcnt")],
        ),
        # An import hidden inside a function counts.
        (
            "def f():\n    import gpurtl.hdl.fp32.add\n",
            "gpurtl.golden.fp32",
            [("gpurtl.golden.fp32", "gpurtl.hdl.fp32.add")],
        ),
        # A relative import climbs from gpurtl.hdl.stoc to gpurtl, then into golden.
        (
            "from ...golden import stoc\n",
            "gpurtl.hdl.stoc.stoc",
            [("gpurtl.hdl.stoc.stoc", "gpurtl.golden")],
        ),
        ("from gpurtl import sim\n", "gpurtl.facts.fp32", [("gpurtl.facts.fp32", "gpurtl.sim")]),
        (
            "import tests.sim.toy\n",
            "gpurtl.sim.tools.cli",
            [("gpurtl.sim.tools.cli", "tests.sim.toy")],
        ),
        # Allowed directions.
        (
            "from gpurtl.facts.fp32 import Float32\nfrom . import common\n",
            "gpurtl.hdl.fp32.add",
            [],
        ),
        (
            "from gpurtl.golden import fp32\nfrom gpurtl.hdl.fp32 import add\n",
            "gpurtl.sim.blocks.fp32",
            [],
        ),
        ("from ..facts import fp32\n", "gpurtl.golden.fp32", []),
    ],
)
def test_checker_flags_forbidden_imports(source, name, expected):
    assert violations(source, name) == expected


def test_sim_root_holds_packages_only():
    """The tools layer lives in ``sim/tools/``: no module lies loose at ``sim/``'s root."""
    loose = sorted(p.name for p in (ROOT / "sim").glob("*.py") if p.name != "__init__.py")
    assert loose == []


#: Test files at the root of ``tests/<package>/`` that test no single module of it, with why.
CROSS_CUTTING = {
    "golden": {
        "test_inst_prefetch_facts.py": "facts/inst_prefetch.py against LLVM's assembler",
    },
    "hdl": {
        "test_lint.py": "every block's Verilog through Verilator's lint",
        "test_style.py": "the style rules over every hdl module",
    },
    "sim": {
        "test_registry_smoke.py": "every registered block on every backend",
        "test_outside_example.py": "examples/icarus_fp32_add.py of docs/outside.md",
        "test_session_example.py": "examples/closest_hit.py of docs/session.md",
    },
}


def misplaced_tests(root, package):
    """Test files under ``root/tests/<package>`` that do not mirror ``root/<package>``.

    A test in a sub-folder must lie in a folder that mirrors a sub-package (a folder with an
    ``__init__.py``) and is itself a package, so two tests of one name never collide in pytest's
    module names. A test at the folder's root names a module at the package's root
    (``test_fp32_convert.py`` for ``fp32.py``) or is listed in :data:`CROSS_CUTTING`.
    """
    tests, source = root / "tests" / package, root / package
    modules = {p.stem for p in source.glob("*.py") if p.name != "__init__.py"}
    bad = []
    for path in sorted(tests.rglob("test_*.py")):
        rel = path.relative_to(tests)
        folders = rel.parent.parts
        if not folders:
            stem = path.stem.removeprefix("test_")
            named = any(stem == m or stem.startswith(m + "_") for m in modules)
            if not named and rel.name not in CROSS_CUTTING.get(package, {}):
                bad.append(
                    f"{rel}: names no module of {package}/ and is not listed as cross-cutting"
                )
            continue
        for depth in range(1, len(folders) + 1):
            part = Path(*folders[:depth])
            if not (source / part / "__init__.py").is_file():
                bad.append(f"{rel}: {package}/{part.as_posix()} is not a sub-package")
                break
            if not (tests / part / "__init__.py").is_file():
                bad.append(f"{rel}: tests/{package}/{part.as_posix()} has no __init__.py")
                break
    return bad


@pytest.mark.parametrize("package", ["golden", "hdl", "sim"])
def test_tests_mirror_the_package(package):
    """Each test file lies in the folder that mirrors the sub-package it tests."""
    assert misplaced_tests(ROOT, package) == []


def test_mirror_checker_flags_misplaced_tests(tmp_path):
    for folder in ("golden/bvh", "tests/golden/bvh", "tests/golden/cu"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "golden/bvh/__init__.py").touch()
    (tmp_path / "golden/fp32.py").touch()
    for name in ("bvh/__init__.py", "bvh/test_mesh.py", "cu/test_model.py", "test_fp32_x.py"):
        (tmp_path / "tests/golden" / name).touch()
    (tmp_path / "tests/golden/test_bvh.py").touch()
    (tmp_path / "tests/golden/test_inst_prefetch_facts.py").touch()
    (tmp_path / "tests/golden/bvh/deep").mkdir()
    (tmp_path / "tests/golden/bvh/deep/test_x.py").touch()
    assert misplaced_tests(tmp_path, "golden") == [
        "bvh/deep/test_x.py: golden/bvh/deep is not a sub-package",
        "cu/test_model.py: golden/cu is not a sub-package",
        "test_bvh.py: names no module of golden/ and is not listed as cross-cutting",
    ]
    (tmp_path / "golden/cu").mkdir()
    (tmp_path / "golden/cu/__init__.py").touch()
    assert "cu/test_model.py: tests/golden/cu has no __init__.py" in misplaced_tests(
        tmp_path, "golden"
    )
