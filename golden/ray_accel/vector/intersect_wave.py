"""The intersect instructions of a whole wave at once: the golden model, batched over lanes.

:func:`intersect_wave` takes a list of ``INSTR_LAYOUT`` dictionaries (one per active lane) and
returns the same ``OUT_LAYOUT`` dictionaries as :class:`.intersect.IntersectModel`, bit for bit,
but evaluates the FP32 work of all lanes in one vectorised pass:

* BVH8 box nodes without an OBB rotation: one :func:`.box_test.box_test` call over
  ``(lanes, 8)`` children, then the child-reuse de-duplication and the 19-comparator network of
  :mod:`.sort` as array operations over the lanes;
* triangle-pair nodes: :func:`.triangle.triangle_pair_eval_batch`;
* the dual form on legacy FP32 box and triangle nodes: one box test over ``(lanes, 2, 4)``
  children, :func:`.triangle.legacy_triangle_result_batch` for the triangles, and the 4- or 8-wide
  network;
* everything else (OBB nodes, instance nodes, FP16 boxes, undefined types) goes lane by lane
  through :func:`.intersect.intersect`.

The batched steps reuse the scalar model's building blocks (``box_test``, ``sort_key``,
``box_culled``, the network's stages) in the same order of operations; tests compare the two on
every kind of node.
"""

import numpy as np

from gpurtl.facts.ray_accel import INVALID_NODE, INVALID_OBB, NODE_TYPE_BOX8, STATUS_OK
from gpurtl.golden import fp32

from ..encode import box_node, primitive_node
from ..encode.ray import node_bytes
from ..scalar import box_path, sort
from ..scalar import box_test as bt
from ..scalar import intersect as scalar
from ..scalar import triangle as tri

__all__ = ["intersect_wave", "sort_network"]

_DECODED = {}


def _decoded(kind, dwords):
    """Decoded node, cached by its bytes (nodes repeat across lanes and iterations)."""
    key = (kind, tuple(dwords))
    node = _DECODED.get(key)
    if node is None:
        node = box_node.decode_box8(dwords) if kind == 8 else box_node.decode_box4_fp32(dwords)
        if len(_DECODED) > 50000:
            _DECODED.clear()
        _DECODED[key] = node
    return node


def sort_network(ptrs, keys, sort_tri_first, *, wide, ftz=False):
    """:func:`.sort.sort_slots` on arrays ``(lanes, n)`` of pointers and float keys (uint32)."""
    ptrs = np.array(ptrs, dtype=np.uint32)
    keys = np.array(keys, dtype=np.uint32)
    n = ptrs.shape[1]
    stf = bool(sort_tri_first)
    low = ptrs & 7
    ext = (4 * (ptrs == INVALID_NODE) + 2 * (stf & (low > 3)) + (stf & (low != 1))).astype(np.int64)
    stages = sort.STAGES if wide else sort.NARROW_STAGES
    lanes = np.arange(ptrs.shape[0])
    for stage in stages:
        for i, j in stage:
            if j >= n:
                continue
            less = np.asarray(fp32.lt(keys[:, j], keys[:, i], ftz=ftz), dtype=bool)
            swap = np.where(ext[:, j] != ext[:, i], ext[:, j] < ext[:, i], less)
            if not swap.any():
                continue
            rows = lanes[swap]
            for arr in (ptrs, keys, ext):
                arr[rows, i], arr[rows, j] = arr[rows, j], arr[rows, i].copy()
    return ptrs


def _slots(ptrs, valid, culled, mins, maxs, rays, inv_dir, desc, *, dedup, ftz):
    """Steps 1-4 of :func:`.box_path.test_slots` for ``(lanes, n)`` children."""
    origin = np.array([r["origin"] for r in rays], dtype=np.uint32)[:, None, :]
    extent = np.array([r["extent"] for r in rays], dtype=np.uint32)[:, None]
    res = bt.box_test(origin, inv_dir[:, None, :], extent, mins, maxs, desc["box_grow"], ftz=ftz)
    tested = np.where(valid & ~culled & res["hit"], ptrs, np.uint32(INVALID_NODE)).astype(np.uint32)
    out = tested.copy()
    if dedup:
        same = tested[:, 1:] == tested[:, :-1]
        out[:, 1:][same] = INVALID_NODE
    keys = sort.sort_key(
        desc["heuristic"], res["min_t"], res["max_t"], res["tmin_raw"], res["tmax_raw"], ftz=ftz
    )
    return out, np.asarray(keys, dtype=np.uint32)


def _ok(ray, dwords):
    return {
        "dw": [int(d) & 0xFFFFFFFF for d in dwords],
        "origin": list(ray["origin"]),
        "dir": list(ray["dir"]),
        "status": STATUS_OK,
    }


def _box8_group(items, desc, ftz, out):
    """BVH8 box lanes ``[(index, instr)]`` sharing one descriptor and pointer flags."""
    n = len(items)
    ptrs = np.empty((n, 8), np.uint32)
    valid = np.empty((n, 8), bool)
    culled = np.empty((n, 8), bool)
    mins = np.empty((n, 8, 3), np.uint32)
    maxs = np.empty((n, 8, 3), np.uint32)
    rays = []
    for k, (_, instr) in enumerate(items):
        node = _decoded(8, instr["node"][0])
        pf = box_path.effective_pointer_flags(instr["pointer_flags"], desc)
        mask = instr["ray"]["instance_mask"]
        for c, ch in enumerate(node["children"]):
            ptrs[k, c], valid[k, c] = ch["ptr"], ch["valid"]
            culled[k, c] = box_path.box_culled(ch["cull_flags"], pf) or (ch["mask"] & mask) == 0
            mins[k, c], maxs[k, c] = ch["min"], ch["max"]
        rays.append(instr["ray"])
    inv = bt.ray_reciprocal(np.array([r["dir"] for r in rays], np.uint32), ftz=ftz)
    slot_ptrs, keys = _slots(ptrs, valid, culled, mins, maxs, rays, inv, desc, dedup=True, ftz=ftz)
    if box_path.sort_enabled(desc):
        slot_ptrs = sort_network(
            slot_ptrs, keys, desc["sort_tri_first"], wide=bool(desc["wide_sort"]), ftz=ftz
        )
    for k, (index, instr) in enumerate(items):
        out[index] = _ok(instr["ray"], [int(p) for p in slot_ptrs[k]] + [0, 0])


def _tri_group(items, out):
    res = tri.triangle_pair_eval_batch(
        [
            (node_bytes(i["node"][0]), i["node_ptr"][0], i["ray"], i["pointer_flags"], i["desc"])
            for _, i in items
        ]
    )
    for (index, instr), r in zip(items, res):
        if r["error"]:
            out[index] = scalar.intersect(instr)
        else:
            out[index] = _ok(instr["ray"], r["dwords"])


def _dual_group(items, desc, ftz, out):
    """Dual-form lanes whose two nodes are each a legacy FP32 box (5) or triangle (0/1)."""
    n = len(items)
    ptrs = np.full((n, 2, 4), INVALID_NODE, np.uint32)
    valid = np.zeros((n, 2, 4), bool)
    culled = np.zeros((n, 2, 4), bool)
    mins = np.zeros((n, 2, 4, 3), np.uint32)
    maxs = np.zeros((n, 2, 4, 3), np.uint32)
    tris = []
    for k, (_, instr) in enumerate(items):
        pf = box_path.effective_pointer_flags(instr["pointer_flags"], desc)
        for s in range(2):
            ptr = instr["node_ptr"][s]
            if ptr & 7 == 5:
                node = _decoded(4, instr["node"][s])
                for c, ch in enumerate(node["children"]):
                    ptrs[k, s, c], valid[k, s, c] = ch["ptr"], ch["ptr"] != INVALID_NODE
                    culled[k, s, c] = box_path.box_culled(ch["cull_flags"], pf)
                    mins[k, s, c], maxs[k, s, c] = ch["min"], ch["max"]
            else:
                tris.append((k, s))
    rays = [i["ray"] for _, i in items]
    inv = bt.ray_reciprocal(np.array([r["dir"] for r in rays], np.uint32), ftz=ftz)
    slot_ptrs, keys = _slots(
        ptrs.reshape(n, 8),
        valid.reshape(n, 8),
        culled.reshape(n, 8),
        mins.reshape(n, 8, 3),
        maxs.reshape(n, 8, 3),
        rays,
        inv,
        desc,
        dedup=False,
        ftz=ftz,
    )
    tri_res = tri.legacy_triangle_result_batch(
        [
            (
                node_bytes(items[k][1]["node"][s]),
                items[k][1]["node_ptr"][s],
                rays[k],
                items[k][1]["pointer_flags"],
                desc,
            )
            for k, s in tris
        ]
    )
    tri_of = {ks: r for ks, r in zip(tris, tri_res)}
    sorting = box_path.sort_enabled(desc)
    both_boxes = np.array([all(i["node_ptr"][s] & 7 == 5 for s in range(2)) for _, i in items])
    wide_rows = both_boxes & bool(desc["wide_sort"]) & sorting
    if sorting:
        wide = (
            sort_network(slot_ptrs, keys, desc["sort_tri_first"], wide=True, ftz=ftz)
            if wide_rows.any()
            else None
        )
        narrow = np.concatenate(
            [
                sort_network(
                    slot_ptrs[:, 4 * s : 4 * s + 4],
                    keys[:, 4 * s : 4 * s + 4],
                    desc["sort_tri_first"],
                    wide=False,
                    ftz=ftz,
                )
                for s in range(2)
            ],
            axis=1,
        )
    for k, (index, instr) in enumerate(items):
        if wide_rows[k]:
            out[index] = _ok(instr["ray"], [int(p) for p in wide[k]] + [0, 0])
            continue
        dw, geo = [], []
        for s in range(2):
            if (k, s) in tri_of:
                dw += list(tri_of[(k, s)][:4])
                geo.append(primitive_node.decode_legacy_node(instr["node"][s]).geometry_index)
            else:
                row = narrow[k] if sorting else slot_ptrs[k]
                dw += [int(p) for p in row[4 * s : 4 * s + 4]]
                geo.append(0)
        out[index] = _ok(instr["ray"], dw + geo)


def intersect_wave(instrs, *, ftz=False):
    """``OUT_LAYOUT`` dictionaries of a list of ``INSTR_LAYOUT`` dictionaries (module doc)."""
    out = [None] * len(instrs)
    groups = {}
    for index, instr in enumerate(instrs):
        desc_key = tuple(sorted(instr["desc"].items()))
        if not instr["dual"]:
            ptr = instr["node_ptr"][0]
            if ptr & 0xF == NODE_TYPE_BOX8 and instr["node"][0][7] & 0x7F == INVALID_OBB:
                groups.setdefault(("box8", desc_key), []).append((index, instr))
                continue
            if ptr & 7 <= 3:
                groups.setdefault(("tri", desc_key), []).append((index, instr))
                continue
        elif all(p & 7 in (0, 1, 5) for p in instr["node_ptr"]):
            groups.setdefault(("dual", desc_key), []).append((index, instr))
            continue
        out[index] = scalar.intersect(instr, ftz=ftz)
    for (kind, desc_key), items in groups.items():
        desc = dict(desc_key)
        if kind == "box8":
            _box8_group(items, desc, ftz, out)
        elif kind == "tri":
            _tri_group(items, out)
        else:
            _dual_group(items, desc, ftz, out)
    return out
