"""The package's own code keeps to Amaranth's public API, and block defaults live once in facts/."""

import dataclasses
import inspect
import re
import signal
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Names of Amaranth's private members: name-mangled attributes and its private modules
#: (``amaranth._toolchain``, ``amaranth.hdl._ast``) and what they hold.
PRIVATE = re.compile(
    r"_MustUse__|_Component__|amaranth(\.[a-z]\w*)*\._[a-z]|from amaranth[\w.]* import _[a-z]"
)


def product_files():
    for layer in ("facts", "hdl", "golden", "sim"):
        yield from sorted((ROOT / layer).rglob("*.py"))


def test_no_private_amaranth_names_in_the_package():
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in product_files()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if PRIVATE.search(line)
    ]
    assert found == []


def test_the_check_can_fail():
    assert PRIVATE.search("core._MustUse__silence = True")
    assert PRIVATE.search("from amaranth._unused import MustUse")
    assert PRIVATE.search("from amaranth._toolchain.yosys import YosysError, find_yosys")
    assert PRIVATE.search("from amaranth.hdl import _ast")
    assert not PRIVATE.search("from amaranth.back.verilog import YosysError")


def test_an_interrupt_silences_unused_component_warnings():
    from amaranth.lib import wiring

    from gpurtl.sim.tools import cliutil

    previous = signal.getsignal(signal.SIGINT)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            assert cliutil.interrupted() == cliutil.EXIT_INTERRUPTED
        finally:
            signal.signal(signal.SIGINT, previous)
        unused = wiring.Component(wiring.Signature({}))
        del unused
        import gc

        gc.collect()
    assert seen == []


def _defaults(function):
    return {
        name: p.default
        for name, p in inspect.signature(function).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


@pytest.mark.parametrize(
    "defaults, constructors",
    [
        (
            "gpurtl.facts.vgpr_alloc:DYN_DEFAULTS",
            (
                "gpurtl.golden.vgpr_alloc.dynamic:DynVgprModel",
                "gpurtl.hdl.vgpr_alloc.dynamic:DynVgprAllocator",
                "gpurtl.facts.vgpr_alloc:dyn_params_ok",
            ),
        ),
        (
            "gpurtl.facts.waitcnt:MEMORY_DEFAULTS",
            (
                "gpurtl.golden.waitcnt:WaitcntMemoryModel",
                "gpurtl.hdl.waitcnt.memory:WaitcntMemory",
                "gpurtl.golden.waitcnt:WaitCountersModel",
                "gpurtl.hdl.waitcnt.counters:WaitCounters",
            ),
        ),
    ],
)
def test_block_defaults_come_from_facts(defaults, constructors):
    import importlib

    def load(text):
        module, name = text.split(":")
        return getattr(importlib.import_module(module), name)

    facts = dataclasses.asdict(load(defaults))
    for text in constructors:
        given = _defaults(load(text))
        shared = {name: value for name, value in given.items() if name in facts}
        assert shared and shared == {name: facts[name] for name in shared}, text


@pytest.mark.parametrize(
    "block, defaults",
    [
        ("vgpr_dyn", "gpurtl.facts.vgpr_alloc:DYN_DEFAULTS"),
        ("waitcnt_mem", "gpurtl.facts.waitcnt:MEMORY_DEFAULTS"),
    ],
)
def test_registry_defaults_come_from_facts(block, defaults):
    import importlib

    from gpurtl.sim.core import registry

    module, name = defaults.split(":")
    facts = dataclasses.asdict(getattr(importlib.import_module(module), name))
    params = {p.name: p.default for p in registry.get(block).params}
    assert {k: params[k] for k in facts} == facts


def test_the_public_api_is_type_checked_in_make_lint():
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    files = set(config["files"])
    assert {"sim/core/registry.py", "sim/harness/backend.py", "sim/harness/session.py"} <= files
    assert all((ROOT / path).is_file() for path in files)
    lint = (ROOT / "Makefile").read_text().split("\nlint:")[1].split("\n\n")[0]
    assert "$(BIN)/mypy" in lint
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(req.startswith("mypy") for req in dev["dev"])


def test_the_typed_files_pass_mypy():
    import subprocess
    import sys

    pytest.importorskip("mypy", reason="mypy (the dev extra) is not installed")
    done = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
