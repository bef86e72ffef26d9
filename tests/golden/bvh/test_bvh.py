"""BVH builder, mesh I/O and traversal models (golden/bvh)."""

import numpy as np
import pytest

from gpurtl.facts.ray_accel import INVALID_OBB
from gpurtl.golden.bvh import builder as B
from gpurtl.golden.bvh import mesh as M
from gpurtl.golden.bvh import traversal as T


@pytest.fixture(scope="module")
def scene():
    return M.merge([M.rods(10, seed=3, spread=4.0), M._chain((0, 0, 3), (0.3, 0.2, -1), 4)])


def rays_at(mesh, n, seed):
    rng = np.random.default_rng(seed)
    lo, hi = mesh.vertices.min(axis=0), mesh.vertices.max(axis=0)
    center, radius = (lo + hi) / 2, np.linalg.norm(hi - lo)
    u = rng.normal(size=(n, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    origins = center + u * radius
    # aim at random triangles (barycentric points), most rays hit something
    tris = mesh.triangles.astype(np.float64)[rng.integers(0, len(mesh), n)]
    w = rng.dirichlet((1, 1, 1), n)
    targets = np.einsum("nk,nkj->nj", w, tris)
    return origins, targets - origins


def brute_force(tris, o, d):
    ts = []
    for k in range(len(o)):
        t, _ = T._tri_hit(
            tris,
            o[k].astype(np.float32).astype(np.float64),
            d[k].astype(np.float32).astype(np.float64),
        )
        ts.append(t)
    return np.array(ts)


def test_obj_ply_roundtrip(tmp_path):
    mesh = M.knot_mesh(segments=20, sides=4)
    for name, kwargs in (("m.obj", {}), ("b.ply", {"binary": True}), ("a.ply", {"binary": False})):
        path = tmp_path / name
        (M.save_obj if name.endswith("obj") else M.save_ply)(mesh, path, **kwargs)
        back = M.load_mesh(path)
        assert np.array_equal(back.vertices, mesh.vertices)
        assert np.array_equal(back.faces, mesh.faces)
    (tmp_path / "q.obj").write_text(
        "v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nvn 0 0 1\nf 1//1 2//1 3//1 -1//1\n"
    )
    quad = M.load_mesh(tmp_path / "q.obj")
    assert quad.faces.tolist() == [[0, 1, 2], [0, 2, 3]]
    with pytest.raises(ValueError, match="unknown mesh format"):
        M.load_mesh(tmp_path / "x.stl")


def _subtree_vertices(mesh, node):
    if node.kind == "leaf":
        return mesh.triangles[node.prims].reshape(-1, 3).astype(np.float64)
    return np.concatenate([_subtree_vertices(mesh, c) for c in node.children])


@pytest.mark.parametrize("threshold", [None, B.OBB_THRESHOLD])
def test_decoded_boxes_contain_geometry(scene, threshold):
    bvh = B.build_bvh(scene, obb_threshold=threshold)
    assert bvh.encoding == "bvh8"
    for box in bvh.boxes:
        lo, hi = T.node_planes(bvh, box)
        m = np.eye(3) if box.obb == INVALID_OBB else B.OBB_MATRICES[box.obb]
        for k, child in enumerate(box.children):
            v = _subtree_vertices(scene, child) @ m.T
            assert (v >= lo[k] - 1e-9).all() and (v <= hi[k] + 1e-9).all()
        # the 1.12 rule (gpurt OBB_SA_FACTOR_THRESHOLD)
        if threshold is None:
            assert box.obb == INVALID_OBB
        elif box.obb != INVALID_OBB:
            assert box.obb_sa < threshold * box.aabb_sa
        else:
            assert box.obb_sa >= threshold * box.aabb_sa


@pytest.mark.parametrize("width,threshold", [(8, None), (8, 1.12), (4, None), (4, 1.0)])
def test_fast_traversal_finds_closest_hit(scene, width, threshold):
    bvh = B.build_bvh(scene, width=width, obb_threshold=threshold)
    o, d = rays_at(scene, 60, seed=width)
    counts = T.traverse(bvh, o, d)
    expected = brute_force(scene.triangles.astype(np.float64), o, d)
    assert np.isfinite(expected).sum() > 10
    assert np.array_equal(np.isfinite(counts.t), np.isfinite(expected))
    hit = np.isfinite(expected)
    assert np.allclose(counts.t[hit], expected[hit], rtol=1e-12)
    assert (counts.box_nodes >= 1).all()
    assert (counts.box_tests <= width * counts.box_nodes).all()


def test_exact_and_fast_models_agree(scene):
    bvh = B.build_bvh(scene)
    o, d = rays_at(scene, 6, seed=9)
    seen = []
    exact = T.traverse(bvh, o, d, model="exact", on_node=lambda *a: seen.append(a[0]))
    fast = T.traverse(bvh, o, d)
    for name, values in exact.as_dict().items():
        assert np.array_equal(values, getattr(fast, name)), name
    assert np.array_equal(exact.t, fast.t)
    assert len(seen) == exact.box_nodes.sum()


def test_instanced_scene(scene):
    blas = B.build_bvh(scene)
    small = B.build_bvh(M.box_mesh((1, 0.1, 0.1)))
    rots = [M.rotation_matrix((0, 0, 1), 0.3), M.rotation_matrix((1, 1, 0), 1.1), np.eye(3)]
    xforms = [
        np.hstack([r * s, np.array(t)[:, None]])
        for r, s, t in zip(rots, (1.0, 0.5, 2.0), ((0, 0, 0), (12, 0, 0), (0, 14, 3)))
    ]
    instances = [(blas, xforms[0]), (blas, xforms[1]), (small, xforms[2])]
    tlas = B.build_tlas(instances)
    world = M.merge([b.mesh.transformed(m) for b, m in instances])
    o, d = rays_at(world, 40, seed=4)
    counts = T.traverse(tlas, o, d)
    expected = brute_force(world.triangles.astype(np.float64), o, d)
    assert np.isfinite(expected).sum() > 5
    assert np.array_equal(np.isfinite(counts.t), np.isfinite(expected))
    hit = np.isfinite(expected)
    # object-space hits: FP32 transform rounding, so only close
    assert np.allclose(counts.t[hit], expected[hit], rtol=1e-4)
    assert counts.instances.sum() > 0
    exact = T.traverse(tlas, o[:4], d[:4], model="exact")
    fast = T.traverse(tlas, o[:4], d[:4])
    assert np.array_equal(exact.box_nodes, fast.box_nodes)
    assert np.array_equal(exact.instances, fast.instances)


def test_leaf_nodes_decode_to_leaf_triangles(scene):
    from gpurtl.golden.ray_accel.encode import primitive_node as pn

    bvh = B.build_bvh(scene)
    tri_bits = scene.triangles.view(np.uint32)
    for leaf in bvh.leaves:
        found = []
        for k, node in enumerate(leaf.nodes):
            assert bvh.image[leaf.offset + 128 * k] == node
            for pair in pn.decode_primitive_node(node):
                for tri in pair.tris:
                    if tri.valid:
                        assert [list(v) for v in tri.vertices] == tri_bits[tri.prim_id].tolist()
                        found.append(tri.prim_id)
        assert sorted(found) == sorted(int(p) for p in leaf.prims)
    # the box node's leaf child carries the number of primitive nodes as its range
    from gpurtl.golden.ray_accel.encode import box_node

    for box in bvh.boxes:
        dec = box_node.decode_box8(box.dwords)
        for k, child in enumerate(box.children):
            if child.kind == "leaf":
                assert dec["children"][k]["range"] == len(child.nodes)
                assert dec["children"][k]["ptr"] == child.ptr


def test_bvh4_legacy_leaves(scene):
    from gpurtl.golden.ray_accel.encode import primitive_node as pn

    bvh = B.build_bvh(scene, width=4, obb_threshold=None)
    leaf = bvh.leaves[0]
    node = pn.decode_legacy_node(leaf.nodes[0])
    assert [list(v) for v in pn.legacy_triangle_vertices(node, 0)] == scene.triangles.view(
        np.uint32
    )[leaf.prims[0]].tolist()
    with pytest.raises(ValueError, match="one triangle"):
        B.build_bvh(scene, width=4, leaf_size=2)


def test_terrain_is_a_large_deterministic_scene():
    """The default run's large scene without the optional extra: at least 50k triangles, the
    same mesh on every call (an integer hash, no random generator: checked against the
    splitmix64 finalizer in Python integers), a closed height field (every inner edge of the
    grid shared by two triangles) within its stated extent."""
    a, b = M.terrain(), M.terrain()
    assert len(a) == 160 * 160 * 2 + 64 * 12 >= 50_000
    assert np.array_equal(a.vertices, b.vertices) and np.array_equal(a.faces, b.faces)
    grid = a.faces[: 160 * 160 * 2]
    edges = np.sort(np.concatenate([grid[:, [0, 1]], grid[:, [1, 2]], grid[:, [0, 2]]]), axis=1)
    _, uses = np.unique(edges, axis=0, return_counts=True)
    assert set(uses.tolist()) == {1, 2} and (uses == 1).sum() == 4 * 160  # the border only
    z = a.vertices[: 161 * 161, 2]
    assert 0.0 <= z.min() and z.max() == pytest.approx(18.0)
    mask = (1 << 64) - 1

    def lattice(ix, iy, octave):
        h = ((ix * 0x9E3779B97F4A7C15) & mask) ^ ((iy * 0xC2B2AE3D27D4EB4F + octave) & mask)
        h ^= h >> 30
        h = (h * 0xBF58476D1CE4E5B9) & mask
        h ^= h >> 27
        h = (h * 0x94D049BB133111EB) & mask
        h ^= h >> 31
        return (h >> 11) / float(1 << 53)

    got = M._lattice(np.array([3, 12345]), np.array([7, 99]), 2)
    assert got.tolist() == [lattice(3, 7, 2), lattice(12345, 99, 2)]
