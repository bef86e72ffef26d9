"""Node decoders over arrays of node dwords ``(M, 32)``: the BVH8 quantized box node, the legacy
FP32 and FP16 BVH4 box nodes and the instance node, as slot arrays for :mod:`.batch_box`.

Each decoder does what its scalar counterpart does (:func:`.box_node.decode_box8`,
:func:`.box_node.decode_box4_fp32`, :func:`.box_node.decode_box4_fp16`,
:func:`.instance.decode_instance` with :func:`.instance.filter_children`), for many nodes at
once. Slot arrays: ``ptr``, ``valid``, ``cull_flags``, ``mask`` ``(M, S)`` and ``min``, ``max``
``(M, S, 3)`` FP32 patterns (invalid slots: ``INVALID_NODE`` and NaN planes).
"""

import numpy as np

from gpurtl.facts.ray_accel import INVALID_NODE, NODE_TYPE_BOX8

from ..encode import box_node
from . import batch_fp as F

__all__ = [
    "decode_box4_fp16",
    "decode_box4_fp32",
    "decode_box8",
    "decode_instance",
    "dequant_offset",
    "dequantize",
    "f16_to_f32",
]

_NAN = np.uint32(F.CANONICAL_NAN)
_INVALID = np.uint32(INVALID_NODE)


_DQ_TABLE = []


def dequant_offset(exp, q):
    """``Dq(q)`` FP32 patterns of 8-bit exponents and planes ``q`` in 0..4096: a look-up in the
    table of every ``(exp, q)`` made once by :func:`.box_node.dequant_offset`."""
    if not _DQ_TABLE:
        _DQ_TABLE.append(
            box_node.dequant_offset(np.arange(256)[:, None], np.arange(4097)[None, :]).ravel()
        )
    return _DQ_TABLE[0][exp.astype(np.intp) * 4097 + q.astype(np.intp)]


def dequantize(origin, exp, q):
    """``origin + Dq(q)`` (FP32 add, no flushing, as the scalar decoder)."""
    return F.add(origin, dequant_offset(exp, q))


def _child_fields(info):
    """ChildInfo dwords ``(M, S, 3)`` -> qmin, qmax ``(M, S, 3)``, cull flags, mask, type, range."""
    w0, w1, w2 = info[..., 0], info[..., 1], info[..., 2]
    m12 = np.uint32(0xFFF)
    qmin = np.stack([w0 & m12, (w0 >> np.uint32(12)) & m12, w1 & m12], axis=-1)
    qmax = np.stack([(w1 >> np.uint32(12)) & m12, w2 & m12, (w2 >> np.uint32(12)) & m12], axis=-1)
    return (
        qmin,
        qmax,
        (w0 >> np.uint32(24)) & np.uint32(0xF),
        (w1 >> np.uint32(24)) & np.uint32(0xFF),
        (w2 >> np.uint32(24)) & np.uint32(0xF),
        (w2 >> np.uint32(28)) & np.uint32(0xF),
    )


def _exponents(dword):
    return np.stack([(dword >> np.uint32(8 * a)) & np.uint32(0xFF) for a in range(3)], axis=-1)


def _child_pointers(ctype, crange, valid, internal, prim):
    """Child pointers from running offsets (gpurt ``src/shadersClean/common/gfx12/
    internalNode.hlsli``): box children take ``internal``, others ``prim | type``; each kind
    advances its own offset by ``range << 4``."""
    ptrs = np.empty(ctype.shape, dtype=np.uint32)
    for i in range(ctype.shape[1]):
        is_box = ctype[:, i] == NODE_TYPE_BOX8
        step = crange[:, i] << np.uint32(4)
        v = valid[:, i]
        ptrs[:, i] = np.where(v, np.where(is_box, internal, prim | ctype[:, i]), _INVALID)
        internal = np.where(v & is_box, internal + step, internal)
        prim = np.where(v & ~is_box, prim + step, prim)
    return ptrs


def _planes(origin, exp, qmin, qmax, valid):
    mins = dequantize(origin[:, None, :], exp[:, None, :], qmin)
    maxs = dequantize(origin[:, None, :], exp[:, None, :], qmax + np.uint32(1))
    keep = valid[..., None]
    return np.where(keep, mins, _NAN), np.where(keep, maxs, _NAN)


def decode_box8(d):
    """Slots of BVH8 quantized box nodes ``(M, 32)`` (8 slots) plus ``obb_index`` ``(M,)``."""
    m = d.shape[0]
    origin = d[:, 3:6]
    exp = _exponents(d[:, 6])
    count = ((d[:, 6] >> np.uint32(28)) & np.uint32(7)) + np.uint32(1)
    qmin, qmax, cull, mask, ctype, crange = _child_fields(d[:, 8:32].reshape(m, 8, 3))
    valid = np.arange(8)[None, :] < count[:, None]
    ptrs = _child_pointers(ctype, crange, valid, d[:, 0] | np.uint32(NODE_TYPE_BOX8), d[:, 1])
    mins, maxs = _planes(origin, exp, qmin, qmax, valid)
    return {
        "ptr": ptrs,
        "valid": valid,
        "cull_flags": cull,
        "mask": mask,
        "min": mins,
        "max": maxs,
        "obb_index": d[:, 7] & np.uint32(0x7F),
    }


def decode_box4_fp32(d):
    """Slots of legacy 128 B FP32 box nodes ``(M, 32)`` (4 slots)."""
    ptrs = d[:, 0:4]
    planes = d[:, 4:28].reshape(-1, 4, 6)
    cull = np.stack([(d[:, 28] >> np.uint32(8 * i)) & np.uint32(0xF) for i in range(4)], axis=1)
    return {
        "ptr": ptrs,
        "valid": ptrs != _INVALID,
        "cull_flags": cull,
        "min": planes[..., 0:3],
        "max": planes[..., 3:6],
    }


def f16_to_f32(h):
    """Exact FP32 patterns of FP16 patterns (:func:`.box_node.f16_to_f32`)."""
    h = h.astype(np.uint32)
    sign = (h >> np.uint32(15)) << np.uint32(31)
    exp = (h >> np.uint32(10)) & np.uint32(0x1F)
    man = h & np.uint32(0x3FF)
    normal = sign | ((exp + np.uint32(112)) << np.uint32(23)) | (man << np.uint32(13))
    special = sign | np.uint32(0x7F800000) | (man << np.uint32(13))
    # a subnormal half is man * 2**-24, exactly a normal float32
    tiny = (man.astype(np.float32) * np.float32(2.0**-24)).view(np.uint32) | sign
    return np.where(exp == 0x1F, special, np.where(exp == 0, tiny, normal))


def decode_box4_fp16(d):
    """Slots of legacy 64 B FP16 box nodes (first 16 of ``(M, 32)`` dwords; 4 slots, no flags)."""
    w = d[:, 4:16].reshape(-1, 4, 3)
    halves = np.stack([w & np.uint32(0xFFFF), w >> np.uint32(16)], axis=-1).reshape(-1, 4, 6)
    planes = f16_to_f32(halves)
    ptrs = d[:, 0:4]
    return {
        "ptr": ptrs,
        "valid": ptrs != _INVALID,
        "cull_flags": np.zeros(ptrs.shape, np.uint32),
        "min": planes[..., 0:3],
        "max": planes[..., 3:6],
    }


def decode_instance(d):
    """Fields of instance nodes ``(M, 32)`` and their filter box as 4 slots (both running
    offsets start at 0, :func:`.instance.filter_children`)."""
    m = d.shape[0]
    count = ((d[:, 19] >> np.uint32(28)) & np.uint32(3)) + np.uint32(1)
    qmin, qmax, _cull, _mask, ctype, crange = _child_fields(d[:, 20:32].reshape(m, 4, 3))
    valid = np.arange(4)[None, :] < count[:, None]
    zero = np.zeros(m, dtype=np.uint32)
    ptrs = _child_pointers(ctype, crange, valid, zero | np.uint32(NODE_TYPE_BOX8), zero)
    mins, maxs = _planes(d[:, 16:19], _exponents(d[:, 19]), qmin, qmax, valid)
    return {
        "world_to_object": d[:, 0:12].reshape(m, 3, 4),
        "child_base": d[:, 12].astype(np.uint64) | (d[:, 13].astype(np.uint64) << np.uint64(32)),
        "user_data": d[:, 15] & np.uint32(0xFFFFFF),
        "mask": d[:, 15] >> np.uint32(24),
        "ptr": ptrs,
        "valid": valid,
        "min": mins,
        "max": maxs,
    }
