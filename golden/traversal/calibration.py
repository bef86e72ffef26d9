"""Calibration of the traversal runs' CU and memory model: every figure with its source.

Sources (public measurements; cited by title):

* [C&C-RT] Chips and Cheese, "RDNA 4's Raytracing Improvements" (2025): 3DMark DXR feature test
  counters on the RX 9070 (111.76G box, 19.61G triangle tests/s, 56 CUs) and RX 6900 XT (38.8G,
  10.76G, 80 CUs) at an assumed 2.5 GHz; RDNA 4's ray accelerator: 8 box or 2 triangle tests a
  cycle, RDNA 2/3: 4 box or 1 triangle; RDNA 4 SIMD register file 192 KB (1536 wave32 VGPRs).
* [C&C-R2] Chips and Cheese, "AMD's RDNA 2: Shooting For the Top" (RX 6900 XT, Cyberpunk 2077
  ray-tracing profile): 16 KB L0 per CU, 128 KB L1 per shader array, 4 MB L2, 128 MB Infinity
  Cache; longest DispatchRays: 96 VGPRs, 10 waves per SIMD, L0 hit rate just under 55%, L0+L1
  just under 73%, 95.4% through L2; LDS latency about 19.5 ns.
* [C&C-R3P] Chips and Cheese, "Latency Testing is Hard (RDNA 3 Power Saving)" (2023): RX 7900 XTX
  vector-path Infinity Cache latency 150.3 ns in the high power state.
* [AMD-9070] AMD Radeon RX 9070 specifications: 56 CUs, 64 MB Infinity Cache; Navi 48 L2 8 MB.
* [ROCm-specs] AMD ROCm documentation, "AMD GPU specifications" (``docs/reference/gpu-specs.rst``),
  Radeon table: RX 9070 family (RDNA 4, gfx1201): 32 KiB L0 vector cache per CU, graphics L1
  "N/A" (none; RDNA 3 lists 256 KiB), 8 MB L2, 64 MB Infinity Cache.

Figures with no public measurement found are marked CHOICE.
"""

from gpurtl.golden.cu import CuParams
from gpurtl.golden.memory import Level

__all__ = ["CALIBRATION", "rdna2_levels", "rdna2_params", "rdna4_levels", "rdna4_params"]

CLOCK_GHZ = 2.5  # [C&C-RT] the article's assumed clock

#: (figure, value, source) rows for the docs page and the report
CALIBRATION = [
    (
        "RDNA 4 L0 vector cache per CU",
        "32 KB, 128 B lines, 4-way (ways: CHOICE)",
        "[ROCm-specs] 32 KiB L0 vector cache (RX 9070 family)",
    ),
    ("RDNA 2 L0 vector cache per CU", "16 KB", "[C&C-R2]"),
    (
        "graphics L1 per shader array",
        "none (RDNA 4); 128 KB (RDNA 2)",
        "[ROCm-specs] RX 9070: N/A; [C&C-R2] RDNA 2",
    ),
    ("L2", "4 MB (RX 6900 XT), 8 MB (Navi 48)", "[C&C-R2], [AMD-9070], [ROCm-specs]"),
    (
        "Infinity Cache (MALL)",
        "128 MB (RX 6900 XT), 64 MB (RX 9070)",
        "[C&C-R2], [AMD-9070], [ROCm-specs]",
    ),
    ("L0 hit latency", "40 cycles", "CHOICE (no text figure found; C&C latency plots are charts)"),
    ("L1 hit latency (RDNA 2)", "+40 cycles (80 total)", "CHOICE"),
    (
        "L2 hit latency",
        "+140 cycles after L0 on RDNA 4 (no L1), +100 after L1 on RDNA 2 (180 total on both)",
        "CHOICE",
    ),
    (
        "Infinity Cache hit latency",
        "+196 cycles (376 total = 150.3 ns at 2.5 GHz)",
        "[C&C-R3P] RDNA 3 figure used for RDNA 4",
    ),
    ("DRAM latency", "+200 cycles (576 total)", "CHOICE"),
    ("LDS (stack) latency", "49 cycles = 19.5 ns at 2.5 GHz", "[C&C-R2] RDNA 2 LDS latency"),
    (
        "ray accelerator latency",
        "32 cycles",
        "CHOICE (no AMD figure public; the project's FPGA pipeline depth is not AMD's)",
    ),
    (
        "RA rate",
        "one BVH8 node (8 boxes) or one triangle pair a cycle (RDNA 4); one BVH4 node or one triangle (RDNA 2)",
        "[C&C-RT]",
    ),
    ("L0 bandwidth", "1 line (128 B) a cycle", "CHOICE"),
    (
        "L1 (RDNA 2)/L2/MALL/DRAM bandwidth per CU",
        "1/2, 1/4, 1/8, 1/16 line a cycle",
        "CHOICE (GPU totals shared by all CUs)",
    ),
    ("misses in flight", "L0 64, L1 64 (RDNA 2), L2 128, MALL 128", "CHOICE"),
    ("register file", "1536 VGPRs per SIMD (RDNA 4), 1024 (RDNA 2)", "[C&C-RT], [C&C-R2] 128 KB"),
    (
        "VGPRs: traversal / shading",
        "64 / 128",
        "CHOICE ([C&C-R2]: the RT kernel used 96 in one static allocation)",
    ),
    (
        "VALU cycles per loop iteration",
        "box 14, pair 40, instance 20; set-up 40; shading 160",
        "counted from gpurt TraceRay3_1.hlsl (HLSL statements, one VALU a cycle on wave32); shading: CHOICE",
    ),
]


def rdna4_levels(l0_kb=32):
    """RDNA 4's (RX 9070) hierarchy: the L0 (``l0_kb``), no graphics L1 ([ROCm-specs]), the
    8 MB L2, the 64 MB Infinity Cache, DRAM; latencies and bandwidths as :data:`CALIBRATION`."""
    return [
        Level("L0", l0_kb * 1024, 4, 40, 1.0, 64),
        Level("L2", 8 * 1024 * 1024, 16, 140, 0.25, 128),
        Level("MALL", 64 * 1024 * 1024, 16, 196, 0.125, 128),
        Level("DRAM", 0, 1, 200, 0.0625, 0),
    ]


def rdna2_levels(l0_kb=16):
    """RDNA 2's (RX 6900 XT): the L0, the 128 KB L1, the 4 MB L2, the 128 MB Infinity Cache, DRAM
    ([C&C-R2])."""
    return [
        Level("L0", l0_kb * 1024, 4, 40, 1.0, 64),
        Level("L1", 128 * 1024, 16, 40, 0.5, 64),
        Level("L2", 4 * 1024 * 1024, 16, 100, 0.25, 128),
        Level("MALL", 128 * 1024 * 1024, 16, 196, 0.125, 128),
        Level("DRAM", 0, 1, 200, 0.0625, 0),
    ]


def rdna4_params(**changes):
    """The default RDNA 4 (RX 9070) configuration."""
    base = CuParams(
        generation="gfx12",
        vgpr_mode="dynamic",
        rf_vgprs=1536,
        ra_latency=32,
        lds_latency=49,
        levels=rdna4_levels(),
    )
    return base.replace(**changes)


def rdna2_params(**changes):
    """An RDNA 2-like configuration (RX 6900 XT caches, static VGPRs, in-order returns); the
    loop is still the BVH8 loop (the memory and register sides are what changes)."""
    base = CuParams(
        generation="gfx11",
        vgpr_mode="static",
        rf_vgprs=1024,
        shade_vgprs=96,
        ra_latency=32,
        lds_latency=49,
        levels=rdna2_levels(),
    )
    return base.replace(**changes)
