"""Golden model of the STOC / opacity-micromap classification of one candidate triangle hit.

Facts used (Intel IGC ``IGC/AdaptorCommon/RayTracing/RTStackFormat.h``; Khronos Vulkan-Docs
``chapters/raytraversal.adoc`` "Ray Opacity Micromap"; Microsoft DirectX-Specs ``d3d/Raytracing.md``
"Opacity micromaps"):

* STOC1 (IGC ``QuadLeaf<Xe3>``): quad-leaf DW3 bits 5/6 = software-STOC flag of
  triangle 0/1, bits 11:8 / 15:12 = opaque / transparent planes of triangle 0, bits 27:24 /
  31:28 = opaque / transparent planes of triangle 1. Level 1 (4 sub-triangles).
* STOC3 (IGC ``QuadLeaf_STOC3``): per triangle a 64-bit fully-opaque and a 64-bit fully-transparent
  plane (inline level 3), a 64-bit address of the full-resolution bits, a level byte (4..12) and a
  software-STOC bit.
* Opacity micromaps (Vulkan ``VkOpacityMicromapFormatEXT``, ``VkMicromapTriangleEXT``): 2-state
  (1 bit) and 4-state (2 bits) formats (VkOpacityMicromapFormat 1 and 2), data packed LSB first,
  subdivision levels 0..12, states 0 transparent, 1 opaque, 2 unknown-transparent, 3 unknown-opaque,
  special indices -1..-4 = "fully" states 0..3.
* Flags (IGC ``RayFlags_Xe3``, ``MemRay<Xe3>``; equal to the Vulkan and DXR values): ray flag
  FORCE_2STATE 0x400, instance flags FORCE_2STATE 0x10 and DISABLE 0x20, internal ray flag
  DISABLE_STOC 0x8. Disable takes precedence over force-2-state (DXR).
* Result table (Vulkan ``raytraversal.adoc``): 0 -> ignore, 1 -> opaque, 2/3 -> any-hit; with
  force-2-state 2 -> ignore, 3 -> opaque. With data disabled or absent the geometry OPAQUE flag
  decides (opaque -> accept without any-hit, else any-hit).

Choices where the sources are silent (the STOC plane bit order and the Xe3 hardware behaviour per
state are not public), all parameters:

* ``plane_order`` (``"omm"``, default): bit ``i`` of a STOC plane is micro-triangle ``i`` in the
  standard curve order. ``"corners"``: every base-4 digit is permuted so that the bits run near-V0,
  near-V1, near-V2, middle (digit 0->0, 2->1, 3->2, 1->3).
* ``both_planes`` (``"uo"``, default): opaque and transparent bits both set mean unknown-opaque (the
  fourth code carries UO, so force-2-state can resolve unknowns both ways); neither bit set means
  unknown-transparent. Alternatives ``"ut"``, ``"opaque"``, ``"transparent"``.
* Software STOC: when the state is unknown and the action is any-hit, ``sw_fallback`` is set if the
  triangle's swstoc flag is set (IGC ``MemHit<Xe3>.needSWSTOC``). For STOC3 the block also returns
  the index at the leaf's level (4..12) and the address of the 32-bit word holding it, assuming the
  full-resolution bits are stored like a 4-state micromap (2 bits per micro-triangle, LSB first).
* Micromap data is fetched outside the block: the caller passes the 32-bit little-endian word at
  ``fetch_addr`` = ``addr + 4 * floor(index * bits_per_state / 32)``, and the state is the field
  at bit ``(index * bits_per_state) mod 32`` of that word.
* Misuse sets ``error`` and the hit is classified as if there were no opacity data: OMM format not
  1 or 2, OMM level above 12, OMM index below -5, or STOC3 with swstoc set and a level outside 4..12
  (the inline classification is kept in that last case). Index -5 (the cluster "disable OMM"
  value of DXR) means no opacity data, without error.
* Outputs that do not apply are 0 (index and level when no data is used; fine index, fine level and
  fetch address outside STOC3 / non-special OMM lookups).
"""

import numpy as np

from gpurtl.facts import stoc as facts

from .index import MAX_LEVEL, bary_to_index

__all__ = [
    "Source",
    "Action",
    "State",
    "RAY_FORCE_2STATE",
    "INSTANCE_FORCE_2STATE",
    "INSTANCE_DISABLE",
    "INTERNAL_DISABLE",
    "PLANE_ORDERS",
    "BOTH_PLANES",
    "stoc1_fields",
    "plane_position",
    "plane_state",
    "classify_arrays",
    "classify",
]


class Source:
    """Integer codes of :class:`gpurtl.facts.stoc.Source` (the models work on numpy arrays)."""

    NONE, STOC1 = facts.Source.NONE.value, facts.Source.STOC1.value
    STOC3, OMM = facts.Source.STOC3.value, facts.Source.OMM.value


class Action:
    """Integer codes of :class:`gpurtl.facts.stoc.Action`."""

    IGNORE, OPAQUE, ANYHIT = (
        facts.Action.IGNORE.value,
        facts.Action.OPAQUE.value,
        facts.Action.ANYHIT.value,
    )


class State:
    TRANSPARENT, OPAQUE, UNKNOWN_TRANSPARENT, UNKNOWN_OPAQUE = 0, 1, 2, 3


RAY_FORCE_2STATE = 0x400  # ray flag (IGC RayFlags_Xe3 FORCE_2STATE_STOC)
INSTANCE_FORCE_2STATE = 0x10  # instance flag (IGC FORCE_2STATE_STOC)
INSTANCE_DISABLE = 0x20  # instance flag (IGC DISABLE_STOC)
INTERNAL_DISABLE = 0x8  # IGC MemRay<Xe3>.internalRayFlags DISABLE_STOC

PLANE_ORDERS = ("omm", "corners")
BOTH_PLANES = {
    "uo": State.UNKNOWN_OPAQUE,
    "ut": State.UNKNOWN_TRANSPARENT,
    "opaque": State.OPAQUE,
    "transparent": State.TRANSPARENT,
}

# "corners" plane order: plane digit of each curve digit (near V0, middle, near V1, near V2)
_CORNER_DIGIT = np.array([0, 3, 1, 2], dtype=np.int64)


def stoc1_fields(dw3, tri):
    """(opaque plane, transparent plane, swstoc) of triangle ``tri`` from quad-leaf DW3."""
    dw3 = np.asarray(dw3, dtype=np.int64)
    tri = np.asarray(tri, dtype=np.int64)
    opaque = np.where(tri == 0, (dw3 >> 8) & 0xF, (dw3 >> 24) & 0xF)
    transp = np.where(tri == 0, (dw3 >> 12) & 0xF, (dw3 >> 28) & 0xF)
    swstoc = np.where(tri == 0, (dw3 >> 5) & 1, (dw3 >> 6) & 1)
    return opaque, transp, swstoc


def plane_position(index, level, plane_order="omm"):
    """Bit position of micro-triangle ``index`` (at ``level``) in a STOC plane."""
    if plane_order not in PLANE_ORDERS:
        raise ValueError(f"`plane_order` must be one of {PLANE_ORDERS}, not {plane_order!r}")
    index = np.asarray(index, dtype=np.int64)
    if plane_order == "omm":
        return index
    position = np.zeros_like(index)
    for k in range(level):
        position |= _CORNER_DIGIT[(index >> (2 * k)) & 3] << (2 * k)
    return position


def plane_state(opaque_bit, transp_bit, both_planes="uo"):
    """4-state value of one (opaque, transparent) bit pair."""
    if both_planes not in BOTH_PLANES:
        raise ValueError(f"`both_planes` must be one of {tuple(BOTH_PLANES)}, not {both_planes!r}")
    o = np.asarray(opaque_bit, dtype=np.int64)
    t = np.asarray(transp_bit, dtype=np.int64)
    return np.select(
        [(o == 1) & (t == 1), o == 1, t == 1],
        [BOTH_PLANES[both_planes], State.OPAQUE, State.TRANSPARENT],
        State.UNKNOWN_TRANSPARENT,
    )


def classify_arrays(f, *, frac_bits=24, plane_order="omm", both_planes="uo"):
    """Vectorized model: ``f`` maps input field names to equal-length arrays; returns a dict of
    int64 arrays (``fetch_addr`` uint64) with the output field names."""
    n = len(np.asarray(f["source"]))

    def get(name):
        return np.asarray(f[name], dtype=np.int64).reshape(n)

    source, u, v = get("source"), get("u"), get("v")
    level_in, omm_index, fmt = get("level"), get("omm_index"), get("omm_format")
    force2 = ((get("ray_flags") & RAY_FORCE_2STATE) != 0) | (
        (get("instance_flags") & INSTANCE_FORCE_2STATE) != 0
    )
    disabled = ((get("instance_flags") & INSTANCE_DISABLE) != 0) | (
        (get("internal_flags") & INTERNAL_DISABLE) != 0
    )
    addr = np.asarray(f["addr"], dtype=np.uint64).reshape(n)
    opaque64 = np.asarray(f["opaque"], dtype=np.uint64).reshape(n)
    transp64 = np.asarray(f["transp"], dtype=np.uint64).reshape(n)

    # the index at every level, each computed directly at its own level (the RTL instead shifts
    # one level-12 index; the lockstep check compares the two)
    idx = {k: bary_to_index(u, v, k, frac_bits) for k in range(MAX_LEVEL + 1)}

    def idx_at(levels):
        return np.choose(np.clip(levels, 0, MAX_LEVEL), [idx[k] for k in idx])

    is1, is3, isomm = source == Source.STOC1, source == Source.STOC3, source == Source.OMM
    live = ~disabled
    out = {
        k: np.zeros(n, dtype=np.int64)
        for k in (
            "action",
            "sw_fallback",
            "used",
            "state",
            "level",
            "index",
            "fine_level",
            "fine_index",
            "error",
        )
    }
    fetch = np.zeros(n, dtype=np.uint64)

    # STOC1
    o1, t1, sw1 = stoc1_fields(get("dw3"), get("tri"))
    pos1 = plane_position(idx[1], 1, plane_order)
    st1 = plane_state((o1 >> pos1) & 1, (t1 >> pos1) & 1, both_planes)
    # STOC3
    pos3 = plane_position(idx[3], 3, plane_order).astype(np.uint64)
    st3 = plane_state(
        ((opaque64 >> pos3) & np.uint64(1)).astype(np.int64),
        ((transp64 >> pos3) & np.uint64(1)).astype(np.int64),
        both_planes,
    )
    sw3 = get("swstoc") & 1
    fine3_ok = (level_in >= 4) & (level_in <= MAX_LEVEL)
    # OMM
    special = (omm_index < 0) & (omm_index >= -4)  # -5 is neither special, lookup nor error
    omm_bad = (omm_index < -5) | (
        (omm_index >= 0) & (((fmt != 1) & (fmt != 2)) | (level_in > MAX_LEVEL))
    )
    lookup = (omm_index >= 0) & ~omm_bad
    bpp = np.where(fmt == 2, 2, 1)
    omm_idx = idx_at(level_in)
    bitpos = (omm_idx * bpp) & 31
    word = get("omm_word")
    raw = (word >> bitpos) & np.where(bpp == 2, 3, 1)
    st_omm = np.where(special, -1 - omm_index, raw)

    used = live & (is1 | is3 | (isomm & (special | lookup)))
    state = np.select([is1, is3], [st1, st3], st_omm)
    state = np.where(used, state, 0)
    out["used"] = used.astype(np.int64)
    out["state"] = state
    out["level"] = np.where(
        used & is1, 1, np.where(used & is3, 3, np.where(used & isomm & lookup, level_in, 0))
    )
    out["index"] = np.where(
        used & is1,
        idx[1],
        np.where(used & is3, idx[3], np.where(used & isomm & lookup, omm_idx, 0)),
    )

    fine3 = live & is3 & fine3_ok
    fineomm = live & isomm & lookup
    out["fine_level"] = np.where(fine3 | fineomm, level_in, 0)
    out["fine_index"] = np.where(fine3 | fineomm, omm_idx, 0)
    word_bytes = np.where(fine3, (omm_idx >> 4) * 4, ((omm_idx * bpp) >> 5) * 4)
    fetch = np.where(fine3 | fineomm, addr + word_bytes.astype(np.uint64), np.uint64(0))

    effective = np.where(
        force2 & (state == State.UNKNOWN_TRANSPARENT),
        State.TRANSPARENT,
        np.where(force2 & (state == State.UNKNOWN_OPAQUE), State.OPAQUE, state),
    )
    from_data = np.select(
        [effective == State.TRANSPARENT, effective == State.OPAQUE],
        [Action.IGNORE, Action.OPAQUE],
        Action.ANYHIT,
    )
    from_geometry = np.where(get("geom_opaque") & 1, Action.OPAQUE, Action.ANYHIT)
    out["action"] = np.where(used, from_data, from_geometry)
    swstoc = np.where(is1, sw1, sw3)
    out["sw_fallback"] = (
        used & (is1 | is3) & (out["action"] == Action.ANYHIT) & (swstoc == 1)
    ).astype(np.int64)
    out["error"] = (live & ((isomm & omm_bad) | (is3 & (sw3 == 1) & ~fine3_ok))).astype(np.int64)
    out["fetch_addr"] = fetch
    return out


def classify(tx, *, frac_bits=24, plane_order="omm", both_planes="uo"):
    """One transaction: input dict -> output dict (plain ints)."""
    arrays = {
        k: np.array([int(v)], dtype=np.uint64 if k in ("addr", "opaque", "transp") else np.int64)
        for k, v in tx.items()
    }
    out = classify_arrays(
        arrays, frac_bits=frac_bits, plane_order=plane_order, both_planes=both_planes
    )
    return {k: int(v[0]) for k, v in out.items()}
