"""The experiments stay apart: no module of ``sim/experiments`` imports a private name (``_x``)
from another package or from an experiment, or a private module, and no module imports another
experiment's module; code two experiments share lives in a shared module (:data:`SHARED`) or
further down, in ``golden``.

An experiment is a module that defines ``NAME``; a module without ``NAME`` inside a package whose
``__init__`` defines one belongs to that package's experiment (``traversal/scale.py`` is a part of
the ``traversal`` experiment). Every import is read with :mod:`ast`, imports inside functions too.
"""

import ast
from pathlib import Path

import pytest

from tests.test_layers import module_name

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = ROOT / "sim" / "experiments"
PREFIX = "gpurtl.sim.experiments"

#: Modules of ``sim/experiments`` that more than one experiment may import, and why.
SHARED = {
    PREFIX: "the experiments' framework (check_params, ExperimentFailed)",
    f"{PREFIX}.vgpr_sched": "the register-allocator experiments' RTL driver and wave scheduler",
    f"{PREFIX}.traversal.scenes": "the traversal runs' scenes and cameras",
    f"{PREFIX}.traversal.rtl": "the RT unit's RTL session loop, of traversal --rtl and traversal-rtl",
}


def _private(name):
    return any(part.startswith("_") and not part.startswith("__") for part in name.split("."))


def _defines_name(tree):
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == "NAME" for t in targets):
            return True
    return False


def modules(root=EXPERIMENTS):
    """``{name: (tree, is_package)}`` of every module under ``root``."""
    return {
        module_name(path): (ast.parse(path.read_text()), path.name == "__init__.py")
        for path in sorted(root.rglob("*.py"))
    }


def owners(found):
    """``{module: experiment}``: the experiment each module is (``NAME``) or belongs to (its
    package's ``__init__`` defines ``NAME``); ``None`` for a module of no experiment."""
    named = {name for name, (tree, _) in found.items() if _defines_name(tree)}
    owner = {}
    for name in found:
        owner[name] = None
        parts = name.split(".")
        for k in range(len(parts), len(PREFIX.split(".")), -1):
            if ".".join(parts[:k]) in named:
                owner[name] = ".".join(parts[:k])
                break
    return owner


def imports(tree, name, is_package, known):
    """``(line, module, imported name or None)`` of every import of ``tree`` (module ``name``);
    ``from X import y`` where ``X.y`` is a module of ``known`` reads as an import of ``X.y``."""
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = package.split(".")
                base = ".".join(base[: len(base) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            for alias in node.names:
                if f"{target}.{alias.name}" in known:
                    yield node.lineno, f"{target}.{alias.name}", None
                else:
                    yield node.lineno, target, alias.name


def violations(found, shared=SHARED):
    """One line per forbidden import of the modules ``found`` (as :func:`modules` returns)."""
    owner = owners(found)
    bad = []
    for name, (tree, is_package) in found.items():
        package = name if is_package else name.rpartition(".")[0]
        for line, target, item in imports(tree, name, is_package, found):
            where = f"{name}:{line} imports {target}" + (f".{item}" if item else "")
            target_package = target if found.get(target, (None, False))[1] else None
            target_package = target_package or target.rpartition(".")[0]
            if _private(target):
                bad.append(f"{where}: a private module")
            elif item and _private(item):
                if target_package != package and target != package:
                    bad.append(f"{where}: a private name from another package")
                elif owner.get(target) is not None and owner.get(target) != owner[name]:
                    bad.append(f"{where}: a private name from another experiment")
            if target in found and target != name and target not in shared:
                theirs = owner[target]
                if theirs is None or theirs != owner[name]:
                    bad.append(f"{where}: another experiment's module (or add it to SHARED)")
    return bad


def test_no_private_or_cross_experiment_imports():
    assert violations(modules()) == []


def test_shared_modules_exist_and_are_no_experiments():
    found = modules()
    owner = owners(found)
    for name in SHARED:
        assert name in found, name
        assert name == PREFIX or not _defines_name(found[name][0]), name
    assert owner[f"{PREFIX}.traversal.scale"] == f"{PREFIX}.traversal"
    assert owner[f"{PREFIX}.traversal.traversal_rtl"] == f"{PREFIX}.traversal.traversal_rtl"


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("from ._sched import run", "a private module"),
        ("from gpurtl.golden.bvh.wavefront import _special", "another package"),
        ("from .b import _helper", "another experiment"),
        ("from . import b", "another experiment's module"),
        ("def f():\n    from .b import measure", "another experiment's module"),
    ],
)
def test_the_check_fails_on_each_forbidden_import(source, why):
    """Made-up experiments ``a`` and ``b`` (both define ``NAME``) and a shared module ``c``."""
    found = {
        PREFIX: (ast.parse(""), True),
        f"{PREFIX}.a": (ast.parse(f"NAME = 'a'\n{source}\n"), False),
        f"{PREFIX}.b": (ast.parse("NAME = 'b'\n"), False),
        f"{PREFIX}.c": (ast.parse("def _x():\n    pass\n"), False),
    }
    bad = violations(found, shared={PREFIX: "", f"{PREFIX}.c": ""})
    assert len(bad) >= 1 and any(why in line for line in bad), bad


def test_the_check_passes_shared_and_own_modules():
    found = {
        PREFIX: (ast.parse(""), True),
        f"{PREFIX}.a": (ast.parse("NAME = 'a'\nfrom .c import f\nfrom . import check\n"), False),
        f"{PREFIX}.c": (ast.parse("def f():\n    pass\n"), False),
        f"{PREFIX}.p": (ast.parse("NAME = 'p'\nfrom . import part\n"), True),
        f"{PREFIX}.p.part": (ast.parse("from . import _own\n"), False),
    }
    assert violations(found, shared={PREFIX: "", f"{PREFIX}.c": ""}) == []
