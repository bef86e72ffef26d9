"""The experiments stay apart: no module of ``sim/experiments`` imports a private module, a
private name (``_x``) from another package or from another experiment, or another experiment's
module; code two experiments share lives in a shared module (:data:`SHARED`), in the package of
the experiments that share it, or further down, in ``golden``.

An experiment is a module that defines ``NAME``; a module without ``NAME`` inside a package whose
``__init__`` defines one belongs to that package's experiment (``traversal/scale.py`` is a part of
the ``traversal`` experiment). The modules without ``NAME`` of an experiment package are its
experiments' shared code (``traversal/scenes.py`` serves ``traversal`` and ``traversal-rtl``);
at the folder's root, a module other experiments import is listed in :data:`SHARED`. Every
import is read with :mod:`ast`, imports inside functions too.
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
    named = {name for name, (tree, _) in found.items() if _defines_name(tree)}
    bad = []
    for name, (tree, is_package) in found.items():
        package = name if is_package else name.rpartition(".")[0]
        mine = owner[name]
        for line, target, item in imports(tree, name, is_package, found):
            where = f"{name}:{line} imports {target}" + (f".{item}" if item else "")
            if _private(target):
                bad.append(f"{where}: a private module")
            elif item and _private(item):
                if target != package and target.rpartition(".")[0] != package:
                    bad.append(f"{where}: a private name from another package")
                elif owner.get(target) is not None and owner[target] != mine:
                    bad.append(f"{where}: a private name from another experiment")
            if target not in found or target == name:
                continue
            if target in named:
                ok = target == mine  # a part of an experiment package reads its package
            else:
                sibling = target.rpartition(".")[0] == package != PREFIX
                ok = target in shared or sibling or (mine is not None and owner[target] == mine)
            if not ok:
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


#: Made-up experiments: ``a`` and ``b`` at the root, a root module ``c`` listed as shared and
#: ``d`` not listed; a package ``p`` (an experiment) holding the experiment ``p.q``, its part
#: ``p.part`` and the shared ``p.common``.
MADE_UP = {
    "": "",
    ".a": "NAME = 'a'\n",
    ".b": "NAME = 'b'\n",
    ".c": "def f():\n    pass\n",
    ".d": "def f():\n    pass\n",
    ".p": "NAME = 'p'\n",
    ".p.q": "NAME = 'q'\n",
    ".p.part": "def _g():\n    pass\n",
    ".p.common": "def f():\n    pass\n",
}


def _made_up(module, source):
    found = {}
    for suffix, text in MADE_UP.items():
        name = PREFIX + suffix
        is_package = suffix in ("", ".p")
        text = text + source if suffix == module else text
        found[name] = (ast.parse(text), is_package)
    return violations(found, shared={PREFIX: "", f"{PREFIX}.c": ""})


@pytest.mark.parametrize(
    ("module", "source", "why"),
    [
        (".a", "from ._sched import run", "a private module"),
        (".a", "from gpurtl.golden.bvh.wavefront import _special", "another package"),
        (".a", "from .b import _helper", "another experiment"),
        (".a", "from . import b", "another experiment's module"),
        (".a", "def f():\n    from .b import measure", "another experiment's module"),
        (".a", "from .d import f", "another experiment's module"),
        (".a", "from .p.common import f", "another experiment's module"),
        (".p.q", "from . import _steady", "a private name from another experiment"),
        (".p.q", "from .part import _g", "a private name from another experiment"),
        (".p.part", "from .q import measure", "another experiment's module"),
    ],
)
def test_the_check_fails_on_each_forbidden_import(module, source, why):
    bad = _made_up(module, source)
    assert len(bad) >= 1 and any(why in line for line in bad), bad


@pytest.mark.parametrize(
    ("module", "source"),
    [
        (".a", "from .c import f\nfrom . import check_params"),
        (".p.q", "from .common import f\nfrom . import common\nfrom .part import g"),
        (".p.part", "from . import _own\nfrom .common import f"),
        (".p", "from . import part\nfrom .part import _g"),
    ],
)
def test_the_check_passes_shared_and_own_modules(module, source):
    assert _made_up(module, source) == []
