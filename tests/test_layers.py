"""The layers of the package point one way: facts <- {hdl, golden} <- sim <- tests.

Every module's imports are read with :mod:`ast` (imports inside functions too, relative imports
resolved against the module's own package), so a forbidden direction fails here before it can hide
in a lazy import.
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
        ("import tests.sim.toy\n", "gpurtl.sim.cli", [("gpurtl.sim.cli", "tests.sim.toy")]),
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
