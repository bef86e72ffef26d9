"""Sub-triangle opacity culling (Xe3 STOC) and opacity micromaps: codes and payload layouts.

Shared by the RTL (:mod:`gpurtl.hdl.stoc`), the golden models (:mod:`gpurtl.golden.stoc`) and the
tests. The leaf fields come from IGC ``visa/include/RTStackFormat.h`` (``QuadLeaf<Xe3>``,
``QuadLeaf_STOC3``, ``MemHit``, ``MemRay``); the opacity-micromap fields and states from the Vulkan
specification (``VK_EXT_opacity_micromap``, chapter "Ray Opacity Micromap"). The full decoding rules
and the choices made where the sources are silent are in :mod:`gpurtl.golden.stoc.classify`.
"""

from amaranth.hdl import signed
from amaranth.lib import data, enum

from gpurtl.facts.fp32 import Float32

__all__ = [
    "MAX_LEVEL",
    "Source",
    "Action",
    "stoc_in_layout",
    "stoc_out_layout",
    "omm_index_in_layout",
    "omm_index_out_layout",
]

#: Largest micromap subdivision level (DXR
#: ``D3D12_RAYTRACING_OPACITY_MICROMAP_OC1_MAX_SUBDIVISION_LEVEL``; also the top of the Xe3 STOC3
#: level range 4..12).
MAX_LEVEL = 12


class Source(enum.Enum, shape=2):
    """Where the opacity data of the hit triangle comes from."""

    NONE = 0  #: no opacity data: the geometry OPAQUE flag decides
    STOC1 = 1  #: Xe3 64-byte quad leaf, level-1 planes in DW3
    STOC3 = 2  #: Xe3 128-byte quad leaf, level-3 inline planes + pointer/level
    OMM = 3  #: opacity micromap (2- or 4-state array, or a special index)


class Action(enum.Enum, shape=2):
    """What traversal does with the candidate hit."""

    IGNORE = 0  #: drop the candidate, continue traversal, no any-hit shader
    OPAQUE = 1  #: accept as an opaque hit (commit, shorten the ray), no any-hit shader
    ANYHIT = 2  #: non-opaque: run the any-hit shader (or return the candidate to a ray query)


stoc_in_layout = data.StructLayout(
    {
        "source": Source,
        "tri": 1,  # STOC1: triangle 0 or 1 of the quad leaf
        "u": Float32,  # barycentric weight of vertex 1
        "v": Float32,  # barycentric weight of vertex 2
        "dw3": 32,  # STOC1: quad-leaf DW3
        "opaque": 64,  # STOC3: fullyOpaqueBitsN
        "transp": 64,  # STOC3: fullyTransparentBitsN
        "swstoc": 1,  # STOC3: bit 0 of byte 0x69 / 0x79
        "level": 16,  # STOC3: stocN_level byte (4..12); OMM: subdivisionLevel (0..12)
        "addr": 64,  # STOC3: stocN_addr; OMM: address of the triangle's micromap data
        "omm_index": signed(32),  # OMM: index buffer entry (-1..-4 special, -5 no OMM, >= 0 lookup)
        "omm_format": 16,  # OMM: 1 = 2-state, 2 = 4-state (VkOpacityMicromapFormat)
        "omm_word": 32,  # OMM: the 32-bit little-endian data word at `fetch_addr`
        "geom_opaque": 1,  # geometry OPAQUE flag (QuadLeaf DW1 bit 30)
        "ray_flags": 16,  # ray flags (FORCE_2STATE = 0x400)
        "instance_flags": 8,  # instance flags (FORCE_2STATE = 0x10, DISABLE = 0x20)
        "internal_flags": 8,  # internal ray flags (DISABLE_STOC = 0x8)
    }
)

stoc_out_layout = data.StructLayout(
    {
        "action": Action,
        "sw_fallback": 1,  # MemHit.needSWSTOC: the any-hit shader must run the SW STOC test
        "used": 1,  # opacity data decided the classification
        "state": 2,  # 4-state value found (before force-2-state), 0 if not used
        "level": 4,  # level of `index`
        "index": 24,  # micro-triangle index used for the lookup
        "fine_level": 4,  # STOC3 full-resolution level / OMM level
        "fine_index": 24,  # index at `fine_level`
        "fetch_addr": 64,  # address of the 32-bit word holding the fine state
        "error": 1,  # misuse (see the golden model); hit classified without data
    }
)

omm_index_in_layout = data.StructLayout(
    {
        "u": Float32,
        "v": Float32,
        "level": 4,
    }
)

omm_index_out_layout = data.StructLayout(
    {
        "index": 24,
        "error": 1,  # level above 12 (index is then 0)
    }
)
