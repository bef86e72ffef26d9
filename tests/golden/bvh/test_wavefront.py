"""The traversal loop (golden/bvh/wavefront.py) in its three modes (BVH8, BVH4, BVH4x2), with
and without OBBs: every step against the instruction model (``batch.intersect_words`` on the real
node dwords); every step of one wave answered by both executors, the array paths and the lanes'
instructions through the golden ``intersect_wave`` and ``ds_bvh_stack`` (the per-wave loop's),
alike; the whole loop against the per-wave loop; the closest hits against a brute-force float64
test of every triangle; and its native-float32 box path against the golden batch box path."""

import numpy as np
import pytest

from gpurtl.facts.ray_accel import INSTR_LAYOUT, OUT_LAYOUT
from gpurtl.golden.bvh import builder as B
from gpurtl.golden.bvh import mesh as M
from gpurtl.golden.bvh import wavefront as WF
from gpurtl.golden.bvh import wide as W
from gpurtl.golden.ray_accel.encode.ray import default_desc
from gpurtl.golden.ray_accel.vector import batch
from gpurtl.golden.ray_accel.vector import batch_box as BB
from gpurtl.golden.ray_accel.vector.bitfields import field_span, read_fields
from gpurtl.golden.ray_accel.vector.intersect_wave import intersect_wave
from gpurtl.golden.traversal import loop as L
from gpurtl.golden.traversal import stack as S
from gpurtl.golden.traversal.rays import sphere_rays as make_rays
from gpurtl.sim.core.words import words_from_dicts


@pytest.fixture(scope="module")
def bunny():
    return M.bunny()


@pytest.fixture(scope="module")
def scenes(bunny):
    blas = W.build_wide(bunny, width=8, leaf_pairs=4)
    inst = [
        (bunny, np.hstack([M.rotation_matrix((0, 1, 0), 0.7 * k), [[0.05 * k], [0.0], [0.0]]]))
        for k in range(3)
    ]
    world = M.merge([m.transformed(x) for m, x in inst])
    return {
        "blas": (blas, bunny),
        "tlas": (W.build_wide_tlas(inst), world),
        "obb": (W.build_wide(bunny, width=8, leaf_pairs=4, obb_threshold=B.OBB_THRESHOLD), bunny),
        "bvh4": (W.build_wide(bunny, width=4), bunny),
    }


def _out_field(words, *path):
    offset, width = field_span(OUT_LAYOUT, *path)
    return read_fields(words, [offset], width)[:, 0]


def _instr(ops, k, dual, desc):
    ptrs = ops["ptr"][k] if dual else [ops["ptr"][k], 0]
    nodes = ops["dwords"][k] if dual else [ops["dwords"][k], [0] * 32]
    if dual and ptrs[1] == WF._NULL_PTR:
        nodes = [nodes[0], L._NULL_BOX]  # the per-wave loop's empty second node
    return {
        "dual": int(dual),
        "ray": {
            "origin": [int(v) for v in ops["origin"][k]],
            "dir": [int(v) for v in ops["dir"][k]],
            "extent": int(ops["extent"][k]),
            "instance_mask": 0xFF,
        },
        "node_ptr": [int(v) for v in ptrs],
        "node": [[int(v) for v in dw] for dw in nodes],
        "pointer_flags": 0,
        "desc": desc,
    }


def _check_dual(dw, out):
    """Legacy dual steps: the box halves' sorted pointers, the triangles' t_num / t_den."""
    ptrs, t_out, is_box = out
    both = is_box[0] & is_box[1]
    assert np.array_equal(dw[both, :8], ptrs[both])
    for h in (0, 1):
        one = is_box[h] & ~both
        assert np.array_equal(dw[one, 4 * h : 4 * h + 4], ptrs[one, 4 * h : 4 * h + 4])
        tri = ~is_box[h]
        with np.errstate(all="ignore"):
            t = dw[tri, 4 * h].view(np.float32) / dw[tri, 4 * h + 1].view(np.float32)
        assert np.array_equal(t.view(np.uint32), t_out[tri, h].view(np.uint32))


@pytest.mark.parametrize(
    "name,mode",
    [("blas", "bvh8"), ("tlas", "bvh8"), ("obb", "bvh8"), ("bvh4", "bvh4"), ("bvh4", "bvh4x2")],
)
def test_every_step_equals_the_instruction_model(scenes, name, mode):
    top, world = scenes[name]
    tables = WF.Tables(top)
    origins, dirs = make_rays(world, 96, seed=7)
    steps = {"box": [], "pair": [], "instance": [], "dual": []}
    WF.trace(
        tables,
        origins,
        dirs,
        mode=mode,
        probe=lambda kind, ops, out: steps[kind].append((ops, out)),
    )
    legacy = mode != "bvh8"
    assert bool(steps["dual"]) == legacy
    assert legacy or (steps["box"] and steps["pair"])
    assert (name == "tlas") == bool(steps["instance"])
    desc = default_desc(wide_sort=0) if mode == "bvh4" else default_desc()
    checked = rotated = wide = 0
    for kind, items in steps.items():
        for ops, out in items[::3]:
            instrs = [_instr(ops, k, legacy, desc) for k in range(len(ops["ptr"]))]
            got = batch.intersect_words(words_from_dicts(INSTR_LAYOUT, instrs))
            dw = np.stack([_out_field(got, "dw", k) for k in range(10)], axis=1)
            assert not _out_field(got, "status").any()
            if kind == "box":
                assert np.array_equal(dw[:, :8], out)
                rotated += int(((ops["dwords"][:, 7] & 0x7F) != 0x7F).sum())
            elif kind == "dual":
                _check_dual(dw, out)
                two = ops["ptr"][:, 1] != WF._NULL_PTR
                wide += int((out[2][0] & out[2][1] & two).sum())
            elif kind == "pair":
                t2, prims, valid1, nav = out
                assert np.array_equal(dw[:, [0, 4]], t2)
                assert np.array_equal(dw[:, 3] >> 1, prims[:, 0])
                assert np.array_equal((dw[:, 7] >> 1)[valid1], prims[valid1, 1])
                assert np.array_equal(dw[:, 8] & 3, nav)
            else:
                hit, new_o, new_d = out
                assert np.array_equal((dw[:, 7] & 0xFF) != 0xFF, hit)
                origin = np.stack([_out_field(got, "origin", k) for k in range(3)], axis=1)
                direction = np.stack([_out_field(got, "dir", k) for k in range(3)], axis=1)
                assert np.array_equal(origin, new_o) and np.array_equal(direction, new_d)
            checked += len(instrs)
    assert checked > 300
    assert (name == "obb") == (rotated > 100)
    assert (mode == "bvh4x2") == (wide > 50)  # two boxes sorted 8-wide


@pytest.mark.parametrize(
    "name,mode,stack_size",
    [
        ("blas", "bvh8", 16),
        ("blas", "bvh8", 4),
        ("tlas", "bvh8", 16),
        ("tlas", "bvh8", 3),
        ("obb", "bvh8", 16),
        ("obb", "bvh8", 4),
        ("bvh4", "bvh4", 16),
        ("bvh4", "bvh4", 3),
        ("bvh4", "bvh4x2", 16),
        ("bvh4", "bvh4x2", 3),
    ],
)
def test_loop_equals_the_per_wave_loop(scenes, name, mode, stack_size):
    top, world = scenes[name]
    origins, dirs = make_rays(world, 64, seed=3)
    res = WF.trace(WF.Tables(top), origins, dirs, mode=mode, stack_size=stack_size)
    scene = L.Scene(name, top, mode)
    waves = [
        L.trace_wave(scene, origins[w : w + 32], dirs[w : w + 32], stack_size=stack_size)
        for w in range(0, len(origins), 32)
    ]
    assert (res.prim >= 0).sum() > 40
    for field in ("prim", "inst", "t"):
        assert np.array_equal(
            np.concatenate([getattr(t, field) for t in waves]), getattr(res, field)
        ), field
    for counter in (
        "steps",
        "box_tests",
        "tri_tests",
        "pushes",
        "pops",
        "fetches",
        "overflows",
        "walkback_steps",
    ):
        ref = np.concatenate([t.counts[counter] for t in waves])
        assert np.array_equal(ref, res.counts[counter]), counter
    if stack_size < 8:
        assert res.counts["overflows"].sum() > 0
        assert res.counts["walkback_steps"].sum() > 0
    if mode == "bvh4x2":
        assert (res.counts["fetches"] > res.counts["steps"]).any()


def _same(got, want, what):
    """Two answers of one executor step: arrays, tuples of them, or ``None``."""
    if want is None or got is None:
        assert got is None and want is None, what
    elif isinstance(want, tuple):
        assert len(got) == len(want), what
        for k, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{what}[{k}]")
    else:
        g, w = np.asarray(got), np.asarray(want)
        if w.dtype.kind == "f":
            g, w = g.astype(np.float32).view(np.uint32), w.view(np.uint32)
        assert np.array_equal(g, w), what


@pytest.mark.parametrize(
    "name,mode,stack_size",
    [
        ("blas", "bvh8", 16),
        ("tlas", "bvh8", 3),
        ("obb", "bvh8", 4),
        ("bvh4", "bvh4", 3),
        ("bvh4", "bvh4x2", 3),
    ],
)
def test_both_executors_answer_every_step_alike(scenes, name, mode, stack_size):
    """One wave through the loop, every step answered by the array executors (which drive it on)
    and by the per-wave loop's scalar ones (each lane's instruction through the golden
    ``intersect_wave``, each stack instruction through ``ds_bvh_stack`` on an LDS): the answers
    are equal on every step."""
    top, world = scenes[name]
    origins, dirs = make_rays(world, 32, seed=6)
    scene = L.Scene(name, top, mode)
    lanes = L.LaneSteps(scene)
    vector_stack = WF.GoldenStack(32, stack_size, mode)
    lds = S.LdsMemory(32 * stack_size)
    addr = [S.initial_stack_addr(k) for k in range(32)]
    program = WF.steps(scene.tables, origins, dirs, mode=mode)
    message = next(program)
    seen = {"intersect": 0, "intersect_dual": 0, "stack": 0, "walking": 0}
    while True:
        kind, args, info = message
        if kind == "stack":
            r, last, data = args
            want = vector_stack(*args)
            requests = lanes.stack_requests(r.tolist(), addr, last, data)
            responses = L.stack_answers(requests, lds, stack_size)
            got = lanes.stack_answers(None, r.tolist(), addr, requests, responses, None)
        else:
            _tb, ray, r, rows, ptr, aux = args
            vector = WF.intersect_golden if kind == "intersect" else WF.intersect_dual_golden
            want = vector(*args)
            instrs, _lines = lanes.instructions(kind, ray, r, rows, ptr)
            outs = intersect_wave(instrs)
            if kind == "intersect":
                got = L.bvh8_answers(outs, aux)
                if want[1] is not None:  # a pair without triangle 1: its prim id is unused
                    valid1 = want[1][2]
                    got[1][1][~valid1, 1] = want[1][1][~valid1, 1]
            else:
                got = L.dual_answers(outs, ptr)
            seen["walking"] += int(info["walking"].sum())
        _same(got, want, f"{kind} step {seen[kind]}")
        seen[kind] += len(args[2] if kind != "stack" else args[0])
        try:
            message = program.send(want)
        except StopIteration:
            break
    assert seen["intersect" if mode == "bvh8" else "intersect_dual"] > 300
    assert seen["stack"] > 300
    if stack_size < 8:
        assert seen["walking"] > 0


def _brute_force(mesh, origins, dirs):
    """Closest float64 Moller-Trumbore hit of every ray over every triangle: ``(t, prim)``."""
    tris = mesh.triangles.astype(np.float64)
    v0, e1, e2 = tris[:, 0], tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0]
    ts, prims = [], []
    for o, d in zip(origins.astype(np.float32), dirs.astype(np.float32)):
        o, d = o.astype(np.float64), d.astype(np.float64)
        p = np.cross(d, e2)
        det = np.einsum("ij,ij->i", e1, p)
        with np.errstate(all="ignore"):
            s = o - v0
            u = np.einsum("ij,ij->i", s, p) / det
            q = np.cross(s, e1)
            v = (q @ d) / det
            t = np.einsum("ij,ij->i", e2, q) / det
        t = np.where((det != 0) & (u >= 0) & (v >= 0) & (u + v <= 1) & (t >= 0), t, np.inf)
        k = int(np.argmin(t))
        ts.append(t[k])
        prims.append(k if np.isfinite(t[k]) else -1)
    return np.array(ts), np.array(prims)


@pytest.mark.parametrize("name,mode", [("blas", "bvh8"), ("obb", "bvh8"), ("bvh4", "bvh4")])
def test_closest_hits_equal_brute_force(scenes, name, mode):
    """The loop's closest hits against every triangle tested in float64 (no BVH, no FP32): the
    same triangles (these rays aim at triangles; none grazes two hits closer than FP32 tells
    apart) at the same distances."""
    top, mesh = scenes[name]
    origins, dirs = make_rays(mesh, 96, seed=9)
    res = WF.trace(WF.Tables(top), origins, dirs, mode=mode)
    t, prim = _brute_force(mesh, origins, dirs)
    assert (prim >= 0).sum() > 60
    assert np.array_equal(np.isfinite(res.t), np.isfinite(t))
    hit = np.isfinite(t)
    assert np.allclose(res.t[hit], t[hit], rtol=1e-5)
    assert np.array_equal(res.prim, prim)


def test_modes_and_structures_must_match(scenes):
    top, world = scenes["bvh4"]
    origins, dirs = make_rays(world, 4, seed=1)
    with pytest.raises(ValueError, match="does not run bvh4 nodes"):
        WF.trace(WF.Tables(top), origins, dirs, mode="bvh8")
    with pytest.raises(ValueError, match="does not run bvh8 nodes"):
        WF.trace(WF.Tables(scenes["blas"][0]), origins, dirs, mode="bvh4x2")
    with pytest.raises(ValueError, match="`mode` must be one of"):
        WF.trace(WF.Tables(top), origins, dirs, mode="bvh2")


def test_first_hit_and_tmax(scenes):
    top, world = scenes["blas"]
    tables = WF.Tables(top)
    origins, dirs = make_rays(world, 64, seed=5)
    full = WF.trace(tables, origins, dirs)
    first = WF.trace(tables, origins, dirs, first_hit=True)
    hit = full.prim >= 0
    # the same rays hit something; stopping at the first hit never takes more steps
    assert np.array_equal(first.prim >= 0, hit)
    assert (first.counts["steps"] <= full.counts["steps"]).all()
    assert (first.counts["steps"] < full.counts["steps"]).any()
    short = WF.trace(tables, origins, dirs, tmax=0.5 * np.where(hit, full.t, 1.0))
    assert not (short.prim[hit] == full.prim[hit]).any()


class _Waves:
    """A scheduler of ``slots`` resident waves of 32 rays (a wave leaves when all its rays are
    done), and executors that hand each step to the golden ones and count their rays."""

    def __init__(self, n, slots, stack_size, pushes=True, mode="bvh8"):
        self.resident, self.next, self.n = [], 0, n
        self.slots, self.pushes = slots, pushes
        self.stack_golden = WF.GoldenStack(n, stack_size, mode)
        self.seen = {"schedule": 0, "intersect": 0, "stack": 0}

    def schedule(self, active):
        self.resident = [w for w in self.resident if active[32 * w : 32 * w + 32].any()]
        while len(self.resident) < self.slots and 32 * self.next < self.n:
            self.resident.append(self.next)
            self.next += 1
        rays = [np.arange(32 * w, min(32 * w + 32, self.n)) for w in self.resident]
        rays = np.concatenate(rays) if rays else np.zeros(0, np.int64)
        self.seen["schedule"] += 1
        return rays[active[rays]]

    def intersect(self, tb, ray, r, rows, ptr, kinds):
        self.seen["intersect"] += len(r)
        return WF.intersect_golden(tb, ray, r, rows, ptr, kinds)

    def intersect_dual(self, tb, ray, r, rows, ptrs, dual):
        self.seen["intersect"] += len(r)
        return WF.intersect_dual_golden(tb, ray, r, rows, ptrs, dual)

    def stack(self, r, last, data):
        self.seen["stack"] += len(r)
        first, second, pushed, overflowed, b2t = self.stack_golden(r, last, data)
        return first, second, pushed if self.pushes else None, overflowed, b2t


@pytest.mark.parametrize(
    "name,mode,stack_size,first_hit",
    [
        ("tlas", "bvh8", 16, False),
        ("blas", "bvh8", 8, False),
        ("obb", "bvh8", 16, True),
        ("bvh4", "bvh4x2", 3, False),
        ("bvh4", "bvh4", 16, True),
    ],
)
def test_executors_replace_the_steps(scenes, name, mode, stack_size, first_hit):
    """The loop with its steps handed to executors and its rays scheduled a few waves at a time
    gives the plain loop's hits and per-ray counts, and every instruction went through them."""
    top, world = scenes[name]
    tables = WF.Tables(top)
    origins, dirs = make_rays(world, 150, seed=4)
    ref = WF.trace(tables, origins, dirs, mode=mode, stack_size=stack_size, first_hit=first_hit)
    ex = _Waves(len(origins), 2, stack_size, mode=mode)
    steps = {"intersect": ex.intersect} if mode == "bvh8" else {"intersect_dual": ex.intersect_dual}
    res = WF.trace(
        tables,
        origins,
        dirs,
        mode=mode,
        first_hit=first_hit,
        stack=ex.stack,
        schedule=ex.schedule,
        **steps,
    )
    for field in ("t", "prim", "inst"):
        assert np.array_equal(getattr(res, field), getattr(ref, field)), field
    assert res.counts.keys() == ref.counts.keys()
    for key in ref.counts:
        assert np.array_equal(res.counts[key], ref.counts[key]), key
    assert ex.seen["intersect"] == ref.counts["steps"].sum()
    if mode == "bvh4x2":  # push8_pop2 pops two entries where it can
        assert ex.seen["stack"] == ref.counts["steps"].sum() < ref.counts["pops"].sum()
    else:
        assert ex.seen["stack"] == ref.counts["pops"].sum() > 0
    # two waves at a time: more steps than the longest ray takes
    assert ex.seen["schedule"] > ref.counts["steps"].max() + 1
    if name == "tlas":
        assert (ref.counts["instances"] > 0).any() and (ref.inst >= 0).any()
    if stack_size < 16:
        assert ref.counts["walkback_steps"].sum() > 0
    if first_hit:
        assert ex.seen["stack"] < ex.seen["intersect"]


def test_a_stack_that_does_not_report_pushes(scenes):
    top, world = scenes["blas"]
    tables = WF.Tables(top)
    origins, dirs = make_rays(world, 40, seed=2)
    ref = WF.trace(tables, origins, dirs)
    ex = _Waves(len(origins), 4, 16, pushes=False)
    res = WF.trace(tables, origins, dirs, stack=ex.stack)
    assert "pushes" not in res.counts and ref.counts["pushes"].sum() > 0
    assert np.array_equal(res.prim, ref.prim)
    assert np.array_equal(res.counts["pops"], ref.counts["pops"])


def test_each_intersect_executor_runs_its_modes_only(scenes):
    top, world = scenes["bvh4"]
    origins, dirs = make_rays(world, 4, seed=1)
    with pytest.raises(ValueError, match="bvh8 mode only"):
        WF.trace(WF.Tables(top), origins, dirs, intersect=WF.intersect_golden)
    with pytest.raises(ValueError, match="legacy modes only"):
        WF.trace(
            WF.Tables(scenes["blas"][0]), origins, dirs, intersect_dual=WF.intersect_dual_golden
        )


def _golden_box(ptrs, valid, bmin, bmax, origin, inv, extent):
    m = len(extent)
    keys_ptrs, keys = BB.test_slots(
        ptrs,
        valid,
        bmin,
        bmax,
        np.zeros((m, 8), bool),
        origin,
        inv,
        extent,
        np.full(m, 6, np.uint32),
        np.zeros(m, np.uint32),
        np.ones(m, bool),
    )
    return BB.sort_slots(
        keys_ptrs, keys, np.ones(m, np.uint32), np.ones(m, np.uint32), np.ones(m, bool)
    )


def test_native_box_path_equals_golden_box_path():
    rng = np.random.default_rng(11)
    m = 4000
    lo = rng.normal(size=(m, 8, 3)).astype(np.float32)
    hi = lo + np.abs(rng.normal(size=(m, 8, 3))).astype(np.float32)
    # ties: equal boxes, an origin inside several boxes, planes through the origin
    lo[::5, 1], hi[::5, 1] = lo[::5, 0], hi[::5, 0]
    origin = rng.normal(size=(m, 3)).astype(np.float32)
    lo[::7, 2, 0] = origin[::7, 0]
    hi[::7, 2, 0] = np.maximum(hi[::7, 2, 0], lo[::7, 2, 0])
    lo[::11, 4, 1], hi[::11, 4, 1] = hi[::11, 4, 1], lo[::11, 4, 1]  # min > max: misuse
    origin[::3] = 0.5 * (lo[::3, 0] + hi[::3, 0])
    d = rng.normal(size=(m, 3)).astype(np.float32)
    d[::4, 0] = 0.0  # infinite 1/d
    d[::9, 1] = -0.0
    with np.errstate(divide="ignore"):
        inv = (np.float32(1) / d).astype(np.float32)
    lo_b, hi_b = lo.view(np.uint32), hi.view(np.uint32)
    nan = np.uint32(0x7FC00000)
    valid = rng.random((m, 8)) < 0.85
    lo_b = np.where(valid[..., None], lo_b, nan)
    hi_b = np.where(valid[..., None], hi_b, nan)
    ptrs = (rng.integers(2, 500, (m, 8)) * 16 + rng.choice([0, 1, 3, 5, 6], (m, 8))).astype(
        np.uint32
    )
    ptrs[::6, 3] = ptrs[::6, 2]  # child reuse
    extent = (
        np.where(rng.random(m) < 0.3, rng.random(m) * 3, np.inf).astype(np.float32).view(np.uint32)
    )
    o_b = origin.view(np.uint32)
    inv_b = inv.view(np.uint32)
    want = _golden_box(ptrs, valid, lo_b, hi_b, o_b, inv_b, extent)
    got = WF.box_slots(
        ptrs.T.copy(),
        valid.T.copy(),
        lo_b.view(np.float32).transpose(1, 2, 0).copy(),
        hi_b.view(np.float32).transpose(1, 2, 0).copy(),
        o_b.T.copy(),
        inv_b.T.copy(),
        extent,
    )
    assert (want != 0xFFFFFFFF).sum(axis=1).max() >= 4
    assert np.array_equal(got, want)
