"""The block registry: ``get`` of a block imports its own module only (a command's start-up),
and every block is still there for ``blocks``."""

import subprocess
import sys


def _modules_after(code):
    script = f"import sys\n{code}\nprint(sorted(m for m in sys.modules if m.startswith('gpurtl.')))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return eval(result.stdout)


def test_get_imports_only_the_blocks_own_module():
    modules = _modules_after(
        "from gpurtl.sim.core import registry\nassert registry.get('waitcnt').name == 'waitcnt'"
    )
    assert "gpurtl.sim.blocks.waitcnt" in modules
    assert "gpurtl.sim.blocks.rt_unit" not in modules and "gpurtl.sim.blocks.eu" not in modules


def test_a_block_of_another_modules_name_and_all_blocks_are_found():
    from gpurtl.sim.core import registry

    assert registry.get("l0_cache").name == "l0_cache"  # registered by sim/blocks/rt_unit.py
    names = {block.name for block in registry.blocks()}
    assert {"waitcnt", "rt_unit", "l0_cache", "node_fetch", "vgpr_dyn"} <= names


def test_check_does_not_import_the_experiments():
    modules = _modules_after(
        "from gpurtl.sim.tools import cli\n"
        "parser = cli.build_parser('check')\n"
        "parser.parse_args(['check', 'waitcnt'])"
    )
    assert not any(m.startswith("gpurtl.sim.experiments.") for m in modules)
