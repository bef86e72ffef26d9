"""The sliced backend with behavioural FP32 cores (``sliced-behavioural``): the cores kept whole
in the netlist (BLIF with ``.subckt`` cores and enabled flip-flops, read by hand-written
netlists here), every FP32 unit against the golden model under stalls, and a wrong core caught.
The compiled cases are in the ``verilator`` tier."""

import pytest
from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.backends.sliced import driver, netlist
from gpurtl.sim.backends.sliced.netlist import TRUE, Aig, Core, NetlistError, read_blif
from gpurtl.sim.backends.sliced.run import check
from gpurtl.sim.core import registry

compiled = pytest.mark.verilator

# A core `add` of 2 stages on a = in[0:32], b = in[32:64], sub = in[64]; its result goes
# through a flip-flop with enable `go` and a reset on `rst` (which the reader ties low) to y.
BLIF = """# hand-written, as Yosys's write_blif -icells -param writes it
.model top
.inputs clk rst go {a} {b} s
.outputs {y} done
.names $false
.names $true
1
.subckt gpurtl_fp32_add clk=clk en=go {ia} {ib} i2=s {oz}
.param FTZ 00000000000000000000000000000001
.param STAGES 00000000000000000000000000000010
{flops}
.subckt $_SDFFE_PP0P_ C=clk D=go E=go Q=done_q R=rst
.names done_q done
1 1
.end
"""


def _blif(tmp_path, flop="$_SDFFE_PP0P_"):
    a = " ".join(f"a[{k}]" for k in range(32))
    b = " ".join(f"b[{k}]" for k in range(32))
    y = " ".join(f"y[{k}]" for k in range(32))
    ia = " ".join(f"i0[{k}]=a[{k}]" for k in range(32))
    ib = " ".join(f"i1[{k}]=b[{k}]" for k in range(32))
    oz = " ".join(f"o0[{k}]=z[{k}]" for k in range(32))
    flops = "\n".join(
        f".subckt {flop} C=clk D=z[{k}] E=go Q=y[{k}]" + (" R=rst" if "SDFF" in flop else "")
        for k in range(32)
    )
    text = BLIF.format(a=a, b=b, y=y, ia=ia, ib=ib, oz=oz, flops=flops)
    path = tmp_path / "netlist.blif"
    path.write_text(text)
    return path


def test_a_blif_netlist_keeps_its_core_and_the_enables(tmp_path):
    graph = read_blif(_blif(tmp_path), "top")
    assert [(c.unit, c.stages, c.ftz, c.widths) for c in graph.cores] == [("add", 2, True, [32])]
    core = graph.cores[0]
    go = 2 * graph.input_node("go")
    assert core.en == go
    assert core.operands[0] == [2 * graph.input_node("a", k) for k in range(32)]
    assert core.operands[2] == [2 * graph.input_node("s")]
    assert core.first == graph.first_core
    # the 33 flip-flops: enabled by go, the reset on rst gone (tied low), no gates left
    assert len(graph.latches) == 33 and graph.enables == [go] * 33
    assert sorted(lit for lit, _ in graph.latches) == [go] + [
        2 * (core.first + k) for k in range(32)
    ]
    assert graph.ands == []
    again = Aig.from_json(graph.to_json())
    assert (again.enables, [c.to_json() for c in again.cores]) == (
        graph.enables,
        [c.to_json() for c in graph.cores],
    )


def test_a_reset_other_than_rst_becomes_gates(tmp_path):
    path = _blif(tmp_path)
    path.write_text(path.read_text().replace("R=rst", "R=s"))
    graph = read_blif(path, "top")
    s = 2 * graph.input_node("s")
    # reset over enable: the flip-flop loads 0 when s is 1, whatever go is
    assert all(enable != 2 * graph.input_node("go") for enable in graph.enables)
    assert graph.ands and all(s >> 1 in (a >> 1, b >> 1) for a, b in graph.ands)
    plain = read_blif(_blif(tmp_path, "$_DFF_P_"), "top")
    assert plain.enables[:32] == [TRUE] * 32


def test_what_blif_it_does_not_model_is_named(tmp_path):
    path = _blif(tmp_path)
    path.write_text(
        path.read_text().replace(".names done_q done\n1 1", ".names done_q s done\n11 1")
    )
    with pytest.raises(NetlistError, match="a .names of 3 nets"):
        read_blif(path, "top")
    path.write_text(_blif(tmp_path).read_text().replace(".model top", ".model other"))
    with pytest.raises(NetlistError, match="no model `top`"):
        read_blif(path, "top")
    path.write_text(_blif(tmp_path).read_text().replace("$_SDFFE_PP0P_", "$_DFFSR_PPP_"))
    with pytest.raises(NetlistError, match=r"\$_DFFSR_PPP_"):
        read_blif(path, "top")


def test_every_core_of_a_graph_is_generated_once_with_its_delay_line(tmp_path):
    graph = read_blif(_blif(tmp_path), "top")
    graph = graph.replace(
        outputs={
            "o__payload": graph.outputs["y"],
            "i__ready": [TRUE],
            "o__valid": graph.outputs["done"],
        },
        inputs=[("i__valid", 0), ("o__ready", 0)] + graph.inputs[2:],
    )
    source = driver.driver_source(graph, 0, 32, 8)
    assert source.count("static void core_0_step") == 1 and "core_1_" not in source
    assert "vfp32::add(x0, x1, x2, FTZ)" in source and "const int FTZ = 1;" in source
    assert "line_0[64]" in source  # 2 stages x 32 vectors
    bad = graph.replace(cores=[Core("sqrt", 1, False, TRUE, [[0] * 32], [32], graph.first_core)])
    with pytest.raises(ValueError, match="no behavioural `sqrt` core"):
        driver.driver_source(bad, 0, 32, 8)


UNITS = ["add", "mul", "fma", "div", "rcp", "cmp", "minmax", "f2i", "i2f"]


@compiled
@pytest.mark.parametrize(
    "unit, params",
    [(unit, {}) for unit in UNITS] + [(unit, {"ftz": True}) for unit in ("add", "fma", "div")],
)
def test_every_unit_matches_the_golden_model_under_stalls(unit, params):
    block = registry.get(f"fp32_{unit}")
    report = BACKENDS["sliced-behavioural"].check(
        block, block.resolve(params), count=20_000, seed=5
    )
    assert (report.passed, report.failed) == (20_000, 0), report.first
    assert report.gates.get("cores") == 1
    assert report.latency_errors == report.ii_errors == 0


def _core_changed(**changes):
    def change(graph):
        cores = []
        for core in graph.cores:
            fields = {
                "unit": core.unit,
                "stages": core.stages,
                "ftz": core.ftz,
                "en": core.en,
                "operands": core.operands,
                "widths": core.widths,
                "first": core.first,
            }
            new = {
                name: value(core) if callable(value) else value for name, value in changes.items()
            }
            cores.append(Core(**{**fields, **new}))
        return graph.replace(cores=cores)

    return change


@compiled
@pytest.mark.parametrize(
    "unit, change",
    [
        ("add", {"unit": "mul"}),
        ("add", {"ftz": True}),  # the stimulus has subnormals
        # one stage more: the result leaves a cycle after the valid bit that goes with it
        ("fma", {"stages": lambda core: core.stages + 1}),
    ],
)
def test_a_wrong_core_is_caught(unit, change):
    block = registry.get(f"fp32_{unit}")
    report = check(
        block,
        block.resolve(),
        count=4000,
        seed=3,
        fp_cores="behavioural",
        graph_filter=_core_changed(**change),
    )
    assert report.failed > 0 and report.first.field != "(latency)", report.first


@compiled
def test_a_graph_compiled_in_many_files_runs_as_one(monkeypatch):
    monkeypatch.setattr(driver, "GATES_PER_FUNCTION", 200)
    monkeypatch.setattr(driver, "FUNCTIONS_PER_FILE", 2)
    block = registry.get("fp32_add")
    files = driver.driver_files(*_graph_and_widths(block), words=2, ring=32, window=8192)
    assert len(files) > 3 and all(name.startswith("gates_") for name in set(files) - {"driver.cpp"})
    report = check(block, block.resolve(), count=5000, seed=2)
    assert (report.passed, report.failed) == (5000, 0), report.first


def _graph_and_widths(block):
    from gpurtl.sim.backends.sliced import build, netlist

    params = block.resolve()
    text, stubs = build.export(block, params)
    graph, _ = netlist.aig(text, block.name, stubs=stubs)
    in_layout, out_layout = block.layouts(**params)
    from amaranth.hdl import Shape

    return graph, Shape.cast(in_layout).width, Shape.cast(out_layout).width


def test_a_net_driven_twice_is_named(tmp_path):
    path = _blif(tmp_path)
    path.write_text(path.read_text().replace(".end", ".names s done\n1 1\n.end"))
    with pytest.raises(NetlistError, match="net done of `top` has two drivers"):
        read_blif(path, "top")


class _Named(wiring.Component):
    """A register of ``x``, a struct whose array field Amaranth also writes as wires named
    ``x.pair[0]`` and ``x.pair[1]``: in BLIF the names of bits 0 and 1 of ``x.pair``."""

    def __init__(self):
        signature = stream.Signature(unsigned(2))
        super().__init__({"i": In(signature), "o": Out(signature)})

    def elaborate(self, platform):
        m = Module()
        en = Signal()
        m.d.comb += [en.eq(~self.o.valid | self.o.ready), self.i.ready.eq(en)]
        x = Signal(data.StructLayout({"pair": data.ArrayLayout(1, 2)}), name="x")
        m.d.comb += [x.pair[0].eq(self.i.payload[1]), x.pair[1].eq(self.i.payload[0])]
        held, valid = Signal(2), Signal()
        with m.If(en):
            m.d.sync += [held.eq(x), valid.eq(self.i.valid)]
        m.d.comb += [self.o.valid.eq(valid), self.o.payload.eq(held)]
        return m


@pytest.mark.full  # one Yosys run (seconds; the first run of the wheel compiles it, ~1 min)
def test_wires_named_like_bits_stay_apart(tmp_path):
    from amaranth.back import verilog

    text = verilog.convert(_Named(), name="named", emit_src=False)
    netlist.synthesize(text, "named", tmp_path)
    graph = read_blif(tmp_path / "netlist.blif", "named")
    # the output swaps the two input bits, one register behind
    out = graph.output("o__payload")
    assert [graph.latches[(lit >> 1) - graph.first_latch][0] for lit in out] == [
        2 * graph.input_node("i__payload", 1),
        2 * graph.input_node("i__payload", 0),
    ]
