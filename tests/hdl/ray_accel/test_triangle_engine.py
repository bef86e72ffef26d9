"""RTL of the triangle path (primitive decode, ray setup, 2-lane triangle engine, result format)
in lockstep with the golden model, plus watertightness measured on the RTL outputs."""

import random

import numpy as np
import pytest
from amaranth.hdl import Const
from amaranth.sim import Simulator

from gpurtl.golden.ray_accel.encode import primitive_node as pn
from gpurtl.golden.ray_accel.encode.ray import default_desc
from gpurtl.golden.ray_accel.scalar import triangle as tr
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import registry
from gpurtl.sim.harness import golden_io

# The Amaranth simulator compiles this large design (about 75 FP32 cores) slowly; the default
# pysim tests use shallow FP32 cores (fewer registers, same logic), the Verilator test and the slow
# pysim test the default depths.
LIGHT = {"add_stages": 1, "mul_stages": 1, "fma_stages": 1, "div_stages": 2}


def random_pair_nodes(rng, count):
    """Encoded nodes (random shared-vertex pairs) and arbitrary-bit nodes, with pointers."""
    out = []
    while len(out) < count:
        if rng.random() < 0.25:
            out.append((rng.getrandbits(1024), rng.getrandbits(32)))
            continue
        pool = [tuple(rng.uniform(-9, 9) for _ in range(3)) for _ in range(rng.randint(3, 9))]
        if rng.random() < 0.5:
            pool = [tuple(round(c * 4) / 4 for c in v) for v in pool]
        pairs = []
        for _ in range(rng.randint(1, 8)):
            tris = []
            for k in range(2):
                if k and rng.random() < 0.3:
                    tris.append(None)
                    continue
                tris.append(
                    pn.Triangle(
                        tuple(pool[i] for i in rng.sample(range(len(pool)), 3)),
                        prim_id=rng.getrandbits(rng.randint(1, 31)),
                        geo_id=rng.getrandbits(rng.randint(1, 30)),
                        opaque=rng.randint(0, 1),
                    )
                )
            pairs.append(pn.TrianglePair(tris[0], tris[1], range_stop=rng.randint(0, 1)))
        try:
            node = pn.encode_primitive_node(pairs)
        except ValueError:
            continue
        out.append((pn.node_int(node), rng.getrandbits(32)))
    return out


def test_primitive_decode_matches_golden():
    from gpurtl.hdl.ray_accel.primitive_decode import PrimitiveDecodeCore

    rng = random.Random(4)
    cases = random_pair_nodes(rng, 120)
    dut = PrimitiveDecodeCore()
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    failures = []

    async def bench(ctx):
        ctx.set(dut.en, 1)
        pending = []
        for step in range(len(cases) + dut.latency):
            if step < len(cases):
                n, ptr = cases[step]
                ctx.set(dut.i.node, [(n >> (32 * k)) & 0xFFFFFFFF for k in range(32)])
                ctx.set(dut.i.node_ptr, ptr)
                pending.append((n, ptr))
            await ctx.tick()
            if step + 1 >= dut.latency and pending:
                n, ptr = pending.pop(0)
                o = ctx.get(dut.o)
                d = pn.decode_pair(n, (ptr & 3) | ((ptr & 8) >> 1))
                got = (o.error, o.nav) + tuple(
                    (
                        o.tri[k].prim_id,
                        o.tri[k].geo_id,
                        o.tri[k].opaque,
                        o.tri[k].procedural,
                        o.tri[k].valid,
                    )
                    for k in range(2)
                )
                want = (int(d.error or (ptr & 7) > 3), d.navigation) + tuple(
                    (t.prim_id, t.geo_id, t.opaque, int(t.procedural), int(t.valid)) for t in d.tris
                )
                verts_ok = all(
                    d.tris[k].procedural
                    or tuple(
                        tuple(Const.cast(o.tri[k].v[a][c]).value for c in range(3))
                        for a in range(3)
                    )
                    == d.tris[k].vertices
                    for k in range(2)
                )
                if got != want or not verts_ok:
                    failures.append((hex(n), ptr, want, got))

    sim.add_testbench(bench)
    sim.run()
    assert not failures, failures[:2]


def _watertight_transactions(rng, rays):
    """Exact rays through shared edges/vertices of a closed dyadic mesh packed into real nodes,
    one transaction per (ray, adjacent triangle). Returns (transactions, owner (ray, tri))."""
    from gpurtl.golden.ray_accel.encode import meshes
    from gpurtl.sim.blocks.ray_triangle import pair_pointer

    v, f = meshes.dyadic_box(2, 8, rng=rng, jitter=1)
    tris = [
        pn.Triangle(tuple(tuple(float(c) for c in v[k]) for k in face), prim_id=n, geo_id=1)
        for n, face in enumerate(f)
    ]
    where = [(node, pair, tri) for node, slots in pn.pack_triangles(tris) for pair, tri in slots]
    origins, dirs, cands = meshes.edge_vertex_rays(rng, v, f, per_edge=1, exact=True)
    txs, owner = [], []
    desc = default_desc()
    for r in rng.permutation(len(cands))[:rays]:
        ray = {
            "origin": [int(x) for x in origins[r].view(np.uint32)],
            "dir": [int(x) for x in dirs[r].view(np.uint32)],
            "extent": 0x7F800000,
            "instance_mask": 0xFF,
        }
        for face in cands[r]:
            node, pair, tri = where[face]
            n = pn.node_int(node)
            txs.append(
                {
                    "ray": ray,
                    "node": [(n >> (32 * k)) & 0xFFFFFFFF for k in range(32)],
                    "node_ptr": pair_pointer(pair),
                    "pointer_flags": 0,
                    "desc": desc,
                }
            )
            owner.append((int(r), tri))
    return txs, owner


@pytest.mark.parametrize(
    "random_count, edge_rays",
    [
        (16, 6),
        pytest.param(40, 12, marks=pytest.mark.full),
        pytest.param(140, 36, marks=pytest.mark.slow),
    ],
)
def test_lockstep_pysim_and_watertight_on_rtl(random_count, edge_rays):
    """One Amaranth simulation (the design is large: ~15 s to compile): random transactions from
    the block's stimulus (real nodes, edge rays, IEEE cases, malformed nodes), then exact rays
    through shared edges and vertices; every output must equal the golden model, with random
    valid/ready stalls after the first tenth, and the RTL's own results must hit at least one
    triangle adjacent to each edge/vertex ray (watertightness measured on the RTL)."""
    from gpurtl.sim.core import layouts
    from gpurtl.sim.harness.engine import StallPattern

    block = registry.get("ray_triangle")
    params = block.resolve(LIGHT)
    rng = np.random.default_rng(1)
    random_txs = block.stimulus(rng, random_count, **params)
    edge_txs, owner = _watertight_transactions(rng, edge_rays)
    txs = random_txs + edge_txs
    expected = golden_io.golden_outputs(block, params, txs)
    stalls = StallPattern(seed=1, p_valid=0.7, p_ready=0.7, free_run=len(txs) // 10)
    report = BACKENDS["pysim"].run(
        block, params, txs, expected=expected, stalls=stalls, keep_outputs=True
    )
    assert report.failed == 0, str(report.first)
    assert report.passed == len(txs)
    _, out_layout = block.layouts(**params)
    hits = {}
    for bits, (r, tri) in zip(report.outputs[len(random_txs) :], owner):
        result = layouts.unpack(out_layout, bits)["result"]
        hits[r] = hits.get(r, 0) + int(result[4 * tri] != tr.POS_INF)
    assert len(hits) == edge_rays and min(hits.values()) >= 1


@pytest.mark.slow
def test_legacy_lockstep_pysim():
    """Legacy nodes, two lanes, with no stalls at all: every transaction takes exactly
    ``latency`` cycles and one is accepted per cycle (II = 1: N transactions in N + latency
    cycles)."""
    from gpurtl.sim.harness.engine import StallPattern

    block = registry.get("ray_triangle_legacy")
    params = block.resolve(LIGHT)
    txs = block.stimulus(np.random.default_rng(2), 100, **params)
    expected = golden_io.golden_outputs(block, params, txs)
    report = BACKENDS["pysim"].run(
        block, params, txs, expected=expected, stalls=StallPattern(free_run=len(txs))
    )
    assert report.failed == 0, str(report.first)
    assert report.passed == 100
    from gpurtl.hdl.ray_accel.legacy_triangle import legacy_latency
    from gpurtl.sim.blocks.ray_triangle import stages_of

    assert report.cycles == len(txs) + legacy_latency(stages_of(params))


@pytest.mark.slow
def test_lockstep_default_core_latencies_pysim():
    """The default FP32 core depths (long delay lines) on the Amaranth simulator too."""
    block = registry.get("ray_triangle")
    params = block.resolve()
    report = BACKENDS["pysim"].check(block, params, count=40, seed=3)
    assert report.failed == 0, str(report.first)


@pytest.mark.slow
@pytest.mark.verilator
def test_lockstep_verilator():
    """Slow: exporting this design takes minutes (Yosys) and Verilator's C++ build longer; the
    default run checks the Amaranth simulator only. Uses the shallow FP32 configuration."""
    block = registry.get("ray_triangle")
    params = block.resolve(LIGHT)
    report = BACKENDS["verilator"].check(block, params, count=1500, seed=7)
    assert report.failed == 0, str(report.first)
    assert report.passed == 1500


@pytest.mark.slow  # another Verilator build; `make test-verilator` runs every block once
@pytest.mark.verilator
def test_decode_lockstep_verilator():
    """The default run's one Verilator build of this path: the primitive-node decode (integer
    RTL) on Verilator/cocotb, real and malformed nodes, random stalls. The FP32 cores have their
    own Verilator tests; the whole triangle path on Verilator is the slow test above."""
    block = registry.get("ray_primitive_decode")
    report = BACKENDS["verilator"].check(block, block.resolve(), count=1000, seed=5)
    assert report.failed == 0, str(report.first)
    assert report.passed == 1000


def test_decode_block_lockstep_pysim():
    block = registry.get("ray_primitive_decode")
    report = BACKENDS["pysim"].check(block, block.resolve(), count=300, seed=1)
    assert report.failed == 0, str(report.first)
