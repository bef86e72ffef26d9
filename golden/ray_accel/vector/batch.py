"""The intersect instructions on a batch: ``INSTR_LAYOUT`` word arrays in, ``OUT_LAYOUT`` word
arrays out, bit-identical row by row to :class:`.intersect.IntersectModel`.

Word arrays are described in :mod:`.bitfields`. :func:`intersect_words` decodes every field of
every row with vectorised bit slicing (offsets from the layouts), dispatches the rows on their node
types exactly as :mod:`.intersect` does, and runs each path on all its rows at once:

* BVH8 box nodes, with or without an OBB rotation: fully vectorised (:mod:`.batch_nodes`,
  :mod:`.batch_box`, :func:`.obb.obb_transform_ray`);
* instance nodes (transform, BLAS pointer, filter box): fully vectorised;
* dual form (legacy FP32/FP16 box nodes and legacy triangle nodes, the status rules): fully
  vectorised (:mod:`.batch_triangle` for the triangles);
* triangle-pair nodes: vectorised except the compressed node decode, which runs per distinct
  node in Python (:mod:`.batch_pairs`).

Large batches are processed in chunks of :data:`CHUNK` rows to bound memory.
"""

import numpy as np

from gpurtl.facts.ray_accel import (
    INSTR_LAYOUT,
    INVALID_NODE,
    INVALID_OBB,
    NODE_TYPE_BOX8,
    NODE_TYPE_INSTANCE,
    OUT_LAYOUT,
    PF_FORCE_NON_OPAQUE,
    PF_FORCE_OPAQUE,
    PF_SKIP_PROCEDURAL,
    PF_SKIP_TRIANGLES,
    STATUS_BAD_NODE,
    STATUS_NOT_MODELLED,
    STATUS_OK,
)

from ..scalar import obb
from ..scalar.instance import ADDRESS_MASK, UNDEFINED_DW
from ..scalar.intersect import PATHS
from . import batch_box as B
from . import batch_fp as F
from . import batch_nodes as N
from . import batch_pairs as P
from . import batch_triangle as T
from .bitfields import FieldWriter, field_span, read_fields, word_count

__all__ = ["CHUNK", "decode_instr_words", "encode_out_words", "intersect_words"]

#: Rows processed at once (bounds the temporary arrays to a few hundred MB).
CHUNK = 1 << 15

_INVALID = np.uint32(INVALID_NODE)
_DESC_FIELDS = (
    "sort_en",
    "heuristic",
    "sort_tri_first",
    "box_grow",
    "wide_sort",
    "return_mode",
    "compressed",
    "box_node_64b",
    "instance_en",
    "pointer_flags_en",
)


def _read_array(words, layout, path, count, width=32):
    offsets = [field_span(layout, *path, k)[0] for k in range(count)]
    return read_fields(words, offsets, width)


def _read(words, layout, *path):
    offset, width = field_span(layout, *path)
    return read_fields(words, [offset], width)[:, 0]


def decode_instr_words(words):
    """Every field of ``INSTR_LAYOUT`` rows as arrays: ``dual``, ``origin``/``dir`` ``(N, 3)``,
    ``extent``, ``instance_mask``, ``node_ptr`` ``(N, 2)``, ``node`` ``(N, 2, 32)``,
    ``pointer_flags`` and the descriptor fields by name (``(N,)`` uint32 each)."""
    words = np.asarray(words)
    if words.ndim != 2 or words.dtype != np.uint32 or words.shape[1] != word_count(INSTR_LAYOUT):
        raise ValueError(
            f"`words` must be a uint32 array of shape (N, "
            f"{word_count(INSTR_LAYOUT)}), not {words.dtype} {words.shape}"
        )
    node_offsets = [field_span(INSTR_LAYOUT, "node", k, i)[0] for k in range(2) for i in range(32)]
    f = {
        "dual": _read(words, INSTR_LAYOUT, "dual"),
        "origin": _read_array(words, INSTR_LAYOUT, ("ray", "origin"), 3),
        "dir": _read_array(words, INSTR_LAYOUT, ("ray", "dir"), 3),
        "extent": _read(words, INSTR_LAYOUT, "ray", "extent"),
        "instance_mask": _read(words, INSTR_LAYOUT, "ray", "instance_mask"),
        "node_ptr": _read_array(words, INSTR_LAYOUT, ("node_ptr",), 2),
        "node": read_fields(words, node_offsets, 32).reshape(-1, 2, 32),
        "pointer_flags": _read(words, INSTR_LAYOUT, "pointer_flags"),
    }
    for name in _DESC_FIELDS:
        f[name] = _read(words, INSTR_LAYOUT, "desc", name)
    return f


def encode_out_words(dw, origin, direction, status):
    """``OUT_LAYOUT`` word array of ``dw`` ``(N, 10)``, ``origin``/``direction`` ``(N, 3)`` and
    ``status`` ``(N,)``."""
    out = FieldWriter(dw.shape[0], OUT_LAYOUT)
    out.write(field_span(OUT_LAYOUT, "dw", 0)[0], 32, dw)
    out.write(field_span(OUT_LAYOUT, "origin", 0)[0], 32, origin)
    out.write(field_span(OUT_LAYOUT, "dir", 0)[0], 32, direction)
    offset, width = field_span(OUT_LAYOUT, "status")
    out.write(offset, width, status)
    return out.words()


class _Result:
    """Output arrays of one chunk (every path writes its rows)."""

    def __init__(self, f):
        n = f["dual"].shape[0]
        self.dw = np.full((n, 10), _INVALID, dtype=np.uint32)
        self.origin = f["origin"].copy()
        self.dir = f["dir"].copy()
        self.status = np.zeros(n, dtype=np.uint32)

    def fail(self, index, status):
        self.dw[index] = _INVALID
        self.status[index] = status


def _slots_result(f, rows, slots, inv_dir, box_origin, dedup, ftz):
    """Test, de-duplicate and sort ``slots`` of ``rows``; returns the 8 (or 4) pointers."""
    ptrs, keys = B.test_slots(
        slots["ptr"],
        slots["valid"],
        slots["min"],
        slots["max"],
        slots["culled"],
        box_origin,
        inv_dir,
        f["extent"][rows],
        f["box_grow"][rows],
        f["heuristic"][rows],
        dedup,
        ftz=ftz,
    )
    enable = B.sort_enabled(f["sort_en"][rows], f["heuristic"][rows])
    return B.sort_slots(ptrs, keys, f["sort_tri_first"][rows], slots["wide"], enable, ftz=ftz)


def _bvh8(r, f, rows, pf, paths, ftz):
    """BVH8 box nodes (type 5) of ``rows``: OBB rotation, then the 8 slots."""
    node = N.decode_box8(f["node"][rows, 0])
    origin, direction = f["origin"][rows], f["dir"][rows]
    obb_index = node["obb_index"]
    rotate = obb_index != INVALID_OBB
    keep = np.ones(rows.shape, dtype=bool)
    if np.any(rotate):
        if "obb" not in paths:
            r.fail(rows[rotate], STATUS_NOT_MODELLED)
            keep = ~rotate
        else:
            turn = np.nonzero(rotate)[0]  # origin, direction: copies
            origin[turn], direction[turn], bad = obb.obb_transform_ray(
                obb_index[turn].astype(np.int64), origin[turn], direction[turn]
            )
            r.fail(rows[turn[bad]], STATUS_BAD_NODE)
            keep[turn[bad]] = False
    if not np.any(keep):
        return
    if not np.all(keep):
        rows, origin, direction, pf = rows[keep], origin[keep], direction[keep], pf[keep]
        node = {name: value[keep] for name, value in node.items()}
    node["culled"] = B.box_culled(node["cull_flags"], pf) | (
        (node["mask"] & f["instance_mask"][rows][:, None]) == 0
    )
    node["wide"] = f["wide_sort"][rows]
    ptrs = _slots_result(
        f, rows, node, F.rcp(direction, ftz=ftz), origin, np.ones(rows.shape, dtype=bool), ftz
    )
    r.dw[rows, :8] = ptrs
    r.dw[rows, 8:] = 0
    r.status[rows] = STATUS_OK


def _instance(r, f, rows, pf, ftz):
    """Instance nodes (type 6, ``instance_en``) of ``rows``."""
    node = N.decode_instance(f["node"][rows, 0])
    origin, direction = f["origin"][rows], f["dir"][rows]
    child_base = node["child_base"]
    aabb = ((child_base >> np.uint64(62)) & np.uint64(1)) != 0
    culled = (
        ((node["mask"] & f["instance_mask"][rows]) == 0)
        | (~aabb & ((pf & np.uint32(PF_SKIP_TRIANGLES)) != 0))
        | (aabb & ((pf & np.uint32(PF_SKIP_PROCEDURAL)) != 0))
    )
    new_o, new_d = obb.transform_rows(node["world_to_object"], origin, direction)
    new_o = np.where(culled[:, None], origin, new_o)
    new_d = np.where(culled[:, None], direction, new_d)
    inst_flags = ((child_base >> np.uint64(54)) & np.uint64(0x3FF)).astype(np.uint32)
    override = (pf & np.uint32(PF_FORCE_OPAQUE | PF_FORCE_NON_OPAQUE)) != 0
    merged = (inst_flags & np.where(override, np.uint32(0x3FC), np.uint32(0x3FF))) | pf
    blas = (child_base & np.uint64(ADDRESS_MASK)) | (merged.astype(np.uint64) << np.uint64(54))
    slots = {
        "ptr": node["ptr"],
        "valid": node["valid"],
        "min": node["min"],
        "max": node["max"],
        "culled": np.zeros(node["ptr"].shape, dtype=bool),
        "wide": np.zeros(rows.shape, dtype=np.uint32),
    }
    ptrs = _slots_result(
        f, rows, slots, F.rcp(new_d, ftz=ftz), new_o, np.ones(rows.shape, dtype=bool), ftz
    )
    low = ptrs & np.uint32(0xFF)
    dw7 = (
        low[:, 0]
        | (low[:, 1] << np.uint32(8))
        | (low[:, 2] << np.uint32(16))
        | (low[:, 3] << np.uint32(24))
    )
    dw = np.full((rows.shape[0], 10), np.uint32(UNDEFINED_DW), dtype=np.uint32)
    dw[:, 2] = (blas & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    dw[:, 3] = (blas >> np.uint64(32)).astype(np.uint32)
    dw[:, 6] = node["user_data"]
    dw[:, 7] = np.where(culled, _INVALID, dw7)
    dw[:, 8:] = _INVALID
    r.dw[rows] = dw
    r.origin[rows] = new_o
    r.dir[rows] = new_d
    r.status[rows] = STATUS_OK


def _triangle_pairs(r, f, rows, pf):
    """Triangle-pair nodes (:mod:`.batch_pairs`)."""
    dwords, error = P.triangle_pair_dwords(
        f["node"][rows, 0], f["node_ptr"][rows, 0], f["origin"][rows], f["dir"][rows], pf
    )
    r.dw[rows] = dwords
    r.status[rows] = STATUS_OK
    r.fail(rows[error], STATUS_BAD_NODE)


def _single(r, f, rows, pf, paths, ftz):
    ntype = f["node_ptr"][rows, 0] & np.uint32(0xF)
    box = ntype == NODE_TYPE_BOX8
    tri = ~box & ((ntype & np.uint32(7)) <= 3)
    inst = ~box & ~tri & (ntype == NODE_TYPE_INSTANCE) & (f["instance_en"][rows] != 0)
    r.fail(rows[~box & ~tri & ~inst], STATUS_BAD_NODE)
    if np.any(box):
        _bvh8(r, f, rows[box], pf[box], paths, ftz)
    if np.any(tri):
        if "triangle" in paths:
            _triangle_pairs(r, f, rows[tri], pf[tri])
        else:
            r.fail(rows[tri], STATUS_NOT_MODELLED)
    if np.any(inst):
        if "instance" in paths:
            _instance(r, f, rows[inst], pf[inst], ftz)
        else:
            r.fail(rows[inst], STATUS_NOT_MODELLED)


def _dual(r, f, rows, pf, paths, ftz):
    types = f["node_ptr"][rows] & np.uint32(7)  # (M, 2)
    instance = np.any(types == 6, axis=1)
    r.dw[rows[instance]] = _INVALID  # status 0, all -1
    r.status[rows[instance]] = STATUS_OK
    bad = np.any((types == 2) | (types == 3), axis=1)
    hpb64 = (types == 4) & (f["box_node_64b"][rows] != 0)[:, None]
    unmodelled = (types == 7) | hpb64
    if "legacy_triangle" not in paths:
        unmodelled |= types <= 1
    unmodelled = np.any(unmodelled, axis=1)
    r.fail(rows[~instance & bad], STATUS_BAD_NODE)
    r.fail(rows[~instance & ~bad & unmodelled], STATUS_NOT_MODELLED)
    ok = ~instance & ~bad & ~unmodelled
    if np.any(ok):
        _dual_nodes(r, f, rows[ok], types[ok], pf[ok], ftz)


def _dual_nodes(r, f, rows, types, pf, ftz):
    """Two legacy nodes, each a box (4 slots) or a triangle (4 dwords and its geometry index in
    DW8/9). Two boxes are sorted 8-wide with ``wide_sort``, otherwise each box's 4 slots are
    sorted alone (the narrow stages keep slots 0-3 and 4-7 apart)."""
    is_box = (types == 4) | (types == 5)
    halves = []
    for k in range(2):
        d = f["node"][rows, k]
        fp32_node = N.decode_box4_fp32(d)
        fp16_node = N.decode_box4_fp16(d)
        is32 = types[:, k] == 5
        sel = {
            name: np.where(
                is32.reshape((-1,) + (1,) * (fp32_node[name].ndim - 1)),
                fp32_node[name],
                fp16_node[name],
            )
            for name in ("ptr", "valid", "cull_flags", "min", "max")
        }
        halves.append(sel)
    slots = {
        name: np.concatenate([h[name] for h in halves], axis=1)
        for name in ("ptr", "valid", "cull_flags", "min", "max")
    }
    slots["culled"] = B.box_culled(slots["cull_flags"], pf)
    slots["wide"] = np.where(np.all(is_box, axis=1), f["wide_sort"][rows], np.uint32(0))
    dw = np.zeros((rows.shape[0], 10), dtype=np.uint32)
    dw[:, :8] = _slots_result(
        f,
        rows,
        slots,
        F.rcp(f["dir"][rows], ftz=ftz),
        f["origin"][rows],
        np.zeros(rows.shape, dtype=bool),
        ftz,
    )
    for k in range(2):
        tri = ~is_box[:, k]
        if np.any(tri):
            t_rows = rows[tri]
            dwords, geo = T.legacy_triangle_dwords(
                f["node"][t_rows, k],
                types[tri, k],
                f["origin"][t_rows],
                f["dir"][t_rows],
                pf[tri],
                f["return_mode"][t_rows],
            )
            dw[tri, 4 * k : 4 * k + 4] = dwords
            dw[tri, 8 + k] = geo
    r.dw[rows] = dw
    r.status[rows] = STATUS_OK


def _intersect_chunk(words, ftz, paths):
    f = decode_instr_words(words)
    r = _Result(f)
    pf = B.effective_pointer_flags(f["pointer_flags"], f["pointer_flags_en"])
    rows = np.arange(words.shape[0])
    dual = f["dual"] != 0
    if np.any(~dual):
        _single(r, f, rows[~dual], pf[~dual], paths, ftz)
    if np.any(dual):
        _dual(r, f, rows[dual], pf[dual], paths, ftz)
    return encode_out_words(r.dw, r.origin, r.dir, r.status)


def intersect_words(words, *, ftz=False, paths=None):
    """``OUT_LAYOUT`` words of ``INSTR_LAYOUT`` words, row by row.

    Parameters
    ----------
    words : numpy.ndarray of uint32, shape (N, W_in)
        Packed instructions (:mod:`.bitfields` word arrays,
        ``W_in = ceil(INSTR_LAYOUT.size / 32)``).
    ftz : bool
        Flush subnormals in the box-path arithmetic (as :class:`.intersect.IntersectModel`).
    paths : set of str, optional
        The node kinds the build models (others give status 1); all available ones by default.

    Returns
    -------
    numpy.ndarray of uint32, shape (N, W_out)
        Row ``n`` is ``IntersectModel(ftz=ftz, paths=paths)`` of row ``n``, packed.
    """
    paths = set(PATHS) if paths is None else set(paths)
    words = np.asarray(words)
    if words.ndim != 2 or words.dtype != np.uint32 or words.shape[1] != word_count(INSTR_LAYOUT):
        raise ValueError(
            f"`words` must be a uint32 array of shape (N, "
            f"{word_count(INSTR_LAYOUT)}), not {words.dtype} {words.shape}"
        )
    out = np.empty((words.shape[0], word_count(OUT_LAYOUT)), dtype=np.uint32)
    for start in range(0, words.shape[0], CHUNK):
        stop = min(start + CHUNK, words.shape[0])
        out[start:stop] = _intersect_chunk(words[start:stop], bool(ftz), paths)
    return out
