"""Box nodes: the RT IP 3.1 BVH8 quantized node and the legacy BVH4 FP32/FP16 nodes.

Decoders give the exact FP32 planes the hardware tests against; encoders turn child boxes into
real node bytes (as 32 dwords) with the conservative rounding of gpurt's encoder.

Sources:

* section 1.2 (header), 1.3 (ChildInfo), 1.4 (child pointers), 1.5 (dequantization and encoder)
  from gpurt ``src/shadersClean/common/gfx12/internalNode.hlsli``, ``childInfo.hlsl``,
  ``src/shadersClean/common/Math.hlsl`` (``Dequantize``, ``ComputeCommonExponent``) and
  ``src/shadersClean/common/Common.hlsl`` (``ComputeQuantizedBounds``);
* section 4 (legacy FP32 128 B and FP16 64 B box nodes) from gpurt
  ``src/shadersClean/common/gfx10/BoxNode1_0.hlsli``.

BVH8 decode (:func:`decode_box8`) returns a dictionary::

    internal_base, leaf_base, parent, origin[3] (FP32 bits), exp[3], count (1..8),
    obb_index (7 bits), children: 8 x {qmin[3], qmax[3], cull_flags, mask, type, range,
                                       ptr, valid, min[3], max[3] (FP32 bits)}

``valid`` is ``i < count`` (the hardware reads ``validChildCount``); invalid children have
``ptr = INVALID_NODE`` and NaN planes (the emulation's forced miss). Child pointers follow
section 1.4: separate running offsets for box children (type 5) and leaf children, each advanced
by ``range << 4`` (128 B units), so a child with range 0 shares its pointer with the next child of
the same kind ("child reuse").

Dequantization (section 1.5, exactly): ``value(q) = origin + Dq(q)``, ``Dq(0) = 0``;
``p = floor(log2 q)``, ``se = p - 12 + e``; ``Dq = 0`` when ``se <= 0`` (denormals flushed), else
the FP32 pattern ``(se << 23) | ((q << (23 - p)) & 0x7FFFFF)``. The add is an ordinary FP32 add
(round to nearest even, ``golden/fp32.add``). Min planes use ``q = qmin``, max planes
``q = qmax + 1``. (An exponent byte of 255 with ``se = 255`` yields an Inf/NaN pattern, as the bit
formula says; the encoder never writes it.)
"""

from fractions import Fraction

import numpy as np

from gpurtl.facts.fp32 import bits_f32, f32_bits
from gpurtl.facts.ray_accel import (
    BOX8_CHILDREN,
    BOX8_NODE_LAYOUT,
    CHILD_INFO_LAYOUT,
    CHILD_RANGE_SHIFT,
    INVALID_NODE,
    INVALID_OBB,
    NODE_DWORDS,
    NODE_TYPE_BOX8,
)
from gpurtl.golden import fp32

__all__ = [
    "dequant_offset",
    "dequantize",
    "decode_box8",
    "encode_box8",
    "quantize_axis",
    "decode_box4_fp32",
    "encode_box4_fp32",
    "decode_box4_fp16",
    "encode_box4_fp16",
    "f16_to_f32",
    "f32_to_f16",
    "round_f32",
    "INVALID_CHILD_DWORDS",
]

#: ChildInfo of an invalid child (gpurt ``gfx12/childInfo.hlsl``): qmin = 0xFFF, qmax = 0, type 0,
#: range 0.
INVALID_CHILD_DWORDS = (0xFFFFFFFF, 0x00000FFF, 0x00000000)
_NAN = fp32.CANONICAL_NAN


# --- exact helpers --------------------------------------------------------------------------------
def _frac(bits):
    """Exact Fraction of a finite FP32 pattern."""
    return Fraction(bits_f32(bits))


def round_f32(value, mode):
    """FP32 pattern of the exact rational ``value`` rounded ``mode`` ('down', 'up' or 'nearest').

    Overflow gives +-inf for 'nearest' and the directed modes that round away, FLT_MAX otherwise.
    """
    value = Fraction(value)
    candidate = np.float32(float(value))  # within one ulp of the exact value
    if mode == "nearest":
        # float(Fraction) is correctly rounded to float64; re-round exactly to be safe
        lo = (
            candidate
            if Fraction(float(candidate)) <= value or not np.isfinite(candidate)
            else np.nextafter(candidate, np.float32(-np.inf))
        )
        hi = np.nextafter(lo, np.float32(np.inf))
        if not np.isfinite(lo) or not np.isfinite(hi):
            return f32_bits(float(candidate))
        dl, dh = value - Fraction(float(lo)), Fraction(float(hi)) - value
        if dl < dh or (dl == dh and (f32_bits(float(lo)) & 1) == 0):
            return f32_bits(float(lo))
        return f32_bits(float(hi))
    if mode == "down":
        if np.isinf(candidate) and candidate > 0:
            candidate = np.float32(3.4028234663852886e38)
        while np.isfinite(candidate) and Fraction(float(candidate)) > value:
            candidate = np.nextafter(candidate, np.float32(-np.inf))
        return f32_bits(float(candidate))
    if mode == "up":
        if np.isinf(candidate) and candidate < 0:
            candidate = np.float32(-3.4028234663852886e38)
        while np.isfinite(candidate) and Fraction(float(candidate)) < value:
            candidate = np.nextafter(candidate, np.float32(np.inf))
        return f32_bits(float(candidate))
    raise ValueError(f"`mode` must be 'down', 'up' or 'nearest', not {mode!r}")


# --- dequantization (gpurt ``Math.hlsl`` ``Dequantize``) ------------------------------------------
def dequant_offset(exp, q):
    """``Dq(q)`` FP32 pattern(s) for an 8-bit exponent and plane value(s) ``q`` in 0..4096."""
    q = np.asarray(q, dtype=np.int64)
    exp = np.asarray(exp, dtype=np.int64)
    p = np.zeros(q.shape, dtype=np.int64)
    for k in range(1, 13):
        p = np.where(q >= (1 << k), k, p)
    se = p - 12 + exp
    mant = (np.left_shift(q, 23 - p)) & 0x7FFFFF
    bits = np.where((q == 0) | (se <= 0), 0, (se.clip(0, 255) << 23) | mant)
    return bits.astype(np.uint32)


def dequantize(origin, exp, q):
    """``origin + Dq(q)`` (FP32 add, RNE) as uint32 pattern(s)."""
    return np.asarray(
        fp32.add(np.asarray(origin, dtype=np.uint32), dequant_offset(exp, q)), dtype=np.uint32
    )


# --- BVH8 quantized node (gpurt ``gfx12/internalNode.hlsli``, ``childInfo.hlsl``) -----------------
def decode_box8(dwords):
    """Decode a 128 B BVH8 quantized box node (32 dwords); see the module doc string."""
    d = [int(x) & 0xFFFFFFFF for x in dwords]
    if len(d) != 32:
        raise ValueError(f"a BVH8 node has 32 dwords, not {len(d)}")
    node = {
        "internal_base": d[0],
        "leaf_base": d[1],
        "parent": d[2],
        "origin": d[3:6],
        "exp": [d[6] & 0xFF, (d[6] >> 8) & 0xFF, (d[6] >> 16) & 0xFF],
        "count": ((d[6] >> 28) & 7) + 1,
        "obb_index": d[7] & INVALID_OBB,
    }
    internal = (d[0] | NODE_TYPE_BOX8) & 0xFFFFFFFF
    prim = d[1]
    children = []
    for i in range(8):
        w0, w1, w2 = d[8 + 3 * i : 11 + 3 * i]
        child = {
            "qmin": [w0 & 0xFFF, (w0 >> 12) & 0xFFF, w1 & 0xFFF],
            "qmax": [(w1 >> 12) & 0xFFF, w2 & 0xFFF, (w2 >> 12) & 0xFFF],
            "cull_flags": (w0 >> 24) & 0xF,
            "mask": (w1 >> 24) & 0xFF,
            "type": (w2 >> 24) & 0xF,
            "range": (w2 >> 28) & 0xF,
            "valid": i < node["count"],
        }
        if child["valid"]:
            if child["type"] == NODE_TYPE_BOX8:
                child["ptr"] = internal
                internal = (internal + (child["range"] << CHILD_RANGE_SHIFT)) & 0xFFFFFFFF
            else:
                child["ptr"] = (prim | child["type"]) & 0xFFFFFFFF
                prim = (prim + (child["range"] << CHILD_RANGE_SHIFT)) & 0xFFFFFFFF
            child["min"] = [int(v) for v in dequantize(node["origin"], node["exp"], child["qmin"])]
            child["max"] = [
                int(v)
                for v in dequantize(node["origin"], node["exp"], [q + 1 for q in child["qmax"]])
            ]
        else:
            child["ptr"] = INVALID_NODE
            child["min"] = [_NAN] * 3
            child["max"] = [_NAN] * 3
        children.append(child)
    node["children"] = children
    return node


def _bits(value):
    return value if isinstance(value, (int, np.integer)) else f32_bits(value)


def quantize_axis(origin, extent_max, mins, maxs):
    """Exponent and 12-bit planes of one axis (gpurt ``Math.hlsl`` ``Dequantize`` encoder rules,
    gpurt ``Math.hlsl``).

    ``origin`` and the planes are FP32 patterns; ``extent_max`` the largest max plane of the axis.
    Returns ``(exp, qmins, qmaxs)``.
    """
    o = _frac(origin)
    extent = round_f32(_frac(extent_max) - o, "up")
    if (extent & 0x7F800000) == 0x7F800000 or extent > 0x7F000000:
        raise ValueError("a BVH8 node cannot span more than 2**127 on one axis")
    e = ((extent + 0x7FFFFF) >> 23) & 0xFF
    if e == 0:
        return 0, [0] * len(mins), [0] * len(maxs)
    e = max(13, e)
    rcp = Fraction(2) ** (139 - e)  # asfloat((254 - e + 12) << 23)
    qmins, qmaxs = [], []
    for lo, hi in zip(mins, maxs):
        a = _frac(round_f32(_frac(round_f32(_frac(lo) - o, "down")) * rcp, "down"))
        qmins.append(int(min(max(a.__floor__(), 0), 4095)))
        b = _frac(round_f32(_frac(round_f32(_frac(hi) - o, "up")) * rcp, "up"))
        qmaxs.append(int(min(max(-((-b).__floor__()), 1), 4096)) - 1)
    return e, qmins, qmaxs


def encode_box8(
    children,
    *,
    internal_base=0,
    leaf_base=0,
    parent=0xFFFFFFFF,
    obb_index=INVALID_OBB,
    index_in_parent=0,
    origin=None,
):
    """32 dwords of a BVH8 quantized box node.

    ``children``: 1..8 dictionaries with ``min``, ``max`` (3 floats or FP32 patterns each),
    ``type`` (5 = box, 0-3/8-11 triangle pair, 6 instance), optional ``range`` (default 1; 0 =
    reuse the pointer of the next child of the same kind), ``cull_flags`` (default 0) and
    ``mask`` (default 0xFF). ``internal_base``/``leaf_base`` are pointer-style offsets
    (byte offset >> 3, low 4 bits 0). ``origin`` defaults to the componentwise min of the mins
    (gpurt ``Math.hlsl`` ``Dequantize``). The decoded box of every child contains the given box
    (directed rounding).
    """
    if not 1 <= len(children) <= 8:
        raise ValueError(f"a BVH8 node has 1 to 8 children, not {len(children)}")
    if internal_base & 0xF or leaf_base & 0xF:
        raise ValueError("`internal_base` and `leaf_base` must have their low 4 bits clear")
    mins = [[_bits(v) for v in c["min"]] for c in children]
    maxs = [[_bits(v) for v in c["max"]] for c in children]
    for lo, hi in zip(mins, maxs):
        for a in range(3):
            if (
                fp32.unordered(lo[a], hi[a])
                or fp32.is_inf(lo[a])
                or fp32.is_inf(hi[a])
                or fp32.lt(hi[a], lo[a])
            ):
                raise ValueError("child boxes must be finite with min <= max")
    if origin is None:
        origin = [min((m[a] for m in mins), key=lambda b: _frac(b)) for a in range(3)]
    origin = [_bits(v) for v in origin]
    exps, qmin, qmax = [], [], []
    for a in range(3):
        top = max((m[a] for m in maxs), key=lambda b: _frac(b))
        if any(_frac(m[a]) < _frac(origin[a]) for m in mins):
            raise ValueError("`origin` must not exceed any child min")
        e, qlo, qhi = quantize_axis(origin[a], top, [m[a] for m in mins], [m[a] for m in maxs])
        exps.append(e)
        qmin.append(qlo)
        qmax.append(qhi)
    header = {
        "internal_base": internal_base & 0xFFFFFFFF,
        "leaf_base": leaf_base & 0xFFFFFFFF,
        "parent": parent & 0xFFFFFFFF,
        "origin": origin,
        "exp": exps,
        "index_in_parent": index_in_parent & 7,
        "count_minus_1": len(children) - 1,
        "obb_index": obb_index & INVALID_OBB,
    }
    infos = []
    for i in range(BOX8_CHILDREN):
        if i < len(children):
            c = children[i]
            infos.append(
                CHILD_INFO_LAYOUT.const(
                    {
                        "qmin_x": qmin[0][i],
                        "qmin_y": qmin[1][i],
                        "qmin_z": qmin[2][i],
                        "qmax_x": qmax[0][i],
                        "qmax_y": qmax[1][i],
                        "qmax_z": qmax[2][i],
                        "cull_flags": c.get("cull_flags", 0) & 0xF,
                        "mask": c.get("mask", 0xFF) & 0xFF,
                        "type": c["type"] & 0xF,
                        "range": c.get("range", 1) & 0xF,
                    }
                )
            )
        else:
            infos.append(
                CHILD_INFO_LAYOUT.from_bits(
                    sum(w << (32 * k) for k, w in enumerate(INVALID_CHILD_DWORDS))
                )
            )
    bits = BOX8_NODE_LAYOUT.const({"header": header, "children": infos}).as_bits()
    return [(bits >> (32 * k)) & 0xFFFFFFFF for k in range(NODE_DWORDS)]


# --- legacy BVH4 nodes (gpurt ``gfx10/BoxNode1_0.hlsli``, ``TriangleNode1_0.hlsli``) --------------
def decode_box4_fp32(dwords):
    """Legacy 128 B FP32 box node: ``children`` 4 x {ptr, min[3], max[3], cull_flags}.

    Per-child flags are the low 4 bits of the 8-bit flags at byte 112; the instance masks and OBB
    index at bytes 120/124 are not read (gpurt: "not used", gpurt ``gfx10/BoxNode1_0.hlsli``,
    ``TriangleNode1_0.hlsli``).
    """
    d = [int(x) & 0xFFFFFFFF for x in dwords]
    children = []
    for i in range(4):
        base = 4 + 6 * i
        children.append(
            {
                "ptr": d[i],
                "min": d[base : base + 3],
                "max": d[base + 3 : base + 6],
                "cull_flags": (d[28] >> (8 * i)) & 0xF,
            }
        )
    return {"children": children}


def encode_box4_fp32(children):
    """32 dwords of a legacy FP32 box node. ``children``: up to 4 dicts with ``ptr``, ``min``,
    ``max``, optional ``cull_flags``; missing children get ``INVALID_NODE`` and NaN boxes."""
    if len(children) > 4:
        raise ValueError(f"a BVH4 node has at most 4 children, not {len(children)}")
    d = [0] * 32
    for i in range(4):
        if i < len(children):
            c = children[i]
            d[i] = c["ptr"] & 0xFFFFFFFF
            d[4 + 6 * i : 10 + 6 * i] = [_bits(v) for v in c["min"]] + [_bits(v) for v in c["max"]]
            d[28] |= (c.get("cull_flags", 0) & 0xFF) << (8 * i)
        else:
            d[i] = INVALID_NODE
            d[4 + 6 * i : 10 + 6 * i] = [_NAN] * 6
    return d


def f16_to_f32(h):
    """Exact FP32 pattern of an FP16 pattern (subnormals become normal; NaN stays NaN)."""
    h = int(h) & 0xFFFF
    sign, exp, man = h >> 15, (h >> 10) & 0x1F, h & 0x3FF
    if exp == 0x1F:
        return (sign << 31) | 0x7F800000 | (man << 13)
    if exp == 0:
        if man == 0:
            return sign << 31
        shift = 0
        while not man & 0x400:
            man <<= 1
            shift += 1
        return (sign << 31) | ((127 - 15 + 1 - shift) << 23) | ((man & 0x3FF) << 13)
    return (sign << 31) | ((exp + 112) << 23) | (man << 13)


def f32_to_f16(bits, mode):
    """FP16 pattern of an FP32 pattern rounded ``mode`` ('down' or 'up'); used by the encoder."""
    value = _frac(bits)
    candidate = np.float16(float(value))
    step = np.float16(-np.inf) if mode == "down" else np.float16(np.inf)
    if np.isinf(candidate):
        candidate = np.float16(np.sign(float(candidate)) * 65504.0)
    while np.isfinite(candidate) and (
        Fraction(float(candidate)) > value if mode == "down" else Fraction(float(candidate)) < value
    ):
        candidate = np.nextafter(candidate, step)
    return int(candidate.view(np.uint16))


def decode_box4_fp16(dwords):
    """Legacy 64 B FP16 box node (first 16 dwords): ``children`` 4 x {ptr, min[3], max[3]} with
    the planes widened exactly to FP32; FP16 nodes carry no per-child flags."""
    d = [int(x) & 0xFFFFFFFF for x in dwords]
    children = []
    for i in range(4):
        w0, w1, w2 = d[4 + 3 * i : 7 + 3 * i]
        halves = [w0 & 0xFFFF, w0 >> 16, w1 & 0xFFFF, w1 >> 16, w2 & 0xFFFF, w2 >> 16]
        mn = [f16_to_f32(h) for h in halves[0:3]]
        mx = [f16_to_f32(h) for h in halves[3:6]]
        children.append({"ptr": d[i], "min": mn, "max": mx, "cull_flags": 0})
    return {"children": children}


def encode_box4_fp16(children):
    """32 dwords (the upper 16 zero) of a legacy FP16 box node; planes rounded outward."""
    if len(children) > 4:
        raise ValueError(f"a BVH4 node has at most 4 children, not {len(children)}")
    d = [0] * 32
    for i in range(4):
        if i < len(children):
            c = children[i]
            d[i] = c["ptr"] & 0xFFFFFFFF
            lo = [f32_to_f16(_bits(v), "down") for v in c["min"]]
            hi = [f32_to_f16(_bits(v), "up") for v in c["max"]]
        else:
            d[i] = INVALID_NODE
            lo, hi = [0x7E00] * 3, [0x7E00] * 3
        halves = lo + hi
        d[4 + 3 * i : 7 + 3 * i] = [
            halves[0] | halves[1] << 16,
            halves[2] | halves[3] << 16,
            halves[4] | halves[5] << 16,
        ]
    return d
