"""The wave programs of the wave-batched loop (golden/traversal/streams.py) against those the
per-wave loop records (:func:`gpurtl.golden.traversal.program.from_loop`: one lane at a time
through the golden ``intersect_wave`` and ``ds_bvh_stack`` models), field by field, on a BLAS, a
TLAS and OBB nodes and on legacy BVH4 nodes in the BVH4x2 mode, with a stack small enough to
overflow (the walk-back)."""

from dataclasses import fields

import numpy as np
import pytest

from gpurtl.golden.bvh import builder as B
from gpurtl.golden.bvh import mesh as M
from gpurtl.golden.bvh import wavefront as WF
from gpurtl.golden.bvh import wide as Wd
from gpurtl.golden.traversal import loop as L
from gpurtl.golden.traversal import program as P
from gpurtl.golden.traversal import streams as S
from gpurtl.golden.traversal.calibration import rdna4_params
from gpurtl.golden.traversal.rays import sphere_rays


@pytest.fixture(scope="module")
def scenes():
    bunny = M.bunny()
    inst = [
        (bunny, np.hstack([M.rotation_matrix((0, 1, 0), 0.7 * k), [[0.05 * k], [0.0], [0.0]]]))
        for k in range(3)
    ]
    world = M.merge([m.transformed(x) for m, x in inst])
    return {
        "blas": (Wd.build_wide(bunny, width=8, leaf_pairs=4), bunny),
        "tlas": (Wd.build_wide_tlas(inst), world),
        "obb": (Wd.build_wide(bunny, width=8, leaf_pairs=4, obb_threshold=B.OBB_THRESHOLD), bunny),
        "legacy": (B.build_bvh(bunny, width=4, obb_threshold=None), bunny),
    }


def _differences(a, b):
    out = []
    for f in fields(P.WavePrograms):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            if x.shape != y.shape or x.dtype != y.dtype or not np.array_equal(x, y):
                out.append(f.name)
        elif x != y:
            out.append(f.name)
    return out


@pytest.mark.parametrize(
    "name,stack_size",
    [("blas", 16), ("blas", 4), ("tlas", 4), ("obb", 4), ("legacy", 16), ("legacy", 4)],
)
def test_programs_equal_the_per_wave_loops(scenes, name, stack_size):
    top, world = scenes[name]
    origins, dirs = sphere_rays(world, 40, seed=5)  # a full wave and a partial one
    params = rdna4_params()
    mode = "bvh4x2" if name == "legacy" else "bvh8"
    got = S.build(WF.Tables(top), origins, dirs, params, stack_size=stack_size)
    ref = P.from_loop(L.Scene(name, top, mode), origins, dirs, params, stack_size=stack_size)
    assert got.waves == 2 and got.entries > 150 and got.mode == mode
    assert _differences(got, ref) == []
    kinds = set(got.lane_kind.tolist())
    assert kinds >= {P.KIND_BOX, P.KIND_PAIR}
    assert (name == "tlas") == (P.KIND_INSTANCE in kinds)
    if mode == "bvh4x2":  # two nodes a lane where the stack popped two
        assert (got.dual == 1).all() and (got.stack_op == S.PUSH8_POP2).all()
        assert ((got.node_ptr[:, 1] & 7) != 5).any() and (got.stack_dst[:, 1] != 0xFFFFFFFF).any()
        # an odd 64-byte legacy node is its line's upper half
        assert got.line_words[:, 16:].any()
    if stack_size < 8:
        assert got.result.counts["overflows"].sum() > 0
        assert got.result.counts["walkback_steps"].sum() > 0


def test_a_wrong_loop_result_is_caught(scenes, monkeypatch):
    top, world = scenes["blas"]
    origins, dirs = sphere_rays(world, 32, seed=5)
    golden = WF.intersect_golden

    def wrong(*args):
        box, pair, inst = golden(*args)
        if box is not None:
            box = box[:, ::-1].copy()  # the children in the wrong order
        return box, pair, inst

    monkeypatch.setattr(WF, "intersect_golden", wrong)
    with pytest.raises(S.StreamError):
        S.build(WF.Tables(top), origins, dirs, rdna4_params())


def test_a_wrong_dual_result_is_caught(scenes, monkeypatch):
    top, world = scenes["legacy"]
    origins, dirs = sphere_rays(world, 32, seed=5)
    golden = WF.intersect_dual_golden

    def wrong(*args):
        slots, t = golden(*args)
        return slots[:, ::-1].copy(), t  # the children in the wrong order

    monkeypatch.setattr(WF, "intersect_dual_golden", wrong)
    with pytest.raises(S.StreamError, match="dual instruction's box results"):
        S.build(WF.Tables(top), origins, dirs, rdna4_params())


def test_the_mode_must_fit_the_tables(scenes):
    tables = WF.Tables(scenes["blas"][0])
    with pytest.raises(ValueError, match="`mode` must be bvh8 for BVH8 tables or bvh4x2"):
        S.build(tables, np.zeros((1, 3)), np.ones((1, 3)), rdna4_params(), mode="bvh4x2")
    legacy = WF.Tables(scenes["legacy"][0])
    with pytest.raises(ValueError, match="not 'bvh8' \\(legacy BVH4 tables\\)"):
        S.build(legacy, np.zeros((1, 3)), np.ones((1, 3)), rdna4_params(), mode="bvh8")
