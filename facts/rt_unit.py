"""The RT unit's build parameters, shared by the RTL (:mod:`gpurtl.hdl.rt_unit`), the golden models
(:mod:`gpurtl.golden.rt_unit`) and the registry (``sim/blocks/rt_unit.py``): the L0 geometry as
one bundle, :class:`L0Geometry`, and the defaults of the node fetch and the RT unit top.

The default L0 is small so the smoke tests stay quick; the RDNA 4-size build is the preset
:data:`RDNA4_RT_UNIT` (32 KB L0, 32 waves, 2 engines x 4 boxes), each value cited or marked as a
choice. The small defaults are choices, not measurements.
"""

from dataclasses import dataclass, fields, replace

__all__ = [
    "DUAL_EMPTY_NODE",
    "DUAL_EMPTY_PTR",
    "FETCH_ORDER",
    "FETCH_TAG_BITS",
    "L0Geometry",
    "LINE_BITS",
    "LINE_BYTES",
    "MAX_BEATS",
    "MAX_WAVE_TAG_BITS",
    "ORDERS",
    "PRESETS",
    "RDNA4_RT_UNIT",
    "REPLACEMENTS",
    "WAVE_TAG_BITS",
]

#: Bytes of one L0 line: one BVH8 node (gpurt's 128-byte box node).
LINE_BYTES = 128
#: Bits of one line.
LINE_BITS = 8 * LINE_BYTES
#: Most transfers a line may take on the fill port (32-bit beats).
MAX_BEATS = 32
#: Replacement policies: true least recently used, or tree pseudo-LRU (``ways - 1`` bits a set).
REPLACEMENTS = ("lru", "plru")
#: Node fetch output orders: the L0's response order, or in order within each wave (tag).
ORDERS = ("l0", "wave")
#: The node fetch's defaults: a 4-bit tag, each tag's instructions leaving in order.
FETCH_TAG_BITS = 4
FETCH_ORDER = "wave"
#: The dual instruction's unused second node (``image_bvh_dual_intersect_ray`` on one legacy node):
#: pointer 0x5 names a box node at byte 0 of the BVH, the header, never a node, so the node fetch
#: does not fetch it and hands on :data:`DUAL_EMPTY_NODE` instead (CHOICE: the traversal loop's
#: encoding, as the golden ray accelerator has no single-node legacy form; no public figure says
#: what RDNA 4 fetches for it).
DUAL_EMPTY_PTR = 0x5
#: The 32 dwords of the empty second node: four ``INVALID_NODE`` children with NaN boxes.
DUAL_EMPTY_NODE = (0xFFFFFFFF,) * 4 + (0x7FC00000,) * 24 + (0,) * 4
#: The RT unit top's default: ``2 ** 2`` waves.
WAVE_TAG_BITS = 2
#: Most wave tag bits of the RT unit top: 32 waves, an RDNA 4 CU's (2 SIMDs x 16 wave slots).
MAX_WAVE_TAG_BITS = 5

#: The RDNA 4-size RT unit (``gpurtl check rt_unit -p preset=rdna4``): each value with its
#: source, or marked CHOICE where no public figure was found.
RDNA4_RT_UNIT = {
    # AMD ROCm documentation, "AMD GPU specifications" (docs/reference/gpu-specs.rst), Radeon
    # table: 32 KiB L0 vector cache per CU on the RX 9070 family (RDNA 4, gfx1201).
    "size": 32 * 1024,
    # CHOICE: 4 ways (no public figure; the CU model's RDNA 4 L0 uses the same).
    "ways": 4,
    # CHOICE: 32 lines missing at once, one per wave of the 32 (no public figure).
    "mshrs": 32,
    # CHOICE: 8 requests merged into a miss (the lanes of a wave that meet the same node).
    "targets": 8,
    # CHOICE: 2 ** 6 = 64 ray buffer slots, two lanes in flight for each of the 32 waves.
    "id_bits": 6,
    # CHOICE: node lines of a 128 MiB address range (the 56k-triangle bunny's BVH8 takes
    # about 4 MiB).
    "line_bits": 20,
    # CHOICE: true LRU, whole-line fills.
    "replacement": "lru",
    "beats": 1,
    # 32 waves: an RDNA 4 CU has 2 SIMDs of 16 wave slots (the CU model's `slots_per_simd`;
    # RDNA 2's 16 slots a SIMD: Chips and Cheese, "AMD's RDNA 2: Shooting For the Top").
    "tag_bits": MAX_WAVE_TAG_BITS,
    # Chips and Cheese, "RDNA 4's Raytracing Improvements" (2025): 8 box tests or 2 triangle
    # tests a cycle per ray accelerator, in two engines: 2 engines x 4 boxes, one BVH8 node a
    # cycle (initiation interval 1), with the triangle-pair path.
    "engines": 2,
    "boxes_per_engine": 4,
    "triangles": True,
    # CHOICE: no OBB or instance transforms in the build (the BLAS loop does not need them;
    # `-p transforms=1` adds them), no flush of subnormals, the project's shallow FP32 cores.
    "transforms": False,
    "ftz": False,
    "fp": "shallow",
}
#: The RT unit top's named builds (``preset`` parameter; ``none``: the defaults).
PRESETS = {"none": {}, "rdna4": RDNA4_RT_UNIT}


def _positive(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer, not {value!r}")


@dataclass(frozen=True)
class L0Geometry:
    """The L0 vector cache's build: what the L0, the node fetch and the RT unit top share.

    Parameters
    ----------
    size : int
        Bytes; a multiple of ``128 * ways`` giving a power-of-two number of sets.
    ways : int
        Associativity, a power of two.
    mshrs : int
        Miss-status registers: lines missing at once (outstanding misses).
    targets : int
        Requests one miss register holds (the miss and the pending hits merged into it).
    id_bits : int
        Width of the request id carried to the response (the node fetch has ``2 ** id_bits``
        ray buffer slots).
    line_bits : int
        Width of a line index (byte address / 128); more than the set index bits.
    replacement : str
        ``"lru"`` (true LRU) or ``"plru"`` (tree pseudo-LRU); the rules are in
        :mod:`gpurtl.golden.rt_unit.l0_cache`.
    beats : int
        Transfers a line takes on the fill port, each of ``1024 / beats`` bits: a power of two
        up to ``MAX_BEATS``; 1 moves the whole line at once.
    hints : bool
        Requests carry a GFX12 load temporal hint ``th`` and a ``scope``
        (:mod:`gpurtl.facts.memory_hints`), which the L0 follows as
        :mod:`gpurtl.golden.rt_unit.l0_cache` says; ``False`` (the default) builds the L0 with
        neither field, every request regular at CU scope.

    Raises
    ------
    ValueError
        For a geometry the RTL cannot build, one line naming the field.
    """

    size: int = 2048
    ways: int = 4
    mshrs: int = 4
    targets: int = 4
    id_bits: int = 4
    line_bits: int = 16
    replacement: str = "lru"
    beats: int = 1
    hints: bool = False

    def __post_init__(self):
        ways, size = self.ways, self.size
        if not isinstance(ways, int) or ways < 1 or ways & (ways - 1):
            raise ValueError(f"`ways` must be a power of two, not {ways!r}")
        if not isinstance(size, int) or size <= 0 or size % (LINE_BYTES * ways):
            raise ValueError(f"`size` must be a positive multiple of 128 x ways, not {size!r}")
        if self.sets & (self.sets - 1):
            raise ValueError(
                f"`size` must make a power-of-two number of sets, not {self.sets} sets"
            )
        for name in ("mshrs", "targets", "id_bits"):
            _positive(name, getattr(self, name))
        if not isinstance(self.line_bits, int) or self.line_bits <= self.set_bits:
            raise ValueError(
                f"`line_bits` must be an integer above the {self.set_bits} set index bits, "
                f"not {self.line_bits!r}"
            )
        if self.replacement not in REPLACEMENTS:
            raise ValueError(
                f"`replacement` must be one of {', '.join(REPLACEMENTS)}, not {self.replacement!r}"
            )
        beats = self.beats
        if not isinstance(beats, int) or not 1 <= beats <= MAX_BEATS or beats & (beats - 1):
            raise ValueError(f"`beats` must be a power of two up to {MAX_BEATS}, not {beats!r}")
        if self.hints not in (False, True, 0, 1):
            raise ValueError(f"`hints` must be a boolean, not {self.hints!r}")

    @property
    def sets(self):
        return self.size // (LINE_BYTES * self.ways)

    @property
    def beat_bits(self):
        """Bits of one fill transfer."""
        return LINE_BITS // self.beats

    @property
    def set_bits(self):
        """Bits of a set index (0 for one set)."""
        return (self.sets - 1).bit_length()

    @property
    def way_bits(self):
        """Bits of a way index (0 for one way)."""
        return (self.ways - 1).bit_length()

    @classmethod
    def names(cls):
        """The field names, in order."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def of(cls, geometry=None, **overrides):
        """``geometry`` (default: the default geometry) with ``overrides`` (field values)."""
        geometry = cls() if geometry is None else geometry
        if not isinstance(geometry, cls):
            raise TypeError(f"`geometry` must be an L0Geometry, not {geometry!r}")
        return replace(geometry, **overrides) if overrides else geometry

    @classmethod
    def split(cls, params):
        """``(geometry, rest)`` of a parameter dictionary: the geometry's fields, the others."""
        names = cls.names()
        geometry = cls(**{k: v for k, v in params.items() if k in names})
        return geometry, {k: v for k, v in params.items() if k not in names}
